"""`--preflight`: the channel's environment with CPU torch on any aarch64 machine, and the
doctor profile that expects CPU. Its evidence can never pass as Jetson evidence. (The real
aarch64 install is tests/test_lane_arm64.py.)"""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
from support.cli import CliResult, run_cli
from support.doctor_env import make_env, run
from test_plan_cli import plan, plan_json

from jetson_install import doctor
from jetson_install.envs import interpreters
from jetson_install.base.errors import BadInput
from jetson_install.fleet.evidence import gate_record, judge
from jetson_install.doctor.profiles import PreflightProfile

pytestmark = pytest.mark.usefixtures("clean_pip_check")  # uv is not what these tests exercise
REAL_PIP_CHECK = interpreters.pip_check

CPU_TORCH = {"torch_version": "2.8.0", "torch_cuda": None, "cuda_available": False}
# What a jp6-cu126 preflight plan carries: the channel's bitsandbytes range, from the default index.
JP6_PREFLIGHT = PreflightProfile(">=0.46.1,<0.51")


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
    # uv resolves the CPU builds on its default index; the tool downloads and checks those files,
    # which alone the vendor step installs.
    fetch = next(step for step in data["steps"] if step["id"] == "fetch")
    assert fetch["title"].startswith("resolve torch==2.8.0, torchvision==0.23.0, torchaudio==2.8.0 on the default index")
    assert "--default-index" not in fetch["commands"][0] and fetch["commands"][0][:3] == ["uv", "pip", "compile"]
    vendor = next(step for step in data["steps"] if step["id"] == "vendor")
    assert "--no-index" in vendor["command"] and vendor["command"][-1].endswith("/jetson-install/fetched.txt")
    assert "not the Jetson GPU build" in vendor["title"]
    assert next(step for step in data["steps"] if step["id"] == "verify")["equivalent"][-1] == "--preflight"
    assert data["fallback"] is None and data["vendor_index_source"] == "--preflight (uv's default index)"
    assert not [w for w in data["warnings"] if "bitsandbytes" in w]


def test_preflight_of_a_newer_torch_takes_the_nearest_cpu_build_or_a_named_cpu_index() -> None:
    data = plan_json("--root", "sample:agx-thor-jp7.0", "--preflight")
    assert data["pins"] == {"torch": "2.10.0", "torchvision": "0.25.0"}
    assert "bitsandbytes>=0.48,<0.51" in data["constraints"]
    assert any("no aarch64 CPU build of torch 2.13.0" in w and "--cpu-index URL" in w for w in data["warnings"])
    text = plan("--root", "sample:agx-thor-jp7.0", "--preflight").stdout
    assert "set       torch==2.10.0 (CPU builds for the preflight, in place of the channel's vendor set)" in text
    named = plan_json("--root", "sample:agx-thor-jp7.0", "--preflight", "--cpu-index", "https://cpu.example/whl/cpu")
    assert named["pins"]["torch"] == "2.13.0" and not [w for w in named["warnings"] if "CPU build" in w]
    # The CPU index is read by the tool itself, and bitsandbytes is not asked of it: the target
    # step takes it from the default index.
    assert named["vendor_index"] == "https://cpu.example/whl/cpu"
    assert named["policy"]["sets"] == [{"torch": "==2.13.0", "torchvision": "==0.28.0"}]
    fetch = next(step for step in named["steps"] if step["id"] == "fetch")
    assert fetch["commands"] == [] and "the files the vendor index resolves to" in fetch["title"]
    target = next(step for step in named["steps"] if step["id"] == "target")["command"]
    assert "--default-index" not in target


def test_preflight_with_a_gpu_only_option_is_refused_in_one_line() -> None:
    build = plan("--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--bitsandbytes", "build")
    assert build.returncode == 2
    assert build.stderr.splitlines()[0] == "error: --preflight and --bitsandbytes build were both given"


def test_preflight_refuses_vendor_sources_in_one_line() -> None:
    mirror = plan("--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--vendor-index", "https://mirror.example/jp6")
    assert mirror.returncode == 2 and mirror.stderr.splitlines()[0].startswith(
        "error: --preflight and --vendor-index were both given")
    assert "--cpu-index URL" in mirror.stderr
    fallback = plan("--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--vendor-fallback")
    assert fallback.returncode == 2 and "--preflight and --vendor-fallback were both given" in fallback.stderr


