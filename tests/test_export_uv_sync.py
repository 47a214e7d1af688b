"""`export --uv` under uv itself: `uv lock`, then `uv sync` on a Jetson and on a workstation
sharing the lock, `uv add` of a package that asks for another torch, and `jetson-install doctor
--venv .venv` on what the Jetson's sync made, against the loopback stand-ins of the vendor index
(the doctor's stub CUDA torch and bitsandbytes: tests/doctor_stubs/) and of uv's default index.

No Jetson is here, so the Jetson's .venv is one whose interpreter answers the board marker's
questions as an Orin does: a start-up file patches platform.machine() and platform.release(),
which is where uv reads platform_machine and platform_release for its markers
(astral-sh/uv crates/uv-python/python/get_interpreter_info.py). It is removed before the doctor
runs, whose start-up-hooks check would name it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional

import pytest

from support import find_uv, isolated_env, venv_python
from support.cli import run_cli
from support.gate_stubs import GATE_TORCH, make_gate_catalog, make_gate_vendor_index
from support.index_server import LoopbackIndex
from support.stub_projects import OBLITERATUS_DEPENDENCIES, IndexDirs, make_obliteratus_source
from support.wheels import build_wheel

pytestmark = pytest.mark.slow

ORIN = "sample:agx-orin-64gb-jp6.2"
# An Orin's kernel, from its captured root (jetson_install/board/samples/agx-orin-64gb-jp6.2).
ORIN_KERNEL = "5.15.148-tegra"


class Stand(NamedTuple):
    env: Dict[str, str]
    vendor: LoopbackIndex
    public: LoopbackIndex
    public_dir: Path


@pytest.fixture
def stand(tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> Stand:
    public = private_index_dirs.public
    # A package that asks for another torch than the channel's, and tqdm's Windows dependency
    # (uv resolves for every platform).
    build_wheel(public, "needs-torch-29", "1.0", requires=("torch>=2.9",), source_index="public")
    build_wheel(public, "colorama", "0.4.6", source_index="public")
    vendor_dir = make_gate_vendor_index(tmp_path / "gate-vendor")
    catalog = make_gate_catalog(tmp_path / "wheels-index.toml", vendor_dir)
    vendor, index = start_index(vendor_dir, name="gate-vendor"), start_index(public, name="public")
    env = isolated_env(tmp_path, {"UV_DEFAULT_INDEX": index.url, "JETSON_INSTALL_WHEELS_INDEX": str(catalog),
                                  "UV_PYTHON": sys.executable})
    return Stand(env, vendor, index, public)


def _uv(env: Dict[str, str], cwd: Path, *args: str, extra: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([find_uv(), *args], cwd=str(cwd), env={**env, **(extra or {})}, capture_output=True,
                          text=True, timeout=300)


def _jetson_venv(env: Dict[str, str], project: Path) -> Path:
    """PROJECT/.venv, whose interpreter reports an Orin's machine and kernel to uv."""
    made = _uv(env, project, "venv", ".venv", "--python", sys.executable)
    assert made.returncode == 0, made.stderr
    (site,) = (project / ".venv" / "lib").glob("python*/site-packages")
    (site / "_as_a_jetson.pth").write_text(f"import platform; platform.machine = lambda: 'aarch64'; "
                                          f"platform.release = lambda: '{ORIN_KERNEL}'\n")
    return site / "_as_a_jetson.pth"


def _installed(venv: Path) -> Dict[str, str]:
    """name -> version of what the environment holds, from its dist-info folders."""
    found = {}
    for dist_info in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, version = dist_info.name[:-len(".dist-info")].split("-", 1)
        found[name.lower().replace("_", "-")] = version
    return found


def _export(stand: Stand, project: Path, *more: str) -> None:
    result = run_cli("export", "--uv", "--channel", "jp6-cu126", "--vendor-index", stand.vendor.url, *more,
                     str(project), env=stand.env)
    assert result.returncode == 0, result.stderr


def _doctor(stand: Stand, project: Path) -> List[str]:
    result = run_cli("doctor", "--venv", ".venv", "--root", ORIN, env=stand.env, cwd=project)
    return [f"rc={result.returncode}"] + result.stdout.splitlines()


