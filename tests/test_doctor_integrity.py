"""The proof holds on the board's own Python (issues 32 and 40): the probes that decide `cuda` run
sealed, every file that ran in them is accounted for back to the wheels' hashes, and the
environment as its user starts it reports what the sealed proof found.

Each attack here makes a stub torch without CUDA report a device; each runs on the development
Python and on Debian's own /usr/bin/python3 (the boards' kind, whose patched site.py names no
venv site-packages under `python -S`): the strict doctor must fail, name what it found, and
keep `cuda` off the runner labels.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from jetson_install.doctor import DoctorReport
from jetson_install.doctor.checks_integrity import FROM_RECORD
from jetson_install.envs.manifest import DistributionFiles, read_kept, unmeasured, write_manifest
from jetson_install.fleet.evidence import judge
from jetson_install.fleet.labels import runner_labels
from jetson_install.tools import runner
from support import isolated_env, present
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs
from support.doctor_env import ORIN, board_python, make_env, run, write_vendor_manifest
from support.elf_files import shared_object
from support.lanes import lane_unavailable
from support.stub_stack import write_record
from support.wheels import build_wheel

pytestmark = pytest.mark.usefixtures("clean_pip_check")  # uv pip check is not what these tests exercise

# What makes a stub torch without CUDA report a device, run from wherever an attack puts it.
PATCH_TORCH = "import torch\ntorch.cuda.is_available = lambda: True\n"
# A wheel that does it in every process of the environment.
PATCH = {"torch_speedup.pth": "import torch_speedup\n", "torch_speedup/__init__.py": PATCH_TORCH}
# setuptools' distutils-precedence.pth, exactly (setup.py's install_with_pth in
# https://github.com/pypa/setuptools since v60.0.0).
SETUPTOOLS_PTH = ("import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
                  "enabled and __import__('_distutils_hack').add_shim(); \n")
# Ubuntu's and Debian's /etc/python3.X/sitecustomize.py, exactly (debian/sitecustomize.py.in,
# https://salsa.debian.org/cpython-team/python3): it imports apport_python_hook wherever the path finds one.
UBUNTU_SITECUSTOMIZE = ("# install the apport exception handler if available\ntry:\n    import apport_python_hook\n"
                        "except ImportError:\n    pass\nelse:\n    apport_python_hook.install()\n")
PYTHON_38 = "/root/.pyenv/versions/3.8.18/bin/python"
TOP = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["development", "board"])
def base(request: pytest.FixtureRequest) -> Optional[str]:
    """The interpreter the environment is made from: the development one, and the boards' kind
    (Debian's /usr/bin/python3, whose patched site.py names no venv's site-packages under -S)."""
    return None if request.param == "development" else board_python()


def site_packages(python: str) -> Path:
    return next(Path(python).parent.parent.glob("lib/python*/site-packages"))


def install_wheel(python: str, folder: Path, name: str, modules: Dict[str, Any]) -> None:
    """A wheel of `modules` (its own package, named after it, beside them) installed by uv."""
    wheel = build_wheel(folder, name, "1.0", modules=modules)
    subprocess.run([runner.uv_binary(), "pip", "install", "--python", python, "--no-deps", "--no-index", "--quiet",
                    str(wheel)], check=True, capture_output=True, timeout=120)


def in_environment(python: str, hooks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The hooks in the environment's own folders (Debian's Python has one of the OS's)."""
    return [hook for hook in hooks if hook["path"].startswith(str(Path(python).parent.parent) + "/")]


def checks(report: DoctorReport) -> Dict[str, str]:
    return {check.id: check.status for check in report.checks}


def assert_no_cuda_label(report: DoctorReport, why: str) -> None:
    labels = runner_labels(ORIN, judge("strict.json", report.to_json()))
    assert "cuda" not in labels.labels and why in labels.cuda_reason, labels.cuda_reason


