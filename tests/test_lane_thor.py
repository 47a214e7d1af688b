"""The aarch64 lane's Thor test: channel jp7-thor-cu130's real CUDA 13 stack, installed by
jetson-install inside the arm64 Debian root (tests/setup.d/20-arm64-root) under qemu-user, and
judged by the doctor, all but the GPU.

The stack is the channel's preferred set from the default index, as the catalog records it:
torch 2.13.0 (CUDA 13.0), torchvision 0.28.0, bitsandbytes 0.50.2 with its CUDA 13 library, and
the nvidia-* runtime wheels torch declares (2.9 GB). jp7-thor-cu130 rather than jp7.2-thor: both
channels' default-index sources hold the same sets, and this one's CUDA 13.0 is the wheels' own.

Where the bytes come from: tests/setup.d/25-thor-wheels downloads the set once, as uv resolves
it for the root's interpreter, into ~/.cache/jetson-install-tests/thor-cu130. This test serves
that folder as a loopback index on a fixed port and gives it as --default-index, so no registry
is read, and uv's cache inside the root keeps what it unpacked by URL: a warm run unpacks nothing.

Everything runs as a board would run it: the root's own aarch64 Python 3.11 (bookworm has no
3.12, so the interpreter decides the files: cp311, with the tool's warning) and the aarch64 uv
of the tool's environment, both emulated. Where the time goes (measured 2026-12-02 on the
shared 2-core host): cold, the whole test took 9 min under load (the install 5.5 min: vendor
37 s and target 2 min of uv fetching and unpacking 2.8 GB emulated, check 57 s of `import
torch` under qemu beside uv pip check, verify 41 s of the doctor's torch probe); warm, 3 min
(the install 79 s, its vendor and target steps seconds from uv's cache; lock 6 s; the doctor
77 s). What is left warm is `import torch` under emulation, which no faster way keeps honest:
the host's uv could unpack faster, but the interpreter that must import torch is the root's.

Marked `lane`: where the root, qemu or the downloaded set is missing it skips with one line
(fails under CI=true), see tests/support/lanes.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from support.arm64_root import InRoot, arm64_root
from support.index_server import LoopbackIndex
from support.lanes import lane_unavailable
from support.manifests import assert_measured_from
from support.stub_projects import make_obliteratus_source

from jetson_install.catalog.catalog import VendorSource, load_catalog
from jetson_install.running.handlers import _board_assembler

pytestmark = pytest.mark.lane

TOP = Path(__file__).resolve().parent.parent
LANE = "aarch64"
SAMPLE = "sample:agx-thor-jp7.0"  # L4T 38.2: channel jp7-thor-cu130
CHANNEL = "jp7-thor-cu130"
# Inside the root, apart from test_lane_arm64.py's paths (the two may run side by side).
TOOL, DIST = "/lane/thor-tool", "/lane/thor-dist"
SOURCE, ENV, LOCKS = "/lane/thor-OBLITERATUS", "/lane/thor", "/lane/thor-lock"
STANDIN_DEPENDENCIES = ("torch>=2.0", "numpy>=1.24")
STANDIN_EXTRAS = {"quantization": ("bitsandbytes>=0.46.1",)}
# The same port on every run keeps the URLs, so uv's cache in the root answers a warm run.
PORT = 38163


def wheels_folder() -> Path:
    """Where tests/setup.d/25-thor-wheels keeps the set (the same rule as the script)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "jetson-install-tests" / "thor-cu130"


class ThorRoot(InRoot):
    def __init__(self, root: Path, index: LoopbackIndex) -> None:
        super().__init__(root, TOOL, timeout=1800)
        self.index = index


def _start(index: LoopbackIndex) -> LoopbackIndex:
    try:
        return index.start()
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
    # Another program holds the port: a run on any other is as correct, only not warm.
    index.fixed_port = 0
    return index.start()


