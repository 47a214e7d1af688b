"""`--preflight`: the channel's environment with CPU torch on any aarch64 machine, and the
doctor profile that expects CPU. Its evidence can never pass as Jetson evidence. (The real
aarch64 install is tests/test_lane_arm64.py.)"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from test_doctor import JP6, JP6_SOURCE, ORIN, clean_pip_check, make_env, run  # noqa: F401 - autouse fixture
from test_plan_cli import plan, plan_json

from jetson_install import doctor
from jetson_install.evidence import gate_record, judge

CPU_TORCH = {"torch_version": "2.8.0", "torch_cuda": None, "cuda_available": False}


def test_preflight_plan_takes_cpu_builds_of_the_channel_torch_with_its_pins_and_constraints() -> None:
    jetson = plan_json("--root", "sample:agx-orin-64gb-jp6.2")
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--preflight")
    assert data["profile"] == "preflight" and jetson["profile"] == "jetson"
    # 2.8.0 has an aarch64 CPU build on the default index: the same set, the same constraints
    # (the channel's bitsandbytes range, numpy<2, the transformers cap).
    assert data["pins"] == jetson["pins"] == {"torch": "2.8.0", "torchvision": "0.23.0", "torchaudio": "2.8.0"}
    assert data["constraints"] == jetson["constraints"]
    assert "bitsandbytes>=0.46.1,<0.51" in data["constraints"] and "numpy<2" in data["constraints"]
    assert data["requirement"].startswith("obliteratus[quantization] @ ")
    vendor = next(step for step in data["steps"] if step["id"] == "vendor")
    assert "--default-index" not in vendor["command"] and "--no-index" not in vendor["command"]
    assert vendor["command"][-3:] == ["torch==2.8.0", "torchvision==0.23.0", "torchaudio==2.8.0"]
    assert "not the Jetson GPU build" in vendor["title"]
    assert next(step for step in data["steps"] if step["id"] == "verify")["command"][-1] == "--preflight"
    assert data["fallback"] is None and data["vendor_index_source"] == "--preflight (uv's default index)"
    assert not [w for w in data["warnings"] if "bitsandbytes" in w]


def test_preflight_of_a_newer_torch_takes_the_nearest_cpu_build_or_a_named_cpu_index() -> None:
    data = plan_json("--root", "sample:agx-thor-jp7.0", "--preflight")
    assert data["pins"] == {"torch": "2.10.0", "torchvision": "0.25.0"}
    assert "bitsandbytes>=0.48,<0.51" in data["constraints"]
    assert any("no aarch64 CPU build of torch 2.13.0" in w and "--cpu-index URL" in w for w in data["warnings"])
    named = plan_json("--root", "sample:agx-thor-jp7.0", "--preflight", "--cpu-index", "https://cpu.example/whl/cpu")
    assert named["pins"]["torch"] == "2.13.0" and not [w for w in named["warnings"] if "CPU build" in w]
    vendor = next(step for step in named["steps"] if step["id"] == "vendor")["command"]
    assert vendor[vendor.index("--default-index") + 1] == "https://cpu.example/whl/cpu"
    # bitsandbytes is not asked of the CPU index: the target step takes it from the default index.
    assert not [arg for arg in vendor if arg.startswith("bitsandbytes")]
    target = next(step for step in named["steps"] if step["id"] == "target")["command"]
    assert "--default-index" not in target


def test_preflight_with_a_gpu_only_option_is_refused_in_one_line() -> None:
    build = plan("--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--bitsandbytes", "build")
    assert build.returncode == 2
    assert build.stderr.splitlines()[0] == "error: --preflight and --bitsandbytes build were both given"


def test_cpu_index_needs_preflight_and_https() -> None:
    alone = plan("--root", "sample:agx-orin-64gb-jp6.2", "--cpu-index", "https://cpu.example/whl/cpu")
    assert alone.returncode == 2 and "--cpu-index is only for --preflight" in alone.stderr
    insecure = plan("--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--cpu-index", "http://cpu.example/whl")
    assert insecure.returncode == 2 and "plain http" in insecure.stderr


@pytest.mark.skipif(platform.machine().lower() in ("aarch64", "arm64"), reason="this machine is aarch64")
def test_preflight_install_refuses_other_machines_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "jetson_install", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2",
                             "--preflight", "--venv", str(tmp_path / "env"), "--yes"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (f"error: --preflight installs aarch64 CPU builds of torch, and this "
                                             f"machine is {platform.machine().lower()}")
    assert not (tmp_path / "env").exists()


def test_preflight_doctor_expects_cpu_and_its_pass_is_not_a_jetson_pass(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", **CPU_TORCH), preflight=True)
    statuses = {check.id: check.status for check in report.checks}
    assert statuses == {
        "platform": "ok", "python-abi": "ok", "torch-import": "ok", "torch-build": "ok",
        "cuda-available": "not_applicable", "cuda-arch": "not_applicable", "cuda-matmul": "not_applicable",
        "cuda-conv2d": "not_applicable", "cuda-bf16": "not_applicable",
        "numpy": "ok", "bnb-library": "ok", "bnb-kernels": "not_applicable", "bnb-int8": "not_applicable",
        "obliteratus": "ok", "jetson-contract": "not_applicable", "transformers-torch": "ok", "pip-check": "ok",
    }, doctor.render_lines(report)
    assert "loaded its CPU library libbitsandbytes_cpu.so" in report.check("bnb-library").detail
    assert "answers 'cpu'" in report.check("obliteratus").detail
    assert report.exit_code == 0
    evidence = report.to_json()
    assert evidence["profile"] == "preflight" and evidence["status"] == "preflight-passed"
    assert "not evidence that the Jetson GPU works" in doctor.render_lines(report)[-1]
    # Neither the runtime gate nor `evidence check` takes it for Jetson evidence.
    assert gate_record(evidence, report.exit_code, "local")["status"] == "failed"
    strict = run(make_env(tmp_path / "strict", **CPU_TORCH), preflight=True, strict=True).to_json()
    assert gate_record(strict, 0, "local")["status"] == "failed"
    assert not judge("preflight.json", evidence).ok


def test_preflight_doctor_fails_a_cuda_torch_and_a_bitsandbytes_library_that_cannot_load(tmp_path: Path) -> None:
    cuda = run(make_env(tmp_path / "cuda"), preflight=True)
    assert cuda.check("torch-build").status == "fail"
    assert "the preflight expects a CPU build" in cuda.check("torch-build").detail
    assert cuda.check("obliteratus").status == "fail"
    libgomp = run(make_env(tmp_path / "gomp", **CPU_TORCH,
                           bnb_load_error="libgomp.so.1: cannot open shared object file: No such file or directory"),
                  preflight=True)
    assert libgomp.check("bnb-library").fix == "sudo apt-get install libgomp1"
    assert libgomp.headline == "bnb-library"


def test_doctor_uses_the_preflight_profile_an_environment_recorded(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env", **CPU_TORCH)
    state = tmp_path / "env" / "jetson-install"
    state.mkdir()
    (state / "plan.json").write_text(json.dumps({"preflight": True, "pins": dict(JP6_SOURCE.pins), "vendor": None,
                                                 "constraints": ["numpy<2"]}))
    result = subprocess.run([sys.executable, "-m", "jetson_install", "doctor", "--venv", str(tmp_path / "env"),
                             "--root", "sample:agx-orin-64gb-jp6.2", "--json"],
                            capture_output=True, text=True, timeout=120)
    evidence = json.loads(result.stdout)
    assert evidence["profile"] == "preflight", result.stderr
    assert python and ORIN and JP6
