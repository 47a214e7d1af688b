"""What each step kind every route shares does around the commands the plan shows
(routes/shared.py builds those steps; a route's own kinds have their handlers in its module).
A handler runs the step's commands through Run.run, so what runs is what the plan shows, and
returns the step's detail."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from jetson_install.base.errors import JetsonInstallError, StepFailed
from jetson_install.base.layout import (
    CHECKED_FILE,
    EVIDENCE_FILE,
    REQUIREMENTS_FILE,
    state_of,
)
from jetson_install.base.outputs import write_own
from jetson_install.base.redact import redact
from jetson_install.base.steps import Step
from jetson_install.base.upgrade import running_upgrade_command
from jetson_install.base.work_folders import make_work_folder
from jetson_install.board.apt import install_command
from jetson_install.catalog.catalog import load_catalog
from jetson_install.doctor import GPU_FREE_CHECKS
from jetson_install.doctor.additions import AdditionImport, additions_imports
from jetson_install.doctor.context import _last_json_object, uv_command
from jetson_install.doctor.missing_libraries import missing_library
from jetson_install.doctor.on_environment import doctor_environment
from jetson_install.envs.activation import protect
from jetson_install.envs.recorded import write_additions, write_check_commands, write_constraints, write_requirements
from jetson_install.envs.failed_evidence import fix_after_discard, kept_evidence
from jetson_install.envs.interpreters import Interpreter, pip_check
from jetson_install.envs.record import distributions_state, record_installed
from jetson_install.envs.gpu_inspect import inspect_added
from jetson_install.envs.sonames import Missing, environment_libraries, site_packages_of
from jetson_install.planning.routes.shared import target_lines
from jetson_install.probes import ASSEMBLER_WORK
from jetson_install.running.bitsandbytes_build import run_build_step
from jetson_install.running.fetch import fetch, fetched_companions
from jetson_install.running.execution import Run, StepHandler
from jetson_install.tools import runner

__all__ = ["doctor", "shared_handlers"]


def shared_handlers(interpreter: Interpreter) -> Dict[str, StepHandler]:
    """The handlers of the step kinds every route has, for an install that took `interpreter`,
    but the verify step's and the switch's: the executor records the plan before `doctor` runs,
    and switches DIR itself."""

    def found(step: Step, run: Run) -> str:
        return f"{interpreter.path} (Python {interpreter.version})"

    def venv(step: Step, run: Run) -> str:
        run.run(step.argv, f"check that {interpreter.path} can make virtual environments "
                           f"(sudo apt-get install python{interpreter.abi}-venv), then run: {run.rerun}")
        return ""

    return {"interpreter": found, "venv": venv, "fetch": fetch, "vendor": _vendor,
            "source-build": _source_build, "libraries": _libraries, "target": _target, "protect": _protect,
            "check": _check}


def _vendor(step: Step, run: Run) -> str:
    """The files the fetch step checked (the vendor builds, and the companions where the channel
    names any), installed by their sha256 with no index, then recorded."""
    plan = run.plan
    assert plan.vendor is not None and plan.resolution is not None
    run.run(step.argv, f"the checked files did not install (see the message); run: {run.rerun}")
    companions = fetched_companions(run.staging, plan)
    record = record_installed(run.staging, plan.resolution, companions, str(run.rerun))
    return ", ".join([f"{name} {package.version}" for name, package in record.installed.items()]
                     + [f"{c.name} {c.version}" for c in companions])


def _libraries(step: Step, run: Run) -> str:
    """The vendor builds' .so files, read before the target is installed: a library the channel
    records a provider for (a companion within its bound, an apt package) that the loader would
    not find fails the step, before anything is switched. Others may come with the target step
    (the official builds' CUDA runtime wheels), which the verify step's doctor then judges."""
    plan = run.plan
    assert plan.vendor is not None
    sources = [plan.vendor, *(source for source in (plan.channel.sources if plan.channel else ()) if source != plan.vendor)]
    report = environment_libraries(run.staging, Path(plan.platform.root), plan.platform.arch, sources)
    recorded = [missing for missing in report.missing if missing.provider is not None]
    if recorded or report.unreadable:
        problems = [missing.describe() for missing in recorded] + list(report.unreadable)
        raise StepFailed("libraries", f"step 'libraries' failed: {'; '.join(problems)}",
                         _library_fix(recorded[0], run) if recorded else f"install the vendor builds again: {run.rerun}")
    held = {library.soname: library for library in plan.vendor.libraries}
    found = [f"{soname} in {report.found[soname]}" for soname in held if soname in report.found]
    return (f"found {', '.join(found)}" if found else "the vendor builds link none of the libraries the channel "
            "records") + "; the rest they link is checked by the verify step, once the target is installed"


def _library_fix(missing: Missing, run: Run) -> str:
    provider = missing.provider
    assert provider is not None
    if provider.provider == "apt":
        return (f"{install_command([provider.package])} (where it is installed already, add its folder to "
                f"/etc/ld.so.conf.d/ and run sudo ldconfig), then run: {run.rerun}")
    # The catalog's bound let through a release without the soname: a newer catalog holds it back.
    return (f"upgrade jetson-install ({running_upgrade_command()}) for a catalog that holds {provider.package} to releases "
            f"with {missing.soname}, then run: {run.rerun}")


def _target(step: Step, run: Run) -> str:
    plan = run.plan
    write_constraints(run.staging, plan.constraints)
    if plan.additions:
        write_additions(run.staging, plan.additions)
    if plan.check_commands:
        write_check_commands(run.staging, plan.check_commands)
    if str(state_of(run.staging) / REQUIREMENTS_FILE) in step.argv:
        # A token in the --source URL goes to uv in a file only the user can read, not on its command line.
        write_requirements(run.staging, target_lines(plan))
    run.run(step.argv, "a package needs a different torch (or NumPy) than the JetPack build, or an index is "
                       f"unreachable (see the message); the vendor pins cannot change. Fix the cause, then run: "
                       f"{run.rerun}")
    return ""


def _protect(step: Step, run: Run) -> str:
    triton: Dict[str, str] = {}
    said = ""
    if step.commands:  # the assembler probe, on a board: Triton's own assembler and the board's
        with make_work_folder(ASSEMBLER_WORK) as work:  # its TMPDIR, held: a kill leaves it to the next run
            probed = run.run(step.commands[0], "", env={"TMPDIR": str(work)})
        triton, said = _board_assembler(_last_json_object(probed.stdout, "assembler"))
        if said and not triton:
            run.warnings.append(said)
    kept = protect(run.staging, list(run.plan.route.kept()), triton)
    return f"constraints kept in {kept}" + (f"; {said}" if said else "")


def _board_assembler(report: Mapping[str, Any]) -> Tuple[Dict[str, str], str]:
    """The variable that points Triton at the board's assembler, where Triton's own cannot
    assemble for the GPU and the board's can; and what to say of it (nothing where Triton's
    own can, or the environment has no Triton)."""
    own, board = report.get("assembler"), report.get("candidate")
    if not isinstance(own, dict) or own.get("assembled"):
        return {}, ""
    refused = f"Triton's {own.get('name')} cannot assemble {own.get('arch')} ({own.get('error')})"
    if isinstance(board, dict) and board.get("assembled"):
        return ({str(own["variable"]): str(board["path"])},
                f"{refused}: {own['variable']} names {board['path']} in the activate scripts")
    return {}, f"{refused}, nor can the board's {board.get('path') if isinstance(board, dict) else 'ptxas'}: " \
               "torch.compile will fail on this GPU (the doctor's compile check says what to do)"


def _check(step: Step, run: Run) -> str:
    check_command, smoke_command, *added = step.commands
    interrupted = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        # In a group of its own, ended here on an interruption: a SIGTERM to the tool alone (a CI
        # runner's stop) reaches no child, and the pool would wait for the import to finish.
        smoke_future = pool.submit(runner.run, smoke_command, timeout=300, own_group=True, cancel=interrupted)
        try:
            check = pip_check(run.python, check_command)
            smoke = smoke_future.result()
        except BaseException:
            runner.end_children(interrupted)
            raise
    run.outcome(check, f"resolve the conflict uv pip check names, then run: {run.rerun}")
    if not smoke.ok:
        raise StepFailed("check", f"step 'check' failed: {' '.join(run.plan.target.smoke)} -> "
                                  f"{smoke.last_stderr_line() or 'exit ' + str(smoke.returncode)}",
                         f"fix the cause above, then run: {run.rerun}")
    detail = f"dependencies consistent; {run.plan.target.title} imports (device: {smoke.stdout.strip() or '?'})"
    if run.plan.additions:
        detail += f"; {_check_additions(run, added.pop(0))}"
    for command, shown in zip(added, run.plan.check_commands):
        detail += f"; {_check_command(run, command, shown)}"
    write_own(state_of(run.staging) / CHECKED_FILE, distributions_state(run.staging) + "\n")
    return detail


def _check_additions(run: Run, command: Sequence[str]) -> str:
    """The additions probe: every project --with put on the stack imports its top-level modules;
    one that does not fails the step, naming the library the loader missed and its package."""
    imports = additions_imports(runner.run(command, timeout=300))
    if isinstance(imports, str):
        raise StepFailed("check", f"step 'check' failed: the additions probe: {imports}",
                         f"fix the cause above, then run: {run.rerun}")
    for entry in imports:
        if entry.error is None:
            continue
        what = f"import {entry.module}" if entry.module else entry.requirement
        missing = entry.missing_library(run.plan.platform.cuda, run.python, uv_command())
        provider = f" ({missing.file} is in {missing.provided_by})" if missing and missing.provided_by else ""
        fix = (f"{missing.fix}, then run: {run.rerun}" if missing and missing.fix
               else f"fix the cause above, then run: {run.rerun}")
        raise StepFailed("check", f"step 'check' failed: {entry.requirement}: {what} failed: {entry.error}{provider}",
                         fix)
    return "; ".join([entry.describe() for entry in imports] + _check_gpu_code(run, imports))


def _check_gpu_code(run: Run, imports: Sequence[AdditionImport]) -> List[str]:
    """What the added projects' shared objects carry for this GPU, read before the switch: code
    that cannot run here fails the step, naming the file and why; code that runs only by CUDA's
    compatibility rule is a warning the install and its evidence carry."""
    added = {entry.distribution: entry.requirement for entry in imports if entry.distribution}
    if not added or run.plan.platform is None:
        return []
    inspection = inspect_added(site_packages_of(run.staging), sorted(added), run.plan.platform, run.plan.channel)
    if inspection.cannot_run or inspection.unreadable:
        report = (inspection.cannot_run + inspection.unreadable)[0]
        requirement = added.get(report.distribution or "", report.distribution or "it")
        raise StepFailed("check", f"step 'check' failed: {requirement}: {report.describe()}",
                         f"add a build of {requirement} with code for this GPU "
                         f"({inspection.board.name if inspection.board else 'its architecture'} SASS, or PTX its driver "
                         f"compiles: one built on the board from source has it), or leave {requirement} out; "
                         "the environment in use is unchanged")
    for report in inspection.by_rule:
        run.warnings.append(f"{report.distribution}: {report.describe()}")
    gpu = inspection.gpu_files
    return [f"GPU code of {', '.join(sorted(added))}: {len(gpu)} file{'s' if len(gpu) != 1 else ''} read, "
            f"{len(inspection.by_rule)} by CUDA's compatibility rule only"] if gpu else []


def _check_command(run: Run, command: Sequence[str], shown: str) -> str:
    """A --check-command in the new environment: one that fails fails the step, naming a missing
    library's package where its message names one."""
    done = runner.run(command, timeout=300)
    if done.ok:
        return f"`{shown}` passed"
    last = done.last_stderr_line() or f"exit {done.returncode}"
    missing = missing_library(done.stderr, run.plan.platform.cuda, run.python, uv_command())
    fix = (f"{missing.fix}, then run: {run.rerun}" if missing and missing.fix
           else f"fix the cause above (or the command), then run: {run.rerun}")
    raise StepFailed("check", f"step 'check' failed: --check-command {shown} -> {last}", fix)


