"""Build bitsandbytes from source for one device's exact compute capability, once, and reuse it.

bitsandbytes' own aarch64 wheels carry sm_75/80/90 (and sm_110 with CUDA 13) but never sm_87,
and on JetPack 6 they fail with "named symbol not found"; its installation guide documents an
on-device source build for Jetson instead:
https://github.com/bitsandbytes-foundation/bitsandbytes/blob/main/docs/source/installation.mdx
(`cmake -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY=87 -S . && make -j4 && pip install .`).

The build runs in a private copy of the source (CMake writes the library into the source's
`bitsandbytes/` folder), and the finished wheel is moved into the per-user cache in one rename,
under a key of everything that makes two builds differ: an interrupted build leaves no wheel,
and a second environment, or a re-run, reuses the first build.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from jetson_install import git, runner, uv
from jetson_install.errors import BadInput, StepFailed
from jetson_install.source_identity import BUILD_OUTPUTS, folder_digest
from jetson_install.toml_file import TomlData
from jetson_install.versions import satisfies

if TYPE_CHECKING:
    from jetson_install.progress import StepProgress

__all__ = [
    "Release",
    "BuildSource",
    "PlannedBuild",
    "parse_choice",
    "plan_build",
    "Toolchain",
    "BuildRequest",
    "BuiltWheel",
    "load_releases",
    "default_release",
    "find_release",
    "release_source",
    "local_source",
    "find_toolchain",
    "build_jobs",
    "build_wheel",
]

RELEASES_FILE = Path(__file__).with_name("bitsandbytes-releases.toml")
RECORD_FILE = "build.json"
# About 2 GB of memory per compiler job: `make -j6` runs out of memory on the 8 GB Orin Nano,
# `-j4` is the documented maximum there (bitsandbytes-foundation/bitsandbytes#1218).
MEMORY_PER_JOB = 2 * 2**30
# Beyond any project's build outputs, a local checkout may hold CMake's and a library built
# earlier by hand, which must not slip into a wheel built for another capability.
_BUILT_HERE = ("libbitsandbytes*", "CMakeCache.txt", "CMakeFiles")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Release:
    version: str
    commit: str
    torch: str  # the torch range of the release's own pyproject.toml


@dataclass(frozen=True)
class BuildSource:
    """The source of one build: a release tag of the repository, or a local checkout."""

    location: str  # the repository URL, or the checkout's path
    version: Optional[str]  # the release tag; None for a local checkout
    identity: str  # the tag's commit, or "sha256:" and a digest of the checkout's source files

    @property
    def is_local(self) -> bool:
        return self.version is None

    def to_json(self) -> Dict[str, Any]:
        return {"location": self.location, "version": self.version, "identity": self.identity}


@dataclass(frozen=True)
class PlannedBuild:
    """What the plan will build: a release (or a checkout's version) for one capability."""

    version: str
    source: BuildSource
    capability: str  # "87"

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "source": self.source.to_json(), "capability": self.capability}


@dataclass(frozen=True)
class Toolchain:
    cmake: str
    compiler: str
    make: str
    nvcc: str
    cuda: str  # the toolkit's major.minor, as nvcc reports it


@dataclass(frozen=True)
class BuildRequest:
    source: BuildSource
    capability: str  # "87": what COMPUTE_CAPABILITY wants
    toolchain: Toolchain
    python: str  # the interpreter the wheel is for
    python_tag: str  # "cp310"
    jobs: int

    @property
    def cmake_options(self) -> Tuple[str, ...]:
        return (
            "-DCOMPUTE_BACKEND=cuda",
            f"-DCOMPUTE_CAPABILITY={self.capability}",
            f"-DCMAKE_CUDA_COMPILER={self.toolchain.nvcc}",
            "-DCMAKE_BUILD_TYPE=Release",
        )

    def key(self) -> str:
        """Everything that makes two builds' wheels differ; the job count does not."""
        facts = {
            "source": self.source.identity,
            "cuda": self.toolchain.cuda,
            "capability": self.capability,
            "python": self.python_tag,
            "options": [option for option in self.cmake_options if "CMAKE_CUDA_COMPILER" not in option],
        }
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class BuiltWheel:
    path: Path
    sha256: str
    reused: bool  # taken from the cache, not built by this run
    record: Dict[str, Any]  # what was built, from what, for which capability (the evidence's `build`)


# --------------------------------------------------------------------------- releases


