"""Plan -> environment: the executor carries out a plan's steps, in order, transactionally.

Every step works on a new environment beside the user's one, and runs the commands the
plan shows, with the new environment's path put in for the placeholder; what a step does
around its commands depends on its kind (handlers.py's, and the route's own). Before the
first step, noop.py decides whether the user's environment already satisfies the plan. Only
the last step switches the user's path to the new environment. A failed step, a Ctrl-C or
a kill leave the previous environment exactly as it was (failed_evidence.py keeps what the
doctor found).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from jetson_install.base.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, JetsonInstallError, StepFailed
from jetson_install.base.layout import EVIDENCE_FILE, STATE_DIR
from jetson_install.base.steps import Step, StepResult
from jetson_install.catalog.identity import Resolution
from jetson_install.envs.activation import activate_command
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.interpreters import Interpreter
from jetson_install.envs.record import installed_versions
from jetson_install.envs.source_identity import Sources
from jetson_install.planning.rerun import Rerun
from jetson_install.planning.plan import Plan, resolved_plan
from jetson_install.running.execution import Run, StepHandler
from jetson_install.running.noop import decide, plan_fingerprint, sources_of
from jetson_install.running.prepared import Prepared, check, prepare, read_vendor_set, set_line, vendor_step_failure
from jetson_install.tools.progress import Display

__all__ = ["InstallResult", "install"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class InstallResult:
    """What an install did: its outcome, each step's result, and where its evidence is."""

    status: str  # installed | unchanged | failed | interrupted
    venv: str
    environment: Optional[str]
    interpreter: Optional[str]
    steps: Tuple[StepResult, ...]
    installed: Dict[str, str] = field(default_factory=dict)
    evidence: Optional[str] = None
    failed_step: Optional[str] = None
    message: str = ""
    fix: Optional[str] = None
    warnings: Tuple[str, ...] = ()
    resolved: Optional[Plan] = None  # the plan as carried out (the set the index resolved to)
    removed: Tuple[Tuple[str, int], ...] = ()  # what killed runs had left, and the bytes it took, removed by this one
    damaged: Tuple[str, ...] = ()  # how the previous environment's vendor packages had changed (swapped, files gone): why it is rebuilt

    @property
    def exit_code(self) -> int:
        return {"failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}.get(self.status, EXIT_OK)

    def to_json(self, plan: Plan) -> Dict[str, Any]:
        plan = self.resolved or plan
        return {
            "schema_version": SCHEMA_VERSION,
            "command": plan.target.id,
            "status": self.status,
            "exit_code": self.exit_code,
            "venv": self.venv,
            "environment": self.environment,
            "activate": activate_command(self.venv),
            "python": self.interpreter,
            "channel": plan.channel.id if plan.channel else None,
            "route": plan.route.name,
            "profile": plan.route.profile.name,
            "vendor_index": plan.vendor_location,
            "pins": dict(plan.pins),
            "resolution": plan.resolution.to_json() if plan.resolution else None,
            "lock": plan.route.describe().get("lock"),
            "installed": self.installed,
            "evidence": self.evidence,
            "plan_steps": [step.to_json() for step in plan.steps],
            "steps": [step.to_json() for step in self.steps],
            "error": {"step": self.failed_step, "message": self.message, "fix": self.fix} if self.failed_step else None,
            "warnings": list(self.warnings),
            "removed_leftovers": [{"path": path, "bytes": size} for path, size in self.removed],
            "damaged": list(self.damaged),
        }


def install(plan: Plan, progress: Display, rerun: Rerun, upgrade: bool = False) -> InstallResult:
    """Carry out `plan`, as prepared.py prepares it. Never raises for a failing step: the result
    says what failed.

    The vendor set is the environment's recorded resolution while the catalog's policy is
    unchanged (no request to any index), else (or with `upgrade`) resolved from the index.
    """
    assert plan.supported
    run = Run(plan, progress, rerun)
    try:
        checked = check(plan, dry_run=False, rerun=rerun)
    except StepFailed as failure:
        return _failed(plan, run, None, "failed", failure.step, failure.message, failure.fix)
    run.warnings.extend(checked.warnings)
    run.plan = checked.plan
    home = checked.home
    with home.lock():
        try:
            # The environment at DIR is read under the lock: no other run switches it meanwhile.
            return _install_locked(prepare(checked, rerun, upgrade, read_index=False), home, run)
        finally:
            home.forget_if_empty()  # still holding the lock, so no other run is using DIR.d


class _IndexRead:
    """The vendor index's listings, read and chosen from on a thread of its own (as
    prepared.read_vendor_set reads them): a first install makes its environment meanwhile (`uv
    venv` needs no vendor set), which hides the read behind it. A daemon thread: an interrupted
    run does not wait for its connections."""

    def __init__(self, plan: Plan, interpreter: Interpreter, rerun: Rerun) -> None:
        self._outcome: List[Any] = []

        def read() -> None:
            try:
                # The interpreter's own Python decides the files, whatever the channel's is.
                self._outcome.append(read_vendor_set(plan, interpreter.abi, rerun))
            except BaseException as exc:  # handed to the thread that waits for it
                self._outcome.append(exc)

        # sysconfig's first read is not thread-safe before Python 3.12
        # (https://github.com/python/cpython/issues/92452): the reader's wheel tags and the steps
        # that run meanwhile (uv's binary, found through sysconfig) would both be first, and one
        # got EXE as None. Read once here, before there is a second thread.
        import sysconfig  # only where the index is read: a no-op re-run needs none of it

        sysconfig.get_config_vars()
        self._thread = threading.Thread(target=read, name="vendor-index", daemon=True)
        self._thread.start()

    def resolution(self) -> Resolution:
        self._thread.join()
        outcome = self._outcome[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]


def _index_set(plan: Plan, run: Run, reading: _IndexRead) -> Plan:
    """The plan with the set the index read chose; a failure is the vendor step's, with its fixes,
    and so is a Ctrl-C (or SIGTERM) while the run waits for it: the step before it has ended."""
    run.step_id = "vendor"
    try:
        resolution = reading.resolution()
    except JetsonInstallError as exc:
        raise vendor_step_failure(exc) from None
    run.progress(set_line(resolution))
    return resolved_plan(plan, resolution)


def _install_locked(prepared: Prepared, home: EnvironmentHome, run: Run) -> InstallResult:
    """The whole install, under the lock on DIR.d."""
    plan, current, interpreter = prepared.plan, prepared.current, prepared.interpreter
    existing = current.path if current is not None else None
    reading: Optional[_IndexRead] = None
    if prepared.note:
        run.progress(prepared.note)
    if prepared.index_unread:
        reading = _IndexRead(plan, interpreter, run.command)
        if current is not None:
            # The no-op decision needs the set; a first install has no environment to be a
            # no-op against, so it makes the environment meanwhile, and the first step that
            # needs the set waits for it.
            try:
                plan, reading = _index_set(plan, run, reading), None
            except StepFailed as failure:
                return _failed(plan, run, interpreter, "failed", failure.step, failure.message, failure.fix)
    run.plan = plan
    run.warnings.extend(w for w in plan.warnings if w not in run.warnings)
    sources = sources_of(plan)
    # Before the no-op test too: a run killed while building a different plan left its
    # environment, and a re-run of the old command must not keep it growing the disk.
    for path, size in home.prune(keep=[existing, home.previous()]):
        run.removed.append((str(path), size))
        run.progress(f"removed {path}, left by a killed or interrupted run ({size / 1e6:.1f} MB)")
    if current is not None:
        decision = decide(plan, current, interpreter, sources)
        if decision.damaged:
            run.progress(f"{decision.reason}; building a new environment with the recorded builds")
            run.damaged.extend(decision.damaged)
        elif not decision.changes:
            run.progress(f"{decision.reason}; nothing to do")
            return InstallResult("unchanged", plan.venv, str(current.path), interpreter.path, (),
                                 dict(decision.installed), _evidence_path(current.path),
                                 warnings=tuple(run.warnings), resolved=plan, removed=tuple(run.removed))
    # What a build needs from here on, imported once there is one to make (a no-op re-run never is).
    from jetson_install.envs.failed_evidence import discard

    staging = home.new_environment_path()
    sources.read_local()  # a local tree is read before building writes into it
    try:
        _execute(home, staging, interpreter, sources, run, reading)
        # From here on the new environment is the user's; nothing may remove it (the switch
        # step removed the older ones).
        installed = {**run.plan.route.kept(), **installed_versions(staging)}
    except StepFailed as failure:
        kept = discard(home, staging, str(run.command))
        return _failed(run.plan, run, interpreter, "failed", failure.step, failure.message, failure.fix, kept)
    except KeyboardInterrupt:
        step = run.step_id or "start"  # the step it ran, or the one whose vendor set it waited for
        if home.current() == staging:
            # After the switch: the new environment is in place and stays; what the
            # clean-up had not removed yet is removed by the next run.
            return InstallResult(
                "interrupted", plan.venv, str(staging), interpreter.path, tuple(run.results),
                failed_step="clean-up", message=f"interrupted after the switch: {plan.venv} is the new environment, "
                                                "ready to use; old environments are removed by the next run",
                fix=f"nothing is needed; to finish the clean-up now, run: {run.command}", warnings=tuple(run.warnings))
        discard(home, staging, str(run.command))
        return _failed(run.plan, run, interpreter, "interrupted", step, f"interrupted during step '{step}'",
                       f"run it again: {run.command}")
    return InstallResult("installed", plan.venv, str(staging), interpreter.path, tuple(run.results), installed,
                         _evidence_path(Path(plan.venv)), warnings=tuple(run.warnings), resolved=run.plan,
                         removed=tuple(run.removed), damaged=tuple(run.damaged))


#: The step kinds that run the same whatever the vendor set: they need not wait for the index.
_NO_VENDOR_SET = ("interpreter", "venv")


def _execute(home: EnvironmentHome, staging: Path, interpreter: Interpreter, sources: Sources, run: Run,
             reading: Optional[_IndexRead] = None) -> Optional[Path]:
    """Run the plan's steps into `staging`, then switch the user's path to it; return the
    environment it replaced. A step may learn what the rest of the plan needs (the versions it
    installed, the companions' hashes): the rest runs from the plan as it then stands; so does
    the vendor set of an index still being read (`reading`), before the first step that needs it."""
    # Here, not with the module: a no-op re-run (what most runs are) never runs a step, so it
    # never loads the steps' handlers and the doctor they run.
    from jetson_install.running.handlers import doctor, shared_handlers

    run.start(staging)
    handlers: Dict[str, StepHandler] = {**shared_handlers(interpreter), **run.plan.route.handlers()}
    previous: List[Optional[Path]] = []

    def record_and_doctor(step: Step, execution: Run) -> str:
        # The doctor reads what the environment was made from (a kept stack, a preflight profile).
        # The command (and where it ran, for its relative paths) is what `add` makes the next one from.
        home.record_plan(staging, {**plan_fingerprint(run.plan, interpreter), **sources.record(),
                                   "target": run.plan.target.id, "command": list(run.rerun.argv),
                                   "cwd": _working_folder()})
        return doctor(step, execution)

    def switch(step: Step, execution: Run) -> str:
        home.mark_complete(staging)
        previous.append(home.switch_to(staging))
        said = f"{home.link} -> {staging}" + (f" (previous kept at {previous[0]})" if previous[0] else "")
        # The environments older than the one replaced go here, inside the step the user watches:
        # removing one takes seconds. Each is renamed away first, so a kill leaves a .removing-*
        # folder the next run removes, never the new or the previous environment.
        kept = {path.resolve() for path in (staging, previous[0]) if path is not None}
        older = [path.name for path in home.environments() if path.resolve() not in kept]
        home.prune(keep=[staging, previous[0]])
        return said + (f"; removed the older {', '.join(older)}" if older else "")

    handlers.update({"doctor": record_and_doctor, "switch": switch})
    for number in range(len(run.plan.steps)):
        if reading is not None and run.plan.steps[number].kind not in _NO_VENDOR_SET:
            run.learned(_index_set(run.plan, run, reading))
            run.warnings.extend(w for w in run.plan.warnings if w not in run.warnings)
            reading = None
        step = run.plan.steps[number].bound(run.plan.staging, str(staging))
        run.step(step, handlers[step.kind])
    return previous[0] if previous else None


def _working_folder() -> Optional[str]:
    """Where the command runs; None when that folder was removed under it."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _evidence_path(environment: Path) -> Optional[str]:
    path = environment / STATE_DIR / EVIDENCE_FILE
    return str(path) if path.is_file() else None


# -- after a failure ----------------------------------------------------------------------------------


def _failed(plan: Plan, run: Run, interpreter: Optional[Interpreter], status: str, step: str, message: str,
            fix: Optional[str], evidence: Optional[str] = None) -> InstallResult:
    kept = f"{plan.venv} is unchanged" if Path(plan.venv).is_symlink() else f"no environment was made at {plan.venv}"
    return InstallResult(status, plan.venv, None, interpreter.path if interpreter else None, tuple(run.results),
                         evidence=evidence, failed_step=step,
                         message=f"{message} ({kept})", fix=fix or f"fix the cause above, then run: {run.command}",
                         warnings=tuple(run.warnings), resolved=plan, removed=tuple(run.removed),
                         damaged=tuple(run.damaged))
