"""Making a lock: a board's whole environment resolved, on any machine, into one hashed
requirements file (lock_file.py is its format).

A lock is made for the board's platform (`make_lock`), installed exactly (the lock route:
hashes required, no resolution) and carried to machines without internet as a wheelhouse
(wheelhouse.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shlex
import shutil
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from jetson_install import __version__
from jetson_install.base import git_urls
from jetson_install.base.errors import BadInput, StepFailed
from jetson_install.base.oci_ref import is_oci
from jetson_install.base.outputs import read_regular_file, replace_file
from jetson_install.base.redact import CREDENTIALS_FIX, redact
from jetson_install.base.tags import platform_glibc, python_platform, wheel_rank, wheel_tags
from jetson_install.base.toml_file import load_toml
from jetson_install.base.work_folders import make_work_folder
from jetson_install.board.platform_data import ubuntu_glibc
from jetson_install.board.samples import root_shown
from jetson_install.catalog.identity import NoBuildForPython
from jetson_install.catalog.lock_file import LOCK_HEADER, Lock, Locked, file_sha256, read_lock, render_lock
from jetson_install.envs.interpreters import inspect_interpreter
from jetson_install.fleet.declared_wheel import built_as_declared, declared_wheel
from jetson_install.fleet.target_build import TargetBuild
from jetson_install.tools import runner, uv
from jetson_install.tools.index import fetch_file
from jetson_install.tools.uv_errors import read_uv_failure

if TYPE_CHECKING:
    from packaging.tags import Tag

    from jetson_install.catalog.identity import Resolution
    from jetson_install.planning.rerun import Rerun
    from jetson_install.planning.plan import Plan

__all__ = ["pick_file", "entries_from_pylock", "LockTarget", "lock_target", "no_build_for_the_boards_python",
           "make_lock", "LockResult", "tool_entries", "requirement_files"]

def pick_file(package: Mapping[str, Any], accepted: Optional[Sequence["Tag"]]) -> Optional[Tuple[str, str, bool]]:
    """(url, sha256, is_sdist) of the file a pylock.toml package entry installs from: the
    wheel whose tag ranks best in `accepted` (None: the only wheel uv listed), else its sdist."""
    best: Optional[Tuple[int, str, str]] = None
    for wheel in package.get("wheels", []):
        name = unquote(urlsplit(wheel["url"]).path.rsplit("/", 1)[-1])
        rank = wheel_rank(name, accepted) if accepted is not None else 0
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, wheel["url"], wheel["hashes"]["sha256"])
    if best is not None:
        return best[1], best[2], False
    sdist = package.get("sdist")
    if sdist:
        return sdist["url"], sdist["hashes"]["sha256"], True
    return None


def entries_from_pylock(path: Path, origin: str, accepted: Optional[Sequence["Tag"]],
                        skip: Sequence[str] = ()) -> List[Locked]:
    """The lock entries of a resolution uv wrote as pylock.toml (PEP 751)."""
    entries = []
    for package in load_toml(path).get("packages", []):
        name = canonicalize_name(package["name"])
        if name in skip:
            continue
        picked = pick_file(package, accepted)
        if picked is None:
            raise StepFailed("resolve", f"no file of {name} {package.get('version')} installs on the board's platform",
                             "check that the index carries a wheel for the board (aarch64) or a source archive")
        entries.append(Locked(name, package["version"], picked[0], picked[1], origin, picked[2]))
    return entries


@dataclass(frozen=True)
class LockTarget:
    """What a lock is made for: a board's platform (its Python, architecture and glibc), or
    (with --python) an interpreter here."""

    python: str
    arch: str
    glibc: Optional[str]  # "2.35"; None for an interpreter here
    interpreter: Optional[str] = None
    # The --python a board's install of the lock takes: a Python that is not the channel's.
    install_python: Optional[str] = None

    @property
    def platform(self) -> str:
        """uv's --python-platform, or "native" for an interpreter here."""
        if self.interpreter or self.glibc is None:
            return "native"
        return python_platform(self.arch, self.glibc)

    @property
    def accepted(self) -> Optional[List["Tag"]]:
        if self.interpreter or self.glibc is None:
            return None
        return wheel_tags(self.python, self.arch, self.glibc)


