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

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import platformdirs

from jetson_install.base.errors import BadInput
from jetson_install.base.layout import (
    ACTIVATE_FILE,
    ADDED_FILE,
    CHECK_COMMANDS_FILE,
    COMPLETE_MARK,
    CONSTRAINTS_FILE,
    ENVIRONMENTS_DIR,
    EXCLUDES_FILE,
    FAILED_EVIDENCE,
    HOME_LOCK,
    HOME_SUFFIX,
    KNOWN_ENVIRONMENTS,
    LOCK_FILE,
    OWNER_MARK,
    OWNER_MARK_PREFIX,
    PLAN_FILE,
    PREVIOUS_FILE,
    REMOVING_PREFIX,
    REQUIREMENTS_FILE,
    STATE_DIR,
    home_of,
)
from jetson_install.base.redact import redact_data
from jetson_install.catalog.catalog import DEFAULT_INDEX_LABEL, Channel, VendorSource
from jetson_install.catalog.lock_file import parse_lock
from jetson_install.envs.record import read_record

__all__ = ["EnvironmentHome", "disk_usage", "remove_tree", "known_environments", "write_private", "recorded_plan", "recorded_vendor", "recorded_doctor_inputs",
           "recorded_lock", "doctor_view", "write_constraints", "write_requirements", "write_additions",
           "recorded_additions", "write_check_commands", "recorded_check_commands", "protect",
           "activate_command"]


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
            _write_mark(environment / STATE_DIR / OWNER_MARK, mark)

    def _ensure_mark(self) -> str:
        mark = self._mark()
        if mark is None:
            mark = f"{OWNER_MARK_PREFIX}{uuid.uuid4().hex}\n"
            _write_mark(self.home / OWNER_MARK, mark)
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

    def check_usable(self, create: bool = True) -> None:
        """Refuse a location the install could not use, or that holds something the user made.
        With create=False (a dry run) nothing is left changed: a missing folder is only tried."""
        parent = self.link.absolute().parent
        try:
            if create:
                parent.mkdir(parents=True, exist_ok=True)
            _try_creating_in(parent)
        except OSError as exc:
            where = f"create folders in {parent}" if parent.is_dir() else f"create {parent}"
            raise BadInput(f"--venv {self.link}: cannot {where} ({exc.strerror})",
                           fix="choose a location in a writable directory with --venv DIR") from None
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
        if self.link.is_dir() and not any(self.link.iterdir()):
            if create:
                self.link.rmdir()
            return
        raise BadInput(
            f"--venv {self.link}: exists and was not made by jetson-install; it is left as it is",
            fix=f"choose another location with --venv, or move {self.link} away first",
        )

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
        """DIR's lock; once held, DIR.d carries the tool's mark (a new one, or one made before marks)."""
        if self.home.is_symlink():
            raise linked_home(self.link, str(self.link))
        self.home.mkdir(exist_ok=True)
        _remember(self.link)
        return _Lock(self.home / HOME_LOCK, self.link, self._claim)

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
        _building_mark(path).touch()
        return path

    def record_plan(self, environment: Path, fingerprint: Dict[str, Any]) -> None:
        """Keep the plan an environment is made from in it (before its doctor runs, which reads it)."""
        state = environment / STATE_DIR
        state.mkdir(parents=True, exist_ok=True)
        # The plan names the indexes: kept redacted, and private to the user all the same.
        write_private(state / PLAN_FILE, json.dumps(redact_data(fingerprint), indent=2, sort_keys=True) + "\n")

    def mark_complete(self, environment: Path) -> None:
        if self.home.is_dir():  # (a doctor's stand-in environment outside any DIR.d has no DIR.d to copy from)
            _write_mark(environment / STATE_DIR / OWNER_MARK, self._ensure_mark())
        (environment / STATE_DIR / COMPLETE_MARK).write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")
        _building_mark(environment).unlink(missing_ok=True)

    def switch_to(self, environment: Path) -> Optional[Path]:
        """Point the link at `environment` atomically; return the environment it pointed at,
        which is kept (and recorded) as the one to roll back to."""
        previous = self.current()
        self._point_at(environment)
        self._record_previous(previous)
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
        self._point_at(previous)
        self._record_previous(current)
        return previous, current

    def _point_at(self, environment: Path) -> None:
        temporary = self._temporary_link()
        os.symlink(environment, temporary)
        os.replace(temporary, self.link)

    def _record_previous(self, previous: Optional[Path]) -> None:
        record = self.home / PREVIOUS_FILE
        if previous is None:
            record.unlink(missing_ok=True)
            return
        temporary = record.with_name(f".{PREVIOUS_FILE}-{uuid.uuid4().hex[:8]}")
        temporary.write_text(f"{previous}\n")
        os.replace(temporary, record)

    def previous(self) -> Optional[Path]:
        try:
            path = Path((self.home / PREVIOUS_FILE).read_text().strip())
        except OSError:
            return None
        current = self.current()
        if current is not None and path == current:
            # A switch (or a rollback) killed between its rename and this record: the environment
            # it replaced is the other complete one jetson-install made here.
            others = [other for other in self.environments() if other != current and _is_complete(other)]
            return others[-1] if others else None
        # Only one of DIR.d's own, directly in it: a hand-edited record names nothing else.
        return path if self._owns(path) and _is_complete(path) else None

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


