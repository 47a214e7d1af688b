"""A vendor index and catalog under which a whole install passes the strict doctor gate.

The vendor torch and bitsandbytes are the doctor's stubs (tests/doctor_stubs/) packed as
wheels, with the scenario they read inside the torch wheel; the catalog is the real
wheels-index.toml with jp6-cu126's source describing them and built for the test interpreter's Python.
Everything else (OBLITERATUS' dependencies) comes from the usual stub public index.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

from .catalogs import stub_catalog_text
from .wheels import build_wheel

STUBS = Path(__file__).resolve().parent.parent / "doctor_stubs"
TOP = STUBS.parent.parent
GATE_TORCH = "2.8.0"
GATE_BITSANDBYTES = "0.46.1"
# A working AGX Orin 64GB: what the doctor stubs report.
GATE_SCENARIO: Dict[str, Any] = {
    "torch_version": GATE_TORCH,
    "torch_cuda": "12.6",
    "cuda_available": True,
    "device_count": 1,
    "device_name": "Orin (nvgpu)",
    "capability": [8, 7],
    "total_memory": 64_330_000_000,
    "arch_list": ["sm_87"],
    "numpy_version": "1.26.4",
    "bnb_version": GATE_BITSANDBYTES,
    "bnb_library": "cuda",
}


def _package_modules(name: str) -> Dict[str, str]:
    return {f"{name}/{path.name}": path.read_text() for path in sorted((STUBS / name).glob("*.py"))}


def make_gate_vendor_index(dest: Path) -> Path:
    modules = _package_modules("torch")
    modules["doctor_stub_scenario.py"] = (STUBS / "doctor_stub_scenario.py").read_text()
    modules["doctor_stub_scenario.json"] = json.dumps(GATE_SCENARIO)
    build_wheel(dest, "torch", GATE_TORCH, modules=modules, requires_python=">=3.8")
    build_wheel(dest, "bitsandbytes", GATE_BITSANDBYTES, modules=_package_modules("bitsandbytes"),
                requires=("torch",))
    return dest


def make_gate_catalog(path: Path, vendor_dir: Path) -> Path:
    sets = [{"torch": GATE_TORCH, "bitsandbytes": GATE_BITSANDBYTES}]
    text = stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir, sets=sets, preferred=GATE_TORCH,
                             known=("torch", "bitsandbytes"))
    start = text.index('id = "jp6-cu126"')
    host = "%d.%d" % sys.version_info[:2]
    text = text[:start] + text[start:].replace('python = "3.10"', f'python = "{host}"', 1)
    path.write_text(text)
    return path
