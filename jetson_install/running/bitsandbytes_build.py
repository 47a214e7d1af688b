"""Building bitsandbytes on this machine, as the plan's bitsandbytes step shows it
(bitsandbytes.py plans it): the toolchain, the build into the per-user cache, and the step.

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
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence, Tuple


from jetson_install.base.errors import BadInput, StepFailed
from jetson_install.base.layout import BUILD_CACHE_DIR
from jetson_install.base.steps import Step
from jetson_install.base.user_dirs import cache_dir
from jetson_install.base.work_folders import make_work_folder
from jetson_install.envs.interpreters import inspect_interpreter
from jetson_install.envs.manifest import WheelRefused, read_wheel, write_manifest
from jetson_install.envs.record import record_built
from jetson_install.envs.source_tree import BUILD_OUTPUTS
from jetson_install.planning.bitsandbytes_source import (
    BUILT_HERE,
    CUDA_HOME,
    BuildSource,
    PlannedBuild,
    build_commands,
    cmake_options,
    install_argv,
)
from jetson_install.tools import git, runner, uv

if TYPE_CHECKING:
    from jetson_install.planning.plan import Execution
    from jetson_install.tools.progress import StepProgress

__all__ = ["Toolchain", "BuildRequest", "BuiltWheel", "find_toolchain", "run_build_step", "build_wheel"]

RECORD_FILE = "build.json"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Toolchain:
    """The tools the build commands name; make and a C++ compiler only need to be there (cmake finds them)."""

    cmake: str
    nvcc: str
    cuda: str  # the toolkit's major.minor, as nvcc reports it


@dataclass(frozen=True)
class BuildRequest:
    source: BuildSource
    capability: str  # "87": what COMPUTE_CAPABILITY wants
    toolchain: Toolchain
    python: str  # the interpreter the wheel is for
    python_tag: str  # "cp310": the interpreter's own
    jobs: int

    @property
    def cmake_options(self) -> Tuple[str, ...]:
        return cmake_options(self.capability, self.toolchain.nvcc)

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
    return Toolchain(cmake, nvcc, _nvcc_version(nvcc))


def _nvcc_version(nvcc: str) -> str:
    completed = runner.run([nvcc, "--version"], timeout=60)
    match = re.search(r"release (\d+\.\d+)", completed.stdout)
    if not completed.ok or not match:
        raise BadInput(f"{nvcc} --version did not say its release: {completed.last_stderr_line() or completed.stdout[-200:]}",
                       fix="reinstall JetPack's CUDA toolkit: sudo apt-get install nvidia-jetpack")
    return match.group(1)


def run_build_step(planned: PlannedBuild, step: Step, run: "Execution") -> str:
    """Build bitsandbytes for the device (or take the cached wheel), install it without
    dependencies, and record it as the environment's vendor build."""
    plan = run.plan
    toolchain = find_toolchain(CUDA_HOME, plan.platform.cuda)
    compile_ = next(command for command in step.commands if "--parallel" in command)
    jobs = int(compile_[compile_.index("--parallel") + 1])  # as the plan showed it
    # The tag of the interpreter the wheel is built by, asked of it: another Python than the
    # channel's (--python) makes another wheel.
    request = BuildRequest(planned.source, planned.capability, toolchain, run.python,
                           inspect_interpreter(run.python).abi_tag, jobs)
    cache = cache_dir().value / BUILD_CACHE_DIR / "bitsandbytes"
    built = build_wheel(request, cache, run.progress, plan.settings.default_index.value, watch=run.current)
    # Its files' expected hashes from the wheel built here (its sha256 as the build recorded it), never the environment.
    try:
        files = read_wheel(built.path, str(built.record["sha256"]), "the build record")
    except WheelRefused as refused:
        raise StepFailed("bitsandbytes", f"step 'bitsandbytes' failed: {refused.message}",
                         f"remove {built.path.parent} to build it again, then run: {run.rerun}") from None
    run.run(install_argv(run.python, str(built.path)),
            f"the wheel {built.path} did not install; remove it to build it again, then run: {run.rerun}")
    write_manifest(run.staging, [files])
    record_built(run.staging, "bitsandbytes", built.record)
    how = "from the build cache" if built.reused else f"built in {built.record['seconds']:.0f} s"
    return f"bitsandbytes {planned.version} for sm_{planned.capability}, {how} ({built.path.name})"


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
    shutil.rmtree(final, ignore_errors=True)  # a damaged entry is rebuilt, never installed
    # Held by this process while it lives: the next build removes it where a kill (or a reboot)
    # left it, and none removes it before.
    work_folder = make_work_folder(".building-", cache)
    work = work_folder.path
    try:
        source = work / "source"
        started = time.monotonic()
        commands = build_commands(request.source, request.capability, request.toolchain.cmake,
                                  request.toolchain.nvcc, request.jobs, request.python, default_index, str(work),
                                  build_isolation)
        if request.source.is_local:
            _copy_checkout(request.source, source)
        else:
            commands.pop(0)  # the clone: git.py runs it, its credentials kept off the command line
            _fetch(request.source, source)
        configure, compile_, package = commands
        _stage(request, "configure", configure, progress, started, watch)
        _stage(request, "compile", compile_, progress, started, watch)
        out = work / "wheel"
        # CMake built the library into the source tree already; the packaging step must not
        # build it again (bitsandbytes' setup.py skips CMake under BNB_SKIP_CMAKE).
        packaged = runner.run_uv(package, indexes=[default_index] if default_index else [],
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
        work_folder.close()
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


def _copy_checkout(source: BuildSource, dest: Path) -> None:
    shutil.copytree(source.location, dest, ignore=shutil.ignore_patterns(*BUILD_OUTPUTS, *BUILT_HERE), symlinks=True)


def _fetch(source: BuildSource, dest: Path) -> None:
    clone = git.clone(source.location, dest, timeout=1800, branch=str(source.version), shallow=True)
    if not clone.ok:
        raise StepFailed("bitsandbytes", f"cannot fetch bitsandbytes {source.version} from {source.location}: "
                                         f"{git.failure(clone)}",
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
