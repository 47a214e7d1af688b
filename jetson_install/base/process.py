"""What a finished child process left: its command line, exit status and output.

A leaf module, so that the modules that read uv's or a probe's output (uv.py, the
doctor) need not import the one that starts processes (runner.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

__all__ = ["Completed"]


@dataclass(frozen=True)
class Completed:
    """A finished process: its command, exit status and output."""

    argv: Tuple[str, ...]
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
