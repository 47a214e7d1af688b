"""The `fix:` line of a failed install step: the command to run next, for the true cause.

The cause comes from uv's own words (uv_errors.read_uv_failure) or from the operating
system's error number; a cause no rule knows gets "fix the cause above", never a guess.
"""

from __future__ import annotations

import errno
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Tuple
from urllib.parse import urlsplit

from jetson_install.base.git_urls import split_git_url
from jetson_install.base.places import file_in_the_way, is_mount_point, kept_from_change, nearest_existing
from jetson_install.base.redact import CREDENTIALS_FIX
from jetson_install.planning.rerun import Rerun

if TYPE_CHECKING:
    from jetson_install.tools.uv_errors import UvFailure

__all__ = ["StepContext", "fix_for_uv_failure", "fix_for_os_error", "os_error_reason", "repository_of",
           "index_down_fix", "vendor_missing_fix", "other_python_fix", "python_install", "runner_command",
           "permission_needed"]


@dataclass(frozen=True)
class StepContext:
    """What a fix for one step may name: the index it asked, the source and where it builds."""

    step: str
    rerun: Rerun
    index: Optional[str]  # the index this step used; None: uv's default
    location: Path  # DIR.d, where the new environment is built
    source: str  # the target's source as given (a URL or a path)
    fallback: bool = False  # the channel has a fallback vendor source this run may switch to


def fix_for_uv_failure(failure: UvFailure, context: StepContext, usual: str) -> str:
    """The fix for uv's failure in one step; `usual` is the step's own fix for a resolution
    conflict, and the lock step's for a file that did not come (only its route knows where
    the lock's files come from: a wheelhouse, or the indexes the lock names)."""
    rerun = context.rerun
    kind = failure.kind
    if kind == "disk-full":
        place = shlex.quote(str(_disk_of(failure.subject, context.location)))
        return f"free disk space on the filesystem of {place} (df -h {place}), then run: {rerun}"
    if kind == "permission":
        place = failure.subject or str(context.location)
        return (f"make {shlex.quote(place)} writable (and readable) for this user, or choose another "
                f"location: {rerun.with_option('--venv', 'DIR')}")
    if kind == "cross-device":
        return f"keep the environment and uv's cache on one filesystem (or set UV_LINK_MODE=copy), then run: {rerun}"
    if kind == "hash-mismatch" and context.step == "lock":
        return ("a file does not match the sha256 the lock names: the wheelhouse or index it came from serves another "
                "file under its name (changed, or tampered with); fill the wheelhouse again from the lock "
                f"(jetson-install wheelhouse DIR --lock FILE), then run: {rerun}")
    if kind == "hash-mismatch":
        where = context.index or "the index"
        return (f"{where} served a file that does not match the hash it lists (a broken or tampered index): "
                f"repair the index, or use another, then run: {rerun}")
    if kind == "git-ref":
        return (f"'{failure.subject}' is not a branch, tag or commit of {context.source}; list them with "
                f"git ls-remote --heads --tags {shlex.quote(context.source)}, then run: {rerun.with_option('--ref', 'REF')}")
    if kind == "seed-packages":
        where = context.index or "uv's default index"
        return (f"{where} must carry pip, setuptools and wheel (every new environment gets them): add them "
                f"to it, or use another default index: {rerun.with_option('--default-index', 'URL')}")
    if kind == "network":
        return usual if context.step == "lock" else index_down_fix(context)
    if kind == "refused" and context.step == "lock" and not rerun.gives("--wheelhouse"):
        # The files come by the URLs the lock names: --lock takes no URL of the user's to carry
        # credentials, so ~/.netrc is the way (as for `wheelhouse --lock`); uv reads it:
        # https://docs.astral.sh/uv/concepts/authentication/http/
        host = urlsplit(failure.subject or "").hostname or "HOST"
        return (f"give {host}'s user and token in ~/.netrc (machine {host} login USER password TOKEN; never written "
                f"elsewhere or shown), then run: {rerun}")
    if kind == "refused":
        return f"{CREDENTIALS_FIX}, then run: {rerun}"
    if kind == "missing-file":
        return (f"{failure.subject or 'a file the build reads'} is missing (a dangling symlink?): restore or "
                f"remove it, then run: {rerun}")
    if kind == "requires-python":
        python, needed = (failure.subject or "? ?").split(" ", 1)
        return (f"what it installs needs Python{needed}, and the environment's is Python {python}: run with a Python "
                f"that satisfies it: {rerun.with_option('--python', 'PATH')}")
    if kind == "unsatisfiable":
        if context.step == "vendor":
            return vendor_missing_fix(context)
        return usual
    return f"fix the cause uv names above, then run: {rerun}"


