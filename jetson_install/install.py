"""Plan -> uv steps -> environment: carry out an install plan, transactionally.

Every step works on a new environment beside the user's one; only the last step
switches the user's path to it. A failed step, a Ctrl-C or a kill leave the
previous environment exactly as it was.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from jetson_install import container, runner, uv
from jetson_install.source_build import bitsandbytes as build_bitsandbytes
from jetson_install.environment import (
    EnvironmentHome, protect, recorded_plan, recorded_vendor, write_constraints, write_private, write_requirements,
)
from jetson_install.errors import BadInput, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, JetsonInstallError, StepFailed
from jetson_install.fixes import (
    Rerun,
    StepContext,
    fix_for_os_error,
    fix_for_uv_failure,
    index_down_fix,
    os_error_reason,
    repository_of,
    vendor_missing_fix,
)
from jetson_install.identity import Companion, EnvironmentRecord, read_record, record_built, record_installed
from jetson_install.interpreters import Interpreter, find_interpreter, inspect_interpreter
from jetson_install.lock import LOCK_FILE, LockInUse, lock_resolution
from jetson_install.plan import COMPANIONS_FILE, EVIDENCE_FILE, STATE_DIR, Plan, resolved_plan, with_lock
from jetson_install.progress import Display, StepProgress
from jetson_install.redact import credentials, redact_data
from jetson_install.runner import Completed
from jetson_install.source_identity import SourceIdentity
from jetson_install.uv_errors import read_uv_failure

__all__ = ["StepResult", "InstallResult", "install", "would_change", "preflight_interpreter"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class StepResult:
    id: str
    status: str  # ok | failed | interrupted
    seconds: float
    detail: str = ""
    downloaded_bytes: int = 0  # the sizes uv announced for the files it downloaded; 0 for cache hits

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "status": self.status, "seconds": round(self.seconds, 3),
                "downloaded_bytes": self.downloaded_bytes, "detail": self.detail or None}


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
    resolved: Optional[Plan] = None  # the plan with the set the index resolved to

    @property
    def exit_code(self) -> int:
        return {"failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}.get(self.status, EXIT_OK)

    def to_json(self, plan: Plan) -> Dict[str, Any]:
        plan = self.resolved or plan
        return {
            "schema_version": SCHEMA_VERSION,
            "command": "obliteratus",
            "status": self.status,
            "exit_code": self.exit_code,
            "venv": self.venv,
            "environment": self.environment,
            "activate": activate_command(self.venv),
            "python": self.interpreter,
            "channel": plan.channel.id if plan.channel else None,
            "profile": "preflight" if plan.preflight is not None else "jetson",
            "vendor_index": plan.vendor_location,
            "pins": dict(plan.pins),
            "resolution": plan.resolution.to_json() if plan.resolution else None,
            "lock": plan.lock.to_json() if plan.lock else None,
            "installed": self.installed,
            "evidence": self.evidence,
            "steps": [step.to_json() for step in self.steps],
            "error": {"step": self.failed_step, "message": self.message, "fix": self.fix} if self.failed_step else None,
            "warnings": list(self.warnings),
        }


def activate_command(venv: str) -> str:
    return f"source {shlex.quote(venv + '/bin/activate')}"


class _Run:
    """The state of one install run: the steps done so far and how to report them."""

    def __init__(self, plan: Plan, progress: Display, rerun: Rerun) -> None:
        self.plan = plan
        self.progress = progress
        self.rerun = rerun
        self.results: List[StepResult] = []
        self.warnings: List[str] = list(plan.warnings)
        self.number = 0
        self.current: Optional[StepProgress] = None  # the running step, which uv reports its downloads to

    def step(self, step_id: str, action: Callable[[], str]) -> None:
        self.number += 1
        title = next((s.title for s in self.plan.steps if s.id == step_id), step_id)
        current = self.current = self.progress.start(step_id, f"[{self.number}/{len(self.plan.steps)}] {step_id}: {title}")
        status, detail = "failed", ""
        try:
            detail = action()
            status = "ok"
        except OSError as exc:
            raise StepFailed(step_id, f"step '{step_id}' failed: {os_error_reason(exc)}",
                             fix_for_os_error(exc, f"run: {self.rerun}")) from None
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            self.current = None
            self.results.append(StepResult(step_id, status, current.elapsed(), detail, current.downloaded_bytes))
            self.progress.finish(current, status, detail)

    def uv_step(self, step_id: str, result: Completed, usual_fix: str, index: Optional[str] = None) -> str:
        """Fail the step with uv's own reason and the fix for that cause; `usual_fix` is the
        step's fix for a resolution conflict. uv's warnings become the run's warnings."""
        self.warnings.extend(f"uv ({step_id}): {warning}" for warning in uv.warnings_in(result)
                             if f"uv ({step_id}): {warning}" not in self.warnings)
        if result.ok:
            return ""
        if result.timed_out:
            raise StepFailed(step_id, f"step '{step_id}' failed: uv did not finish in time",
                             f"check the network and the indexes, then run: {self.rerun}")
        failure = read_uv_failure(result.stderr)
        context = StepContext(step_id, self.rerun, index, Path(self.plan.venv + ".d"),
                              repository_of(self.plan.requirement.split(" @ ", 1)[-1]),
                              fallback=step_id == "vendor" and self.plan.fallback_location is not None
                              and self.plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index"))
        raise StepFailed(step_id, f"step '{step_id}' failed: {failure.summary}",
                         fix_for_uv_failure(failure, context, usual_fix))


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
    warnings: List[str] = []
    interpreter = _interpreter(plan, warnings)
    if plan.bitsandbytes_build is not None:
        # Missing build tools are named, with their apt packages, before anything starts.
        build_bitsandbytes.find_toolchain(build_bitsandbytes.CUDA_HOME, plan.platform.cuda)
    return Checked(home, interpreter, tuple(warnings))


def install(plan: Plan, progress: Display, rerun: Rerun, upgrade: bool = False) -> InstallResult:
    """Carry out `plan`. Never raises for a failing step: the result says what failed.

    The vendor set is the environment's recorded resolution while the catalog's policy is
    unchanged (no request to any index), else (or with `upgrade`) resolved from the index.
    """
    assert plan.supported and (plan.vendor is not None or plan.existing is not None)
    run = _Run(plan, progress, rerun)
    try:
        checked = check_before_install(plan, dry_run=False)
    except StepFailed as failure:
        return _failed(plan, run, None, "failed", failure.step, failure.message, failure.fix)
    run.warnings.extend(checked.warnings)
    home = checked.home
    with home.lock():
        try:
            return _install_locked(plan, home, run, checked.interpreter, progress, rerun, upgrade)
        finally:
            home.forget_if_empty()  # still holding the lock, so no other run is using DIR.d


def _resolve(plan: Plan, current: Optional[Path], record: Optional[EnvironmentRecord], upgrade: bool,
             run: "_Run", interpreter: Interpreter) -> Plan:
    """The plan with its vendor set: the recorded one while the policy is unchanged, else the index's."""
    from jetson_install import index
    from jetson_install.identity import NothingInPolicy
    from jetson_install.platform_data import ubuntu_glibc

    if plan.vendor is None:  # --use-existing-torch keeps the interpreter's own stack
        return plan
    if plan.lock is not None:  # the lock names the vendor files: no index is read
        return with_lock(resolved_plan(plan, lock_resolution(plan.lock)), plan.lock)
    recorded = recorded_plan(current) if current is not None else None
    if record is not None and not upgrade and recorded is not None and recorded.get("policy") == plan.vendor.policy():
        run.progress(f"vendor set: {record.resolution.set_name}, as recorded in {current} (no index read; "
                     "--upgrade reads it again)")
        return resolved_plan(plan, record.resolution, [f"{c.name}=={c.version}" for c in record.companions])
    vendor_index = plan.settings.default_index.value if plan.vendor.default_index else plan.vendor.index
    try:
        # A preflight runs on whatever Python the machine has (CPU builds exist for each).
        python_abi = interpreter.abi if plan.preflight is not None else plan.python_abi
        resolution = index.resolve(plan.vendor, vendor_index, python_abi or "3", ubuntu_glibc(plan.platform.ubuntu))
    except JetsonInstallError as exc:
        # Reading the index is the vendor step's first half: its fixes are the vendor step's.
        context = StepContext("vendor", run.rerun, vendor_index, Path(plan.venv + ".d"), "",
                              fallback=plan.fallback_location is not None
                              and plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index"))
        fix = exc.fix
        if isinstance(exc, index.IndexUnreachable):
            fix = index_down_fix(context)
        elif isinstance(exc, NothingInPolicy):
            fix = vendor_missing_fix(context)
        raise StepFailed("vendor", f"step 'vendor' failed: {exc.message}", fix) from None
    run.progress(f"vendor set: {resolution.set_name} from {resolution.source}: {resolution.reason}")
    return resolved_plan(plan, resolution)


def _install_locked(plan: Plan, home: EnvironmentHome, run: "_Run", interpreter: Interpreter, progress: Display,
                    rerun: Rerun, upgrade: bool) -> InstallResult:
    """The whole install, under the lock on DIR.d."""
    current = home.current()
    record = read_record(current) if current is not None else None
    try:
        plan = _resolve(plan, current, record, upgrade, run, interpreter)
    except StepFailed as failure:
        return _failed(plan, run, interpreter, "failed", failure.step, failure.message, failure.fix)
    run.plan = plan
    run.warnings.extend(w for w in plan.warnings if w not in run.warnings)
    fingerprint = _fingerprint(plan, interpreter)
    source = SourceIdentity(plan.requirement.split(" @ ", 1)[-1])
    installed = _satisfied(current, fingerprint, source, plan, record, progress) if current is not None else None
    if current is not None and installed is not None:
        progress(f"{plan.venv} already satisfies the plan; nothing to do")
        return InstallResult("unchanged", plan.venv, str(current), interpreter.path, (), installed,
                             _evidence_path(current), warnings=tuple(run.warnings), resolved=plan)
    home.prune(keep=[current, home.previous()])
    staging = home.new_environment_path()
    if "file://" in source.url:
        source.current()  # a local tree is read before building writes into it
    try:
        plan, previous = _build(plan, home, staging, interpreter, fingerprint, source, run)
        # From here on the new environment is the user's; nothing may remove it.
        home.prune(keep=[staging, previous])
        installed = dict(plan.existing.pins if plan.existing else {})
        installed.update(uv.installed_versions(str(staging / "bin" / "python")))
    except StepFailed as failure:
        kept = _discard(home, staging, rerun)
        return _failed(plan, run, interpreter, "failed", failure.step, failure.message, failure.fix, kept)
    except KeyboardInterrupt:
        step = run.results[-1].id if run.results else "start"
        if home.current() == staging:
            # After the switch: the new environment is in place and stays; what the
            # clean-up had not removed yet is removed by the next run.
            return InstallResult(
                "interrupted", plan.venv, str(staging), interpreter.path, tuple(run.results),
                failed_step="clean-up", message=f"interrupted after the switch: {plan.venv} is the new environment, "
                                                "ready to use; old environments are removed by the next run",
                fix=f"nothing is needed; to finish the clean-up now, run: {rerun}", warnings=tuple(run.warnings))
        _discard(home, staging, rerun)
        return _failed(plan, run, interpreter, "interrupted", step, f"interrupted during step '{step}'",
                       f"run it again: {rerun}")
    return InstallResult("installed", plan.venv, str(staging), interpreter.path, tuple(run.results), installed,
                         _evidence_path(Path(plan.venv)), warnings=tuple(run.warnings), resolved=plan)


def would_change(plan: Plan) -> Tuple[bool, str]:
    """Whether `install(plan)` would change the environment, and why: the same comparison
    a real run makes before it decides to do nothing. Reads only (check mode for fleets)."""
    current = EnvironmentHome(Path(plan.venv)).current()
    if current is None:
        return True, f"no environment at {plan.venv} yet"
    if plan.preflight is not None:
        interpreter = preflight_interpreter(plan)
    else:
        interpreter = inspect_interpreter(plan.interpreter) if plan.interpreter else find_interpreter(plan.python_abi or "")
    if interpreter is None:
        return True, f"no Python {plan.python_abi} found: the install would fail at its interpreter step"
    record = read_record(current)
    if plan.vendor is not None:
        if record is None or recorded_plan(current) is None or recorded_plan(current).get("policy") != plan.vendor.policy():
            return True, f"{current} was made under another vendor policy (sets, preferred set or source)"
        plan = resolved_plan(plan, record.resolution, [f"{c.name}=={c.version}" for c in record.companions])
    fingerprint = _fingerprint(plan, interpreter)
    recorded, recorded_source = _recorded(current)
    if recorded != redact_data(fingerprint):
        return True, f"{current} was made from a different plan (channel, pins, source, indexes or interpreter)"
    source = SourceIdentity(plan.requirement.split(" @ ", 1)[-1])
    if not source.unchanged_since(recorded_source):
        return True, f"the source changed since {current} was made"
    if _satisfied(current, fingerprint, source, plan, record, lambda line: None) is None:
        return True, f"{current} no longer holds the pinned vendor builds, or uv pip check fails there"
    return False, f"{plan.venv} already satisfies the plan"


KEPT_FAILED_EVIDENCE = 5


def _discard(home: EnvironmentHome, staging: Path, rerun: "Rerun") -> Optional[str]:
    """Remove a half-built environment, keeping its evidence (if the doctor ran) beside it,
    and the last few of those only. Returns where the evidence was kept."""
    evidence = staging / STATE_DIR / EVIDENCE_FILE
    kept: Optional[Path] = None
    if evidence.is_file():
        kept = _kept_evidence(staging)
        kept.write_text(json.dumps(_without_staging_fixes(json.loads(evidence.read_text()), staging, rerun),
                                   indent=2) + "\n")
        _rotate_kept_evidence(staging.parent)
    home.remove(staging)
    return str(kept) if kept is not None else None


def _without_staging_fixes(evidence: Dict[str, Any], staging: Path, rerun: "Rerun") -> Dict[str, Any]:
    """A fix that acts on the environment being discarded would point at nothing: say to
    fix the cause and run the install again instead."""
    for check in evidence.get("checks", []):
        fix = check.get("fix")
        if isinstance(fix, str) and str(staging) in fix:
            check["fix"] = f"fix the cause in the detail, then run the install again: {rerun}"
    return evidence


def _rotate_kept_evidence(directory: Path) -> None:
    kept = sorted(directory.glob(f"failed-*-{EVIDENCE_FILE}"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in kept[KEPT_FAILED_EVIDENCE:]:
        old.unlink()


def _kept_evidence(staging: Path) -> Path:
    """Where a discarded environment's doctor evidence is kept, beside DIR.d's environments."""
    return staging.parent / f"failed-{staging.name}-{EVIDENCE_FILE}"


def _failed(plan: Plan, run: _Run, interpreter: Optional[Interpreter], status: str, step: str, message: str,
            fix: Optional[str], evidence: Optional[str] = None) -> InstallResult:
    kept = f"{plan.venv} is unchanged" if Path(plan.venv).is_symlink() else f"no environment was made at {plan.venv}"
    return InstallResult(status, plan.venv, None, interpreter.path if interpreter else None, tuple(run.results),
                         evidence=evidence, failed_step=step,
                         message=f"{message} ({kept})", fix=fix or f"fix the cause above, then run: {run.rerun}",
                         warnings=tuple(run.warnings))


def _interpreter(plan: Plan, warnings: List[str]) -> Interpreter:
    if plan.preflight is not None:
        return _checked_preflight_interpreter(plan, warnings)
    if plan.interpreter:
        found = inspect_interpreter(plan.interpreter)
        if plan.existing is None and found.abi != plan.python_abi:
            warnings.append(
                f"--python {found.path} is Python {found.abi}, but channel {plan.channel.id} wheels are built "
                f"for Python {plan.python_abi}; the vendor wheels may not install or run"
            )
        return found
    found = find_interpreter(plan.python_abi or "")
    if found is None:
        raise StepFailed(
            "interpreter", f"no Python {plan.python_abi} found on this system (searched /usr/bin, /usr/local/bin, PATH)",
            f"sudo apt-get install python{plan.python_abi} python{plan.python_abi}-venv, or pass --python PATH",
        )
    return found


def _checked_preflight_interpreter(plan: Plan, warnings: List[str]) -> Interpreter:
    """CPU builds exist for every current Python, so a preflight takes the channel's Python
    where there is one and the system's python3 otherwise (a hosted runner may lack it)."""
    found = preflight_interpreter(plan)
    if found is None:
        raise StepFailed("interpreter", "no python3 found on this system (searched /usr/bin, /usr/local/bin, PATH)",
                         "sudo apt-get install python3 python3-venv, or pass --python PATH")
    if found.abi != plan.python_abi:
        warnings.append(f"preflight with Python {found.abi}; on the Jetson, channel {plan.channel.id} "
                        f"uses Python {plan.python_abi}")
    return found


def preflight_interpreter(plan: Plan) -> Optional[Interpreter]:
    """The interpreter a preflight install takes: --python, the channel's Python, else python3."""
    if plan.interpreter:
        return inspect_interpreter(plan.interpreter)
    return find_interpreter(plan.python_abi or "") or _system_python3()


def _system_python3() -> Optional[Interpreter]:
    python3 = shutil.which("python3")
    if python3 is None:
        return None
    try:
        return inspect_interpreter(python3)
    except BadInput:
        return None


def _build(plan: Plan, home: EnvironmentHome, staging: Path, interpreter: Interpreter,
           fingerprint: Dict[str, Any], source: SourceIdentity, run: _Run) -> Tuple[Plan, Optional[Path]]:
    """Build a new environment and switch the user's path to it; return the plan as carried
    out (its companions pinned) and the environment it replaced."""
    python = str(staging / "bin" / "python")
    default_index = plan.settings.default_index.value
    run.step("interpreter", lambda: f"{interpreter.path} (Python {interpreter.version})")
    run.step("environment", lambda: run.uv_step(
        "environment", uv.create_venv(interpreter.path, str(staging), default_index,
                                      system_site_packages=plan.existing is not None, watch=run.current,
                                      seed=plan.lock is None),
        f"check that {interpreter.path} can make virtual environments "
        f"(sudo apt-get install python{interpreter.abi}-venv), then run: {run.rerun}", default_index))
    if plan.lock is not None:
        lock_in_use = plan.lock
        write_constraints(staging, plan.constraints)
        run.step("lock", lambda: _install_lock(lock_in_use, python, staging, run))
        if plan.resolution is not None:
            record_installed(staging, plan.resolution, (), str(run.rerun))
    elif plan.existing is not None:
        constraints_path = write_constraints(staging, plan.constraints)
        stack = plan.existing
        run.step("resolve", lambda: _resolve_around_kept(plan, stack, python, staging, constraints_path, run))
        target_argv = uv.no_deps_install_argv(python, str(staging / STATE_DIR / container.TO_INSTALL), default_index)
    else:
        vendor, resolution = plan.vendor, plan.resolution
        assert vendor is not None and resolution is not None
        vendor_index = default_index if vendor.default_index else vendor.index
        run.step("vendor", lambda: run.uv_step(
            "vendor", uv.install(uv.vendor_install_argv(python, vendor_index, bool(vendor.wheels),
                                                        plan.vendor_requirements), vendor_index, watch=run.current),
            f"check that {vendor.location} is reachable and carries "
            f"{', '.join(f'{n}=={v}' for n, v in plan.pins.items())}; or use another: "
            f"{run.rerun.with_option('--cpu-index' if plan.preflight is not None else '--vendor-index', 'URL')}",
            vendor.location))
        companions: List[Companion] = []
        if vendor.companions:
            run.step("companions", lambda: _companions(plan, python, staging, companions, run))
            plan = resolved_plan(plan, resolution, [f"{c.name}=={c.version}" for c in companions])
            run.plan = plan
        record_installed(staging, resolution, companions, str(run.rerun))
        if plan.bitsandbytes_build is not None:
            run.step("bitsandbytes", lambda: _bitsandbytes(plan, python, staging, run))
        constraints_path = write_constraints(staging, plan.constraints)
        requirements = [plan.requirement] + [f"{name}=={version}" for name, version in plan.pins.items()]
        if credentials(plan.requirement.split(" @ ", 1)[-1]):
            # A token in the --source URL goes to uv in a file only the user can read, not on its command line.
            requirements = ["--requirement", str(write_requirements(staging, requirements))]
        target_argv = uv.target_install_argv(python, requirements, str(constraints_path), default_index)
    if plan.lock is None:
        run.step("target", lambda: run.uv_step(
            "target", uv.install(target_argv, default_index, watch=run.current),
            "a package needs a different torch (or NumPy) than the JetPack build, or an index is unreachable "
            f"(see the message); the vendor pins cannot change. Fix the cause, then run: {run.rerun}", default_index))
    excludes = list(plan.existing.pins) if plan.existing is not None else []
    run.step("protect", lambda: f"constraints kept in {protect(staging, excludes)}")
    run.step("check", lambda: _check(plan, python, run))
    run.step("verify", lambda: _verify(plan, python, staging, run))
    home.mark_complete(staging, {**fingerprint, "source": source.current()})
    previous: List[Optional[Path]] = []
    run.step("switch", lambda: _switch(home, staging, previous))
    return plan, previous[0]


def _companions(plan: Plan, python: str, staging: Path, found: List[Companion], run: _Run) -> str:
    """The runtime wheels the vendor builds need, from the default index by name, hash-checked."""
    assert plan.vendor is not None
    default_index = plan.settings.default_index.value
    compiled = staging / STATE_DIR / COMPANIONS_FILE
    compiled.parent.mkdir(parents=True, exist_ok=True)
    fix = f"check that the default index carries {', '.join(plan.vendor.companions)}, then run: {run.rerun}"
    run.uv_step("companions", uv.compile_companions(python, plan.vendor.companions, str(compiled), default_index),
                fix, default_index)
    found.extend(_compiled(compiled.read_text()))
    run.uv_step("companions", uv.install(uv.companions_install_argv(python, str(compiled), default_index),
                                         default_index, watch=run.current), fix, default_index)
    return ", ".join(f"{c.name}=={c.version}" for c in found)


def _bitsandbytes(plan: Plan, python: str, staging: Path, run: _Run) -> str:
    """Build bitsandbytes for the device (or take the cached wheel), install it without
    dependencies, and record it as the environment's vendor build."""
    planned = plan.bitsandbytes_build
    assert planned is not None
    import platformdirs

    toolchain = build_bitsandbytes.find_toolchain(build_bitsandbytes.CUDA_HOME, plan.platform.cuda)
    jobs = build_bitsandbytes.build_jobs(os.cpu_count() or 1, build_bitsandbytes.available_memory())
    request = build_bitsandbytes.BuildRequest(planned.source, planned.capability, toolchain, python,
                                              f"cp{(plan.python_abi or '').replace('.', '')}", jobs)
    cache = Path(platformdirs.user_cache_dir("jetson-install")) / "builds" / "bitsandbytes"
    built = build_bitsandbytes.build_wheel(request, cache, run.progress, plan.settings.default_index.value,
                                           watch=run.current)
    run.uv_step("bitsandbytes", uv.install(uv.vendor_install_argv(python, None, True, [str(built.path)]), None,
                                           watch=run.current),
                f"the wheel {built.path} did not install; remove it to build it again, then run: {run.rerun}")
    record_built(staging, "bitsandbytes", built.record)
    how = "from the build cache" if built.reused else f"built in {built.record['seconds']:.0f} s"
    return f"bitsandbytes {planned.version} for sm_{planned.capability}, {how} ({built.path.name})"


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


def _install_lock(lock: "LockInUse", python: str, staging: Path, run: _Run) -> str:
    """Install exactly the lock's files; the lock stays in the environment as its record."""
    path = staging / STATE_DIR / LOCK_FILE
    path.write_text(lock.text, encoding="utf-8")
    run.uv_step("lock", uv.install(uv.locked_install_argv(python, str(path)), watch=run.current),
                f"a file of the lock is unreachable or changed (see the message): serve its wheelhouse "
                f"(jetson-install wheelhouse DIR --lock FILE), then run: {run.rerun}")
    return f"{len(lock.lock.entries)} files from {lock.location} (sha256 {lock.sha256[:12]}…)"


def _resolve_around_kept(plan: Plan, stack: "container.ExistingStack", python: str, staging: Path,
                        constraints_path: Path, run: _Run) -> str:
    """Resolve the target with the kept stack as given, and write what is left to install."""
    state = staging / STATE_DIR
    (state / container.GIVEN_FILE).write_text(json.dumps(stack.to_json(), indent=2) + "\n")
    # Written only for the user to read: a --source URL may carry a token.
    requirements = write_requirements(staging, [plan.requirement] + container.write_given_wheels(stack, state / "given"))
    resolution = state / container.RESOLUTION
    default_index = plan.settings.default_index.value
    run.uv_step("resolve", uv.pip_compile(uv.compile_argv(python, str(requirements), str(constraints_path),
                                                          default_index, str(resolution)), default_index,
                                            watch=run.current),
                f"a dependency of {plan.target.title} needs another version of a package the interpreter keeps "
                f"({', '.join(f'{n} {v}' for n, v in stack.pins.items())}), or an index is unreachable (see the "
                f"message); start from an image whose torch fits, or drop --use-existing-torch. Then run: {run.rerun}",
                default_index)
    to_install = container.resolved_requirements(resolution.read_text(), list(stack.pins))
    write_private(state / container.TO_INSTALL, "\n".join(to_install) + "\n")  # may name a --source token
    return f"{len(to_install)} packages to install; kept: {', '.join(f'{n} {v}' for n, v in stack.pins.items())}"


def _switch(home: EnvironmentHome, staging: Path, previous: List[Optional[Path]]) -> str:
    previous.append(home.switch_to(staging))
    return f"{home.link} -> {staging}" + (f" (previous kept at {previous[0]})" if previous[0] else "")


def _check(plan: Plan, python: str, run: _Run) -> str:
    # The target's own smoke command (it must import, even where no GPU is visible) runs
    # beside `uv pip check`: both only read the environment.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        smoke_future = pool.submit(runner.run, [python if part == "python" else part for part in plan.target.smoke],
                                   timeout=300)
        check = uv.pip_check(python)
        smoke = smoke_future.result()
    run.uv_step("check", check, f"resolve the conflict uv pip check names, then run: {run.rerun}")
    if not smoke.ok:
        raise StepFailed("check", f"step 'check' failed: {' '.join(plan.target.smoke)} -> "
                                  f"{smoke.last_stderr_line() or 'exit ' + str(smoke.returncode)}",
                         f"fix the cause above, then run: {run.rerun}")
    return f"dependencies consistent; {plan.target.title} imports (device: {smoke.stdout.strip() or '?'})"


def _verify(plan: Plan, python: str, staging: Path, run: _Run) -> str:
    from jetson_install.doctor import GPU_FREE_CHECKS, run_doctor

    evidence = staging / STATE_DIR / EVIDENCE_FILE
    channel, vendor = plan.channel, recorded_vendor(staging)
    if plan.existing is not None:
        channel, vendor = container.doctor_view(plan.channel, plan.existing.abi, plan.pins)
    only = () if plan.verify else GPU_FREE_CHECKS
    report = run_doctor(python, platform=plan.platform, channel=channel, vendor=vendor, only=only,
                        progress=run.progress, install_command=str(run.rerun), preflight=plan.preflight)
    data = report.to_json()
    if plan.lock is not None:
        data["lock"] = plan.lock.to_json()  # which exact files the proven environment holds
    evidence.write_text(json.dumps(redact_data(data), indent=2) + "\n")
    if report.exit_code != 0:
        first = report.check(report.headline) if report.headline else None
        detail = f"{first.id}: {first.detail}" if first else "a required check failed"
        fixes = [first.fix] if first and first.fix else []
        if plan.verify and plan.preflight is None and (first is None or first.id not in GPU_FREE_CHECKS):
            fixes.append(f"for image builds without GPU access: {run.rerun.with_flag('--no-verify')}")
        raise StepFailed("verify", f"step 'verify' failed: {detail} (evidence: {_kept_evidence(staging)})",
                         "; ".join(fixes) or None)
    if not plan.verify:
        return f"torch is the expected build for this Python (GPU checks skipped: --no-verify); evidence in {evidence}"
    if plan.preflight is not None:
        return f"preflight checks passed (CPU torch; not Jetson GPU evidence); evidence in {evidence}"
    return f"all required checks passed; evidence in {evidence}"


def _satisfied(current: Path, fingerprint: Dict[str, Any], source: SourceIdentity, plan: Plan,
               record: Optional[EnvironmentRecord], progress: Callable[[str], None]) -> Optional[Dict[str, str]]:
    """The installed versions when `current` already satisfies the plan, else None."""
    recorded, recorded_source = _recorded(current)
    if recorded != redact_data(fingerprint):  # recorded redacted (mark_complete)
        return None
    if not source.unchanged_since(recorded_source):
        return None
    if plan.resolution is not None:
        if record is None or record.resolution.files != plan.resolution.files:
            return None
        changed = record.differences(current)
        if changed:
            progress(f"{current}: {'; '.join(changed)}; building a new environment with the recorded builds")
            return None
    python = str(current / "bin" / "python")
    from concurrent.futures import ThreadPoolExecutor

    from packaging.version import Version

    # Both uv runs only read the environment: side by side, a no-op re-run waits for one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        check = pool.submit(uv.pip_check, python)
        installed = uv.installed_versions(python)
        # A kept stack is not in the environment itself; its identities are in the fingerprint.
        for name, version in ({} if plan.existing else plan.pins).items():
            if name not in installed or Version(installed[name]) != Version(version):
                return None
        return installed if check.result().ok else None


def _recorded(environment: Path) -> Tuple[Dict[str, Any], Any]:
    """An environment's recorded plan fingerprint, and apart from it its source's identity."""
    recorded = dict(recorded_plan(environment) or {})
    return recorded, recorded.pop("source", None)


def _fingerprint(plan: Plan, interpreter: Interpreter) -> Dict[str, Any]:
    fingerprint = plan.fingerprint()
    fingerprint["verify"] = plan.verify
    fingerprint["interpreter"] = interpreter.path
    return fingerprint


def _evidence_path(environment: Path) -> Optional[str]:
    path = environment / STATE_DIR / EVIDENCE_FILE
    return str(path) if path.is_file() else None
