"""The environments' lifecycle: list what jetson-install made, roll back, uninstall, clean.

Each works under the lock of the DIR it changes (clean: of every DIR), and only on what
jetson-install made: DIR as its link into DIR.d, the environments it marked as its own, the
names it gives to its logs and caches. The environment in use changes in one rename.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple


from jetson_install.base.errors import BadInput
from jetson_install.base.layout import (
    BUILD_CACHE_DIR,
    WHEELS_CACHE_DIR,
    COMPLETE_MARK,
    EVIDENCE_FILE,
    FAILED_EVIDENCE,
    HOME_LOCK,
    INTERPRETER_CACHE,
    REMOVING_PREFIX,
    STATE_DIR,
)
from jetson_install.base.logs import log_directory, own_logs
from jetson_install.base.user_dirs import cache_dir
from jetson_install.envs.disk import disk_usage, remove_tree
from jetson_install.envs.home import EnvironmentHome, linked_home
from jetson_install.envs.known_dirs import default_environments, known_environments
from jetson_install.envs.recorded import recorded_additions, recorded_plan
from jetson_install.envs.record import installed_torch_cuda, installed_versions, read_record

__all__ = ["EnvironmentView", "Listed", "list_environments", "RolledBack", "rollback", "Uninstalled", "uninstall",
           "Cleaned", "clean"]


@dataclass(frozen=True)
class EnvironmentView:
    """One environment jetson-install made, as its own files describe it."""

    path: str
    made: Optional[str]  # when it was completed
    channel: Optional[str]
    requirement: Optional[str]
    torch: Optional[str]  # the torch version installed, with its CUDA
    doctor: Optional[str]  # the install's doctor: its status and how many checks ran
    doctor_at: Optional[str]
    size: int  # bytes on disk
    target: Optional[str] = None  # the command that made it (`obliteratus`, `torch`)
    additions: Tuple[str, ...] = ()  # what --with or `add` put on the stack
    # How its vendor packages differ now from what the install put there and its doctor judged
    # (a torch swapped by pip): that doctor's verdict no longer speaks for it.
    changed: Tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Whether its own evidence, as it stands now, says its doctor passed (any profile's,
        or the part an install's --no-verify runs), and nothing it judged has changed since."""
        return self.doctor is not None and not self.doctor.startswith("failed") and not self.changed

    def to_json(self) -> Dict[str, Any]:
        return {"path": self.path, "made": self.made, "channel": self.channel, "requirement": self.requirement,
                "torch": self.torch, "doctor": self.doctor, "doctor_at": self.doctor_at, "size_bytes": self.size,
                "target": self.target, "additions": list(self.additions), "changed_since_install": list(self.changed)}


@dataclass(frozen=True)
class Listed:
    """A DIR jetson-install made: the environment in use there and the one kept to roll back to."""

    venv: str
    # "ok", "broken" (DIR points at no complete environment), "partly removed", or "install in
    # progress" (a run holds DIR's lock: what it is building is not a leftover)
    state: str
    current: Optional[EnvironmentView]
    previous: Optional[EnvironmentView]
    other_size: int  # what else of the tool's is in DIR.d (killed builds, leftovers): `clean` removes it
    target: Optional[str]  # the command that made DIR (`obliteratus`, `torch`), where anything says
    # The doctor evidence of environments failed verifies discarded, kept for the user to read
    # (the newest first): `clean` keeps them unless given --failed-evidence.
    failed_evidence: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"venv": self.venv, "state": self.state, "current": self.current.to_json() if self.current else None,
                "previous": self.previous.to_json() if self.previous else None, "other_size_bytes": self.other_size,
                "target": self.target, "failed_evidence": list(self.failed_evidence)}


def _view(environment: Path) -> EnvironmentView:
    state = environment / STATE_DIR
    try:
        made: Optional[str] = (state / COMPLETE_MARK).read_text().strip() or None
    except OSError:
        made = None
    plan = recorded_plan(environment) or {}
    record = read_record(environment)
    changed = tuple(record.differences(environment)) if record is not None else ()
    version = installed_versions(environment).get("torch")
    # The torch there now says its CUDA (a replaced +cpu build says none); what the install
    # recorded stands in only while its builds are unchanged.
    cuda = installed_torch_cuda(environment) or (record.torch_cuda if record is not None and not changed else None)
    torch = f"{version} (CUDA {cuda})" if version and cuda else version
    doctor = doctor_at = None
    try:
        evidence = json.loads((state / EVIDENCE_FILE).read_text())
        doctor = f"{evidence['status']}, {len(evidence['checks'])} checks"
        doctor_at = str(evidence.get("generated_at"))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    target = plan.get("target")
    return EnvironmentView(str(environment), made, plan.get("channel"), plan.get("requirement"), torch, doctor,
                           doctor_at, disk_usage(environment), target if isinstance(target, str) else None,
                           recorded_additions(environment), changed)