def _read_mark(path: Path) -> Optional[str]:
    if path.is_symlink():
        return None
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, ValueError):
        return None
    return text if _MARK.match(text) else None


def _write_mark(path: Path, mark: str) -> None:
    temporary = path.with_name(f".{path.name}-{uuid.uuid4().hex[:8]}")
    temporary.write_text(mark, encoding="ascii")
    os.replace(temporary, path)


def _is_complete(environment: Path) -> bool:
    return (environment / STATE_DIR / COMPLETE_MARK).is_file()


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


def default_environments() -> Path:
    """Where each target's default DIR is (envs/<target>), in the user's data folder."""
    return Path(platformdirs.user_data_dir("jetson-install")) / ENVIRONMENTS_DIR


def known_environments() -> List[Path]:
    """Every DIR jetson-install worked on for this user, first seen first: the default DIRs
    (envs/<target>) and each one recorded when a run took its lock."""
    envs = default_environments()
    # envs/ holds each default DIR beside its DIR.d (and a killed switch's hidden link).
    found = sorted(path for path in envs.glob("[!.]*") if not path.name.endswith(HOME_SUFFIX))
    found += sorted(path.with_name(path.name[:-len(HOME_SUFFIX)]) for path in envs.glob(f"[!.]*{HOME_SUFFIX}"))
    with contextlib.suppress(OSError):
        found += [Path(line) for line in (envs.parent / KNOWN_ENVIRONMENTS).read_text().splitlines() if line.strip()]
    unique: Dict[Path, None] = {}
    for path in found:
        unique.setdefault(path, None)
    return list(unique)


