"""The commands' work, as plain functions that take what the command line parsed and return
a result value; cli.py only parses, calls one of these, and renders what it returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install.base.errors import BadInput, NotAJetson, Unsupported

if TYPE_CHECKING:
    from jetson_install.catalog.catalog import Catalog, Channel
    from jetson_install.doctor.on_environment import DoctorRun
    from jetson_install.fleet.evidence import Verdict
    from jetson_install.planning.fixes import Rerun
    from jetson_install.tools.index import SetReport
    from jetson_install.running.install import InstallResult
    from jetson_install.fleet.labels import RunnerLabels
    from jetson_install.fleet.lock import LockResult
    from jetson_install.planning.plan import Plan
    from jetson_install.board.platform import Platform

__all__ = ["Given", "PlatformOptions", "InstallOptions", "detect_platform", "platform_and_channel", "make_install_plan",
           "resolve_plan", "install_plan", "preview", "dry_run", "default_venv", "venv_path", "doctor_interpreter", "doctor",
           "board_lock", "check_channels", "unknown_channel", "constraint_files",
           "Dockerfile", "dockerfile", "EntrypointStart", "container_start", "labels", "judged",
           "environment_link", "Addition", "addition", "default_environment"]


@dataclass(frozen=True)
class Given:
    """An option's value and where it came from (the flag, or its environment variable)."""

    value: Optional[str]
    source: str


@dataclass(frozen=True)
class PlatformOptions:
    root: Given
    l4t: Given
    soc: Given = Given(None, "--soc")


@dataclass(frozen=True)
class InstallOptions:
    """What a target's command (`obliteratus`, `torch`), `plan TARGET` and `lock` were given."""

    target: str
    platform: PlatformOptions
    vendor_index: Given
    default_index: Given
    allow_insecure_index: bool = False
    venv: Optional[str] = None
    python: Optional[str] = None
    source: Optional[str] = None
    ref: Optional[str] = None
    verify: bool = True
    fallback: bool = False
    use_existing_torch: bool = False
    bitsandbytes: Optional[str] = None
    preflight: bool = False
    cpu_index: Optional[str] = None
    added: Tuple[str, ...] = ()  # --with


def detect_platform(options: PlatformOptions) -> "Platform":
    from jetson_install.board.platform import L4TOverride, SocOverride, detect
    from jetson_install.board.samples import resolve_root

    override = L4TOverride(options.l4t.value, options.l4t.source) if options.l4t.value is not None else None
    soc = SocOverride(options.soc.value, options.soc.source) if options.soc.value is not None else None
    return detect(resolve_root(options.root.value or "/", options.root.source), override, soc_override=soc)


def platform_and_channel(options: PlatformOptions) -> Tuple[Optional["Platform"], Optional["Channel"]]:
    """The platform and its channel, or (None, None) off a Jetson: doctor still checks torch there."""
    from jetson_install.catalog.catalog import load_catalog

    try:
        platform = detect_platform(options)
    except NotAJetson:
        return None, None
    return platform, load_catalog().match(platform).channel


def default_venv(target: str) -> Path:
    from jetson_install.envs.environment import default_environments

    return default_environments() / target


def venv_path(value: str) -> Path:
    """--venv as typed: an empty value or a control character (a newline from a script) is
    refused, never read as the default location or written into a path."""
    if not value.strip():
        raise BadInput("--venv is empty", fix="give the environment's location, e.g. --venv ~/obliteratus, or drop --venv")
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7f), None)
    if bad is not None:
        raise BadInput(f"--venv {value!r} contains the control character {bad!r}",
                       fix="give a location without control characters (a newline often comes from a script's variable)")
    return Path(value).expanduser()


