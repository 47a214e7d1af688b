"""The runner's end of a child (a timeout, end_children, Ctrl-C) ends every process the child
started, found by their parent pids, even while they start more; the children stay in the
tool's process group and session (tests/test_lock_target.py holds what that gives)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import List

import pytest
from support.interrupts import alive, wait_until

from jetson_install.base.process import Completed
from jetson_install.tools import runner

# sh -c SCRIPT SCRIPT PIDFILE ROUNDS: each round records its pid, starts a child that records
# its own and waits, and the next round: a tree that still grows while it is ended.
_GROWS = ('echo $$ >> "$1"; sh -c \'echo $$ >> "$1"; exec sleep 600\' waits "$1" &\n'
          'if [ "$2" -gt 0 ]; then sh -c "$0" "$0" "$1" $(($2 - 1)) & fi\nwait\n')


def _recorded(path: Path) -> List[int]:
    return [int(line) for line in path.read_text().split()] if path.is_file() else []


@pytest.mark.parametrize("how", ["timeout", "end_children"])
def test_ending_a_child_ends_every_process_it_started_while_they_start_more(tmp_path: Path, how: str) -> None:
    pids = tmp_path / "pids"
    argv = ["sh", "-c", _GROWS, _GROWS, str(pids), "150"]
    ran: List[Completed] = []
    try:
        if how == "timeout":
            ran.append(runner.run(argv, timeout=1))
        else:
            thread = threading.Thread(target=lambda: ran.append(runner.run(argv)))
            thread.start()
            assert wait_until(lambda: len(_recorded(pids)) >= 10, 30)
            runner.end_children()
            thread.join(30)
        assert [completed.returncode for completed in ran] == [-9]
        assert len(_recorded(pids)) >= 10
        assert wait_until(lambda: not any(alive(pid) for pid in _recorded(pids)), 10), \
            "a process the child started outlived its end"
    finally:
        for pid in _recorded(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_ctrl_c_that_breaks_the_output_queues_lock_still_ends_the_run_as_an_interruption(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C landing inside Condition.wait, between its lock's release and the try that takes
    it again, surfaces as RuntimeError('release unlocked lock') from the queue's with-block (seen
    once in a new user's thirty Ctrl-Cs: a traceback and exit 1); the child is ended all the same
    and the interruption, not the RuntimeError, goes up."""
    import queue

    pid_file = tmp_path / "pid"

    def interrupted_wait(self: "queue.Queue[object]", block: bool = True, timeout: "float | None" = None) -> object:
        if pid_file.is_file() and pid_file.read_text().strip():
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                raise RuntimeError("release unlocked lock")  # noqa: B904 (chained implicitly, as threading raises it)
        raise queue.Empty

    monkeypatch.setattr(queue.Queue, "get", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        runner.run(["sh", "-c", f'echo $$ > "{pid_file}"; exec sleep 600'])
    assert wait_until(lambda: not alive(int(pid_file.read_text())), 10), "the child outlived the interrupted run"
