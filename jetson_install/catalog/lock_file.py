"""The lock file format: a board's whole environment as one hashed requirements file.

Pure: a reader and a writer (`parse_lock`, `render_lock`) and what a wheelhouse's lock
becomes when its files are served from the wheelhouse (`relocated`). Making a lock is
lock.py's; filling a wheelhouse is wheelhouse.py's.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Tuple, Union
from urllib.parse import quote, unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from jetson_install.base.errors import BadInput
from jetson_install.base.outputs import read_regular_file

__all__ = ["LOCK_VERSION", "LOCK_HEADER", "MAX_LOCK_BYTES", "file_sha256", "WHEELHOUSE_LOCK", "FILES_DIR", "SIMPLE_DIR", "Locked", "Lock", "render_lock", "parse_lock",
           "read_lock", "read_lock_text", "lock_mismatch", "relocated", "file_name_problem"]

LOCK_VERSION = 1
LOCK_HEADER = "# jetson-install lock "  # how every lock begins, whatever its version
#: The most a lock may hold: a real one is a line or two per file of an environment (tens of
#: kilobytes), and a file far past it is not one, whatever its first line says.
MAX_LOCK_BYTES = 16 * 2**20
#: The lock a wheelhouse carries, beside its files/ and simple/ (the PEP 503 index).
WHEELHOUSE_LOCK = "lock.txt"
FILES_DIR = "files"
SIMPLE_DIR = "simple"


@dataclass(frozen=True)
class Locked:
    """One file of the lock: the distribution, where its file is, and its sha256."""

    name: str
    version: str
    url: str
    sha256: str
    origin: str  # vendor | default | built
    sdist: bool = False  # a source archive: the board builds it

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])

    def line(self) -> str:
        return f"{self.name} @ {self.url} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class Lock:
    channel: str
    python: str  # "3.10"
    arch: str  # "aarch64"
    platform: str  # uv's --python-platform, or "native" for a lock made for an interpreter here
    source: str  # the target's requirement it was built from ("none": the stack alone)
    source_commit: Optional[str]
    tool: str
    entries: Tuple[Locked, ...]
    # What the resolution warned of (a mirror's unlisted vendor files): said in the lock, not only when it was made.
    warnings: Tuple[str, ...] = ()
    target: str = "obliteratus"  # the command that installs it, as the first line names it

    @property
    def from_source(self) -> List[str]:
        """The packages the board has to build from a source archive."""
        return [entry.name for entry in self.entries if entry.sdist]

    def to_json(self) -> Dict[str, Any]:
        return {"target": self.target, "channel": self.channel, "python": self.python, "arch": self.arch, "platform": self.platform,
                "source": self.source, "source_commit": self.source_commit, "tool": self.tool,
                "packages": {entry.name: entry.version for entry in self.entries},
                "built_from_source_on_the_board": self.from_source, "warnings": list(self.warnings)}


_HEADER_KEYS = ("channel", "python", "arch", "platform", "source", "source-commit", "tool")


def render_lock(lock: Lock) -> str:
    """The lock as a hashed requirements file: `pip install --no-deps --require-hashes -r`
    and `uv pip install --no-deps --require-hashes -r` read it as it is."""
    lines = [f"{LOCK_HEADER}{LOCK_VERSION}: install with `jetson-install {lock.target} --lock FILE`",
             f"# channel: {lock.channel}", f"# python: {lock.python}", f"# arch: {lock.arch}",
             f"# platform: {lock.platform}", f"# source: {lock.source}",
             f"# source-commit: {lock.source_commit or 'none (a local tree without git)'}", f"# tool: {lock.tool}"]
    lines += [f"# warning: {' '.join(warning.split())}" for warning in lock.warnings]
    for entry in sorted(lock.entries, key=lambda e: e.name):
        lines.append(f"# {entry.name} {entry.version} from the {entry.origin} "
                     + ("index, built on the board from source" if entry.sdist else
                        "build of the source" if entry.origin == "built" else "index"))
        lines.append(entry.line())
    return "\n".join(lines) + "\n"


def file_sha256(path: Path) -> str:
    """The sha256 a lock line records for a file, read a MiB at a time (a vendor wheel is up to GBs)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


_HEADER = re.compile(r"^# (?P<key>[a-z-]+): (?P<value>.*)$")
_ENTRY_NOTE = re.compile(r"^# (?P<name>\S+) (?P<version>\S+) from the (?P<origin>vendor|default|built) ")
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+) @ (?P<url>\S+) --hash=sha256:(?P<sha256>[0-9a-f]{64})$")


def file_name_problem(entry: Locked) -> Optional[str]:
    """Why the file an entry's URL names is not a file of that distribution, else None. The
    name becomes a path (a wheelhouse's files/NAME): it must be one plain path component, and a
    wheel (PEP 427) or source archive name of the entry's own distribution and version."""
    try:
        name = entry.filename
    except ValueError as exc:  # urlsplit's: an unclosed '[' of an IPv6 host
        return f"its URL {entry.url!r} is not a URL ({exc})"
    if not name or name in (".", "..") or name.startswith(".") or any(
            char in name for char in "/\\\0") or any(ord(char) < 32 for char in name):
        return f"its file name {name!r} is not one plain file name"
    try:
        if name.endswith(".whl"):
            distribution, version = parse_wheel_filename(name)[:2]
        else:
            distribution, version = parse_sdist_filename(name)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion) as exc:
        return f"its file name {name!r} is not a wheel or source archive name ({exc})"
    if distribution != canonicalize_name(entry.name):
        return f"its file {name!r} is a file of {distribution}, not of {entry.name}"
    try:
        same = version == Version(entry.version)
    except InvalidVersion:
        same = False
    if not same:
        return f"its file {name!r} is version {version}, and the lock says {entry.version}"
    return None


