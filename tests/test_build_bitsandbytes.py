"""Building bitsandbytes from source for the device's exact capability (jetson_install/planning/bitsandbytes_source.py, jetson_install/running/bitsandbytes_build.py).

The lane tests run the real pipeline (cmake, the C++ compiler, nvcc for sm_87, uv packaging the
wheel) on a stand-in source tree with bitsandbytes' build interface, since these machines cannot
clone the real repository.
"""

from __future__ import annotations

from typing import Any, List, NoReturn, Sequence
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import present
from support.index_server import LoopbackIndex
from support.lanes import lane_unavailable
from support.manifests import assert_measured_from
from support.planned import assert_ran_as_planned
from support.wheels import sha256_file

from jetson_install.tools import runner
from jetson_install.planning import bitsandbytes_source as build
from jetson_install.running import bitsandbytes_build as building
from jetson_install.base.errors import BadInput, StepFailed

STANDIN = Path(__file__).parent / "resources" / "bitsandbytes-standin"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
# The one file the builds keep in the cache: the lock that tells a build folder being made from a killed one's.
_BUILDS_LOCK = f".building-uid{os.geteuid()}.lock"
JP60_TORCH = "2.4.0a0+3bcc3cddb5.nv24.07.16234504"  # JetPack 6.0's NVIDIA torch


def test_default_release_is_the_newest_whose_torch_floor_the_channel_meets() -> None:
    releases, _ = build.load_releases()
    # 0.50 needs torch>=2.4, which 2.4.0a0 is not under PEP 440: JetPack 6.0 gets 0.49.
    assert build.default_release(JP60_TORCH, releases).version == "0.49.2"
    assert build.default_release("2.8.0", releases).version == releases[0].version == "0.50.1"
    with pytest.raises(BadInput, match=r"no buildable bitsandbytes release accepts torch 2.2.0"):
        build.default_release("2.2.0", releases)


def test_an_explicit_release_must_exist_and_accept_the_channels_torch() -> None:
    releases, _ = build.load_releases()
    assert build.find_release("0.49.0", releases, JP60_TORCH).commit.startswith("26f0c7a9")
    with pytest.raises(BadInput, match=r"0\.49\.3: not a known release") as unknown:
        build.find_release("0.49.3", releases, "2.8.0")
    assert "0.50.1" in present(unknown.value.fix)
    with pytest.raises(BadInput, match=r"bitsandbytes 0\.50\.1 needs torch>=2\.4,<3") as too_new:
        build.find_release("0.50.1", releases, JP60_TORCH)
    assert present(too_new.value.fix).endswith("--bitsandbytes build=0.49.2")


def test_jobs_are_bounded_by_memory_as_well_as_cores() -> None:
    gib = 2**30
    assert build.build_jobs(6, 8 * gib) == 4  # the 8 GB Orin Nano: -j6 runs out of memory, -j4 works
    assert build.build_jobs(2, 24 * gib) == 2
    assert build.build_jobs(12, 1 * gib) == 1


def test_available_memory_is_read_from_this_machines_procfs(tmp_path: Path) -> None:
    procfs = Path("/proc/meminfo").read_text()
    line = re.search(r"^MemAvailable:\s+(\d+) kB", procfs, re.M)
    assert line, procfs
    available = int(line.group(1)) * 1024
    # This machine's own file, read back exactly; procfs itself moves between two reads.
    (tmp_path / "meminfo").write_text(procfs)
    assert build.available_memory(tmp_path / "meminfo") == available
    assert abs(build.available_memory() - available) < available / 4
    # Where it cannot be read, or has no MemAvailable (kernels before 3.14): one job's worth.
    (tmp_path / "old-meminfo").write_text(re.sub(r"^MemAvailable:.*\n", "", procfs, flags=re.M))
    assert build.available_memory(tmp_path / "old-meminfo") == build.MEMORY_PER_JOB
    assert build.available_memory(tmp_path / "missing") == build.MEMORY_PER_JOB


def test_missing_tools_are_named_with_their_apt_packages_before_anything_starts(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BadInput) as missing:
        building.find_toolchain(tmp_path / "cuda-12.6", "12.6")
    assert "cmake, a C++ compiler and make, nvcc" in str(missing.value)
    assert missing.value.fix == "sudo apt-get install cmake build-essential cuda-nvcc-12-6"


def test_a_folder_that_is_not_a_bitsandbytes_checkout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="is not a bitsandbytes checkout"):
        build.local_source(tmp_path)


