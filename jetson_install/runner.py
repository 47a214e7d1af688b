"""The one place that starts subprocesses (uv, the target interpreter's probes).

Every command line is logged before it runs. Children get a scrubbed
environment, as pipx does, so a user's PYTHONPATH or a stray VIRTUAL_ENV
cannot change what a probe or uv sees.
"""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

__all__ = ["Completed", "run", "child_environment"]

log = logging.getLogger("jetson_install")

# Variables that would make a child Python or uv look somewhere else than asked.
_SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "__PYVENV_LAUNCHER__", "VIRTUAL_ENV", "CONDA_PREFIX")


@dataclass(frozen=True)
class Completed:
    argv: tuple
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def last_stderr_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""


def child_environment(overrides: Optional[Mapping[str, str]] = None, unset: Sequence[str] = ()) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED and k not in unset}
    env["PYTHONIOENCODING"] = "utf-8"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if overrides:
        env.update(overrides)
    return env


def run(
    argv: Sequence[str],
    *,
    timeout: Optional[float] = None,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    input_text: Optional[str] = None,
    unset: Sequence[str] = (),
) -> Completed:
    """Run argv to completion and capture its output; never raises for a failing child.

    A timeout gives returncode -9 and ``timed_out=True``; a missing executable
    gives returncode 127 with the reason on stderr.
    """
    log.debug("run: %s", " ".join(str(a) for a in argv))
    try:
        proc = subprocess.run(
            [str(a) for a in argv],
            input=input_text,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            text=True,
            errors="replace",
            timeout=timeout,
            env=child_environment(env, unset),
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        return Completed(tuple(argv), -9, _text(exc.stdout), _text(exc.stderr), timed_out=True)
    except OSError as exc:
        return Completed(tuple(argv), 127, "", f"cannot run {argv[0]}: {exc.strerror or exc}")
    log.debug("exit %s: %s", proc.returncode, argv[0])
    return Completed(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


def _text(data: object) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return str(data)