def test_preflight_of_a_channel_without_bitsandbytes_says_so_and_offers_no_board_build() -> None:
    data = plan_json("--root", "sample:agx-orin-jp7.2.1", "--preflight")
    assert data["profile"] == "preflight" and not data["requirement"].startswith("obliteratus[")
    assert any(w.startswith("channel jp7.2-orin has no bitsandbytes: the preflight installs") for w in data["warnings"])
    assert not [w for w in data["warnings"] if "--bitsandbytes build" in w]
    unsupported = plan_json("--root", "sample:xavier-nx-jp5.1.2", "--preflight")
    assert unsupported["supported"] is False and unsupported["profile"] == "preflight"


def test_cpu_index_needs_preflight_and_https() -> None:
    alone = plan("--root", "sample:agx-orin-64gb-jp6.2", "--cpu-index", "https://cpu.example/whl/cpu")
    assert alone.returncode == 2 and "--cpu-index is only for --preflight" in alone.stderr
    insecure = plan("--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--cpu-index", "http://cpu.example/whl")
    assert insecure.returncode == 2 and "plain http" in insecure.stderr


@pytest.mark.skipif(platform.machine().lower() in ("aarch64", "arm64"), reason="this machine is aarch64")
def test_preflight_install_refuses_other_machines_in_one_line(tmp_path: Path) -> None:
    result = run_cli("obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--preflight", "--venv",
                     str(tmp_path / "env"), "--yes")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (f"error: --preflight installs aarch64 CPU builds of torch, and this "
                                             f"machine is {platform.machine().lower()}")
    assert not (tmp_path / "env").exists()


