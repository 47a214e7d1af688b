"""An output written whole (base/outputs.py replace_file: --evidence, a plan's --out, a
container's status): a writer killed while writing leaves its temporary file, and the next write
of the same file removes it; a live writer's (in any pid namespace) and every other name are kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, List, Tuple, cast

import pytest

from jetson_install.base import outputs
from jetson_install.base.outputs import replace_file

# A writer of `path` that stops (until its stdin closes) with its temporary file written, before
# the rename, and says which file that is.
_WRITING = """
import os, sys
from jetson_install.base import outputs
rename = os.replace
def stopped_before_the_rename(source, destination):
    print(source, flush=True)
    sys.stdin.read()
    rename(source, destination)
os.replace = stopped_before_the_rename
outputs.replace_file(sys.argv[1], sys.argv[2])
"""
_SOURCE = str(Path(__file__).resolve().parent.parent)


def a_writer(processes: List["subprocess.Popen[str]"], path: Path, text: str) -> "subprocess.Popen[str]":
    process = subprocess.Popen([sys.executable, "-c", _WRITING, str(path), text], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=_SOURCE))
    processes.append(process)
    return process


def said(process: "subprocess.Popen[str]") -> Path:
    return Path(cast(IO[str], process.stdout).readline().strip())


def names(folder: Path) -> List[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_killed_writer_s_temporary_file_goes_with_the_next_write_and_a_live_one_s_stays(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    evidence = tmp_path / "evidence.json"
    killed = [a_writer(processes, evidence, f"killed {number}") for number in range(2)]
    left = [said(process) for process in killed]
    for process in killed:
        process.send_signal(signal.SIGKILL)  # no `finally` runs: its temporary file stays
        process.wait(timeout=30)
    assert all(path.name.startswith(f".evidence.json.{process.pid}.") and path.read_text().startswith("killed")
               for path, process in zip(left, killed))
    live = a_writer(processes, evidence, "the live writer's")
    writing = said(live)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("a file a link names\n")
    # Other names, and what is no file of a writer's under the exact name: a user's own.
    kept = [".evidence.json.123.abc.tmp", ".evidence.json.123.abcdefgh.tmp.old", ".other.json.123.abcdefgh.tmp",
            ".evidence.json.0.abcdefgh.tmp", "evidence.json.123.abcdefgh.tmp"]
    for name in kept:
        (tmp_path / name).write_text("the user's\n")
    (tmp_path / ".evidence.json.123.linkabcd.tmp").symlink_to(elsewhere)
    (tmp_path / ".evidence.json.123.fldrabcd.tmp").mkdir()
    kept += [".evidence.json.123.linkabcd.tmp", ".evidence.json.123.fldrabcd.tmp", "elsewhere"]
    replace_file(evidence, "this run's\n")
    assert evidence.read_text() == "this run's\n"
    assert names(tmp_path) == sorted([*kept, "evidence.json", writing.name])  # the killed ones' gone
    assert elsewhere.read_text() == "a file a link names\n"
    cast(IO[str], live.stdin).close()  # the live writer goes on, and renames its own
    assert live.wait(timeout=30) == 0
    assert evidence.read_text() == "the live writer's"
    assert names(tmp_path) == sorted([*kept, "evidence.json"])


def test_a_remover_in_the_instant_before_a_writer_holds_its_file_costs_that_writer_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run's remover (it holds no pid rule: another pid namespace's) that takes the
    temporary file between mkstemp and its flock: the writer makes another, and writes whole."""
    plan = tmp_path / "plan.json"
    made = tempfile.mkstemp
    taken: List[str] = []

    def mkstemp(*args: Any, **kwargs: Any) -> Tuple[int, str]:
        descriptor, path = made(*args, **kwargs)
        if not taken:
            taken.append(path)
            outputs._remove_abandoned(plan)  # what another run's replace_file of it does first
        return descriptor, path

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    replace_file(plan, "the plan\n")
    assert plan.read_text() == "the plan\n" and not Path(taken[0]).exists()
    assert names(tmp_path) == ["plan.json"]