def make_install_plan(options: InstallOptions, keep_added: bool = True) -> "Plan":
    """The plan for the options: the board's platform (with --preflight, the --l4t release on
    any aarch64 machine), the index settings and the kept stack, if any; `keep_added`: with
    what the environment at --venv was given before (a lock is made for --with's alone)."""
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.planning.planner import make_plan
    from jetson_install.catalog.settings import check_index_url, load_index_settings

    if options.preflight:
        try:
            platform = detect_platform(options.platform)
        except NotAJetson as exc:
            # A preflight runs on aarch64 machines that are mostly not Jetsons: there the channel
            # comes from --l4t, and the fix for a missing one says so.
            raise NotAJetson(exc.message, fix="name the Jetson release to preflight for: --l4t 36.4.3 "
                                              "(JetPack 6.2; see `jetson-install channels`)") from None
    else:
        platform = detect_platform(options.platform)
    settings = load_index_settings(options.vendor_index.value, options.vendor_index.source,
                                   options.default_index.value, options.default_index.source,
                                   options.allow_insecure_index)
    catalog = load_catalog()
    if options.target not in catalog.targets:
        raise BadInput(f"no target {options.target!r} in {catalog.path}",
                       fix=f"use one of: {', '.join(sorted(catalog.targets))}")
    venv = venv_path(options.venv) if options.venv is not None else default_venv(options.target)
    existing = None
    if options.use_existing_torch:
        from jetson_install.envs.interpreters import inspect_stack

        existing = inspect_stack(options.python or _python3())
    if options.cpu_index:
        check_index_url(options.cpu_index, "--cpu-index", options.allow_insecure_index)
    return make_plan(
        platform, catalog, options.target, settings, venv.absolute(),
        interpreter=options.python, source=options.source, ref=options.ref, verify=options.verify,
        fallback=options.fallback, existing=existing, bitsandbytes=options.bitsandbytes,
        preflight=options.preflight, cpu_index=options.cpu_index,
        added=(kept_additions(venv.absolute()) if keep_added else ()) + tuple(options.added),
    )


def kept_additions(venv: Path) -> Tuple[str, ...]:
    """What the environment at `venv` was given with --with (or `add`): a re-run keeps it."""
    from jetson_install.envs.environment import EnvironmentHome, recorded_additions

    current = EnvironmentHome(venv).current()
    return recorded_additions(current) if current is not None else ()


def _python3() -> str:
    """The interpreter an image or a system install carries torch in: python3 on PATH."""
    import shutil

    found = shutil.which("python3")
    if found is None:
        raise BadInput("--use-existing-torch: no python3 on PATH", fix="pass the interpreter that has torch: --python PATH")
    return found


def resolve_plan(plan: "Plan", rerun: "Rerun", python: Optional[str] = None) -> "Plan":
    """`plan` with the set the vendor index resolves to, for the Python an install would take
    (or `python`); an index that does not answer gets the whole commands that go around it
    (the fallback source, a mirror), as in an install."""
    from jetson_install.tools import index
    from jetson_install.planning.fixes import StepContext, index_down_fix, other_python_fix
    from jetson_install.catalog.identity import NoBuildForPython
    from jetson_install.planning.plan import resolved_plan
    from jetson_install.board.platform_data import ubuntu_glibc

    if not plan.supported or plan.vendor is None or not plan.route.resolves():
        return plan
    if python is None:
        from jetson_install.envs.interpreters import choose_interpreter

        # The Python an install would take decides the files; with none here, the channel's.
        found, _ = choose_interpreter(plan.route.interpreter_policy(plan), plan.channel.id if plan.channel else "?")
        python = found.abi if found is not None else (plan.python_abi or "3")
    fallback = plan.route.fallback_location(plan) is not None and \
        plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index")
    context = StepContext("vendor", rerun, plan.vendor_index, Path(plan.venv + ".d"), "", fallback=fallback)
    try:
        return resolved_plan(plan, index.resolve(plan.vendor, plan.vendor_index, python,
                                                 ubuntu_glibc(plan.platform.ubuntu)))
    except index.IndexUnreachable as exc:
        raise index.IndexUnreachable(exc.message, fix=index_down_fix(context)) from None
    except NoBuildForPython as exc:
        from jetson_install.envs.interpreters import served_interpreter

        raise NoBuildForPython(exc.message, other_python_fix(context, exc.python, exc.served,
                                                             served_interpreter(plan.python_abi, exc.served)),
                               exc.python, exc.served) from None


def given_platform(options: PlatformOptions) -> Tuple[str, ...]:
    """The --root and --l4t the user typed, for the commands a fix prints."""
    words: List[str] = []
    for flag, given in (("--root", options.root), ("--l4t", options.l4t)):
        if given.value is not None and given.source == flag:
            words += [flag, given.value]
    return tuple(words)


