"""Which checks run, in which order, over one run of the probes; run_doctor is the entry point."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
import json
import os
import re
import shutil
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from jetson_install.tools import runner
from jetson_install.base import schema
from jetson_install.doctor.checks_bitsandbytes import (
    check_bnb_int8,
    check_bnb_kernels,
    check_bnb_library,
)
from jetson_install.doctor.checks_compile import check_compile
from jetson_install.doctor.checks_environment import check_obliteratus, check_pip
from jetson_install.doctor.checks_libraries import check_libraries
from jetson_install.doctor.checks_integrity import check_loaded_files, check_vendor_files, integrity_evidence
from jetson_install.doctor.checks_startup import as_started_evidence, check_startup_hooks
from jetson_install.doctor.checks_kernels import check_cuda_bf16, check_cuda_conv2d
from jetson_install.doctor.checks_platform import check_platform, check_python_abi
from jetson_install.doctor.checks_runtime import check_jetson_contract, check_transformers_torch
from jetson_install.doctor.checks_torch import (
    check_cuda_arch,
    check_cuda_available,
    check_cuda_matmul,
    check_numpy,
    check_torch_build,
    check_torch_import,
)
from jetson_install.doctor.profiles import Profile
from jetson_install.doctor.request import DoctorRequest
from jetson_install.doctor.context import (
    Context,
    ProbeOutcome,
    _run_pip_check,
    _run_probe,
    _run_sealed,
    _run_started,
)
from jetson_install.doctor.report import (
    DoctorReport,
    _bnb_evidence,
    _environment_evidence,
    _platform_evidence,
    _runtime_evidence,
    _torch_evidence,
)
from jetson_install.base.schema import evidence_schema
from jetson_install.base.work_folders import WorkFolder, make_work_folder
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, SKIP, CheckResult, Verdict
from jetson_install.base.errors import BadInput
from jetson_install.envs.interpreters import known_interpreter
from jetson_install.envs.activation import activate_variables
from jetson_install.envs.manifest import manifest_path
from jetson_install.envs.record import record_path
from jetson_install.doctor.additions import additions_evidence, check_additions
from jetson_install.probes import ASSEMBLER_WORK, additions_command, assembler_command, check_command, integrity_command


@dataclass(frozen=True)
class CheckSpec:
    """What one check needs and how it judges the probes' findings."""

    id: str
    title: str
    required: bool
    probe: str  # "host" | "torch" | "bitsandbytes" | "integrity" | "uv": what must run for the check
    evaluate: Callable[[Context], Verdict] = field(repr=False, compare=False)
    needs: Tuple[str, ...] = ()  # checks that must be ok (or warn) for this one to mean anything
    # Checks whose failure also makes this one fail (a CPU-only torch sees no CUDA): when both
    # fail, theirs is the problem to name first.
    explained_by: Tuple[str, ...] = ()
    # Further probes the check reads ("assembler"; "target": the torch probe as started reads
    # OBLITERATUS and transformers).
    also: Tuple[str, ...] = ()
    # Whether the channel's catalog entry decides if a failure counts (Channel.gate): for checks
    # whose meaning differs between channels.
    channel_decides: bool = False