def _refused_add(stand: Stand, project: Path) -> None:
    """`uv add` of a package asking for torch>=2.9: uv's resolver refuses it, and nothing changes."""
    before = {name: (project / name).read_bytes() for name in ("pyproject.toml", "uv.lock")}
    added = _uv(stand.env, project, "add", "needs-torch-29")
    assert added.returncode != 0, added.stdout + added.stderr
    assert "needs-torch-29" in added.stderr and "torch{" in added.stderr and f"=={GATE_TORCH}" in added.stderr
    assert {name: (project / name).read_bytes() for name in before} == before
    assert _installed(project / ".venv")["torch"] == GATE_TORCH


def test_a_project_syncs_the_vendor_stack_on_a_jetson_and_its_own_torch_on_a_workstation(
        tmp_path: Path, stand: Stand) -> None:
    project = tmp_path / "analysis"
    project.mkdir()
    dependencies = "".join(f'    "{d}",\n' for d in OBLITERATUS_DEPENDENCIES + ("bitsandbytes>=0.46.1",))
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "analysis"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = [\n{dependencies}]\n')
    _export(stand, project)
    locked = _uv(stand.env, project, "lock")
    assert locked.returncode == 0, locked.stderr
    lock = (project / "uv.lock").read_text()
    assert f'name = "torch"\nversion = "{GATE_TORCH}"\nsource = {{ registry = "{stand.vendor.url}" }}' in lock
    assert f'name = "torch"\nversion = "2.9.0"\nsource = {{ registry = "{stand.public.url}" }}' in lock

    hook = _jetson_venv(stand.env, project)
    synced = _uv(stand.env, project, "sync")
    assert synced.returncode == 0, synced.stderr
    jetson = _installed(project / ".venv")
    assert (jetson["torch"], jetson["bitsandbytes"], jetson["numpy"]) == (GATE_TORCH, "0.46.1", "1.26.4")

    # The workstation sharing the lock: the default index's torch, nothing of the vendor's.
    workstation = _uv(stand.env, project, "sync", extra={"UV_PROJECT_ENVIRONMENT": str(tmp_path / "workstation")})
    assert workstation.returncode == 0, workstation.stderr
    assert (_installed(tmp_path / "workstation")["torch"], _installed(tmp_path / "workstation")["bitsandbytes"]) == (
        "2.9.0", "0.49.0")

    _refused_add(stand, project)

    hook.unlink()
    doctor = _doctor(stand, project)
    assert doctor[0] == "rc=0", "\n".join(doctor)
    assert f"✓ torch is the vendor CUDA build [torch-build]: torch {GATE_TORCH}, CUDA 12.6, pin {GATE_TORCH}" in doctor
    assert any(line.startswith("· OBLITERATUS uses cuda [obliteratus]: OBLITERATUS's own check: OBLITERATUS is not "
                               "installed in this environment") for line in doctor), "\n".join(doctor)

    # Another torch swapped in by hand (outside the project, so none of its settings apply).
    swapped = _uv(stand.env, tmp_path, "pip", "install", "--python", str(venv_python(project / ".venv")), "torch==2.9.0")
    assert swapped.returncode == 0, swapped.stderr
    doctor = _doctor(stand, project)
    assert doctor[0] == "rc=1"
    assert any(line.startswith("✗ torch is the vendor CUDA build [torch-build]") for line in doctor), "\n".join(doctor)


