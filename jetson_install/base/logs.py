"""The per-user log of an install: every command line it ran and all their output, redacted."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, List, Optional

from jetson_install.base.errors import BadInput
from jetson_install.base.redact import redact
from jetson_install.base.user_dirs import log_dir

__all__ = ["start_log", "show_log", "log_directory", "own_logs", "user_folder_refused"]

# What start_log names a log: the command, then when it started (and a number, for a second
# run in the same second).
_LOG_NAME = re.compile(r"^[a-z][a-z0-9-]*-\d{8}-\d{6}(-\d+)?\.log$")


def log_directory() -> Path:
    return log_dir().value


def user_folder_refused(what: str, folder: Path, variable: str, exc: OSError) -> BadInput:
    """A per-user folder this user cannot write (HOME on a read-only or pseudo filesystem): the
    variable that moves it is the fix."""
    return BadInput(f"cannot write {what} in {folder} ({exc.strerror or exc})",
                    fix=f"set {variable} to a folder you can write (or HOME), then run the command again")


def own_logs() -> List[Path]:
    """The logs start_log wrote (by their names), oldest first (a run writing one holds a lock on it)."""
    directory = log_directory()
    if not directory.is_dir():
        return []
    return sorted(path for path in directory.iterdir() if _LOG_NAME.match(path.name) and path.is_file()
                  and not path.is_symlink())


class _RedactingFormatter(logging.Formatter):
    """A log formatter whose records (command lines, uv's output) are redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def start_log(command: str) -> Path:
    """Log every subprocess and its output to a new file in the per-user log directory."""
    # Logs hold command lines and uv's output: private to the user, and redacted all the same.
    directory = log_directory()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
        # A log of its own: an install and the `add` after it can start in the same second, and the
        # second run's commands appended to the first's log read as the first's.
        stamp, number = f"{command}-{time.strftime('%Y%m%d-%H%M%S')}", 1
        while True:
            path = directory / (f"{stamp}.log" if number == 1 else f"{stamp}-{number}.log")
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                break
            except FileExistsError:
                number += 1
    except OSError as exc:
        raise user_folder_refused("the log", directory, "XDG_STATE_HOME", exc) from None
    path.chmod(0o600)
    handler = logging.FileHandler(path)
    assert handler.stream is not None  # (opened at once: no delay asked)
    # Held for as long as the run writes it (its end, or a kill, lets go): `clean` leaves a log in use.
    fcntl.flock(handler.stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("jetson_install")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    return path


def log_error(message: str, fix: Optional[str]) -> None:
    """How the run ended, in its log as the user saw it: a log read later (a CI job's, a fleet's)
    says why without the terminal it ran in."""
    logger = logging.getLogger("jetson_install")
    logger.error("error: %s", message)
    if fix:
        logger.error("  fix: %s", fix)


def show_log(stream: Any) -> None:
    """-v: every line the log gets (each command started, each line of its output), on `stream` as it comes."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_RedactingFormatter("  | %(message)s"))
    logger = logging.getLogger("jetson_install")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
