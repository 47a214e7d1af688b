"""The aarch64 lane: jetson-install for real on aarch64, under qemu-user, in the arm64 Debian
bookworm root that tests/setup.d/20-arm64-root builds (Python 3.11, real uv, real aarch64
torch and bitsandbytes wheels from the registry).

Steps, in order, each timed (the times go to ROOT/lane/timings.json; bench/bench_arm64.py
prints them): the tool's environment, the tool installed from a wheel of this checkout,
`detect`, `plan`, a `--preflight` install of a local stand-in OBLITERATUS source, a no-op
re-run, the constraints holding against `pip install -U torch`, and the preflight doctor.

Marked `lane`: it uses the package registries. Where the root or qemu is missing it skips
with one line (fails under CI=true), see tests/support/lanes.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from support.arm64_root import SAMPLE, TOOL, InRoot, arm64_root
from support.lanes import lane_unavailable
from support.manifests import assert_measured_from
from support.planned import assert_ran_as_planned
from support.stub_projects import make_obliteratus_source

pytestmark = pytest.mark.lane

TOP = Path(__file__).resolve().parent.parent
LANE = "aarch64"
# A hosted ARM runner is no Jetson: the preflight names its release, as
# examples/github/jetson-preflight.yml does.
RELEASE = ("--l4t", "36.4.3")
# Inside the root: the stand-in source and the installed environment (the tool's: TOOL).
SOURCE, ENV = "/lane/OBLITERATUS", "/lane/obliteratus"
# What the stand-in needs: small, so the lane stays within minutes; torch and bitsandbytes
# are the real aarch64 wheels.
STANDIN_DEPENDENCIES = ("torch>=2.0", "numpy>=1.24")
STANDIN_EXTRAS = {"quantization": ("bitsandbytes>=0.46.1",)}


class Arm64Root(InRoot):
    def __init__(self, root: Path) -> None:
        super().__init__(root, TOOL, timeout=900)

    def install_argv(self) -> List[str]:
        return [f"{TOOL}/bin/jetson-install", "obliteratus", *RELEASE, "--preflight", "--venv", ENV,
                "--source", SOURCE, "--yes", "--json"]


def _unavailable_reason(root: Path) -> str:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "it needs root on Linux (chroot into the arm64 root)"
    if not (root / ".lane-ready").is_file():
        return f"no arm64 root at {root}; run tests/setup (it builds it with debootstrap)"
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        return "qemu-aarch64 is not registered with binfmt_misc; run tests/setup"
    return ""


@pytest.fixture(scope="module")
def arm64(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arm64Root]:
    root = arm64_root()
    reason = _unavailable_reason(root)
    if reason:
        lane_unavailable(LANE, reason)
    lane = root / "lane"
    # Each run installs afresh; the tool's environment and the pip/uv caches inside the
    # root are what a warm run keeps.
    for stale in (lane / "obliteratus", lane / "obliteratus.d", lane / "OBLITERATUS", lane / "dist"):
        if stale.is_symlink() or stale.is_file():
            stale.unlink()
        elif stale.exists():
            shutil.rmtree(stale)
    (lane / "dist").mkdir(parents=True)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(lane / "dist"),
                            str(TOP)], capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        lane_unavailable(LANE, f"cannot build a wheel of jetson-install: {built.stderr.strip()[-300:]}")
    make_obliteratus_source(lane / "OBLITERATUS", dependencies=STANDIN_DEPENDENCIES, extras=STANDIN_EXTRAS)
    arm = Arm64Root(root)
    yield arm
    (lane / "timings.json").write_text(json.dumps({
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": arm.timings,
    }, indent=2) + "\n")


def test_the_tool_installs_into_an_aarch64_python(arm64: Arm64Root) -> None:
    if not (arm64.root / TOOL.lstrip("/") / "bin" / "pip").exists():
        made = arm64.run("venv", "/usr/bin/python3", "-m", "venv", TOOL)
        assert made.returncode == 0, made.stderr
    else:
        arm64.timings["venv"] = 0.0
    (wheel,) = (arm64.root / "lane" / "dist").glob("jetson_install-*.whl")
    inside = f"/lane/dist/{wheel.name}"
    # First its dependencies (uv's aarch64 wheel among them), then this checkout's code.
    for argv in (("install", "-q", inside), ("install", "-q", "--force-reinstall", "--no-deps", inside)):
        installed = arm64.run("pip install", f"{TOOL}/bin/pip", *argv)
        assert installed.returncode == 0, installed.stderr
    machine = arm64.run("pip install", f"{TOOL}/bin/python", "-c", "import platform; print(platform.machine())")
    assert machine.stdout.strip() == "aarch64"


def test_detect_finds_no_jetson_in_a_debian_root_and_reads_a_sample(arm64: Arm64Root) -> None:
    bare = arm64.tool("detect", "detect")
    assert bare.returncode == 3, bare.stdout + bare.stderr
    assert bare.stderr.startswith("error: no Jetson found")
    sample = arm64.tool("detect", "detect", "--root", SAMPLE, "--json")
    assert sample.returncode == 0, sample.stderr
    assert json.loads(sample.stdout)["l4t"] == "36.4.3"


def test_a_preflight_off_a_jetson_asks_for_the_release_in_one_line(arm64: Arm64Root) -> None:
    bare = arm64.tool("plan", "obliteratus", "--preflight", "--dry-run")
    assert bare.returncode == 3, bare.stderr
    assert bare.stderr.splitlines()[0].startswith("error: no Jetson found under /")
    assert "fix: name the Jetson release to preflight for: --l4t 36.4.3" in bare.stderr
    named = arm64.tool("plan", "obliteratus", "--preflight", "--l4t", "36.4.3", "--dry-run", "--json")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["channel"] == "jp6-cu126"


def test_plan_of_the_preflight(arm64: Arm64Root) -> None:
    planned = arm64.tool("plan", "plan", "obliteratus", "--root", SAMPLE, "--preflight", "--json")
    assert planned.returncode == 0, planned.stderr
    data = json.loads(planned.stdout)
    assert data["profile"] == "preflight" and data["pins"]["torch"] == "2.8.0"


def test_preflight_install_with_real_aarch64_wheels(arm64: Arm64Root) -> None:
    result = arm64.run("install", *arm64.install_argv(), timeout=1800)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    data = json.loads(result.stdout)
    assert data["status"] == "installed" and data["profile"] == "preflight"
    # The preflight's steps ran as its plan shows them (the log is read inside the root).
    python = (arm64.root / TOOL.lstrip("/") / "bin" / "jetson-install").read_text().splitlines()[0][2:]  # its #!
    programs = {"uv": f"{TOOL}/bin/uv", "jetson-install": f"{python} -m jetson_install"}
    assert_ran_as_planned(data, programs, log=arm64.root / data["log"].lstrip("/"))
    assert data["installed"]["torch"] == "2.8.0"
    # The channel's bitsandbytes range, from the default index (its aarch64 wheel has a CPU library).
    assert Version(data["installed"]["bitsandbytes"]) in SpecifierSet(">=0.46.1,<0.51")
    assert "preflight with Python 3.11" in " ".join(data["warnings"])
    assert "The OBLITERATUS preflight (CPU torch; not Jetson GPU support) is ready" in result.stderr
    # Read inside the root: ENV is a symlink to an absolute path there.
    evidence = json.loads(arm64.run("install", "cat", data["evidence"]).stdout)
    assert evidence["profile"] == "preflight" and evidence["status"] == "preflight-passed"
    assert evidence["platform"]["arch"] == "aarch64"
    assert evidence["torch"]["cuda"] is None
    # uv resolved the CPU set on its default index (pylock.toml: each file's URL and sha256); the
    # tool downloaded and checked each wheel, and kept every file's sha256 from the wheel itself.
    environment = arm64.root / os.readlink(arm64.root / ENV.lstrip("/")).lstrip("/")
    record = json.loads((environment / "jetson-install" / "vendor.json").read_text())
    manifest = json.loads((environment / "jetson-install" / "vendor-files.json").read_text())["distributions"]
    assert sorted(manifest) == sorted(record["installed"])
    cache = arm64.root / "root" / ".cache" / "jetson-install" / "wheels"
    for chosen in record["resolution"]["files"]:
        assert chosen["url"] and len(chosen["sha256"]) == 64, chosen
        assert_measured_from(environment, chosen["name"], cache / chosen["sha256"] / chosen["file"])


def test_a_second_run_changes_nothing(arm64: Arm64Root) -> None:
    result = arm64.run("re-run", *arm64.install_argv())
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["status"] == "unchanged"


def test_pip_upgrade_keeps_the_pinned_torch(arm64: Arm64Root) -> None:
    upgrade = arm64.run("pip install -U torch", f"{ENV}/bin/pip", "install", "-q", "-U", "torch")
    assert upgrade.returncode == 0, upgrade.stderr[-3000:]
    version = arm64.run("pip install -U torch", f"{ENV}/bin/python", "-c",
                        "import importlib.metadata as m; print(m.version('torch'))")
    assert version.stdout.strip() == "2.8.0"


def test_the_preflight_doctor_passes_as_preflight(arm64: Arm64Root) -> None:
    doctor = arm64.tool("doctor", "doctor", "--venv", ENV, *RELEASE, "--json")
    evidence = json.loads(doctor.stdout)
    failing = [(c["id"], c["detail"]) for c in evidence["checks"] if c["status"] == "fail"]
    assert doctor.returncode == 0, failing
    assert evidence["profile"] == "preflight" and evidence["status"] == "preflight-passed"
    checks = {check["id"]: check for check in evidence["checks"]}
    assert checks["bnb-library"]["status"] == "ok" and "libbitsandbytes_cpu.so" in checks["bnb-library"]["detail"]
    assert checks["obliteratus"]["status"] == "ok" and "'cpu'" in checks["obliteratus"]["detail"]
    assert checks["cuda-available"]["status"] == "not_applicable"
    assert checks["pip-check"]["status"] == "ok"
    # On the root's Debian Python: the proof ran sealed, every vendor file has the size its wheel
    # held, no file that ran is unaccounted for, and the environment as started agrees.
    integrity = evidence["integrity"]
    distributions = integrity["distributions"]
    assert all(found["verified"] == found["expected"] > 0 for found in distributions.values()), distributions
    # The vendor set the install fetched is held to its wheels' hashes; the preflight's
    # bitsandbytes, which uv installs from the default index and the tool does not fetch, to its
    # RECORD, which its detail says (so hashes_from is "record" and `accounted` false here).
    assert {name: distributions[name]["basis"] for name in ("torch", "torchvision", "torchaudio")} \
        == dict.fromkeys(("torch", "torchvision", "torchaudio"), "artifact"), distributions
    assert "bitsandbytes: expected hashes from the environment's own RECORD" in checks["vendor-files"]["detail"]
    assert integrity["ran"]["sealed"] is True and integrity["ran"]["unaccounted_count"] == 0
    assert integrity["as_started"]["same"] is True and checks["loaded-files"]["status"] == "ok"
    strict = arm64.tool("doctor", "doctor", "--venv", ENV, *RELEASE, "--strict")
    assert strict.returncode == 2 and "--strict is the Jetson runtime gate" in strict.stderr


def test_the_doctor_names_a_missing_libgomp_with_its_apt_package(arm64: Arm64Root) -> None:
    # bitsandbytes' aarch64 CPU library links GCC's OpenMP runtime; without it the real
    # bitsandbytes says only "XPU/CPU can run without native library.", and the doctor reads
    # the loader's own words.
    libgomp = arm64.root / "usr/lib/aarch64-linux-gnu/libgomp.so.1.0.0"
    aside = libgomp.with_name("libgomp.so.1.0.0.lane-aside")
    if not libgomp.is_file():
        pytest.fail(f"{libgomp} is not in the arm64 root: tests/setup.d/20-arm64-root installs libgomp1")
    libgomp.rename(aside)
    try:
        doctor = arm64.tool("doctor", "doctor", "--venv", ENV, *RELEASE, "--json", "--check", "bnb-library")
    finally:
        aside.rename(libgomp)
    library = {check["id"]: check for check in json.loads(doctor.stdout)["checks"]}["bnb-library"]
    assert library["status"] == "fail", library
    assert "libgomp.so.1" in library["detail"] and "apt: libgomp1" in library["detail"], library["detail"]
    assert library["fix"] == "sudo apt-get install libgomp1"