def test_the_stub_obliteratus_source_with_its_own_lock(tmp_path: Path, stand: Stand) -> None:
    project = make_obliteratus_source(tmp_path / "OBLITERATUS")
    own = _uv(stand.env, project, "lock")
    assert own.returncode == 0, own.stderr
    own_lock = (project / "uv.lock").read_text()
    assert stand.vendor.url not in own_lock  # its own lock: torch from the default index everywhere

    _export(stand, project)
    relocked = _uv(stand.env, project, "lock")
    assert relocked.returncode == 0, relocked.stderr
    assert f'version = "{GATE_TORCH}"\nsource = {{ registry = "{stand.vendor.url}" }}' in (project / "uv.lock").read_text()

    hook = _jetson_venv(stand.env, project)
    synced = _uv(stand.env, project, "sync")
    assert synced.returncode == 0, synced.stderr
    jetson = _installed(project / ".venv")
    assert (jetson["torch"], jetson["bitsandbytes"], jetson["obliteratus"]) == (GATE_TORCH, "0.46.1", "0.1.3")

    _refused_add(stand, project)

    hook.unlink()
    doctor = _doctor(stand, project)
    assert doctor[0] == "rc=0", "\n".join(doctor)
    assert any(line.startswith("✓ OBLITERATUS uses cuda [obliteratus]") for line in doctor), "\n".join(doctor)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_index_builds_are_held_by_version_and_the_lock_by_sha256(tmp_path: Path, stand: Stand) -> None:
    """The Thor channels' builds come from uv's default index, which no source can pin to a
    file: the group and the constraints pin the versions, uv.lock records the sha256 of each
    file the index served, and uv sync installs nothing else."""
    torch = build_wheel(stand.public_dir, "torch", "2.13.0", requires=("filelock",), source_index="public")
    build_wheel(stand.public_dir, "torchvision", "0.28.0", requires=("torch==2.13.0",), source_index="public")
    project = tmp_path / "thor"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "thor"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = ["torch"]\n')
    env = {**stand.env}
    del env["JETSON_INSTALL_WHEELS_INDEX"]  # the real catalog's jp7.2-thor
    result = run_cli("export", "--uv", "--channel", "jp7.2-thor", str(project), env=env)
    assert result.returncode == 0, result.stderr
    relocked = _uv(env, project, "lock")
    assert relocked.returncode == 0, relocked.stderr
    lock = (project / "uv.lock").read_text()
    locked = _sha256(torch)
    assert f'{torch.name}", hash = "sha256:{locked}"' in lock

    # The file changes on the index after the lock: uv sync refuses it (a cache of its own, so
    # the file is fetched again).
    build_wheel(stand.public_dir, "torch", "2.13.0", requires=("filelock",), source_index="swapped")
    served = _sha256(torch)
    assert served != locked
    _jetson_venv(env, project)
    synced = _uv(env, project, "sync", extra={"UV_CACHE_DIR": str(tmp_path / "fresh-cache")})
    assert synced.returncode != 0
    assert "hash mismatch" in synced.stderr.lower(), synced.stderr
    assert f"sha256:{locked}" in synced.stderr and f"sha256:{served}" in synced.stderr
    assert "torch" not in _installed(project / ".venv")


def test_a_source_scoped_to_a_group_loses_its_marker_so_one_lock_holds_one_channel(tmp_path: Path, stand: Stand) -> None:
    """Why export --uv writes one channel (docs/uv-projects.md, "What markers cannot tell
    apart"): two channels as exclusive groups, each source scoped to its group and held to
    Jetsons by the marker, and the workstation that syncs the default group takes that group's
    vendor torch all the same (uv 0.13.9). Where this test fails, uv keeps the marker, and a
    lock could hold a group per channel."""
    board = "sys_platform == 'linux' and platform_machine == 'aarch64' and 'tegra' in platform_release"
    project = tmp_path / "two-channels"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'''[project]
name = "two-channels"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["torch>=2.0"]

[dependency-groups]
jetson-a = ["torch=={GATE_TORCH} ; {board}"]
jetson-b = ["torch==2.6.0 ; {board}"]

[tool.uv]
default-groups = ["jetson-a"]
conflicts = [[{{ group = "jetson-a" }}, {{ group = "jetson-b" }}]]

[tool.uv.sources]
torch = [
    {{ index = "jetson-a", marker = "{board}", group = "jetson-a" }},
    {{ index = "jetson-b", marker = "{board}", group = "jetson-b" }},
]

[[tool.uv.index]]
name = "jetson-a"
url = "{stand.vendor.url}"
explicit = true

[[tool.uv.index]]
name = "jetson-b"
url = "{stand.public.url}"
explicit = true
''')
    locked = _uv(stand.env, project, "lock")
    assert locked.returncode == 0, locked.stderr
    workstation = _uv(stand.env, project, "sync", extra={"UV_PROJECT_ENVIRONMENT": str(tmp_path / "workstation")})
    assert workstation.returncode == 0, workstation.stderr
    assert _installed(tmp_path / "workstation")["torch"] == GATE_TORCH  # the vendor's, on a machine no marker named
