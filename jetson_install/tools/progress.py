"""How far a running step has got, and how that is shown: a live line on a terminal, plain lines elsewhere.

uv draws its own bars only on a terminal. Into a pipe it still announces each file over
1 MiB as ``Downloading NAME (SIZE)`` and `` Downloaded NAME`` and each source build as
``Building NAME`` / ``Built NAME`` (https://github.com/astral-sh/uv/pull/11165). uv.py turns
those lines into Events; a StepProgress counts them; a Display shows them to the user.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, TextIO

from jetson_install.base.errors import BadInput
from jetson_install.base.redact import redact

if TYPE_CHECKING:
    from jetson_install.base.steps import StepResult

__all__ = [
    "DOWNLOAD", "DOWNLOADED", "BUILD", "BUILT", "PHASE", "Event", "StepProgress", "Display", "TerminalDisplay",
    "PlainDisplay", "display_for", "format_bytes", "format_seconds", "steps_summary", "INTERVAL_VARIABLE",
]

DOWNLOAD, DOWNLOADED, BUILD, BUILT, PHASE = "download", "downloaded", "build", "built", "phase"
#: Seconds between plain progress lines; tests shorten it.
INTERVAL_VARIABLE = "JETSON_INSTALL_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 15.0
INDENT = "      "
Clock = Callable[[], float]


@dataclass(frozen=True)
class Event:
    """One line of uv's progress, read: a download or build announced or finished, or a phase done."""

    kind: str  # DOWNLOAD | DOWNLOADED | BUILD | BUILT | PHASE
    name: str  # a file or build; for PHASE what uv finished, e.g. "resolved 87 packages"
    size: int = 0  # bytes, as a DOWNLOAD announced them; 0 when it named no size


class StepProgress:
    """One running step: the files announced, finished and in flight, and since when it runs."""

    def __init__(self, step_id: str, display: "Display", clock: Clock) -> None:
        self.step_id = step_id
        self._display = display
        self._clock = clock
        self.started = clock()
        self.in_flight: Dict[str, int] = {}  # download name -> announced size
        self.building: List[str] = []
        self.phase = ""  # the last stage uv finished, e.g. "resolved 87 packages"
        self.files_done = 0
        self.downloaded_bytes = 0  # the announced sizes of the files whose download finished
        self.announced_bytes = 0

    def event(self, event: Event) -> None:
        if event.kind == DOWNLOAD:
            self.in_flight[event.name] = event.size
            self.announced_bytes += event.size
        elif event.kind == DOWNLOADED and event.name in self.in_flight:
            self.downloaded_bytes += self.in_flight.pop(event.name)
            self.files_done += 1
        elif event.kind == BUILD:
            self.building.append(event.name)
        elif event.kind == BUILT and event.name in self.building:
            self.building.remove(event.name)
        elif event.kind == PHASE:
            self.phase = event.name
        self._display.update(self)

    def tick(self) -> None:
        self._display.update(self)

    def elapsed(self) -> float:
        return self._clock() - self.started

    def state(self) -> str:
        """What is done and what is in flight, e.g. '1 of 3 downloads done (2.9 of 7.2 MiB); downloading torch'."""
        parts = [self.phase] if self.phase else []
        announced = self.files_done + len(self.in_flight)
        if announced:
            parts.append(f"{self.files_done} of {announced} downloads done "
                         f"({format_bytes(self.downloaded_bytes)} of {format_bytes(self.announced_bytes)})")
        if self.in_flight:
            parts.append("downloading " + _names(self.in_flight))
        if self.building:
            parts.append("building " + _names(self.building))
        return "; ".join(parts) or "working"


def _names(names: Iterable[str], shown: int = 3) -> str:
    listed = list(names)
    more = f" and {len(listed) - shown} more" if len(listed) > shown else ""
    return ", ".join(listed[:shown]) + more


