"""`inspect`: what a wheel, a shared object, a folder of them or a requirement carries for this board's GPU,
read from the files, nothing installed: each ELF's SASS architectures and PTX, what it needs
and where that is, and the verdict for the board the options name (envs/gpu_inspect.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import List

from packaging.requirements import InvalidRequirement, Requirement

from jetson_install.base.errors import BadInput
from jetson_install.base.work_folders import make_work_folder
from jetson_install.board.platform_data import ubuntu_glibc
from jetson_install.catalog.constraints import constraint_lines
from jetson_install.catalog.settings import load_index_settings
from jetson_install.catalog.gpu_code import BY_RULE, CANNOT_RUN, Board, load_rules
from jetson_install.cli.commands.given import PlatformOptions
from jetson_install.cli.commands.platform import platform_and_channel
from jetson_install.envs.gpu_inspect import FileReport, Inspection, inspect_path
from jetson_install.fleet.lock import LockTarget, requirement_files

__all__ = ["inspect_subject", "inspection_lines"]


def inspect_subject(subject: str, options: PlatformOptions) -> Inspection:
    """The inspection of `subject` (a wheel, a file, a folder, or a requirement, whose own file
    is downloaded to a temporary folder for the board under its channel's constraints) for the
    board of `options`; off a Jetson its code is listed, not judged."""
    platform, channel = platform_and_channel(options)
    board = Board.for_platform(platform)
    notes = [] if board is not None else ["this root is not a Jetson with a known GPU: the code is listed, not judged "
                                          "(--root sample:NAME judges it for a sample board)"]
    path = Path(subject).expanduser()
    root = Path(platform.root) if platform is not None else Path("/")
    arch = platform.arch if platform is not None else None
    sources = channel.sources if channel is not None else ()
    if path.exists():
        found = inspect_path(path, board, load_rules(), sources, root, arch)
        return replace(found, notes=tuple(notes))
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
        files = requirement_files(requirement, constraints, settings.default_index.value, target, work)
        reports: List[FileReport] = []
        elf = other = 0
        for file in files:
            found = inspect_path(file, board, load_rules(), sources, root, arch)
            reports += found.files
            elf, other = elf + found.elf_files, other + found.other_files
            notes.append(f"read {file.name}, downloaded for Python {channel.python} on {target.platform} under "
                         f"channel {channel.id}'s constraints, then removed")
        return Inspection(requirement, board, tuple(reports), elf, other, tuple(notes))


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
