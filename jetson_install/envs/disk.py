"""Folders on disk as jetson-install measures and removes them: bytes as du counts them, and a
removal that renames first, so an interrupted one leaves a whole folder or a .removing-* one."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from jetson_install.base.layout import REMOVING_PREFIX

__all__ = ["disk_usage", "remove_tree"]


def disk_usage(path: Path) -> int:
    """Bytes `path` takes on disk, as du counts them: each file once however many links it has,
    symlinks never followed."""
    seen = set()
    total = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return total


def remove_tree(path: Path) -> None:
    """Remove a folder of jetson-install's: renamed out of the way first, so it is gone at once
    and an interrupted removal leaves a .removing-* folder (which `clean` removes), never half of it."""
    doomed = path.with_name(f"{REMOVING_PREFIX}{path.name.lstrip('.')}-{uuid.uuid4().hex[:6]}") \
        if not path.name.startswith(REMOVING_PREFIX) else path
    if doomed != path:
        os.rename(path, doomed)
    shutil.rmtree(doomed)

