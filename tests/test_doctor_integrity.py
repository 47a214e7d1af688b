"""The proof rests on the files: the doctor's start-up hooks and vendor files (issue 32).

A package added to the environment can plant a `.pth` file that patches torch when the
interpreter starts, and a file can be added to or edited in torch's folder: the strict doctor
must fail on each, name what it found, and keep `cuda` off the runner labels.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from jetson_install.doctor import DoctorReport
from jetson_install.doctor.checks_integrity import KNOWN_HOOKS
from jetson_install.fleet.evidence import judge
from jetson_install.fleet.labels import runner_labels
from jetson_install.tools import runner
from support import present
from support.doctor_env import ORIN, board_python, make_env, run
from support.stub_stack import write_record
from support.wheels import build_wheel

pytestmark = pytest.mark.usefixtures("clean_pip_check")  # uv pip check is not what these tests exercise

# A wheel that makes a CPU-only torch look like a CUDA one in every process of the environment.
PATCH = {"torch_speedup.pth": "import torch_speedup\n",
         "torch_speedup/__init__.py": "import torch\ntorch.cuda.is_available = lambda: True\n"}
SETUPTOOLS_PTH = ("import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
                  "enabled and __import__('_distutils_hack').add_shim(); \n")


@pytest.fixture(params=["development", "board"])
def base(request: pytest.FixtureRequest) -> Optional[str]:
    """The interpreter the environment is made from: the development one, and the boards' kind
    (Debian's /usr/bin/python3, whose patched site.py names no venv's site-packages under -S)."""
    return None if request.param == "development" else board_python()


def site_packages(python: str) -> Path:
    return next(Path(python).parent.parent.glob("lib/python*/site-packages"))


def install_wheel(python: str, folder: Path, name: str, modules: Dict[str, str]) -> None:
    """A wheel of `modules` (its own package, named after it, beside them) installed by uv."""
    wheel = build_wheel(folder, name, "1.0", modules=modules)
    subprocess.run([runner.uv_binary(), "pip", "install", "--python", python, "--no-deps", "--no-index", "--quiet",
                    str(wheel)], check=True, capture_output=True, timeout=120)


def in_environment(python: str, hooks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The hooks in the environment's own folders (Debian's Python has one of the OS's)."""
    return [hook for hook in hooks if hook["path"].startswith(str(Path(python).parent.parent) + "/")]


def checks(report: DoctorReport) -> Dict[str, str]:
    return {check.id: check.status for check in report.checks}


def test_a_wheel_whose_pth_patches_torch_fails_the_strict_gate_and_keeps_cuda_off(tmp_path: Path,
                                                                                 base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base, cuda_available=False)
    assert checks(run(python, strict=True))["cuda-available"] == "fail"  # the stack has no CUDA
    install_wheel(python, tmp_path / "wheels", "torch-speedup", PATCH)
    plain = run(python)
    # The hook works: every CUDA check now passes on a stack without CUDA...
    assert checks(plain)["cuda-matmul"] == "ok" and plain.exit_code == 0
    # ... and the doctor says whose code runs at start-up, and how to take it out.
    hook = plain.check("startup-hooks")
    pth = site_packages(python) / "torch_speedup.pth"
    assert hook.status == "warn" and f"{pth} (pth, installed by torch-speedup)" in hook.detail
    assert present(hook.fix).endswith(f"pip uninstall --python {python} torch-speedup (it installed torch_speedup.pth)")
    strict = run(python, strict=True)
    assert strict.status == "failed" and strict.exit_code == 1
    assert [check.id for check in strict.not_passed] == ["startup-hooks"]
    assert strict.headline == "startup-hooks"
    evidence = strict.to_json()
    assert in_environment(python, evidence["integrity"]["hooks"]) == [{
        "path": str(pth), "kind": "pth", "sha256": hashlib.sha256(PATCH["torch_speedup.pth"].encode()).hexdigest(),
        "distribution": "torch-speedup", "known": None, "vendor": False, "foreign": True}]
    labels = runner_labels(ORIN, judge("strict.json", evidence))
    assert "cuda" not in labels.labels and "startup-hooks" in labels.cuda_reason
    # Evidence edited to claim a pass still grants nothing: the hook is in it.
    evidence.update(status="passed", headline=None,
                    checks=[dict(check, status="ok", fix=None) for check in evidence["checks"]])
    verdict = judge("edited.json", evidence)
    assert not verdict.ok and verdict.reason == f"strict status passed contradicts integrity.hooks: {pth} " \
                                                "(installed by torch-speedup) is foreign"