_TORCH_BUILD = ("torch-build",)
CHECKS: Tuple[CheckSpec, ...] = (
    CheckSpec("platform", "Jetson platform detected", True, "host", check_platform),
    CheckSpec("python-abi", "Python ABI matches the installed wheels", True, "torch", check_python_abi),
    # From the files, before torch imports: a library the vendor builds link and the loader cannot
    # find is the cause a failed import names, here with the file that needs it and its provider.
    CheckSpec("libraries", "every library the vendor builds link is found", True, "torch", check_libraries),
    # The probes that decide `cuda` run sealed, then as the user's python starts: code that runs
    # at start-up must not change what they report.
    CheckSpec("startup-hooks", "code that runs at interpreter start-up changes nothing torch reports", True,
              "torch", check_startup_hooks, also=("torch-started", "bitsandbytes-started", "integrity")),
    CheckSpec("vendor-files", "the vendor builds' files are the ones their wheels held", True, "integrity",
              check_vendor_files),
    CheckSpec("loaded-files", "every file that ran in the sealed proof is accounted for", True, "integrity",
              check_loaded_files, also=("torch", "ran")),
    CheckSpec("torch-import", "torch imports", True, "torch", check_torch_import,
              explained_by=("python-abi", "libraries")),
    CheckSpec("torch-build", "torch is the vendor CUDA build", True, "torch", check_torch_build, ("torch-import",)),
    CheckSpec("cuda-available", "torch sees a CUDA device", True, "torch", check_cuda_available, ("torch-import",),
              _TORCH_BUILD),
    CheckSpec("cuda-arch", "torch has kernels for the device", True, "torch", check_cuda_arch, ("cuda-available",)),
    CheckSpec("cuda-matmul", "a CUDA matmul is correct", True, "torch", check_cuda_matmul, ("cuda-available",)),
    CheckSpec("cuda-conv2d", "a CUDA conv2d is correct", True, "torch", check_cuda_conv2d, ("cuda-available",)),
    CheckSpec(
        "cuda-bf16", "bf16 autocast with a backward pass is correct", True, "torch", check_cuda_bf16,
        ("cuda-available",),
    ),
    # Its assembler half needs no GPU, so it needs no other check; the channel decides whether it counts.
    CheckSpec("compile", "torch.compile works: Triton assembles for the GPU, a compiled function matches eager",
              True, "torch", check_compile, also=("assembler",), channel_decides=True),
    CheckSpec("numpy", "NumPy version suits torch", True, "torch", check_numpy),
    CheckSpec("bnb-library", "bitsandbytes loaded its CUDA library", True, "bitsandbytes", check_bnb_library, (),
              ("torch-import", "cuda-available")),
    CheckSpec(
        "bnb-kernels", "bitsandbytes NF4 kernels run", True, "bitsandbytes", check_bnb_kernels, ("bnb-library",)
    ),
    CheckSpec("bnb-int8", "bitsandbytes 8-bit matmul runs", True, "bitsandbytes", check_bnb_int8, ("bnb-library",)),
    # The target's checks read the torch probe as the user's python starts it (Context.target).
    CheckSpec("obliteratus", "OBLITERATUS uses cuda", True, "torch", check_obliteratus, ("torch-import",),
              ("cuda-available",), also=("torch-started", "target")),
    CheckSpec(
        "jetson-contract", "OBLITERATUS' Jetson runtime contract holds", True, "torch", check_jetson_contract,
        ("cuda-available", "obliteratus"), also=("torch-started", "target"),
    ),
    CheckSpec(
        "transformers-torch", "transformers sees torch", True, "torch", check_transformers_torch, ("torch-import",),
        also=("torch-started", "target"),
    ),
    # What the user put on the stack: a missing system library (libGL.so.1) fails here, not in
    # the user's first import.
    CheckSpec("additions", "what was added to the stack imports, and its check commands pass", True, "additions",
              check_additions),
    CheckSpec("pip-check", "uv pip check is clean", True, "uv", check_pip),
)
_BY_ID = {spec.id: spec for spec in CHECKS}
# The sealed proof's pycache folder, in the temporary folder: PREFIX + PID + "-...".
_PROOF_PREFIX = "jetson-install-proof-"
# What an install checks even with --no-verify (image builds without GPU access): these need
# no GPU, and a CPU-only or other-CUDA torch, a library it cannot load, or changed vendor files must not
# reach the user's environment.
GPU_FREE_CHECKS = ("python-abi", "libraries", "startup-hooks", "vendor-files", "loaded-files", "torch-import",
                   "torch-build", "additions")


def headline(checks: Sequence[CheckResult]) -> Optional[CheckResult]:
    """The most fundamental failing required check: one that no other failing check explains
    (through what it needs or what explains it), first in table order among those."""
    failing = {check.id for check in checks if check.required and check.status == FAIL}

    def causes(check_id: str) -> Set[str]:
        found, pending = set(), list(_BY_ID[check_id].needs + _BY_ID[check_id].explained_by)
        while pending:
            cause = pending.pop()
            if cause not in found:
                found.add(cause)
                pending.extend(_BY_ID[cause].needs + _BY_ID[cause].explained_by)
        return found

    for check in checks:
        if check.id in failing and not (causes(check.id) & failing):
            return check
    return None


def list_checks() -> List[Tuple[str, str, bool]]:
    return [(spec.id, spec.title, spec.required) for spec in CHECKS]


def _with_prerequisites(only: Sequence[str]) -> List[CheckSpec]:
    unknown = [check_id for check_id in only if check_id not in _BY_ID]
    if unknown:
        raise BadInput(
            f"unknown doctor check {', '.join(unknown)}; known: {', '.join(_BY_ID)}",
            fix="jetson-install doctor --list-checks",
        )
    if not only:
        return list(CHECKS)
    # A check whose prerequisite failed is skipped; its prerequisite runs too, so the
    # failure that explains the skip is always in the report.
    wanted = set()
    pending = list(only)
    while pending:
        check_id = pending.pop()
        if check_id not in wanted:
            wanted.add(check_id)
            pending.extend(_BY_ID[check_id].needs)
    return [spec for spec in CHECKS if spec.id in wanted]