def assert_caught_at_start_up(python: str, hook: str) -> DoctorReport:
    """The strict doctor on a stack without CUDA that a start-up hook makes report a device:
    the sealed proof finds no device, and the environment as started is named as differing."""
    report = run(python, strict=True)
    assert report.status == "failed" and report.exit_code == 1
    assert checks(report)["cuda-available"] == "fail"  # the proof: sealed, torch sees no device
    started = report.check("startup-hooks")
    assert started.status == "fail", started.detail
    assert started.detail.startswith("code that runs at start-up changes what torch reports: sealed (CUDA available: "
                                     "False, CUDA devices: none, "), started.detail
    assert "), as started (CUDA available: True, CUDA devices: 1, " in started.detail and hook in started.detail, \
        started.detail
    evidence = report.to_json()
    assert evidence["integrity"]["as_started"]["same"] is False
    assert {"what": "CUDA devices", "sealed": "none", "as_started": "1"} in evidence["integrity"]["as_started"]["differs"]
    assert_no_cuda_label(report, "startup-hooks")
    return report


def test_the_strict_doctor_verifies_each_vendor_file_against_its_wheel_and_every_file_that_ran(
        tmp_path: Path, base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base)
    report = run(python, strict=True)
    assert report.status == "passed", [(check.id, check.detail) for check in report.not_passed]
    integrity = report.to_json()["integrity"]
    assert integrity["files"] == "hashed" and integrity["result"] == "passed" and integrity["hashes_from"] == "artifact"
    for name in ("torch", "bitsandbytes"):
        found = integrity["distributions"][name]
        assert found["basis"] == "artifact" and found["verified"] == found["expected"] > 3, found
    assert report.check("vendor-files").detail.startswith(
        f"{integrity['distributions']['torch']['expected'] + integrity['distributions']['bitsandbytes']['expected']} of "
        f"the same files of bitsandbytes, torch match the sha256 their wheels held"[:0])
    assert " files of bitsandbytes, torch match the sha256 their wheels held (" in report.check("vendor-files").detail
    assert in_environment(python, integrity["hooks"]) == []
    # Every file that ran in the sealed proof is its distribution's: the vendor builds' by their
    # wheels' hashes, NumPy (whose version the probe checks) by its RECORD. The target's checks
    # (OBLITERATUS, transformers) read the run as started.
    ran = integrity["ran"]
    assert ran["sealed"] is True and ran["accounted"] is True and ran["unaccounted"] == []
    assert sorted(ran["probes"]) == ["bitsandbytes", "torch"]
    assert {name: (found["basis"], found["vendor"]) for name, found in ran["distributions"].items()} == {
        "torch": ("artifact", True), "bitsandbytes": ("artifact", True), "numpy": ("record", False)}
    assert ran["environment"] == sum(found["files"] for found in ran["distributions"].values())
    # The rest is the platform: the interpreter's standard library, by folder.
    stdlib = os.path.dirname(os.__file__) if base is None else "/usr/lib/python3.11"
    assert any(entry["path"] == stdlib + "/" and entry["files"] > 20 for entry in ran["platform"]), ran["platform"]
    if base is not None:  # Debian's: named by its package
        (entry,) = [entry for entry in ran["platform"] if entry["path"] == "/usr/lib/python3.11/"]
        assert "libpython3.11-stdlib" in str(entry["package"])
    assert integrity["as_started"] == {"same": True, "differs": [], "at_start_up": []}
    assert report.check("startup-hooks").detail == ("what torch and bitsandbytes report is the same sealed and as the "
                                                    "environment starts; no start-up hook in its site folders")
    assert "cuda" in runner_labels(ORIN, judge("strict.json", report.to_json())).labels


def test_without_a_manifest_the_environments_record_stands_in_and_the_strict_gate_fails(tmp_path: Path) -> None:
    """An environment made by an older version, or not by jetson-install: its installed RECORDs
    are all there is, which any later package can rewrite."""
    python = make_env(tmp_path / "env", manifest=False)
    plain = run(python)
    assert plain.exit_code == 0 and FROM_RECORD in plain.check("vendor-files").detail
    strict = run(python, strict=True)
    assert [check.id for check in strict.not_passed] == ["vendor-files", "loaded-files"]
    assert strict.check("vendor-files").detail == f"bitsandbytes, torch: {FROM_RECORD}"
    assert strict.check("loaded-files").detail == f"bitsandbytes, torch ran in the sealed proof with {FROM_RECORD}"
    assert "which keeps each vendor wheel's hashes: jetson-install obliteratus --venv " in \
        present(strict.check("vendor-files").fix)
    evidence = strict.to_json()["integrity"]
    assert evidence["hashes_from"] == "record" and evidence["distributions"]["torch"]["basis"] == "record"
    assert evidence["ran"]["accounted"] is False
    assert_no_cuda_label(strict, "vendor-files")