def doctor_interpreter(venv: Optional[str], python: Optional[str]) -> Tuple[str, Optional[str]]:
    """The interpreter `doctor` checks: --python, else the environment's (--venv, else the default
    one that exists), and a note naming the default it took."""
    if venv and python:
        raise BadInput("--venv and --python were both given", fix="pass only one of them")
    if python:
        return python, None
    link, note = (venv_path(venv), None) if venv is not None else default_environment("doctor")
    interpreter = link / "bin" / "python"
    if not interpreter.exists():
        raise BadInput(f"no environment at {link}",
                       fix="pass --venv DIR or --python PATH, or install first: jetson-install obliteratus (or "
                           "jetson-install torch, the stack alone)")
    return str(interpreter), note


def doctor(python: str, options: PlatformOptions, only: Sequence[str], strict: bool, no_gpu: bool, preflight: bool,
           evidence_file: Optional[str], gate_file: Optional[str], progress: Any) -> "DoctorRun":
    """The doctor on the environment of `python`, on the platform the options give, judged
    against what it was made with; its evidence (and the gate record) written where asked."""
    from jetson_install.base.outputs import check_output_directory
    from jetson_install.doctor import GPU_FREE_CHECKS
    from jetson_install.doctor.on_environment import doctor_environment

    for option, path in (("--evidence", evidence_file), ("--gate-evidence", gate_file)):
        if path:
            check_output_directory(option, path)
    if no_gpu and (only or strict):
        raise BadInput("--no-gpu selects the checks that need no GPU; --check and --strict select others",
                       fix="drop --no-gpu, or drop --check/--strict")
    platform, channel = platform_and_channel(options)
    run = doctor_environment(python, platform, channel, only=GPU_FREE_CHECKS if no_gpu else only, strict=strict,
                             preflight=preflight, evidence_file=evidence_file, progress=progress, install_command=None,
                             platform_options=given_platform(options))
    if gate_file:
        from jetson_install.fleet.evidence import gate_record_text
        from jetson_install.base.outputs import write_output

        write_output("--gate-evidence", gate_file, gate_record_text(run.evidence, run.report.exit_code, os.environ))
    return run


def install_plan(options: InstallOptions, lock_file: Optional[str], wheelhouse: Optional[str], rerun: "Rerun") -> "Plan":
    """The plan `obliteratus` carries out: the options' plan, or a lock's (--lock, --wheelhouse)."""
    if options.preflight:
        from jetson_install.planning.routes.preflight import require_aarch64

        require_aarch64()  # before anything else: no plan made here could run
    if options.added and (lock_file or wheelhouse):
        from jetson_install.planning.fixes import Rerun

        # A lock installs exactly its files: an addition beside it would be left out unsaid.
        option = "--lock" if lock_file else "--wheelhouse"
        locked = rerun.keeping("lock", ("--root", "--l4t", "--soc", "--vendor-index", "--default-index", "--source",
                                        "--ref", "--python", "--with"), ("--vendor-fallback", "--allow-insecure-index"))
        lock_command = Rerun(("lock", options.target, *locked.argv[1:], "--output", "new.lock"))
        install_command = rerun.without("--with").without("--wheelhouse").with_option("--lock", "new.lock")
        raise BadInput(f"--with and {option} were both given: a lock installs exactly its files, so --with would add "
                       "nothing", fix=f"lock the additions with the rest, then install that lock: {lock_command} && "
                                      f"{install_command}")
    plan = make_install_plan(options)
    if plan.supported and (lock_file or wheelhouse):
        from jetson_install.planning.routes.lock import read_lock_in_use, with_lock

        plan = with_lock(plan, read_lock_in_use(lock_file, wheelhouse, plan, rerun))
    return plan


def preview(plan: "Plan", dry_run_asked: bool, as_json: bool) -> Tuple["Plan", Dict[str, Any], List[str]]:
    """What `--dry-run` (or an unsupported platform) shows instead of installing: the plan (as
    JSON, with whether the install would change anything), and the warnings of its checks."""
    if not (dry_run_asked and plan.supported):
        return plan, plan.to_json(), []
    from jetson_install.running.noop import would_change

    plan, warnings = dry_run(plan)
    data = plan.to_json()
    if as_json:
        data["would_change"], data["would_change_reason"] = would_change(plan)
    return plan, data, warnings


def dry_run(plan: "Plan") -> Tuple["Plan", List[str]]:
    """What the install would check before its first step, said by a dry run too (warnings);
    the plan then names the interpreter the install would take."""
    from jetson_install.base.errors import StepFailed
    from jetson_install.running.install import check_before_install
    from jetson_install.planning.plan import with_interpreter

    try:
        checked = check_before_install(plan, dry_run=True)
    except StepFailed as failure:
        # Not bad input: the preview still shows what would run where a Python is found.
        return plan, [f"the install would stop at step '{failure.step}': {failure.message}; fix: {failure.fix}"]
    return with_interpreter(plan, checked.interpreter.path), list(checked.warnings)