_PYTHON_VERSION = re.compile(r"3\.\d{1,2}")


def lock_target(plan: "Plan", python: Optional[str], python_version: Optional[str], rerun: "Rerun") -> LockTarget:
    """What `lock` resolves for: the board's platform (its architecture and glibc) with the
    channel's Python or `python_version`; or, with `python`, that interpreter on this machine,
    which must be of the board's architecture: with another, the vendor files (the board's)
    and the rest (this machine's) would make a lock that installs nowhere."""
    assert plan.channel is not None
    arch = plan.platform.arch or "aarch64"
    if python and python_version:
        raise BadInput("--python and --python-version were both given: a lock is for an interpreter here, or for "
                       "the board's platform with a Python version",
                       fix=f"lock for the board's platform: {rerun.without('--python')}")
    if python:
        interpreter = inspect_interpreter(python)
        here = os.uname().machine
        if here != arch:
            raise BadInput(f"--python {python} is this machine's {here} interpreter, and --root "
                           f"{root_shown(plan.platform.root)} is an {arch} board: the lock would take the board's "
                           f"{arch} vendor wheels and {here} wheels for the rest, and install nowhere",
                           fix="lock for the board's platform with that Python: "
                               f"{rerun.without('--python').with_option('--python-version', interpreter.abi)}")
        return LockTarget(interpreter.abi, here, None, interpreter.path)
    version = python_version or plan.channel.python
    if not _PYTHON_VERSION.fullmatch(version):
        raise BadInput(f"--python-version {version}: not a Python version as MAJOR.MINOR",
                       fix=f"give the board's Python, e.g.: {rerun.with_option('--python-version', plan.channel.python)}")
    other = version != plan.channel.python
    return LockTarget(version, arch, ubuntu_glibc(plan.platform.ubuntu),
                      install_python=f"/usr/bin/python{version}" if other else None)


def no_build_for_the_boards_python(error: "NoBuildForPython", target: LockTarget, where: str,
                                   rerun: "Rerun") -> "NoBuildForPython":
    """`error` with a lock's own fix: lock for a Python the vendor index has the set for
    (a board's Python is named by --python-version, not by an interpreter here)."""
    if target.interpreter is not None:
        return error
    fix = (f"{where} has the set for Python {', '.join(error.served)}: lock for that Python: "
           f"{rerun.without('--python-version').with_option('--python-version', error.served[-1])}; or use a "
           f"vendor index with builds for Python {target.python}: {rerun.with_option('--vendor-index', 'URL')}")
    return NoBuildForPython(error.message, fix, error.python, error.served)


@dataclass(frozen=True)
class LockResult:
    lock: Lock
    path: str
    wheel: Optional[str]  # the target built into a wheel, beside the lock (None: the stack alone)
    install_python: Optional[str] = None  # the --python the board's install takes (a Python not the channel's)

    @property
    def install_command(self) -> str:
        python = f" --python {self.install_python}" if self.install_python else ""
        return f"jetson-install {self.lock.target} --lock {shlex.quote(self.path)}{python}"

    def to_json(self) -> Dict[str, Any]:
        return {"schema_version": 1, "command": "lock", "lock": self.path, "wheel": self.wheel, **self.lock.to_json()}