def _remember(link: Path) -> None:
    """Add DIR to the user's list of what jetson-install worked on. Appended, never rewritten,
    so two runs at once cannot lose each other's line; `list` leaves out what is gone."""
    data = Path(platformdirs.user_data_dir("jetson-install"))
    path = link.absolute()
    if path in known_environments():
        return
    data.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(data / KNOWN_ENVIRONMENTS, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(descriptor, f"{path}\n".encode())
    finally:
        os.close(descriptor)


_OWN_NAME = re.compile(r"^env-\d{8}-\d{6}-[0-9a-f]{6}$")
_MARK = re.compile(re.escape(OWNER_MARK_PREFIX) + r"[0-9a-f]{32}\n\Z")


def _building_mark(environment: Path) -> Path:
    return environment.with_name(f".{environment.name}.building")


def _try_creating_in(folder: Path) -> None:
    """Raise the OSError that creating a folder in `folder` would meet, leaving nothing behind."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(existing))
    # Access bits say nothing for root or on /proc: only trying tells.

    os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".jetson-install-check-"))


class _Lock:
    """An exclusive, non-blocking lock on DIR.d/.lock, so two runs never race on one path."""

    def __init__(self, path: Path, link: Path, claim: Callable[[], None]) -> None:
        self.path = path
        self.link = link
        self.claim = claim  # run once the lock is held
        self.handle: Optional[Any] = None

    def __enter__(self) -> "_Lock":
        self.handle = open(self.path, "a+")
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


_ACTIVATE_MARK = "# jetson-install:"

_BASH_EXPORT = """
# jetson-install: {why}.
if [ -z "${{_JETSON_INSTALL_{var}_SET:-}}" ] ; then
    _JETSON_INSTALL_OLD_{var}="${{{var}:-}}"
    _JETSON_INSTALL_{var}_SET=1
fi
{var}="{value}"
export {var}
"""

_BASH_RESTORE = """    # jetson-install: restore the {var} from before activation.
    if [ -n "${{_JETSON_INSTALL_{var}_SET:-}}" ] ; then
        if [ -n "${{_JETSON_INSTALL_OLD_{var}:-}}" ] ; then
            {var}="$_JETSON_INSTALL_OLD_{var}"
            export {var}
        else
            unset {var}
        fi
        unset _JETSON_INSTALL_OLD_{var} _JETSON_INSTALL_{var}_SET
    fi
"""

_FISH_EXPORT = """
# jetson-install: {why}.
set -gx {var} "{value}"
"""

_FISH_RESTORE = """    # jetson-install: drop {var} with the environment.
    set -e {var}
"""


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def recorded_plan(environment: Path) -> Optional[Dict[str, Any]]:
    """The plan fingerprint a complete environment was made from (see mark_complete)."""
    try:
        recorded = json.loads((environment / STATE_DIR / PLAN_FILE).read_text())
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def recorded_vendor(environment: Path) -> Optional[VendorSource]:
    """The vendor builds an environment was made with (its vendor record), so a later doctor
    checks against what was installed, also when that was the fallback source."""
    record = read_record(environment)
    if record is None:
        kept = (recorded_plan(environment) or {}).get("kept_pins")
        return VendorSource.pinned(None, (), kept) if isinstance(kept, dict) else None
    resolution = record.resolution
    numpy = None
    try:
        constraints = (environment / STATE_DIR / CONSTRAINTS_FILE).read_text().splitlines()
        numpy = next((line[len("numpy"):] for line in constraints if line.startswith("numpy")), None)
    except OSError:
        pass
    urls = [chosen.url for chosen in resolution.files if chosen.url.endswith(".whl")]
    if resolution.source == DEFAULT_INDEX_LABEL:  # uv's own default: no URL to name
        return dataclasses.replace(VendorSource.pinned(None, (), resolution.pins, numpy), default_index=True)
    is_wheels = resolution.source.endswith(".whl")
    return VendorSource.pinned(None if is_wheels else resolution.source, urls if is_wheels else (),
                               resolution.pins, numpy)


def recorded_doctor_inputs(environment: Path, channel: Optional[Channel]
                           ) -> Tuple[Optional[Channel], Optional[VendorSource]]:
    """The channel and vendor builds the doctor judges `environment` against: what it was
    made with (plan.json), and for a kept stack (--use-existing-torch) its own Python and versions."""
    vendor = recorded_vendor(environment)
    kept = (recorded_plan(environment) or {}).get("existing")
    if not kept or vendor is None:
        return channel, vendor
    return doctor_view(channel, ".".join(kept["python_version"].split(".")[:2]), vendor.pins)


def doctor_view(channel: Optional[Channel], abi: str, pins: Mapping[str, str]
                ) -> Tuple[Optional[Channel], VendorSource]:
    """The channel and source the doctor judges a kept stack against: the interpreter's own
    Python is the ABI its packages were built for, and their versions are the pins."""
    return (dataclasses.replace(channel, python=abi) if channel is not None else None), \
        VendorSource.pinned(None, (), dict(pins))


def recorded_lock(environment: Path) -> Optional[Dict[str, Any]]:
    """The lock an environment was installed from, as the install's evidence names it: where it
    was read, its sha256, and what it was made for; None when it was not made from a lock."""
    digest = (recorded_plan(environment) or {}).get("lock")
    record = read_record(environment)
    if not isinstance(digest, str) or record is None:
        return None
    try:
        lock = parse_lock((environment / STATE_DIR / LOCK_FILE).read_text(encoding="utf-8"), LOCK_FILE)
    except (OSError, BadInput):
        return None
    return {"file": record.resolution.source, "sha256": digest, "channel": lock.channel, "python": lock.python,
            "arch": lock.arch, "platform": lock.platform, "source_commit": lock.source_commit,
            "packages": len(lock.entries)}


def write_constraints(environment: Path, lines: Sequence[str]) -> Path:
    """The environment's own constraints file: what the target installs under, and what
    `protect` keeps in force afterwards."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    path = state / CONSTRAINTS_FILE
    path.write_text("\n".join(lines) + "\n")
    return path


def write_requirements(environment: Path, lines: Sequence[str]) -> Path:
    """The target's requirements, for a source URL that carries a token: readable by the user only."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    path = state / REQUIREMENTS_FILE
    write_private(path, "\n".join(lines) + "\n")
    return path


def write_additions(environment: Path, lines: Sequence[str]) -> None:
    """What --with put on the stack, for a re-run to keep (readable by the user only: a URL may
    carry a token)."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    write_private(state / ADDED_FILE, "".join(f"{line}\n" for line in lines))


def recorded_additions(environment: Path) -> Tuple[str, ...]:
    """The additions an environment records (none where it records none)."""
    return _recorded_lines(environment / STATE_DIR / ADDED_FILE)


def write_check_commands(environment: Path, commands: Sequence[str]) -> None:
    """--check-command's commands, for the doctor and a re-run to run again (readable by the user
    only, as the additions: a command may name a URL with a token)."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    write_private(state / CHECK_COMMANDS_FILE, "".join(f"{command}\n" for command in commands))


def recorded_check_commands(environment: Path) -> Tuple[str, ...]:
    """The check commands an environment records (none where it records none)."""
    return _recorded_lines(environment / STATE_DIR / CHECK_COMMANDS_FILE)


def _recorded_lines(path: Path) -> Tuple[str, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ()
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


#: Why the activate scripts export each variable, as their comment says it.
_WHY = {
    "UV_CONSTRAINT": "uv ignores pip.conf, so it gets the vendor constraints from UV_CONSTRAINT",
    "UV_EXCLUDE": "uv ignores pip.conf, so it leaves the kept stack alone through UV_EXCLUDE",
    "TRITON_PTXAS_PATH": "Triton's own ptxas cannot assemble for this GPU; TRITON_PTXAS_PATH names the board's",
    "TRITON_PTXAS_BLACKWELL_PATH": "Triton's own ptxas-blackwell cannot assemble for this GPU; "
                                   "TRITON_PTXAS_BLACKWELL_PATH names the board's",
}


def protect(environment: Path, excludes: Sequence[str] = (), triton: Optional[Mapping[str, str]] = None) -> Path:
    """Make the environment's constraints file outlive jetson-install.

    pip reads <prefix>/pip.conf (its "site" configuration) for every pip run
    inside the environment; uv reads no pip configuration at all
    (https://docs.astral.sh/uv/pip/compatibility/), so the activate scripts export UV_CONSTRAINT.
    `excludes` names packages the environment takes from its parent interpreter
    (--use-existing-torch): uv does not see them there (astral-sh/uv#17215), so a
    constraint alone would let it put a same-version build into the environment;
    UV_EXCLUDE keeps them out of every uv resolution instead.
    `triton`: TRITON_PTXAS_PATH or TRITON_PTXAS_BLACKWELL_PATH and the board's assembler, where
    Triton's own cannot assemble for the GPU (Triton reads them: triton/knobs.py).
    """
    state = environment / STATE_DIR
    constraints_path = state / CONSTRAINTS_FILE
    # Both pip.conf and UV_CONSTRAINT split their value on whitespace; a file:// URI
    # survives a path with spaces in it (verified with uv 0.13.9 and pip 23.2).
    uri = constraints_path.as_uri()
    (environment / "pip.conf").write_text(
        "# Written by jetson-install: keeps the JetPack torch (and bitsandbytes) in place.\n"
        f"[global]\nconstraint = {uri}\n"
    )
    variables = {"UV_CONSTRAINT": uri}
    if excludes:
        (state / EXCLUDES_FILE).write_text("\n".join(excludes) + "\n")
        variables["UV_EXCLUDE"] = (state / EXCLUDES_FILE).as_uri()
    variables.update(triton or {})
    (state / ACTIVATE_FILE).write_text(json.dumps(variables, indent=2, sort_keys=True) + "\n")
    _patch_activate(environment / "bin" / "activate", _BASH_EXPORT, _BASH_RESTORE, "deactivate () {", variables)
    _patch_activate(environment / "bin" / "activate.fish", _FISH_EXPORT, _FISH_RESTORE, "function deactivate", variables)
    return constraints_path


def activate_variables(environment: Path) -> Dict[str, str]:
    """What the environment's activate scripts export, as protect recorded it (none where it did not)."""
    try:
        recorded = json.loads((environment / STATE_DIR / ACTIVATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {str(name): value for name, value in recorded.items() if isinstance(value, str)}


def _patch_activate(script: Path, export: str, restore: str, deactivate_line: str, variables: Dict[str, str]) -> None:
    if not script.is_file():
        return
    text = script.read_text()
    if _ACTIVATE_MARK in text:
        return
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.strip().startswith(deactivate_line):
            lines.insert(number + 1, "".join(restore.format(var=var) for var in variables))
            break
    exports = "".join(export.format(var=var, value=value, why=_WHY[var]) for var, value in variables.items())
    script.write_text("".join(lines) + exports)


def activate_command(venv: str) -> str:
    """The line that activates the environment at `venv`, quoted for a shell."""
    return f"source {shlex.quote(venv + '/bin/activate')}"