def fill_wheelhouse(lock_file: Path, directory: Path, tool_wheel: Optional[str], default_index: Given) -> Dict[str, Any]:
    """`wheelhouse`: the lock's files, and with `tool_wheel` jetson-install's own for the board."""
    from jetson_install.fleet.lock import tool_entries
    from jetson_install.catalog.lock_file import read_lock
    from jetson_install.fleet.wheelhouse import fill_wheelhouse as fill

    lock = read_lock(lock_file)
    if tool_wheel is not None and default_index.value is not None:
        from jetson_install.catalog.settings import check_index_url

        check_index_url(default_index.value, default_index.source, False)
    tool = tool_entries(Path(tool_wheel), lock, default_index.value) if tool_wheel is not None else []
    return fill(lock, directory, tool)


def constraint_files(directory: str, write: bool) -> List[str]:
    """`constraints`: check (or rewrite) constraints/<channel>.txt against wheels-index.toml."""
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.catalog.constraints import stale_files, write_files

    catalog = load_catalog()
    target = Path(directory)
    if write:
        return [f"wrote {target / name}" for name in write_files(catalog, target)]
    if not target.is_dir():
        raise BadInput(f"--dir {directory}: no such directory (`constraints` is a maintainer command for a "
                       "checkout of jetson-install; an installed one needs no constraints/ folder)",
                       fix="run it at the top of a jetson-install checkout, or pass --dir DIR")
    stale = stale_files(catalog, target)
    if stale:
        from jetson_install.base.errors import JetsonInstallError

        raise JetsonInstallError(f"out of date in {target}: {', '.join(stale)}",
                                 fix=f"jetson-install constraints --write --dir {directory}")
    return [f"{target}: up to date with {catalog.path}"]


def board_lock(options: InstallOptions, python: Optional[str], python_version: Optional[str], output: Path,
               rerun: "Rerun") -> "LockResult":
    """Resolve the board's whole environment (or, with `python`, this interpreter's) into a lock."""
    from jetson_install.catalog.identity import NoBuildForPython
    from jetson_install.fleet.lock import lock_target, make_lock, no_build_for_the_boards_python

    plan = make_install_plan(replace(options, venv=None, verify=False, use_existing_torch=False, python=None),
                             keep_added=False)
    if not plan.supported or plan.vendor is None or plan.channel is None:
        raise Unsupported(plan.reason or "no vendor source for this board", fix=plan.remedy or None)
    target = lock_target(plan, python, python_version, rerun)
    try:
        plan = resolve_plan(plan, rerun, target.python)
    except NoBuildForPython as exc:
        raise no_build_for_the_boards_python(exc, target, plan.vendor_index or "the vendor source", rerun) from None
    assert plan.resolution is not None
    return make_lock(plan.channel.id if plan.channel else "", target, plan.resolution, plan.vendor_index,
                     plan.vendor.companions if plan.vendor else (), plan.constraints, plan.requirement,
                     plan.settings.default_index.value, output, plan.target.id, plan.additions)


def unknown_channel(catalog: "Catalog", channel_id: str, vendor_index: Optional[str] = None) -> BadInput:
    """A channel name that is not in the catalog, with the closest one's whole command."""
    import difflib

    names = [channel.id for channel in catalog.channels]
    close = difflib.get_close_matches(channel_id, names, n=1, cutoff=0.6)
    if not close:
        return BadInput(f"no channel {channel_id!r} in {catalog.path}", fix="list them: jetson-install channels")
    from jetson_install.base.redact import redact

    command = f"jetson-install channels --check {close[0]}" + (f" --vendor-index {redact(vendor_index)}"
                                                                 if vendor_index else "")
    return BadInput(f"no channel {channel_id!r} in {catalog.path}; did you mean {close[0]}?", fix=command)