def load_releases(path: Path = RELEASES_FILE) -> Tuple[Tuple[Release, ...], str]:
    """The buildable releases, newest first, and the repository they are tags of; a mistake
    in the file (a key, a commit, the order) is one CatalogError naming its line."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    file = TomlData(path, "jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 --bitsandbytes build")
    data = file.data
    file.unknown("top level", data, ("repository", "releases"), "a key of the releases file")
    repository = file.string("top level", data, "repository", pattern=r"https://\S+",
                             shape="the repository's https:// URL")
    entries = data.get("releases")
    if not isinstance(entries, list) or not entries or not all(isinstance(entry, dict) for entry in entries):
        raise file.fail("top level", "releases", "must be one or more [[releases]] tables")
    releases: List[Release] = []
    for number, entry in enumerate(entries):
        start = file.header("releases", number)
        version = file.string("release", entry, "version", start, shape='the release tag, like "0.49.2"')
        where = f"release {version}"
        try:
            parsed = Version(version)
        except InvalidVersion:
            raise file.fail(where, "version", f"has {version!r}, which is not a version", start) from None
        file.unknown(where, entry, ("version", "commit", "torch"), "a release key", start)
        commit = file.string(where, entry, "commit", start, pattern="[0-9a-f]{40}",
                             shape="the full commit the tag points to, 40 lowercase hex digits")
        torch = file.string(where, entry, "torch", start, shape='the torch range of its pyproject.toml, like ">=2.4,<3"')
        try:
            SpecifierSet(torch)
        except InvalidSpecifier:
            raise file.fail(where, "torch", f"has {torch!r}, which is not a version range like \">=2.4,<3\"",
                            start) from None
        if releases and parsed >= Version(releases[-1].version):
            raise file.fail(where, "version", f"comes after {releases[-1].version}: releases are listed newest first",
                            start)
        releases.append(Release(version, commit, torch))
    return tuple(releases), repository


def default_release(torch_version: str, releases: Sequence[Release]) -> Release:
    """The newest release whose torch requirement the channel's torch meets, compared under
    PEP 440 as pip would: JetPack 6.0's 2.4.0a0 is below 2.4, so it gets 0.49."""
    for release in releases:
        if satisfies(torch_version, release.torch):
            return release
    raise BadInput(
        f"no buildable bitsandbytes release accepts torch {torch_version}",
        fix="install without bitsandbytes: drop --bitsandbytes build",
    )


def find_release(version: str, releases: Sequence[Release], torch_version: Optional[str]) -> Release:
    for release in releases:
        if release.version == version:
            if torch_version is not None and not satisfies(torch_version, release.torch):
                raise BadInput(
                    f"bitsandbytes {version} needs torch{release.torch}, and this channel's torch is {torch_version}",
                    fix=f"use a release that accepts it: --bitsandbytes build={default_release(torch_version, releases).version}",
                )
            return release
    known = ", ".join(release.version for release in releases)
    raise BadInput(f"--bitsandbytes build={version}: not a known release ({known})",
                   fix=f"pick one of {known}, or build a local checkout: --bitsandbytes build=/path/to/bitsandbytes")


def release_source(release: Release, repository: str) -> BuildSource:
    """A release tag as a source. The tag's commit is checked when the source is fetched."""
    return BuildSource(repository, release.version, release.commit)


def local_source(path: Path) -> BuildSource:
    """A checkout given by path (a board without internet): identified by its source files."""
    if not (path / "CMakeLists.txt").is_file() or not (path / "bitsandbytes").is_dir():
        raise BadInput(f"{path} is not a bitsandbytes checkout (no CMakeLists.txt and bitsandbytes/ there)",
                       fix="git clone https://github.com/bitsandbytes-foundation/bitsandbytes, "
                           "then pass that folder: --bitsandbytes build=/path/to/bitsandbytes")
    return BuildSource(str(path.resolve()), None, "sha256:" + folder_digest(path, _BUILT_HERE))


def parse_choice(text: str) -> Optional[str]:
    """`--bitsandbytes build` -> None (the default release); `build=X` -> X (a version or a path)."""
    kind, _, value = text.partition("=")
    if kind != "build" or (_ and not value):
        raise BadInput(f"--bitsandbytes {text!r}: expected build, build=VERSION or build=PATH",
                       fix="--bitsandbytes build (the newest release this torch accepts), e.g. --bitsandbytes build=0.49.2")
    return value or None


def plan_build(value: Optional[str], torch_version: Optional[str], capability: Optional[str]) -> PlannedBuild:
    """The build `--bitsandbytes build[=value]` asks for, for a device of `capability` ("8.7")."""
    if not capability:
        raise BadInput("building bitsandbytes needs the device's compute capability, and this root does not show it "
                       "(no proc/device-tree/compatible)",
                       fix="run it on the Jetson itself, whose device tree names its GPU")
    digits = capability.replace(".", "")
    releases, repository = load_releases()
    if value is not None and (os.sep in value or value.startswith(".") or Path(value).is_dir()):
        path = Path(value).expanduser()
        source = local_source(path)
        return PlannedBuild(_checkout_version(path), source, digits)
    if value is None:
        # A torch still given as a range (before the index is read) takes the newest release.
        release = default_release(torch_version, releases) if torch_version else releases[0]
    else:
        release = find_release(value, releases, torch_version)
    return PlannedBuild(release.version, release_source(release, repository), digits)


