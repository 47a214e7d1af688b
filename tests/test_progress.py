"""Progress while a step runs: uv's announcements read as they come, and how they are shown."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from typing import Any, List, Tuple

import pytest

from jetson_install.tools import runner, uv
from jetson_install.base.errors import BadInput
from jetson_install.tools.progress import Event, PlainDisplay, StepProgress, TerminalDisplay, display_for, format_bytes

CAPTURED = (Path(__file__).parent / "resources" / "uv" / "pip-install-into-a-pipe.txt").read_text()
# The sizes of the two files in the captured run that uv announced (see tests/resources/uv/PROVENANCE.md).
ANNOUNCED_FILES = {"bigdata-stub": 2_324_345, "middata-stub": 1_213_285}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def parsed(line: str) -> Event:
    event = uv.read_event(line)
    assert event is not None, line
    return event


def feed(step: StepProgress, text: str) -> None:
    for line in text.splitlines():
        event = uv.read_event(line)
        if event is not None:
            step.event(event)


def test_uv_pipe_output_counts_each_announced_file_once_with_its_size() -> None:
    step = PlainDisplay(io.StringIO(), interval=15).start("target", "[4/7] target")
    feed(step, CAPTURED)
    assert step.files_done == 2 and not step.in_flight
    assert step.state().startswith("installed 3 packages; 2 of 2 downloads done (3.4 MiB of 3.4 MiB)")
    # uv announces one decimal of MiB: the count is the announced size, within 5% of the file.
    assert step.downloaded_bytes == pytest.approx(sum(ANNOUNCED_FILES.values()), rel=0.05)


def test_uv_warnings_are_read_from_the_whole_output() -> None:
    result = runner.Completed(("uv",), 0, "", CAPTURED)
    assert uv.warnings_in(result) == ["The package `bigdata-stub==1.0` does not have an extra named `quantization`"]


def test_plain_lines_come_at_the_interval_and_the_step_ends_with_its_time_and_size() -> None:
    out, clock = io.StringIO(), Clock()
    display = PlainDisplay(out, interval=15, clock=clock)
    step = display.start("vendor", "[3/7] vendor: install the vendor builds")
    step.event(parsed("Downloading torch (731.1MiB)"))
    clock.now += 10
    step.tick()  # not yet 15 s: no line
    clock.now += 6
    step.tick()
    step.event(parsed("Downloading torchvision (2.0MiB)"))  # a new download alone prints nothing
    step.event(parsed(" Downloaded torch"))
    clock.now += 65
    display.finish(step, "ok")
    assert out.getvalue().splitlines() == [
        "[3/7] vendor: install the vendor builds",
        "      16 s so far: 0 of 1 downloads done (0 B of 731.1 MiB); downloading torch",
        "      done in 1m 21s, 731.1 MiB downloaded",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_the_terminal_line_is_redrawn_in_place_and_cleared_for_other_lines() -> None:
    out, clock = io.StringIO(), Clock()
    display = TerminalDisplay(out, clock=clock, columns=lambda: 60)
    step = display.start("target", "[4/7] target")
    step.event(parsed("Downloading transformers-with-a-long-name (11.2MiB)"))
    clock.now += 1
    step.tick()
    display("warning: something the user must read")
    step.tick()
    display.finish(step, "failed")
    text = out.getvalue()
    redraws = text.split("\r")[1:]
    live = "      {} s  0 of 1 downloads done (0 B of 11.2 MiB); downloading transformers-with-a-long-name"
    # Cut to the terminal's width less one: a wrapped line could not be redrawn in place.
    assert redraws[0] == live.format("0.0")[:59] + "\x1b[K"
    assert redraws[1] == live.format("1.0")[:59] + "\x1b[K"
    assert redraws[2] == "\x1b[Kwarning: something the user must read\n"
    assert redraws[-1] == "\x1b[K      failed after 1.0 s\n"


@pytest.mark.parametrize("value", ["soon", "0", "-1"])
def test_a_bad_progress_interval_is_bad_input_naming_the_variable(value: str) -> None:
    with pytest.raises(BadInput) as raised:
        display_for(io.StringIO(), {"JETSON_INSTALL_PROGRESS_INTERVAL": value})
    assert "JETSON_INSTALL_PROGRESS_INTERVAL" in raised.value.message and "unset" in (raised.value.fix or "")


def test_plain_lines_where_stderr_is_not_a_terminal() -> None:
    display = display_for(io.StringIO(), {"JETSON_INSTALL_PROGRESS_INTERVAL": "0.5"})
    assert isinstance(display, PlainDisplay) and display.interval == 0.5
    default = display_for(io.StringIO(), {})
    assert isinstance(default, PlainDisplay) and default.interval == 15


def test_sizes_read_as_a_user_would() -> None:
    assert [format_bytes(n) for n in (0, 1023, 1536, 3 * 1024 ** 3)] == ["0 B", "1023 B", "1.5 KiB", "3.0 GiB"]


def test_lines_arrive_while_the_child_still_runs(tmp_path: Path) -> None:
    arrived: List[Tuple[Any, ...]] = []
    ticks: List[float] = []
    seen = tmp_path / "seen"
    # The child says 'two' only once this side has seen 'one' and two ticks: a line held back
    # until the child's end would leave it waiting out its 30 s and saying 'not seen'.
    code = ("import os, sys, time; print('one', flush=True); deadline = time.monotonic() + 30\n"
            "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline: time.sleep(0.01)\n"
            "print('two' if os.path.exists(sys.argv[1]) else 'not seen')")

    def release() -> None:
        if arrived and len(ticks) >= 2:
            seen.touch()

    def on_line(stream: str, line: str) -> None:
        arrived.append((stream, line))
        release()

    def on_tick() -> None:
        ticks.append(time.monotonic())
        release()

    result = runner.run([sys.executable, "-c", code, str(seen)], timeout=60, on_line=on_line, on_tick=on_tick)
    assert arrived == [("stdout", "one"), ("stdout", "two")]
    assert len(ticks) >= 2
    assert result.ok and result.stdout == "one\ntwo\n"


def test_uv_failure_reads_the_same_streamed_as_captured(tmp_path: Path) -> None:
    argv = [runner.uv_binary(), "pip", "install", "--no-config", "--python", sys.executable, "--no-index",
            "--dry-run", "no-such-package-anywhere"]
    captured = runner.run(argv, timeout=60)
    streamed_lines: List[str] = []
    streamed = runner.run(argv, timeout=60, on_line=lambda stream, line: streamed_lines.append(line),
                          on_tick=lambda: None)
    assert not captured.ok and captured.stderr == streamed.stderr
    assert streamed_lines == streamed.stderr.splitlines()  # every line was seen as it came
    assert uv.summarize_failure(streamed) == uv.summarize_failure(captured)
    assert "no-such-package-anywhere" in uv.summarize_failure(streamed)
