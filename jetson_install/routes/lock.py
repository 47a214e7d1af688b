"""The lock route (`--lock FILE`, `--wheelhouse DIR|URL`): exactly the files of a lock, each
by its sha256, with no index and nothing resolved (the lock was resolved when it was made).

Its steps are the download route's, with the vendor, companions and target steps replaced by
one install of the lock; the lock's own vendor files are the environment's vendor record.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from jetson_install import uv
from jetson_install.errors import BadInput
from jetson_install.identity import ChosenFile, Resolution, VersionSet
from jetson_install.layout import LOCK_FILE, state_of
from jetson_install.lock_file import WHEELHOUSE_LOCK, Lock, lock_mismatch, parse_lock, relocated, render_lock
from jetson_install.plan import Execution, Handler, InterpreterPolicy, Plan, Route
from jetson_install.routes import shared
from jetson_install.steps import Step

if TYPE_CHECKING:
    from jetson_install.fixes import Rerun

__all__ = ["LockInUse", "LockRoute", "lock_resolution", "with_lock", "read_lock_in_use"]


@dataclass(frozen=True)
class LockInUse:
    """The lock an install carries out: where it was read, its digest, and the text to install."""

    lock: Lock
    location: str
    sha256: str
    text: str

    def to_json(self) -> Dict[str, Any]:
        return {"file": self.location, "sha256": self.sha256, "channel": self.lock.channel,
                "python": self.lock.python, "arch": self.lock.arch, "platform": self.lock.platform,
                "source_commit": self.lock.source_commit, "packages": len(self.lock.entries)}


def lock_resolution(lock: LockInUse) -> Resolution:
    """The vendor set a lock names, as the resolution an install carries out and records."""
    files = tuple(ChosenFile(entry.name, entry.version, entry.filename, entry.url, entry.sha256, known=False)
                  for entry in lock.lock.entries if entry.origin == "vendor")
    return Resolution(lock.location, "lock", files, f"the files {lock.location} names")


@dataclass(frozen=True)
class LockRoute(Route):
    """`base` is the route the lock stands in for (the board's download)."""

    base: Route = Route()
    lock: Optional[LockInUse] = None

    name = "lock"

    @property
    def used(self) -> LockInUse:
        assert self.lock is not None
        return self.lock

    @property
    def what(self) -> str:
        return self.base.what

    def steps(self, plan: Plan) -> Tuple[Step, ...]:
        lock = self.used
        steps: List[Step] = []
        for step in self.base.steps(plan):
            if step.kind == "venv":
                # The lock carries pip itself: the new environment asks no index for it.
                steps.append(shared.environment_step(plan, plan.interpreter or f"python{plan.python_abi}", step.title,
                                                     seed=False))
            elif step.kind == "vendor":
                steps.append(Step("lock", "lock", f"install exactly the {len(lock.lock.entries)} files of "
                                                  f"{lock.location}, each by its sha256, without an index",
                                  (tuple(uv.locked_install_argv(shared.python_of(plan),
                                                                f"{shared.state_of(plan)}/{LOCK_FILE}")),)))
            elif step.kind not in ("companions", "target"):
                steps.append(step)
        return tuple(steps)

    def complete(self, plan: Plan, chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> Plan:
        done = self.base.complete(dataclasses.replace(plan, route=self.base), chosen, resolution)
        route = dataclasses.replace(self, base=done.route)
        # The target is the wheel the lock names, fixed by its hash: its source is never asked again.
        built = [entry for entry in self.used.lock.entries if entry.origin == "built"]
        requirement = f"{built[0].name} @ {built[0].url}" if built else done.requirement
        done = dataclasses.replace(done, route=route, requirement=requirement)
        return dataclasses.replace(done, steps=route.steps(done) if done.supported else ())

    def interpreter_policy(self, plan: Plan) -> InterpreterPolicy:
        return self.base.interpreter_policy(plan)

    def fixed_resolution(self) -> Optional[Resolution]:
        return lock_resolution(self.used)

    def vendor_label(self, plan: Plan) -> str:
        return self.base.vendor_label(plan)

    def fallback_location(self, plan: Plan) -> Optional[str]:
        return self.base.fallback_location(plan)

    def facts(self) -> Dict[str, Any]:
        return {**self.base.facts(), "lock": self.used.sha256}

    def describe(self) -> Dict[str, Any]:
        return {**self.base.describe(), "lock": self.used.to_json()}

    def handlers(self) -> Mapping[str, Handler]:
        return {**self.base.handlers(), "lock": _install_lock}


def with_lock(plan: Plan, lock: LockInUse) -> Plan:
    """`plan` carrying out a lock: its vendor and target steps become one install of exactly
    the lock's files, by hash, with no index."""
    conflict = plan.route.lock_conflict()
    if conflict is not None:
        option, why, fix = conflict
        raise BadInput(f"{option} and a lock ({lock.location}) were both given: a lock installs exactly its own "
                       f"files{why}", fix=fix)
    route = LockRoute(base=plan.route, lock=lock)
    return route.complete(dataclasses.replace(plan, route=route), plan.chosen_set, plan.resolution)


#: The options of the install that `jetson-install lock` also takes: a lock made again for
#: this board and interpreter keeps them as the user gave them.
_LOCK_OPTIONS = ("--root", "--l4t", "--python", "--vendor-index", "--default-index", "--source", "--ref")
_LOCK_FLAGS = ("--vendor-fallback", "--allow-insecure-index")


def read_lock_in_use(lock_file: Optional[str], wheelhouse: Optional[str], plan: Plan, rerun: "Rerun") -> LockInUse:
    """The lock an install carries out (--lock FILE, or a wheelhouse's), refused with one line
    when it was made for another board; the fix makes one with the user's own options."""
    import os

    if lock_file and wheelhouse:
        raise BadInput("--lock and --wheelhouse were both given", fix="use one: a wheelhouse carries its own lock")
    if wheelhouse:
        from jetson_install.index import fetch_text

        base = wheelhouse.rstrip("/") if "://" in wheelhouse else Path(wheelhouse).absolute().as_uri()
        location = f"{base}/{WHEELHOUSE_LOCK}"
        text = fetch_text(location)
        lock = relocated(parse_lock(text, f"--wheelhouse {wheelhouse}: {WHEELHOUSE_LOCK}"), base)
        flag = f"--wheelhouse {wheelhouse}"
    else:
        assert lock_file is not None
        location = str(Path(lock_file).absolute())
        try:
            text = Path(location).read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"--lock {lock_file}: {exc.strerror or exc}",
                           fix="pass the file `jetson-install lock --output FILE` wrote") from None
        lock = parse_lock(text, f"--lock {lock_file}")
        flag = f"--lock {lock_file}"
    if plan.interpreter:
        from jetson_install.interpreters import inspect_interpreter

        python = inspect_interpreter(plan.interpreter).abi
    else:
        python = plan.python_abi or ""
    mismatch = lock_mismatch(lock, plan.channel.id if plan.channel else None, python, os.uname().machine)
    if mismatch:
        remake = rerun.keeping("lock", _LOCK_OPTIONS, _LOCK_FLAGS).with_option("--output", "FILE")
        again = rerun.without("--wheelhouse").with_option("--lock", "FILE")
        raise BadInput(f"{flag}: {mismatch}",
                       fix=f"make a lock for this board and interpreter: {remake}, then run: {again}")
    return LockInUse(lock, location, hashlib.sha256(text.encode("utf-8")).hexdigest(), render_lock(lock))


def _install_lock(step: Step, run: Execution) -> str:
    """Install exactly the lock's files; the lock stays in the environment as its record."""
    from jetson_install.environment import write_constraints
    from jetson_install.record import record_installed

    route = run.plan.route
    assert isinstance(route, LockRoute)
    lock = route.used
    write_constraints(run.staging, run.plan.constraints)
    (state_of(run.staging) / LOCK_FILE).write_text(lock.text, encoding="utf-8")
    run.run(step.argv, "a file of the lock is unreachable or changed (see the message): serve its wheelhouse "
                       f"(jetson-install wheelhouse DIR --lock FILE), then run: {run.rerun}")
    if run.plan.resolution is not None:
        record_installed(run.staging, run.plan.resolution, (), str(run.rerun))
    return f"{len(lock.lock.entries)} files from {lock.location} (sha256 {lock.sha256[:12]}…)"
