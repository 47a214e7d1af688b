"""A run's work folder is named by its pid, and the next run of the same kind removes what a
killed one left (base/work_folders.py): only this user's real folders whose process is gone."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Iterator, Set

import pytest

from jetson_install.base.work_folders import make_work_folder, remove_abandoned


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a process that runs (another than this one) until the test ends."""
    process = subprocess.Popen(["cat"], stdin=subprocess.PIPE)
    yield process.pid
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


def names(folder: Path) -> Set[str]:
    return {path.name for path in folder.iterdir()}


def test_a_folder_whose_process_is_gone_is_removed_and_a_live_process_s_kept(tmp_path: Path, live_pid: int) -> None:
    gone = ended_pid()
    (tmp_path / f"work-{gone}-abcdefgh" / "inside").mkdir(parents=True)  # made by mkdtemp, then killed
    (tmp_path / f"work-{gone}").mkdir()  # a folder named by the pid alone (the fetch step's)
    (tmp_path / f"work-{2 ** 64}-abcdefgh").mkdir()  # no process has that number
    kept = {f"work-{live_pid}-abcdefgh", f"work-{os.getpid()}-abcdefgh", f"other-{gone}-abcdefgh",
            "work-notapid", "work-0-abcdefgh", f"work-{gone}x"}
    for name in kept:
        (tmp_path / name).mkdir()
    made = make_work_folder("work-", tmp_path)
    assert names(tmp_path) == kept | {made.name}
    assert made.name.startswith(f"work-{os.getpid()}-") and stat.S_IMODE(made.stat().st_mode) == 0o700
    assert make_work_folder("work-", tmp_path) != made  # each fresh


def test_a_symlink_and_a_file_of_an_abandoned_name_are_left_alone(tmp_path: Path) -> None:
    gone = ended_pid()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "keep").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / f"work-{gone}-link").symlink_to(elsewhere, target_is_directory=True)
    (work / f"work-{gone}-file").write_text("not a folder of ours\n")
    remove_abandoned("work-", work)
    assert names(work) == {f"work-{gone}-link", f"work-{gone}-file"}
    assert (elsewhere / "keep").is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another user owns")
def test_another_user_s_folder_is_left_alone(tmp_path: Path) -> None:
    theirs = tmp_path / f"work-{ended_pid()}-abcdefgh"
    (theirs / "inside").mkdir(parents=True)
    os.chown(theirs, 65534, 65534)  # nobody's
    remove_abandoned("work-", tmp_path)
    assert (theirs / "inside").is_dir()