def repository_of(source: str) -> str:
    """The repository a direct reference names: `git+URL@REF` -> URL; other sources as they are."""
    return split_git_url(source)[0] if source.startswith("git+") else source


def index_down_fix(context: StepContext) -> str:
    rerun = context.rerun
    if context.step == "vendor":
        where = context.index or "the vendor index"
        # --mirror keeps the vendor index and tries a copy of its recorded builds after it;
        # --vendor-index replaces it.
        offers = [f"add a mirror of its recorded builds: {rerun.with_another('--mirror', 'URL')}",
                  f"use another vendor index: {rerun.with_option('--vendor-index', 'URL')}"]
        if context.fallback:
            offers.insert(0, f"use the channel's fallback source: {rerun.without('--vendor-index').with_flag('--vendor-fallback')}")
        return f"{where} did not answer: check the network or the index, or " + "; or ".join(offers)
    where = context.index or "uv's default index"
    return (f"{where} did not answer: check the network or the index, or use another default index: "
            f"{rerun.with_option('--default-index', 'URL')}")


def vendor_missing_fix(context: StepContext) -> str:
    rerun = context.rerun
    where = context.index or "the vendor source"
    fix = (f"{where} does not carry the pinned vendor builds: use a vendor index that does: "
           f"{rerun.with_option('--vendor-index', 'URL')}")
    if context.fallback:
        fix += f"; or the channel's fallback source: {rerun.without('--vendor-index').with_flag('--vendor-fallback')}"
    return fix


def other_python_fix(context: StepContext, python: str, served: Tuple[str, ...], found: Optional[str]) -> str:
    """The index has the set only for other Pythons than the interpreter's `python`: run with
    one of those (`found`: its path here, if there is one), or use a vendor index with builds for it."""
    rerun = context.rerun
    where = context.index or "the vendor source"
    mirror = f"or use a vendor index with builds for Python {python}: {rerun.with_option('--vendor-index', 'URL')}"
    if found is not None:
        return f"{where} has the set for Python {', '.join(served)}: run with that Python: " \
               f"{rerun.with_option('--python', found)}; {mirror}"
    install, path = python_install(served[-1])
    return (f"{where} has the set for Python {', '.join(served)}, which this machine lacks: install it "
            f"({install}), then run: {rerun.with_option('--python', path)}; {mirror}")


def python_install(want: str) -> Tuple[str, str]:
    """How a machine that lacks Python `want` (3.10) gets it, and the path it then has: for an
    install's fix and the doctor's alike."""
    return f"sudo apt install python{want} python{want}-venv", f"/usr/bin/python{want}"


def _disk_of(path: Optional[str], location: Path) -> Path:
    """Where to free space: DIR.d's folder when uv was writing under it, else the folder uv named
    (uv's cache, a temporary directory); uv names a temporary file, not a folder."""
    if path is None or Path(path) == location or location in Path(path).parents:
        # DIR.d's own folder: a first install's failure removes DIR.d itself.
        return location.parent
    return Path(path).parent


def permission_needed(path: Path) -> Optional[str]:
    """What this user lacks to reach `path`: a folder the kernel keeps from change (whoever
    asks), entering a folder on the way (its execute bit), else writing the nearest folder that
    exists (or the file itself); None when none is missing as far as this user can tell."""
    path = path.absolute()
    kept = _kept(path)
    if kept is not None:
        place, flag = kept
        quoted = shlex.quote(str(place))
        return f"clear {quoted}'s {flag} flag (sudo chattr -{flag[0]} {quoted})"
    for folder in reversed(path.parents):
        if folder.is_dir() and not os.access(folder, os.X_OK):
            quoted = shlex.quote(str(folder))
            return f"let this user enter {quoted} (it lacks execute permission: chmod a+x {quoted})"
    existing = nearest_existing(path)
    quoted = shlex.quote(str(existing))
    if not os.access(existing, os.W_OK):
        return f"make {quoted} writable for this user (chmod u+w {quoted}, as its owner)"
    return None


