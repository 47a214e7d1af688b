"""Plan -> environment: the executor carries out a plan's steps, in order, transactionally.

Every step works on a new environment beside the user's one, and runs the commands the
plan shows, with the new environment's path put in for the placeholder; what a step does
around its commands depends on its kind (the handlers below, and the route's own). Only
the last step switches the user's path to the new environment. A failed step, a Ctrl-C or
a kill leave the previous environment exactly as it was.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install.board.platform_data import ubuntu_glibc
from jetson_install.catalog.catalog import load_catalog
from jetson_install.doctor import GPU_FREE_CHECKS
from jetson_install.doctor.on_environment import doctor_environment
from jetson_install.planning.bitsandbytes_source import CUDA_HOME
from jetson_install.running.bitsandbytes_build import find_toolchain, run_build_step
from jetson_install.tools import index, runner, uv
from jetson_install.envs.environment import (
    EnvironmentHome, protect, write_additions, write_constraints, write_requirements,
)
from jetson_install.envs.failed_evidence import discard, kept_evidence
from jetson_install.base.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, JetsonInstallError, StepFailed
from jetson_install.planning.fixes import (
    Rerun,
    StepContext,
    fix_for_os_error,
    fix_for_uv_failure,
    index_down_fix,
    other_python_fix,
    os_error_reason,
    repository_of,
    vendor_missing_fix,
)
from jetson_install.catalog.identity import Companion, NoBuildForPython, NothingInPolicy, Resolution
from jetson_install.envs.record import distributions_state, installed_versions, record_installed
from jetson_install.envs.interpreters import Interpreter, choose_interpreter, pip_check, served_interpreter
from jetson_install.base.layout import (
    CHECKED_FILE, COMPANIONS_FILE, COMPANIONS_INPUT, EVIDENCE_FILE, REQUIREMENTS_FILE, STATE_DIR,
    state_of,
)
from jetson_install.planning.plan import Execution, Plan, resolved_plan, with_interpreter
from jetson_install.base.process import Completed
from jetson_install.tools.progress import Display, StepProgress
from jetson_install.base.redact import redact
from jetson_install.planning.routes.shared import target_lines
from jetson_install.running.noop import Current, decide, known_set, plan_fingerprint, sources_of
from jetson_install.envs.source_identity import Sources
from jetson_install.base.steps import Step, StepResult
from jetson_install.tools.uv_errors import read_uv_failure

__all__ = ["InstallResult", "install", "check_before_install", "activate_command"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class InstallResult:
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
            "profile": plan.route.profile,
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


def activate_command(venv: str) -> str:
    return f"source {shlex.quote(venv + '/bin/activate')}"


class _Run(Execution):
    """One install run: the plan as it stands, the steps done so far, and how to report them."""

    def __init__(self, plan: Plan, progress: Display, rerun: Rerun) -> None:
        self._plan = plan
        self.display = progress
        self.command = rerun
        self.results: List[StepResult] = []
        self.warnings: List[str] = list(plan.warnings)
        self.removed: List[Tuple[str, int]] = []  # what killed runs had left, removed by this one
        self.damaged: List[str] = []  # how the previous environment had changed, when that is why this run rebuilds
        self.number = 0
        self._current: Optional[StepProgress] = None
        self._staging: Optional[Path] = None
        self.step_id = ""

    # -- what a handler may use (plan.Execution) -------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self._plan

    @plan.setter
    def plan(self, plan: Plan) -> None:
        self._plan = plan

    @property
    def staging(self) -> Path:
        assert self._staging is not None
        return self._staging

    @property
    def python(self) -> str:
        return str(self.staging / "bin" / "python")

    @property
    def rerun(self) -> Rerun:
        return self.command

    @property
    def current(self) -> Optional[StepProgress]:
        return self._current

    def progress(self, line: str) -> None:
        self.display(line)

    def run(self, command: Sequence[str], fix: str) -> Completed:
        """Run one command of the running step as the plan wrote it; uv's warnings become the
        run's warnings, and a failure the step's, with the fix for its cause."""
        program = command[0]
        if program == uv.PROGRAM:
            result = runner.run_uv(command, indexes=self.plan.indexes, watch=self._current)
        else:
            result = runner.run(command, timeout=3600, on_tick=self._current.tick if self._current else None)
        if program == uv.PROGRAM:
            self.outcome(result, fix, _named_index(command))
        return result

    # -- the run itself ----------------------------------------------------------------------------
    def learned(self, plan: Plan) -> None:
        """What a step learned (the versions it installed, the companions' hashes) becomes the
        plan the rest of the run carries out; the steps already run stay as they ran."""
        done = self.plan.steps[:self.number]
        self.plan = dataclasses.replace(plan, steps=done + plan.steps[len(done):])

    def start(self, staging: Path) -> None:
        self._staging = staging

    def step(self, step: Step, action: Callable[[], str]) -> None:
        self.number += 1
        self.step_id = step.id
        current = self._current = self.display.start(
            step.id, f"[{self.number}/{len(self.plan.steps)}] {step.id}: {step.title}")
        status, detail = "failed", ""
        try:
            detail = action()
            status = "ok"
        except OSError as exc:
            raise StepFailed(step.id, f"step '{step.id}' failed: {os_error_reason(exc)}",
                             fix_for_os_error(exc, f"run: {self.command}")) from None
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            self._current = None
            self.results.append(StepResult(step.id, status, current.elapsed(), detail, current.downloaded_bytes))
            self.display.finish(current, status, detail)

    def outcome(self, result: Completed, usual_fix: str, index: Optional[str] = None) -> None:
        """Fail the step with uv's own reason and the fix for that cause; `usual_fix` is the
        step's fix for a resolution conflict."""
        step_id = self.step_id
        self.warnings.extend(f"uv ({step_id}): {warning}" for warning in uv.warnings_in(result)
                             if f"uv ({step_id}): {warning}" not in self.warnings)
        if result.ok:
            return
        if result.timed_out:
            raise StepFailed(step_id, f"step '{step_id}' failed: uv did not finish in time",
                             f"check the network and the indexes, then run: {self.command}")
        failure = read_uv_failure(result.stderr)
        raise StepFailed(step_id, f"step '{step_id}' failed: {failure.summary}",
                         fix_for_uv_failure(failure, self._context(step_id, index), usual_fix))

    def _context(self, step_id: str, index: Optional[str]) -> StepContext:
        plan = self.plan
        return StepContext(step_id, self.command, index, Path(plan.venv + ".d"),
                           repository_of(plan.source_url or ""),
                           fallback=step_id == "vendor" and _offers_fallback(plan))


def _named_index(command: Sequence[str]) -> Optional[str]:
    """The index a uv command asks, as its --default-index names it (credentials stay apart)."""
    for number, part in enumerate(command[:-1]):
        if part == "--default-index":
            return command[number + 1].split("=", 1)[-1] if command[number + 1].startswith("private=") \
                else command[number + 1]
    return None


def _offers_fallback(plan: Plan) -> bool:
    return plan.route.fallback_location(plan) is not None and \
        plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index")


# -- the handlers, by step kind -------------------------------------------------------------------


_Handler = Callable[[Step, "_Run"], str]


def _interpreter_handlers(interpreter: Interpreter) -> Dict[str, _Handler]:
    def found(step: Step, run: _Run) -> str:
        return f"{interpreter.path} (Python {interpreter.version})"

    def venv(step: Step, run: _Run) -> str:
        run.run(step.argv, f"check that {interpreter.path} can make virtual environments "
                           f"(sudo apt-get install python{interpreter.abi}-venv), then run: {run.rerun}")
        return ""

    return {"interpreter": found, "venv": venv}


def _vendor(step: Step, run: _Run) -> str:
    plan = run.plan
    assert plan.vendor is not None and plan.resolution is not None
    pins = ", ".join(f"{name}=={version}" for name, version in plan.pins.items())
    run.run(step.argv, f"check that {plan.vendor.location} is reachable and carries {pins}; or use another: "
                       f"{run.rerun.with_option(plan.route.source_option, 'URL')}")
    record = record_installed(run.staging, plan.resolution, (), str(run.rerun))
    # A range uv resolved (Thor's bitsandbytes from the default index) is pinned from here on.
    resolution = plan.resolution.with_installed({name: package.version for name, package in record.installed.items()})
    if resolution != plan.resolution:
        record_installed(run.staging, resolution, (), str(run.rerun))
        run.learned(resolved_plan(plan, resolution, plan.companions))
    return ", ".join(f"{name} {package.version}" for name, package in record.installed.items())


def _companions(step: Step, run: _Run) -> str:
    """The runtime wheels the vendor builds need, from the default index by name, hash-checked."""
    plan = run.plan
    assert plan.vendor is not None and plan.resolution is not None
    state = state_of(run.staging)
    state.mkdir(parents=True, exist_ok=True)
    (state / COMPANIONS_INPUT).write_text("\n".join(plan.vendor.companions) + "\n")
    fix = f"check that the default index carries {', '.join(plan.vendor.companions)}, then run: {run.rerun}"
    compile_, install_ = step.commands
    run.run(compile_, fix)
    found = _compiled((state / COMPANIONS_FILE).read_text())
    run.run(install_, fix)
    record_installed(run.staging, plan.resolution, found, str(run.rerun))
    run.learned(resolved_plan(plan, plan.resolution, [f"{c.name}=={c.version}" for c in found]))
    return ", ".join(f"{c.name}=={c.version}" for c in found)


def _target(step: Step, run: _Run) -> str:
    plan = run.plan
    write_constraints(run.staging, plan.constraints)
    if plan.additions:
        write_additions(run.staging, plan.additions)
    if str(state_of(run.staging) / REQUIREMENTS_FILE) in step.argv:
        # A token in the --source URL goes to uv in a file only the user can read, not on its command line.
        write_requirements(run.staging, target_lines(plan))
    run.run(step.argv, "a package needs a different torch (or NumPy) than the JetPack build, or an index is "
                       f"unreachable (see the message); the vendor pins cannot change. Fix the cause, then run: "
                       f"{run.rerun}")
    return ""


def _protect(step: Step, run: _Run) -> str:
    return f"constraints kept in {protect(run.staging, list(run.plan.route.kept()))}"


def _check(step: Step, run: _Run) -> str:
    check_command, smoke_command = step.commands
    with ThreadPoolExecutor(max_workers=1) as pool:
        smoke_future = pool.submit(runner.run, smoke_command, timeout=300)
        check = pip_check(run.python, check_command)
        smoke = smoke_future.result()
    run.outcome(check, f"resolve the conflict uv pip check names, then run: {run.rerun}")
    if not smoke.ok:
        raise StepFailed("check", f"step 'check' failed: {' '.join(run.plan.target.smoke)} -> "
                                  f"{smoke.last_stderr_line() or 'exit ' + str(smoke.returncode)}",
                         f"fix the cause above, then run: {run.rerun}")
    (state_of(run.staging) / CHECKED_FILE).write_text(distributions_state(run.staging) + "\n")
    return f"dependencies consistent; {run.plan.target.title} imports (device: {smoke.stdout.strip() or '?'})"


def _doctor(step: Step, run: _Run) -> str:
    """The doctor on the new environment, in this process on the platform and channel the plan
    holds (its probes, the step's commands, run by the environment's interpreter); its evidence
    decides whether the environment is switched in."""
    plan = run.plan
    evidence_path = state_of(run.staging) / EVIDENCE_FILE
    try:
        done = doctor_environment(
            run.python, plan.platform, load_catalog().match(plan.platform).channel,
            only=() if plan.verify else GPU_FREE_CHECKS, strict=False, preflight=plan.route.profile == "preflight",
            evidence_file=str(evidence_path), progress=run.progress,
            install_command=redact(str(run.rerun)), platform_options=plan.doctor_platform_args)
    except JetsonInstallError as exc:
        raise StepFailed("verify", f"step 'verify' failed: {exc.message}", exc.fix) from None
    evidence = done.evidence
    if done.report.exit_code != 0:
        checks = {check.get("id"): check for check in evidence.get("checks", []) if isinstance(check, dict)}
        first = checks.get(evidence.get("headline")) or {}
        detail = f"{first['id']}: {first.get('detail')}" if first else "a required check failed"
        fixes = [first["fix"]] if first.get("fix") else []
        if plan.verify and evidence.get("profile") == "jetson" and first.get("id") not in GPU_FREE_CHECKS:
            fixes.append(f"for image builds without GPU access: {run.rerun.with_flag('--no-verify')}")
        raise StepFailed("verify", f"step 'verify' failed: {detail} (evidence: {kept_evidence(run.staging)})",
                         "; ".join(fixes) or None)
    if not plan.verify:
        return f"torch is the expected build for this Python (GPU checks skipped: --no-verify); evidence in {evidence_path}"
    if evidence.get("profile") == "preflight":
        return f"preflight checks passed (CPU torch; not Jetson GPU evidence); evidence in {evidence_path}"
    return f"all required checks passed; evidence in {evidence_path}"


def _source_build(step: Step, run: _Run) -> str:
    planned = run.plan.route.planned_build()
    assert planned is not None
    return run_build_step(planned, step, run)


#: The step kinds that run the same whatever the vendor set: they need not wait for the index.
_NO_VENDOR_SET = ("interpreter", "venv")

_COMMON: Mapping[str, _Handler] = {
    "vendor": _vendor, "companions": _companions, "source-build": _source_build, "target": _target,
    "protect": _protect, "check": _check,
}


# -- before anything runs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """What the checks before an install's first step found."""

    home: EnvironmentHome
    interpreter: Interpreter
    warnings: Tuple[str, ...]


def check_before_install(plan: Plan, dry_run: bool) -> Checked:
    """Every check an install makes before its first step, made by a dry run too (which
    leaves everything as it was). Raises BadInput (a bad location or --python) or
    StepFailed (no system Python of the channel's version)."""
    home = EnvironmentHome(Path(plan.venv))
    home.check_usable(create=not dry_run)
    policy = plan.route.interpreter_policy(plan)
    interpreter, warnings = choose_interpreter(policy, plan.channel.id if plan.channel else "?")
    if interpreter is None:
        wanted = "python3" if policy.python3_fallback else f"Python {policy.abi}"
        package = "python3 python3-venv" if policy.python3_fallback else f"python{policy.abi} python{policy.abi}-venv"
        raise StepFailed("interpreter", f"no {wanted} found on this system (searched /usr/bin, /usr/local/bin, PATH)",
                         f"sudo apt-get install {package}, or pass --python PATH")
    if plan.route.planned_build() is not None:
        # Missing build tools are named, with their apt packages, before anything starts.
        find_toolchain(CUDA_HOME, plan.platform.cuda)
    return Checked(home, interpreter, tuple(warnings))


def install(plan: Plan, progress: Display, rerun: Rerun, upgrade: bool = False) -> InstallResult:
    """Carry out `plan`. Never raises for a failing step: the result says what failed.

    The vendor set is the environment's recorded resolution while the catalog's policy is
    unchanged (no request to any index), else (or with `upgrade`) resolved from the index.
    """
    assert plan.supported
    run = _Run(plan, progress, rerun)
    try:
        checked = check_before_install(plan, dry_run=False)
    except StepFailed as failure:
        return _failed(plan, run, None, "failed", failure.step, failure.message, failure.fix)
    run.warnings.extend(checked.warnings)
    plan = run.plan = with_interpreter(plan, checked.interpreter.path)
    home = checked.home
    with home.lock():
        try:
            return _install_locked(plan, home, run, checked.interpreter, upgrade)
        finally:
            home.forget_if_empty()  # still holding the lock, so no other run is using DIR.d


def _resolve(plan: Plan, current: Optional[Current], upgrade: bool, run: _Run, interpreter: Interpreter) -> Plan:
    """The plan with its vendor set: the route's own files (a lock), the recorded one while the
    policy is unchanged, else the index's."""
    known = known_set(plan, current, upgrade)
    if known is None:
        return _index_set(plan, run, _IndexRead(plan, interpreter))
    if known.note:
        run.progress(known.note)
    return known.plan


class _IndexRead:
    """The vendor index's listings, read and chosen from on a thread of its own: a first install
    makes its environment meanwhile (`uv venv` needs no vendor set), which hides the read behind
    it. A daemon thread: an interrupted run does not wait for its connections."""

    def __init__(self, plan: Plan, interpreter: Interpreter) -> None:
        assert plan.vendor is not None
        vendor, location, glibc = plan.vendor, plan.vendor_index, ubuntu_glibc(plan.platform.ubuntu)
        self._outcome: List[Any] = []

        def read() -> None:
            try:
                # The interpreter's own Python decides the files, whatever the channel's is.
                self._outcome.append(index.resolve(vendor, location, interpreter.abi, glibc))
            except BaseException as exc:  # handed to the thread that waits for it
                self._outcome.append(exc)

        self._thread = threading.Thread(target=read, name="vendor-index", daemon=True)
        self._thread.start()

    def resolution(self) -> Resolution:
        self._thread.join()
        outcome = self._outcome[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]


def _index_set(plan: Plan, run: _Run, reading: _IndexRead) -> Plan:
    """The plan with the set the index read chose; a failure is the vendor step's, with its fixes."""
    try:
        resolution = reading.resolution()
    except JetsonInstallError as exc:
        # Reading the index is the vendor step's first half: its fixes are the vendor step's.
        context = StepContext("vendor", run.command, plan.vendor_index, Path(plan.venv + ".d"), "",
                              fallback=_offers_fallback(plan))
        fix = exc.fix
        if isinstance(exc, index.IndexUnreachable):
            fix = index_down_fix(context)
        elif isinstance(exc, NoBuildForPython):
            fix = other_python_fix(context, exc.python, exc.served, served_interpreter(plan.python_abi, exc.served))
        elif isinstance(exc, NothingInPolicy):
            fix = vendor_missing_fix(context)
        raise StepFailed("vendor", f"step 'vendor' failed: {exc.message}", fix) from None
    run.progress(f"vendor set: {resolution.set_name} from {resolution.source}: {resolution.reason}")
    return resolved_plan(plan, resolution)


def _install_locked(plan: Plan, home: EnvironmentHome, run: _Run, interpreter: Interpreter,
                    upgrade: bool) -> InstallResult:
    """The whole install, under the lock on DIR.d."""
    existing = home.current()
    current = Current.read(existing) if existing is not None else None
    reading: Optional[_IndexRead] = None
    try:
        if current is None and known_set(plan, None, upgrade) is None:
            # A first install has no environment to be a no-op against: its index is read while
            # the environment is made, and the first step that needs the set waits for it.
            reading = _IndexRead(plan, interpreter)
        else:
            plan = _resolve(plan, current, upgrade, run, interpreter)
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
    staging = home.new_environment_path()
    sources.read_local()  # a local tree is read before building writes into it
    try:
        previous = _execute(home, staging, interpreter, sources, run, reading)
        # From here on the new environment is the user's; nothing may remove it.
        home.prune(keep=[staging, previous])
        installed = {**run.plan.route.kept(), **installed_versions(staging)}
    except StepFailed as failure:
        kept = discard(home, staging, str(run.command))
        return _failed(run.plan, run, interpreter, "failed", failure.step, failure.message, failure.fix, kept)
    except KeyboardInterrupt:
        step = run.results[-1].id if run.results else "start"
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


def _execute(home: EnvironmentHome, staging: Path, interpreter: Interpreter, sources: Sources, run: _Run,
             reading: Optional[_IndexRead] = None) -> Optional[Path]:
    """Run the plan's steps into `staging`, then switch the user's path to it; return the
    environment it replaced. A step may learn what the rest of the plan needs (the versions it
    installed, the companions' hashes): the rest runs from the plan as it then stands; so does
    the vendor set of an index still being read (`reading`), before the first step that needs it."""
    run.start(staging)
    handlers: Dict[str, _Handler] = {**_COMMON, **run.plan.route.handlers(), **_interpreter_handlers(interpreter)}
    previous: List[Optional[Path]] = []

    def record_and_doctor(step: Step, execution: _Run) -> str:
        # The doctor reads what the environment was made from (a kept stack, a preflight profile).
        # The command (and where it ran, for its relative paths) is what `add` makes the next one from.
        home.record_plan(staging, {**plan_fingerprint(run.plan, interpreter), **sources.record(),
                                   "target": run.plan.target.id, "command": list(run.rerun.argv),
                                   "cwd": _working_folder()})
        return _doctor(step, execution)

    def switch(step: Step, execution: _Run) -> str:
        home.mark_complete(staging)
        previous.append(home.switch_to(staging))
        return f"{home.link} -> {staging}" + (f" (previous kept at {previous[0]})" if previous[0] else "")

    handlers.update({"doctor": record_and_doctor, "switch": switch})
    for number in range(len(run.plan.steps)):
        if reading is not None and run.plan.steps[number].kind not in _NO_VENDOR_SET:
            run.learned(_index_set(run.plan, run, reading))
            run.warnings.extend(w for w in run.plan.warnings if w not in run.warnings)
            reading = None
        step = run.plan.steps[number].bound(run.plan.staging, str(staging))
        handler = handlers[step.kind]
        run.step(step, lambda: handler(step, run))
    return previous[0] if previous else None


def _working_folder() -> Optional[str]:
    """Where the command runs; None when that folder was removed under it."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _compiled(text: str) -> List[Companion]:
    """`name==version --hash=sha256:…` entries of a `uv pip compile --generate-hashes` output."""
    companions: List[Companion] = []
    for entry in text.replace("\\\n", " ").splitlines():
        parts = entry.split()
        if not parts or parts[0].startswith("#") or "==" not in parts[0]:
            continue
        name, version = parts[0].split("==", 1)
        hashes = tuple(part.split(":", 1)[1] for part in parts[1:] if part.startswith("--hash=sha256:"))
        companions.append(Companion(name, version, hashes))
    return companions


def _evidence_path(environment: Path) -> Optional[str]:
    path = environment / STATE_DIR / EVIDENCE_FILE
    return str(path) if path.is_file() else None


# -- after a failure ----------------------------------------------------------------------------------


def _failed(plan: Plan, run: _Run, interpreter: Optional[Interpreter], status: str, step: str, message: str,
            fix: Optional[str], evidence: Optional[str] = None) -> InstallResult:
    kept = f"{plan.venv} is unchanged" if Path(plan.venv).is_symlink() else f"no environment was made at {plan.venv}"
    return InstallResult(status, plan.venv, None, interpreter.path if interpreter else None, tuple(run.results),
                         evidence=evidence, failed_step=step,
                         message=f"{message} ({kept})", fix=fix or f"fix the cause above, then run: {run.command}",
                         warnings=tuple(run.warnings), resolved=plan, removed=tuple(run.removed),
                         damaged=tuple(run.damaged))