def check_channels(catalog: "Catalog", channel_id: Optional[str], vendor_index: Optional[str]) -> List["SetReport"]:
    """Each installable channel's sources read (or one mirror for each): `channels --check`."""
    from jetson_install.tools import index
    from jetson_install.board.platform_data import major_glibc
    from jetson_install.catalog.settings import check_index_url

    if channel_id is not None and channel_id not in {c.id for c in catalog.channels}:
        raise unknown_channel(catalog, channel_id, vendor_index)
    if vendor_index:
        check_index_url(vendor_index, "--vendor-index", allow_insecure=False)
    reports = []
    for channel in catalog.channels:
        if (channel_id and channel.id != channel_id) or not channel.installable:
            continue
        for source in channel.sources:
            if source.index is None:
                continue
            reports.append(index.check_source(channel.id, source, vendor_index or source.index, channel.python,
                                              major_glibc(channel.l4t_from[0])))
            if vendor_index:
                break  # a mirror stands for the channel's first index
    return reports


@dataclass(frozen=True)
class Dockerfile:
    text: str
    base: str


def dockerfile(options: PlatformOptions, base: Optional[str], regenerate: str) -> Dockerfile:
    """The Dockerfile for this board's channel, FROM `base` or the first image known to match."""
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.fleet.container import dockerfile_text

    platform = detect_platform(options)
    match = load_catalog().match(platform)
    if match.channel is None:
        raise Unsupported(match.reason, fix=match.remedy)
    if not match.channel.installable:
        # The image's own install step would refuse the channel: the build could never pass.
        raise Unsupported(f"unsupported: {match.channel.reason}", fix=match.channel.remedy or None)
    text = dockerfile_text(platform, match.channel, base, regenerate)
    return Dockerfile(text, base or match.channel.containers[0].image)


@dataclass(frozen=True)
class EntrypointStart:
    """The entrypoint's verdict: what it says on stderr, and the exit code (0: start the command)."""

    lines: Tuple[str, ...]
    exit_code: int


def container_start(venv: Path, environ: Mapping[str, str]) -> EntrypointStart:
    """The image's start: refuse a host the image is not built for, else run the strict doctor
    once, keeping its evidence and status for the HEALTHCHECK."""
    from jetson_install import doctor as doctor_module
    from jetson_install.fleet.container import START_EVIDENCE, START_STATUS, host_line, start_check
    from jetson_install.envs.environment import recorded_doctor_inputs

    from jetson_install.base.errors import EXIT_UNSUPPORTED

    from jetson_install.base.outputs import replace_file
    from jetson_install.base.redact import json_text

    status = Path(START_STATUS)
    status.parent.mkdir(parents=True, exist_ok=True)
    # A restart says `starting` until its own doctor is done: the last start's `passed` (or its
    # evidence) must not vouch for a start that may hang or fail.
    replace_file(status, "starting\n")
    Path(START_EVIDENCE).unlink(missing_ok=True)
    start = start_check(environ)
    if start.refused is not None:
        replace_file(status, "refused\n")
        return EntrypointStart((f"error: {start.refused[0]}", f"  fix: {start.refused[1]}"), EXIT_UNSUPPORTED)
    channel, vendor = recorded_doctor_inputs(venv, start.channel)
    report = doctor_module.run_doctor(str(venv / "bin" / "python"), platform=start.platform, channel=channel,
                                      vendor=vendor, strict=True)
    replace_file(START_EVIDENCE, json_text(report.to_json()))
    replace_file(status, ("passed" if report.passed else "failed") + "\n")
    if not report.passed:
        return EntrypointStart((*doctor_module.render_lines(report), "error: the strict doctor did not pass on this "
                                f"device (evidence: {START_EVIDENCE})"), report.exit_code)
    return EntrypointStart((f"jetson-install: {host_line(start)}; strict doctor passed (evidence: {START_EVIDENCE})",), 0)


def judged(files: Sequence[str], max_age: Optional[float], requirements: Sequence[str] = ()) -> List["Verdict"]:
    """Each evidence file judged; every file is read first: an unreadable one is bad input
    (exit 2), before any verdict."""
    from jetson_install.fleet.evidence import DEFAULT_MAX_AGE_DAYS, judge, load, parse_requirement

    wanted = [parse_requirement(text) for text in requirements]
    loaded = [(path, load(path)) for path in files]
    age = DEFAULT_MAX_AGE_DAYS if max_age is None else max_age
    return [judge(path, data, max_age_days=age, requirements=wanted) for path, data in loaded]