@pytest.fixture(scope="module")
def thor() -> Iterator[ThorRoot]:
    root = arm64_root()
    if sys.platform != "linux" or os.geteuid() != 0:
        lane_unavailable(LANE, "it needs root on Linux (chroot into the arm64 root)")
    if not (root / ".lane-ready").is_file() or not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        lane_unavailable(LANE, f"no arm64 root at {root} with qemu-aarch64 registered; run tests/setup")
    folder = wheels_folder()
    if not (folder / ".ready").is_file():
        lane_unavailable(LANE, f"the Thor set is not downloaded to {folder}; run tests/setup (25-thor-wheels)")
    lane = root / "lane"
    for stale in (ENV, ENV + ".d", SOURCE, DIST, LOCKS):
        path = root / stale.lstrip("/")
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
    (root / DIST.lstrip("/")).mkdir(parents=True)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / DIST.lstrip("/")),
                            str(TOP)], capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        lane_unavailable(LANE, f"cannot build a wheel of jetson-install: {built.stderr.strip()[-300:]}")
    make_obliteratus_source(root / SOURCE.lstrip("/"), dependencies=STANDIN_DEPENDENCIES, extras=STANDIN_EXTRAS)
    index = _start(LoopbackIndex(folder, name="thor", cache_files=True, port=PORT))
    thor = ThorRoot(root, index)
    port = index.port
    try:
        yield thor
    finally:
        index.stop()
    (lane / "thor-timings.json").write_text(json.dumps({
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "port": port,
        "seconds": thor.timings,
    }, indent=2) + "\n")


def _preferred_source() -> VendorSource:
    channel = load_catalog().channel(CHANNEL)
    assert channel.primary is not None and channel.primary.default_index
    return channel.primary


def test_the_downloaded_set_is_the_channels_preferred_set() -> None:
    folder = wheels_folder()
    if not (folder / ".ready").is_file():
        lane_unavailable(LANE, f"the Thor set is not downloaded to {folder}; run tests/setup (25-thor-wheels)")
    pins = dict(_preferred_source().preferred.pins)
    downloaded = {path.name.split("-")[0]: path.name.split("-")[1] for path in folder.glob("*.whl")}
    assert {name: downloaded.get(name) for name in ("torch", "torchvision")} == \
        {name: pins[name].lstrip("=") for name in ("torch", "torchvision")}, \
        "wheels-index.toml's preferred set moved: change tests/setup.d/25-thor-wheels' set and run tests/setup"


def test_the_tool_installs_into_the_roots_python(thor: ThorRoot) -> None:
    if not thor.inside(f"{TOOL}/bin/pip").exists():
        made = thor.run("tool", "/usr/bin/python3", "-m", "venv", TOOL)
        assert made.returncode == 0, made.stderr
    (wheel,) = thor.inside(DIST).glob("jetson_install-*.whl")
    # Its dependencies from the registry (pip's cache inside the root keeps them), then this checkout.
    for argv in (("install", "-q", f"{DIST}/{wheel.name}"),
                 ("install", "-q", "--force-reinstall", "--no-deps", f"{DIST}/{wheel.name}")):
        installed = thor.run("tool", f"{TOOL}/bin/pip", *argv, timeout=900)
        assert installed.returncode == 0, installed.stderr[-3000:]


