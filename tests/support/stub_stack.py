"""Install the doctor's stub CUDA torch stack (tests/doctor_stubs/) into a site-packages
directory as real distributions, each with a dist-info RECORD: a stand-in for the torch an
L4T PyTorch image or a system install carries, for the existing-torch lane.

Run as a script by tests/setup.d/20-container-base to fill the base image's dist-packages:
    python3 tests/support/stub_stack.py SITE_PACKAGES
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterable

STUBS = Path(__file__).resolve().parent.parent / "doctor_stubs"

#: An Orin with JetPack 6.2's CUDA 12.6 torch, NumPy 1 and a CUDA bitsandbytes.
JETSON_STACK: Dict[str, Any] = {
    "torch_version": "2.8.0",
    "torch_cuda": "12.6",
    "cuda_available": True,
    "device_count": 1,
    "device_name": "Orin (nvgpu)",
    "capability": [8, 7],
    "total_memory": 7_990_000_000,
    "arch_list": ["sm_87"],
    "numpy_version": "1.26.4",
    "bnb_version": "0.46.1",
    "bnb_library": "cuda",
}
_VERSION_KEYS = {"torch": "torch_version", "bitsandbytes": "bnb_version", "numpy": "numpy_version"}


def install_stub_stack(site_packages: Path, packages: Iterable[str] = ("torch", "bitsandbytes", "numpy"),
                       **changes: Any) -> Dict[str, Any]:
    """Copy the chosen stub packages in with dist-info and the scenario they read; return the scenario."""
    scenario = dict(JETSON_STACK, **changes)
    site_packages.mkdir(parents=True, exist_ok=True)
    shutil.copy(STUBS / "doctor_stub_scenario.py", site_packages)
    (site_packages / "doctor_stub_scenario.json").write_text(json.dumps(scenario))
    for name in packages:
        shutil.copytree(STUBS / name, site_packages / name, ignore=shutil.ignore_patterns("__pycache__"))
        _write_dist_info(site_packages, name, scenario[_VERSION_KEYS[name]])
    return scenario


def _write_dist_info(site_packages: Path, name: str, version: str) -> None:
    dist_info = site_packages / f"{name}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist_info / "INSTALLER").write_text("stub\n")
    # The module the stubs read their scenario with is torch's, as in the gate's torch wheel.
    write_record(dist_info, (name, "doctor_stub_scenario.py") if name == "torch" else (name,))


def write_record(dist_info: Path, tops: Iterable[str]) -> None:
    """The dist-info's RECORD, as an installer writes it: every file of its top-level folders
    (or files) and of the dist-info itself, with its sha256 and size (the RECORD's own line has
    neither)."""
    site_packages = dist_info.parent
    rows = []
    for top in (*tops, dist_info.name):
        found = site_packages / top
        for path in sorted(found.rglob("*")) if found.is_dir() else [found]:
            if path.is_file() and "__pycache__" not in path.parts and path.name != "RECORD":
                digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
                rows.append(f"{path.relative_to(site_packages).as_posix()},sha256={digest},{path.stat().st_size}")
    rows.append(f"{dist_info.name}/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    install_stub_stack(Path(sys.argv[1]))
