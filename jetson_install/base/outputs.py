"""Files the user names: inputs read bounded, outputs (--evidence, --gate-evidence, --output)
written whole or not at all; and the tool's own files, never written through a link."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Optional, Tuple, Union

from jetson_install.base.errors import BadInput

__all__ = ["check_output", "try_creating_in", "write_output", "replace_file", "read_regular_file", "write_own", "OWN_FILE_FLAGS",
           "READ_CHUNK"]

# One read() at a time: procfs answers a sysctl read of 64 MiB with ENOMEM.
READ_CHUNK = 64 * 1024


def read_regular_file(path: Union[str, Path], limit: int, *, follow: bool = True) -> Optional[bytes]:
    """A regular file's first `limit` bytes, read in small pieces; None when it is not a
    regular file (a FIFO would block, a device never ends). OSError when it cannot be opened.
    `follow=False` refuses a symbolic link at `path` itself (ELOOP)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    # O_NONBLOCK: opening a FIFO returns at once, and fstat then refuses it.
    descriptor = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        data = bytearray()
        while len(data) < limit:
            chunk = os.read(descriptor, min(READ_CHUNK, limit - len(data)))
            if not chunk:
                break
            data += chunk
        return bytes(data)
    finally:
        os.close(descriptor)


#: How the tool opens a file of its own to write it (a record in an environment's state folder, a
#: mark, DIR.d's lock): a symbolic link planted at its name is refused (ELOOP), never followed to
#: create or overwrite the file it names.
OWN_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def write_own(path: Union[str, Path], data: Union[str, bytes], mode: int = 0o666, *, private: bool = False) -> None:
    """Write a file of the tool's own in place (OWN_FILE_FLAGS): a new one gets `mode` less the
    umask; `private`: readable by its owner alone, whatever it was before."""
    descriptor = os.open(path, OWN_FILE_FLAGS | os.O_TRUNC, 0o600 if private else mode)
    with os.fdopen(descriptor, "wb") as handle:
        if private:
            os.fchmod(descriptor, 0o600)
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)


def check_output(option: str, path: Union[str, Path], *, make_folder: bool = False) -> None:
    """Refuse, before any work, an output the command could not write: a folder given for a
    file, a place this user cannot create a file in (a read-only or pseudo filesystem such as
    /proc: only trying tells), and, unless the command makes it (`make_folder`), a folder that
    does not exist. Nothing is left behind."""
    target = Path(path).absolute()
    if target.is_dir():
        raise BadInput(f"{option} {path}: is a directory", fix="pass a file name")
    if not make_folder and not target.parent.is_dir():
        raise BadInput(f"{option} {path}: its directory does not exist",
                       fix=f"mkdir -p {target.parent}, or pass another file")
    existing = target.parent  # (or, where the command makes it, the folder it would be made in)
    while not existing.is_dir() and existing != existing.parent:
        existing = existing.parent
    try:
        try_creating_in(existing)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write there ({exc.strerror or exc})",
                       fix="pass a file in a folder you can write") from None


def try_creating_in(folder: Union[str, Path]) -> None:
    """Raise the OSError that creating a file in `folder` (a folder that exists) would meet (only
    trying tells: access bits say nothing for root, on /proc or on a read-only mount). The file has
    no name where the filesystem makes one without (O_TMPFILE, which tempfile tries first): a run
    killed meanwhile leaves nothing in the user's folder. Where it has none (NFS), tempfile names
    it and removes it at once."""
    with tempfile.TemporaryFile(prefix=".jetson-install-check-", dir=str(folder)):
        pass


def replace_file(path: Union[str, Path], data: Union[str, bytes], mode: Optional[int] = None) -> None:
    """`path` holds `data`, whole: written to a temporary file beside it, then renamed over it.
    A symbolic link at `path` is replaced, never followed, so an output cannot overwrite the
    file a link points at; a reader never sees half a file. `mode` None: what a new file
    would get (0666 less the umask). The temporary files of `path` that killed writers left
    are removed first (_remove_abandoned): each kill would leave one more."""
    target = Path(path)
    if mode is None:
        mask = os.umask(0o022)
        os.umask(mask)
        mode = 0o666 & ~mask
    payload = data.encode("utf-8") if isinstance(data, str) else data
    _remove_abandoned(target)
    descriptor, temporary = _held_temporary(target)
    try:
        # Held (its flock) until it is renamed: the descriptor closes after os.replace.
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _held_temporary(target: Path) -> Tuple[int, str]:
    """A fresh temporary file for `target` (`.NAME.PID.XXXXXXXX.tmp` beside it, the pid for a human
    and for fleet/lock.py's own removal), held (its flock) while it lives, so that no remover
    takes it: one that took it in the instant between mkstemp and the flock has unlinked it, and
    another is made."""
    while True:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp",
                                                 dir=str(target.parent))
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # mkstemp opened it to write, as NFS needs
        except BlockingIOError:
            os.close(descriptor)  # a remover's, which unlinks it
            continue
        except OSError:
            return descriptor, temporary  # a filesystem without flock: no remover takes it either
        try:
            named = os.stat(temporary, follow_symlinks=False)
            opened = os.fstat(descriptor)
            if (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino):
                return descriptor, temporary
        except FileNotFoundError:
            pass  # a remover's before it was held
        except BaseException:
            os.close(descriptor)
            raise
        os.close(descriptor)


def _remove_abandoned(target: Path) -> None:
    """Remove the temporary files of `target` that writers killed while writing left: named
    exactly as _held_temporary names them, this user's regular files (never through a link),
    and only those no writer holds (their flock, taken without waiting, in any pid namespace)."""
    form = re.compile(re.escape(f".{target.name}.") + r"[1-9][0-9]*\.[a-z0-9_]{8}\.tmp")
    try:
        entries = [entry for entry in os.scandir(target.parent) if form.fullmatch(entry.name)]
    except OSError:
        return  # mkstemp says what is wrong with the folder
    for entry in entries:
        try:
            found = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
                continue
            descriptor = os.open(entry.path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile, or a link swapped in
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            opened = os.fstat(descriptor)
            named = os.stat(entry.path, follow_symlinks=False)  # (held: no writer keeps it now)
            if (opened.st_dev, opened.st_ino) == (found.st_dev, found.st_ino) == (named.st_dev, named.st_ino):
                os.unlink(entry.path)
        except OSError:
            pass  # a live writer's, gone meanwhile, or a filesystem without flock
        finally:
            os.close(descriptor)


def write_output(option: str, path: str, text: str) -> None:
    """Write what an option asked for (see replace_file); a path that cannot be written is bad
    input, not a traceback."""
    if Path(path).is_dir():
        raise BadInput(f"{option} {path}: is a directory", fix="pass a file name")
    try:
        replace_file(path, text)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write it ({exc.strerror})",
                       fix="pass a file in an existing, writable directory") from None
