"""`inspect`: what a wheel, a shared object, a folder of them or a requirement carries for this board's GPU,
read from the files, nothing installed: each ELF's SASS architectures and PTX, what it needs
and where that is, and the verdict for the board the options name (envs/gpu_inspect.py)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import List, Tuple
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from jetson_install.base.errors import BadInput, StepFailed
from jetson_install.base.redact import redact
from jetson_install.base.work_folders import make_work_folder
from jetson_install.board.platform_data import ubuntu_glibc
from jetson_install.catalog.constraints import constraint_lines
from jetson_install.catalog.settings import load_index_settings
from jetson_install.catalog.gpu_code import BY_RULE, CANNOT_RUN, Board, load_rules
from jetson_install.cli.commands.given import PlatformOptions
from jetson_install.cli.commands.platform import platform_and_channel
from jetson_install.envs.gpu_inspect import FileReport, Inspection, inspect_path
from jetson_install.fleet.lock import LockTarget, requirement_files
from jetson_install.planning.planner import addition_kind
from jetson_install.planning.rerun import Rerun

__all__ = ["inspect_subject", "inspection_lines"]


def inspect_subject(subject: str, options: PlatformOptions, rerun: Rerun) -> Inspection:
    """The inspection of `subject` (a wheel, a file, a folder, or a requirement, whose own file
    is downloaded to a temporary folder for the board under its channel's constraints) for the
    board of `options`; off a Jetson its code is listed, not judged. `rerun`: the command as
    typed, which a fix repeats."""
    platform, channel = platform_and_channel(options)
    board = Board.for_platform(platform)
    notes = [] if board is not None else ["this root is not a Jetson with a known GPU: the code is listed, not judged "
                                          "(--root sample:NAME judges it for a sample board)"]
    path = Path(subject).expanduser()
    root = Path(platform.root) if platform is not None else Path("/")
    arch = platform.arch if platform is not None else None
    sources = channel.sources if channel is not None else ()
    if path.is_file() and path.name.endswith(".tar.gz"):  # a source distribution's name (PEP 625)
        reason, fix = _NOT_INSPECTED["sdist"]
        raise BadInput(f"{path}: {reason}", fix=fix.format(path=shlex.quote(str(path)), folder=_inspecting(rerun, subject, "DIR")))
    if path.exists():
        found = inspect_path(path, board, load_rules(), sources, root, arch)
        return replace(found, notes=tuple(notes))
    _refuse_a_url(subject, rerun)
    requirement = _requirement(subject)
    if platform is None or channel is None or channel.primary is None:
        raise BadInput(f"{subject}: no such file or folder, and a requirement is downloaded for a board's channel, "
                       "which this root has none of",
                       fix=f"name the board: jetson-install inspect {subject} --root sample:NAME "
                           "(jetson-install samples lists them), or give a wheel's path")
    source = channel.primary
    constraints = constraint_lines(source.preferred.requirement_lines(), source.numpy)
    settings = load_index_settings(None, "--vendor-index", None, "--default-index", False, ())
    target = LockTarget(channel.python, platform.arch or "aarch64", ubuntu_glibc(platform.ubuntu))
    # Held while it is used: the next inspect removes it where a kill left it (a wheel's download).
    with make_work_folder("jetson-install-inspect-") as work:
        files = requirement_files(requirement, constraints, settings.default_index.value, target, work,
                                  again=f"run it again: {rerun}")
        for entry in files:
            if entry.sdist:  # no wheel of it for the board: what it would run is built at its install
                where = redact(settings.default_index.value or "uv's default index")
                raise StepFailed("inspect", f"{subject}: {where} has no wheel of {entry.name} {entry.version} for "
                                            f"Python {channel.python} on {target.platform}, only its source archive "
                                            f"{entry.filename}, which holds source, not the built code inspect reads "
                                            "(an install builds it on the board)",
                                 fix=f"on the board, download {redact(entry.url)} and build its wheel (uv build "
                                     f"--wheel {entry.filename} --out-dir DIR), then: {_inspecting(rerun, subject, 'DIR')}")
        reports: List[FileReport] = []
        elf = other = 0
        for file in (work / entry.filename for entry in files):
            found = inspect_path(file, board, load_rules(), sources, root, arch)
            reports += found.files
            elf, other = elf + found.elf_files, other + found.other_files
            notes.append(f"read {file.name}, downloaded for Python {channel.python} on {target.platform} under "
                         f"channel {channel.id}'s constraints, then removed")
        return Inspection(requirement, board, tuple(reports), elf, other, tuple(notes))


#: Why inspect does not take a requirement's URL, by what it names, and how to read its code:
#: inspect reads files by path, or a requirement by name that it downloads from the default
#: index (a URL would have uv build a folder or clone a repository just to name a file).
_NOT_INSPECTED = {
    "file": ("a file:// URL names a file, which inspect reads by its path", "read it by its path: {file}"),
    "missing": ("a file:// URL names {path}, which does not exist",
                "give the path of a wheel (.whl), a shared object or a folder of them: {file}"),
    "folder": ("a project folder holds source, not the built code inspect reads",
               "build its wheel (uv build --wheel {path} --out-dir DIR), then: {folder}"),
    "sdist": ("a source archive holds source, not the built code inspect reads",
              "build its wheel (uv build --wheel {path} --out-dir DIR), then: {folder}"),
    "git": ("a git repository holds source, not the built code inspect reads",
            "build its wheel from a checkout of it (uv build --wheel CHECKOUT --out-dir DIR), then: {folder}"),
    "archive": ("inspect downloads a requirement by name from the default index, not from a URL",
                "download that file, then: {file}"),
    "source": ("inspect downloads a requirement by name from the default index, not from a URL, and a source "
               "archive holds source, not the built code inspect reads",
               "download it and build its wheel (uv build --wheel FILE --out-dir DIR), then: {folder}"),
}


def _refuse_a_url(subject: str, rerun: Rerun) -> None:
    """A requirement with a URL (or a bare URL), refused before any process starts or the
    network is used, with the command that reads what it names."""
    kind = addition_kind(subject)
    if kind not in ("git", "url"):
        return
    try:
        url = Requirement(subject).url or ""
    except InvalidRequirement:
        url = subject.strip()  # a bare URL
    what, path = _what_a_url_names(url) if kind == "url" else ("git", "")
    reason, fix = _NOT_INSPECTED[what]

    raise BadInput(f"{redact(subject)}: {reason.format(path=path)}",
                   fix=fix.format(path=shlex.quote(path), file=_inspecting(rerun, subject, path if what == "file" else "FILE"),
                                  folder=_inspecting(rerun, subject, "DIR")))


def _inspecting(rerun: Rerun, subject: str, word: str) -> str:
    """The inspect command as typed, reading `word` in place of `subject`."""
    return str(Rerun(tuple(word if given == subject else given for given in rerun.argv)))


def _what_a_url_names(url: str) -> Tuple[str, str]:
    """What a requirement's URL names, of _NOT_INSPECTED's kinds, and its path where it is here."""
    parts = urlsplit(url)
    sdist = parts.path.endswith((".tar.gz", ".zip"))  # a wheel's name ends in .whl
    if parts.scheme not in ("", "file"):
        return ("source" if sdist else "archive"), ""
    path = Path(unquote(parts.path)).expanduser()
    if path.is_file():
        return ("sdist" if sdist else "file"), str(path)
    return ("folder" if path.is_dir() else "missing"), str(path)


def _requirement(subject: str) -> str:
    try:
        return str(Requirement(subject))
    except InvalidRequirement:
        raise BadInput(f"{subject}: no such wheel, file or folder, nor a requirement",
                       fix="give the path of a wheel (.whl), a shared object or a folder of them, or a "
                           "requirement such as flash-attn==2.8.3") from None


def inspection_lines(inspection: Inspection) -> List[str]:
    board = inspection.board
    where = (f"for {board.name} ({board.userspace} CUDA {'.'.join(map(str, board.cuda)) if board.cuda else '?'})"
             if board else "(not judged)")
    lines = [f"{inspection.subject} {where}: {inspection.elf_files} shared object"
             f"{'s' if inspection.elf_files != 1 else ''}, {len(inspection.gpu_files)} with GPU code"]
    if not inspection.files:
        lines.append("  no shared objects: nothing here runs on the GPU by itself")
    elif not inspection.gpu_files and not inspection.unreadable:
        lines.append("  no CUDA kernels in any of them")
    unproven = {}
    for report in inspection.files:
        if report.error:
            lines.append(f"  unreadable      {report.path}: {report.error}")
            continue
        if report.gpu_code:
            verdict = report.verdict.verdict if report.verdict else "not judged"
            label = {CANNOT_RUN: "cannot run here", BY_RULE: "by the rule"}.get(verdict, verdict)
            code = f"SASS {' '.join(report.sass) or 'none'}; PTX {' '.join(report.ptx) or 'none'}"
            if report.compressed:
                code += f"; compressed ({', '.join(report.compressed)})"
            lines.append(f"  {label:<15} {report.path}: {code}")
            if report.verdict:
                lines.append(f"  {'':<15} {report.verdict.reason}")
                if report.verdict.status and report.verdict.status.status == "unproven":
                    unproven[report.verdict.rule] = report.verdict.status
                if report.verdict.uncovered and report.verdict.verdict != CANNOT_RUN:
                    lines.append(f"  {'':<15} {report.verdict.uncovered} of its {report.verdict.containers} fat binaries "
                                 "hold no code for this GPU (kernels for other GPUs, picked by architecture)")
        if report.missing:
            lines.append(f"  {'needs':<15} {report.path}: {', '.join(item.describe() for item in report.missing)}, "
                         "in no folder searched (the subject itself, the board's library path)")
    for rule, status in unproven.items():
        lines.append(f"the rule {rule} is unproven on {board.userspace if board else '?'} CUDA: the sources disagree")
        lines += [f"  for: {source}" for source in status.supporting]
        lines += [f"  against: {source}" for source in status.against]
    lines += [f"note: {note}" for note in inspection.notes]
    return lines
