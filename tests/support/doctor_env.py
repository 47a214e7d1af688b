"""Stub torch/bitsandbytes environments for the doctor, and the doctor run over them.

`make_env` makes a venv without pip whose site-packages hold tests/doctor_stubs/, each with
the dist-info an installer writes (its RECORD too), which answer from a scenario (WORKING with
changes); `run` runs the doctor and checks its evidence
against the schema. The `clean_pip_check` fixture (support.fixtures) stands in for uv.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import jsonschema

from jetson_install import doctor
from jetson_install.catalog.catalog import Channel, VendorSource
from jetson_install.board.platform import Platform
from jetson_install.board.release_files import L4T
from jetson_install.envs.manifest import DistributionFiles, write_manifest

from .stub_stack import JETSON_STACK, write_record

__all__ = ["stub_ptxas", "board_python", "SYSTEM_PYTHON", "HOST_PYTHON", "HOST_TAG", "JP6", "JP6_SOURCE", "ORIN", "SCHEMA", "WORKING", "make_env", "run", "write_vendor_manifest"]

STUBS = Path(__file__).resolve().parent.parent / "doctor_stubs"
STUB_PACKAGES = {
    "torch": "torch_version",
    "bitsandbytes": "bnb_version",
    "numpy": "numpy_version",
    "obliteratus": None,
    "transformers": "transformers_version",
}
HOST_PYTHON = "%d.%d" % sys.version_info[:2]
HOST_TAG = "cp%d%d" % sys.version_info[:2]

WORKING: Dict[str, Any] = {
    **JETSON_STACK,  # the same Orin stack the existing-torch tests inspect
    "transformers_version": "5.20.2",
    "transformers_torch_floor": "2.6",
    # What the installed wheels' WHEEL files say (python-abi judges these).
    "torch_tag": f"{HOST_TAG}-{HOST_TAG}-linux_aarch64",
    "bnb_tag": "py3-none-manylinux_2_24_aarch64",
    # A Triton whose two assemblers (its ptxas and ptxas-blackwell, by CUDA release) assemble
    # every architecture; `triton_rejects` lists those its ptxas-blackwell refuses, as Triton
    # 3.6's CUDA 12.9 one refuses sm_110a (pytorch/pytorch#170117).
    "triton_version": "3.7.1",
    "triton_ptxas_release": "12.8",
    "triton_blackwell_release": "13.1",
    "triton_rejects": [],
}

ORIN = Platform(
    root="/",
    jetson=True,
    l4t=L4T(36, 4, 3),
    jetpack="6.2",
    cuda="12.6",
    soc="tegra234",
    family="Orin",
    module="NVIDIA Jetson Orin Nano Developer Kit",
    model="NVIDIA Jetson Orin Nano Developer Kit",
    compute_capability="8.7",
    kind="tegra",
    ubuntu="22.04",
    python="3.10",
    kernel="5.15.148-tegra",
    arch="aarch64",
)

# The channel's Python is the test interpreter's, so python-abi passes in the stub venvs.
JP6_SOURCE = VendorSource.pinned(
    index="https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/",
    wheels=(),
    pins={"torch": "2.8.0", "bitsandbytes": "0.46.1"},
    numpy="<2",
    apt=("libopenblas-dev", "libcusparselt0"),
)
JP6 = Channel(
    id="jp6-cu126",
    title="JetPack 6.1-6.2 (CUDA 12.6)",
    l4t_from=(36, 4),
    l4t_below=(37, 0),
    families=("Orin",),
    jetpack="6.1-6.2.x",
    cuda="12.6",
    python=HOST_PYTHON,
    kind="tegra",
    status="supported",
    reason="",
    remedy="",
    sources=(JP6_SOURCE,),
)


SCHEMA = doctor.evidence_schema()
# The schema checked and its validator made once: jsonschema.validate does both on each call,
# which costs more than checking a doctor's evidence.
_VALIDATOR_CLASS = jsonschema.validators.validator_for(SCHEMA)
_VALIDATOR_CLASS.check_schema(SCHEMA)
_EVIDENCE_VALIDATOR = _VALIDATOR_CLASS(SCHEMA)


_PTXAS = """#!/bin/sh
# A stand-in ptxas: answers --version with its CUDA release, refuses the architectures it is
# made without (in ptxas' own words), and writes the -o file for the others.
arch="" out="" previous=""
for arg in "$@"; do
    case "$arg" in
        --version) printf 'ptxas: NVIDIA (R) Ptx optimizing assembler\\nCuda compilation tools, release {release}, V{release}.0\\n'; exit 0;;
        --gpu-name=*) arch="${{arg#--gpu-name=}}";;
    esac
    [ "$previous" = "-o" ] && out="$arg"
    previous="$arg"
done
case " {rejects} " in
    *" $arch "*) echo "ptxas fatal   : Value '$arch' is not defined for option 'gpu-name'" >&2; exit 255;;
esac
[ -n "$out" ] && : > "$out"
exit 0
"""


def stub_ptxas(path: Path, release: str, rejects: Sequence[str] = ()) -> Path:
    """A stand-in ptxas at `path` of CUDA `release` that refuses `rejects` ("sm_110a")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_PTXAS.format(release=release, rejects=" ".join(rejects)))
    path.chmod(0o755)
    return path