def _resolve_interpreter(python: str) -> str:
    # Absolute, so that fixes stay right after a `cd` (the bitsandbytes source build has one).
    found = os.path.abspath(python) if os.sep in python else shutil.which(python)
    if not found or not Path(found).is_file() or not os.access(found, os.X_OK):
        raise BadInput(
            f"no Python interpreter at {python}",
            fix="pass --python with the path of the environment's python, or --venv with an existing environment",
        )
    # An install's new environment is a venv of a Python the install asked already: no process.
    known = known_interpreter(found)
    if known is not None and int(known.version.split(".")[0]) >= 3:
        return found
    # Written for Python 2 and 3 alike, so a Python 2 target is named as such; /bin/true
    # and other programs that exit 0 print no version. Without the environment's start-up code
    # (-E -s -S, which Python 2 knows too): nothing of it runs before the sealed proof either.
    answer = runner.run([found, "-E", "-s", "-S", "-c", "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"],
                        timeout=60)
    version = answer.stdout.strip()
    if not answer.ok or not re.match(r"^\d+\.\d+$", version):
        raise BadInput(f"{python} is not a Python interpreter (it did not answer with its version)",
                       fix="pass --python with the path of the environment's python, or --venv with an existing environment")
    if int(version.split(".")[0]) < 3:
        raise BadInput(f"{python} is Python {version}: the doctor checks Python 3 environments (the JetPack torch "
                       "is built for Python 3)",
                       fix="pass the environment's Python 3 with --python PATH, or make one: jetson-install obliteratus")
    return found


