"""The lock route (`--lock FILE`, `--wheelhouse DIR|URL`): exactly the files of a lock, each
by its sha256, with no index and nothing resolved (the lock was resolved when it was made).

Its steps are the download route's, with the vendor, companions and target steps replaced by
one install of the lock; the lock's own vendor files are the environment's vendor record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import unquote, urlsplit

from jetson_install.base.errors import BadInput, RegistryError, StepFailed
from jetson_install.base.layout import FETCHED_DIR, LOCK_FILE, MANIFEST_FILE, TO_INSTALL_FILE, state_of
from jetson_install.base.oci_ref import Reference, is_oci, parse_reference
from jetson_install.base.outputs import replace_file
from jetson_install.base.redact import credentials, redact
from jetson_install.base.requirements import TargetRequirement
from jetson_install.base.steps import Step
from jetson_install.catalog.identity import ChosenFile, IdentityMismatch, KnownBuild, Resolution, VersionSet
from jetson_install.catalog.lock_file import (
    FILES_DIR,
    WHEELHOUSE_LOCK,
    Lock,
    Locked,
    lock_mismatch,
    parse_lock,
    read_lock_text,
    relocated,
    render_lock,
)
from jetson_install.envs.recorded import write_constraints
from jetson_install.envs.manifest import WheelRefused, read_fetched, read_wheel, write_manifest
from jetson_install.envs.record import record_installed
from jetson_install.planning.plan import Execution, Handler, InterpreterPolicy, Plan, Route
from jetson_install.planning.routes import shared
from jetson_install.tools import uv

if TYPE_CHECKING:
    from jetson_install.planning.rerun import Rerun

__all__ = ["LockInUse", "LockRoute", "lock_resolution", "with_lock", "read_lock_in_use"]


@dataclass(frozen=True)
class LockInUse:
    """The lock an install carries out: where it was read, its digest, and the text to install."""

    lock: Lock
    location: str
    sha256: str
    text: str
    resolution: Resolution  # its vendor files, judged against the channel's known builds
    wheelhouse: Optional[str] = None  # where its files are taken from, as given (None: the URLs the lock names)
    #: An OCI registry's repository the files are fetched from, each by its sha256, before the lock step.
    registry: Optional[Reference] = None

    def to_json(self) -> Dict[str, Any]:
        return {"file": self.location, "sha256": self.sha256, "channel": self.lock.channel,
                "python": self.lock.python, "arch": self.lock.arch, "platform": self.lock.platform,
                "source_commit": self.lock.source_commit, "packages": len(self.lock.entries)}


def lock_resolution(lock: Lock, location: str, known: Tuple[KnownBuild, ...]) -> Resolution:
    """The vendor set a lock names, as the resolution an install carries out and records, each
    file judged against the channel's known builds exactly as a resolution's: a known name
    with another sha256 is refused, a file the catalog does not list is accepted and said."""
    by_file = {build.file: build for build in known}
    files, warnings = [], []
    for entry in lock.entries:
        if entry.origin != "vendor":
            continue
        build = by_file.get(entry.filename)
        if build is not None and not build.matches(entry.sha256):
            raise IdentityMismatch(
                f"{location} names {entry.filename} with sha256 {entry.sha256}, but wheels-index.toml records "
                f"{build.digest} for that file: refusing a different build under a recorded name",
                fix="make the lock again from the vendor index (jetson-install lock --output FILE); if the vendor "
                    "re-published it, update the build in wheels-index.toml after checking it")
        if build is None:
            warnings.append(f"{entry.filename} in {location} is not a build wheels-index.toml lists "
                            f"(sha256 {entry.sha256}); installed as the lock says and recorded")
        # The record (vendor.json) names the file, never a mirror's user and token.
        secret = credentials(entry.url)
        files.append(ChosenFile(entry.name, entry.version, entry.filename, secret.url if secret else entry.url,
                                entry.sha256, build is not None,
                                build.cuda if build else None))
    return Resolution(location, "lock", tuple(files), f"the files {location} names", tuple(warnings))


@dataclass(frozen=True)
class LockRoute(Route):
    """`base` is the route the lock stands in for (the board's download)."""

    base: Route = field(default_factory=Route)
    lock: Optional[LockInUse] = None

    name = "lock"

    @property
    def used(self) -> LockInUse:
        assert self.lock is not None
        return self.lock

    def what(self, plan: Plan) -> str:
        return self.base.what(plan)

    def steps(self, plan: Plan) -> Tuple[Step, ...]:
        lock = self.used
        steps: List[Step] = []
        for step in self.base.steps(plan):
            if step.kind == "venv":
                # The lock carries pip itself: the new environment asks no index for it.
                steps.append(shared.environment_step(plan, plan.interpreter or f"python{plan.python_abi}", step.title,
                                                     seed=False))
            elif step.kind == "fetch":
                # The lock's own vendor files by its hashes (with a registry, all its files); the rest of
                # it is installed as it names them.
                steps.append(_fetch_step(plan, lock, lock.registry) if lock.registry is not None
                             else shared.fetch_step(plan, companions=False))
            elif step.kind == "vendor":
                steps.append(Step("lock", "lock", f"install exactly the {len(lock.lock.entries)} files of "
                                                  f"{lock.location}, each by its sha256, without an index (its "
                                                  "vendor files as the fetch step checked them)",
                                  (tuple(uv.locked_install_argv(shared.python_of(plan),
                                                                f"{shared.state_of(plan)}/{TO_INSTALL_FILE}")),)))
            elif step.kind not in ("companions", "libraries", "target"):  # the lock installs them at once
                steps.append(step)
        return tuple(steps)

    def complete(self, plan: Plan, chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> Plan:
        done = self.base.complete(dataclasses.replace(plan, route=self.base), chosen, resolution)
        route = dataclasses.replace(self, base=done.route)
        # The target is the wheel the lock names, fixed by its hash: its source is never asked again.
        built = [entry for entry in self.used.lock.entries if entry.origin == "built"]
        requirement = TargetRequirement(built[0].name, (), built[0].url) if built else done.requirement
        done = dataclasses.replace(done, route=route, requirement=requirement)
        return dataclasses.replace(done, steps=route.steps(done) if done.supported else ())

    def interpreter_policy(self, plan: Plan) -> InterpreterPolicy:
        return self.base.interpreter_policy(plan)

    def fixed_resolution(self) -> Optional[Resolution]:
        return self.used.resolution

    def vendor_label(self, plan: Plan) -> str:
        return self.base.vendor_label(plan)

    def fallback_location(self, plan: Plan) -> Optional[str]:
        return self.base.fallback_location(plan)

    def facts(self) -> Dict[str, Any]:
        return {**self.base.facts(), "lock": self.used.sha256}

    def describe(self) -> Dict[str, Any]:
        return {**self.base.describe(), "lock": self.used.to_json()}

    def handlers(self) -> Mapping[str, Handler]:
        # From a registry the lock's own fetch step takes every file; else the shared one its vendor files.
        return {**self.base.handlers(), "lock": _install_lock, **({"fetch": _fetch} if self.used.registry else {})}

    def file_sources(self) -> Tuple[str, ...]:
        # A served wheelhouse given with its credentials: its files' URLs carry them.
        return tuple(entry.url for entry in self.used.lock.entries if credentials(entry.url))

    def unreachable_fix(self, plan: Plan, rerun: "Rerun", file: str) -> str:
        return _unreachable_fix(self.used, rerun)


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
    base = None
    registry = None
    if wheelhouse and is_oci(wheelhouse):
        registry = parse_reference(wheelhouse, f"--wheelhouse {wheelhouse}")
    elif wheelhouse:
        from jetson_install.catalog.settings import check_index_url

        if "://" in wheelhouse:
            # A served wheelhouse is an index like any other: https, or plain http on loopback
            # (or with --allow-insecure-index), since its lock.txt and files swapped in transit
            # would install. With a local --lock every file is held to that lock's sha256, so
            # plain http can alter nothing; a user and token would still travel in clear.
            trusted = bool(lock_file) and credentials(wheelhouse) is None
            check_index_url(wheelhouse, f"--wheelhouse {wheelhouse}", plan.settings.allow_insecure or trusted)
        base = wheelhouse.rstrip("/") if "://" in wheelhouse else Path(wheelhouse).absolute().as_uri()
    if lock_file:
        location = str(Path(lock_file).absolute())
        flag = f"--lock {lock_file}"
        text = read_lock_text(lock_file, flag)
        lock = parse_lock(text, flag)
        if base is not None:
            # The fleet's way: the hashes from this trusted lock, only the files from the mirror,
            # whose own lock.txt is never read.
            lock = relocated(lock, base)
        elif registry is None:
            lock = _built_beside(lock, Path(location).parent)
    elif registry is not None:
        # The manifest's lock: pinned by the digest given, else by the tag's manifest as the
        # registry serves it now (over https, or loopback), read once so the files come from it too.
        registry, text = _registry_lock(registry, plan.settings.allow_insecure)
        location = f"{registry} {WHEELHOUSE_LOCK}"
        lock = parse_lock(text, f"--wheelhouse {wheelhouse}: {WHEELHOUSE_LOCK}")
        flag = f"--wheelhouse {wheelhouse}"
    else:
        from jetson_install.tools.index import fetch_text

        assert base is not None and wheelhouse is not None
        location = f"{base}/{WHEELHOUSE_LOCK}"
        text = fetch_text(location)
        secret = credentials(location)
        location = secret.url if secret else location  # as the result and the evidence name it
        lock = relocated(parse_lock(text, f"--wheelhouse {wheelhouse}: {WHEELHOUSE_LOCK}"), base)
        flag = f"--wheelhouse {wheelhouse}"
    if plan.interpreter:
        from jetson_install.envs.interpreters import inspect_interpreter

        python = inspect_interpreter(plan.interpreter).abi
    else:
        python = plan.python_abi or ""
    mismatch = lock_mismatch(lock, plan.channel.id if plan.channel else None, python, os.uname().machine,
                             plan.target.id)
    if mismatch:
        remake = rerun.keeping("lock", _LOCK_OPTIONS, _LOCK_FLAGS).with_option("--output", "FILE")
        again = rerun.without("--wheelhouse").with_option("--lock", "FILE")
        raise BadInput(f"{flag}: {mismatch}",
                       fix=f"make a lock for this board and interpreter: {remake}, then run: {again}")
    known = tuple(build for source in (plan.channel.sources if plan.channel else ()) for build in source.builds)
    return LockInUse(lock, location, hashlib.sha256(text.encode("utf-8")).hexdigest(), render_lock(lock),
                     lock_resolution(lock, location, known), redact(wheelhouse) if wheelhouse else None, registry)


def _registry_lock(reference: Reference, allow_insecure: bool) -> Tuple[Reference, str]:
    """The lock a registry's wheelhouse manifest carries, and the reference pinned to that manifest."""
    from jetson_install.tools.oci import registry_for

    fix = f"push a wheelhouse there (jetson-install wheelhouse DIR --lock FILE --push {reference}), or name its lock: --lock FILE"
    try:
        registry = registry_for(reference, allow_insecure)
        manifest = registry.manifest(reference)
        layer = next((layer for layer in manifest.layers if layer.title == WHEELHOUSE_LOCK), None)
        if layer is None:
            raise BadInput(f"--wheelhouse {reference}: the manifest {manifest.digest} carries no {WHEELHOUSE_LOCK}: "
                           "it is not a wheelhouse jetson-install pushed", fix=fix)
        pinned = reference.pinned(manifest.digest)
        raw = registry.blob_bytes(pinned, layer.digest, 16 * 2**20)
    except RegistryError as exc:
        raise StepFailed("lock", exc.message, exc.fix) from None
    try:
        return pinned, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"--wheelhouse {reference}: its {WHEELHOUSE_LOCK} is not UTF-8 text", fix=fix) from None


def _built_beside(lock: Lock, folder: Path) -> Lock:
    """The lock's built OBLITERATUS wheel, found beside the lock where its recorded path (on the
    machine that made the lock) does not exist here: a lock copied with its wheel installs."""
    entries = []
    for entry in lock.entries:
        parts = urlsplit(entry.url)
        if entry.origin == "built" and parts.scheme == "file" and not Path(unquote(parts.path)).is_file():
            beside = folder / entry.filename
            if beside.is_file():
                entry = dataclasses.replace(entry, url=beside.absolute().as_uri())
        entries.append(entry)
    return dataclasses.replace(lock, entries=tuple(entries))


def _unreachable_fix(lock: LockInUse, rerun: "Rerun") -> str:
    """The fix for a file of the lock that did not come: from the wheelhouse given, where it
    is served; from the indexes the lock names, a wheelhouse filled where they answer."""
    if lock.registry is not None:
        return (f"check that the registry answers from here and holds the lock's wheelhouse (jetson-install wheelhouse "
                f"DIR --lock FILE --push {lock.registry}, where the wheelhouse is), then run: {rerun}")
    if lock.wheelhouse is not None and "://" in lock.wheelhouse:
        return (f"the wheelhouse {lock.wheelhouse} did not answer, or lacks the file: check that it is served there "
                "(jetson-install wheelhouse DIR --serve, on the machine that has it) and that this machine reaches "
                f"it, then run: {rerun}")
    if lock.wheelhouse is not None:
        return (f"the wheelhouse {lock.wheelhouse} lacks the file: fill it from the lock (jetson-install wheelhouse "
                f"{shlex.quote(lock.wheelhouse)} --lock FILE), then run: {rerun}")
    return ("the index the lock names did not answer: check the network, or fill a wheelhouse from the lock where the "
            "indexes answer (jetson-install wheelhouse DIR --lock FILE) and install from it: "
            f"{rerun.with_option('--wheelhouse', 'DIR')}")


def _fetch_step(plan: Plan, lock: LockInUse, registry: Reference) -> Step:
    files = len({entry.sha256 for entry in lock.lock.entries})
    return Step("fetch", "fetch", f"fetch the {files} files of {lock.location} from {registry}, each blob by the "
                                  f"sha256 the lock names and checked as it arrives, into "
                                  f"{shared.state_of(plan)}/{FETCHED_DIR}/; check each vendor wheel against its own "
                                  f"RECORD and keep every file's sha256 in {MANIFEST_FILE}")


#: Blobs fetched at once: a runner's link is used, and a site cache is asked for several files together.
_PARALLEL_BLOBS = 8


def _fetch(step: Step, run: Execution) -> str:
    """The lock's files from the registry, each by its sha256 (BlobMismatch for other bytes),
    into the new environment's state folder; the manifest named, where one is, must list them all."""
    from concurrent.futures import ThreadPoolExecutor

    from jetson_install.base.oci_manifest import Layer
    from jetson_install.tools.oci import registry_for
    from jetson_install.tools.progress import DOWNLOAD, DOWNLOADED, Event

    route = run.plan.route
    assert isinstance(route, LockRoute) and route.used.registry is not None
    lock, reference = route.used, route.used.registry
    folder = state_of(run.staging) / FETCHED_DIR / FILES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    entries = list({entry.sha256: entry for entry in lock.lock.entries}.values())
    fix = _unreachable_fix(lock, run.rerun)
    try:
        registry = registry_for(reference, run.plan.settings.allow_insecure)
        listed: Optional[Dict[str, Layer]] = None  # with a manifest, each blob's size: one running past it is refused
        if reference.manifest_reference is not None:
            listed = registry.manifest(reference).by_digest()
            missing = [entry.filename for entry in entries if f"sha256:{entry.sha256}" not in listed]
            if missing:
                raise StepFailed("fetch", f"{reference} does not list {len(missing)} of the lock's files "
                                          f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): it is a "
                                          "wheelhouse of another lock",
                                 f"push this lock's wheelhouse there (jetson-install wheelhouse DIR --lock FILE --push "
                                 f"{reference}), then run: {run.rerun}")
        current = run.current
        for entry in entries:
            if current is not None:
                current.event(Event(DOWNLOAD, entry.filename, 0))
        stop = threading.Event()

        def fetch(entry: Locked) -> int:
            def going_on(_: int) -> None:
                if stop.is_set():  # a failure elsewhere, or Ctrl-C: this download ends too, leaving nothing
                    raise RegistryError(f"{entry.filename}: not fetched, the step is ending")
            layer = listed.get(f"sha256:{entry.sha256}") if listed is not None else None
            return registry.fetch_blob(reference, f"sha256:{entry.sha256}", folder / entry.filename, going_on,
                                       size=layer.size if layer is not None else None)

        pool = ThreadPoolExecutor(_PARALLEL_BLOBS)
        futures = {entry.filename: pool.submit(fetch, entry) for entry in entries}
        total = 0
        try:
            for name, future in futures.items():
                total += future.result()
                if current is not None:
                    current.event(Event(DOWNLOADED, name))
        finally:
            stop.set()
            for future in futures.values():
                future.cancel()
            pool.shutdown(wait=True)
    except RegistryError as exc:
        raise StepFailed("fetch", exc.message, f"{exc.fix}; {fix}" if exc.fix else fix) from None
    # The vendor files' expected hashes, from the wheels the lock's sha256 decided (envs/manifest.py).
    try:
        write_manifest(run.staging, [read_wheel(folder / entry.filename, entry.sha256, lock.location)
                                     for entry in entries if entry.origin == "vendor"])
    except WheelRefused as refused:
        raise StepFailed("fetch", f"step 'fetch' failed: {refused.message}", refused.fix) from None
    return f"{len(entries)} files ({total} bytes) from {reference}, each sha256 checked"