def labels(options: PlatformOptions, evidence_file: Optional[str], max_age: Optional[float],
           environment: Optional[Path] = None) -> "RunnerLabels":
    """The runner labels for this board; `cuda` only with evidence that proves it (by default
    that of `environment`, the default one that exists)."""
    from jetson_install.fleet.labels import runner_labels
    from jetson_install.base.layout import EVIDENCE_FILE, STATE_DIR

    from jetson_install.fleet.evidence import Verdict

    platform = detect_platform(options)
    if evidence_file is not None:
        return runner_labels(platform, judged((evidence_file,), max_age)[0])
    own = (environment or default_venv("obliteratus")) / STATE_DIR / EVIDENCE_FILE
    if not own.exists():
        return runner_labels(platform, None)
    try:
        verdict = judged((str(own),), max_age)[0]
    except BadInput as exc:
        # The environment's own evidence, broken: the labels still come, without `cuda`.
        verdict = Verdict(str(own), False, exc.message.split(": ", 1)[-1], {})
    return runner_labels(platform, verdict)


def environment_link(venv: Optional[str], command: str) -> Tuple[Path, str, Optional[str]]:
    """The DIR a lifecycle command works on (--venv, else the default one that exists), how to
    name it in a message (as the user typed it), and a note naming the default it took."""
    if venv is not None:
        return venv_path(venv).absolute(), f"--venv {venv}", None
    link, note = default_environment(command)
    return link, str(link), note


#: What `add` leaves out of the recorded command: how it was shown and confirmed (add's own
#: flags say that now), and --upgrade (an addition keeps the recorded vendor set).
_NOT_REPLAYED = ("-q", "--quiet", "-v", "--verbose", "--json", "--yes", "-y", "--dry-run", "--upgrade")


@dataclass(frozen=True)
class Addition:
    """What `add` runs: the command that made the environment at `link` again, with its recorded
    additions (kept by the install itself), the new ones as --with, at the same DIR."""

    link: Path
    target: str
    made_with: str  # the recorded command, as it was run
    command: Tuple[str, ...]  # what runs now (no program name)
    cwd: Optional[str]  # where the recorded command ran: its relative paths mean what they meant there
    kept: Tuple[str, ...]
    new: Tuple[str, ...]

    def to_json(self) -> Dict[str, Any]:
        from jetson_install.planning.fixes import Rerun

        return {"venv": str(self.link), "target": self.target, "requirements": list(self.new),
                "kept": list(self.kept), "made_with": self.made_with, "command": str(Rerun(self.command))}

    def result(self, result: "InstallResult") -> "InstallResult":
        """The install's result, with a conflict's fix said as `add` takes it: a release of the
        addition that accepts the vendor pins (which never change)."""
        if result.failed_step != "target" or "unsatisfiable" not in result.message:
            return result
        from jetson_install.planning.fixes import Rerun

        plan = result.resolved
        pins = ", ".join(f"{name}=={version}" for name, version in (plan.pins if plan else {}).items()
                         if name == "torch")
        name = _requirement_name(self.new[0]) if len(self.new) == 1 else "REQUIREMENT"
        command = Rerun(("add", "--venv", str(self.link), f"{name}<VERSION"))
        return replace(result, fix=f"the vendor pins ({pins or 'torch'}) never change: add a release of {name} that "
                                   f"accepts them, where one exists: {command}")


