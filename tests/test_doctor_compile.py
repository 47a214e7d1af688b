"""The compile check with stand-ins: a stub Triton whose ptxas-blackwell refuses Thor's sm_110a
(as Triton 3.6's CUDA 12.9 one does: pytorch/pytorch#170117) or assembles it, a board whose
CUDA has a ptxas that can, the install's fix in the activate scripts, and the channel's word
on whether the check counts. The real Triton 3.7.1 assembler runs in the arm64 lane
(tests/test_lane_thor.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from support.doctor_env import JP6, ORIN, make_env, run, stub_ptxas
from support.interrupts import wait_until

from jetson_install.board.platform import Platform
from jetson_install.catalog.catalog import GateRule
from jetson_install.doctor.profiles import PreflightProfile
from jetson_install.envs.activation import activate_variables, protect
from jetson_install.planning.routes.shared import ptxas_variable
from jetson_install.running.handlers import _board_assembler

REFUSED = "ptxas fatal   : Value 'sm_110a' is not defined for option 'gpu-name'"
# Triton 3.6: a ptxas-blackwell of CUDA 12.9, which does not know Thor.
TRITON_36 = {"triton_version": "3.6.0", "triton_blackwell_release": "12.9", "triton_rejects": ["sm_110a"]}
THOR_DEVICE = {"capability": [11, 0], "arch_list": ["sm_110"], "device_name": "NVIDIA Thor"}
# A Triton assembler that answers --version and refuses Thor, but asked by the assembler probe
# (a .ptx file), says its pid and that file, then runs until it is killed.
HANGING_PTXAS = """#!/bin/sh
case "$1" in --version) printf 'Cuda compilation tools, release 12.9, V12.9.0\\n'; exit 0;; esac
for arg in "$@"; do case "$arg" in *.ptx) ptx="$arg";; esac; done
[ -n "$ptx" ] || {{ echo "{refused}" >&2; exit 255; }}
printf '%s %s\\n' "$$" "$ptx" > "{said}.part" && mv "{said}.part" "{said}"
exec sleep 600
"""
# The doctor a user kills (-9) while the assembler probe runs: argv is the python and the board root.
KILLED_DOCTOR = """
import sys
from pathlib import Path
from jetson_install.doctor import DoctorRequest, run_doctor
from support.doctor_env import JP6
from test_doctor_compile import thor
run_doctor(DoctorRequest(sys.argv[1], thor(Path(sys.argv[2])), JP6, only=("compile",)))
"""


def thor(root: Path) -> Platform:
    """A Thor whose own programs are `root`'s: the stand-in board's ptxas (detection gives this machine's root)."""
    return dataclasses.replace(ORIN, root=str(root), family="Thor", soc="tegra264", compute_capability="11.0",
                               kind="sbsa", programs_root=str(root))


def board_root(tmp_path: Path, assembles: bool) -> Path:
    """A board root whose CUDA's ptxas (13.0) assembles sm_110a, or refuses it too."""
    root = tmp_path / "board"
    stub_ptxas(root / "usr/local/cuda/bin/ptxas", "13.0", () if assembles else ("sm_110a",))
    return root


def test_a_triton_whose_assembler_refuses_thor_fails_and_names_the_boards_ptxas(
        tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    root = board_root(tmp_path, assembles=True)
    report = run(python, platform=thor(root))
    check = report.check("compile")
    assert check.status == "fail" and check.required
    assert check.detail.startswith("Triton 3.6.0's ptxas-blackwell (")
    assert f"CUDA 12.9) cannot assemble sm_110a: {REFUSED}; every torch.compile'd kernel fails" in check.detail
    board = root / "usr/local/cuda/bin/ptxas"
    assert check.fix is not None and check.fix.endswith(f"in this shell: export TRITON_PTXAS_BLACKWELL_PATH={board}")
    assert report.exit_code == 1
    compiled = report.to_json()["torch"]["compile"]
    assert compiled == {"triton": "3.6.0", "assembler": compiled["assembler"], "assembler_release": "12.9",
                        "arch": "sm_110a", "assembled": False, "function": "failed"}
    assert compiled["assembler"].endswith("/triton/backends/nvidia/bin/ptxas-blackwell")


def test_without_a_board_ptxas_that_can_the_fix_says_what_would(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    report = run(python, platform=thor(board_root(tmp_path, assembles=False)))
    assert report.check("compile").fix == (
        "point Triton at a CUDA ptxas that knows sm_110a (JetPack's CUDA has one): export "
        "TRITON_PTXAS_BLACKWELL_PATH=PATH; or install a Triton whose own assembler knows it (Triton 3.7.1's "
        "ptxas-blackwell 13.1 assembles sm_110a)")


def test_the_activate_scripts_fix_makes_the_compiled_function_run(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    board = str(board_root(tmp_path, assembles=True) / "usr/local/cuda/bin/ptxas")
    environment = tmp_path / "env"
    (environment / "jetson-install").mkdir(exist_ok=True)
    protect(environment, (), {"TRITON_PTXAS_BLACKWELL_PATH": board})
    assert activate_variables(environment)["TRITON_PTXAS_BLACKWELL_PATH"] == board
    # A shell that activates the environment has it; deactivating takes it away again.
    shell = subprocess.run(["bash", "-c", f'. "{environment}/bin/activate" && echo "$TRITON_PTXAS_BLACKWELL_PATH" '
                                          '&& deactivate && echo "[${TRITON_PTXAS_BLACKWELL_PATH:-}]"'],
                           capture_output=True, text=True, timeout=60)
    assert shell.stdout.splitlines() == [board, "[]"], shell.stderr
    report = run(python, platform=thor(tmp_path / "board"))
    check = report.check("compile")
    assert check.status == "ok", check.detail
    assert check.detail == ("Triton 3.6.0's ptxas-blackwell (from TRITON_PTXAS_BLACKWELL_PATH), CUDA 13.0, assembles "
                            "sm_110a; a torch.compile'd matmul with a fused pointwise tail on cuda matches eager "
                            "(max |error| 0)")
    assert report.to_json()["torch"]["compile"]["assembler"] == board


def test_triton_37_assembles_thor_with_its_own_assembler(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **THOR_DEVICE)
    check = run(python, platform=thor(board_root(tmp_path, assembles=True))).check("compile")
    assert check.status == "ok"
    assert check.detail.startswith("Triton 3.7.1's ptxas-blackwell, CUDA 13.1, assembles sm_110a; a torch.compile'd")


def test_the_channel_decides_whether_a_failure_counts(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    channel = dataclasses.replace(JP6, compile=GateRule(False, "no compiled kernel has run on this board yet"))
    report = run(python, platform=thor(board_root(tmp_path, assembles=False)), channel=channel)
    check = report.check("compile")
    assert check.status == "fail" and not check.required
    assert check.detail.endswith("(not required on channel jp6-cu126: no compiled kernel has run on this board yet)")
    assert report.exit_code == 0 and "compile" not in [c.id for c in report.not_passed]
    required = dataclasses.replace(JP6, compile=GateRule(True, "Triton is part of the stack"))
    assert run(python, platform=thor(tmp_path / "board"), channel=required).exit_code == 1


def test_no_gpu_still_runs_the_assembler(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE, cuda_available=False)
    report = run(python, platform=thor(board_root(tmp_path, assembles=False)))
    assert report.check("compile").status == "fail"
    assert "cannot assemble sm_110a" in report.check("compile").detail
    # Triton 3.7.1's assembler can: the compiled half waits for the GPU.
    python = make_env(tmp_path / "ok", **THOR_DEVICE, cuda_available=False)
    check = run(python, platform=thor(tmp_path / "board")).check("compile")
    assert check.status == "skip"
    assert check.detail == ("Triton 3.7.1's ptxas-blackwell, CUDA 13.1, assembles sm_110a; the compiled function "
                            "needs a CUDA device (cuda-available)")


def test_the_preflight_judges_the_assembler_alone(tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE, cuda_available=False)
    preflight = PreflightProfile()
    assert run(python, platform=thor(tmp_path), profile=preflight).check("compile").status == "fail"
    python = make_env(tmp_path / "ok", **THOR_DEVICE, cuda_available=False)
    check = run(python, platform=thor(tmp_path), profile=preflight).check("compile")
    assert check.status == "ok"
    assert check.detail.endswith("assembles sm_110a; the compiled function is not run (preflight: a CPU build of "
                                 "torch; the GPU is checked only by the Jetson profile)")


def test_an_environment_without_triton_has_nothing_to_compile_with(
        tmp_path: Path, clean_pip_check: List[str]) -> None:
    python = make_env(tmp_path / "env", triton_version=None)
    report = run(python)
    check = report.check("compile")
    assert (check.status, check.detail) == (
        "not_applicable", "no Triton in the environment: torch.compile has no GPU backend to prove here")
    assert report.to_json()["torch"]["compile"] is None


def test_the_install_points_triton_at_the_boards_assembler_only_where_its_own_cannot() -> None:
    refused = {"assembler": {"assembled": False, "name": "ptxas-blackwell", "arch": "sm_110a", "error": REFUSED,
                             "variable": "TRITON_PTXAS_BLACKWELL_PATH"},
               "candidate": {"assembled": True, "path": "/usr/local/cuda/bin/ptxas"}}
    assert _board_assembler(refused) == (
        {"TRITON_PTXAS_BLACKWELL_PATH": "/usr/local/cuda/bin/ptxas"},
        f"Triton's ptxas-blackwell cannot assemble sm_110a ({REFUSED}): TRITON_PTXAS_BLACKWELL_PATH names "
        "/usr/local/cuda/bin/ptxas in the activate scripts")
    neither = dict(refused, candidate={"assembled": False, "path": "/usr/local/cuda/bin/ptxas", "error": "not found"})
    variables, said = _board_assembler(neither)
    assert variables == {} and said.endswith("nor can the board's /usr/local/cuda/bin/ptxas: torch.compile will "
                                             "fail on this GPU (the doctor's compile check says what to do)")
    assert _board_assembler(dict(refused, assembler=dict(refused["assembler"], assembled=True))) == ({}, "")
    assert _board_assembler({"triton": {"installed": False}}) == ({}, "")
    assert ptxas_variable("11.0") == "TRITON_PTXAS_BLACKWELL_PATH" and ptxas_variable("8.7") == \
        "TRITON_PTXAS_PATH"


def test_evidence_kept_before_the_check_is_still_valid() -> None:
    from jetson_install.base.schema import errors, evidence_schema

    example = Path(__file__).resolve().parent.parent / "docs/examples/x86_64-cpu-torch-2.13.0-bitsandbytes-0.50.2.json"
    evidence = json.loads(example.read_text())
    assert "compile" not in evidence["torch"]
    assert errors(evidence, evidence_schema()) == []


def test_a_check_the_channel_does_not_require_neither_gates_nor_contradicts_the_evidence() -> None:
    from jetson_install.fleet.evidence import contradiction, gate_record

    checks = [{"id": "torch-import", "title": "torch imports", "status": "ok", "required": True, "detail": "ok",
               "fix": None},
              {"id": "compile", "title": "torch.compile works", "status": "fail", "required": False,
               "detail": "cannot assemble sm_110a (not required on channel jp7-thor-cu130: no board run yet)",
               "fix": "export TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas"}]
    evidence = {"status": "passed", "strict": True, "profile": "jetson", "checks": checks,
                "generated_at": "2026-12-03T00:00:00Z",
                "torch": {"kernels": {}}, "bitsandbytes": {"kernel_test": "not_run"}, "integrity": {}}
    assert contradiction(evidence) is None
    assert gate_record(evidence, 0, "local")["counts"] == {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}
    required = dict(evidence, checks=[checks[0], dict(checks[1], required=True)])
    assert contradiction(required) == "status passed contradicts its checks: compile failed"


def test_a_root_given_is_read_never_run_only_this_machines_assembler_runs(tmp_path: Path) -> None:
    """`doctor --root DIR` and an install's plan with `--root DIR` ran DIR/usr/local/cuda/bin/ptxas here."""
    import shutil

    from support.cli import run_cli

    from jetson_install.board.samples import SAMPLES_DIR

    root = tmp_path / "copied-root"
    shutil.copytree(SAMPLES_DIR / "agx-thor-jp7.0", root)
    ran = tmp_path / "ran"
    planted = root / "usr/local/cuda/bin/ptxas"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"#!/bin/sh\necho \"$@\" >> {ran}\nexit 0\n")
    planted.chmod(0o755)
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    doctor = run_cli("doctor", "--root", str(root), "--python", python, "--check", "compile", "--json")
    assert not ran.exists(), ran.read_text()
    compiled = json.loads(doctor.stdout)["torch"]["compile"]
    assert compiled["assembler"].endswith("/triton/backends/nvidia/bin/ptxas-blackwell"), compiled
    planned = run_cli("plan", "obliteratus", "--root", str(root), "--venv", str(tmp_path / "obl"), "--json")
    assert planned.returncode == 0, planned.stderr
    steps = {step["id"]: step for step in json.loads(planned.stdout)["steps"]}
    (probe,) = steps["protect"]["commands"]
    assert probe[2:] == ["--capability", "110", "--candidate", "/usr/local/cuda/bin/ptxas"]
    assert not [word for step in steps.values() for command in step["commands"] for word in command
                if str(word).startswith(f"{root}/")]
    help_text = " ".join(run_cli("doctor", "--help").stdout.split())
    assert ("--root DIR Read the platform from DIR instead of / (or sample:NAME, see `jetson-install samples`); "
            "its files are read, never run: the board's programs that run (its CUDA's ptxas) are this "
            "machine's.") in help_text


def test_a_killed_doctor_leaves_its_assembler_files_in_a_folder_it_held_which_the_next_run_removes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_pip_check: List[str]) -> None:
    """SIGKILL (the doctor, then the probe and its ptxas: a process group of their own) runs no
    `finally`: the probe's PTX stays, in the folder the doctor held as the probe's TMPDIR."""
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    (blackwell,) = (tmp_path / "env").glob("lib/python*/site-packages/triton/backends/nvidia/bin/ptxas-blackwell")
    said = tmp_path / "ptxas-said"
    blackwell.write_text(HANGING_PTXAS.format(said=said, refused=REFUSED))
    root = board_root(tmp_path, assembles=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    tests = Path(__file__).resolve().parent
    doctor = subprocess.Popen([sys.executable, "-c", KILLED_DOCTOR, python, str(root)],
                              env=dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=f"{tests.parent}{os.pathsep}{tests}"))
    try:
        assert wait_until(lambda: said.exists() or doctor.poll() is not None, 120) and doctor.poll() is None
    finally:
        doctor.kill()
        doctor.wait(timeout=60)
        if said.exists():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(int(said.read_text().split()[0])), signal.SIGKILL)
    ptx = Path(said.read_text().split()[1])
    assert ptx.is_file() and ptx.parent.parent.parent == scratch, ptx  # the probe's own folder, in the held one
    assert ptx.parent.parent.name.startswith(f"jetson-install-ptx-{doctor.pid}-")
    stub_ptxas(blackwell, "12.9", ("sm_110a",))  # Triton 3.6's, which refuses Thor (the board's can)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert run(python, platform=thor(root)).check("compile").status == "fail"
    # Nothing of the killed run's nor of this one's; only the one lock file each kind of folder keeps.
    assert sorted(path.name for path in scratch.iterdir()) == [f".jetson-install-{kind}-uid{os.geteuid()}.lock"
                                                              for kind in ("proof", "ptx")]


def test_the_plan_of_a_thor_says_where_the_install_would_point_triton(tmp_path: Path) -> None:
    from support.cli import run_cli

    planned = run_cli("plan", "obliteratus", "--root", "sample:agx-thor-jp7.0", "--venv", str(tmp_path / "obl"),
                      "--json")
    assert planned.returncode == 0, planned.stderr
    steps = {step["id"]: step for step in json.loads(planned.stdout)["steps"]}
    protect = steps["protect"]
    # A sample root holds release files only: the board it stands for is where the install runs.
    assert protect["title"].endswith("; and TRITON_PTXAS_BLACKWELL_PATH there, naming /usr/local/cuda/bin/ptxas, where "
                                     "the environment's Triton cannot assemble for compute capability 11.0 and that "
                                     "one can")
    (probe,) = protect["commands"]
    assert probe[0] == f"{tmp_path}/obl.d/<new>/bin/python" and probe[1].endswith("/probes/assembler_probe.py")
    assert probe[2:] == ["--capability", "110", "--candidate", "/usr/local/cuda/bin/ptxas"]
    # The verify step's doctor runs the same probe: the compile check's half that needs no GPU.
    assert probe in steps["verify"]["commands"]
    # A preflight runs off the board: there is no board assembler to name.
    preflight = run_cli("plan", "obliteratus", "--root", "sample:agx-thor-jp7.0", "--preflight", "--json")
    assert preflight.returncode == 0, preflight.stderr
    assert {step["id"]: step for step in json.loads(preflight.stdout)["steps"]}["protect"]["commands"] == []


def test_the_protect_step_points_triton_at_the_boards_assembler(tmp_path: Path, clean_pip_check: List[str]) -> None:
    """The protect handler as an install runs it: the step's assembler probe, then the activate
    scripts; the doctor's compile check then passes, and one that can itself is left alone."""
    from types import SimpleNamespace
    from typing import cast

    from jetson_install.base.steps import Step
    from jetson_install.probes import assembler_command
    from jetson_install.running.execution import Run
    from jetson_install.running.handlers import _protect
    from jetson_install.tools import runner

    def protected(environment: Path, python: str, root: Path) -> Tuple[str, List[str]]:
        (environment / "jetson-install").mkdir(exist_ok=True)
        step = Step("protect", "protect", "keep the constraints", (assembler_command(python, "11.0", str(root)),))
        warnings: List[str] = []
        folders: List[Path] = []

        def probe(command: Tuple[str, ...], fix: str, env: Optional[Dict[str, str]] = None) -> runner.Completed:
            assert env is not None  # the probe's temporary folder: one this run holds (a kill leaves it to the next)
            folders.append(Path(env["TMPDIR"]))
            assert folders[0].is_dir() and folders[0].name.startswith(f"jetson-install-ptx-{os.getpid()}-")
            return runner.run(command, timeout=120, env=env)

        fake = SimpleNamespace(run=probe, warnings=warnings, staging=environment,
                               plan=SimpleNamespace(route=SimpleNamespace(kept=lambda: ())))
        detail = _protect(step, cast(Run, fake))
        assert len(folders) == 1 and not folders[0].exists()
        return detail, warnings

    root = board_root(tmp_path, assembles=True)
    board = root / "usr/local/cuda/bin/ptxas"
    python = make_env(tmp_path / "env", **TRITON_36, **THOR_DEVICE)
    detail, warnings = protected(tmp_path / "env", python, root)
    assert detail.endswith(f"; Triton's ptxas-blackwell cannot assemble sm_110a ({REFUSED}): "
                           f"TRITON_PTXAS_BLACKWELL_PATH names {board} in the activate scripts") and warnings == []
    assert f'TRITON_PTXAS_BLACKWELL_PATH="{board}"' in (tmp_path / "env/bin/activate").read_text()
    assert run(python, platform=thor(root)).check("compile").status == "ok"

    python = make_env(tmp_path / "own", **THOR_DEVICE)
    detail, warnings = protected(tmp_path / "own", python, root)
    assert "Triton" not in detail and "TRITON_" not in (tmp_path / "own/bin/activate").read_text()

    python = make_env(tmp_path / "neither", **TRITON_36, **THOR_DEVICE)
    detail, warnings = protected(tmp_path / "neither", python, board_root(tmp_path / "old", assembles=False))
    assert warnings and warnings[0].startswith("Triton's ptxas-blackwell cannot assemble sm_110a")
