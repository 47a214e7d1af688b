"""The doctor's inputs and its probes' output, however odd: what a user sees stays true."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Tuple


from support import channel_python
from support.cli import CliResult, run_cli
from support.interrupts import HangingPython, alive, ctrl_c_when, wait_until

from jetson_install.tools import runner

if TYPE_CHECKING:
    from jetson_install.doctor.context import Context

SAMPLE = "sample:agx-orin-64gb-jp6.2"


def doctor(*args: str) -> CliResult:
    return run_cli("doctor", "--root", SAMPLE, *args)


def test_a_program_that_is_not_python_is_refused(tmp_path: Path) -> None:
    result = doctor("--python", "/bin/true")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "error: /bin/true is not a Python interpreter" in result.stderr


def fake_python2(tmp_path: Path) -> Path:
    """An interpreter answering as CPython 2.7 does (`sys.version_info[:2]` is (2, 7))."""
    script = tmp_path / "python2.7"
    script.write_text("#!/bin/sh\nprintf '2.7'\n")
    script.chmod(0o755)
    return script


def test_a_python_2_target_is_named_with_a_fix_that_works(tmp_path: Path) -> None:
    python2 = fake_python2(tmp_path)
    result = doctor("--python", str(python2))
    assert result.returncode == 2
    assert f"{python2} is Python 2.7" in result.stderr
    assert "fix: " in result.stderr and "jetson-install obliteratus" in result.stderr
    assert "SyntaxError" not in result.stderr + result.stdout


def test_a_hung_probe_is_ended_with_everything_it_started(tmp_path: Path) -> None:
    from jetson_install.doctor.context import _run_probe

    hung = tmp_path / "python3"
    hung.write_text("#!/bin/sh\nsleep 120 &\necho $!\nsleep 120\n")  # a probe whose helper outlives it
    hung.chmod(0o755)
    outcome = _run_probe(str(hung), "torch", timeout=1)
    assert outcome.completed is not None and outcome.completed.timed_out
    assert "timed out" in outcome.failure()
    helper = int(outcome.completed.stdout.split()[0])
    assert wait_until(lambda: not alive(helper), 10)


def test_a_ctrl_c_while_the_probes_run_ends_them(tmp_path: Path) -> None:
    # An install runs the doctor in its own process: its probes, each in a process group of its
    # own, get no SIGINT from the terminal, and must not be left running on to their end.
    from jetson_install.doctor import DoctorRequest, run_doctor

    python = HangingPython(tmp_path)
    with ctrl_c_when(lambda: len(python.probes()) >= 2):
        # Both probes, without uv pip check: uv stays in the terminal's group, which this
        # interrupt (of this process alone) does not reach.
        run_doctor(DoctorRequest(str(python.path), None, None, only=("torch-import", "bnb-library")))
    assert wait_until(lambda: not any(alive(pid) for pid, _ in python.probes()), 30), python.probes()
    assert len(python.probes()) == 2


def test_pip_check_that_could_not_run_always_says_why() -> None:
    from jetson_install.doctor.checks_environment import check_pip
    from jetson_install.doctor.context import Context, ProbeOutcome

    def context(completed: runner.Completed) -> Context:
        empty = ProbeOutcome("torch", {}, None)
        return Context(python="/envs/my env/bin/python", platform=None, channel=None, vendor=None, torch=empty,
                       bnb=empty, pip_check=completed)

    timed_out = runner.Completed(("uv",), -9, "", "", timed_out=True)
    _status, detail, _fix = check_pip(context(timed_out))
    assert detail.startswith("uv pip check could not run: ") and not detail.endswith(": ")
    assert "did not finish" in detail
    missing = runner.Completed(("uv",), 127, "", "")
    assert not check_pip(context(missing))[1].endswith(": ")


def test_probe_output_of_the_wrong_types_still_gives_evidence_that_validates(tmp_path: Path) -> None:
    """A patched torch answering with the wrong types: the checks say what is wrong, and the
    evidence still matches evidence.schema.json."""
    import jsonschema

    from jetson_install.doctor import evidence_schema

    torch = {"probe": "torch", "complete": True, "python": {"version": 310, "machine": ["aarch64"]},
             "torch": {"version": 2.5, "cuda": 12, "file": None},
             "cuda": {"available": "yes", "device_name": 7, "total_memory_bytes": "16G", "capability": [8],
                      "arch_list": "sm_87"},
             "obliteratus": {"imported": True, "device": "cuda", "source": {"version": 1, "url": 2, "commit": []}}}
    bnb = {"probe": "bitsandbytes", "complete": True, "version": 0.46, "backend": ["cuda"], "library": {"file": 3}}
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\n"
                    "case \"$1\" in\n"
                    f"  *torch_probe.py) echo '{json.dumps(torch)}' ;;\n"
                    f"  *bnb_probe.py) echo '{json.dumps(bnb)}' ;;\n"
                    "  *) printf '3.10' ;;\n"
                    "esac\n")
    fake.chmod(0o755)
    result = doctor("--python", str(fake), "--json", "--check", "torch-build", "--check", "bnb-library",
                    "--check", "cuda-arch")
    assert "Traceback" not in result.stderr
    evidence = json.loads(result.stdout)
    jsonschema.validate(evidence, evidence_schema())
    assert evidence["torch"]["version"] is None and evidence["torch"]["total_memory_bytes"] is None


def context_for(python: str) -> Context:
    from jetson_install.doctor.context import Context, ProbeOutcome

    empty = ProbeOutcome("torch", {}, None)
    return Context(python=python, platform=None, channel=None, vendor=None, torch=empty, bnb=empty, pip_check=None)


def test_doctor_on_an_environment_it_did_not_make_suggests_a_new_one_the_installer_accepts(tmp_path: Path) -> None:
    theirs = tmp_path / "their env"
    (theirs / "bin").mkdir(parents=True)
    (theirs / "pyvenv.cfg").write_text("home = /usr/bin\n")  # what `python -m venv` makes (PEP 405)
    fix = context_for(str(theirs / "bin" / "python")).reinstall_command()
    assert fix.startswith(f"jetson-install obliteratus --venv '{theirs}-jetson-install'")
    ours = tmp_path / "my envs" / "obl"
    made = tmp_path / "my envs" / "obl.d" / "env-1"
    (made / "jetson-install").mkdir(parents=True)
    (made / "jetson-install" / "complete").write_text("x")
    ours.symlink_to(made)
    expected = f"jetson-install obliteratus --venv '{ours}'"
    assert context_for(str(ours / "bin" / "python")).reinstall_command() == expected
    assert context_for(str(made / "bin" / "python")).reinstall_command() == expected


def system_python_fix(path: str) -> Tuple[str, str]:
    """The doctor's torch-import fix for the board's own /usr/bin/python3 (no torch; Python 3.11,
    the channel's builds are for 3.10) with `path` as PATH, and that Python's version."""
    from support.doctor_env import board_python

    python = board_python()
    result = run_cli("doctor", "--python", python, "--root", SAMPLE, "--no-gpu", "--json",
                     env=dict(os.environ, PATH=path))
    assert result.returncode == 1, result.stderr
    checks = {check["id"]: check for check in json.loads(result.stdout)["checks"]}
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return checks["torch-import"]["fix"], version


def test_a_system_pythons_fix_is_a_new_environment_in_the_default_place_with_the_channels_python(
        tmp_path: Path) -> None:
    """Not a folder beside the interpreter's prefix (/usr-jetson-install), and a --python that
    is the channel's: one found here, else how to get it."""
    from jetson_install.cli.commands.lifecycle import default_venv

    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "python3.10").symlink_to(channel_python())
    # The tool looks in /usr/bin and /usr/local/bin before PATH.
    found = next((python for python in ("/usr/bin/python3.10", "/usr/local/bin/python3.10") if os.access(python, os.X_OK)),
                 str(on_path / "python3.10"))
    fix, version = system_python_fix(f"{on_path}:/usr/bin:/bin")
    command = re.search(r"jetson-install (\S+) --venv (\S+) .*", fix)
    assert command is not None, fix
    target, venv = command.group(1), command.group(2)
    assert venv == str(default_venv(target)) and "/usr-jetson-install" not in fix
    assert fix == (f"channel jp6-cu126's vendor builds are for Python 3.10, this environment's is {version}: install "
                   f"them with Python 3.10: jetson-install {target} --venv {venv} --root {SAMPLE} --python {found} "
                   "(a new environment: jetson-install changes only environments it made)")
    words = shlex.split(command.group(0).split(" (", 1)[0])
    accepted = run_cli(*words[1:], "--dry-run")
    assert accepted.returncode == 0, accepted.stderr
    if found.startswith("/usr/"):
        return  # this machine has Python 3.10 where the tool always looks: it is never lacking
    lacking, _ = system_python_fix("/usr/bin:/bin")
    assert lacking == (f"channel jp6-cu126's vendor builds are for Python 3.10, this environment's is {version}, and "
                       "this machine lacks Python 3.10: install it (sudo apt install python3.10 python3.10-venv), then "
                       f"run: jetson-install {target} --venv {venv} --root {SAMPLE} "
                       "(a new environment: jetson-install changes only environments it made)")
    words = shlex.split(lacking.split("then run: ", 1)[1].split(" (", 1)[0])
    accepted = run_cli(*words[1:], "--dry-run")
    assert accepted.returncode == 0, accepted.stderr


def test_doctor_fix_commands_quote_a_path_with_spaces(tmp_path: Path) -> None:
    ctx = context_for("/envs/my env/bin/python")
    assert "--python '/envs/my env/bin/python'" in ctx.numpy_fix()
    assert "--python '/envs/my env/bin/python'" in ctx.bnb_install_fix()


def test_a_sigterm_while_the_doctor_runs_is_named_in_its_stop_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    python = HangingPython(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "jetson_install", "doctor", "--python", str(python.path), "--root",
                                "sample:agx-orin-64gb-jp6.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    # A probe runs: the doctor waits for it.
    assert wait_until(lambda: bool(python.probes()) or process.poll() is not None, 60) and process.poll() is None, \
        process.communicate()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "error: interrupted (SIGTERM)\n" in stderr and "Ctrl-C)" not in stderr, stderr