def _install_lock(step: Step, run: Execution) -> str:
    """Install exactly the lock's files; the lock stays in the environment as its record."""
    route = run.plan.route
    assert isinstance(route, LockRoute)
    lock = route.used
    write_constraints(run.staging, run.plan.constraints)

    # A mirror's credentials in its files' URLs stay readable by the user alone, as requirements.txt's do.
    mode = 0o600 if redact(lock.text) != lock.text else None
    replace_file(state_of(run.staging) / LOCK_FILE, lock.text, mode=mode)
    fetched = state_of(run.staging) / FETCHED_DIR
    if lock.registry is not None:
        # Every file of the lock from where the fetch step put it, each checked by the lock's sha256.
        lines = [entry.line() for entry in relocated(lock.lock, fetched.as_uri()).entries]
    else:
        # Its vendor files from where the fetch step checked them (nothing downloaded twice), the rest by its URLs.
        lines = [f"{name} @ {url} --hash=sha256:{sha256}" for name, url, sha256 in read_fetched(run.staging)]
        lines += [entry.line() for entry in lock.lock.entries if entry.origin != "vendor"]
    replace_file(state_of(run.staging) / TO_INSTALL_FILE, "".join(f"{line}\n" for line in lines), mode=mode)
    run.run(step.argv, _unreachable_fix(lock, run.rerun))
    if lock.registry is not None:
        shutil.rmtree(fetched)
    if run.plan.resolution is not None:
        record_installed(run.staging, run.plan.resolution, (), str(run.rerun))
    return f"{len(lock.lock.entries)} files from {lock.location} (sha256 {lock.sha256[:12]}…)"
