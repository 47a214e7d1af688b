"""What a source tree is, by content: a digest of its files that ignores what building writes
into it. Pure file reading (no git: source_identity.py asks git about a checkout)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path
from typing import Sequence

__all__ = ["BUILD_OUTPUTS", "is_build_output", "file_digest", "folder_digest"]

# What building a project writes into its tree (setuptools, hatchling, Python itself), and
# git's own folder, as shutil.ignore_patterns patterns: the one rule for what is not source.
BUILD_OUTPUTS = (".git", "build", "dist", "__pycache__", "*.egg-info", "*.pyc", "*.pyo")
_READ_CHUNK = 1 << 20


def is_build_output(relative: str, also: Sequence[str] = ()) -> bool:
    """Whether a path inside the source tree is something a build writes there (or matches
    one of the project's own patterns `also`)."""
    patterns = BUILD_OUTPUTS + tuple(also)
    return any(fnmatch.fnmatchcase(part, pattern) for part in relative.strip("/").split("/") for pattern in patterns)


def file_digest(digest: "hashlib._Hash", root: Path, relative: str) -> None:
    path = root / relative
    digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
    try:
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
        elif path.is_file():
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(_READ_CHUNK), b""):
                    digest.update(chunk)
        else:
            digest.update(b"absent")
    except OSError as exc:
        # Unreadable: the build will say why; the identity only has to differ from a readable tree.
        digest.update(f"unreadable:{exc.errno}".encode())
    digest.update(b"\0")


def folder_digest(root: Path, also: Sequence[str] = ()) -> str:
    """The content of every file under `root` except build outputs (and `also`), in a fixed order."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        # A link to a folder counts by where it points, like a link to a file.
        entries = filenames + [name for name in dirnames if (base / name).is_symlink()]
        dirnames[:] = sorted(name for name in dirnames if not is_build_output(name, also) and not (base / name).is_symlink())
        for name in sorted(entries):
            relative = (base / name).relative_to(root).as_posix()
            if not is_build_output(relative, also):
                file_digest(digest, root, relative)
    return digest.hexdigest()