def _requirement_name(requirement: str) -> str:
    """The distribution a requirement names, or the requirement itself (a URL, a folder)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(requirement).name
    except InvalidRequirement:
        return requirement


def addition(venv: Optional[str], requirements: Sequence[str], flags: Sequence[str], rerun: "Rerun") -> Addition:
    """`add`: the recorded command of the environment at --venv (else the default one that
    exists), with `requirements` added; refused, in one line with the fix, where there is none."""
    from jetson_install.envs.environment import EnvironmentHome, recorded_additions, recorded_plan
    from jetson_install.planning.fixes import Rerun
    from jetson_install.planning.planner import additions

    if not requirements:
        raise BadInput("add: no REQUIREMENT given", fix=f"name what to add, e.g.: {Rerun(rerun.argv + ('transformers',))}")
    new = additions(requirements)
    with_new = tuple(word for requirement in new for word in ("--with", requirement))
    if venv is None:
        link = default_environment("add")[0]
        if EnvironmentHome(link).current() is None:
            raise BadInput("add: no environment made by jetson-install at the default locations",
                           fix=f"make one with the additions: {Rerun(('torch', *with_new))}, or name it: "
                               f"{Rerun(rerun.argv[:1] + ('--venv', 'DIR') + rerun.argv[1:])}")
    else:
        link = venv_path(venv).absolute()
    made = _made_with(link, with_new)
    current = EnvironmentHome(link).current()
    assert current is not None  # _made_with refused it otherwise
    kept = recorded_additions(current)
    if any(word in ("--lock", "--wheelhouse") or word.startswith(("--lock=", "--wheelhouse=")) for word in made):
        every = tuple(word for requirement in kept + new for word in ("--with", requirement))
        raise BadInput(f"{link} was installed from a lock, which holds exactly its files and no addition",
                       fix=f"lock them with the rest, then install that lock: {Rerun(('lock', made[0], *every, '--output', 'new.lock'))} "
                           f"&& {Rerun((made[0], '--lock', 'new.lock', '--venv', str(link)))}")
    cwd = (recorded_plan(current) or {}).get("cwd")
    replayed = Rerun(made).without("--venv")
    command = (*replayed.argv, "--venv", str(link), *with_new, *flags)
    return Addition(link, made[0], str(Rerun(made)), command, cwd if isinstance(cwd, str) else None, kept, new)


def _made_with(link: Path, with_new: Tuple[str, ...]) -> Tuple[str, ...]:
    """The command that made the environment at `link` (its first word the target), as it
    recorded it: plan.json, or the vendor record's repair command for one made before."""
    import shlex

    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.envs.environment import EnvironmentHome, recorded_plan
    from jetson_install.planning.fixes import Rerun
    from jetson_install.envs.record import read_record
    from jetson_install.base.redact import MASK

    home = EnvironmentHome(link)
    current = home.current()
    make = str(Rerun(("torch", "--venv", str(link), *with_new)))
    if current is None:
        if home.is_ours():
            raise BadInput(f"{link} points at no complete environment (removed, or its install was cut short)",
                           fix="see it, and the command that repairs it: jetson-install list")
        if not link.exists() and not link.is_symlink():
            raise BadInput(f"no environment at {link}", fix=f"make one with the additions: {make}")
        raise BadInput(f"{link} was not made by jetson-install (no link into {link}.d); it is left as it is",
                       fix=f"make one with the additions beside it: {Rerun(('torch', '--venv', f'{link}-torch', *with_new))}")
    recorded = recorded_plan(current) or {}
    command = recorded.get("command")
    if not (isinstance(command, list) and all(isinstance(word, str) for word in command)):
        record = read_record(current)
        repair = record.repair if record is not None else ""
        command = shlex.split(repair)[1:] if repair.startswith("jetson-install ") else None
    if not command:
        raise BadInput(f"{current} records no command it was made with (made by an older jetson-install)",
                       fix=f"run the command that made it again, with {' '.join(with_new)} added")
    words = tuple(word for word in command if word not in _NOT_REPLAYED)
    if not words or words[0] not in load_catalog().targets:
        raise BadInput(f"{current} was made by `jetson-install {' '.join(command)}`, not a target's install",
                       fix=f"run the command that made it again, with {' '.join(with_new)} added")
    if any(MASK in word for word in words):
        raise BadInput(f"the command that made {link} gave an index's credentials in a URL, which are not recorded",
                       fix=f"run it again with the additions, the credentials in place of {MASK}: "
                           f"{Rerun((*command, *with_new))}")
    return words


def default_environment(command: str) -> Tuple[Path, Optional[str]]:
    """The DIR a command works on without --venv: the default one of a target that has an
    environment there (OBLITERATUS' where several have), and a note saying which, unless it is
    OBLITERATUS' alone; `add` refuses to choose between two."""
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.envs.environment import EnvironmentHome

    names = sorted(load_catalog().targets, key=lambda name: (name != "obliteratus", name))
    made = [name for name in names if EnvironmentHome(default_venv(name)).current() is not None]
    if command == "add" and len(made) > 1:
        raise BadInput(f"add: {' and '.join(made)} both have an environment at their default location; which one?",
                       fix=f"name it: jetson-install add --venv {default_venv(made[0])} REQUIREMENT")
    if not made:
        return default_venv("obliteratus"), None
    chosen = made[0]
    if made == ["obliteratus"]:
        return default_venv(chosen), None
    others = "; " + ", ".join(f"`jetson-install {name}`'s is at {default_venv(name)}" for name in made[1:]) \
        if made[1:] else ""
    return default_venv(chosen), (f"{command}: {default_venv(chosen)}, the environment `jetson-install {chosen}` "
                                  f"made (no --venv{others})")