class Display:
    """Where the install's lines go. Calling it with a line prints that line (thread-safe)."""

    def __init__(self, stream: TextIO, clock: Clock = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self._write(line + "\n")

    def start(self, step_id: str, heading: str) -> StepProgress:
        self(heading)
        return StepProgress(step_id, self, self._clock)

    def update(self, step: StepProgress) -> None:
        """The step changed or time passed; a display decides whether that is worth a line."""

    def finish(self, step: StepProgress, status: str, detail: str = "") -> None:
        """The step's last line: its outcome, time and bytes downloaded."""
        self(f"{INDENT}{outcome(status, step.elapsed(), step.downloaded_bytes, detail)}")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


def outcome(status: str, seconds: float, downloaded: int, detail: str = "") -> str:
    took = {"ok": "done in", "failed": "failed after"}.get(status, f"{status} after")
    text = f"{took} {format_seconds(seconds)}" + (f", {format_bytes(downloaded)} downloaded" if downloaded else "")
    return f"{detail} ({text})" if detail else text


class PlainDisplay(Display):
    """For logs and pipes (CI, Ansible, --json): a line every `interval` seconds, never a control character."""

    def __init__(self, stream: TextIO, interval: float, clock: Clock = time.monotonic) -> None:
        super().__init__(stream, clock)
        self.interval = interval
        self._last: Dict[int, float] = {}

    def update(self, step: StepProgress) -> None:
        now = self._clock()
        if now - self._last.get(id(step), step.started) >= self.interval:
            self._last[id(step)] = now
            self(f"{INDENT}{format_seconds(step.elapsed())} so far: {step.state()}")

    def finish(self, step: StepProgress, status: str, detail: str = "") -> None:
        self._last.pop(id(step), None)
        super().finish(step, status, detail)


class TerminalDisplay(Display):
    """For a terminal: one live line under the step's heading, redrawn in place, replaced by its outcome."""

    def __init__(self, stream: TextIO, clock: Clock = time.monotonic, columns: Optional[Callable[[], int]] = None) -> None:
        super().__init__(stream, clock)
        self._columns = columns or (lambda: _terminal_columns(stream))
        self._live = False

    def __call__(self, line: str) -> None:
        with self._lock:
            self._write(line + "\n", "\r\x1b[K" if self._live else "")
            self._live = False  # the next update draws it again, below this line

    def update(self, step: StepProgress) -> None:
        # Redacted before it is cut: a URL cut short of its '@' would no longer look like credentials.
        text = redact(f"{INDENT}{format_seconds(step.elapsed())}  {step.state()}")
        width = max(self._columns() - 1, 20)  # a wrapped line could not be redrawn in place
        with self._lock:
            self._write(text[:width], "\r", "\x1b[K")
            self._live = True

    def _write(self, text: str, before: str = "", after: str = "") -> None:
        # The live line's own controls, around text the stream makes inert (cli's RedactingStream).
        controls = getattr(self._stream, "write_controls", self._stream.write)
        controls(before)
        self._stream.write(text)
        controls(after)
        self._stream.flush()


def _terminal_columns(stream: TextIO) -> int:
    # The width of the terminal this stream is on: stdout may be a pipe (--json) while stderr is not.
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns or shutil.get_terminal_size().columns  # 0: a terminal that never set its size


def display_for(stream: TextIO, environ: Mapping[str, str] = os.environ) -> Display:
    """A live line where a person watches a terminal; plain lines at a steady interval anywhere else."""
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty() and environ.get("TERM") != "dumb":
        return TerminalDisplay(stream)
    value = environ.get(INTERVAL_VARIABLE, "")
    try:
        interval = float(value) if value else DEFAULT_INTERVAL
    except ValueError:
        interval = -1.0
    if not interval > 0:
        raise BadInput(f"{INTERVAL_VARIABLE}={value!r} is not a number of seconds above 0",
                       fix=f"unset {INTERVAL_VARIABLE}, or set it to e.g. {DEFAULT_INTERVAL:g}")
    return PlainDisplay(stream, interval)


def format_seconds(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def format_bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def steps_summary(steps: Sequence["StepResult"]) -> str:
    """Each step's time, and its download where it had one: the end-of-run summary line."""
    parts = []
    for step in steps:
        size = f", {format_bytes(step.downloaded_bytes)}" if step.downloaded_bytes else ""
        parts.append(f"{step.id} {format_seconds(step.seconds)}{size}")
    return "; ".join(parts)