def run_doctor(request: DoctorRequest, progress: Optional[Callable[[str], None]] = None) -> DoctorReport:
    """Run the request's checks against the environment of its interpreter. A probe busy for
    more than a couple of seconds tells ``progress`` what it waits for.

    ``strict`` (the request's): the vendor files are compared by digest (otherwise by size:
    hashing a CUDA torch takes seconds, see docs/benchmarks.md) and a foreign start-up hook fails.

    Raises BadInput only when the interpreter does not exist or a check id is unknown (the
    request refused, when it was made, the strict gate with --check or for the preflight profile).
    """
    interpreter = _resolve_interpreter(request.python)
    selected = _with_prerequisites(request.only)
    probes_needed = {spec.probe for spec in selected} | {probe for spec in selected for probe in spec.also}
    # What the activate scripts export for Triton (the board's assembler, where the install
    # pointed it there): the probes that compile see the environment as its user does.
    triton_env = {name: value for name, value in activate_variables(Path(interpreter).parent.parent).items()
                  if name.startswith("TRITON_")}
    platform = request.platform
    assembler = (assembler_command(interpreter, platform.compute_capability, platform.board_root)
                 if platform is not None and platform.compute_capability and "assembler" in probes_needed else None)
    interrupted = threading.Event()  # set on an interruption: a probe not yet started is not started
    # Two phases. The sealed proof first: the sealed probes side by side, beside the integrity
    # probe (-I -S, which judges what ran in them), none of which runs the environment's
    # start-up code. Then, once all of those have ended and the proof's pycache folder is gone,
    # what runs the environment's own code (its start-up hooks, uv's query of the interpreter
    # included, a Triton's ptxas, a check command): nothing of it may run while the proof does,
    # where it could write into the folder the sealed probes read (a timestamp .pyc of a
    # source they import) or change a file between its run and its judgment.
    # Fresh, empty, 0700, shared by the sealed probes; held by this process while it lives, so
    # the next run removes it where a SIGKILL left it, and no run removes it before.
    proof_folder = make_work_folder(_PROOF_PREFIX)
    pycache = str(proof_folder.path)
    assembler_folder: Optional[WorkFolder] = None  # the assembler probe's TMPDIR, held the same way
    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            try:
                torch_future = (
                    pool.submit(_run_sealed, interpreter, "torch", pycache, request.timeout, progress, triton_env,
                                interrupted)
                    if "torch" in probes_needed
                    else None
                )
                bnb_future = (
                    pool.submit(_run_sealed, interpreter, "bitsandbytes", pycache, request.timeout, progress,
                                cancel=interrupted)
                    if "bitsandbytes" in probes_needed
                    else None
                )
                sealed = [future for future in (torch_future, bnb_future) if future is not None] \
                    if "ran" in probes_needed else None
                integrity_future = (
                    pool.submit(_run_integrity, interpreter, request, progress, sealed, interrupted)
                    if "integrity" in probes_needed
                    else None
                )
                _wait_all([torch_future, bnb_future, integrity_future])
                proof_folder.close()
                # As the user's python starts them, once the sealed run has ended: never two CUDA
                # contexts of one probe at once (a 4 GB module has little to spare).
                pip_future = (pool.submit(_safe_pip_check, interpreter, interrupted) if "uv" in probes_needed
                              else None)
                started_future = (
                    pool.submit(_run_started, interpreter, "torch", request.timeout, "target" in probes_needed,
                                triton_env, interrupted)
                    if "torch-started" in probes_needed and torch_future is not None
                    else None
                )
                bnb_started_future = (
                    pool.submit(_run_started, interpreter, "bitsandbytes", request.timeout, cancel=interrupted)
                    if "bitsandbytes-started" in probes_needed and bnb_future is not None
                    else None
                )
                # Runs the environment's Triton's ptxas (and is started as the user's python starts).
                assembler_folder = make_work_folder(ASSEMBLER_WORK) if assembler is not None else None
                assembler_future = (
                    pool.submit(_run_probe, interpreter, "assembler", request.timeout, progress, assembler,
                                dict(triton_env, TMPDIR=str(assembler_folder.path)), interrupted)
                    if assembler_folder is not None
                    else None
                )
                added_future = (
                    pool.submit(_run_probe, interpreter, "additions", request.timeout, progress,
                                additions_command(interpreter, request.additions),
                                cancel=interrupted)
                    if "additions" in probes_needed and request.additions
                    else None
                )
                commands_future = (
                    pool.submit(_run_check_commands, interpreter, request.check_commands, request.timeout, interrupted)
                    if "additions" in probes_needed and request.check_commands
                    else None
                )
                _wait_all([pip_future, added_future, commands_future, assembler_future, started_future,
                           bnb_started_future])
                ctx = Context(
                    python=interpreter,
                    platform=request.platform,
                    channel=request.channel,
                    vendor=request.vendor,
                    torch=torch_future.result() if torch_future else ProbeOutcome("torch", {}, None),
                    bnb=bnb_future.result() if bnb_future else ProbeOutcome("bitsandbytes", {}, None),
                    pip_check=pip_future.result() if pip_future else None,
                    source_commit=request.source_commit,
                    install_command=request.install_command,
                    profile=request.profile,
                    platform_options=request.platform_options,
                    target=request.target,
                    integrity=(integrity_future.result() if integrity_future
                               else ProbeOutcome("integrity", {}, None)),
                    strict=request.strict,
                    additions_requested=request.additions if added_future else (),
                    additions=added_future.result() if added_future else ProbeOutcome("additions", {}, None),
                    check_commands=commands_future.result() if commands_future else (),
                    assembler=(assembler_future.result() if assembler_future
                               else ProbeOutcome("assembler", {}, None)),
                    torch_started=started_future.result() if started_future else ProbeOutcome("torch", {}, None),
                    bnb_started=(bnb_started_future.result() if bnb_started_future
                                 else ProbeOutcome("bitsandbytes", {}, None)),
                )
            except BaseException:
                # Ctrl-C reaches no probe (each runs in a process group of its own), and a SIGTERM to
                # the tool alone no child at all (uv pip check): the pool would wait for them to end.
                runner.end_children(interrupted)
                raise
    finally:  # every probe has ended (the pool waited): nothing writes into them now
        proof_folder.close()
        if assembler_folder is not None:
            assembler_folder.close()
    results: Dict[str, CheckResult] = {}
    for spec in selected:
        if spec.id in request.left_out:
            results[spec.id] = CheckResult(spec.id, request.profile.title(spec.id, spec.title), NOT_APPLICABLE,
                                           request.left_out[spec.id], None, spec.required)
        else:
            results[spec.id] = _evaluate(spec, ctx, results, request.profile)
    return DoctorReport(
        python=interpreter,
        generated_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        platform=_guarded(_platform_evidence, ctx, "platform"),
        torch=_guarded(lambda c: _torch_evidence(c, results), ctx, "torch"),
        bitsandbytes=_guarded(lambda c: _bnb_evidence(c, results), ctx, "bitsandbytes"),
        environment=_guarded(_environment_evidence, ctx, "environment"),
        runtime=_guarded(lambda c: _runtime_evidence(c, results), ctx, "runtime"),
        integrity=_guarded(_integrity_section, ctx, "integrity"),
        additions=_guarded(additions_evidence, ctx, "additions"),
        checks=tuple(results.values()),
        strict=request.strict,
        headline=getattr(headline(tuple(results.values())), "id", None),
        profile=request.profile,
        complete=len(results) == len(CHECKS),
    )


