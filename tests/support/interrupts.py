"""A run of the tool stopped at a chosen moment: Ctrl-C in this test's own process (what a
terminal's foreground job gets) once a state is reached, and a stand-in interpreter whose
probes say they started, then hang until they are ended."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

__all__ = ["alive", "ctrl_c_when", "HangingPython", "wait_until"]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended and not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def wait_until(ready: Callable[[], bool], timeout: float) -> bool:
    """Whether `ready()` became true within `timeout` seconds (a state polled, not a time slept)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class HangingPython:
    """An executable at `folder/python3` that answers the doctor's version question (`-E ...`)
    as Python 3.11 and otherwise, as a probe, appends its pid and arguments to `folder/started`
    and hangs (a sleep of 120 s) until it is ended."""

    def __init__(self, folder: Path) -> None:
        self.path, self.started = folder / "python3", folder / "started"
        self.path.write_text(f'#!/bin/sh\ncase "$1" in -E) printf 3.11 ;; *) echo "$$ $*" >> {self.started}; '
                             'exec sleep 120 ;; esac\n')
        self.path.chmod(0o755)

    def probes(self) -> List[Tuple[int, str]]:
        """(pid, arguments) of each probe started so far."""
        if not self.started.exists():
            return []
        return [(int(pid), argv) for pid, _, argv in
                (line.partition(" ") for line in self.started.read_text().splitlines())]

    def sealed(self) -> int:
        """How many sealed probes have started."""
        return sum("--sealed" in argv for _, argv in self.probes())


@contextlib.contextmanager
def ctrl_c_when(ready: Callable[[], bool], timeout: float = 60, ends_within: float = 30) -> Iterator[None]:
    """Run the block (a call of the tool in this thread) and press Ctrl-C once `ready()` is
    true: SIGINT to this process, from a thread that waits for that state. The block must
    end in KeyboardInterrupt (which ends here) within `ends_within` seconds of it, not when what
    it waits for would end on its own; where the state is not reached within `timeout` seconds,
    the test fails (the block is interrupted then, or ends on its own)."""
    done, pressed = threading.Event(), threading.Lock()
    reached: List[bool] = []
    pressed_at: List[float] = []

    def interrupt() -> None:
        wait_until(lambda: ready() or done.is_set(), timeout)
        with pressed:  # never after the block has ended: the KeyboardInterrupt is the block's
            if not done.is_set():
                reached.append(ready())
                pressed_at.append(time.monotonic())
                os.kill(os.getpid(), signal.SIGINT)  # at the state, or at the timeout to end the block

    # A terminal's foreground job gets Ctrl-C; a run started in the background (a shell's `&`, as
    # a CI script or tests/test_pythons.py's child may be) inherits SIGINT ignored.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread = threading.Thread(target=interrupt)
    thread.start()
    interrupted, took = False, 0.0
    try:
        try:
            yield
        except KeyboardInterrupt:
            interrupted = True
            took = time.monotonic() - pressed_at[0]
        finally:
            with pressed:
                done.set()
    finally:
        thread.join()
        signal.signal(signal.SIGINT, ignored)
    assert reached == [True], f"the moment to interrupt was not reached within {timeout} s"
    assert interrupted, "the run went on through Ctrl-C to its end"
    assert took <= ends_within, f"the run ended {took:.0f} s after Ctrl-C, not at once"