def make_lock(plan: "Plan", target: LockTarget, output: Path, resolve: Callable[[], "Plan"]) -> LockResult:
    """The lock of `plan` for `target`: the vendor set as the vendor index resolved it (`resolve`:
    the plan with that set; its files, URLs, sha256), the rest resolved from the default index
    alone (one resolution over both indexes would take each package from the first that has it),
    the plan's target built into a wheel beside `output`. The target is checked out and built
    on a thread meanwhile (target_build.py), and the rest resolved while it builds where its
    pyproject.toml states what the built wheel then says (declared_wheel.py); an error is the
    one a lock made step by step meets first: the vendor index's, the checkout's, the build's,
    the resolution's."""
    target_url = plan.requirement.url if plan.requirement is not None else None
    default_index = plan.settings.default_index.value
    output = output.absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    # A killed lock leaves its work folder (a clone, a build): held while this process lives, so
    # the next lock removes it once that process is gone.
    work_folder = make_work_folder(_WORK_PREFIX)
    work = work_folder.path
    building: Optional[TargetBuild] = None
    try:
        if target_url is not None:
            building = TargetBuild(target_url, default_index, work)
            building.start()
        plan = resolve()
        resolution, requirement = plan.resolution, plan.requirement
        # `lock` refuses a board with no vendor source before it comes here.
        assert resolution is not None and plan.channel is not None and plan.vendor is not None
        vendor = _vendor_entries(work, resolution, plan.vendor_index, target)
        # The vendor files as direct references: their dependencies come from the default index,
        # and the vendor index is asked for nothing else. pip in the environment, as `uv venv
        # --seed` puts it there, so later plain `pip install`s work.
        others = [*(f"{entry.name} @ {entry.url}" for entry in vendor), *plan.additions, *plan.vendor.companions, "pip"]
        built: List[Locked] = []
        commit, wheel, built_wheel, digest, rest = None, None, None, "", None
        if building is not None and requirement is not None:
            source, commit = building.source()
            building.may_build()
            # The rest is resolved while the target builds, from a wheel of the metadata its
            # pyproject.toml states, and kept only if the built wheel says the same: the built
            # wheel's metadata is what boards install (--no-deps).
            declared = declared_wheel(source, work / "declared")
            failed: Optional[StepFailed] = None
            if declared is not None:
                try:
                    rest = _resolve(work, "default", [str(replace(requirement, url=declared[0].as_uri())), *others],
                                    plan.constraints, default_index, target, no_deps=False,
                                    skip=[entry.name for entry in vendor] + [requirement.name])
                except StepFailed as exc:
                    failed = exc  # said after the build's own error, as step by step
            built_wheel = building.wheel()
            if declared is None or not built_as_declared(built_wheel, declared[1]):
                rest, failed = None, None
            if failed is not None:
                raise failed  # the built wheel's resolution would fail alike: an index that failed is not asked twice
            digest = file_sha256(built_wheel)
            wheel = output.parent / own_build_name(built_wheel.name, digest)  # beside the lock, once resolved
            others.insert(0, str(replace(requirement, url=built_wheel.as_uri())))
            built.append(Locked(requirement.name, _wheel_version(wheel.name), wheel.as_uri(), digest, "built"))
        if rest is None:
            rest = _resolve(work, "default", others, plan.constraints, default_index, target, no_deps=False,
                            skip=[entry.name for entry in vendor + built])
        # The header names the source without a token in its URL: a lock is copied to every runner.
        lock = Lock(plan.channel.id, target.python, target.arch, target.platform,
                    redact(str(requirement)) if requirement else "none (the stack alone)", commit, __version__,
                    tuple(vendor + built + rest), resolution.warnings, plan.target.id)
        # Each build's wheel has a name of its own, so it goes in beside the previous lock and its
        # wheel without touching them, and the lock's own rename is the one step that switches
        # the pair: a lock killed at any moment leaves one whole pair, never a lock naming
        # another wheel's bytes (two renames, one after the other, did: seen in CI).
        with _folder_held(output.parent):
            _remove_abandoned(output)
            if wheel is not None and built_wheel is not None and not (wheel.is_file() and file_sha256(wheel) == digest):
                part = output.parent / f".{wheel.name}.{os.getpid()}{_PART}"
                shutil.copyfile(built_wheel, part)
                os.replace(part, wheel)
            replace_file(output, render_lock(lock))
            if requirement is not None:
                remove_unnamed_builds(output.parent, requirement.name)
    finally:
        if building is not None:
            building.stop()  # nothing of it runs on (an error, Ctrl-C) once the work folder goes
        work_folder.close()
    return LockResult(lock, str(output), str(wheel) if wheel else None, target.install_python)