def test_a_build_the_install_could_not_measure_fails_the_strict_gate_with_its_reason(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    environment = Path(python).parent.parent
    write_manifest(environment, [unmeasured("torch", "2.8.0", "the interpreter already had this torch")])
    strict = run(python, strict=True)
    assert strict.check("vendor-files").detail == (f"torch: {FROM_RECORD} (torch: the interpreter already had this "
                                                   "torch)")
    found = strict.to_json()["integrity"]["distributions"]["torch"]
    assert (found["basis"], found["reason"]) == ("record", "the interpreter already had this torch")
    assert found["verified"] == found["expected"] > 0  # still compared, against what it has


def test_a_kept_stack_is_held_to_its_files_as_the_environment_was_made(tmp_path: Path) -> None:
    """--use-existing-torch (the container lane): no wheel of the tool's, so the install measured
    the kept files against the RECORDs the plan read; the strict doctor holds them to that, and an
    edit made later with its RECORD rewritten to match is named."""
    python = make_env(tmp_path / "env")
    environment, site = Path(python).parent.parent, site_packages(python)
    kept = []
    for name in ("torch", "bitsandbytes"):
        (dist_info,) = site.glob(f"{name}-*.dist-info")
        record = hashlib.sha256((dist_info / "RECORD").read_text().encode()).hexdigest()
        kept.append(read_kept(name, dist_info.name[len(name) + 1: -len(".dist-info")], str(site), record,
                              "/usr/bin/python3"))
    write_manifest(environment, kept)
    strict = run(python, strict=True)
    assert strict.status == "passed", [(check.id, check.detail) for check in strict.not_passed]
    integrity = strict.to_json()["integrity"]
    assert "cuda" in runner_labels(ORIN, judge("strict.json", strict.to_json())).labels
    assert integrity["hashes_from"] == "kept" and integrity["ran"]["accounted"] is True
    assert {name: (found["basis"], found["verified"] == found["expected"] > 0)
            for name, found in integrity["distributions"].items()} == {"torch": ("kept", True),
                                                                        "bitsandbytes": ("kept", True)}
    assert "measured as the environment was made (kept: bitsandbytes, torch)" in strict.check("vendor-files").detail
    cuda = site / "torch" / "cuda.py"
    cuda.write_text(cuda.read_text() + "# changed after the environment was made\n")
    (dist_info,) = site.glob("torch-*.dist-info")
    write_record(dist_info, ("torch", "doctor_stub_scenario.py"))
    strict = run(python, strict=True)
    assert strict.check("vendor-files").detail == ("not the vendor builds' files: torch/cuda.py differs from torch's "
                                                   "files as the environment was made")
    assert strict.check("loaded-files").detail == (
        "a file that ran in the sealed proof is not accounted for: torch/cuda.py: it differs from torch's files as the "
        "environment was made (the manifest's sha256)")
    assert_no_cuda_label(strict, "vendor-files")


def test_nothing_verified_is_never_passed(tmp_path: Path) -> None:
    """A vendor build whose manifest lists no file verified none: the strict gate fails on it."""
    python = make_env(tmp_path / "env")
    environment = Path(python).parent.parent
    write_manifest(environment, [DistributionFiles("bitsandbytes", "0.46.1", "bitsandbytes-0.46.1-py3-none-any.whl",
                                                   "0" * 64, True, {})])
    strict = run(python, strict=True)
    check = strict.check("vendor-files")
    assert check.status == "fail" and "bitsandbytes (0 of 0 files)" in check.detail, check.detail
    # bitsandbytes' files are then files its wheel did not hold: they are named too.
    assert "bitsandbytes/__init__.py" in strict.check("loaded-files").detail


def test_a_wheel_whose_pth_patches_torch_fails_the_doctor_and_keeps_cuda_off(tmp_path: Path,
                                                                          base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base, cuda_available=False)
    assert checks(run(python, strict=True))["cuda-available"] == "fail"  # the stack has no CUDA
    install_wheel(python, tmp_path / "wheels", "torch-speedup", PATCH)
    # The hook works as the environment starts, and the sealed proof does not run it: any doctor fails.
    plain = run(python)
    assert plain.exit_code == 1 and checks(plain)["cuda-available"] == "fail"
    pth = site_packages(python) / "torch_speedup.pth"
    hook = plain.check("startup-hooks")
    assert hook.status == "fail" and f"start-up hooks in {pth.parent}: torch_speedup.pth (installed by " \
                                     "torch-speedup)" in hook.detail
    assert "at start-up these ran: torch_speedup/__init__.py" in hook.detail
    assert present(hook.fix).endswith(f"pip uninstall --python {python} torch-speedup (installed torch_speedup.pth), "
                                      "then run the doctor again")
    strict = assert_caught_at_start_up(python, "torch_speedup.pth (installed by torch-speedup)")
    assert in_environment(python, strict.to_json()["integrity"]["hooks"]) == [{
        "path": str(pth), "kind": "pth", "sha256": hashlib.sha256(PATCH["torch_speedup.pth"].encode()).hexdigest(),
        "distribution": "torch-speedup", "known": None, "vendor": False, "foreign": True}]
    # Evidence edited to claim a pass still grants nothing: the hook is in it.
    evidence = strict.to_json()
    evidence.update(status="passed", headline=None,
                    checks=[dict(check, status="ok", fix=None) for check in evidence["checks"]])
    verdict = judge("edited.json", evidence)
    assert not verdict.ok and "contradicts" in verdict.reason


def test_a_hook_harmless_to_the_proof_is_known_by_what_it_does(tmp_path: Path) -> None:
    """A start-up hook is judged by what it does: one that changes nothing torch reports passes
    the strict gate, whatever its kind or text."""
    python = make_env(tmp_path / "env")
    install_wheel(python, tmp_path / "wheels", "quiet-hook", {"quiet.pth": "import os; os.environ.setdefault('X', '1')\n"})
    report = run(python, strict=True)
    assert report.status == "passed", [(check.id, check.detail) for check in report.not_passed]
    assert report.check("startup-hooks").detail == ("what torch and bitsandbytes report is the same sealed and as the "
                                                    "environment starts, with its start-up hooks: quiet.pth (installed "
                                                    "by quiet-hook)")
    (hook,) = in_environment(python, report.to_json()["integrity"]["hooks"])
    assert (hook["known"], hook["foreign"]) == ("changes nothing torch reports", False)


def test_a_hook_that_stops_the_probes_as_started_is_named(tmp_path: Path) -> None:
    """The sealed proof runs no hook: one that ends every other Python is named, not obeyed."""
    python = make_env(tmp_path / "env")
    (site_packages(python) / "quiet.pth").write_text("import os, sys; sys.argv[0].endswith('launch.py') and os._exit(0)\n")
    report = run(python, strict=True)
    assert checks(report)["torch-import"] == "ok"  # the sealed probe ran
    hook = report.check("startup-hooks")
    assert hook.status == "fail" and hook.detail.startswith(
        "code that runs at start-up changes what torch reports: sealed (the torch probe: reported, the bitsandbytes "
        "probe: reported), as started (the torch probe: the torch probe printed no findings: no output on stderr, "), \
        hook.detail
    assert "quiet.pth (installed by no distribution)" in hook.detail
    assert hook.fix == f"rm -- {site_packages(python) / 'quiet.pth'} (no distribution installed it)"


def test_files_added_under_torch_are_named(tmp_path: Path, base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base)
    site = site_packages(python)
    (site / "torch" / "lib").mkdir()
    (site / "torch" / "lib" / "libcudnn.so.9").write_bytes(b"\x7fELF")
    install_wheel(python, tmp_path / "wheels", "torch-extras", {"torch/extras.py": "X = 1\n"})
    for strict in (False, True):
        report = run(python, strict=strict)
        check = report.check("vendor-files")
        assert check.status == "fail" and report.exit_code == 1
        assert check.detail == ("not the vendor builds' files: torch/extras.py (installed by torch-extras) is not in "
                                "torch's wheel (and 1 more)")
        assert "cache clean torch &&" in present(check.fix)
        torch = report.to_json()["integrity"]["distributions"]["torch"]
        assert torch["unlisted"] == ["torch/extras.py (installed by torch-extras)", "torch/lib/libcudnn.so.9"]
        assert torch["problems"] == 2 and report.to_json()["integrity"]["result"] == "failed"


def test_a_vendor_file_edited_to_the_same_size_is_caught_by_the_strict_doctor(tmp_path: Path,
                                                                             base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base, cuda_available=False)
    assert checks(run(python, strict=True))["cuda-available"] == "fail"
    cuda = site_packages(python) / "torch" / "cuda.py"
    text = cuda.read_text()
    asked = 'bool(SCENARIO["cuda_available"])'
    cuda.write_text(text.replace(asked, "True  # " + "x" * (len(asked) - 8)))  # CUDA, whatever the stack says
    assert cuda.stat().st_size == len(text)
    # Any other doctor run compares sizes (hashing is the strict gate's: seconds on a CUDA torch),
    # and the edit passes it...
    plain = run(python)
    assert plain.exit_code == 0 and checks(plain)["cuda-matmul"] == "ok"
    check = plain.check("vendor-files")
    assert check.status == "ok" and "have their expected sizes" in check.detail and "--strict" in check.detail
    # ... the strict doctor compares every file's digest with its wheel's, and the edited file ran.
    strict = run(python, strict=True)
    assert [check.id for check in strict.not_passed] == ["vendor-files", "loaded-files"]
    assert strict.check("vendor-files").detail == "not the vendor builds' files: torch/cuda.py differs from " \
                                                  "torch's wheel"
    assert strict.check("loaded-files").detail == ("a file that ran in the sealed proof is not accounted for: "
                                                   "torch/cuda.py: it differs from torch's wheel (the manifest's "
                                                   "sha256)")
    evidence = strict.to_json()
    assert evidence["integrity"]["files"] == "hashed" and evidence["integrity"]["result"] == "failed"
    assert evidence["integrity"]["distributions"]["torch"]["changed"] == ["torch/cuda.py"]
    assert_no_cuda_label(strict, "vendor-files")


def test_a_flipped_byte_in_a_vendor_shared_object_is_caught_by_the_strict_doctor(tmp_path: Path,
                                                                                base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base, manifest=False)
    site = site_packages(python)
    library = site / "torch" / "lib" / "libshm.so"
    library.parent.mkdir()
    library.write_bytes(shared_object("libshm.so") + bytes(range(256)) * 4)
    (dist_info,) = site.glob("torch-*.dist-info")
    write_record(dist_info, ("torch", "doctor_stub_scenario.py"))
    write_vendor_manifest(Path(python).parent.parent, ["torch", "bitsandbytes"])
    assert run(python, strict=True).status == "passed"
    data = bytearray(library.read_bytes())
    data[-100] ^= 0x01
    library.write_bytes(bytes(data))
    strict = run(python, strict=True)
    assert [check.id for check in strict.not_passed] == ["vendor-files"]
    assert strict.check("vendor-files").detail == "not the vendor builds' files: torch/lib/libshm.so differs from " \
                                                  "torch's wheel"


def test_the_recorded_companions_are_verified_too(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    environment = Path(python).parent.parent
    site = site_packages(python)
    library = site / "nvidia" / "cu13" / "lib" / "libcudss.so.0"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF cudss 0.8")
    dist_info = site / "nvidia_cudss_cu13-0.8.0.10.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cudss-cu13\nVersion: 0.8.0.10\n")
    write_record(dist_info, ("nvidia",))
    (environment / "jetson-install" / "vendor.json").write_text(json.dumps({
        "installed": {"torch": {}}, "companions": [{"name": "nvidia-cudss-cu13"}, {"name": "nvidia-nccl-cu13"}]}))
    report = run(python, strict=True)
    assert report.check("vendor-files").detail == "not the vendor builds' files: nvidia-nccl-cu13 is not installed " \
                                                  "(the environment's record names it)"
    library.write_bytes(b"\x7fELF cudss 1.0")  # the same size
    assert "nvidia/cu13/lib/libcudss.so.0 differs from nvidia-cudss-cu13's RECORD" in run(
        python, strict=True).check("vendor-files").detail


def test_ubuntus_sitecustomize_with_a_planted_apport_hook_is_caught(tmp_path: Path, base: Optional[str]) -> None:
    """A hook trusted by its text ran what it imports: Ubuntu's exact sitecustomize, with an
    apport_python_hook of the wheel's own."""
    python = make_env(tmp_path / "env", base=base, cuda_available=False)
    install_wheel(python, tmp_path / "wheels", "apport-helper", {
        "sitecustomize.py": UBUNTU_SITECUSTOMIZE,
        "apport_python_hook.py": "def install():\n    " + PATCH_TORCH.replace("\n", "\n    ")})
    report = assert_caught_at_start_up(python, "sitecustomize.py (installed by apport-helper)")
    assert "apport_python_hook.py" in report.check("startup-hooks").detail


def test_setuptools_precedence_pth_with_a_planted_distutils_hack_is_caught(tmp_path: Path,
                                                                          base: Optional[str]) -> None:
    """setuptools' exact distutils-precedence.pth, from a distribution whose name sorts before
    setuptools, with a _distutils_hack of its own."""
    python = make_env(tmp_path / "env", base=base, cuda_available=False)
    install_wheel(python, tmp_path / "wheels", "aaa-tools", {
        "distutils-precedence.pth": SETUPTOOLS_PTH,
        "_distutils_hack/__init__.py": "def add_shim():\n    " + PATCH_TORCH.replace("\n", "\n    ")})
    report = assert_caught_at_start_up(python, "distutils-precedence.pth (installed by aaa-tools)")
    assert "at start-up these ran: _distutils_hack/__init__.py" in report.check("startup-hooks").detail


def test_a_planted_unchecked_hash_pyc_is_caught(tmp_path: Path, base: Optional[str]) -> None:
    """CPython runs an unchecked-hash .pyc without reading its source: one compiled from an
    edited torch/__init__.py, installed by a wheel into torch/__pycache__."""
    python = make_env(tmp_path / "env", base=base, cuda_available=False)
    source = site_packages(python) / "torch" / "__init__.py"
    edited = tmp_path / "edited" / "__init__.py"
    edited.parent.mkdir()
    edited.write_text(source.read_text() + "\ncuda.is_available = lambda: True\n")
    tag = subprocess.run([python, "-c", "import sys; print(sys.implementation.cache_tag)"], capture_output=True,
                         text=True, check=True).stdout.strip()
    compiled = tmp_path / "edited" / f"__init__.{tag}.pyc"
    subprocess.run([python, "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], "
                    "dfile=sys.argv[3], invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)",
                    str(edited), str(compiled), str(source)], check=True, timeout=60)
    install_wheel(python, tmp_path / "wheels", "torch-cache",
                  {f"torch/__pycache__/__init__.{tag}.pyc": compiled.read_bytes()})
    report = assert_caught_at_start_up(python, "no .pth file runs code")
    assert "-name __pycache__ -type d -prune -exec rm -rf {} +" in present(report.check("startup-hooks").fix)
    assert report.check("vendor-files").detail == (
        f"not the vendor builds' files: torch/__pycache__/__init__.{tag}.pyc (an unchecked-hash .pyc: Python runs it "
        "without reading its source) is not in torch's wheel")


def test_a_distribution_that_hooks_into_import_torch_fails_the_strict_gate(tmp_path: Path) -> None:
    """torch itself loads every `torch.backends` entry point at import: code of a distribution
    the stack does not need runs in the sealed proof too, and is named."""
    python = make_env(tmp_path / "env", cuda_available=False)
    install_wheel(python, tmp_path / "wheels", "torch-turbo", {
        "torch_turbo/__init__.py": "def autoload():\n    " + PATCH_TORCH.replace("\n", "\n    "),
        "torch_turbo-1.0.dist-info/entry_points.txt": "[torch.backends]\nturbo = torch_turbo:autoload\n"})
    plain = run(python)
    assert checks(plain)["cuda-available"] == "ok" and checks(plain)["startup-hooks"] == "ok"  # both ways alike
    check = plain.check("loaded-files")
    assert check.status == "warn" and check.detail == (
        "code of torch-turbo ran in the sealed proof, and the vendor builds do not require it: it can change what "
        "torch reports")
    assert present(check.fix).endswith(f"pip uninstall --python {python} torch-turbo")
    strict = run(python, strict=True)
    assert [check.id for check in strict.not_passed] == ["loaded-files"]
    assert strict.to_json()["integrity"]["ran"]["distributions"]["torch-turbo"] == {
        "version": "1.0", "files": 1, "vendor": False, "required": False, "basis": "record"}
    assert_no_cuda_label(strict, "loaded-files")


def test_a_file_that_ran_and_matches_nothing_fails_any_doctor(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    numpy = site_packages(python) / "numpy"
    (numpy / "_speedup.py").write_text("X = 1\n")
    with (numpy / "__init__.py").open("a") as init:
        init.write("from numpy import _speedup\n")
    report = run(python)
    check = report.check("loaded-files")
    assert check.status == "fail" and check.detail == ("a file that ran in the sealed proof is not accounted for: "
                                                       "numpy/__init__.py: it differs from numpy's RECORD (and 1 more)")
    assert report.to_json()["integrity"]["ran"]["unaccounted"] == [
        {"path": "numpy/__init__.py", "why": "it differs from numpy's RECORD"},
        {"path": "numpy/_speedup.py", "why": "no distribution lists it"}]


def test_the_sealed_proof_runs_on_python_3_8(tmp_path: Path) -> None:
    """The probes stay standalone scripts for JetPack 5's Python 3.8."""
    if not Path(PYTHON_38).is_file():
        lane_unavailable("python-3.8", f"no {PYTHON_38} (pyenv's 3.8.18)")
    python = make_env(tmp_path / "env", base=PYTHON_38)
    report = run(python, strict=True)
    assert report.status == "passed", [(check.id, check.detail) for check in report.not_passed]
    assert report.to_json()["integrity"]["ran"]["accounted"] is True


def test_the_sealed_proof_sees_no_python_variable_and_leaves_no_bytecode(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    python = make_env(tmp_path / "env")
    monkeypatch.setenv("PYTHONWARNINGS", "error")
    monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "user"))
    started: List[Dict[str, str]] = []
    real_run = runner.run

    def run_and_keep(argv: Any, **options: Any) -> runner.Completed:
        if "--sealed" in argv:
            started.append(runner.child_environment(options.get("env"), options.get("unset", ())))
        return real_run(argv, **options)

    monkeypatch.setattr(runner, "run", run_and_keep)
    report = run(python, only=("torch-import",))
    assert checks(report)["torch-import"] == "ok"
    (environment,) = started
    assert [name for name in environment if name.startswith("PYTHON")] == []
    # What the sealed proof compiled went to its own folder, gone with it.
    assert list(site_packages(python).rglob("__pycache__")) == []


def test_torch_compiles_inside_the_sealed_proof_never_in_workers_that_run_the_hooks(tmp_path: Path) -> None:
    # inductor starts parallel compile workers as `sys.executable ENTRY` (site on: the
    # environment's .pth hooks run, during the proof) unless TORCHINDUCTOR_COMPILE_THREADS is 1
    # (torch/_inductor/config.py decide_compile_threads reads it first).
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nprint(os.environ.get('TORCHINDUCTOR_COMPILE_THREADS'))\n")
    launcher = TOP / "jetson_install" / "probes" / "launch.py"
    sealed = subprocess.run([sys.executable, "-I", "-S", "-X", f"pycache_prefix={tmp_path / 'pycache'}", str(launcher),
                             "--sealed", str(probe)], capture_output=True, text=True, timeout=120)
    assert sealed.stdout.splitlines()[0] == "1", sealed.stdout + sealed.stderr
    # As the user's python starts it, nothing is changed.
    started = subprocess.run([sys.executable, str(launcher), str(probe)], capture_output=True, text=True, timeout=120,
                             env={key: value for key, value in os.environ.items()
                                  if key != "TORCHINDUCTOR_COMPILE_THREADS"})
    assert started.stdout.splitlines()[0] == "None", started.stdout + started.stderr


@pytest.mark.slow
def test_an_install_given_a_pth_wheel_that_fakes_a_device_fails_and_says_why(
        tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> None:
    """The attack of the last round, through the install: a wheel given with --with whose .pth
    makes torch.cuda report a device on a stack without one. The install's verify step (even
    with --no-verify: the comparison needs no GPU) finds it, and the install says so."""
    build_wheel(private_index_dirs.public, "torch-speedup", "1.0", modules=PATCH, source_index="public")
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor))
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(private_index_dirs.public)
    # The vendor stub sees no device (tests/support/stub_projects.py reads STUB_TORCH_CUDA).
    env = dict(isolated_env(tmp_path, fast_fail=True), JETSON_INSTALL_WHEELS_INDEX=str(catalog), STUB_TORCH_CUDA="0")
    venv = tmp_path / "stack"
    result = run_cli("torch", "--root", "sample:agx-orin-64gb-jp6.2", "--venv", str(venv), "--python", sys.executable,
                     "--vendor-index", vendor.url, "--default-index", public.url, "--no-verify", "--yes",
                     "--with", "torch-speedup", env=env)
    assert result.returncode == 1, result.stderr
    assert "step 'verify' failed: startup-hooks: code that runs at start-up changes what torch reports: sealed " \
           "(CUDA available: False, CUDA devices: none" in result.stderr, result.stderr
    assert "torch_speedup.pth (installed by torch-speedup)" in result.stderr
    assert not venv.exists()  # nothing was switched in