def _checkout_version(path: Path) -> str:
    match = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""",
                      (path / "bitsandbytes" / "__init__.py").read_text(errors="replace"), re.M)
    if not match:
        raise BadInput(f"{path}/bitsandbytes/__init__.py does not say its __version__",
                       fix="pass a bitsandbytes checkout at a release tag: git checkout 0.49.2")
    return match.group(1)


# --------------------------------------------------------------------------- tools and jobs


#: JetPack's own CUDA toolkit; the build uses it, not a toolkit from a Python package.
CUDA_HOME = Path("/usr/local/cuda")


def find_toolchain(cuda_home: Path, cuda_version: Optional[str]) -> Toolchain:
    """The build tools, all named at once with their apt packages when any is missing, before
    anything starts."""
    missing = []
    cmake, make = shutil.which("cmake"), shutil.which("make")
    compiler = shutil.which("c++") or shutil.which("g++")
    if not cmake:
        missing.append(("cmake", "cmake"))
    if not make or not compiler:
        missing.append(("a C++ compiler and make", "build-essential"))
    nvcc_path = cuda_home / "bin" / "nvcc"
    nvcc = str(nvcc_path) if os.access(nvcc_path, os.X_OK) else None
    if nvcc is None:
        # JetPack's CUDA compiler is the cuda-nvcc-X-Y package of its toolkit
        # (https://docs.nvidia.com/cuda/cuda-installation-guide-linux/#meta-packages).
        package = f"cuda-nvcc-{cuda_version.replace('.', '-')}" if cuda_version else "cuda-nvcc-<major>-<minor>"
        missing.append((f"nvcc ({nvcc_path})", package))
    if missing:
        names = ", ".join(name for name, _ in missing)
        packages = " ".join(package for _, package in missing)
        raise BadInput(f"building bitsandbytes needs {names}, which this machine lacks",
                       fix=f"sudo apt-get install {packages}")
    assert cmake and make and compiler and nvcc
    return Toolchain(cmake, compiler, make, nvcc, _nvcc_version(nvcc))


def _nvcc_version(nvcc: str) -> str:
    completed = runner.run([nvcc, "--version"], timeout=60)
    match = re.search(r"release (\d+\.\d+)", completed.stdout)
    if not completed.ok or not match:
        raise BadInput(f"{nvcc} --version did not say its release: {completed.last_stderr_line() or completed.stdout[-200:]}",
                       fix="reinstall JetPack's CUDA toolkit: sudo apt-get install nvidia-jetpack")
    return match.group(1)


def build_jobs(cpus: int, memory_bytes: int) -> int:
    """Parallel compiler jobs: one per core, but no more than memory allows."""
    return max(1, min(cpus, memory_bytes // MEMORY_PER_JOB))


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemAvailable in bytes; procfs is read with one small read."""
    try:
        with open(meminfo, "rb") as handle:
            text = handle.read(16384).decode("ascii", "replace")
    except OSError:
        return MEMORY_PER_JOB
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) * 1024 if match else MEMORY_PER_JOB


# --------------------------------------------------------------------------- the build