def test_preflight_doctor_expects_cpu_and_its_pass_is_not_a_jetson_pass(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", **CPU_TORCH), profile=JP6_PREFLIGHT)
    statuses = {check.id: check.status for check in report.checks}
    assert statuses == {
        "platform": "ok", "python-abi": "ok", "libraries": "ok", "startup-hooks": "ok", "vendor-files": "ok",
        "loaded-files": "ok",
        "torch-import": "ok", "torch-build": "ok", "cuda-available": "not_applicable", "cuda-arch": "not_applicable",
        "cuda-matmul": "not_applicable",
        "cuda-conv2d": "not_applicable", "cuda-bf16": "not_applicable",
        # Triton's assembler assembles Orin's sm_87 (no GPU needed); the compiled function is not run.
        "compile": "ok",
        "numpy": "ok", "bnb-library": "ok", "bnb-kernels": "not_applicable", "bnb-int8": "not_applicable",
        "obliteratus": "ok", "jetson-contract": "not_applicable", "transformers-torch": "ok", "additions": "not_applicable",
        "pip-check": "ok",
    }, doctor.render_lines(report)
    assert "loaded its CPU library libbitsandbytes_cpu.so" in report.check("bnb-library").detail
    assert "answers 'cpu'" in report.check("obliteratus").detail
    assert report.exit_code == 0
    evidence = report.to_json()
    assert evidence["profile"] == "preflight" and evidence["status"] == "preflight-passed"
    assert "not evidence that the Jetson GPU works" in doctor.render_lines(report)[-1]
    # Neither the runtime gate nor `evidence check` takes it for Jetson evidence.
    assert gate_record(evidence, report.exit_code, "local")["status"] == "failed"
    with pytest.raises(BadInput, match="--strict is the Jetson runtime gate"):
        run(make_env(tmp_path / "strict", **CPU_TORCH), profile=JP6_PREFLIGHT, strict=True)
    assert not judge("preflight.json", evidence).ok


def test_preflight_doctor_fails_a_cuda_torch_and_a_bitsandbytes_library_that_cannot_load(tmp_path: Path) -> None:
    cuda = run(make_env(tmp_path / "cuda"), profile=JP6_PREFLIGHT)
    assert cuda.check("torch-build").status == "fail"
    assert "the preflight expects a CPU build" in cuda.check("torch-build").detail
    assert cuda.check("obliteratus").status == "fail"
    libgomp = run(make_env(tmp_path / "gomp", **CPU_TORCH,
                           bnb_load_error="libgomp.so.1: cannot open shared object file: No such file or directory"),
                  profile=JP6_PREFLIGHT)
    assert libgomp.check("bnb-library").fix == "sudo apt-get install libgomp1"
    assert libgomp.headline == "bnb-library"


def test_preflight_doctor_fails_a_bitsandbytes_outside_the_channel_range(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", **CPU_TORCH, bnb_version="0.51.0"), profile=JP6_PREFLIGHT)
    assert report.check("bnb-library").status == "fail"
    assert report.check("bnb-library").detail == "bitsandbytes 0.51.0 is outside the channel's range >=0.46.1,<0.51"


def _recorded_preflight_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An environment as a preflight install leaves it: its plan fingerprint and vendor record."""
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.envs.home import EnvironmentHome
    from jetson_install.envs.record import record_installed
    from jetson_install.planning.vendor_sources import offline_resolution
    from jetson_install.planning.options import PlanOptions
    from jetson_install.planning.planner import make_plan
    from jetson_install.board.platform import detect
    from jetson_install.board.samples import resolve_root
    from jetson_install.catalog.settings import load_index_settings

    environment = tmp_path / "env"
    make_env(environment, **CPU_TORCH, bnb_load_error="libgomp.so.1: cannot open shared object file")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no user config.toml names an index
    monkeypatch.delenv("JETSON_INSTALL_CONFIG", raising=False)
    settings = load_index_settings(None, "--vendor-index", None, "--default-index", False)
    the_plan = make_plan(detect(resolve_root("sample:agx-orin-64gb-jp6.2", "--root")), load_catalog(),
                         PlanOptions("obliteratus", settings, environment, preflight=True))
    assert the_plan.vendor is not None and the_plan.vendor.default_index
    record_installed(environment, offline_resolution(the_plan.vendor), (), "jetson-install obliteratus --preflight")
    EnvironmentHome(environment).record_plan(environment, the_plan.fingerprint())
    EnvironmentHome(environment).mark_complete(environment)
    return environment


def _doctor(*args: str) -> CliResult:
    with pytest.MonkeyPatch.context() as patch:  # as a user runs it: with the real `uv pip check`
        patch.setattr(interpreters, "pip_check", REAL_PIP_CHECK)
        return run_cli("doctor", *args)


def test_doctor_on_a_recorded_preflight_environment_uses_its_profile_and_checks_bitsandbytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environment = _recorded_preflight_environment(tmp_path, monkeypatch)
    result = _doctor("--venv", str(environment), "--root", "sample:agx-orin-64gb-jp6.2", "--json")
    evidence = json.loads(result.stdout)
    assert evidence["profile"] == "preflight", result.stderr
    checks = {check["id"]: check for check in evidence["checks"]}
    # The range is not in the vendor record (the CPU set is torch's family): it still applies.
    assert checks["bnb-library"]["status"] == "fail" and checks["bnb-library"]["fix"] == "sudo apt-get install libgomp1"
    assert checks["torch-build"]["title"] == "torch is a CPU build (preflight)"
    assert evidence["environment"]["vendor_source"] == "the default index"


def test_the_strict_gate_refuses_a_preflight_environment_in_one_line(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    environment = _recorded_preflight_environment(tmp_path, monkeypatch)
    result = _doctor("--venv", str(environment), "--root", "sample:agx-orin-64gb-jp6.2", "--strict")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (f"error: --strict is the Jetson runtime gate, and {environment} is "
                                             "checked as a preflight (CPU torch, made with --preflight)")
    assert "Traceback" not in result.stderr


def test_preflight_fixes_reinstall_the_preflight_never_a_cuda_build(tmp_path: Path) -> None:
    environment = tmp_path / "env"
    report = run(make_env(environment, **CPU_TORCH, torch_import_error="libtorch_cpu.so: cannot open shared object file"),
                 profile=JP6_PREFLIGHT)
    fix = report.check("torch-import").fix
    assert fix == f"jetson-install obliteratus --venv {environment}-jetson-install --preflight --l4t 36.4.3"
    assert report.check("platform").status == "ok"
    off_a_jetson = run(make_env(tmp_path / "other", **CPU_TORCH), platform=None, channel=None, profile=JP6_PREFLIGHT)
    assert off_a_jetson.check("platform").fix == ("name the Jetson release the preflight is for: "
                                                  "jetson-install doctor --preflight --l4t 36.4.3")

