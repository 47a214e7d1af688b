"""jetson-install doctor against stub torch/bitsandbytes environments, and against the real CPU torch."""

from __future__ import annotations

from typing import List, Set
import json
import os
import sys
from pathlib import Path

import jsonschema
import pytest

from jetson_install import doctor
from jetson_install.doctor.checks_integrity import FROM_RECORD
from jetson_install.envs import interpreters
from jetson_install.tools import runner
from jetson_install.catalog.catalog import Channel, VendorSource
from jetson_install.base.errors import BadInput
from jetson_install.board.platform import Platform
from jetson_install.board.release_files import L4T
from support import present
from support.cli import CliResult, run_cli
from support.lanes import lane_unavailable
from support.doctor_env import HOST_PYTHON, HOST_TAG, JP6, JP6_SOURCE, ORIN, SCHEMA, make_env, run

pytestmark = pytest.mark.usefixtures("clean_pip_check")  # uv is not what these tests exercise
REAL_PIP_CHECK = interpreters.pip_check


def failed(report: doctor.DoctorReport) -> Set[str]:
    return {check.id for check in report.checks if check.status == "fail"}


# --------------------------------------------------------------------------- scenarios


def test_everything_working_passes_and_records_the_evidence(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env")
    report = run(python)
    # Nothing was added to the stack: the additions check does not apply.
    statuses = {c.id: c.status for c in report.checks}
    assert statuses == {**{spec.id: "ok" for spec in doctor.CHECKS}, "additions": "not_applicable"}, \
        doctor.render_lines(report)
    assert report.exit_code == 0
    evidence = report.to_json()
    assert evidence["status"] == "passed"
    assert evidence["additions"] == {"projects": [], "check_commands": [], "gpu_code": []}
    assert evidence["platform"] == {
        "l4t": "36.4.3", "jetpack": "6.2", "arch": "aarch64", "python": evidence["platform"]["python"], "kind": "tegra",
        "channel": "jp6-cu126", "board": "NVIDIA Jetson Orin Nano Developer Kit",
        "module": "NVIDIA Jetson Orin Nano Developer Kit", "family": "Orin", "soc": "tegra234",
        "compute_capability": "8.7",
    }
    assert evidence["platform"]["python"].startswith(HOST_PYTHON)
    assert evidence["torch"] == {
        "version": "2.8.0",
        "cuda": "12.6",
        "device_name": "Orin (nvgpu)",
        "total_memory_bytes": 7_990_000_000,
        "capability": "8.7",
        "arch_list": ["sm_87"],
        "device_sm_in_arch_list": True,
        "kernels": {"matmul": "passed", "conv2d": "passed", "bf16_autocast_backward": "passed"},
        "missing_library": None,
        # Orin's sm_87 goes to Triton's ptxas (CUDA 12.8), which assembles it; the compiled function matched eager.
        "compile": {"triton": "3.7.1", "assembler": str(Path(python).parent.parent.joinpath(
                        f"lib/python{HOST_PYTHON}/site-packages/triton/backends/nvidia/bin/ptxas")),
                    "assembler_release": "12.8", "arch": "sm_87", "assembled": True, "function": "passed"},
    }
    assert evidence["bitsandbytes"] == {
        "version": "0.46.1", "backend": "CUDA", "library": "libbitsandbytes_cuda126.so", "kernel_test": "passed",
        "build": None,  # downloaded, not built on this machine
    }
    assert evidence["runtime"] == {
        "obliteratus_device": "cuda",
        "jetson_contract": "passed",
        "transformers": {"version": "5.20.2", "torch_floor": "2.6", "sees_torch": True},
    }
    assert all(check["fix"] is None for check in evidence["checks"])
    assert clean_pip_check == [python]


def test_cpu_only_torch_fails_the_build_and_cuda_checks(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", torch_version="2.8.0+cpu", torch_cuda=None, cuda_available=False))
    assert report.exit_code == 1
    build, cuda = report.check("torch-build"), report.check("cuda-available")
    assert build.status == "fail" and "CPU-only" in build.detail
    assert cuda.status == "fail" and "CPU-only" in cuda.detail
    assert 'torch==2.8.0' in present(build.fix) and "https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/" in present(build.fix)
    assert report.check("cuda-matmul").status == "skip"  # blocked by cuda-available, which is in the report
    # bitsandbytes then loads its CPU library; the fix points back at torch, not at a bnb build.
    assert report.check("bnb-library").status == "fail"
    assert "torch" in present(report.check("bnb-library").fix)
    assert report.check("obliteratus").status == "fail"
    assert report.to_json()["bitsandbytes"]["library"] == "libbitsandbytes_cpu.so"


def test_torch_without_sm_87_kernels_fails_arch_and_matmul(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", arch_list=["sm_80", "sm_90"]))
    arch = report.check("cuda-arch")
    assert arch.status == "fail"
    assert "sm_87" in arch.detail and "sm_80 sm_90" in arch.detail
    assert "torch==2.8.0" in present(arch.fix)
    matmul = report.check("cuda-matmul")
    assert matmul.status == "fail" and "no kernel image" in matmul.detail
    assert report.exit_code == 1


def test_bitsandbytes_with_its_cpu_library_fails_with_the_source_build_fix(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", bnb_library="cpu"))
    library = report.check("bnb-library")
    assert library.status == "fail"
    assert "libbitsandbytes_cpu.so" in library.detail
    assert "-DCOMPUTE_CAPABILITY=87" in present(library.fix)
    assert report.check("bnb-kernels").status == "skip"
    assert failed(report) == {"bnb-library"}
    assert report.to_json()["bitsandbytes"]["kernel_test"] == "not_run"


def test_bitsandbytes_error_mock_is_not_taken_for_a_loaded_library(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", bnb_library="mock"))
    library = report.check("bnb-library")
    assert library.status == "fail"
    assert "error mock" in library.detail and "libbitsandbytes_cuda126.so" in library.detail
    assert "-DCOMPUTE_CAPABILITY=87" in present(library.fix)
    assert report.to_json()["bitsandbytes"]["library"] is None


def test_bitsandbytes_kernel_fault_fails_with_the_ops_cu_line(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", bnb_fault="nf4"))
    kernels = report.check("bnb-kernels")
    assert kernels.status == "fail"
    assert "Error named symbol not found at line 75 in file /src/csrc/ops.cu" in kernels.detail
    assert "nf4" in kernels.detail and "exited 1" in kernels.detail
    assert "-DCOMPUTE_CAPABILITY=87" in present(kernels.fix)
    # What the probe learned before the fault is kept.
    assert report.check("bnb-library").status == "ok"
    assert report.to_json()["bitsandbytes"]["library"] == "libbitsandbytes_cuda126.so"
    assert report.to_json()["bitsandbytes"]["kernel_test"] == "failed"
    assert report.exit_code == 1


def test_int8_does_not_apply_below_compute_capability_7_5_and_the_strict_gate_still_passes(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", capability=[7, 2], arch_list=["sm_72"], bnb_fault="int8"), strict=True)
    int8 = report.check("bnb-int8")
    assert int8.status == "not_applicable" and "7.2 < 7.5" in int8.detail
    assert report.check("bnb-kernels").status == "ok"
    assert report.exit_code == 0
    assert doctor.render_lines(report)[-1].startswith("Strict gate passed")


@pytest.mark.slow
def test_a_hung_probe_fails_its_checks_and_doctor_returns(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", hang=True), timeout=3)
    cuda = report.check("cuda-available")
    assert cuda.status == "fail" and "timed out" in cuda.detail
    assert report.check("torch-import").status == "ok"  # learned before the hang
    assert report.check("bnb-library").status == "fail" and "timed out" in report.check("bnb-library").detail
    assert report.exit_code == 1


def test_torch_import_failing_on_libopenblas_names_the_apt_package(tmp_path: Path) -> None:
    error = "libopenblas.so.0: cannot open shared object file: No such file or directory"
    report = run(make_env(tmp_path / "env", torch_import_error=error))
    torch_import = report.check("torch-import")
    assert torch_import.status == "fail"
    assert "OSError: libopenblas.so.0" in torch_import.detail
    assert torch_import.fix == "sudo apt-get install libopenblas-dev"
    assert report.check("cuda-available").status == "skip"
    assert report.exit_code == 1


@pytest.mark.parametrize(
    ("library", "fix"),
    [
        ("libcusparseLt.so.0", "sudo apt-get install libcusparselt0 libcusparselt-dev"),
        ("libcudnn.so.8", "cuDNN"),
    ],
)
def test_other_missing_libraries_map_to_their_fix(tmp_path: Path, library: str, fix: str) -> None:
    error = f"{library}: cannot open shared object file: No such file or directory"
    report = run(make_env(tmp_path / "env", torch_import_error=error), only=["torch-import"])
    assert fix in present(report.check("torch-import").fix)


def test_wrong_numpy_and_pin_are_reported(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", numpy_version="2.1.0", torch_version="2.9.0"))
    assert failed(report) == {"numpy", "torch-build"}
    assert present(report.check("numpy").fix).endswith('"numpy<2"')
    assert "2.9.0" in report.check("torch-build").detail


def test_python_abi_is_judged_by_the_installed_wheels_not_the_channel(tmp_path: Path) -> None:
    # A mirror of builds for this interpreter's Python passes, whatever Python the channel names.
    other_python = Channel(**dict(JP6.__dict__, python="3.10" if HOST_PYTHON != "3.10" else "3.12"))
    mirror = run(make_env(tmp_path / "mirror"), channel=other_python)
    assert mirror.check("python-abi").status == "ok"
    assert f"({HOST_TAG}) matches the installed wheels (torch)" in mirror.check("python-abi").detail
    # A torch wheel for another Python fails, and its fix names only what exists here.
    python = make_env(tmp_path / "env", torch_tag="cp36-cp36m-linux_aarch64")
    wrong = run(python).check("python-abi")
    assert wrong.status == "fail"
    assert wrong.detail == f"the installed torch wheel is built for cp36, but this interpreter is Python {sys.version.split()[0]} ({HOST_TAG})"
    assert present(wrong.fix).startswith("no Python 3.6 here: sudo apt-get install python3.6 python3.6-venv, then run "
                                f"jetson-install obliteratus --venv {tmp_path / 'env'}-jetson-install --python /usr/bin/python3.6")


def test_the_headline_is_the_most_fundamental_failure(tmp_path: Path) -> None:
    # A CPU-only torch fails torch-build, cuda-available, bnb-library and obliteratus;
    # the one to fix is torch-build, and a wheel for another Python comes before even that.
    cpu = run(make_env(tmp_path / "cpu", torch_version="2.8.0+cpu", torch_cuda=None, cuda_available=False))
    assert cpu.headline == "torch-build"
    assert doctor.render_lines(cpu)[-1] == "Start with torch-build: the others may follow from it."
    both = run(make_env(tmp_path / "both", torch_version="2.8.0+cpu", torch_cuda=None, cuda_available=False,
                        torch_tag="cp36-cp36m-linux_aarch64"))
    assert both.headline == "python-abi"
    assert run(make_env(tmp_path / "ok")).headline is None


def test_no_jetson_under_the_root_with_a_recorded_vendor_does_not_crash(tmp_path: Path) -> None:
    # A container, or a host checked with the default root: no platform, no channel, but the
    # environment recorded what it was built from.
    python = make_env(tmp_path / "env", torch_version="2.8.0+cpu", torch_cuda=None, cuda_available=False)
    report = run(python, platform=None, channel=None, vendor=JP6_SOURCE)
    assert not [c for c in report.checks if "could not evaluate" in c.detail], doctor.render_lines(report)
    build = report.check("torch-build")
    assert build.status == "fail" and "CPU-only" in build.detail
    assert f"jetson-install obliteratus --venv {tmp_path / 'env'}-jetson-install" in present(build.fix)
    assert report.check("cuda-available").status == "fail"


def test_the_torch_fix_does_not_send_back_to_the_source_that_served_the_cpu_build(tmp_path: Path) -> None:
    fallback = VendorSource.pinned(None, ("https://example.invalid/torch-2.5.0a0+nv24.08-cp310-cp310-linux_aarch64.whl",),
                                   {"torch": "2.5.0a0+nv24.08"}, "<2")
    channel = Channel(**dict(JP6.__dict__, sources=(JP6_SOURCE, fallback)))
    python = make_env(tmp_path / "env", torch_version="2.8.0", torch_cuda=None, cuda_available=False)
    during_install = run(python, channel=channel, install_command="jetson-install obliteratus --yes")
    fix = present(during_install.check("torch-build").fix)
    assert fix == ("install from the channel's fallback source (https://example.invalid/torch-2.5.0a0+nv24.08-cp310-"
                   "cp310-linux_aarch64.whl): jetson-install obliteratus --yes --vendor-fallback")
    assert "jetson-ai-lab" not in fix
    later = present(run(python, channel=channel).check("torch-build").fix)
    assert later.startswith("install from the channel's fallback source")
    assert "if another installer replaced it after the install" in later


def test_bitsandbytes_library_missing_libgomp_names_its_apt_package(tmp_path: Path) -> None:
    error = ("libgomp.so.1: cannot open shared object file: No such file or directory")
    report = run(make_env(tmp_path / "env", torch_version="2.8.0", torch_cuda=None, cuda_available=False,
                          bnb_load_error=error))
    library = report.check("bnb-library")
    assert library.status == "fail"
    assert "libgomp.so.1" in library.detail
    assert library.fix == "sudo apt-get install libgomp1"


def test_nvidia_prerelease_version_matches_its_pin(tmp_path: Path) -> None:
    nvidia = "2.5.0a0+872d972e41.nv24.08"
    wheel = "https://developer.download.nvidia.com/compute/redist/jp/v61/pytorch/torch-2.5.0a0+872d972e41.nv24.08.17622132-cp310-cp310-linux_aarch64.whl"
    source = VendorSource.pinned(None, (wheel,), {"torch": "2.5.0a0+872d972e41.nv24.8"}, "<2", ())
    channel = Channel(**dict(JP6.__dict__, sources=(source,)))
    report = run(make_env(tmp_path / "env", torch_version=nvidia), channel=channel, only=["torch-build"])
    assert report.check("torch-build").status == "ok"
    wrong = run(make_env(tmp_path / "cpu", torch_version="2.5.0+cpu", torch_cuda=None), channel=channel, only=["torch-build"])
    fix = present(wrong.check("torch-build").fix)
    assert f"uv pip install --python {tmp_path / 'cpu'}/bin/python --no-deps --reinstall-package torch" in fix
    assert "torch-2.5.0a0+872d972e41.nv24.08.17622132-cp310-cp310-linux_aarch64.whl" in fix
    # The package index's +cpu build: first the channel's set in an environment jetson-install makes.
    assert fix.startswith("install the channel's vendor set in an environment jetson-install makes: "
                          f"jetson-install obliteratus --venv {tmp_path / 'cpu'}-jetson-install; or replace torch "
                          "in this environment: ") and fix.endswith(wheel)


def test_off_jetson_platform_warns_and_channel_checks_skip(tmp_path: Path) -> None:
    desktop = Platform(**dict(ORIN.__dict__, jetson=False, l4t=None, jetpack=None, kind=None, arch="x86_64"))
    python = make_env(tmp_path / "env", capability=[9, 0], arch_list=["sm_80", "sm_90"], device_name="NVIDIA H200")
    for platform in (None, desktop):
        report = run(python, platform=platform, channel=None)
        assert report.check("platform").status == "warn" and "not a Jetson" in report.check("platform").detail
        assert report.check("python-abi").status == "ok"  # judged by the wheels, which need no channel
        assert report.exit_code == 0, doctor.render_lines(report)


def test_desktop_binary_compatibility_but_not_on_tegra() -> None:
    assert doctor.arch_support((8, 6), ["sm_80", "sm_90"], tegra=False)[0]
    assert not doctor.arch_support((8, 7), ["sm_80", "sm_90"], tegra=True)[0]
    assert doctor.arch_support((8, 7), ["sm_80", "compute_80"], tegra=True)[0]  # PTX JITs upward
    assert not doctor.arch_support((8, 7), ["compute_90"], tegra=True)[0]
    assert doctor.arch_support((12, 1), ["sm_100", "sm_121"], tegra=False)[0]


def test_pip_check_problems_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jetson_install.envs.interpreters as interpreters

    broken = runner.Completed(("uv",), 1, "pkgy 1.0 requires torch>=2.6, but 2.8.0 is installed\n", "")
    monkeypatch.setattr(interpreters, "pip_check", lambda python: broken)
    report = run(make_env(tmp_path / "env"), only=["pip-check"])
    assert [c.id for c in report.checks] == ["pip-check"]
    assert report.check("pip-check").status == "fail"
    assert "pkgy 1.0 requires torch>=2.6" in report.check("pip-check").detail
    assert report.exit_code == 1


def test_only_runs_the_selected_checks_and_their_prerequisites(tmp_path: Path, clean_pip_check: List[str]) -> None:
    report = run(make_env(tmp_path / "env"), only=["cuda-matmul"])
    assert [c.id for c in report.checks] == ["torch-import", "cuda-available", "cuda-matmul"]
    assert clean_pip_check == []  # uv was not needed
    assert report.to_json()["bitsandbytes"]["kernel_test"] == "not_run"


def test_missing_interpreter_and_unknown_check_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput):
        doctor.run_doctor(doctor.DoctorRequest(str(tmp_path / "nope" / "python"), None, None))
    with pytest.raises(BadInput):
        doctor.run_doctor(doctor.DoctorRequest(sys.executable, None, None, only=("no-such-check",)))


def test_list_checks_and_human_rendering(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", bnb_library="cpu"))
    # `doctor --list-checks` lists what a run checks: each check, in the order run, as titled and weighed there.
    assert doctor.list_checks() == [(check.id, check.title, check.required) for check in report.checks]
    lines = doctor.render_lines(report)
    assert lines[0].startswith("✓ ") and "[platform]" in lines[0]
    failing = next(i for i, line in enumerate(lines) if line.startswith("✗ ") and "[bnb-library]" in line)
    assert lines[failing + 1].startswith("    fix: ") and "cmake" in lines[failing + 1]
    assert any(line.startswith("- ") and "[bnb-kernels]" in line for line in lines)
    assert lines[-2].startswith("Doctor found problems in 1 required check(s): bnb-library")


# --------------------------------------------------------------------------- kernels decide

THOR = Platform(**dict(ORIN.__dict__, l4t=L4T(38, 2, 0), jetpack="7.0", cuda="13.0", soc="tegra264", family="Thor",
                       module="NVIDIA Jetson AGX Thor Developer Kit", model="NVIDIA Jetson AGX Thor Developer Kit",
                       compute_capability="11.0", kind="sbsa", ubuntu="24.04", python="3.12"))
# The official CUDA 13 aarch64 arch list: no sm_87 (pytorch/pytorch RELEASE.md, PR #182849).
CUDA13_ARCH_LIST = ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]


def test_orin_running_cuda13_kernels_without_sm_87_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", arch_list=CUDA13_ARCH_LIST, sm80_code_runs=True))
    arch = report.check("cuda-arch")
    assert arch.status == "warn", doctor.render_lines(report)
    assert "no sm_87 kernels" in arch.detail
    assert "matmul, conv2d and bf16 autocast with backward ran correctly on sm_87" in arch.detail
    assert report.exit_code == 0, doctor.render_lines(report)
    torch = report.to_json()["torch"]
    assert torch["device_sm_in_arch_list"] is False
    assert torch["kernels"] == {"matmul": "passed", "conv2d": "passed", "bf16_autocast_backward": "passed"}


def test_a_wrong_conv2d_fails_and_keeps_cuda_arch_a_failure(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", arch_list=CUDA13_ARCH_LIST, sm80_code_runs=True, conv2d_result="wrong"))
    conv2d = report.check("cuda-conv2d")
    assert conv2d.status == "fail" and "conv2d on cuda differs from the CPU" in conv2d.detail
    assert "torch==2.8.0" in present(conv2d.fix)
    assert report.check("cuda-arch").status == "fail"  # the kernels did not all run right
    assert report.to_json()["torch"]["kernels"]["conv2d"] == "failed"
    assert report.exit_code == 1


def test_bf16_autocast_giving_nan_fails(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", bf16_result="nan"))
    bf16 = report.check("cuda-bf16")
    assert bf16.status == "fail" and "bf16 autocast linear forward and backward" in bf16.detail
    assert "non-finite" in bf16.detail
    assert failed(report) == {"cuda-bf16"}
    assert report.to_json()["torch"]["kernels"]["bf16_autocast_backward"] == "failed"


def test_bf16_does_not_apply_below_compute_capability_8(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", capability=[7, 2], arch_list=["sm_72"]))
    assert report.check("cuda-bf16").status == "not_applicable"
    assert "7.2 < 8.0" in report.check("cuda-bf16").detail
    assert report.check("cuda-conv2d").status == "ok"
    assert report.to_json()["torch"]["kernels"]["bf16_autocast_backward"] == "not_applicable"
    assert report.exit_code == 0, doctor.render_lines(report)


def test_kernels_without_device_code_fail_each_kernel_check(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", arch_list=CUDA13_ARCH_LIST))
    for check_id in ("cuda-arch", "cuda-matmul", "cuda-conv2d", "cuda-bf16", "jetson-contract"):
        assert report.check(check_id).status == "fail", check_id
    assert "no kernel image" in report.check("cuda-conv2d").detail
    assert "no kernel image" in report.check("jetson-contract").detail
    assert report.to_json()["runtime"]["jetson_contract"] == "failed"


def test_obliteratus_contract_fails_on_non_finite_arange_matmul(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", matmul_result="nan"), only=["jetson-contract"])
    contract = report.check("jetson-contract")
    assert contract.status == "fail"
    assert contract.detail == "a 4x4 float32 arange matmul t @ t.T on cuda gave non-finite numbers"
    assert [c.id for c in report.checks] == ["torch-import", "cuda-available", "obliteratus", "jetson-contract"]


def test_obliteratus_contract_is_skipped_when_obliteratus_picks_cpu(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", cuda_available=False))
    assert report.check("obliteratus").status == "fail"
    assert report.check("jetson-contract").status == "skip"
    runtime = report.to_json()["runtime"]
    assert runtime["obliteratus_device"] == "cpu" and runtime["jetson_contract"] == "not_run"


def test_transformers_disabling_jetpack_60_torch_names_both_versions(tmp_path: Path) -> None:
    # JetPack 6.0's NVIDIA build is 2.4.0a0+..., which PEP 440 puts below 2.4.
    env = make_env(tmp_path / "env", torch_version="2.4.0a0+07cecf4168.nv24.05", transformers_version="5.10.4",
                   transformers_torch_floor="2.4")
    report = run(env, only=["transformers-torch"])
    check = report.check("transformers-torch")
    assert check.status == "fail"
    assert check.detail == "transformers 5.10.4 disables torch 2.4.0a0+07cecf4168.nv24.05: it needs torch>=2.4"
    assert f"jetson-install obliteratus --venv {tmp_path / 'env'}-jetson-install" in present(check.fix)
    assert report.to_json()["runtime"]["transformers"] == {"version": "5.10.4", "torch_floor": "2.4", "sees_torch": False}
    assert report.exit_code == 1


def test_transformers_seeing_torch_passes_and_absent_transformers_does_not_apply(tmp_path: Path) -> None:
    seen = run(make_env(tmp_path / "seen", torch_version="2.4.0", transformers_torch_floor="2.4"),
               only=["transformers-torch"])
    assert seen.check("transformers-torch").status == "ok"
    assert seen.check("transformers-torch").detail == "transformers 5.20.2 sees torch 2.4.0 (it needs torch>=2.4)"
    absent = run(make_env(tmp_path / "absent", transformers_version=None), only=["transformers-torch"])
    # Not a skip (which fails the strict gate): a torch stack need not carry transformers, and
    # OBLITERATUS' own check fails where it lacks it.
    assert absent.check("transformers-torch").status == "not_applicable"
    assert absent.to_json()["runtime"]["transformers"] == {"version": None, "torch_floor": None, "sees_torch": None}


ADD_CUDA_REPOSITORY = ("wget https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/"
                       "cuda-keyring_1.1-1_all.deb && sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt-get update && ")


@pytest.mark.parametrize(
    ("platform", "library", "provided_by", "fix"),
    [
        # Jetson AI Lab sbsa/cu130 torch on Thor (pollen-robotics/microduck_rl#38).
        (THOR, "libnvpl_lapack_lp64_gomp.so.0", "pip: nvpl-lapack", "pip install --python {python} nvpl-lapack"),
        (THOR, "libnvpl_blas_lp64_gomp.so.0", "pip: nvpl-blas", "pip install --python {python} nvpl-blas"),
        (THOR, "libcudss.so.0", "pip: nvidia-cudss-cu13", "pip install --python {python} nvidia-cudss-cu13"),
        (THOR, "libcusparseLt.so.0", "pip: nvidia-cusparselt-cu13", "nvidia-cusparselt-cu13"),
        # jp6/cu126 torch 2.11 links libcudss.so.0; on JetPack 6 it is an apt package of NVIDIA's
        # CUDA repository, which the fix adds first (a stock JetPack's apt has no `cudss`).
        (ORIN, "libcudss.so.0", "apt: cudss", ADD_CUDA_REPOSITORY + "sudo apt-get install cudss"),
        (ORIN, "libcusparseLt.so.0", "apt: libcusparselt0 libcusparselt-dev",
         ADD_CUDA_REPOSITORY + "sudo apt-get install libcusparselt0 libcusparselt-dev"),
    ],
)
def test_a_missing_library_is_named_with_the_package_that_provides_it(
    tmp_path: Path, platform: Platform, library: str, provided_by: str, fix: str
) -> None:
    error = f"{library}: cannot open shared object file: No such file or directory"
    python = make_env(tmp_path / "env", torch_import_error=error)
    report = run(python, platform=platform, channel=None, only=["torch-import"])
    check = report.check("torch-import")
    assert check.status == "fail"
    installer, package = provided_by.split(": ")
    noun = "packages" if " " in package else "package"
    assert check.detail == f"import torch failed: OSError: {error}; {library} comes from the {installer} {noun} {package}"
    if installer == "apt":
        assert check.fix == fix
    else:
        assert fix.format(python=python) in present(check.fix)
    assert report.to_json()["torch"]["missing_library"] == {"file": library, "provided_by": provided_by}


def test_version_2_evidence_needs_the_kernel_and_runtime_sections(tmp_path: Path) -> None:
    evidence = run(make_env(tmp_path / "env")).to_json()
    assert evidence["schema_version"] == 2
    del evidence["runtime"]
    with pytest.raises(jsonschema.ValidationError, match="'runtime' is a required property"):
        jsonschema.validate(evidence, SCHEMA)


# --------------------------------------------------------------------------- the real CPU torch wheel

REAL_TORCH_PYTHON = os.environ.get("JETSON_INSTALL_REAL_TORCH_PYTHON")


# Slow: the sealed proof imports the real torch under an empty bytecode folder, so it compiles
# torch's sources: a minute of both cores, the same on every Python the fast tier runs on.
@pytest.mark.slow
def test_real_torch_is_judged_for_the_build_it_is() -> None:
    # tests/setup.d/10-real-torch-env: the CPU build where pip finds one on disk, else the one the
    # package index serves (a CUDA build), on this machine without a Jetson GPU either way.
    if not REAL_TORCH_PYTHON:
        lane_unavailable("real torch", "tests/setup.d/10-real-torch-env made no .venv-real-torch (run tests/setup; "
                                       "it says why)")
    report = run(str(REAL_TORCH_PYTHON), platform=None, channel=None)
    assert report.exit_code == 1
    assert report.check("torch-import").status == "ok"
    # Every library the real wheel's .so files link is found: torch/lib and this machine's own.
    libraries = report.check("libraries")
    assert libraries.status == "ok" and "in torch/lib" in libraries.detail and "on the board's library path" in libraries.detail
    assert report.check("cuda-available").status == "fail"
    evidence = report.to_json()
    if evidence["torch"]["version"].endswith("+cpu"):
        build = report.check("torch-build")
        assert build.status == "fail" and "+cpu" in build.detail and "CPU-only" in build.detail
        library = report.check("bnb-library")
        assert library.status == "fail" and "libbitsandbytes_cpu.so" in library.detail
        assert evidence["torch"]["cuda"] is None
        assert evidence["bitsandbytes"]["backend"] == "CPU"
    else:  # the package index's build for Linux links a CUDA runtime, with no device to run on here
        assert evidence["torch"]["version"] == "2.13.0" and evidence["torch"]["cuda"]
    # The real wheel's RECORD holds for every file (the environment has no manifest: pip made it).
    assert report.check("vendor-files").status == "ok" and FROM_RECORD in report.check("vendor-files").detail
    # Every file that ran in the sealed proof is its distribution's: torch's and what it imports.
    loaded = report.check("loaded-files")
    assert loaded.status == "ok" and "numpy " in loaded.detail and "typing-extensions 1 (its RECORD)" in loaded.detail
    assert evidence["integrity"]["ran"]["distributions"]["torch"]["files"] > 500
    # pip's setuptools left its .pth, which changes nothing torch reports: known by what it does.
    assert report.check("startup-hooks").detail.endswith("with its start-up hooks: distutils-precedence.pth "
                                                         "(installed by setuptools)")


def test_example_evidence_in_docs_matches_the_schema() -> None:
    import jsonschema

    examples = sorted((Path(__file__).resolve().parent.parent / "docs" / "examples").glob("*.json"))
    assert examples
    for example in examples:
        jsonschema.validate(json.loads(example.read_text()), doctor.evidence_schema())


def test_bitsandbytes_checks_do_not_apply_where_the_channel_has_no_build(tmp_path: Path) -> None:
    torch_only = VendorSource.pinned(index=None, wheels=("https://example.invalid/torch-2.8.0-cp310-cp310-linux_aarch64.whl",),
                              pins={"torch": "2.8.0"}, numpy="<2", apt=())
    report = run(make_env(tmp_path / "env"), vendor=torch_only, strict=True)
    statuses = {check: report.check(check).status for check in ("bnb-library", "bnb-kernels", "bnb-int8")}
    assert statuses == dict.fromkeys(statuses, "not_applicable")
    assert "without its quantization extra" in report.check("bnb-library").detail
    assert report.to_json()["bitsandbytes"]["kernel_test"] == "not_applicable"
    assert report.exit_code == 0
    assert "4 not applicable" in doctor.render_lines(report)[-1]  # the three, and nothing added to the stack


def test_strict_gate_fails_on_a_skip_and_names_it(tmp_path: Path) -> None:
    env = make_env(tmp_path / "env", bnb_library="cpu")
    assert run(env, vendor=JP6_SOURCE).check("bnb-kernels").status == "skip"
    report = run(env, strict=True)
    assert report.exit_code == 1
    assert report.to_json()["strict"] is True and report.to_json()["status"] == "failed"
    summary = doctor.render_lines(report)[-1]
    assert summary.startswith("Strict gate failed: bnb-library (fail), bnb-kernels (skip), bnb-int8 (skip)")


def test_strict_gate_fails_on_a_warning(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env"), platform=None, channel=None, strict=True)
    assert report.check("platform").status == "warn"
    assert report.exit_code == 1
    assert "platform (warn)" in doctor.render_lines(report)[-1]


def test_strict_refuses_a_partial_run(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="--strict runs every check"):
        run(make_env(tmp_path / "env"), strict=True, only=("torch-import",))


def test_evidence_records_the_environment_it_checked(tmp_path: Path) -> None:
    env = make_env(tmp_path / "env")
    (dist_info,) = Path(env).parent.parent.glob("lib/python*/site-packages/obliteratus-*.dist-info")
    commit = "0123456789abcdef0123456789abcdef01234567"
    (dist_info / "direct_url.json").write_text(json.dumps(
        {"url": "https://github.com/elder-plinius/OBLITERATUS.git",
         "vcs_info": {"vcs": "git", "commit_id": commit, "requested_revision": "v0.1.3"}}))
    assert run(env).to_json()["environment"]["vendor_builds"] is None  # nothing recorded, nothing claimed
    environment = run(env, vendor=JP6_SOURCE).to_json()["environment"]
    assert environment == {
        "vendor_source": "https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/",
        "vendor_builds": {"torch": "2.8.0", "bitsandbytes": "0.46.1"},
        "obliteratus": {"version": "0.1.2", "source": "https://github.com/elder-plinius/OBLITERATUS.git",
                        "commit": commit},
    }


def test_the_installed_vendor_source_is_what_the_build_is_checked_against(tmp_path: Path) -> None:
    fallback = VendorSource.pinned(index=None, wheels=("https://example.invalid/torch-2.5.0a0+872d972e41.nv24.08-cp310-cp310-linux_aarch64.whl",),
                            pins={"torch": "2.5.0a0+872d972e41.nv24.08"}, numpy="<2", apt=())
    env = make_env(tmp_path / "env", torch_version="2.5.0a0+872d972e41.nv24.08")
    assert run(env, vendor=fallback).check("torch-build").status == "ok"
    assert run(env).check("torch-build").status == "fail"  # against the channel's first source: 2.8.0


def test_orin_capability_counts_as_tegra_even_without_a_detected_platform(tmp_path: Path) -> None:
    report = run(make_env(tmp_path / "env", arch_list=["sm_80", "sm_90"]), platform=None, channel=None)
    assert report.check("cuda-arch").status == "fail"
    assert "no sm_87 kernels" in report.check("cuda-arch").detail


def test_only_capabilities_of_gpus_with_l4t_cuda_count_as_tegra_without_a_detected_platform(tmp_path: Path) -> None:
    """platform-data.toml says which: Orin's sm_87 does (bitsandbytes is built on the device),
    Thor's sm_110 does not (it has only JetPack 7's SBSA CUDA, whose wheels carry sm_110)."""
    orin = run(make_env(tmp_path / "orin", bnb_library="cpu"), platform=None, channel=None)
    assert "cmake -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY=87" in present(orin.check("bnb-library").fix)
    thor = run(make_env(tmp_path / "thor", bnb_library="cpu", capability=[11, 0], arch_list=CUDA13_ARCH_LIST),
               platform=None, channel=None)
    fix = present(thor.check("bnb-library").fix)
    assert "--reinstall-package bitsandbytes bitsandbytes" in fix and "cmake" not in fix


def test_arch_specific_ptx_does_not_run_on_other_devices() -> None:
    assert doctor.arch_support((8, 7), ["compute_86a"], tegra=True)[0] is False
    assert doctor.arch_support((8, 7), ["compute_80"], tegra=True)[0] is True


def run_doctor_cli(*args: str) -> CliResult:
    with pytest.MonkeyPatch.context() as patch:  # as a user runs it: with the real `uv pip check`
        patch.setattr(interpreters, "pip_check", REAL_PIP_CHECK)
        return run_cli("doctor", *args)


def test_cli_json_evidence_and_exit_code(tmp_path: Path) -> None:
    env = make_env(tmp_path / "env", cuda_available=False, torch_cuda=None, torch_version="2.8.0+cpu")
    evidence = tmp_path / "evidence.json"
    result = run_doctor_cli("--python", env, "--json", "--evidence", str(evidence))
    assert result.returncode == 1, result.stderr
    printed = json.loads(result.stdout)
    jsonschema.validate(printed, SCHEMA)
    assert printed["status"] == "failed"
    assert json.loads(evidence.read_text())["checks"] == printed["checks"]


def test_cli_human_output_has_one_line_per_check_and_a_summary(tmp_path: Path) -> None:
    result = run_doctor_cli("--python", make_env(tmp_path / "env"), "--check", "cuda-matmul")
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("✓") and "[cuda-matmul]" in line for line in lines)
    assert "cuda-available" in result.stdout  # its prerequisite ran too


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--venv", "/nonexistent/env"], "no environment at /nonexistent/env"),
        (["--python", "/nonexistent/python"], "no Python interpreter at /nonexistent/python"),
        (["--python", sys.executable, "--check", "nope"], "unknown doctor check nope"),
        (["--python", sys.executable, "--evidence", "/nonexistent/dir/x.json"], "its directory does not exist"),
        (["--python", sys.executable, "--venv", "/tmp"], "were both given"),
    ],
)
def test_cli_could_not_run_is_exit_2_with_one_line(args: List[str], fragment: str) -> None:
    result = run_doctor_cli(*args)
    assert result.returncode == 2
    assert fragment in result.stderr and "Traceback" not in result.stderr


def test_cli_lists_checks() -> None:
    result = run_doctor_cli("--list-checks")
    assert result.returncode == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == [spec.id for spec in doctor.CHECKS]


@pytest.mark.slow
def test_a_probe_busy_for_a_while_says_what_it_waits_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.doctor import context

    monkeypatch.setattr(context, "SLOW_PROBE_SECONDS", 0.5)
    python = make_env(tmp_path / "env", import_seconds=1.5)
    told: List[str] = []
    report = run(python, progress=told.append)
    assert f"importing torch in {python} ..." in told
    assert f"importing torch and bitsandbytes in {python} ..." in told
    assert len(told) == len(set(told))  # each wait is told once
    assert report.exit_code == 0  # slow is not broken

