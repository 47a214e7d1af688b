"""What a source tree is, by content: a digest of its files that ignores what building writes
into it. Pure file reading (no git: source_identity.py asks git about a checkout)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path
from typing import Sequence

__all__ = ["BUILD_OUTPUTS", "LinkOutside", "is_build_output", "file_digest", "folder_digest", "checkout_digest"]

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
    if path.is_symlink():
        digest.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
    else:
        _content(digest, path)
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


class LinkOutside(ValueError):
    """A symbolic link in a checkout that resolves to a place outside it."""

    def __init__(self, relative: str, target: str) -> None:
        super().__init__(f"{relative} -> {target}")
        self.relative = relative
        self.target = target


def checkout_digest(root: Path, also: Sequence[str] = ()) -> str:
    """The content of a checkout that is built from: like folder_digest, but a link counts by
    the content it points at, never by its text, so a link re-pointed at an edited file is
    another source. A link that leaves the checkout raises LinkOutside: what it points at is
    not part of the checkout, and the build's private copy would read it from elsewhere."""
    real_root = root.resolve()
    digest = hashlib.sha256()
    _digest_folder(digest, real_root, real_root, "", tuple(also), (real_root,))
    return digest.hexdigest()


def _digest_folder(digest: "hashlib._Hash", real_root: Path, folder: Path, prefix: str, also: Sequence[str],
                   open_folders: Sequence[Path]) -> None:
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
            if target != real_root and real_root not in target.parents:
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
                _digest_folder(digest, real_root, path, relative + "/", also, (*open_folders, path))
        else:
            digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
            _content(digest, path)
            digest.update(b"\0")