def list_environments() -> List[Listed]:
    """`list`: every DIR jetson-install made for this user that is still its own."""
    listed = []
    for link in known_environments():
        home = EnvironmentHome(link)
        if not home.is_ours():
            continue  # gone, or replaced by something the user made
        current, previous = home.current(), home.previous()
        kept = {path for path in (current, previous) if path is not None}
        installing = _held(home.home / HOME_LOCK)
        others = [path for path in home.environments() if path not in kept
                  and not (installing and not _is_complete(path))]
        # The evidence of a failed verify is kept on purpose (the last few): not a leftover.
        others += [path for path in home.leftovers() if not _is_failed_evidence(path)]
        other_size = sum(_size(path) for path in others)
        state = "install in progress" if installing else "ok" if current is not None else \
            "broken" if link.is_symlink() else "partly removed"
        listed.append(Listed(str(link), state, _view(current) if current else None,
                             _view(previous) if previous else None, other_size, _made_by(home),
                             tuple(str(path) for path in _failed_evidence(home))))
    return listed


def _failed_evidence(home: EnvironmentHome) -> List[Path]:
    """The kept evidence of failed verifies in DIR.d, the newest first."""
    kept = [path for path in home.leftovers() if _is_failed_evidence(path) and path.is_file()]
    return sorted(kept, key=lambda path: path.stat().st_mtime, reverse=True)


def _held(lock: Path) -> bool:
    """Whether a run holds the lock on `lock` now (DIR's lock, or the log it writes): tried, and
    let go at once, without waiting."""
    try:
        # Never through a link planted there (the lock is the tool's own file), nor waiting on a FIFO.
        descriptor = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)
    return False


def _is_complete(environment: Path) -> bool:
    return (environment / STATE_DIR / COMPLETE_MARK).is_file()


def _is_failed_evidence(path: Path) -> bool:
    return fnmatchcase(path.name, FAILED_EVIDENCE.format(name="env-*"))


def _made_by(home: EnvironmentHome) -> Optional[str]:
    """The target whose command made DIR: as any environment in DIR.d recorded it (one made
    before targets were recorded was OBLITERATUS'), else the name of a default DIR."""
    for environment in home.environments():
        plan = recorded_plan(environment)
        if plan is not None:
            target = plan.get("target", "obliteratus")
            return target if isinstance(target, str) else None
    return home.link.name if home.link.absolute().parent == default_environments() else None


def _own_home(link: Path, where: str) -> EnvironmentHome:
    home = EnvironmentHome(link)
    if home.home.is_symlink():
        raise linked_home(link, where)
    if not home.is_ours():
        if link.exists() or link.is_symlink():
            raise BadInput(f"{where}: was not made by jetson-install; it is left as it is",
                           fix="see the environments it made: jetson-install list")
        raise BadInput(f"{where}: no environment there", fix="see the environments jetson-install made: "
                                                             "jetson-install list")
    return home


@dataclass(frozen=True)
class RolledBack:
    venv: str
    now: str  # the environment DIR points at now
    kept: str  # the one it left, kept: rolling back again returns to it

    def to_json(self) -> Dict[str, Any]:
        return {"schema_version": 1, "venv": self.venv, "now": self.now, "kept": self.kept}


def rollback(link: Path, where: str) -> RolledBack:
    """`rollback`: DIR points at the kept previous environment again, in one rename."""
    home = _own_home(link, where)
    with home.lock():
        now, kept = home.rollback()
    return RolledBack(str(home.link), str(now), str(kept))


@dataclass(frozen=True)
class Uninstalled:
    venv: str
    removed: Tuple[str, ...]  # the environments removed
    freed: int  # bytes
    left: Tuple[str, ...]  # what the user had put in DIR.d, left there

    def to_json(self) -> Dict[str, Any]:
        return {"schema_version": 1, "venv": self.venv, "removed": list(self.removed), "freed_bytes": self.freed, "left": list(self.left)}


def uninstall(link: Path, where: str) -> Uninstalled:
    """`uninstall`: DIR and the environments jetson-install made for it, and nothing of the user's."""
    home = _own_home(link, where)
    with home.lock():
        removed = tuple(str(path) for path in home.environments())
        before = disk_usage(home.home)
        left = home.uninstall()
        after = disk_usage(home.home) if home.home.is_dir() else 0
    return Uninstalled(str(home.link), removed, max(before - after, 0), tuple(str(path) for path in left))