#: The lock of a folder whose own flock is refused: Linux's NFS client makes flock a POSIX lock,
#: which an exclusive lock takes only on a file open for writing (flock(2), "NFS details").
_FOLDER_LOCK = ".jetson-install-lock.flock"


@contextlib.contextmanager
def _folder_held(folder: Path) -> Iterator[None]:
    """The folder's flock (a directory's, so no file of ours is left in it; on NFS a hidden file's
    in it, kept) for putting a wheel and a lock in place and removing the builds no lock names:
    another lock made in the same folder at once must not remove this one's wheel between its
    rename and its lock's."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
            os.close(descriptor)
            descriptor = -1
            descriptor = os.open(folder / _FOLDER_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        if descriptor >= 0:
            os.close(descriptor)


# PEP 427: a build tag starts with a digit and tells two builds of one version apart.
# https://packaging.python.org/en/latest/specifications/binary-distribution-format/
_OWN_BUILD = re.compile(r"0[0-9a-f]{16}")


def own_build_name(filename: str, sha256: str) -> str:
    """The built wheel's file name with a build tag of its own: 0 and its sha256's first 16
    hex digits (obliteratus-0.1.3-0e257cd2fe45864bf-py3-none-any.whl)."""
    parts = filename[: -len(".whl")].split("-")
    return "-".join([parts[0], parts[1], f"0{sha256[:16]}", *parts[-3:]]) + ".whl"


def remove_unnamed_builds(folder: Path, distribution: str) -> None:
    """The built wheels of `distribution` in `folder` that no lock there names: those of a lock
    made again for another commit, or of one killed just after its rename. Only this tool's
    own build names are touched, and a lock that cannot be read keeps every one: locks for
    several boards in one folder share a build."""
    named: Set[str] = set()
    builds: List[Path] = []
    for path in folder.iterdir():
        if path.name.endswith(".whl") and _is_own_build(path.name) and \
                canonicalize_name(path.name.split("-", 1)[0]) == canonicalize_name(distribution):
            builds.append(path)
            continue
        try:
            if read_regular_file(path, len(LOCK_HEADER)) != LOCK_HEADER.encode():
                continue  # not a lock (nor a regular file)
            named.update(entry.filename for entry in read_lock(path, str(path)).entries)
        except (OSError, BadInput):
            return
    for path in builds:
        if path.name not in named:
            with contextlib.suppress(OSError):  # not ours to remove after all: kept
                path.unlink()


_WORK_PREFIX = "jetson-install-lock-"
_PART = ".part"


def _remove_abandoned(output: Path) -> None:
    """What killed locks left beside `output` (their work folders go as work_folders.py makes
    them): a wheel not yet renamed (`.NAME.PID.part`, NAME a build name own_build_name gives) or
    the lock's own text not yet renamed (`.LOCK.PID.XXXX.tmp`, as replace_file names it). Only
    this user's regular files of exactly those forms are removed: a user's `.thesis.pdf.part` or
    a folder `.mydir.part/` there is not the lock's. Called with the folder's flock held, which
    a live lock holds for as long as such a file of its own exists, so every one found is a
    killed lock's, whatever its PID names now: a lock in a container is pid 1 on every run, and
    a lock in another pid namespace sharing the folder waits for the flock instead of losing its
    file to this one."""
    part = re.compile(r"\.(?P<name>[^/]+\.whl)\.(?P<pid>[1-9][0-9]*)" + re.escape(_PART))
    text = re.compile(re.escape(f".{output.name}.") + r"(?P<pid>[1-9][0-9]*)\.[A-Za-z0-9_]+\.tmp")
    try:
        entries = list(os.scandir(output.parent))
    except OSError:
        return
    for entry in entries:
        found = part.fullmatch(entry.name) or text.fullmatch(entry.name)
        if found is None or ("name" in found.groupdict() and not _is_own_build(found.group("name"))):
            continue
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid():
            with contextlib.suppress(OSError):  # gone meanwhile
                os.unlink(entry.path)


def _is_own_build(filename: str) -> bool:
    """Whether `filename` is a wheel name own_build_name gives."""
    parts = filename[: -len(".whl")].split("-")
    return len(parts) == 6 and _OWN_BUILD.fullmatch(parts[2]) is not None


def tool_entries(wheel: Path, lock: Lock, default_index: Optional[str], again: str) -> List[Locked]:
    """jetson-install's own `wheel` and its dependencies, resolved for the board `lock` was made
    for (its Python, architecture and glibc: the aarch64 uv wheel among them), so that a board
    without internet installs the tool from the wheelhouse too (`again`: a failure's last step,
    the wheelhouse command)."""
    try:
        name, version = parse_wheel_filename(wheel.name)[:2]
    except InvalidWheelFilename:
        raise BadInput(f"--tool-wheel {wheel}: not a wheel file name", fix="give jetson-install's own wheel, "
                       "e.g. --tool-wheel jetson_install-0.1.0-py3-none-any.whl") from None
    if name != "jetson-install":
        raise BadInput(f"--tool-wheel {wheel} is {name}, not jetson-install",
                       fix="give the jetson-install wheel the tool was installed from")
    if not wheel.is_file():
        raise BadInput(f"--tool-wheel {wheel}: no such file", fix="give the path of jetson-install's wheel "
                       "(pip wheel --no-deps -w . <jetson-install checkout> makes one)")
    glibc = platform_glibc(lock.platform)
    if glibc is not None:
        target = LockTarget(lock.python, lock.arch, glibc)
    elif "%d.%d" % sys.version_info[:2] == lock.python:
        # A lock made for an interpreter here: the tool for that same Python, on this machine.
        target = LockTarget(lock.python, lock.arch, None, interpreter=sys.executable)
    else:
        raise BadInput(f"the lock is for Python {lock.python} on this machine ({lock.platform}), and this "
                       f"jetson-install runs Python {sys.version_info[0]}.{sys.version_info[1]}",
                       fix="make the lock for the board: jetson-install lock --root ... (without --python)")
    url = wheel.absolute().as_uri()
    # A lock's work folder, so that the next lock or wheelhouse removes it when a kill left it behind.
    with make_work_folder(_WORK_PREFIX) as scratch:
        rest = _resolve(scratch, "default", [f"{name} @ {url}"], None, default_index, target, no_deps=False,
                        skip=[name], again=again)
    return [Locked(name, str(version), url, file_sha256(wheel), "built")] + rest


def _vendor_entries(work: Path, resolution: "Resolution", vendor_index: Optional[str],
                    target: LockTarget) -> List[Locked]:
    """The resolved vendor files; a file the index listed without its sha256 is hashed here,
    and a set known only by versions (a source not read live) is resolved by uv, --no-deps,
    from the vendor index alone."""
    entries: List[Locked] = []
    by_version: List[str] = []
    for chosen in resolution.files:
        if not chosen.url:
            by_version.append(f"{chosen.name}=={chosen.version}")
            continue
        if is_oci(chosen.url):
            # A lock names each file by a URL uv fetches on the board; a registry's blob is not one.
            raise StepFailed("lock", f"the vendor set came from the registry {resolution.source} (the vendor index "
                                     f"did not serve it), and a lock names each file by a URL the board fetches, which "
                                     "a registry's blob is not",
                             "make the lock when the vendor index answers; meanwhile install from the registry as a "
                             "mirror: jetson-install obliteratus --mirror " + resolution.source)
        sha256 = chosen.sha256
        if not sha256:
            copy = work / chosen.file
            fetch_file(chosen.url, copy)
            sha256 = file_sha256(copy)
            copy.unlink()
        entries.append(Locked(canonicalize_name(chosen.name), chosen.version, chosen.url.split("#", 1)[0], sha256, "vendor"))
    if by_version:
        entries += _resolve(work, "vendor", by_version, None, vendor_index, target, no_deps=True)
    return entries




def _wheel_version(filename: str) -> str:
    return str(parse_wheel_filename(filename)[1])


#: Where a resolution's Python comes from, and so how to resolve for another (by: whether it is the board's).
_OTHER_PYTHON = {True: "name a board whose channel has a Python that satisfies it (--root, --l4t)",
                 False: "give --python an interpreter that satisfies it"}


def _resolve(work: Path, origin: str, requirements: Sequence[str], constraints: Optional[Sequence[str]],
             index: Optional[str], target: LockTarget, no_deps: bool, skip: Sequence[str] = (),
             again: str = "run the lock again") -> List[Locked]:
    """`again`: a failure's last step, the command that resolved (the lock, or inspect's own)."""
    inputs = work / f"{origin}.in"
    # A --with git URL without its credentials: uv would put them on its git's command line.
    inputs.write_text("\n".join(git_urls.requirement_without_credentials(line) for line in requirements) + "\n", encoding="utf-8")
    constraints_file = None
    if constraints:
        constraints_file = work / f"{origin}-constraints.txt"
        constraints_file.write_text("\n".join(constraints) + "\n", encoding="utf-8")
    output = work / f"pylock.{origin}.toml"
    argv = uv.lock_compile_argv(str(inputs), str(constraints_file) if constraints_file else None, index, str(output),
                                target.python, target.platform if not target.interpreter else None,
                                target.interpreter, no_deps)
    result = runner.run_uv(argv, indexes=[index] if index else [], sources=requirements)
    if not result.ok:
        where = index or "uv's default index"
        failure = read_uv_failure(result.stderr)
        fix = f"check that {where} answers and carries what the message names, then {again}"
        if failure.kind == "requires-python":
            python, needed = (failure.subject or "? ?").split(" ", 1)
            fix = (f"what it resolves needs Python{needed}, and this resolution is for Python {python}: name a "
                   f"release that supports Python {python}, or {_OTHER_PYTHON[target.interpreter is None]}, then {again}")
        if failure.kind == "refused":
            fix = f"{CREDENTIALS_FIX}, then {again}"
            refused, named = urlsplit(failure.subject or ""), urlsplit(index or "")
            host = refused.hostname
            if host and (host, refused.port) != (named.hostname, named.port):
                # A vendor file, asked for by its URL: the vendor index URL's credentials do not go with it.
                fix = (f"put the credentials for {host} in ~/.netrc (machine {host} login USER password TOKEN, "
                       "mode 0600): this resolution fetches the vendor files by their URLs, which carry none, "
                       f"then {again}")
        raise StepFailed(f"resolve ({origin})", f"resolving from the {origin} index ({where}) failed: "
                                                f"{failure.summary}", fix)
    return entries_from_pylock(output, origin, target.accepted, skip)


def requirement_files(requirement: str, constraints: Sequence[str], default_index: Optional[str], target: LockTarget,
                      work: Path, again: str) -> List[Locked]:
    """The files `requirement` itself installs from (not its dependencies) as uv resolves it for
    the board of `target` from the default index under `constraints`: what `inspect
    REQUIREMENT` reads (`again`: its failure's last step, inspect's own command). Each wheel is
    downloaded into `work` (`Locked.filename` there) and checked against the sha256 uv's
    resolution names; a source archive is not downloaded: it holds no built code to read."""
    entries = _resolve(work, "default", [requirement], constraints, default_index, target, no_deps=True, again=again)
    for entry in entries:
        if entry.sdist:
            continue
        destination = work / entry.filename
        fetch_file(entry.url, destination)
        if file_sha256(destination) != entry.sha256:
            raise StepFailed("download", f"{redact(entry.url)} does not have the sha256 uv's resolution names "
                                         f"({entry.sha256})", "run the command again; if it says so again, the index "
                                                              "serves another file than it lists")
    return entries
