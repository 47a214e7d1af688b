"""What a source tree is, by content: a digest of its files that ignores what building writes
into it. Pure file reading (no git: source_identity.py asks git about a checkout)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path
from typing import Sequence

__all__ = ["BUILD_OUTPUTS", "LinkOutside", "is_build_output", "file_digest", "checkout_digest"]

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
    """One path of a tree, by what a build reads there: a link by the content it points at
    (a file's bytes, a folder's files), since a build copies that, not the link's text."""
    path = root / relative
    digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
    real = Path(os.path.realpath(path))
    if real.is_dir():
        _digest_folder(digest, real, real, "", (), (real,), follow_outside=True)
    else:
        _content(digest, real)
    digest.update(b"\0")


def _content(digest: "hashlib._Hash", path: Path) -> None:
    try:
        if path.is_file():
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(_READ_CHUNK), b""):
                    digest.update(chunk)
        else:
            digest.update(b"absent")
    except OSError as exc:
        # Unreadable: the build will say why; the identity only has to differ from a readable tree.
        digest.update(f"unreadable:{exc.errno}".encode())


class LinkOutside(ValueError):
    """A symbolic link in a checkout that resolves to a place outside it."""

    def __init__(self, relative: str, target: str) -> None:
        super().__init__(f"{relative} -> {target}")
        self.relative = relative
        self.target = target


def checkout_digest(root: Path, also: Sequence[str] = (), follow_outside: bool = False) -> str:
    """The content of every file under `root` that a build reads, except build outputs (and
    `also`), in a fixed order, never their times. A link counts by the content it points at,
    never by its text, so a link re-pointed at an edited file is another source. A link that
    leaves the tree raises LinkOutside, unless `follow_outside`: for a build that copies the
    tree privately what it points at is not there, while a build from the folder itself (uv's
    of a target's folder) reads it, so the identity of such a folder counts it."""
    real_root = root.resolve()
    digest = hashlib.sha256()
    _digest_folder(digest, real_root, real_root, "", tuple(also), (real_root,), follow_outside)
    return digest.hexdigest()


def _digest_folder(digest: "hashlib._Hash", real_root: Path, folder: Path, prefix: str, also: Sequence[str],
                   open_folders: Sequence[Path], follow_outside: bool) -> None:
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        digest.update(f"{prefix}unreadable:{exc.errno}\0".encode())
        return
    for name in names:
        relative = prefix + name
        if is_build_output(relative, also):
            continue
        path = folder / name
        if path.is_symlink():
            target = Path(os.path.realpath(path))
            if target != real_root and real_root not in target.parents and not follow_outside:
                raise LinkOutside(relative, os.readlink(path))
            if not target.exists():
                digest.update(relative.encode("utf-8", "surrogateescape") + b"\0dangling\0")
                continue
            path = target
        if path.is_dir():
            digest.update(relative.encode("utf-8", "surrogateescape") + b"/\0")
            if path in open_folders:
                digest.update(b"loop\0")  # a link to a folder it is inside of: its content is counted once
            else:
                _digest_folder(digest, real_root, path, relative + "/", also, (*open_folders, path), follow_outside)
        else:
            digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
            _content(digest, path)
            digest.update(b"\0")