def test_a_checkouts_identity_ignores_build_outputs(tmp_path: Path) -> None:
    checkout = tmp_path / "bnb"
    shutil.copytree(STANDIN, checkout)
    before = build.local_source(checkout).identity
    (checkout / "build").mkdir()
    (checkout / "build" / "CMakeCache.txt").write_text("x")
    (checkout / "bitsandbytes" / "libbitsandbytes_cuda126.so").write_bytes(b"\x7fELF")
    assert build.local_source(checkout).identity == before
    (checkout / "csrc" / "ops.cu").write_text("// changed\n")
    assert build.local_source(checkout).identity != before


def test_a_checkouts_identity_follows_its_links_to_their_content(tmp_path: Path) -> None:
    checkout = tmp_path / "bnb"
    shutil.copytree(STANDIN, checkout)
    (checkout / "kernels").mkdir()
    (checkout / "kernels" / "a.cu").write_text("// kernel A\n")
    (checkout / "kernels" / "copy-of-a.cu").write_text("// kernel A\n")
    (checkout / "csrc" / "kernel.cu").symlink_to("../kernels/a.cu")
    (checkout / "csrc" / "loop").symlink_to("..")  # a link to a folder it is in is counted once
    before = build.local_source(checkout).identity
    # Another link text to the same content is the same source; other content behind it is not.
    (checkout / "csrc" / "kernel.cu").unlink()
    (checkout / "csrc" / "kernel.cu").symlink_to(checkout / "kernels" / "copy-of-a.cu")
    assert build.local_source(checkout).identity == before
    (checkout / "kernels" / "copy-of-a.cu").write_text("// kernel B\n")
    assert build.local_source(checkout).identity != before


def test_a_link_out_of_the_checkout_is_refused_with_the_command_that_fixes_it(tmp_path: Path) -> None:
    checkout = tmp_path / "bnb"
    shutil.copytree(STANDIN, checkout)
    (tmp_path / "elsewhere.cu").write_text("// not in the checkout\n")
    (checkout / "csrc" / "extra.cu").symlink_to(tmp_path / "elsewhere.cu")
    with pytest.raises(BadInput) as refused:
        build.local_source(checkout)
    assert str(refused.value) == (f"{checkout}/csrc/extra.cu is a link to {tmp_path}/elsewhere.cu, outside the checkout: "
                                  "a build uses only the checkout's own files")
    subprocess.run(present(refused.value.fix).split(": ", 1)[1], shell=True, check=True)
    assert build.local_source(checkout).identity.startswith("sha256:")
    assert (checkout / "csrc" / "extra.cu").read_text() == "// not in the checkout\n"
    assert not (checkout / "csrc" / "extra.cu").is_symlink()