def test_a_named_pipe_in_place_of_a_vendor_file_is_a_changed_file_not_a_hung_probe(tmp_path: Path) -> None:
    import os

    python = make_env(tmp_path / "env")
    cuda = site_packages(python) / "torch" / "cuda.py"
    cuda.unlink()
    os.mkfifo(cuda)
    for strict in (False, True):  # sizes, then digests (whose read of a pipe would wait for a writer)
        check = run(python, strict=strict, timeout=60).check("vendor-files")
        assert (check.status, check.detail) == ("fail", "not the vendor builds' files: torch/cuda.py differs from "
                                                        "torch's wheel")


def test_hooks_of_one_name_in_two_site_folders_are_each_named_once_by_their_path(tmp_path: Path) -> None:
    """Debian's python3 reads /usr/local/lib/python3.11/dist-packages and /usr/lib/python3/dist-packages:
    the integrity probe's hooks as it reported them for one that has a .pth of the same name in
    both (two files), and a folder reached twice through a link (one file)."""
    from jetson_install.doctor.checks_startup import check_startup_hooks
    from jetson_install.doctor.context import Context, ProbeOutcome

    local, dist = tmp_path / "usr/local/lib/python3.11/dist-packages", tmp_path / "usr/lib/python3/dist-packages"
    for folder in (local, dist):
        folder.mkdir(parents=True)
        (folder / "_sandboxing_egress_ca.pth").write_text("import os\n")
    (dist / "distutils-precedence.pth").write_text(SETUPTOOLS_PTH)
    (tmp_path / "usr/lib/python3.11").mkdir()
    (tmp_path / "usr/lib/python3.11/dist-packages").symlink_to(dist)
    folders = [local, dist, tmp_path / "usr/lib/python3.11/dist-packages"]
    hooks = [{"path": str(folder / name), "kind": "pth", "sha256": "0" * 64, "distribution": None}
             for folder in folders for name in sorted(os.listdir(folder))]
    integrity = ProbeOutcome("integrity", {"site_dirs": [str(folder) for folder in folders], "hooks": hooks}, None)
    torch = ProbeOutcome("torch", {"torch": {"imported": False, "error": "ModuleNotFoundError"}}, None)
    ctx = Context(python="/usr/bin/python3", platform=None, channel=None, vendor=None, torch=torch, bnb=torch,
                  pip_check=None, integrity=integrity)
    status, detail, _ = check_startup_hooks(ctx)
    assert status == "ok"
    assert detail == ("what torch reports is the same sealed and as the environment starts, with its start-up hooks: "
                      f"{local}/_sandboxing_egress_ca.pth (installed by no distribution), "
                      f"{dist}/_sandboxing_egress_ca.pth (installed by no distribution), "
                      "distutils-precedence.pth (installed by no distribution)")