@dataclass(frozen=True)
class Cleaned:
    """What `clean` removed (or, with --dry-run, would remove): each item, its path and size."""

    items: Tuple[Tuple[str, str, int], ...]  # (what, path, bytes)
    left: Tuple[str, ...]  # in the tool's folders but not made by it: never removed
    dry_run: bool
    kept_evidence: Tuple[str, ...] = ()  # failed verifies' evidence, kept (without --failed-evidence)
    busy: Tuple[str, ...] = ()  # DIRs an install is working on, which a dry run leaves out

    def to_json(self) -> Dict[str, Any]:
        return {"schema_version": 1, "dry_run": self.dry_run, "removed" if not self.dry_run else "would_remove":
                [{"what": what, "path": path, "size_bytes": size} for what, path, size in self.items],
                "total_bytes": sum(size for _, _, size in self.items), "left": list(self.left),
                "kept_failed_evidence": list(self.kept_evidence), "install_in_progress": list(self.busy)}


def clean(dry_run: bool, failed_evidence: bool = False) -> Cleaned:
    """`clean`: the logs, the bitsandbytes build cache, the checked vendor wheels (a later install
    downloads them again), the interpreters' versions kept and
    what killed runs left beside the environments, under the lock of every environment, so no
    run is using them meanwhile (a dry run removes nothing, so it takes no lock and leaves out
    a DIR an install holds). The environments in use and their previous ones are never
    touched; the evidence of failed verifies only with `failed_evidence`."""

    items: List[Tuple[str, Path, Callable[[], None]]] = []
    left: List[str] = []
    kept_evidence: List[str] = []
    busy: List[str] = []
    with contextlib.ExitStack() as locks:
        for link in known_environments():
            home = EnvironmentHome(link)
            if not (home.home / HOME_LOCK).is_file() or not home.owned():
                continue  # gone, never more than a location, or not (any longer) the tool's
            if dry_run:
                if _held(home.home / HOME_LOCK):
                    busy.append(str(link))
                    continue
            else:
                # Held, even for a DIR.d with nothing in it yet: a first install may be starting there.
                locks.enter_context(home.lock())
            if not home.is_ours():
                continue
            kept = {path for path in (home.current(), home.previous()) if path is not None}
            items += [("unfinished environment", path, partial(home.remove, path))
                      for path in home.environments() if path not in kept]
            items += [("left by an interrupted run", path, partial(_remove, path)) for path in home.leftovers()
                      if not _is_failed_evidence(path)]
            # A failed verify's evidence is kept for the user to read (install rotates it).
            evidence = _failed_evidence(home)
            if failed_evidence:
                items += [("failed-verify evidence", path, partial(path.unlink, missing_ok=True)) for path in evidence]
            else:
                kept_evidence += [str(path) for path in evidence]
        logs = own_logs()
        # A log a run is writing is that run's: never removed under it, nor offered for removal.
        items += [("log", path, partial(path.unlink, missing_ok=True)) for path in logs if not _held(path)]
        if log_directory().is_dir():
            left += [str(path) for path in sorted(log_directory().iterdir()) if path not in logs]
        cache = cache_dir().value
        # Not while an install runs, which may be reading them (a dry run's case: a clean takes
        # every lock first, and refuses while one is held).
        for entry in sorted(cache.iterdir()) if cache.is_dir() and not busy else []:
            if entry.name == BUILD_CACHE_DIR:
                items.append(("bitsandbytes build cache", entry, partial(remove_tree, entry)))
            elif entry.name == WHEELS_CACHE_DIR:
                items.append(("checked vendor wheels", entry, partial(remove_tree, entry)))
            elif entry.name.startswith(REMOVING_PREFIX):
                items.append(("left by an interrupted clean", entry, partial(remove_tree, entry)))
            elif entry.name == INTERPRETER_CACHE or entry.name.startswith(f".{INTERPRETER_CACHE}."):
                # (the second: one a kill left half-written, before its rename)
                items.append(("interpreter cache", entry, partial(entry.unlink, missing_ok=True)))
            else:
                left.append(str(entry))  # the tool's cache folder, but not a name it gives: never removed
        sized = tuple((what, str(path), _size(path)) for what, path, _ in items)
        if not dry_run:
            for _, _, remove in items:
                remove()
    return Cleaned(sized, tuple(left), dry_run, tuple(kept_evidence), tuple(busy))


def _size(path: Path) -> int:
    return disk_usage(path) if path.is_dir() and not path.is_symlink() else path.lstat().st_size


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink(missing_ok=True)