def test_the_real_cuda13_stack_installs_and_is_recorded_by_hash(thor: ThorRoot) -> None:
    result = thor.tool("install", "obliteratus", "--root", SAMPLE, "--venv", ENV, "--source", SOURCE,
                       "--python", "/usr/bin/python3", "--default-index", thor.index.url, "--no-verify",
                       "--yes", "--json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["status"] == "installed" and data["channel"] == CHANNEL
    assert data["installed"]["torch"] == "2.13.0" and data["installed"]["bitsandbytes"] == "0.50.2"
    # Every runtime wheel torch declares came, nvidia-cusparselt-cu13 with its SBSA-labelled WHEEL file.
    for companion in ("nvidia-cudnn-cu13", "nvidia-cusparselt-cu13", "nvidia-nccl-cu13", "nvidia-cublas",
                      "nvidia-cuda-runtime", "cuda-toolkit"):
        assert companion in data["installed"], companion
    check = next(step for step in data["steps"] if step["id"] == "check")
    assert check["status"] == "ok"
    # The catalog lists these files by sha256: no "not a build wheels-index.toml lists" warning.
    assert not [warning for warning in data["warnings"] if "is not a build" in warning], data["warnings"]
    assert "is Python 3.11, but channel jp7-thor-cu130 wheels are built for Python 3.12" in " ".join(data["warnings"])

    environment = thor.inside(os.readlink(thor.inside(ENV)))
    vendor = json.loads((environment / "jetson-install" / "vendor.json").read_text())
    files = {entry["name"]: entry for entry in vendor["resolution"]["files"]}
    known = {build.file: build.sha256 for build in _preferred_source().builds}
    for name, file in (("torch", "torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl"),
                       ("torchvision", "torchvision-0.28.0-cp311-cp311-manylinux_2_28_aarch64.whl"),
                       ("bitsandbytes", "bitsandbytes-0.50.2-py3-none-manylinux_2_24_aarch64.whl")):
        assert files[name]["file"] == file
        assert files[name]["sha256"] == known[file] and files[name]["known"] is True, files[name]
        # Its files' expected hashes are measured from the very wheel the tool downloaded and checked
        # (the lane's folder holds its bytes): its sha256 and its own RECORD, never the environment's.
        assert_measured_from(environment, name, wheels_folder() / file)
    manifest = json.loads((environment / "jetson-install" / "vendor-files.json").read_text())["distributions"]
    assert sorted(manifest) == sorted(vendor["installed"]) and all(entry["measured"] for entry in manifest.values())
    # bitsandbytes' CUDA 13 library is what torch 2.13.0+cu130 makes it load on a Thor.
    (site_packages,) = environment.glob("lib/python3.11/site-packages")
    assert (site_packages / "bitsandbytes" / "libbitsandbytes_cuda130.so").is_file()
    thor.timings["install steps"] = sum(step["seconds"] for step in data["steps"])


def test_a_lock_of_the_thor_set_pins_every_file_by_hash(thor: ThorRoot) -> None:
    result = thor.tool("lock", "lock", "--root", SAMPLE, "--python", "/usr/bin/python3", "--source", SOURCE,
                       "--default-index", thor.index.url, "--output", f"{LOCKS}/obliteratus.lock", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["channel"] == CHANNEL
    lines = thor.inside(f"{LOCKS}/obliteratus.lock").read_text().splitlines()
    assert lines[1] == f"# channel: {CHANNEL}"
    pinned = {line.split(" @ ")[0]: line for line in lines if " @ " in line and not line.startswith("#")}
    known = {build.file: build.sha256 for build in _preferred_source().builds}
    torch = pinned["torch"]
    assert torch.endswith(f"/torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl --hash=sha256:"
                          f"{known['torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl']}")
    assert "nvidia-cusparselt-cu13" in pinned and all("--hash=sha256:" in line for line in pinned.values())


def test_the_strict_doctor_gives_exactly_the_no_gpu_verdicts(thor: ThorRoot) -> None:
    """The strict doctor, on the root's Debian Python: every vendor file verified against the
    hashes its wheel held, every file that ran in the sealed proof accounted for, and the
    environment as started reporting the same; only what needs a GPU fails."""
    doctor = thor.tool("doctor", "doctor", "--venv", ENV, "--root", SAMPLE, "--strict", "--json")
    assert doctor.returncode == 1, doctor.stderr[-3000:]
    assert "Traceback" not in doctor.stderr
    evidence = json.loads(doctor.stdout)
    assert evidence["status"] == "failed"
    checks = {check["id"]: check for check in evidence["checks"]}
    assert {check_id: check["status"] for check_id, check in checks.items()} == {
        "platform": "ok", "python-abi": "ok", "libraries": "ok", "startup-hooks": "ok", "vendor-files": "ok",
            "loaded-files": "ok", "torch-import": "ok", "torch-build": "ok",
        "cuda-available": "fail",
        "cuda-arch": "skip", "cuda-matmul": "skip", "cuda-conv2d": "skip", "cuda-bf16": "skip",
        # Its assembler half ran (Triton 3.7.1's own assembles sm_110a); the compiled function waits for a GPU.
        "compile": "skip",
        "numpy": "ok",
        # bitsandbytes loads its CPU library when torch sees no GPU; the fix points at torch's checks.
        "bnb-library": "fail", "bnb-kernels": "skip", "bnb-int8": "skip",
        "obliteratus": "fail", "jetson-contract": "skip",
        "transformers-torch": "not_applicable", "additions": "not_applicable",
        "pip-check": "ok",
    }
    integrity = evidence["integrity"]
    assert integrity["files"] == "hashed" and integrity["hashes_from"] == "artifact"
    for name in ("torch", "torchvision", "bitsandbytes"):
        found = integrity["distributions"][name]
        assert found["basis"] == "artifact" and found["verified"] == found["expected"] > 0, (name, found)
    assert all(found["verified"] == found["expected"] > 0 for found in integrity["distributions"].values())
    ran = integrity["ran"]
    assert ran["sealed"] is True and ran["accounted"] is True and ran["unaccounted"] == []
    assert ran["distributions"]["torch"]["basis"] == "artifact" and ran["distributions"]["torch"]["files"] > 500
    # The platform: the root's own Python, by its Debian package.
    stdlib = [entry for entry in ran["platform"] if entry["path"] == "/usr/lib/python3.11/"]
    assert stdlib and "libpython3.11-stdlib" in str(stdlib[0]["package"]), ran["platform"]
    assert integrity["as_started"]["same"] is True
    assert checks["torch-build"]["detail"].startswith("torch 2.13.0+cu130, CUDA 13.0")
    # The CUDA 13 runtime wheels torch declares hold every library its .so files link.
    assert "in the environment's wheels" in checks["libraries"]["detail"]
    assert checks["cuda-available"]["detail"] == "torch is built for CUDA 13.0 but sees 0 device(s)"
    assert checks["cuda-available"]["fix"].startswith("check that this user can open the GPU")
    assert checks["bnb-library"]["fix"] == "fix the torch checks first (cuda-available)"
    # The channel does not require it yet, and says why in the detail.
    assert checks["compile"]["required"] is False
    assert checks["compile"]["detail"].startswith("Triton 3.7.1's ptxas-blackwell, CUDA 13.1, assembles sm_110a; the "
                                                  "compiled function needs a CUDA device (cuda-available) (not required "
                                                  "on channel jp7-thor-cu130: Triton 3.7.1, which")
    assert evidence["torch"]["compile"] == {
        "triton": "3.7.1", "assembler": f"{ENV}/lib/python3.11/site-packages/triton/backends/nvidia/bin/ptxas-blackwell",
        "assembler_release": "13.1", "arch": "sm_110a", "assembled": True, "function": "not_run"}
    assert checks["pip-check"]["detail"] == ("uv pip check: no broken requirements (accepted as aarch64: "
                                             "nvidia-cusparselt-cu13 (its WHEEL file says py3-none-manylinux2014_sbsa))")


def test_the_real_triton_assembles_thor_where_its_older_assembler_cannot(thor: ThorRoot) -> None:
    """The assembler probe on the real Triton 3.7.1 of the Thor set, under emulation: its
    ptxas-blackwell (CUDA 13.1) assembles sm_110a; its ptxas (CUDA 12.8), put in that one's place
    through TRITON_PTXAS_BLACKWELL_PATH, refuses it in #170117's words, and the install would
    then point Triton at an assembler that can (here the 13.1 one stands for the board's)."""
    probe = f"{TOOL}/lib/python3.11/site-packages/jetson_install/probes/assembler_probe.py"
    binaries = f"{ENV}/lib/python3.11/site-packages/triton/backends/nvidia/bin"
    own = thor.run("assembler", f"{ENV}/bin/python", probe, "--capability", "110")
    assert own.returncode == 0, own.stderr
    report = json.loads(own.stdout.splitlines()[-1])
    assert report["triton"]["version"] == "3.7.1"
    assert {key: report["assembler"][key] for key in ("name", "release", "arch", "assembled")} == \
        {"name": "ptxas-blackwell", "release": "13.1", "arch": "sm_110a", "assembled": True}
    older = thor.run("assembler", "/usr/bin/env", f"TRITON_PTXAS_BLACKWELL_PATH={binaries}/ptxas", f"{ENV}/bin/python",
                     probe, "--capability", "110", "--candidate", f"{binaries}/ptxas-blackwell")
    report = json.loads(older.stdout.splitlines()[-1])
    assert (report["assembler"]["release"], report["assembler"]["assembled"]) == ("12.8", False)
    assert report["assembler"]["error"] == "ptxas fatal   : Value 'sm_110a' is not defined for option 'gpu-name'"
    assert _board_assembler(report)[0] == {"TRITON_PTXAS_BLACKWELL_PATH": f"{binaries}/ptxas-blackwell"}


def _comment_section(path: Path) -> int:
    """Where an ELF64 file's .comment section starts: a byte that changes the file, not what runs."""
    data = path.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for index in range(shnum):
        name, = struct.unpack_from("<I", data, shoff + index * shentsize)
        offset, = struct.unpack_from("<Q", data, shoff + index * shentsize + 0x18)
        if data[names + name:data.index(b"\0", names + name)] == b".comment":
            return int(offset)
    raise AssertionError(f"{path} has no .comment section")


def test_the_strict_doctor_catches_each_attack_on_the_boards_python(thor: ThorRoot) -> None:
    """At once, so the lane runs one more doctor: a flipped byte in a vendor .so, an edited
    vendor .py, a foreign .pth, a foreign unchecked-hash .pyc, and a hook planted through the
    import of the root's own sitecustomize (Debian's, which imports apport_python_hook)."""
    environment = thor.inside(os.readlink(thor.inside(ENV)))
    (site,) = environment.glob("lib/python3.11/site-packages")
    library, functional = site / "torch" / "lib" / "libshm.so", site / "torch" / "functional.py"
    originals = {library: library.read_bytes(), functional: functional.read_bytes()}
    patch = ("import torch\ntorch.cuda.is_available = lambda: True\ntorch.cuda.device_count = lambda: 1\n")
    planted = {site / "lane_speedup.pth": "import lane_speedup\n", site / "lane_speedup.py": patch,
               site / "apport_python_hook.py": "def install():\n    " + patch.replace("\n", "\n    ")}
    pyc = site / "torch" / "__pycache__" / "__init__.cpython-311.pyc"
    try:
        data = bytearray(originals[library])
        data[_comment_section(library)] ^= 0x01
        library.write_bytes(bytes(data))
        functional.write_bytes(originals[functional] + b"\n# edited\n")
        for path, text in planted.items():
            path.write_text(text)
        inside = "/" + str(site.relative_to(thor.root))
        (thor.root / "lane" / "edited_init.py").write_text((site / "torch" / "__init__.py").read_text()
                                                           + "\n" + patch.replace("import torch\n", ""))
        compiled = thor.run("attacks", f"{ENV}/bin/python", "-c",
                            "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], dfile=sys.argv[3], "
                            "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)",
                            "/lane/edited_init.py", f"{inside}/torch/__pycache__/__init__.cpython-311.pyc",
                            f"{inside}/torch/__init__.py")
        assert compiled.returncode == 0, compiled.stderr
        doctor = thor.tool("doctor", "doctor", "--venv", ENV, "--root", SAMPLE, "--strict", "--json")
    finally:
        for path, content in originals.items():
            path.write_bytes(content)
        for path in (*planted, pyc, thor.root / "lane" / "edited_init.py"):
            path.unlink(missing_ok=True)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr, doctor.stderr[-3000:]
    evidence = json.loads(doctor.stdout)
    checks = {check["id"]: check for check in evidence["checks"]}
    torch = evidence["integrity"]["distributions"]["torch"]
    # The flipped byte and the edited .py, against the hashes torch's wheel held; the pyc beside its source.
    assert {"torch/lib/libshm.so", "torch/functional.py"} <= set(torch["changed"]), torch
    assert "torch/__pycache__/__init__.cpython-311.pyc (an unchecked-hash .pyc: Python runs it without reading its " \
           "source)" in torch["unlisted"], torch
    assert checks["vendor-files"]["status"] == "fail"
    # The edited .py ran in the sealed proof: loaded-files names it (import torch maps no libshm.so here).
    unaccounted = {entry["path"] for entry in evidence["integrity"]["ran"]["unaccounted"]}
    assert "torch/functional.py" in unaccounted and checks["loaded-files"]["status"] == "fail", unaccounted
    # The .pth and the hook planted through Debian's sitecustomize change what torch reports as started.
    started = checks["startup-hooks"]
    assert started["status"] == "fail" and "lane_speedup.pth (installed by no distribution)" in started["detail"]
    assert started["detail"].startswith("code that runs at start-up changes what torch reports: sealed (CUDA available: "
                                        "False"), started["detail"]
    assert "apport_python_hook.py" in evidence["integrity"]["as_started"]["at_start_up"]