def _wait_all(futures: Sequence[Optional["Future[Any]"]]) -> None:
    """Until every one of `futures` (None: not started) has ended. Waited for a tick at a time:
    a signal may wake any thread, and only this one's return to Python code raises the Ctrl-C."""
    pending = [future for future in futures if future is not None]
    while wait(pending, timeout=runner.TICK_SECONDS).not_done:
        pass


def _run_integrity(python: str, request: DoctorRequest, progress: Optional[Callable[[str], None]],
                   sealed: Optional[Sequence["Future[ProbeOutcome]"]], cancel: threading.Event) -> ProbeOutcome:
    """The integrity probe; with `sealed`, once those probes have ended, judging what ran in
    them (their accounts on its stdin)."""
    accounts = {outcome.name: dict(outcome.files) or None for outcome in (future.result() for future in sealed or ())}
    command = integrity_command(python, recorded_vendor(python), request.strict,
                                str(manifest_path(Path(python).parent.parent)), ran=sealed is not None)
    return _run_probe(python, "integrity", request.timeout, progress, command, cancel=cancel,
                      input_text=json.dumps(accounts) if sealed is not None else None)


def recorded_vendor(python: str) -> Optional[str]:
    """The vendor.json of the environment of `python`, which names its vendor builds and
    companions, where jetson-install made it."""
    path = record_path(Path(python).parent.parent)
    return str(path) if path.is_file() else None


def _integrity_section(ctx: Context) -> Dict[str, Any]:
    started = as_started_evidence(ctx)
    return dict(integrity_evidence(ctx, started["same"] if started else None), as_started=started)


def _guarded(build: Callable[[Context], Dict[str, Any]], ctx: Context, section: str) -> Dict[str, Any]:
    """Evidence from probe output of an unexpected shape or type is left empty, never a crash
    and never schema-invalid; the checks over the same output already say what is wrong."""
    try:
        built = build(ctx)
    except (AttributeError, KeyError, TypeError, ValueError):
        built = {}
    conformed: Dict[str, Any] = schema.conform(built, evidence_schema()["properties"][section])
    return conformed


def _run_check_commands(python: str, commands: Sequence[str], timeout: float, cancel: threading.Event
                        ) -> Tuple[Tuple[str, runner.Completed], ...]:
    """Each --check-command in the environment of `python`, one after the other."""
    return tuple((command, runner.run(check_command(python, command), timeout=timeout, own_group=True,
                                      cancel=cancel))
                 for command in commands)


def _safe_pip_check(python: str, cancel: threading.Event) -> runner.Completed:
    try:
        with runner.cancelled_with(cancel):
            return _run_pip_check(python)
    except Exception as exc:  # a missing uv module or binary is a failed check, not a crash
        return runner.Completed(("uv", "pip", "check"), 127, "", f"{type(exc).__name__}: {exc}")


def _evaluate(spec: CheckSpec, ctx: Context, earlier: Mapping[str, CheckResult], profile: Profile) -> CheckResult:
    blockers = [earlier[need] for need in spec.needs if earlier[need].status in (FAIL, SKIP)]
    moot = [earlier[need] for need in spec.needs if earlier[need].status == NOT_APPLICABLE]
    if moot:
        status, detail, fix = NOT_APPLICABLE, f"does not apply: {moot[0].detail}", None
    elif blockers:
        status, detail, fix = SKIP, f"needs {blockers[0].id}, which did not pass", None
    else:
        try:
            status, detail, fix = spec.evaluate(ctx)
        except Exception as exc:  # a surprise in probe output must not take the other checks down
            status = FAIL
            detail = f"doctor could not evaluate this check: {type(exc).__name__}: {exc}"
            fix = "report this as a jetson-install bug, with `jetson-install doctor --json` attached"
    required = spec.required
    channel = ctx.channel
    rule = channel.gate(spec.id) if spec.channel_decides and channel is not None else None
    if channel is not None and rule is not None:
        required = rule.required
        if not required and status not in (OK, NOT_APPLICABLE):
            detail += f" (not required on channel {channel.id}: {rule.reason})"
    return CheckResult(spec.id, profile.title(spec.id, spec.title), status, detail, fix if status != OK else None,
                       required)