def test_the_cache_key_takes_the_tag_of_the_interpreter_that_builds(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "bnb"
    shutil.copytree(STANDIN, checkout)
    planned = build.PlannedBuild("0.49.2", build.local_source(checkout), "87")
    asked: List[building.BuildRequest] = []

    def no_build(request: building.BuildRequest, *args: object, **kwargs: object) -> NoReturn:
        asked.append(request)
        raise StepFailed("bitsandbytes", "stopped before building", "")

    monkeypatch.setattr(building, "find_toolchain", lambda *args: building.Toolchain("cmake", "nvcc", "12.6"))
    monkeypatch.setattr(building, "build_wheel", no_build)
    channel_python = "3.10" if sys.version_info[:2] != (3, 10) else "3.12"
    plan = SimpleNamespace(platform=SimpleNamespace(cuda="12.6"), python_abi=channel_python,
                           settings=SimpleNamespace(default_index=SimpleNamespace(value=None)))
    run = SimpleNamespace(plan=plan, python=sys.executable, progress=lambda line: None, current=None)
    with pytest.raises(StepFailed):
        building.run_build_step(planned, build.build_step(planned, sys.executable, None), run)
    assert asked[0].python_tag == f"cp{sys.version_info[0]}{sys.version_info[1]}"  # not the channel's


# --------------------------------------------------------------------------- the real pipeline (lane)


def _toolchain() -> building.Toolchain:
    if not shutil.which("cmake") or not shutil.which("c++"):
        lane_unavailable("source-build", "cmake or a C++ compiler is missing (tests/setup.d/40-build-tools installs them)")
    if not os.access(CUDA_HOME / "bin" / "nvcc", os.X_OK):
        lane_unavailable("source-build", f"no nvcc at {CUDA_HOME}/bin/nvcc (set CUDA_HOME to a CUDA toolkit)")
    return building.find_toolchain(CUDA_HOME, None)


def _request(source: build.BuildSource, capability: str = "87") -> building.BuildRequest:
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    return building.BuildRequest(source, capability, _toolchain(), sys.executable, tag, jobs=2)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    path = tmp_path / "bitsandbytes"
    shutil.copytree(STANDIN, path)
    return path


@pytest.mark.lane
def test_builds_a_wheel_for_sm87_with_nvcc_then_reuses_it(checkout: Path, tmp_path: Path) -> None:
    request = _request(build.local_source(checkout))
    cache = tmp_path / "cache"
    said: List[str] = []
    built = building.build_wheel(request, cache, said.append)
    assert not built.reused
    with zipfile.ZipFile(built.path) as wheel:
        libraries = [n for n in wheel.namelist() if n.startswith("bitsandbytes/libbitsandbytes_cuda")]
    assert libraries == [f"bitsandbytes/libbitsandbytes_cuda{request.toolchain.cuda.replace('.', '')}.so"]
    assert built.record["capability"] == "87" and built.record["built"] is True
    assert built.record["source"]["identity"] == request.source.identity
    assert "-DCOMPUTE_CAPABILITY=87" in built.record["cmake_options"]
    assert any("compile (sm_87, 2 job(s))" in line for line in said)
    # The build ran in a private copy: the user's checkout holds no build output.
    assert not (checkout / "build").exists() and not list(checkout.rglob("libbitsandbytes*"))
    again: List[str] = []
    reused = building.build_wheel(request, cache, again.append)
    assert reused.reused and reused.path == built.path and reused.sha256 == built.sha256
    assert again == [f"      bitsandbytes for sm_87 from the build cache ({built.path.name})"]
    assert json.loads((built.path.parent / building.RECORD_FILE).read_text())["sha256"] == built.sha256


@pytest.mark.lane
def test_another_capability_or_a_changed_source_is_a_cache_miss(checkout: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = building.build_wheel(_request(build.local_source(checkout)), cache, lambda line: None)
    for_xavier = _request(build.local_source(checkout), capability="72")
    assert for_xavier.key() != _request(build.local_source(checkout)).key()
    (checkout / "csrc" / "pythonInterface.cpp").write_text('extern "C" int cget_version() { return 4903; }\n')
    changed = _request(build.local_source(checkout))
    rebuilt = building.build_wheel(changed, cache, lambda line: None)
    assert not rebuilt.reused and rebuilt.path.parent != first.path.parent


@pytest.mark.lane
def test_an_interrupted_build_leaves_no_half_wheel(checkout: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(build.local_source(checkout))
    cache = tmp_path / "cache"
    real_run = runner.run

    def interrupted_compile(argv: Sequence[str], **kwargs: Any) -> runner.Completed:
        if "--build" in argv:
            raise KeyboardInterrupt
        return real_run(argv, **kwargs)

    monkeypatch.setattr(runner, "run", interrupted_compile)
    with pytest.raises(KeyboardInterrupt):
        building.build_wheel(request, cache, lambda line: None)
    assert [p.name for p in cache.iterdir()] == [_BUILDS_LOCK]
    monkeypatch.setattr(runner, "run", real_run)
    assert not building.build_wheel(request, cache, lambda line: None).reused


@pytest.mark.lane
def test_a_killed_builds_work_folder_and_a_damaged_entry_do_not_survive(checkout: Path, tmp_path: Path) -> None:
    request = _request(build.local_source(checkout))
    cache = tmp_path / "cache"
    abandoned = cache / ".building-999999999-abcdefgh"  # a build killed with -9: nothing holds it
    (abandoned / "wheel").mkdir(parents=True)
    built = building.build_wheel(request, cache, lambda line: None)
    assert not abandoned.exists()
    built.path.write_bytes(b"damaged")
    rebuilt = building.build_wheel(request, tmp_path / "cache", lambda line: None)
    assert not rebuilt.reused and zipfile.is_zipfile(rebuilt.path)


@pytest.mark.lane
def test_a_compile_error_names_its_cause_and_caches_nothing(checkout: Path, tmp_path: Path) -> None:
    (checkout / "csrc" / "ops.cu").write_text("this is not CUDA\n")
    cache = tmp_path / "cache"
    with pytest.raises(StepFailed, match=r"bitsandbytes compile failed: .*error"):
        building.build_wheel(_request(build.local_source(checkout)), cache, lambda line: None)
    assert [p.name for p in cache.iterdir()] == [_BUILDS_LOCK]


# --------------------------------------------------------------------------- through `jetson-install obliteratus`

from support.cli import run_cli  # noqa: E402
from support.installer import Installer  # noqa: E402


def test_the_plan_proposes_a_build_where_the_channel_has_no_jetson_bitsandbytes() -> None:
    # JetPack 6.0 (CUDA 12.2): no Jetson bitsandbytes build exists, and its torch 2.4.0a0 takes 0.49.
    args = ["plan", "obliteratus", "--root", "sample:orin-nano-jp6.1", "--l4t", "36.3.0", "--json"]
    data = json.loads(run_cli(*args).stdout)
    assert data["channel"] == "jp6.0" and "bitsandbytes" not in data["pins"]
    assert any("--bitsandbytes build builds it on this board for sm_87" in w for w in data["warnings"])
    built = json.loads(run_cli(*args, "--bitsandbytes", "build").stdout)
    assert built["bitsandbytes_build"]["version"] == "0.49.2"
    assert built["bitsandbytes_build"]["source"]["identity"] == "f0e6ca31b32c4744a9cee4e31610b25796cbf778"
    assert "bitsandbytes==0.49.2" in built["constraints"]
    assert "bitsandbytes" in [step["id"] for step in built["steps"]]
    assert built["requirement"].startswith("obliteratus[quantization] @ ")


def test_a_dry_run_names_missing_build_tools_before_anything_starts(installer: Installer,
                                                                    tmp_path: Path) -> None:
    env = dict(installer.env, PATH=str(tmp_path / "empty-path"))
    result = run_cli(*installer.args(), "--bitsandbytes", f"build={STANDIN}", "--dry-run", env=env)
    if result.returncode == 0:
        pytest.skip("this machine's /usr/local/cuda has nvcc, and cmake and make were found elsewhere")
    error = json.loads(result.stdout)["error"]
    assert result.returncode == 2
    assert "building bitsandbytes needs cmake, a C++ compiler and make" in error["message"]
    assert error["fix"].startswith("sudo apt-get install cmake build-essential")
    assert not installer.venv.exists()


@pytest.mark.lane
def test_the_install_builds_bitsandbytes_records_it_and_a_second_environment_reuses_it(
        installer: Installer, checkout: Path, tmp_path: Path, vendor_index: LoopbackIndex) -> None:
    import subprocess

    _toolchain()
    build = ["--bitsandbytes", f"build={checkout}"]
    result = subprocess.run(installer.argv() + build, capture_output=True, text=True, env=installer.env, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert_ran_as_planned(data)  # cmake and uv as the plan's bitsandbytes step shows them
    assert "bitsandbytes" in [step["id"] for step in data["steps"]]
    assert "bitsandbytes" not in vendor_index.requested_projects()  # built, never downloaded
    library = installer.python("import bitsandbytes, pathlib; print(sorted(p.name for p in "
                               "pathlib.Path(bitsandbytes.__file__).parent.glob('libbitsandbytes*')))")
    assert "libbitsandbytes_cuda" in library
    record = json.loads((installer.venv / "jetson-install" / "vendor.json").read_text())
    assert record["built"]["bitsandbytes"]["capability"] == "87"  # the sample root's AGX Orin
    assert record["installed"]["bitsandbytes"]["version"] == "0.49.2"
    # Its files' expected hashes come from the wheel built here, as the build recorded it.
    built = Path(installer.env["XDG_CACHE_HOME"]) / "jetson-install" / "builds" / "bitsandbytes"
    [wheel] = [path for path in built.rglob("bitsandbytes-*.whl")
               if sha256_file(path) == record["built"]["bitsandbytes"]["sha256"]]
    assert_measured_from(installer.venv, "bitsandbytes", wheel)
    assert "bitsandbytes==0.49.2" in (installer.venv / "jetson-install" / "constraints.txt").read_text()
    # The doctor checks a built bitsandbytes like a downloaded one, and its evidence says it was built.
    doctor = subprocess.run([sys.executable, "-m", "jetson_install", "doctor", "--venv", str(installer.venv),
                             "--root", "sample:agx-orin-64gb-jp6.2", "--json"],
                            capture_output=True, text=True, env=installer.env, timeout=300)
    evidence = json.loads(doctor.stdout)
    assert evidence["bitsandbytes"]["build"]["capability"] == "87"
    assert evidence["bitsandbytes"]["build"]["source"]["location"] == str(checkout)
    assert next(c for c in evidence["checks"] if c["id"] == "bnb-library")["status"] != "not_applicable"
    again = subprocess.run(installer.argv() + build, capture_output=True, text=True, env=installer.env, timeout=300)
    assert json.loads(again.stdout)["status"] == "unchanged", again.stderr
    other = Installer(tmp_path / "second", installer.env, installer.vendor_url, installer.public_url, installer.source)
    second = subprocess.run(other.argv() + build, capture_output=True, text=True, env=installer.env, timeout=600)
    assert second.returncode == 0, second.stderr
    step = next(s for s in json.loads(second.stdout)["steps"] if s["id"] == "bitsandbytes")
    assert "from the build cache" in step["detail"]
