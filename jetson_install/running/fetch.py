"""The fetch step: every vendor file downloaded by the tool itself before anything is installed,
so each vendor file's expected hash is measured from the artifact, never assumed.

What only uv can list (its default index: Thor's sets, a preflight's CPU builds, the companions)
is resolved by uv first, as pylock.toml: each file's URL and sha256. Each file then comes into
the per-user cache of checked wheels (wheels/<sha256>/<file>; a file the cache holds is read
from there, a local file where it is), is checked against its sha256 and against its own
RECORD (envs/manifest.py), and every file's sha256 is kept in the environment's
vendor-files.json. The vendor (or lock) step installs exactly those files, by their sha256,
with no index: the bytes checked are the bytes installed, and nothing is downloaded twice.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit, urlunsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from jetson_install.base.errors import RegistryError, StepFailed
from jetson_install.base.oci_ref import is_oci
from jetson_install.base.layout import (
    COMPANIONS_INPUT,
    COMPANIONS_PYLOCK,
    VENDOR_INPUT,
    VENDOR_PYLOCK,
    WHEELS_CACHE_DIR,
    state_of,
)
from jetson_install.base.outputs import replace_file
from jetson_install.base.redact import credentials, redact
from jetson_install.base.steps import Step
from jetson_install.base.tags import wheel_rank, wheel_tags
from jetson_install.base.toml_file import load_toml
from jetson_install.base.user_dirs import cache_dir
from jetson_install.base.work_folders import make_work_folder, remove_abandoned
from jetson_install.board.platform_data import ubuntu_glibc
from jetson_install.catalog.identity import ChosenFile, Companion, IdentityMismatch, Resolution
from jetson_install.envs.manifest import (
    DistributionFiles,
    WheelRefused,
    file_sha256,
    read_fetched,
    read_wheel,
    remember,
    remembered,
    write_fetched,
    write_manifest,
)
from jetson_install.planning import vendor_sources
from jetson_install.planning.plan import Plan, resolved_plan
from jetson_install.planning.routes.shared import left_to_uv
from jetson_install.running.execution import Run
from jetson_install.tools import index, oci_mirror
from jetson_install.tools.progress import DOWNLOAD, DOWNLOADED, Event, StepProgress

__all__ = ["fetch", "fetched_companions", "wheels_cache"]

log = logging.getLogger("jetson_install")
# A run's downloads, in the wheels cache (work_folders.py removes a killed run's).
_PARTIAL = ".part-"


def wheels_cache() -> Path:
    return cache_dir().value / WHEELS_CACHE_DIR


def fetch(step: Step, run: Run) -> str:
    """Resolve what only uv can list, download and check every vendor file (and the companions
    where the step resolves them), keep their files' hashes, and write what the next step installs."""
    plan = run.plan
    vendor = plan.vendor
    assert vendor is not None and plan.resolution is not None
    state = state_of(run.staging)
    state.mkdir(parents=True, exist_ok=True)
    reach = f"check that the default index answers and carries what the message names, then run: {run.rerun}"
    vendor_compile = _command(step, VENDOR_PYLOCK)
    if vendor_compile is not None:
        replace_file(state / VENDOR_INPUT, "".join(f"{line}\n" for line in left_to_uv(plan)))
        run.run(vendor_compile, reach)
        resolved = _pylock_files(state / VENDOR_PYLOCK, plan)
        try:
            resolution = plan.resolution.with_resolved(resolved, vendor.builds, f"uv's resolution on {vendor.location}")
        except IdentityMismatch as exc:
            raise StepFailed("fetch", f"step 'fetch' failed: {exc.message}", exc.fix) from None
        plan = resolved_plan(plan, resolution, plan.companions)
        run.learned(plan)
    companions: List[ChosenFile] = []
    companions_compile = _command(step, COMPANIONS_PYLOCK)
    if companions_compile is not None:
        replace_file(state / COMPANIONS_INPUT, "".join(f"{line}\n" for line in vendor.companions))
        run.run(companions_compile, reach)
        companions = _pylock_files(state / COMPANIONS_PYLOCK, plan)
    # Downloads cut short by a killed run (their process is gone): nothing of a run grows after it.
    remove_abandoned(_PARTIAL, wheels_cache())
    while True:
        try:
            assert plan.resolution is not None
            files = [_checked(chosen, _where(chosen, plan.resolution), plan, run) for chosen in plan.resolution.files]
            break
        except StepFailed as failure:
            plan = _from_next_source(plan, run, failure)
    extra = [_checked(chosen, "uv's resolution on the default index", plan, run) for chosen in companions]
    write_manifest(run.staging, [read for _, _, read in files + extra])
    write_fetched(run.staging, [(name, path, str(read.wheel_sha256)) for name, path, read in files + extra])
    if companions:
        run.learned(resolved_plan(plan, plan.resolution, [f"{c.name}=={c.version}" for c in companions]))
    return ", ".join(f"{read.wheel} ({len(read.files)} files)" for _, _, read in files + extra)


