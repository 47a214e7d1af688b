"""tests/device/check, on this machine (no GPU): in a stub environment whose torch says it
has a CUDA device and whose stub Triton's assemblers assemble (support.doctor_env), with a
carried wheel of the stub bitsandbytes. The
whole check runs, as on a GPU machine, and writes its evidence where --out says; --dry-run
stops before the GPU probes; an interpreter without torch is refused in one line.

Not a run on a GPU: that is the lent machine's (README, "On a GPU machine").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.doctor_env import STUBS, make_env
from support.wheels import build_wheel

TOP = Path(__file__).resolve().parent.parent
CHECK = TOP / "tests" / "device" / "check"


def carried_wheel(folder: Path) -> Path:
    modules = {f"bitsandbytes/{path.name}": path.read_text() for path in (STUBS / "bitsandbytes").glob("*.py")}
    return build_wheel(folder, "bitsandbytes", "0.46.1", modules=modules, tag="py3-none-any")


def device_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=300)


def test_the_device_check_runs_the_kernel_and_bitsandbytes_checks_and_writes_the_evidence(tmp_path: Path) -> None:
    python = make_env(tmp_path / "gpu", bnb_version=None)  # bitsandbytes comes from the carried wheel
    out = tmp_path / "examples"
    result = device_check("--python", python, "--bitsandbytes-wheel", str(carried_wheel(tmp_path / "carried")),
                          "--out", str(out))
    assert result.returncode == 0, result.stderr
    evidence = json.loads((out / "device-check-evidence.json").read_text())
    checks = {check["id"]: check["status"] for check in evidence["checks"]}
    assert checks == {"torch-import": "ok", "cuda-available": "ok", "cuda-arch": "ok", "cuda-matmul": "ok",
                      "cuda-conv2d": "ok", "cuda-bf16": "ok", "compile": "ok", "bnb-library": "ok",
                      "bnb-kernels": "ok", "bnb-int8": "ok"}
    # The stub Triton's ptxas assembled the device's sm_87 (no board: Triton's own, no other tried),
    # and the compiled function matched eager.
    assert evidence["torch"]["compile"]["arch"] == "sm_87" and evidence["torch"]["compile"]["function"] == "passed"
    assert evidence["platform"]["l4t"] is None and evidence["platform"]["compute_capability"] == "8.7"
    assert evidence["device_check"]["bitsandbytes_wheel"] == "bitsandbytes-0.46.1-py3-none-any.whl"
    assert "evidence: " in result.stderr and (out / "device-check.txt").read_text().startswith("torch-import")


def test_the_dry_run_stops_before_the_gpu_and_writes_nothing(tmp_path: Path) -> None:
    python = make_env(tmp_path / "cpu", bnb_version=None, torch_cuda=None, cuda_available=False, device_count=0)
    out = tmp_path / "examples"
    result = device_check("--python", python, "--bitsandbytes-wheel", str(carried_wheel(tmp_path / "carried")),
                          "--out", str(out), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "no CUDA device" in result.stderr and "dry run: the doctor's checks would run now: torch-import" in result.stderr
    assert not out.exists()
    refused = device_check("--python", python, "--bitsandbytes-wheel", str(carried_wheel(tmp_path / "carried")),
                           "--out", str(out))
    assert refused.returncode == 2 and "\nerror: torch 2.8.0 in " in refused.stderr
    assert "fix: run on a GPU machine" in refused.stderr


def test_an_interpreter_without_torch_or_a_missing_wheel_is_one_line(tmp_path: Path) -> None:
    bare = make_env(tmp_path / "bare", torch_version=None, bnb_version=None)
    wheel = carried_wheel(tmp_path / "carried")
    result = device_check("--python", bare, "--bitsandbytes-wheel", str(wheel))
    assert result.returncode == 2 and result.stderr.startswith(f"error: {bare} has no torch")
    missing = device_check("--python", bare, "--bitsandbytes-wheel", str(tmp_path / "nothing.whl"))
    assert missing.returncode == 2 and "is not a bitsandbytes wheel file" in missing.stderr
