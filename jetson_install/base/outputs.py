"""Files the user names: inputs read bounded, outputs (--evidence, --gate-evidence, --output)
written whole or not at all; and the tool's own files, never written through a link."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional, Union

from jetson_install.base.errors import BadInput

__all__ = ["check_output", "write_output", "replace_file", "read_regular_file", "write_own", "OWN_FILE_FLAGS",
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
        descriptor, temporary = tempfile.mkstemp(prefix=".jetson-install-check-", dir=str(existing))
        os.close(descriptor)
        os.unlink(temporary)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write there ({exc.strerror or exc})",
                       fix="pass a file in a folder you can write") from None


def replace_file(path: Union[str, Path], data: Union[str, bytes], mode: Optional[int] = None) -> None:
    """`path` holds `data`, whole: written to a temporary file beside it, then renamed over it.
    A symbolic link at `path` is replaced, never followed, so an output cannot overwrite the
    file a link points at; a reader never sees half a file. `mode` None: what a new file
    would get (0666 less the umask)."""
    target = Path(path)
    if mode is None:
        mask = os.umask(0o022)
        os.umask(mask)
        mode = 0o666 & ~mask
    payload = data.encode("utf-8") if isinstance(data, str) else data
    # Named by pid, so what a killed writer left can be told from a live one's (lock.py removes it).
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp",
                                             dir=str(target.parent))
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


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
