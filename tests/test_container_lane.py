"""The container lane, for real: build the generated Dockerfile with buildah and run its entrypoint.

tests/setup.d/20-container-base prepares a stand-in for an L4T PyTorch image (a Debian root
from debootstrap with Python and the doctor's stub CUDA torch as real distributions) and the
wheels jetson-install needs inside an image. Here the Dockerfile `jetson-install dockerfile
--base` writes is built on it (`buildah bud --isolation chroot --format docker`; the default
OCI format drops HEALTHCHECK) with a jetson-install wheel of this checkout and a stub
OBLITERATUS in the build context and a loopback index, then its ENTRYPOINT runs with
`buildah run --isolation chroot` (podman run does not work on these machines), the host
check fed by JETSON_INSTALL_HOST_L4T/_CAPABILITY.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from support import LoopbackIndex, make_obliteratus_source
from support.lanes import lane_unavailable

import jetson_install
from jetson_install.base.toml_file import load_toml
from jetson_install.fleet.container import START_EVIDENCE

from support.stub_stack import JETSON_STACK
from support.stub_projects import IndexDirs

pytestmark = pytest.mark.lane
LANE = "container"
TOP = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jetson-install-tests" / "container"
HOST_ORIN = ["--env", "JETSON_INSTALL_HOST_L4T=36.4.3", "--env", "JETSON_INSTALL_HOST_CAPABILITY=8.7"]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_jetson_install_wheel(dest: Path) -> Path:
    """This checkout as a wheel, laid out as hatch builds it (wheels-index.toml inside the package)."""
    project = load_toml(TOP / "pyproject.toml")["project"]
    version = jetson_install.__version__
    dist_info = f"jetson_install-{version}.dist-info"
    files: Dict[str, bytes] = {}
    for path in sorted((TOP / "jetson_install").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(TOP).as_posix()] = path.read_bytes()
    files["jetson_install/catalog/wheels-index.toml"] = (TOP / "wheels-index.toml").read_bytes()
    metadata = ["Metadata-Version: 2.1", "Name: jetson-install", f"Version: {version}",
                f"Requires-Python: {project['requires-python']}"]
    metadata += [f"Requires-Dist: {requirement}" for requirement in project["dependencies"]]
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: jetson-install-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist_info}/entry_points.txt"] = b"[console_scripts]\njetson-install = jetson_install.__main__:main\n"
    path = dest / f"jetson_install-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        record = [_record_line(name, data) for name, data in files.items()] + [f"{dist_info}/RECORD,,"]
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return path


def buildah(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def base_image() -> str:
    if shutil.which("buildah") is None:
        lane_unavailable(LANE, "buildah is not installed (tests/setup installs it: apt-get install buildah)")
    record = CACHE / "base-image"
    if not record.is_file() or not (CACHE / "wheels" / ".complete").is_file():
        lane_unavailable(LANE, f"the stand-in base image is not built; run tests/setup (it caches in {CACHE})")
    image = record.read_text().strip()
    if buildah("inspect", "--type", "image", image, timeout=60).returncode != 0:
        lane_unavailable(LANE, f"{image} is not in buildah's storage; run tests/setup")
    return image


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, stub_index_dirs: IndexDirs) -> Iterator[LoopbackIndex]:
    """OBLITERATUS' stub dependencies and the real wheels jetson-install needs, on loopback."""
    root = tmp_path_factory.mktemp("lane-index")
    for source in (stub_index_dirs.public, CACHE / "wheels"):
        for wheel in source.glob("*.whl"):
            shutil.copy(wheel, root / wheel.name)
    # pip 23 compares a PEP 658 .metadata name with the wheel name unnormalized (charset_normalizer).
    served = LoopbackIndex(root, name="lane", core_metadata=False).start()
    yield served
    served.stop()


