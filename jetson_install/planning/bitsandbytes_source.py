"""Plan a build of bitsandbytes from source for one device's exact compute capability.

bitsandbytes' own aarch64 wheels carry sm_75/80/90 (and sm_110 with CUDA 13) but never sm_87,
and on JetPack 6 they fail with "named symbol not found"; its installation guide documents an
on-device source build for Jetson instead:
https://github.com/bitsandbytes-foundation/bitsandbytes/blob/main/docs/source/installation.mdx
(`cmake -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY=87 -S . && make -j4 && pip install .`).

Pure: which release (or checkout) to build, for which capability, and the exact commands the
build runs (the plan's bitsandbytes step shows them); build.py runs them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from shlex import quote
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from packaging.version import Version

from jetson_install.base.errors import BadInput
from jetson_install.base.steps import Step
from jetson_install.base.toml_file import TomlData
from jetson_install.base.versions import satisfies
from jetson_install.envs.source_tree import LinkOutside, checkout_digest
from jetson_install.tools import git, uv

__all__ = [
    "Release",
    "BuildSource",
    "PlannedBuild",
    "parse_choice",
    "plan_build",
    "load_releases",
    "default_release",
    "find_release",
    "release_source",
    "local_source",
    "build_jobs",
    "build_commands",
    "build_step",
    "cmake_options",
    "install_argv",
    "CUDA_HOME",
    "BUILT_HERE",
]

RELEASES_FILE = Path(__file__).with_name("bitsandbytes-releases.toml")
RELEASES_SCHEMA = Path(__file__).with_name("bitsandbytes-releases.schema.json")
# About 2 GB of memory per compiler job: `make -j6` runs out of memory on the 8 GB Orin Nano,
# `-j4` is the documented maximum there (bitsandbytes-foundation/bitsandbytes#1218).
MEMORY_PER_JOB = 2 * 2**30
# Beyond any project's build outputs, a local checkout may hold CMake's and a library built
# earlier by hand, which must not slip into a wheel built for another capability.
BUILT_HERE = ("libbitsandbytes*", "CMakeCache.txt", "CMakeFiles")
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


# --------------------------------------------------------------------------- releases


def load_releases(path: Path = RELEASES_FILE) -> Tuple[Tuple[Release, ...], str]:
    """The buildable releases, newest first, and the repository they are tags of; a mistake
    in the file (a key, a commit, the order) is one CatalogError naming its line."""
    file = TomlData(path, "jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 --bitsandbytes build",
                    RELEASES_SCHEMA)
    releases: List[Release] = []
    for number, entry in enumerate(file.data["releases"]):
        if releases and Version(entry["version"]) >= Version(releases[-1].version):
            raise file.refuse(("releases", number, "version"),
                              f"comes after {releases[-1].version}: releases are listed newest first")
        releases.append(Release(entry["version"], entry["commit"], entry["torch"]))
    return tuple(releases), file.data["repository"]


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
    try:
        identity = checkout_digest(path, BUILT_HERE)
    except LinkOutside as link:
        inside = path / link.relative
        raise BadInput(f"{path}/{link.relative} is a link to {link.target}, outside the checkout: "
                       "a build uses only the checkout's own files",
                       fix=f"put what it points at in its place: rm {quote(str(inside))} && "
                           f"cp -a {quote(os.path.realpath(inside))} {quote(str(inside))}") from None
    return BuildSource(str(path.resolve()), None, "sha256:" + identity)


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


#: How the build step's commands name its private work folder and the wheel it makes.
WORK = "<build>"
WHEEL = "<wheel>"


def build_commands(source: BuildSource, capability: str, cmake: str, nvcc: str, jobs: int, python: str,
                   default_index: Optional[str], work: str, build_isolation: bool = True) -> List[Tuple[str, ...]]:
    """Every command a build runs, in order, for a private work folder `work`: fetching a
    release (a local checkout is copied instead), CMake's configure and compile, and uv
    packaging the wheel (with BNB_SKIP_CMAKE=1, so it does not build the library again)."""
    tree = f"{work}/source"
    commands: List[Tuple[str, ...]] = []
    if not source.is_local:
        commands.append(tuple(git.clone_argv(source.location, tree, str(source.version), shallow=True)))
    commands += [
        (cmake, "-S", tree, "-B", f"{tree}/build", *cmake_options(capability, nvcc)),
        (cmake, "--build", f"{tree}/build", "--parallel", str(jobs)),
        tuple(uv.build_wheel_argv(python, tree, f"{work}/wheel", default_index, build_isolation)),
    ]
    return commands


def cmake_options(capability: str, nvcc: str) -> Tuple[str, ...]:
    return ("-DCOMPUTE_BACKEND=cuda", f"-DCOMPUTE_CAPABILITY={capability}", f"-DCMAKE_CUDA_COMPILER={nvcc}",
            "-DCMAKE_BUILD_TYPE=Release")


def install_argv(python: str, wheel: str) -> Tuple[str, ...]:
    return tuple(uv.wheel_install_argv(python, wheel))


def build_step(planned: PlannedBuild, python: str, default_index: Optional[str]) -> Step:
    """The plan's step: the commands a build runs (skipped when the build cache has the wheel),
    then the install of the wheel, without dependencies."""
    origin = f"release {planned.version}" if not planned.source.is_local else f"the checkout {planned.source.location}"
    jobs = build_jobs(os.cpu_count() or 1, available_memory())
    commands = build_commands(planned.source, planned.capability, "cmake", str(CUDA_HOME / "bin" / "nvcc"), jobs,
                              python, default_index, WORK)
    return Step("bitsandbytes", "source-build",
                f"build bitsandbytes from {origin} for sm_{planned.capability} with {CUDA_HOME}/bin/nvcc into a "
                f"wheel in {WORK} (or take it from the build cache), and install it without dependencies",
                (*commands, install_argv(python, WHEEL)))


