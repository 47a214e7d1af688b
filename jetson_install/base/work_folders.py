"""Work folders named by the process that made them (PREFIX + PID + "-" + mkdtemp's letters),
so that what a killed process left (SIGKILL runs no `finally`) is removed by the next run that
makes one of the same prefix: nothing of a run keeps growing after it."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Optional

__all__ = ["make_work_folder", "remove_abandoned"]

# A pid as the name carries it: never 0 (os.kill(0, 0) would ask about this process's whole group).
_PID = re.compile(r"([1-9][0-9]*)(?:-|$)")


def make_work_folder(prefix: str, parent: Optional[Path] = None) -> Path:
    """A fresh folder of this process's, in `parent` (the temporary folder by default): made by
    mkdtemp (mode 0700, a name no other process has), named PREFIX + PID + "-...". The folders
    of `prefix` there whose process is gone are removed first."""
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_abandoned(prefix, where)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=str(where)))


def remove_abandoned(prefix: str, parent: Path) -> None:
    """Remove the folders in `parent` named PREFIX + PID (then "-..." or nothing) whose process
    is gone. Only a real folder (never a symlink, nor what one points to) that this user owns
    is removed; a name of another form is left alone.

    A pid the system has given to another process since keeps its folder until that process
    ends too: the removal is delayed, never wrong. A PermissionError from os.kill is a live
    process of another user's."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return  # no such folder yet, or not ours to read: nothing of ours is there
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid = _PID.match(entry.name, len(prefix))
        try:
            found = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if pid is None or not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
            continue
        try:
            os.kill(int(pid.group(1)), 0)
        except (ProcessLookupError, OverflowError):  # gone, or a number no process has
            # rmtree never follows a link inside the folder (nor one swapped in for it meanwhile).
            shutil.rmtree(entry.path, ignore_errors=True)
        except PermissionError:
            continue  # a live process of another user's