def build_wheel(request: BuildRequest, cache: Path, progress: Progress, default_index: Optional[str] = None,
                build_isolation: bool = True, watch: Optional["StepProgress"] = None) -> BuiltWheel:
    """The wheel for `request`: from the cache when an earlier build made it, else built now.

    Raises StepFailed (naming the failed stage and its last output line) when the build fails;
    nothing is left in the cache then, nor after an interrupt.
    """
    final = cache / request.key()
    reused = _cached(final)
    if reused is not None:
        progress(f"      bitsandbytes for sm_{request.capability} from the build cache ({reused.path.name})")
        return reused
    cache.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(cache)
    shutil.rmtree(final, ignore_errors=True)  # a damaged entry is rebuilt, never installed
    work = Path(tempfile.mkdtemp(prefix=f".building-{os.getpid()}-", dir=cache))
    try:
        source = work / "source"
        started = time.monotonic()
        _fetch(request.source, source)
        _stage(request, "configure", [request.toolchain.cmake, "-S", str(source), "-B", str(source / "build"),
                                      *request.cmake_options], progress, started, watch)
        _stage(request, "compile", [request.toolchain.cmake, "--build", str(source / "build"),
                                    "--parallel", str(request.jobs)], progress, started, watch)
        out = work / "wheel"
        # CMake built the library into the source tree already; the packaging step must not
        # build it again (bitsandbytes' setup.py skips CMake under BNB_SKIP_CMAKE).
        packaged = uv.build_wheel(request.python, str(source), str(out), default_index, build_isolation,
                                  env={"BNB_SKIP_CMAKE": "1"}, watch=watch)
        if not packaged.ok:
            raise StepFailed("bitsandbytes", f"packaging the bitsandbytes wheel failed: {uv.summarize_failure(packaged)}",
                             _build_fix(request, build_isolation))
        wheel = _the_wheel(out, request)
        record = _record(request, wheel, time.monotonic() - started)
        (out / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
        try:
            os.rename(out, final)
        except OSError:
            if _cached(final) is None:  # not a concurrent build that finished first
                raise
        progress(f"      built {wheel.name} for sm_{request.capability} in {record['seconds']:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    built = _cached(final)
    assert built is not None
    return BuiltWheel(built.path, built.sha256, False, built.record)


def _cached(folder: Path) -> Optional[BuiltWheel]:
    try:
        record = json.loads((folder / RECORD_FILE).read_text())
        wheel = folder / record["wheel"]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if digest != record.get("sha256"):
        return None
    return BuiltWheel(wheel, digest, True, record)


def _remove_abandoned(cache: Path) -> None:
    """Work folders of builds whose process is gone (killed, or the machine rebooted)."""
    for folder in cache.glob(".building-*"):
        try:
            pid = int(folder.name.split("-")[1])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError):
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            pass  # another user's live build


def _fetch(source: BuildSource, dest: Path) -> None:
    if source.is_local:
        shutil.copytree(source.location, dest, ignore=shutil.ignore_patterns(*BUILD_OUTPUTS, *_BUILT_HERE), symlinks=True)
        return
    clone = git.clone(source.location, dest, timeout=1800, branch=str(source.version), shallow=True)
    if not clone.ok:
        raise StepFailed("bitsandbytes", f"cannot fetch bitsandbytes {source.version} from {source.location}: "
                                         f"{clone.last_stderr_line()}",
                         "on a board without internet, clone it elsewhere and pass the folder: "
                         "--bitsandbytes build=/path/to/bitsandbytes")
    head = git.head_commit(dest) or "no commit"
    if head != source.identity:
        raise StepFailed("bitsandbytes", f"the tag {source.version} of {source.location} points to {head[:12]}, "
                                         f"not to the release commit {source.identity[:12]}",
                         "a moved release tag is not built; report it, or build a checked checkout by path: "
                         "--bitsandbytes build=/path/to/bitsandbytes")


def _stage(request: BuildRequest, stage: str, argv: Sequence[str], progress: Progress, started: float,
           watch: Optional["StepProgress"]) -> None:
    what = f"bitsandbytes {stage} (sm_{request.capability}, {request.jobs} job(s))"
    progress(f"      {what}; {time.monotonic() - started:.0f} s elapsed")
    if watch is not None:
        watch.phase = what  # the step's live line shows it with the elapsed time
    completed = runner.run(argv, timeout=4 * 3600, on_tick=watch.tick if watch is not None else None)
    if not completed.ok:
        output = [line for line in (completed.stdout + "\n" + completed.stderr).splitlines() if line.strip()]
        cause = next((line.strip() for line in output if "error" in line.lower()), output[-1] if output else "")
        raise StepFailed("bitsandbytes", f"bitsandbytes {stage} failed: {cause}", _build_fix(request, True))


def _build_fix(request: BuildRequest, build_isolation: bool) -> str:
    if not build_isolation:
        return ("install bitsandbytes' build requirements into the environment first "
                "(scikit-build-core, setuptools>=77), or build with isolation from an index")
    return (f"check the build log above; fewer jobs need less memory (this run used {request.jobs}); "
            "or install without bitsandbytes")


def _the_wheel(out: Path, request: BuildRequest) -> Path:
    wheels = sorted(out.glob("bitsandbytes-*.whl"))
    if len(wheels) != 1:
        raise StepFailed("bitsandbytes", f"packaging made {len(wheels)} bitsandbytes wheels in {out}, not one",
                         "report this as a jetson-install bug")
    with zipfile.ZipFile(wheels[0]) as archive:
        libraries = [name for name in archive.namelist() if re.search(r"libbitsandbytes_cuda\d+\.so$", name)]
    if not libraries:
        raise StepFailed("bitsandbytes", f"{wheels[0].name} has no CUDA library (libbitsandbytes_cuda*.so)",
                         _build_fix(request, True))
    return wheels[0]


def _record(request: BuildRequest, wheel: Path, seconds: float) -> Dict[str, Any]:
    return {
        "built": True,
        "wheel": wheel.name,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "source": request.source.to_json(),
        "capability": request.capability,
        "cuda": request.toolchain.cuda,
        "python_tag": request.python_tag,
        "cmake_options": [o for o in request.cmake_options if "CMAKE_CUDA_COMPILER" not in o],
        "seconds": round(seconds, 1),
    }
