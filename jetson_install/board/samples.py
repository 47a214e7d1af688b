"""Sample roots shipped in the package, so every command can be tried without a Jetson."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

from jetson_install.base.errors import BadInput

__all__ = ["SAMPLES_DIR", "sample_names", "resolve_root", "root_shown"]

SAMPLES_DIR = Path(__file__).with_name("samples")
PREFIX = "sample:"


def sample_names() -> List[str]:
    return sorted(path.name for path in SAMPLES_DIR.iterdir() if path.is_dir())


def resolve_root(value: str, option: str = "--root") -> Path:
    """A --root value: a directory, or `sample:<name>` for a shipped sample root."""
    shown = f"{option}={value}" if option.isupper() else f"{option} {value}"
    if not value:
        raise BadInput(f"{option}: empty", fix="pass a directory, e.g. --root /, or a sample: --root sample:agx-orin-64gb-jp6.2")
    if value.startswith(PREFIX):
        name = value[len(PREFIX):]
        path = SAMPLES_DIR / name
        if name not in sample_names():  # a bare name: 'sample:../../..' must not leave the folder
            raise BadInput(
                f"{shown}: no such sample (have: {', '.join(sample_names())})",
                fix="list them with: jetson-install samples",
            )
        return path
    path = Path(value)
    try:
        is_directory = path.is_dir()
    except OSError as exc:
        raise BadInput(f"{shown}: cannot be read ({exc.strerror})", fix="pass a directory you can read") from None
    if not is_directory:
        what = "not a directory" if os.path.lexists(path) else "no such directory"
        raise BadInput(f"{shown}: {what}", fix="pass the directory a Jetson's filesystem is mounted at (/ on the board), "
                                               "or a sample: --root sample:agx-orin-64gb-jp6.2 (jetson-install samples)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise BadInput(f"{shown}: cannot be read (permission denied)", fix="pass a directory you can read")
    return path


def root_shown(root: str) -> str:
    """A root as the user gave it: a shipped sample by its `sample:NAME`, not the path it has
    inside the installed package."""
    path = Path(root)
    if path.parent == SAMPLES_DIR and path.name in sample_names():
        return PREFIX + path.name
    return root