def fetched_companions(environment: Path, plan: Plan) -> List[Companion]:
    """The companions the fetch step checked, as the record keeps them: name, version, sha256."""
    versions = dict(line.split("==", 1) for line in plan.companions)
    return [Companion(name, versions[name], (sha256,)) for name, _, sha256 in read_fetched(environment)
            if name in versions]


def _command(step: Step, output: str) -> Optional[Sequence[str]]:
    """The step's uv command that writes `output`, where it has one."""
    return next((command for command in step.commands if any(part.endswith(f"/{output}") for part in command)), None)


def _where(chosen: ChosenFile, resolution: Resolution) -> str:
    """What gives a file's sha256: the catalog, where it lists the build; else its source."""
    return "wheels-index.toml" if chosen.known else resolution.source


def _pylock_files(path: Path, plan: Plan) -> List[ChosenFile]:
    """The wheel uv resolved each package to (PEP 751 pylock.toml): its version, URL and sha256;
    where uv lists several, the one the interpreter's tags rank first."""
    tags = wheel_tags(plan.interpreter_python or plan.python_abi or "3", os.uname().machine,
                      ubuntu_glibc(plan.platform.ubuntu))
    files = []
    for package in load_toml(path).get("packages", []):
        name, version = str(package["name"]), str(package["version"])
        ranked = []
        for wheel in package.get("wheels", []):
            file = unquote(urlsplit(wheel["url"]).path.rsplit("/", 1)[-1])
            rank = wheel_rank(file, tags)
            if rank is not None or len(package["wheels"]) == 1:
                ranked.append((rank or 0, file, str(wheel["url"]), str(wheel["hashes"]["sha256"])))
        if not ranked:
            raise StepFailed("fetch", f"step 'fetch' failed: uv resolved {name} {version} to no wheel for this "
                                      "interpreter (the vendor builds and their runtime wheels are wheels)",
                             f"check that the default index carries a wheel of {name} for this board, then run the "
                             "install again")
        _, file, url, sha256 = min(ranked)
        files.append(ChosenFile(name, version, file, url, sha256, False))
    return files


def _checked(chosen: ChosenFile, where: str, plan: Plan, run: Run) -> Tuple[str, Path, DistributionFiles]:
    """(name, local path, its files) of one vendor file, downloaded into the cache of checked
    wheels (or read where it already is), checked against its sha256 and its own RECORD."""
    try:
        parse_wheel_filename(chosen.file)
    except InvalidWheelFilename:
        raise StepFailed("fetch", f"step 'fetch' failed: {chosen.file or chosen.url} is not a wheel",
                         f"the vendor builds are wheels: report the source ({plan.vendor_location}) as serving "
                         "something else") from None
    fix = (f"remove {wheels_cache()} and run the install again; if it comes again, install from another source: "
           f"{run.rerun.with_option(plan.route.source_option, 'URL')}")
    parts = urlsplit(chosen.url)
    if parts.scheme == "file":
        # A wheelhouse or a local index: read where it is, never copied.
        return chosen.name, Path(unquote(parts.path)), _read(Path(unquote(parts.path)), chosen, where, fix, "local")
    cache = wheels_cache()
    if chosen.sha256 and len(chosen.sha256) == 64:
        cached = cache / chosen.sha256.lower() / chosen.file
        kept = _cached(cached, chosen)
        if kept is not None:
            return chosen.name, cached, kept
    # Downloaded under its own name (which the wheel's reader parses) in a fresh folder of this
    # run's, held while it runs: no other run (a container's process of the same pid included)
    # removes it or puts a file in it between the hash check and the rename.
    cache.mkdir(parents=True, exist_ok=True)
    folder = make_work_folder(_PARTIAL, cache)
    partial = folder.path / chosen.file
    shown = _Shown(run.current, chosen.file)
    try:
        try:
            if is_oci(chosen.url):  # a registry's blob, by its digest (checked as it arrives)
                shown(0, 0)
                oci_mirror.fetch_by_reference(chosen.url, partial, plan.settings.allow_insecure)
            else:
                index.fetch_file(_with_credentials(chosen.url, (*plan.indexes, *plan.route.file_sources())), partial,
                                 shown)
        except RegistryError as exc:
            raise StepFailed("fetch", f"step 'fetch' failed: {exc.message}",
                             exc.fix or plan.route.unreachable_fix(plan, run.rerun, chosen.file)) from None
        except StepFailed as failure:
            # Refused: the netrc line for its host, then the user's own command; else the route's fix.
            refused = (failure.fix or "").replace(index.RUN_AGAIN, f"run: {run.rerun}") \
                if "credentials" in failure.message else None
            raise StepFailed("fetch", f"step 'fetch' failed: {failure.message}",
                             refused or plan.route.unreachable_fix(plan, run.rerun, chosen.file)) from None
        files = _read(partial, chosen, where, fix, "downloaded")
        final = cache / str(files.wheel_sha256) / chosen.file
        final.parent.mkdir(exist_ok=True)
        os.replace(partial, final)
        remember(final, files)
    finally:
        folder.close()
    shown.done(final.stat().st_size)
    return chosen.name, final, files


