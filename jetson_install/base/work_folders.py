"""Work folders that a run holds (an flock on a file in the folder) for as long as it uses them, so that what
a killed run left (SIGKILL runs no `finally`, and ends the lock with the process) is removed by the
next run that makes one of the same prefix: nothing of a run keeps growing after it, and no live
run's folder goes, even one of a process in another pid namespace (a container sharing the host's
`/tmp` or `~/.cache`, where asking for its pid answers "no such process"). Even a run killed while
its folder was being made, before it held it: a lock file per prefix and user beside the folders
(one, kept: nothing that grows) tells a folder being made from one whose maker is dead. The locks
are on regular files opened for reading and writing, never on a folder: Linux's NFS client (an
NFS home's `~/.cache`) implements flock with POSIX locks, which a folder cannot take and an
exclusive one only on a file opened for writing (flock(2), "NFS details")."""

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
from typing import List, Optional, Type

__all__ = ["HELD_FILE", "WorkFolder", "make_work_folder", "remove_abandoned"]

# The file in each work folder that its run holds (the flock): hidden, so no listing of the
# folder's own files (`*.whl`, a build's outputs) takes it for one of them.
HELD_FILE = ".held-by-its-run"

# A folder is made under this suffix and renamed once it is held; a remover takes one of this
# name only where it proves its maker dead (remove_abandoned).
_STAGING = ".new"


class WorkFolder:
    """A folder of this run's, held (the flocks of its HELD_FILE and of the folder) until `close`,
    which removes it. Used as a context manager, it gives the folder's path and closes on the way out."""

    def __init__(self, path: Path, descriptors: List[int]) -> None:
        self.path = path
        self._descriptors = descriptors

    def close(self) -> None:
        """Remove the folder, then let it go (removed while held: no other run takes it meanwhile)."""
        descriptors, self._descriptors = self._descriptors, []
        if descriptors:
            _remove_held(str(self.path), descriptors)

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
        # Made under a name that is held before it becomes the folder's own (the rename keeps its
        # HELD_FILE, so the lock), and made and held under the prefix's lock, shared: a remover that
        # holds that lock alone finds every staging folder of the form held, or its maker dead.
        guard = _prefix_lock(prefix, where, fcntl.LOCK_SH)
        try:
            staging = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", suffix=_STAGING, dir=str(where))
            descriptors: List[int] = []
            try:
                # The folder's own flock too, where the filesystem gives one: what a run of an
                # earlier version holds and takes, so neither takes the other's live folder.
                descriptors.append(os.open(staging, os.O_RDONLY | os.O_DIRECTORY))
                # Its own fresh file in a folder of mode 0700: no one else's, and no link.
                descriptors.append(os.open(os.path.join(staging, HELD_FILE),
                                           os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            except BaseException:
                for descriptor in descriptors:
                    os.close(descriptor)
                _remove_made(staging)
                raise
            for descriptor in descriptors:
                # A filesystem without any flock leaves the folder unheld: no remover can take it
                # there either (its HELD_FILE is there), so it is kept, never removed live.
                with contextlib.suppress(OSError):
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fresh: no one else has it
        finally:
            if guard is not None:
                os.close(guard)
        final = staging[: -len(_STAGING)]
        try:
            # mkdtemp made the staging name unique, not the final one: a rename would replace an
            # (empty) folder of that name, so a name taken already is given up for another.
            if not os.path.lexists(final):
                os.rename(staging, final)
                return WorkFolder(Path(final), descriptors)
            _remove_made(staging)  # while held: no remover takes it meanwhile
        except BaseException:
            _remove_made(staging)
            for descriptor in descriptors:
                os.close(descriptor)
            raise
        for descriptor in descriptors:
            os.close(descriptor)


def remove_abandoned(prefix: str, parent: Path) -> None:
    """Remove the folders in `parent` that make_work_folder made for `prefix` (named exactly
    PREFIX + PID + "-" + 8 of mkdtemp's letters, or that + ".new" while being made) and that no
    run holds: only a real folder (never a symlink, nor what one points to) that this user owns,
    taken with the flocks of its HELD_FILE and of the folder where the filesystem gives one (held
    while it goes, so two removers never race); one without a HELD_FILE (a run killed before it
    made one, or an earlier version's) only with the folder's flock, or while being made; a name
    of another form, or a HELD_FILE that is no plain file of this user's, is left alone. A folder
    being made is taken only under the prefix's lock, held alone (not waited for: while a run
    makes one, the next run takes what a killed one left)."""
    form = re.compile(re.escape(prefix) + r"[1-9][0-9]*-[a-z0-9_]{8}(?:" + re.escape(_STAGING) + ")?")
    try:
        entries = [entry for entry in os.scandir(parent) if form.fullmatch(entry.name)]
    except OSError:
        return  # no such folder yet, or not ours to read: nothing of ours is there
    taken = [(entry.path, held) for entry in entries if not entry.name.endswith(_STAGING)
             for held in [_taken(entry, False)] if held is not None]
    staging = [entry for entry in entries if entry.name.endswith(_STAGING)]
    guard = _prefix_lock(prefix, parent, fcntl.LOCK_EX | fcntl.LOCK_NB) if staging else None
    if guard is not None:
        try:
            taken += [(entry.path, held) for entry in staging for held in [_taken(entry, True)] if held is not None]
        finally:
            os.close(guard)
    for path, descriptors in taken:
        _remove_held(path, descriptors)


def _remove_held(path: str, descriptors: List[int]) -> None:
    """Remove the folder at `path` while `descriptors` (its HELD_FILE's) hold it, then let it go."""
    try:
        # rmtree never follows a link inside the folder (nor one swapped in for it meanwhile).
        shutil.rmtree(path, ignore_errors=True)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)
    # NFS keeps a held file's unlinking as a `.nfsXXXX` in the folder until its close: gone now.
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)