# The first line names the command that installs the lock, and so its target.
_FIRST_LINE = re.compile(r"^# jetson-install lock \d+: install with `jetson-install ([a-z][a-z0-9-]*) --lock FILE`")


def parse_lock(text: str, where: str) -> Lock:
    """A lock from its text; one clear error naming `where` for anything else."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(f"{LOCK_HEADER}{LOCK_VERSION}"):
        raise BadInput(f"{where} is not a jetson-install lock (version {LOCK_VERSION})",
                       fix="make one with: jetson-install lock --output FILE")
    header: Dict[str, str] = {}
    warnings: List[str] = []
    entries: List[Locked] = []
    note: Optional[Tuple[str, str, str, bool]] = None
    noted_at = 0
    for number, line in enumerate(lines[1:], start=2):
        # A header line first: its value (a source, a warning) may read like an entry's note,
        # and an entry's note never reads like a header line (a name has no ':').
        found = _HEADER.match(line)
        if found and not entries and note is None:
            if found.group("key") == "warning":
                warnings.append(found.group("value"))
            else:
                header[found.group("key")] = found.group("value")
            continue
        found = _ENTRY_NOTE.match(line)
        if found:
            if note is not None:
                _missing_line(where, noted_at, note[0])
            note = (found.group("name"), found.group("version"), found.group("origin"), "from source" in line)
            noted_at = number
            continue
        if not line.strip() or line.startswith("#"):
            continue
        found = _LINE.match(line.strip())
        if not found or note is None or note[0] != found.group("name"):
            raise BadInput(f"{where}:{number}: not a line of a jetson-install lock: {line.strip()[:120]}",
                           fix="make the lock again: jetson-install lock --output FILE")
        entry = Locked(found.group("name"), note[1], found.group("url"), found.group("sha256"), note[2], note[3])
        problem = file_name_problem(entry)
        if problem is not None:
            # Checked before anything is downloaded: the name becomes a path in a wheelhouse.
            raise BadInput(f"{where}:{number}: {entry.name}: {problem}",
                           fix="make the lock again: jetson-install lock --output FILE")
        entries.append(entry)
        note = None
    if note is not None:
        _missing_line(where, noted_at, note[0])
    missing = [key for key in _HEADER_KEYS if key not in header]
    if missing:
        raise BadInput(f"{where} lacks its {', '.join(missing)} line(s)",
                       fix="make the lock again: jetson-install lock --output FILE")
    commit = header["source-commit"]
    first = _FIRST_LINE.match(lines[0])
    return Lock(header["channel"], header["python"], header["arch"], header["platform"], header["source"],
                None if commit.startswith("none") else commit, header["tool"], tuple(entries), tuple(warnings),
                first.group(1) if first else "obliteratus")


def _missing_line(where: str, number: int, name: str) -> NoReturn:
    """A note without the requirement line it introduces: a lock cut short or edited."""
    raise BadInput(f"{where}:{number}: {name}'s requirement line is missing after its note",
                   fix="make the lock again: jetson-install lock --output FILE")


def read_lock(path: Union[str, Path], where: Optional[str] = None, *, follow: bool = True,
              fix: str = "pass the file `jetson-install lock --output FILE` wrote") -> Lock:
    """The lock in the file at `path` (read_lock_text), `where` naming it in every refusal."""
    where = where or f"--lock {path}"
    return parse_lock(read_lock_text(path, where, follow=follow, fix=fix), where)


def read_lock_text(path: Union[str, Path], where: str, *, follow: bool = True,
                   fix: str = "pass the file `jetson-install lock --output FILE` wrote") -> str:
    """The text of the lock file at `path`, the one way every lock on disk is read: a regular file
    only (a FIFO would wait for a writer, /dev/zero never ends), of at most MAX_LOCK_BYTES, UTF-8;
    anything else is one line naming `where` with `fix`. `follow=False` refuses a symbolic link
    at `path` (a wheelhouse's own lock.txt)."""
    try:
        raw = read_regular_file(path, MAX_LOCK_BYTES + 1, follow=follow)
    except OSError as exc:
        raise BadInput(f"{where}: {exc.strerror or exc}", fix=fix) from None
    if raw is None:
        raise BadInput(f"{where}: not a regular file (a lock is one)", fix=fix)
    if len(raw) > MAX_LOCK_BYTES:
        raise BadInput(f"{where}: larger than {MAX_LOCK_BYTES // 2**20} MiB, far more than any lock", fix=fix)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{where}: not UTF-8 text", fix=fix) from None


def lock_mismatch(lock: Lock, channel: Optional[str], python: str, arch: str, target: str) -> Optional[str]:
    """Why `lock` cannot be installed for this target, channel, Python and architecture, or None."""
    if lock.target != target:
        return f"the lock was made by `jetson-install lock {lock.target}`, and this is `jetson-install {target}`"
    for what, made_for, here in (("architecture", lock.arch, arch), ("Python", lock.python, python),
                                 ("channel", lock.channel, channel or "none")):
        if made_for != here:
            return f"the lock was made for {what} {made_for}, and this install is for {here}"
    return None


def relocated(lock: Lock, wheelhouse: str) -> Lock:
    """`lock` with every file taken from a wheelhouse (a folder's file: URL, or where it is
    served over http) instead of the indexes the lock was made from."""
    base = wheelhouse.rstrip("/")
    return replace(lock, entries=tuple(replace(entry, url=f"{base}/{FILES_DIR}/{quote(entry.filename)}")
                                       for entry in lock.entries))