def doctor(step: Step, run: Run) -> str:
    """The doctor on the new environment, in this process on the platform and channel the plan
    holds (its probes, the step's commands, run by the environment's interpreter); its evidence
    decides whether the environment is switched in."""
    plan = run.plan
    profile = plan.route.profile  # as recorded in the environment's plan.json, which the doctor reads
    evidence_path = state_of(run.staging) / EVIDENCE_FILE
    try:
        done = doctor_environment(
            run.python, plan.platform, load_catalog().match(plan.platform).channel,
            only=() if plan.verify else GPU_FREE_CHECKS, strict=False, preflight=not profile.gpu,
            evidence_file=str(evidence_path), progress=run.progress,
            install_command=redact(str(run.rerun)), platform_options=plan.doctor_platform_args)
    except JetsonInstallError as exc:
        raise StepFailed("verify", f"step 'verify' failed: {exc.message}", exc.fix) from None
    evidence = done.evidence
    checks = {check.get("id"): check for check in evidence.get("checks", []) if isinstance(check, dict)}
    started = checks.get("startup-hooks") or {}
    if started.get("status") == "fail" and evidence.get("headline") != "startup-hooks":
        # Start-up code that changes what torch reports is said whatever else failed first.
        run.warnings.append(str(started.get("detail")))
    if done.report.exit_code != 0:
        first = checks.get(evidence.get("headline")) or {}
        detail = f"{first['id']}: {first.get('detail')}" if first else "a required check failed"
        # A failed verify discards the environment: a fix acting on it would point at nothing.
        fixes = [fix_after_discard(first["fix"], run.staging, str(run.rerun))] if first.get("fix") else []
        if plan.verify and profile.gpu and first.get("id") not in GPU_FREE_CHECKS:
            fixes.append(f"for image builds without GPU access: {run.rerun.with_flag('--no-verify')}")
        raise StepFailed("verify", f"step 'verify' failed: {detail} (evidence: {kept_evidence(run.staging)})",
                         "; ".join(fixes) or None)
    if not plan.verify:
        return f"torch is the expected build for this Python (GPU checks skipped: --no-verify); evidence in {evidence_path}"
    if not profile.gpu:
        return f"{profile.name} checks passed (CPU torch; not Jetson GPU evidence); evidence in {evidence_path}"
    return f"all required checks passed; evidence in {evidence_path}"


def _source_build(step: Step, run: Run) -> str:
    planned = run.plan.route.planned_build()
    assert planned is not None
    return run_build_step(planned, step, run)
