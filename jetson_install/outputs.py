"""Files the user asked a command to write (--evidence, --gate-evidence, --output)."""

from __future__ import annotations

from pathlib import Path

from jetson_install.errors import BadInput

__all__ = ["check_output_directory", "write_output"]


def check_output_directory(option: str, path: str) -> None:
    """Refuse, before any work, an output whose directory does not exist."""
    if not Path(path).absolute().parent.is_dir():
        raise BadInput(f"{option} {path}: its directory does not exist",
                       fix=f"mkdir -p {Path(path).absolute().parent}, or pass another file")


def write_output(option: str, path: str, text: str) -> None:
    """Write what an option asked for; a path that cannot be written is bad input, not a traceback."""
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write it ({exc.strerror})",
                       fix="pass a file in an existing, writable directory") from None
