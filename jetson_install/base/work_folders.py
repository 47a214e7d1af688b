"""Work folders that a run holds (an flock on the folder) for as long as it uses them, so that what
a killed run left (SIGKILL runs no `finally`, and ends the lock with the process) is removed by the
next run that makes one of the same prefix: nothing of a run keeps growing after it, and no live
run's folder goes, even one of a process in another pid namespace (a container sharing the host's
`/tmp` or `~/.cache`, where asking for its pid answers "no such process")."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Optional, Type

__all__ = ["WorkFolder", "make_work_folder", "remove_abandoned"]

# A folder is made under this suffix, which no remover matches, and renamed once it is held.
_STAGING = ".new"


class WorkFolder:
    """A folder of this run's, held (its flock) until `close`, which removes it. Used as a context
    manager, it gives the folder's path and closes on the way out."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor: Optional[int] = descriptor

    def close(self) -> None:
        """Remove the folder, then let it go (removed while held: no other run takes it meanwhile)."""
        if self._descriptor is None:
            return
        try:
            shutil.rmtree(self.path, ignore_errors=True)
        finally:
            os.close(self._descriptor)
            self._descriptor = None

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()


def make_work_folder(prefix: str, parent: Optional[Path] = None) -> WorkFolder:
    """A fresh folder of this run's, held until it is closed, in `parent` (the temporary folder by
    default): made by mkdtemp (mode 0700, a name no other process has), named PREFIX + PID + "-"
    + mkdtemp's 8 letters (the pid for a human reading the folder; no remover trusts it, as it
    names another process in another pid namespace). The abandoned folders of `prefix` there are
    removed first (remove_abandoned)."""
    where = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_abandoned(prefix, where)
    while True:
        # Made under a name no remover matches and held before it takes its own: a remover never
        # sees it unheld between mkdtemp and the flock (the rename keeps the inode, so the lock).
        staging = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", suffix=_STAGING, dir=str(where))
        final = staging[: -len(_STAGING)]
        descriptor = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
        try:
            # A filesystem without flock (NFS refuses one on a folder opened to read) leaves the
            # folder unheld: no remover can take it there either, so it is kept, never removed live.
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fresh: no one else has it
            # mkdtemp made the staging name unique, not the final one: a rename would replace an
            # (empty) folder of that name, so a name taken already is given up for another.
            if not os.path.lexists(final):
                os.rename(staging, final)
                return WorkFolder(Path(final), descriptor)
        except BaseException:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                os.rmdir(staging)
            raise
        os.close(descriptor)
        os.rmdir(staging)


def remove_abandoned(prefix: str, parent: Path) -> None:
    """Remove the folders in `parent` that make_work_folder made for `prefix` (named exactly
    PREFIX + PID + "-" + 8 of mkdtemp's letters) and that no run holds: only a real folder
    (never a symlink, nor what one points to) that this user owns, taken with its flock (held
    while it goes, so two removers never race); a name of another form is left alone."""
    form = re.compile(re.escape(prefix) + r"[1-9][0-9]*-[a-z0-9_]{8}")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return  # no such folder yet, or not ours to read: nothing of ours is there
    for entry in entries:
        if form.fullmatch(entry.name) is None:
            continue
        try:
            found = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
            continue
        try:
            descriptor = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone, or a link swapped in meanwhile
        try:
            opened = os.fstat(descriptor)
            if (opened.st_dev, opened.st_ino) != (found.st_dev, found.st_ino):
                continue  # another folder than the one looked at
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: a live run's (in any pid namespace), or a filesystem without flock
        else:
            # rmtree never follows a link inside the folder (nor one swapped in for it meanwhile).
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(descriptor)