def test_a_hook_that_stops_every_other_probe_is_still_named(tmp_path: Path) -> None:
    """The integrity probe runs with -I -S: the hooks it lists never run in it."""
    python = make_env(tmp_path / "env")
    (site_packages(python) / "quiet.pth").write_text("import os, sys; sys.argv[0].endswith('_probe.py') and os._exit(0)\n")
    report = run(python, strict=True)
    assert checks(report)["torch-import"] == "fail"  # the torch probe printed nothing
    hook = report.check("startup-hooks")
    assert hook.status == "fail" and "quiet.pth (pth, installed by no distribution)" in hook.detail
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
                                "torch's RECORD (and 1 more)")
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
    assert check.status == "ok" and "have their RECORDs' sizes" in check.detail and "--strict" in check.detail
    # ... the strict doctor compares every file's digest.
    strict = run(python, strict=True)
    assert [check.id for check in strict.not_passed] == ["vendor-files"]
    assert strict.check("vendor-files").detail == "not the vendor builds' files: torch/cuda.py differs from " \
                                                  "torch's RECORD"
    evidence = strict.to_json()
    assert evidence["integrity"]["files"] == "hashed" and evidence["integrity"]["result"] == "failed"
    assert evidence["integrity"]["distributions"]["torch"]["changed"] == ["torch/cuda.py"]
    assert "cuda" not in runner_labels(ORIN, judge("strict.json", evidence)).labels


def test_the_strict_doctor_hashes_every_vendor_file_and_records_it(tmp_path: Path, base: Optional[str]) -> None:
    python = make_env(tmp_path / "env", base=base)
    report = run(python, strict=True)
    check = report.check("vendor-files")
    assert check.status == "ok" and "files of bitsandbytes, torch match their RECORDs' digests" in check.detail
    integrity = report.to_json()["integrity"]
    assert integrity["files"] == "hashed" and integrity["result"] == "passed"
    assert in_environment(python, integrity["hooks"]) == []
    assert sorted(integrity["distributions"]) == ["bitsandbytes", "torch"]
    assert integrity["distributions"]["torch"]["problems"] == 0 and integrity["distributions"]["torch"]["files"] > 3
    if base is None:  # Debian's Python has its own sitecustomize (apport's), outside the environment
        assert report.check("startup-hooks").detail == "no .pth file runs code, and there is no sitecustomize or " \
                                                       "usercustomize"


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
    (environment / "jetson-install").mkdir()
    (environment / "jetson-install" / "vendor.json").write_text(json.dumps({
        "installed": {"torch": {}}, "companions": [{"name": "nvidia-cudss-cu13"}, {"name": "nvidia-nccl-cu13"}]}))
    report = run(python, strict=True)
    assert report.check("vendor-files").detail == "not the vendor builds' files: nvidia-nccl-cu13 is not installed " \
                                                  "(the environment's record names it)"
    library.write_bytes(b"\x7fELF cudss 1.0")  # the same size
    assert "nvidia/cu13/lib/libcudss.so.0 differs from nvidia-cudss-cu13's RECORD" in run(
        python, strict=True).check("vendor-files").detail


def test_known_hooks_are_known_by_content_with_the_code_they_run(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    site = site_packages(python)
    (site / "_distutils_hack").mkdir()
    hack = site / "_distutils_hack" / "__init__.py"
    hack.write_text("def add_shim():\n    pass\n")
    (site / "distutils-precedence.pth").write_text(SETUPTOOLS_PTH)
    dist_info = site / "setuptools-80.0.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: setuptools\nVersion: 80.0.0\n")
    # setuptools' RECORD lists the .pth at the top of site-packages, beside its packages.
    write_record(dist_info, ("_distutils_hack", "distutils-precedence.pth"))
    assert hashlib.sha256(SETUPTOOLS_PTH.encode()).hexdigest() in KNOWN_HOOKS
    report = run(python, strict=True)
    assert report.status == "passed", [(c.id, c.detail) for c in report.not_passed]
    assert report.check("startup-hooks").detail == ("1 start-up hook(s), each a vendor build's or known to be "
                                                    "harmless: setuptools' distutils-precedence.pth")
    assert report.to_json()["integrity"]["hooks"][0]["known"] == "setuptools' distutils-precedence.pth"
    # The same .pth running a changed _distutils_hack is not the known hook any more...
    hack.write_text("import torch\ndef add_shim():\n    torch.cuda.is_available = lambda: True\n")
    assert run(python, strict=True).check("startup-hooks").status == "fail"
    # ... nor is a file of the known name with other content.
    write_record(dist_info, ("_distutils_hack", "distutils-precedence.pth"))
    assert run(python, strict=True).check("startup-hooks").status == "ok"
    (site / "distutils-precedence.pth").write_text("import torch_speedup\n")
    assert "distutils-precedence.pth (pth, installed by setuptools)" in run(python, strict=True).check(
        "startup-hooks").detail


def test_a_sitecustomize_in_the_environment_is_a_hook(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    (site_packages(python) / "sitecustomize.py").write_text("import torch\n")
    check = run(python, strict=True).check("startup-hooks")
    assert check.status == "fail" and "sitecustomize.py (sitecustomize, installed by no distribution)" in check.detail
