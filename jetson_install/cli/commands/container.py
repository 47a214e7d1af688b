"""`dockerfile` and `container-entrypoint`: the image for a board's channel, and its start on a
host (the host check, then the strict doctor once, its evidence kept for the HEALTHCHECK)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from jetson_install.base.errors import EXIT_UNSUPPORTED, EXIT_BAD_INPUT, BadInput, Unsupported
from jetson_install.base.outputs import check_output, replace_file, write_output
from jetson_install.base.redact import json_text
from jetson_install.catalog.catalog import load_catalog
from jetson_install.cli.commands.given import PlatformOptions
from jetson_install.cli.commands.platform import detect_platform
from jetson_install.doctor import DoctorRequest, render_lines, run_doctor
from jetson_install.envs.recorded import recorded_doctor_inputs
from jetson_install.fleet.container import (
    IMAGE_L4T_VARIABLE, START_EVIDENCE, START_STATUS, dockerfile_text, host_line, start_check, write_dockerignore,
)

__all__ = ["Dockerfile", "dockerfile", "EntrypointStart", "container_start"]


@dataclass(frozen=True)
class Dockerfile:
    text: str
    base: str
    written: Optional[Path] = None  # with --output: the folder written, which is the build context
    note: Optional[str] = None  # what became of the .dockerignore there, where a user should know


def dockerfile(options: PlatformOptions, base: Optional[str], regenerate: str, output: Optional[str]) -> Dockerfile:
    """The Dockerfile for this board's channel, FROM `base` or the first image known to match;
    with `output`, written there with the .dockerignore its build context needs."""
    if output is not None:
        check_output("--output", output, make_folder=True)
    platform = detect_platform(options)
    match = load_catalog().match(platform)
    if match.channel is None:
        raise Unsupported(match.reason, fix=match.remedy)
    if not match.channel.installable:
        # The image's own install step would refuse the channel: the build could never pass.
        raise Unsupported(f"unsupported: {match.channel.reason}", fix=match.channel.remedy or None)
    text = dockerfile_text(platform, match.channel, base, regenerate)
    made = base or match.channel.containers[0].image
    if output is None:
        return Dockerfile(text, made)
    context = Path(output).absolute().parent
    # The Dockerfile's folder is the build context it names: made here, as `docker build` needs it.
    context.mkdir(parents=True, exist_ok=True)
    write_output("--output", output, text)
    try:
        kept = write_dockerignore(context)
    except OSError as exc:
        kept = f"could not write {context / '.dockerignore'} ({exc.strerror}): the whole directory is the build context"
    return Dockerfile(text, made, context, kept)


@dataclass(frozen=True)
class EntrypointStart:
    """The entrypoint's verdict: what it says on stderr, and the exit code (0: start the command)."""

    lines: Tuple[str, ...]
    exit_code: int


def container_start(venv: Path, environ: Mapping[str, str], command: Sequence[str] = ()) -> EntrypointStart:
    """The image's start: refuse a host the image is not built for, else run the strict doctor
    once, keeping its evidence and status for the HEALTHCHECK. Outside an image `dockerfile`
    made (none of its variables set) it refuses, and writes nothing. `command`: what it would
    start, for a fix that starts it."""
    if not environ.get(IMAGE_L4T_VARIABLE):
        raise BadInput(f"container-entrypoint is the entrypoint of an image `jetson-install dockerfile` made, and "
                       f"{IMAGE_L4T_VARIABLE} (which that image sets) is not set here",
                       fix="on a host, check the environment with: jetson-install doctor --strict --venv "
                           f"{shlex.quote(str(venv))}")
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
    # After the host check, which needs no environment and says the most about a wrong host.
    if not (venv / "bin" / "python").exists():
        replace_file(status, "refused\n")
        return EntrypointStart(_no_environment(venv, environ, command), EXIT_BAD_INPUT)
    channel, vendor = recorded_doctor_inputs(venv, start.channel)
    report = run_doctor(DoctorRequest(str(venv / "bin" / "python"), start.platform, channel, vendor=vendor, strict=True))
    replace_file(START_EVIDENCE, json_text(report.to_json()))
    replace_file(status, ("passed" if report.passed else "failed") + "\n")
    if not report.passed:
        return EntrypointStart((*render_lines(report), "error: the strict doctor did not pass on this "
                                f"device (evidence: {START_EVIDENCE})"), report.exit_code)
    return EntrypointStart((f"jetson-install: {host_line(start)}; strict doctor passed (evidence: {START_EVIDENCE})",), 0)


def _no_environment(venv: Path, environ: Mapping[str, str], command: Sequence[str]) -> Tuple[str, str]:
    """The lines for a --venv with no environment: the doctor's own fix names --python, which
    the entrypoint does not take; this one names the image's environment, where it has one."""
    # The image's Dockerfile (Dockerfile.template) sets VIRTUAL_ENV to the environment it made.
    image = environ.get("VIRTUAL_ENV", "")
    found = image if image and Path(image, "bin", "python").exists() else "DIR"
    start = f" -- {shlex.join(command)}" if command else ""
    return (f"error: container-entrypoint --venv {venv}: no environment there (no bin/python)",
            f"  fix: start it with the environment the image was built with: jetson-install container-entrypoint "
            f"--venv {shlex.quote(found)}{start}")
