"""The sealed proof runs alone (issue 45): no process that runs the environment's own code (the
probes as the user's python starts them, the assembler probe, the additions probe, a
--check-command) starts before every sealed probe has ended and the proof's pycache folder is
gone; that folder is the run's (0700), shared by its sealed probes, removed however the run ends
(after a SIGKILL, by the next run).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from jetson_install.base.work_folders import make_work_folder
from jetson_install.doctor import DoctorRequest, run_doctor
from jetson_install.doctor import context
from jetson_install.doctor import run as doctor_run
from jetson_install.tools import runner
from support.doctor_env import make_env, run
from support.interrupts import HangingPython, alive, ctrl_c_when, wait_until
from support.wheels import build_wheel

# A start-up hook a package can ship (the reviewer's proof of concept): it finds the pycache
# folder of a sealed probe its parent started (on that probe's command line), writes there a
# timestamp .pyc of torch/cuda.py (Python runs it in place of a source whose mtime and size it
# names) whose is_available() says True, and patches torch in its own process so both agree.
FORGER = r'''
import glob, os, sys
from importlib._bootstrap_external import _code_to_timestamp_pyc
site = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = os.path.join(site, "torch", "cuda.py")
text = open(src).read().replace('return bool(SCENARIO["cuda_available"])', "return True")
st = os.stat(src)
data = _code_to_timestamp_pyc(compile(text, src, "exec"), st.st_mtime, st.st_size)
name = "cuda." + sys.implementation.cache_tag + ".pyc"
def prefixes():
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            if int(open(stat).read().rsplit(")", 1)[1].split()[1]) != os.getppid():
                continue
            args = open(stat[:-4] + "cmdline", "rb").read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        for arg in args:
            if arg.startswith(b"pycache_prefix="):
                yield arg.split(b"=", 1)[1].decode()
for prefix in set(prefixes()):
    for head in {os.path.dirname(src), os.path.realpath(os.path.dirname(src))}:
        path = os.path.join(prefix, head.lstrip("/"), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".t", "wb") as out:
            out.write(data)
        os.replace(path + ".t", path)
import torch
torch.cuda.is_available = lambda: True
'''


def forged_env(tmp_path: Path) -> str:
    """An environment whose torch sees no CUDA, with the forging hook installed as a wheel."""
    python = make_env(tmp_path / "env", cuda_available=False, import_seconds=1)
    wheel = build_wheel(tmp_path / "wheels", "torch-speedup", "1.0",
                        modules={"torch_speedup.pth": "import torch_speedup\n", "torch_speedup/__init__.py": FORGER})
    subprocess.run([runner.uv_binary(), "pip", "install", "--python", python, "--no-deps", "--no-index", "--quiet",
                    str(wheel)], check=True, capture_output=True, timeout=120)
    return python


#: What cuda-available says of the stub torch built for CUDA that sees no device.
NO_CUDA = ("fail", "torch is built for CUDA 12.6 but sees 0 device(s)")


def said(report: Any) -> Dict[str, Tuple[str, str]]:
    return {check.id: (check.status, check.detail) for check in report.checks}


def test_a_start_up_hook_cannot_forge_the_sealed_proof_of_a_torch_only_run(tmp_path: Path) -> None:
    # The checks of an install's --no-verify (no bitsandbytes probe): the probe as started used
    # to run beside the sealed one, its hook writing into the sealed probe's pycache folder.
    python = forged_env(tmp_path)
    checks = said(run(python, only=("cuda-available", "startup-hooks", "loaded-files", "vendor-files")))
    assert checks["cuda-available"] == NO_CUDA
    assert checks["startup-hooks"][0] == "fail"
    assert "torch-speedup" in checks["startup-hooks"][1]


def test_a_start_up_hook_cannot_forge_the_sealed_proof_of_a_full_strict_run(tmp_path: Path) -> None:
    python = forged_env(tmp_path)
    report = run(python, strict=True)
    checks = said(report)
    assert checks["cuda-available"] == NO_CUDA
    assert {checks[name][0] for name in ("cuda-matmul", "bnb-kernels", "bnb-int8")} == {"skip"}
    assert checks["startup-hooks"][0] == "fail" and "torch-speedup" in checks["startup-hooks"][1]
    assert report.status == "failed"


def test_the_assembler_probe_s_start_up_hooks_cannot_forge_the_sealed_proof(tmp_path: Path) -> None:
    # The assembler probe runs the environment's python with site on (and its Triton's ptxas):
    # it used to start with the sealed probes (a run of the compile check, which reads it).
    python = forged_env(tmp_path)
    checks = said(run(python, only=("cuda-available", "compile")))
    assert checks["cuda-available"] == NO_CUDA


def test_nothing_that_runs_the_environment_s_code_starts_before_every_sealed_probe_ended(tmp_path: Path) -> None:
    log = tmp_path / "events"
    python = make_env(tmp_path / "env", events=str(log), import_seconds=1)
    site_packages = next((tmp_path / "env").glob("lib/python*/site-packages"))
    # Every process that runs the environment's start-up hooks says so, first thing.
    (site_packages / "zz_order.pth").write_text(
        f"import os; open({str(log)!r}, 'a').write('hook %s\\n' % "
        "open('/proc/self/cmdline').read().replace(chr(0), ' '))\n")
    report = run(python, additions=("numpy",), check_commands=("python -c pass",))
    checks = said(report)
    assert checks["startup-hooks"][0] == "ok" and checks["additions"][0] == "ok", checks
    events = log.read_text().splitlines()
    sealed_exits = [at for at, line in enumerate(events) if line == "sealed exit"]
    hooks = [(at, line) for at, line in enumerate(events) if line.startswith("hook ")]
    assert len(sealed_exits) == 2, "\n".join(events)  # the torch and the bitsandbytes probe (which imports torch)
    assert {name for _, line in hooks for name in re.findall(r"\w+_probe\.py|-c pass", line)} \
        == {"torch_probe.py", "bnb_probe.py", "stack_probe.py", "assembler_probe.py", "additions_probe.py", "-c pass"}, events
    assert min(at for at, _ in hooks) > max(sealed_exits), events


def test_the_sealed_probes_share_one_private_pycache_folder_gone_before_the_environment_s_code_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = make_env(tmp_path / "env")
    folders: List[Tuple[str, int]] = []
    left_at_start: List[bool] = []
    sealed, started = context._run_sealed, context._run_started

    def record_sealed(python: str, name: str, pycache: str, *args: Any, **kwargs: Any) -> Any:
        folders.append((pycache, stat.S_IMODE(os.stat(pycache).st_mode)))
        return sealed(python, name, pycache, *args, **kwargs)

    def record_started(*args: Any, **kwargs: Any) -> Any:
        left_at_start.append(os.path.exists(folders[0][0]))
        return started(*args, **kwargs)

    monkeypatch.setattr(doctor_run, "_run_sealed", record_sealed)
    monkeypatch.setattr(doctor_run, "_run_started", record_started)
    checks = said(run(python))
    assert {checks[name][0] for name in ("cuda-available", "bnb-kernels", "startup-hooks", "loaded-files")} \
        == {"ok"}, checks
    assert len(folders) == 2 and folders[0] == folders[1] and folders[0][1] == 0o700, folders
    assert Path(folders[0][0]).name.startswith("jetson-install-proof-")
    assert left_at_start == [False, False]
    assert not os.path.exists(folders[0][0])


def test_a_sealed_probe_that_times_out_still_leaves_no_pycache_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = make_env(tmp_path / "env", hang=True)
    folders: List[str] = []
    sealed = context._run_sealed

    def record_sealed(python: str, name: str, pycache: str, *args: Any, **kwargs: Any) -> Any:
        folders.append(pycache)
        return sealed(python, name, pycache, *args, **kwargs)

    monkeypatch.setattr(doctor_run, "_run_sealed", record_sealed)
    checks = said(run(python, only=("cuda-available",), timeout=3))
    assert checks["cuda-available"][0] == "fail" and "timed out" in checks["cuda-available"][1], checks
    assert folders and not os.path.exists(folders[0])


def test_a_ctrl_c_during_the_sealed_proof_starts_nothing_more_and_removes_its_pycache_folder(
        tmp_path: Path) -> None:
    python = HangingPython(tmp_path)
    with ctrl_c_when(lambda: python.sealed() >= 2):
        run_doctor(DoctorRequest(str(python.path), None, None, only=("startup-hooks", "bnb-library")))
    seen = python.probes()
    # The sealed probes and the integrity probe (-I -S); nothing that runs the environment's code.
    assert python.sealed() == 2, seen
    assert all(argv.startswith("-I -S ") for _, argv in seen), seen
    assert not any(alive(pid) for pid, _ in seen)
    (folder,) = set(re.findall(r"pycache_prefix=(\S+)", python.started.read_text()))
    assert not os.path.exists(folder)


def test_a_doctor_killed_during_the_sealed_proof_leaves_its_pycache_folder_and_the_next_run_removes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    python = HangingPython(tmp_path)
    code = ("import sys; from jetson_install.doctor import DoctorRequest, run_doctor; "
            "run_doctor(DoctorRequest(sys.argv[1], None, None, only=('startup-hooks', 'bnb-library')))")
    doctor = subprocess.Popen([sys.executable, "-c", code, str(python.path)], env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        assert wait_until(lambda: python.sealed() >= 2 or doctor.poll() is not None, 60) and doctor.poll() is None
        doctor.kill()  # SIGKILL: no `finally` of the doctor's runs
        doctor.wait(timeout=60)
    finally:
        for pid, _ in python.probes():  # each in a process group of its own: they outlive the doctor
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    lock = f".jetson-install-proof-uid{os.geteuid()}.lock"  # the one file the doctors keep there
    (left,) = (path for path in scratch.iterdir() if path.name != lock)
    assert left.name.startswith(f"jetson-install-proof-{doctor.pid}-") and left.is_dir()
    live = make_work_folder("jetson-install-proof-", scratch)  # a running doctor's (held by this process)
    answers = tmp_path / "answers" / "python3"  # a stand-in whose probes end at once, saying nothing
    answers.parent.mkdir()
    answers.write_text('#!/bin/sh\ncase "$1" in -E) printf 3.11 ;; esac\n')
    answers.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    checks = said(run_doctor(DoctorRequest(str(answers), None, None, only=("startup-hooks",))))
    assert checks["startup-hooks"][0] == "fail", checks
    assert sorted(path.name for path in scratch.iterdir()) == [lock, live.path.name]  # the killed one's and its own are gone
    live.close()


def test_a_run_of_the_target_checks_imports_the_target_as_started_and_one_without_them_does_not(
        tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    with_target = run(python, only=("transformers-torch", "startup-hooks"))
    assert with_target.runtime["transformers"]["version"] == "5.20.2"
    without = run(python, only=("startup-hooks",))
    assert without.runtime["transformers"]["version"] is None


def test_the_file_python_writes_a_pyc_through_is_no_foreign_file_but_one_of_no_listed_source_is(
        tmp_path: Path) -> None:
    """A python of the environment the user runs meanwhile compiles into its __pycache__ through
    `NAME.pyc.NNN`, renamed into place at once; the integrity probe may list it meanwhile."""
    python = make_env(tmp_path / "env")
    (package,) = (tmp_path / "env").glob("lib/python*/site-packages/torch")
    tag = "cpython-%d%d" % sys.version_info[:2]
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / f"cuda.{tag}.pyc.140234567").write_bytes(b"being written")
    assert {check.id: check.status for check in run(python, only=("vendor-files",)).checks}["vendor-files"] == "ok"
    (package / "__pycache__" / f"planted.{tag}.pyc.1").write_bytes(b"no source of torch's")
    found = run(python, only=("vendor-files",)).check("vendor-files")
    assert found.status == "fail" and f"torch/__pycache__/planted.{tag}.pyc.1" in found.detail, found.detail
