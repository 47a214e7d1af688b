"""What a place on disk is, told by the filesystem itself: a mount point, a folder or file the
kernel keeps from change (immutable, append-only), the file standing where a folder is needed.
Messages and fixes name these causes only where this finds them, never as a guess."""

from __future__ import annotations

import fcntl
import os
import shlex
import stat
import struct
from pathlib import Path
from typing import Optional

__all__ = ["is_mount_point", "kept_from_change", "unkept", "file_in_the_way", "nearest_existing"]

# FS_IOC_GETFLAGS is _IOR('f', 1, long); the flags it reads: FS_IMMUTABLE_FL, FS_APPEND_FL
# (https://github.com/torvalds/linux/blob/master/include/uapi/linux/fs.h).
_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_KEPT = {0x10: "immutable", 0x20: "append-only"}


def is_mount_point(path: Path) -> bool:
    """Whether something is mounted at `path`: os.path.ismount's test (another device, or the
    root of one), else the kernel's own list, which also names a bind mount of the same filesystem."""
    if os.path.ismount(path):
        return True
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
            # Its fifth field is the mount point, with space, tab, newline and backslash as octal escapes
            # (https://www.kernel.org/doc/html/latest/filesystems/proc.html, /proc/<pid>/mountinfo).
            return any(_unescaped(line.split(" ")[4]) == real for line in table if line.count(" ") >= 4)
    except OSError:
        return False


def _unescaped(field: str) -> str:
    for escape, character in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escape, character)
    return field


def kept_from_change(path: Path) -> Optional[str]:
    """'immutable' or 'append-only' where the kernel keeps `path` from change whoever asks (root
    too: chattr's i and a flags); None where it does not, or the flags cannot be read."""
    try:
        # A folder or a regular file only: opening a device can act on it (a tape rewinds).
        if not stat.S_ISDIR(os.lstat(path).st_mode) and not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        flags = struct.unpack("i", fcntl.ioctl(descriptor, _GETFLAGS, bytes(8))[:4])[0]
    except OSError:  # a filesystem without these flags (tmpfs before 6.0, NFS)
        return None
    finally:
        os.close(descriptor)
    return next((name for bit, name in _KEPT.items() if flags & bit), None)


def unkept(path: Path) -> str:
    """What to run first where the kernel keeps `path` from change ("sudo chattr -ia PATH && "), else ""."""
    return "" if kept_from_change(path) is None else f"sudo chattr -ia {shlex.quote(str(path))} && "


def nearest_existing(path: Path) -> Path:
    """`path` itself where it exists (a dangling link counts), else its nearest folder above that does."""
    return next((place for place in (path, *path.parents) if os.path.lexists(place)), path)


def file_in_the_way(path: Path) -> Optional[Path]:
    """The file (anything but a folder) standing where `path` needs a folder: itself, or one of
    the folders above it; None where there is none."""
    for place in (*reversed(path.parents), path):
        if os.path.lexists(place) and not os.path.isdir(place):
            return place
    return None