def _stub_triton(site_packages: Path, scenario: Dict[str, Any]) -> None:
    """The parts of a Triton the doctor reads: its package folder (never imported), its
    dist-info, and its assemblers under backends/nvidia/bin."""
    package = site_packages / "triton"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the stub Triton is for its assemblers only')\n")
    binaries = package / "backends" / "nvidia" / "bin"
    stub_ptxas(binaries / "ptxas", scenario["triton_ptxas_release"])
    stub_ptxas(binaries / "ptxas-blackwell", scenario["triton_blackwell_release"], scenario["triton_rejects"])
    dist_info = site_packages / f"triton-{scenario['triton_version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: triton\nVersion: {scenario['triton_version']}\n")
    write_record(dist_info, ("triton",))


def make_env(root: Path, **changes: Any) -> str:
    """A venv without pip whose site-packages holds the stubs and the scenario they read;
    `base=PYTHON` among the changes: the interpreter it is made from (the board's kind:
    board_python()), else this one."""
    base: Optional[str] = changes.pop("base", None)
    if base is None:
        # What `python -m venv --without-pip` makes, without starting a Python for it.
        venv.EnvBuilder(with_pip=False).create(str(root))
    else:
        subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True, timeout=120)
        (site,) = root.glob("lib/python*/site-packages")
        abi = "cp" + site.parent.name[len("python"):].replace(".", "")
        changes.setdefault("torch_tag", f"{abi}-{abi}-linux_aarch64")  # the wheel its Python takes
    manifest: bool = changes.pop("manifest", True)
    scenario = dict(WORKING, **changes)
    (site_packages,) = root.glob("lib/python*/site-packages")
    # The module the stubs read their scenario with is torch's (the gate's torch wheel holds it too).
    shutil.copy(STUBS / "doctor_stub_scenario.py", site_packages)
    for name, version_key in STUB_PACKAGES.items():
        version = scenario[version_key] if version_key else "0.1.2"
        if version is None:  # not installed
            continue
        shutil.copytree(STUBS / name, site_packages / name)
        dist_info = site_packages / f"{name}-{version}.dist-info"
        dist_info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        if name == "transformers":  # what its wheel says, e.g. transformers 5.20.2
            metadata += f'Requires-Dist: torch>={scenario["transformers_torch_floor"]}; extra == "torch"\n'
        (dist_info / "METADATA").write_text(metadata)
        tag = scenario.get({"torch": "torch_tag", "bitsandbytes": "bnb_tag"}.get(name, ""))
        if tag:
            (dist_info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
        write_record(dist_info, (name, "doctor_stub_scenario.py") if name == "torch" else (name,))
    if scenario["triton_version"] is not None:
        _stub_triton(site_packages, scenario)
    (site_packages / "doctor_stub_scenario.json").write_text(json.dumps(scenario))
    if manifest:  # what an install writes: the vendor builds' files as their wheels hold them
        write_vendor_manifest(root, [name for name in ("torch", "bitsandbytes") if scenario[STUB_PACKAGES[name] or ""]])
    return str(root / "bin" / "python")


def write_vendor_manifest(environment: Path, names: Sequence[str]) -> Path:
    """The environment's vendor-files.json for `names`, each file as its installed RECORD lists
    it (what its wheel held: the installer's own files of the dist-info left out), hashed now."""
    (site_packages,) = environment.glob("lib/python*/site-packages")
    entries = []
    for name in names:
        (dist_info,) = site_packages.glob(f"{name}-*.dist-info")
        files = {}
        for line in (dist_info / "RECORD").read_text().splitlines():
            path = line.rsplit(",", 2)[0]
            if path.startswith(f"{dist_info.name}/") and path.split("/", 1)[1] in (
                    "RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            files[path] = hashlib.sha256((site_packages / path).read_bytes()).hexdigest()
        version = dist_info.name[len(name) + 1: -len(".dist-info")]
        entries.append(DistributionFiles(name, version, f"{name}-{version}-py3-none-any.whl", "0" * 64, True, files))
    return write_manifest(environment, entries)


def run(python: str, *, platform: Optional[Platform] = ORIN, channel: Optional[Channel] = JP6, **options: Any) -> doctor.DoctorReport:
    progress = options.pop("progress", None)  # the run's, not the request's
    report = doctor.run_doctor(doctor.DoctorRequest(python, platform, channel, **options), progress)
    evidence = report.to_json()
    error = jsonschema.exceptions.best_match(_EVIDENCE_VALIDATOR.iter_errors(evidence))  # what validate raises
    if error is not None:
        raise error
    json.dumps(evidence)  # serialisable as is
    return report


#: The boards' kind of interpreter: Debian's (Ubuntu's, on JetPack) own python3, whose patched
#: site.py reads dist-packages folders (tests/setup.d/05-system-python installs it with apt).
SYSTEM_PYTHON = "/usr/bin/python3"


def board_python() -> str:
    """Debian's /usr/bin/python3 with its patched site.py; where this machine has none, the
    test skips with one line (fails under CI=true), as a lane does."""
    from .lanes import lane_unavailable

    try:
        said = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", "import site, venv; print(site.getsitepackages(['/p']))"],
                              capture_output=True, text=True, timeout=60)
    except OSError as error:
        lane_unavailable("board-python", f"no {SYSTEM_PYTHON} ({error.strerror}); run tests/setup (05-system-python)")
    if said.returncode != 0 or "dist-packages" not in said.stdout:
        lane_unavailable("board-python", f"{SYSTEM_PYTHON} is not Debian's (its site.py reads no dist-packages folder, "
                                         f"or it has no venv module): {said.stdout.strip() or said.stderr.strip()[-200:]}")
    return SYSTEM_PYTHON
