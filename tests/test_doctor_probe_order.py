"""The probes that decide `cuda` run sealed and as the user's python starts them: side by side
where each has a core, and never two CUDA contexts of one probe at once (issue 45 item 6)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List

import pytest

from jetson_install.doctor import run as doctor_run
from support.doctor_env import make_env, run


def events(path: Path) -> List[str]:
    return path.read_text().splitlines()


def test_the_probe_as_started_runs_beside_the_sealed_one_and_calls_cuda_only_after_it_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "events"
    # The sealed probe's first CUDA call waits until the probe as started has imported torch:
    # only a probe started beside it gets there.
    python = make_env(tmp_path / "env", events=str(log), sealed_waits_for_started=True)
    monkeypatch.setattr(doctor_run, "_cores", lambda: 4)
    report = run(python, only=("startup-hooks",))
    assert {check.id: check.status for check in report.checks}["startup-hooks"] == "ok"
    said = events(log)
    assert said.index("started import") < said.index("sealed cuda") < said.index("sealed exit") \
        < said.index("started cuda"), said


def test_on_too_few_cores_the_probe_as_started_waits_for_the_sealed_one_to_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "events"
    python = make_env(tmp_path / "env", events=str(log))
    monkeypatch.setattr(doctor_run, "_cores", lambda: 1)
    report = run(python, only=("startup-hooks",))
    assert {check.id: check.status for check in report.checks}["startup-hooks"] == "ok"
    said = events(log)
    assert said.index("sealed exit") < said.index("started import"), said


def test_a_run_of_the_target_checks_imports_the_target_as_started_and_one_without_them_does_not(
        tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    with_target = run(python, only=("transformers-torch", "startup-hooks"))
    assert with_target.runtime["transformers"]["version"] == "5.20.2"
    without = run(python, only=("startup-hooks",))
    assert without.runtime["transformers"]["version"] is None


def test_the_file_python_writes_a_pyc_through_is_no_foreign_file_but_one_of_no_listed_source_is(
        tmp_path: Path) -> None:
    """A probe beside the integrity probe compiles into the environment's __pycache__ through
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