def _build_generated(sample: str, base: str, index: LoopbackIndex, context: Path, tag: str) -> str:
    """`jetson-install dockerfile --root sample:SAMPLE --base BASE` built with buildah; the image name."""
    wheel = build_jetson_install_wheel(context)
    make_obliteratus_source(context / "OBLITERATUS")
    generated = subprocess.run(
        [sys.executable, "-m", "jetson_install", "dockerfile", "--root", f"sample:{sample}",
         "--base", base, "--output", str(context / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert generated.returncode == 0, generated.stderr
    image = f"localhost/jetson-install-lane-{tag}:{os.getpid()}"
    started = time.monotonic()
    result = buildah("bud", "--isolation", "chroot", "--format", "docker", "--layers", "--pull=never",
                     "--build-arg", f"JETSON_INSTALL=/tmp/jetson-install-build/{wheel.name}",
                     "--build-arg", "OBLITERATUS_SOURCE=/tmp/jetson-install-build/OBLITERATUS",
                     "--build-arg", f"DEFAULT_INDEX={index.url}", "-t", image, str(context))
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    print(f"\ncontainer lane: {sample} image built in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return image


@pytest.fixture(scope="module")
def built(base_image: str, index: LoopbackIndex, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The generated Dockerfile built on the stand-in base; the image name."""
    image = _build_generated("agx-orin-64gb-jp6.2", base_image, index, tmp_path_factory.mktemp("context"), "jp6")
    yield image
    buildah("rmi", "--force", image, timeout=120)


def _config(image: str) -> Dict[str, Any]:
    inspected = buildah("inspect", "--type", "image", image, timeout=60)
    assert inspected.returncode == 0, inspected.stderr
    config: Dict[str, Any] = json.loads(inspected.stdout)["Docker"]["config"]
    return config


def _run(image: str, env: List[str], command: List[str]) -> "tuple[subprocess.CompletedProcess[str], str]":
    container = buildah("from", "--pull=never", image, timeout=120)
    assert container.returncode == 0, container.stderr
    name = container.stdout.strip().splitlines()[-1]
    result = buildah("run", "--isolation", "chroot", *env, name, "--", *command, timeout=600)
    return result, name


def test_the_image_keeps_its_torch_checks_the_host_and_starts_the_command(built: str, index: LoopbackIndex) -> None:
    config = _config(built)
    assert "PIP_CONSTRAINT=/opt/obliteratus/jetson-install/constraints.txt" in config["Env"]
    entrypoint = config["Entrypoint"]
    assert entrypoint[:2] == ["/opt/jetson-install/bin/jetson-install", "container-entrypoint"]
    assert config["Healthcheck"]["Test"][:2] == ["CMD", "grep"]
    script = ("import torch, obliteratus.device as d; "
              "print(torch.__file__, torch.version.cuda, d.get_device('auto'))")
    result, container = _run(built, HOST_ORIN, [*entrypoint, "python", "-c", script])
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "strict doctor passed" in result.stderr
        # The base image's torch, untouched, and OBLITERATUS in the venv sees CUDA.
        assert result.stdout.split() == ["/usr/local/lib/python3.11/dist-packages/torch/__init__.py", "12.6", "cuda"]
        health = buildah("run", "--isolation", "chroot", container, "--", *config["Healthcheck"]["Test"][1:])
        assert health.returncode == 0, health.stderr
        # The image's torch stack, kept: each file held to the sha256 the build measured from it
        # (no wheel of the tool's brought it), and every file that ran in the sealed proof accounted for.
        shown = buildah("run", "--isolation", "chroot", container, "--", "cat", START_EVIDENCE)
        integrity = json.loads(shown.stdout)["integrity"]
        assert integrity["hashes_from"] == "kept" and integrity["files"] == "hashed", integrity["distributions"]
        assert all(found["basis"] == "kept" and found["verified"] == found["expected"] > 0
                   for found in integrity["distributions"].values()), integrity["distributions"]
        assert integrity["ran"]["accounted"] is True and integrity["as_started"]["same"] is True
        # A kept file changed after the build (its RECORD with it) stops the start, naming it.
        edit = ("f=/usr/local/lib/python3.11/dist-packages/torch/cuda.py && echo '# changed' >> $f && "
                "python3 -c \"import base64,hashlib,sys; d=open(sys.argv[1],'rb').read(); "
                "print('torch/cuda.py,sha256='+base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=')"
                ".decode()+','+str(len(d)))\" $f > /tmp/row && r=$(ls -d ${f%/torch/cuda.py}/torch-*.dist-info)/RECORD && "
                "grep -v '^torch/cuda.py,' $r > /tmp/rows && cat /tmp/row >> /tmp/rows && cp /tmp/rows $r")
        edited = buildah("run", "--isolation", "chroot", container, "--", "sh", "-c", edit)
        assert edited.returncode == 0, edited.stderr
        again = buildah("run", "--isolation", "chroot", *HOST_ORIN, container, "--", *entrypoint, "true")
        assert again.returncode != 0, again.stdout + again.stderr
        assert "torch/cuda.py differs from torch's files as the environment was made" in again.stderr, again.stderr
        # A later uv in the image, told to install the index's CPU torch, leaves the image's in place.
        later = buildah("run", "--isolation", "chroot", container, "--", "/opt/jetson-install/bin/uv", "pip", "install",
                        "--python", "/opt/obliteratus/bin/python", "torch==2.9.0", "--default-index", index.url)
        venv_torch = buildah("run", "--isolation", "chroot", container, "--", "sh", "-c",
                             "ls -d /opt/obliteratus/lib/python*/site-packages/torch 2>/dev/null || echo none")
        # buildah's own failure (seen once in a whole run: no output at all) said as such, with uv's before it.
        assert venv_torch.returncode == 0, (venv_torch.stderr, later.returncode, later.stderr)
        assert venv_torch.stdout.strip() == "none", (later.returncode, later.stderr)
    finally:
        buildah("rm", container, timeout=120)


def test_the_entrypoint_refuses_a_host_of_another_l4t_with_one_line(built: str) -> None:
    entrypoint = _config(built)["Entrypoint"]
    result, container = _run(built, ["--env", "JETSON_INSTALL_HOST_L4T=35.4.1"], [*entrypoint, "touch", "/started"])
    try:
        assert result.returncode == 3, result.stdout + result.stderr
        assert result.stderr.splitlines()[0] == (
            "error: this image is built for L4T R36, compute capability 8.7, and the host runs L4T R35.4.1 "
            "(JETSON_INSTALL_HOST_L4T)")
        started = buildah("run", "--isolation", "chroot", container, "--", "test", "-e", "/started")
        assert started.returncode != 0
    finally:
        buildah("rm", container, timeout=120)


# --------------------------------------------------------------------------- JetPack 7.2 (L4T R39)

#: The stand-in base with a JetPack 7 torch: CUDA 13 (SBSA), for Thor's GPU or Orin's.
JP7_STACKS = {
    "thor": dict(JETSON_STACK, torch_cuda="13.0", device_name="NVIDIA Thor", capability=[11, 0], arch_list=["sm_110"]),
    "orin": dict(JETSON_STACK, torch_cuda="13.0", capability=[8, 7], arch_list=["sm_87"]),
}
SCENARIO = "/usr/local/lib/python3.11/dist-packages/doctor_stub_scenario.json"


def _jp7_base(base_image: str, board: str, tmp_path: Path) -> str:
    """The base image with its stub torch's scenario swapped for a JetPack 7 one."""
    scenario = tmp_path / "doctor_stub_scenario.json"
    scenario.write_text(json.dumps(JP7_STACKS[board]))
    container = buildah("from", "--pull=never", base_image, timeout=120)
    assert container.returncode == 0, container.stderr
    name = container.stdout.strip().splitlines()[-1]
    image = f"localhost/jetson-install-lane-base-jp7-{board}:{os.getpid()}"
    for args in (("copy", name, str(scenario), SCENARIO), ("commit", "--format", "docker", "--rm", name, image)):
        done = buildah(*args, timeout=300)
        assert done.returncode == 0, done.stderr
    return image


@pytest.fixture(scope="module", params=[("thor", "agx-thor-jp7.2.1", "tegra264", "11.0"),
                                        ("orin", "agx-orin-jp7.2.1", "tegra234", "8.7")], ids=["thor", "orin"])
def built_jp7(request: pytest.FixtureRequest, base_image: str, index: LoopbackIndex,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator["tuple[str, str, str]"]:
    """A JetPack 7.2 image, built with no device tree (buildah's build has none on this machine,
    as an unprivileged container on a Jetson often has none): (image, SoC, capability)."""
    board, sample, soc, capability = request.param
    assert not Path("/proc/device-tree").exists()  # what the build step sees: no SoC to read
    base = _jp7_base(base_image, board, tmp_path_factory.mktemp(f"base-{board}"))
    image = _build_generated(sample, base, index, tmp_path_factory.mktemp(f"context-{board}"), f"jp7-{board}")
    yield image, soc, capability
    buildah("rmi", "--force", image, base, timeout=120)


def test_a_jetpack_72_image_builds_and_starts_with_the_device_tree_hidden(built_jp7: "tuple[str, str, str]") -> None:
    image, soc, capability = built_jp7
    config = _config(image)
    channel = "jp7.2-thor" if soc == "tegra264" else "jp7.2-orin"
    assert f"JETSON_INSTALL_IMAGE_CHANNEL={channel}" in config["Env"]
    entrypoint = config["Entrypoint"]
    host = ["--env", "JETSON_INSTALL_HOST_L4T=39.2.1"]
    named = [(["--env", f"JETSON_INSTALL_HOST_SOC={soc}"], "JETSON_INSTALL_HOST_SOC"),
             (["--env", f"JETSON_INSTALL_HOST_CAPABILITY={capability}"], "JETSON_INSTALL_HOST_CAPABILITY")]
    family = "Thor" if soc == "tegra264" else "Orin"
    for env, source in named:
        result, container = _run(image, host + env, [*entrypoint, "python", "-c", "import obliteratus; print('ok')"])
        try:
            assert result.returncode == 0, result.stdout + result.stderr
            assert result.stdout.strip() == "ok"
            assert (f"host L4T R39.2.1 (JETSON_INSTALL_HOST_L4T) on {family} {soc} ({source}) is channel {channel}, "
                    "the image's; strict doctor passed") in result.stderr
        finally:
            buildah("rm", container, timeout=120)
    # Nothing names the SoC: one line saying how, and the command never starts.
    result, container = _run(image, host, [*entrypoint, "touch", "/started"])
    try:
        assert result.returncode == 3, result.stdout + result.stderr
        assert result.stderr.splitlines()[1] == (
            f"  fix: name the host's SoC: run it with --env JETSON_INSTALL_HOST_SOC={soc} (what the image is built for), "
            "or let the container read the device tree")
        started = buildah("run", "--isolation", "chroot", container, "--", "test", "-e", "/started")
        assert started.returncode != 0
    finally:
        buildah("rm", container, timeout=120)