class _Shown:
    """A download as the running step shows it: announced with the size its answer gives, the
    clock ticking while it runs (a few times a second at most), counted once it is whole."""

    def __init__(self, step: Optional[StepProgress], name: str) -> None:
        self.step, self.name = step, name
        self.announced: Optional[int] = None
        self.ticked = 0.0

    def __call__(self, received: int, total: int) -> None:
        if self.step is None:
            return
        if self.announced is None:
            self.announced = total
            self.step.event(Event(DOWNLOAD, self.name, total))
        elif time.monotonic() - self.ticked >= 0.25:
            self.ticked = time.monotonic()
            self.step.tick()

    def done(self, size: int) -> None:
        if self.step is None:
            return
        if not self.announced:  # no size announced: the bytes it came to
            self.step.event(Event(DOWNLOAD, self.name, size))
        self.step.event(Event(DOWNLOADED, self.name))


def _cached(path: Path, chosen: ChosenFile) -> Optional[DistributionFiles]:
    """The cache's copy of a file, where it still has the sha256 it must have: what reading it
    gave when it came (its RECORD checked against every member then), else it read again; None
    where there is none, or it is damaged (removed, to be downloaded again)."""
    if not path.is_file():
        return None
    measured = file_sha256(path)
    if measured != str(chosen.sha256).lower():
        path.unlink()
        return None
    log.debug("fetch: %s (sha256 %s) cached: %s", redact(chosen.url), chosen.sha256, path)
    kept = remembered(path, measured)
    if kept is None:
        try:
            kept = read_wheel(path, measured, "the cache of checked wheels")
        except WheelRefused:
            path.unlink()
            return None
        remember(path, kept)
    return kept


def _read(path: Path, chosen: ChosenFile, where: str, fix: str, how: str) -> DistributionFiles:
    log.debug("fetch: %s (sha256 %s) %s: %s", redact(chosen.url), chosen.sha256, how, path)
    try:
        return read_wheel(path, chosen.sha256 if chosen.sha256 and len(chosen.sha256) == 64 else None, where)
    except WheelRefused as refused:
        raise StepFailed("fetch", f"step 'fetch' failed: {refused.message}", fix) from None


def _with_credentials(url: str, indexes: Sequence[str]) -> str:
    """A file URL with the credentials of the index it is served beside (the same scheme, host
    and port), as uv gives them: the record and the plan keep file URLs without them."""
    parts = urlsplit(url)
    for where in indexes:
        secret = credentials(where)
        named = urlsplit(where)
        if secret is None or (named.scheme, named.hostname, named.port) != (parts.scheme, parts.hostname, parts.port):
            continue
        userinfo = named.netloc.rpartition("@")[0]
        return urlunsplit((parts.scheme, f"{userinfo}@{parts.netloc}", parts.path, parts.query, parts.fragment))
    return url


def _from_next_source(plan: Plan, run: Run, failure: StepFailed) -> Plan:
    """The plan with the same vendor files from the next source that serves them, when the one
    the set came from failed to deliver them (a file cut short, an HTTP error, another file);
    else `failure`, naming each later source and what it answered."""
    assert plan.vendor is not None and plan.resolution is not None
    failed = plan.resolution.source
    if not plan.vendor.mirrors:
        raise failure
    resolution, answers = vendor_sources.same_files_elsewhere(plan.vendor, plan.vendor_index, plan.resolution, failed,
                                                              plan.settings.allow_insecure)
    if resolution is None:
        tried = f"; the other vendor sources: {'; '.join(answers)}" if answers else ""
        raise StepFailed(failure.step, failure.message + tried, failure.fix)
    for answer in answers:
        run.progress(f"vendor source {answer}")
    note = f"vendor source {failed} failed to deliver the files ({failure.message}); taking them from {resolution.source}"
    run.progress(note)
    run.warnings.append(note)
    plan = resolved_plan(plan, resolution, plan.companions)
    run.learned(plan)
    return plan