def _kept(path: Path) -> Optional[Tuple[Path, str]]:
    """The place at or above `path` the kernel keeps from change (an existing one, or the folder
    it would be made in), and how; or its folder, where the change was its removal or renaming."""
    place = nearest_existing(path)
    for candidate in (place, place.parent) if place == path else (place,):
        flag = kept_from_change(candidate)
        if flag is not None:
            return candidate, flag
    return None


def os_error_reason(exc: OSError) -> str:
    """What could not be done, where, and why, as far as the error and the filesystem tell
    ("cannot create /x/files: /x is a file, not a folder"); the system's words where no more is known."""
    if not exc.filename:
        return str(exc.strerror or exc)
    path = Path(str(exc.filename)).absolute()
    number, said = exc.errno, exc.strerror or str(exc)
    exists = os.path.lexists(path)
    doing = f"cannot {'use' if exists or number == errno.ENOENT else 'create'} {path}"
    if number == errno.ENOTDIR and file_in_the_way(path) is not None:
        blocker = file_in_the_way(path)
        return f"{doing}: {'it' if blocker == path else blocker} is a file, not a folder"
    if number in (errno.EACCES, errno.EPERM) and _kept(path) is not None:
        place, flag = _kept(path) or (path, "")
        return f"cannot {'change' if exists else 'create'} {path}: {'it' if place == path else place} is {flag} " \
               f"(chattr +{flag[0]})"
    if number == errno.EROFS:
        return f"cannot change {path}: its filesystem is mounted read-only"
    if number == errno.EBUSY and exists and is_mount_point(path):
        return f"{doing}: it is a mount point, which cannot be removed or replaced"
    if number == errno.ENOENT and os.path.islink(path):
        return f"{doing}: it is a dangling symlink (to {os.readlink(path)})"
    return f"{doing}: {said}"


def fix_for_os_error(exc: OSError, then: str) -> str:
    """The fix for an operating-system error the tool itself met; `then` is what to run after."""
    path = shlex.quote(str(exc.filename)) if exc.filename else "that location"
    number = exc.errno
    if number in (errno.ENOSPC, errno.EDQUOT):
        return f"free disk space on the filesystem of {path} (df -h {path}), then {then}"
    blocker = file_in_the_way(Path(str(exc.filename)).absolute()) if number == errno.ENOTDIR and exc.filename else None
    if blocker is not None:
        moved = shlex.quote(f"{blocker}.old")
        return (f"move the file {shlex.quote(str(blocker))} out of the way (mv {shlex.quote(str(blocker))} {moved}), "
                f"or choose another location, then {then}")
    needed = permission_needed(Path(str(exc.filename))) if number in (errno.EACCES, errno.EPERM) and exc.filename \
        else None
    if needed is not None:
        return f"{needed}, or choose another location, then {then}"
    if number in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {path} writable (and readable) for this user, or choose another location, then {then}"
    if number == errno.EXDEV:
        return f"keep DIR and DIR.d on one filesystem (choose another --venv), then {then}"
    if number == errno.EBUSY and exc.filename and is_mount_point(Path(str(exc.filename))):
        return f"choose a location inside the mount {path}, then {then}"
    if number in (errno.ENOENT, errno.ELOOP) and exc.filename and os.path.islink(str(exc.filename)):
        return f"{path} is a dangling symlink: restore or remove it, then {then}"
    if number == errno.ENOENT:
        return f"{path} is missing: restore it, then {then}"
    return f"fix the cause above, then {then}"


def runner_command(target: str, lock: str, url: str) -> str:
    """What each runner runs: the fleet's route, the hashes from the runner's own copy of the
    lock and only the files from the wheelhouse, which plain http cannot alter (docs/fleets.md)."""
    return f"jetson-install {target} --lock {shlex.quote(lock)} --wheelhouse {url}"
