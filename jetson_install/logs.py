"""The per-user log of an install: every command line it ran and all their output, redacted."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

__all__ = ["start_log"]


class _RedactingFormatter(logging.Formatter):
    """A log formatter whose records (command lines, uv's output) are redacted."""

    def format(self, record: logging.LogRecord) -> str:
        from jetson_install.redact import redact

        return redact(super().format(record))


def start_log(command: str) -> Path:
    """Log every subprocess and its output to a new file in the per-user log directory."""
    import platformdirs

    # Logs hold command lines and uv's output: private to the user, and redacted all the same.
    directory = Path(platformdirs.user_log_dir("jetson-install"))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    path = directory / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    path.chmod(0o600)
    handler = logging.FileHandler(path)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("jetson_install")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    return path