def _taken(entry: "os.DirEntry[str]", made_dead: bool) -> Optional[List[int]]:
    """The descriptors to close once `entry`'s folder is gone (the folder's and its HELD_FILE's,
    held), where it is a real folder of this user's that no run holds; else None. `made_dead`:
    its maker is dead if it was still making it (a staging folder, under the prefix's lock)."""
    try:
        found = entry.stat(follow_symlinks=False)
    except OSError:
        return None  # gone meanwhile
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        return None
    try:
        folder = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None  # gone, or a link swapped in meanwhile
    descriptors, handed = [folder], False
    try:
        opened = os.fstat(folder)
        if (opened.st_dev, opened.st_ino) != (found.st_dev, found.st_ino):  # not the folder looked at
            return None
        try:
            fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held_folder = True
        except BlockingIOError:
            return None  # a live run's (in any pid namespace), of this version or an earlier one
        except OSError:
            held_folder = False  # NFS refuses a folder's flock: the HELD_FILE's tells
        try:
            # Opened for writing, as an exclusive lock on NFS needs (O_NONBLOCK: a FIFO planted
            # there opens without waiting, and is refused as no plain file).
            descriptors.append(os.open(HELD_FILE, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder))
        except FileNotFoundError:
            # None at all, and no folder's flock: an earlier version's run may be using it.
            handed = held_folder or made_dead
        else:
            handed = _locked(descriptors[-1])
        return descriptors if handed else None
    except OSError:
        return None  # gone meanwhile, or a HELD_FILE that is a link
    finally:
        if not handed:
            for descriptor in descriptors:
                os.close(descriptor)


def _locked(descriptor: int) -> bool:
    """Whether `descriptor`, this user's plain file, is now locked (its flock) by this process:
    False where a run holds it (in any pid namespace), or on a filesystem without flock."""
    try:
        held = os.fstat(descriptor)
        if stat.S_ISREG(held.st_mode) and held.st_uid == os.geteuid():
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
    except OSError:
        pass
    return False


def _remove_made(staging: str) -> None:
    """Remove a staging folder this run just made (its HELD_FILE, then the folder)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(staging, HELD_FILE))
    with contextlib.suppress(OSError):
        os.rmdir(staging)


def _prefix_lock(prefix: str, parent: Path, operation: int) -> Optional[int]:
    """The lock of `prefix`'s folders in `parent`, taken by `operation` (flock's), on the
    descriptor returned: a hidden file "." + PREFIX + "uid" + this user's id + ".lock" there (no
    glob of PREFIX + "*" lists it; PREFIX's own leading dot not doubled), kept for good
    (removing a lock file another run has open would give two runs two locks). None where it
    cannot be taken: refused (LOCK_NB), a file that cannot be made, a filesystem without flock,
    or a name that is not this user's own plain file (another user's could be held for ever).
    Opened for reading and writing, as NFS's locks need for a shared and an exclusive one."""
    path = parent / f".{prefix.lstrip('.')}uid{os.geteuid()}.lock"
    while True:
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CREAT, 0o600)
        except OSError:
            return None
        held = False
        try:
            opened = os.fstat(descriptor)
            if not stat.S_ISREG(opened.st_mode) or opened.st_uid != os.geteuid():
                return None
            fcntl.flock(descriptor, operation)
            named = os.stat(path, follow_symlinks=False)  # the lock is the file the name gives now
            held = (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
        except FileNotFoundError:
            pass  # removed meanwhile: the lock is the next file's of the name
        except OSError:
            return None  # refused, or a filesystem without flock
        finally:
            if not held:
                os.close(descriptor)
        if held:
            return descriptor
