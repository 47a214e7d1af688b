"""A target's install (`obliteratus`, `torch`): its plan (or a lock's), what a dry run shows
instead, and the install itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from jetson_install.base.errors import BadInput, JetsonInstallError, StepFailed, Stopped
from jetson_install.base.logs import log_error, start_log
from jetson_install.cli.commands.given import InstallOptions
from jetson_install.cli.commands.plan import make_install_plan
from jetson_install.planning.rerun import Rerun
from jetson_install.envs.home import EnvironmentHome
from jetson_install.planning.plan import Plan
from jetson_install.running.install import InstallResult
from jetson_install.running.prepared import check, prepare, vendor_step_failure
from jetson_install.running.install import install as run_install
from jetson_install.tools.progress import Display

__all__ = ["install_plan", "preview", "Installed", "install"]


def install_plan(options: InstallOptions, lock_file: Optional[str], wheelhouse: Optional[str], rerun: Rerun) -> Plan:
    """The plan `obliteratus` carries out: the options' plan, or a lock's (--lock, --wheelhouse)."""
    if options.preflight:
        from jetson_install.planning.routes.preflight import require_aarch64

        require_aarch64()  # before anything else: no plan made here could run
    if options.added and (lock_file or wheelhouse):
        # A lock installs exactly its files: an addition beside it would be left out unsaid.
        option = "--lock" if lock_file else "--wheelhouse"
        locked = rerun.keeping("lock", ("--root", "--l4t", "--soc", "--vendor-index", "--mirror", "--default-index",
                                        "--source", "--ref", "--python", "--with"), ("--vendor-fallback", "--allow-insecure-index"))
        lock_command = Rerun(("lock", options.target, *locked.argv[1:], "--output", "new.lock"))
        install_command = rerun.without("--with").without("--wheelhouse").with_option("--lock", "new.lock")
        fix = f"lock the additions with the rest, then install that lock: {lock_command} && {install_command}"
        # Here, not at the top: only this refusal needs what a lock cannot hold.
        from jetson_install.cli.commands.fleet import unlockable, why_not_lockable

        refused = unlockable(options.added)
        if refused is not None:
            fix = (f"--with {refused[0]}: {why_not_lockable(refused[1])}; install it without a lock: "
                   f"{rerun.without('--lock').without('--wheelhouse')}")
        raise BadInput(f"--with and {option} were both given: a lock installs exactly its files, so --with would add "
                       "nothing", fix=fix)
    plan = make_install_plan(options)
    if plan.supported and (lock_file or wheelhouse):
        from jetson_install.planning.routes.lock import read_lock_in_use, with_lock

        plan = with_lock(plan, read_lock_in_use(lock_file, wheelhouse, plan, rerun))
    return plan


def preview(plan: Plan, dry_run_asked: bool, decide: bool, rerun: Rerun, upgrade: bool = False
            ) -> Tuple[Plan, Dict[str, Any], List[str]]:
    """What `--dry-run` (or an unsupported platform) shows instead of installing: the install as
    prepared (prepared.py), as the install itself would prepare it: the interpreter it takes,
    the vendor set it would take without an index (the recorded one, a lock's, by hash) or, with
    `upgrade`, the one the index gives now, read as the install reads it; as JSON (with `decide`,
    with whether the install would change anything), and the warnings of its checks."""
    if not (dry_run_asked and plan.supported):
        return plan, plan.to_json(), []
    try:
        checked = check(plan, dry_run=True, rerun=rerun)
        plan = checked.plan
        try:
            prepared = prepare(checked, rerun, upgrade, read_index=upgrade)
        except BadInput:
            raise
        except JetsonInstallError as exc:
            raise vendor_step_failure(exc) from None
    except StepFailed as failure:
        # Not bad input: the preview still shows what would run where a Python is found.
        stop = f"the install would stop at step '{failure.step}': {failure.message}"
        data = plan.to_json()
        if decide:
            made = EnvironmentHome(Path(plan.venv)).current() is not None
            data["would_change"], data["would_change_reason"] = True, stop if made else f"no environment at {plan.venv} yet"
        warnings = [f"{stop}; fix: {failure.fix}"]
        return plan, {**data, "warnings": [*data.get("warnings", []), *warnings]}, warnings
    data = prepared.plan.to_json()
    if decide:
        data["would_change"], data["would_change_reason"] = prepared.would_change()
    # The JSON's warnings are every warning the run shows: a script reads them there.
    return prepared.plan, {**data, "warnings": [*data.get("warnings", []), *prepared.warnings]}, list(prepared.warnings)


@dataclass(frozen=True)
class Installed:
    """What an install did, and the log of every command it ran."""

    result: InstallResult
    log: Path


def install(plan: Plan, progress: Display, rerun: Rerun, upgrade: bool) -> Installed:
    """Carry out `plan`, logging every command it runs to a new per-user log."""
    log = start_log(plan.target.id)
    try:
        result = run_install(plan, progress=progress, rerun=rerun, upgrade=upgrade)
    except KeyboardInterrupt as stopped:  # before a step began: run_command says it on stderr
        log_error(f"interrupted ({stopped.signal_name if isinstance(stopped, Stopped) else 'Ctrl-C'}) before any step",
                  f"run it again: {rerun}")
        raise
    except JetsonInstallError as refused:  # refused before any step (bad input found by its checks): said on stderr too
        log_error(refused.message, refused.fix)
        raise
    if result.status in ("failed", "interrupted"):
        log_error(result.message, result.fix)  # as install_lines shows it on stderr
    return Installed(result, log)
