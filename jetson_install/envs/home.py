"""Environments on disk: built beside the user's path, switched into place atomically.

Layout for --venv DIR:

    DIR            -> DIR.d/env-<id>   (a symlink; what the user activates)
    DIR.d/env-<id>                    (complete environments: the current one and the previous one)
    DIR.d/.env-<id>.building          (marks an environment being built as jetson-install's own)
    DIR.d/.lock                       (held while jetson-install works on DIR)
    DIR.d/.jetson-install-owner       (the tool's mark: a random token, copied into each environment)

Only what carries the tool's mark is ever acted on: a DIR.d it made (not a link, not a folder
the user made and filled with familiar names), and in it the environments whose copy of the
token matches; `previous` must name one of those, directly in DIR.d. A user's DIR.d/env-mydata
survives. DIR.d may be on another filesystem than DIR (a mount): the new link is made beside
DIR, so the switch is a rename within one directory.

DIR.d made before the mark existed carries none: one holding the tool's lock file and at least
one complete environment with the plan the tool records (every install writes it before
completing) is adopted, the mark written under the first lock taken on it. A user is not
expected to hand-make both; the other kinds of DIR.d are refused, as before.

A new environment is built at its final path under DIR.d, so nothing inside it is
ever moved (virtual environments are not relocatable), and DIR flips to it with one
rename of a symlink. Until that rename the old environment is untouched, whatever
fails, including a Ctrl-C or a kill.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pwd
import re
import shlex
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from jetson_install.base.errors import AnotherUsers, BadInput
from jetson_install.base.outputs import OWN_FILE_FLAGS, try_creating_in, write_own
from jetson_install.base.layout import (
    COMPLETE_MARK,
    FAILED_EVIDENCE,
    HOME_LOCK,
    OWNER_MARK,
    OWNER_MARK_PREFIX,
    PLAN_FILE,
    PREVIOUS_FILE,
    REMOVING_PREFIX,
    STATE_DIR,
    home_of,
)
from jetson_install.base.places import is_mount_point, unkept
from jetson_install.base.redact import redact_data
from jetson_install.envs.disk import disk_usage
from jetson_install.envs.known_dirs import remember
from jetson_install.envs.recorded import write_private

__all__ = ["EnvironmentHome", "linked_home"]


@dataclass(frozen=True)
class EnvironmentHome:
    """The user's environment path and the directory that holds its real environments."""

    link: Path

    @property
    def home(self) -> Path:
        return home_of(self.link)

    def _link_target(self) -> Optional[Path]:
        if not self.link.is_symlink():
            return None
        target = Path(os.readlink(self.link))
        return target if target.is_absolute() else self.link.parent / target

    def current(self) -> Optional[Path]:
        target = self._link_target()
        return target if target is not None and self._owns(target) and _is_complete(target) else None

    def _mark(self) -> Optional[str]:
        """DIR.d's mark, where DIR.d is a real folder holding a well-formed one."""
        if self.home.is_symlink() or not self.home.is_dir():
            return None
        return _read_mark(self.home / OWNER_MARK)

    def _adoptable(self) -> bool:
        """A DIR.d made before the mark existed: see the module's docstring."""
        if self.home.is_symlink() or not self.home.is_dir() or os.path.lexists(self.home / OWNER_MARK):
            return False
        lock = self.home / HOME_LOCK
        return lock.is_file() and not lock.is_symlink() and any(self._legacy_environments())

    def _legacy_environments(self) -> Iterator[Path]:
        for path in sorted(self.home.glob("env-*")):
            if (_OWN_NAME.match(path.name) and not path.is_symlink() and _is_complete(path)
                    and (path / STATE_DIR / PLAN_FILE).is_file()):
                yield path

    def owned(self) -> bool:
        """Whether DIR.d carries the tool's mark (or is one it made before marks, to adopt)."""
        return self._mark() is not None or self._adoptable()

    def _claim(self) -> None:
        """Under the lock: mark a DIR.d made before marks, and its environments, as the tool's."""
        if self._mark() is not None:
            return
        legacy = list(self._legacy_environments())
        if not legacy and any(entry.name != HOME_LOCK for entry in self.home.iterdir()):
            # Whoever calls lock() checked DIR.d first; this keeps a missed check from claiming a user's folder.
            raise BadInput(f"{self.link}: {self.home} does not carry jetson-install's mark ({OWNER_MARK}); it is left "
                           "as it is", fix=f"choose another location with --venv, or move {self.home} away first")
        mark = self._ensure_mark()
        for environment in legacy:
            _replace_text(environment / STATE_DIR / OWNER_MARK, mark)

    def _ensure_mark(self) -> str:
        mark = self._mark()
        if mark is None:
            mark = f"{OWNER_MARK_PREFIX}{uuid.uuid4().hex}\n"
            _replace_text(self.home / OWNER_MARK, mark)
        return mark

    def _owns(self, environment: Path) -> bool:
        """Whether `environment` is one of this DIR.d's own: directly in it, named as the tool
        names them, and being built (its building mark) or carrying DIR.d's token."""
        if (environment.is_symlink() or not _OWN_NAME.match(environment.name)
                or environment.parent.resolve() != self.home.resolve()):
            return False
        mark = self._mark()
        if mark is None:
            return self._adoptable() and any(own.name == environment.name for own in self._legacy_environments())
        return _building_mark(environment).is_file() or _read_mark(environment / STATE_DIR / OWNER_MARK) == mark

    def check_usable(self, again: Callable[[Optional[str]], str], create: bool = True) -> None:
        """Refuse a location the install could not use, or that holds something the user made;
        `again(DIR)` is the user's command with --venv DIR (None: as it was). With create=False
        (a dry run) nothing is changed: a missing folder is only tried."""
        parent = self.link.absolute().parent
        try:
            if create:
                parent.mkdir(parents=True, exist_ok=True)
            _try_creating_in(parent)
        except OSError as exc:
            where = f"create folders in {parent}" if parent.is_dir() else f"create {parent}"
            raise BadInput(f"--venv {self.link}: cannot {where} ({exc.strerror})",
                           fix=f"choose a location in a writable folder: {again('DIR')}") from None
        target = self._link_target()
        if target is not None:
            if target.parent.resolve() == self.home.resolve():
                self._check_home()
                return
            raise BadInput(
                f"--venv {self.link}: is a link to {target}, which jetson-install did not make; it is left as it is",
                fix=f"choose another location with --venv, or remove the link {self.link} first",
            )
        self._check_home()
        if not self.link.exists():
            return
        # DIR becomes a link into DIR.d: a folder there (even an empty one: its mode, owner, ACLs) is
        # never replaced, so no run, failed or killed, can lose it; a mount point cannot be replaced at all.
        if is_mount_point(self.link):
            raise BadInput(f"--venv {self.link}: is a mount point, and jetson-install makes DIR a link to its "
                           "environments (DIR.d/env-*), so DIR cannot be a mount point; it is left as it is",
                           fix=f"use a folder inside the mount: {again(str(self.link / 'venv'))}")
        empty = self.link.is_dir() and not any(self.link.iterdir())
        kind = "is an empty folder jetson-install did not make" if empty else "exists and was not made by jetson-install"
        raise BadInput(f"--venv {self.link}: {kind} (DIR becomes a link to its environments); it is left as it is",
                       fix=f"remove it ({unkept(self.link)}rmdir {shlex.quote(str(self.link))}), then run: {again(None)}" if empty else
                       f"choose another location: {again('DIR')}; or move {self.link} away first")

    def _check_home(self) -> None:
        """Refuse a DIR.d that jetson-install did not make (something else's folder, a link, a
        file): the install would build in it, prune in it and take its name."""
        home = self.home
        if not home.exists() and not home.is_symlink():
            return
        if home.is_symlink():
            raise linked_home(self.link, f"--venv {self.link}")
        fix = f"choose another location with --venv, or move {home} away first"
        if not home.is_dir():
            raise BadInput(f"--venv {self.link}: {home} exists and is not a folder jetson-install made; it is left "
                           "as it is", fix=fix)
        # A DIR.d holding only the lock is one a first install left (its lock taken, nothing built).
        if not self.owned() and any(entry.name != HOME_LOCK for entry in home.iterdir()):
            raise BadInput(f"--venv {self.link}: {home} exists and does not carry jetson-install's mark "
                           f"({OWNER_MARK}); it is left as it is", fix=fix)

    def strays(self) -> List[Path]:
        """Folders named as the tool names its environments, with neither mark nor completion:
        what a child of a killed run (a uv that outlived it) made again after its mark was gone."""
        return [path for path in sorted(self.home.glob("env-*"))
                if _OWN_NAME.match(path.name) and not path.is_symlink() and path.is_dir()
                and not _building_mark(path).exists() and not _is_complete(path)
                # What uv venv made there; a user's folder that only shares the naming is kept.
                and (path / "pyvenv.cfg").is_file()]

    def lock(self) -> "_Lock":
        """DIR's lock; once held, DIR.d carries the tool's mark (a new one, or one made before
        marks) and DIR is in this user's list (`list`): a command refused before it holds the
        lock records nothing."""
        if self.home.is_symlink():
            raise linked_home(self.link, str(self.link))
        self._refuse_another_users()
        self.home.mkdir(exist_ok=True)

        def claim() -> None:
            self._claim()
            remember(self.link)

        return _Lock(self.home / HOME_LOCK, self.link, claim)

    def _refuse_another_users(self) -> None:
        """Another user's DIR.d (root's, seen by a CI runner's user): its files are theirs to change,
        and no permission this user could be given would make it theirs. Root may act on any."""
        try:
            owner = self.home.stat().st_uid
        except FileNotFoundError:
            return
        if os.geteuid() in (owner, 0):
            return
        raise AnotherUsers(f"--venv {self.link}: {self.home} belongs to {_user_name(owner)}, not to this user "
                           f"({_user_name(os.geteuid())}); nothing was done", _user_name(owner))

    def is_ours(self) -> bool:
        """Whether DIR is jetson-install's: its link into DIR.d, or (a removal that was cut
        short) no DIR at all beside a DIR.d that still holds the tool's own things."""
        if not self.owned():
            return False
        target = self._link_target()
        if target is not None:
            return target.parent.resolve() == self.home.resolve()
        if self.link.exists():
            return False
        return any(self.environments()) or any(self.leftovers())

    def leftovers(self) -> List[Path]:
        """What jetson-install left in DIR.d besides its environments: removals cut short,
        switch links of killed runs, discarded environments' evidence."""
        found = [*self.home.glob(f"{REMOVING_PREFIX}env-*"), *self.home.glob(FAILED_EVIDENCE.format(name="env-*"))]
        found += self.link.parent.glob(f".{self.link.name}.link-*")
        return sorted(found)

    def uninstall(self) -> List[Path]:
        """Remove DIR and every environment jetson-install made for it; the caller holds the lock.
        DIR goes first, in one unlink, so no half-removed environment is ever the one in use;
        what the user put in DIR.d stays. Returns what was left there."""
        if self.link.is_symlink():
            self.link.unlink()
        for environment in list(self.environments()):
            self.remove(environment)
        for leftover in self.leftovers():
            shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()
        (self.home / PREVIOUS_FILE).unlink(missing_ok=True)
        left = sorted(entry for entry in self.home.iterdir() if entry.name not in (HOME_LOCK, OWNER_MARK))
        if not left:
            shutil.rmtree(self.home)
        return left

    def forget_if_empty(self) -> None:
        """After a failed first install, leave no DIR.d holding only its lock file."""
        if self.link.is_symlink() or self.home.is_symlink() or not self.home.is_dir():
            return
        if all(entry.name in (HOME_LOCK, OWNER_MARK) for entry in self.home.iterdir()):
            shutil.rmtree(self.home, ignore_errors=True)

    def new_environment_path(self) -> Path:
        """A fresh environment path, marked as jetson-install's own before anything is built there."""
        self._ensure_mark()
        path = self.home / f"env-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        write_own(_building_mark(path), b"")
        return path

    def record_plan(self, environment: Path, fingerprint: Dict[str, Any]) -> None:
        """Keep the plan an environment is made from in it (before its doctor runs, which reads it)."""
        state = environment / STATE_DIR
        state.mkdir(parents=True, exist_ok=True)
        # The plan names the indexes: kept redacted, and private to the user all the same.
        write_private(state / PLAN_FILE, json.dumps(redact_data(fingerprint), indent=2, sort_keys=True) + "\n")

    def mark_complete(self, environment: Path) -> None:
        if self.home.is_dir():  # (a doctor's stand-in environment outside any DIR.d has no DIR.d to copy from)
            _replace_text(environment / STATE_DIR / OWNER_MARK, self._ensure_mark())
        write_own(environment / STATE_DIR / COMPLETE_MARK, time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")
        _building_mark(environment).unlink(missing_ok=True)

    def switch_to(self, environment: Path) -> Optional[Path]:
        """Point the link at `environment` atomically; return the environment it pointed at,
        which is kept (and recorded) as the one to roll back to."""
        previous = self.current()
        self._point_at(environment, previous)
        return previous

    def rollback(self) -> Tuple[Path, Path]:
        """Point the link back at the kept previous environment, in one rename; the one it
        leaves becomes the previous one, so a second rollback undoes the first.
        Returns (the environment now in use, the one now kept)."""
        current = self.current()
        if current is None:
            raise BadInput(f"--venv {self.link}: no environment jetson-install made is in use there",
                           fix="see the environments it made: jetson-install list")
        previous = self.previous()
        if previous is None:
            raise BadInput(f"--venv {self.link}: no previous environment is kept to roll back to (only "
                           f"{current.name}, the one in use)", fix="see what is kept: jetson-install list")
        self._point_at(previous, current)
        return previous, current

    def _point_at(self, environment: Path, previous: Optional[Path]) -> None:
        """Rename a link to `environment` onto DIR, keeping `previous` to roll back to. The record
        is written first and names what each of the two keeps (the one in use now keeps what it
        kept), so whether a kill lands before DIR's rename or after it, the environment to roll
        back to is the one the record gives for the environment DIR then points at."""
        kept = {}
        if previous is not None:
            kept[environment.name] = previous.name
            before = self.previous()  # what the one in use now keeps, while it still is
            if before is not None:
                kept[previous.name] = before.name
        _replace_text(self.home / PREVIOUS_FILE, "".join(f"{now} {then}\n" for now, then in kept.items()))
        temporary = self._temporary_link()
        os.symlink(environment, temporary)
        os.replace(temporary, self.link)

    def previous(self) -> Optional[Path]:
        """The environment kept to roll back to from the one DIR points at, if it is still one of
        DIR.d's own and complete."""
        try:
            text = (self.home / PREVIOUS_FILE).read_text()
        except (OSError, ValueError):
            return None
        if text.startswith("/"):
            path = self._previous_of_a_single_path(Path(text.strip()))
        else:
            target = self._link_target()
            kept = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
            path = self.home / kept[target.name] if target is not None and target.name in kept else None
        # Only one of DIR.d's own, directly in it: a hand-edited record names nothing else.
        return path if path is not None and self._owns(path) and _is_complete(path) else None

    def _previous_of_a_single_path(self, path: Path) -> Optional[Path]:
        """The record earlier builds of the tool wrote: one path, written after DIR's rename."""
        current = self.current()
        if current is not None and path == current:
            # A switch (or a rollback) killed between its rename and this record: the environment
            # it replaced is the other complete one jetson-install made here.
            others = [other for other in self.environments() if other != current and _is_complete(other)]
            return others[-1] if others else None
        return path

    def _temporary_link(self) -> Path:
        # Beside DIR, not in DIR.d: a rename onto DIR must stay within one filesystem.
        return self.link.with_name(f".{self.link.name}.link-{uuid.uuid4().hex[:8]}")

    def prune(self, keep: List[Optional[Path]]) -> List[Tuple[Path, int]]:
        """Remove jetson-install's environments other than `keep`: older ones and any left by a
        killed run. Each is first renamed out of the way, so an interrupted removal leaves a
        .removing-* folder (removed next time), never a half-deleted environment.

        Returns what killed or interrupted runs had left (half-built environments, removals
        not finished), each with the bytes it took on disk, so that a run can say what it freed."""
        kept = {path.resolve() for path in keep if path is not None}
        left: List[Tuple[Path, int]] = []
        unfinished_removals = sorted(self.home.glob(f"{REMOVING_PREFIX}env-*"))
        for entry in self.environments():
            if entry.resolve() not in kept:
                if not _is_complete(entry):
                    left.append((entry, disk_usage(entry)))
                self.remove(entry)
        for stray in self.strays():
            left.append((stray, disk_usage(stray)))
            self.remove(stray)
        for mark in self.home.glob(".env-*.building"):
            if not mark.with_name(mark.name[1:-len(".building")]).exists():
                mark.unlink()  # a run killed between marking its environment and making it
        for doomed in unfinished_removals:
            left.append((doomed, disk_usage(doomed)))
            shutil.rmtree(doomed, ignore_errors=True)
        for leftover in self.link.parent.glob(f".{self.link.name}.link-*"):
            leftover.unlink()
        return left

    def remove(self, environment: Path) -> None:
        """Remove one of jetson-install's environments: renamed first, so it is gone at once."""
        doomed = environment.with_name(f"{REMOVING_PREFIX}{environment.name}")
        if environment.exists():
            os.rename(environment, doomed)
        _building_mark(environment).unlink(missing_ok=True)
        shutil.rmtree(doomed, ignore_errors=True)

    def environments(self) -> Iterator[Path]:
        """The environments jetson-install made here, complete or left by a killed build."""
        for path in sorted(self.home.glob("env-*")):
            if self._owns(path) and (_building_mark(path).is_file() or _is_complete(path)):
                yield path


def linked_home(link: Path, where: str) -> BadInput:
    """The refusal of a DIR.d that is a link: the tool keeps its environments in a folder it made."""
    home = home_of(link)
    return BadInput(f"{where}: {home} is a link, not a folder jetson-install made; it is left as it is",
                    fix=f"remove the link {home} (its target stays), then choose a --venv on the disk it pointed to")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no entry (a container's): its number
        return f"uid {uid}"


def _read_mark(path: Path) -> Optional[str]:
    if path.is_symlink():
        return None
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, ValueError):
        return None
    return text if _MARK.match(text) else None


def _replace_text(path: Path, text: str) -> None:
    """Write `path` whole in one rename: a reader, or a kill, sees the old text or the new."""
    temporary = path.with_name(f".{path.name}-{uuid.uuid4().hex[:8]}")
    write_own(temporary, text.encode("ascii"))
    os.replace(temporary, path)


def _is_complete(environment: Path) -> bool:
    return (environment / STATE_DIR / COMPLETE_MARK).is_file()


_OWN_NAME = re.compile(r"^env-\d{8}-\d{6}-[0-9a-f]{6}$")
_MARK = re.compile(re.escape(OWNER_MARK_PREFIX) + r"[0-9a-f]{32}\n\Z")


def _building_mark(environment: Path) -> Path:
    return environment.with_name(f".{environment.name}.building")


def _try_creating_in(folder: Path) -> None:
    """Raise the OSError that creating DIR.d and DIR's link in `folder` would meet, leaving
    nothing behind, even where the run is killed meanwhile (outputs.try_creating_in)."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(existing))
    try_creating_in(existing)


class _Lock:
    """An exclusive, non-blocking lock on DIR.d/.lock, so two runs never race on one path."""

    def __init__(self, path: Path, link: Path, claim: Callable[[], None]) -> None:
        self.path = path
        self.link = link
        self.claim = claim  # run once the lock is held
        self.handle: Optional[Any] = None

    def __enter__(self) -> "_Lock":
        try:
            descriptor = os.open(self.path, OWN_FILE_FLAGS, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise BadInput(f"{self.link}: {self.path} is a link, not jetson-install's lock file; nothing was done, "
                           "and what it points to is left as it is",
                           fix=f"remove the link (rm {shlex.quote(str(self.path))}), then run the command again") from None
        self.handle = os.fdopen(descriptor, "a+")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self.handle.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise BadInput(
                    f"another jetson-install is working on {self.link}",
                    fix="wait for it to finish, then run the command again",
                ) from None
            raise
        try:
            self.claim()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()

