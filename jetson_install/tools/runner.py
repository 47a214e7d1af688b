"""The one place that starts subprocesses (uv, the target interpreter's probes, git, the
source build's tools).

Every command line is logged before it runs, and each line of its output as the
child prints it (so the log holds all of it even after a Ctrl-C), while a caller may
watch the same lines to show progress. Children get a scrubbed
environment, as pipx does, so a user's PYTHONPATH or a stray VIRTUAL_ENV
cannot change what a probe or uv sees.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple


from jetson_install.base.process import Completed
from jetson_install.tools import uv

if TYPE_CHECKING:
    from jetson_install.tools.progress import StepProgress

__all__ = ["Completed", "LineCallback", "TICK_SECONDS", "run", "run_uv", "uv_binary", "child_environment",
           "end_children", "cancelled_with"]

log = logging.getLogger("jetson_install")

# Variables that would make a child Python or uv look somewhere else than asked.
_SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "__PYVENV_LAUNCHER__", "VIRTUAL_ENV", "CONDA_PREFIX")
#: How often on_tick is called while a child runs: often enough for a live line's clock.
TICK_SECONDS = 0.25
LineCallback = Callable[[str, str], None]
# The children run() started that still run, each with whether it leads a group of its own (end_children).
_children: Dict["subprocess.Popen[bytes]", bool] = {}
_children_lock = threading.Lock()


def child_environment(overrides: Optional[Mapping[str, str]] = None, unset: Sequence[str] = ()) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED and k not in unset}
    if "PYTHONIOENCODING" not in unset:  # a sealed probe is started without any PYTHON* variable
        env["PYTHONIOENCODING"] = "utf-8"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if overrides:
        env.update(overrides)
    return env


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>; prctl(2): https://man7.org/linux/man-pages/man2/prctl.2.html
_prctl: Optional[Callable[..., int]] = None


def _dies_with_us() -> Optional[Callable[[], None]]:
    """What the child runs before exec on Linux: SIGKILL when jetson-install dies, so a
    killed install (kill -9 of the tool alone) leaves no uv writing into DIR.d. None elsewhere."""
    global _prctl
    if not sys.platform.startswith("linux"):
        return None
    if _prctl is None:
        import ctypes

        try:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
    prctl, parent = _prctl, os.getpid()

    def preexec() -> None:
        # Only this call between fork and exec: the function was looked up in the parent.
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the tool died before the signal was armed
            os._exit(1)

    return preexec


def run(
    argv: Sequence[str],
    *,
    timeout: Optional[float] = None,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    input_text: Optional[str] = None,
    unset: Sequence[str] = (),
    on_line: Optional[LineCallback] = None,
    on_tick: Optional[Callable[[], None]] = None,
    own_group: bool = False,
    secret_stdout: bool = False,
    cancel: Optional[threading.Event] = None,
) -> Completed:
    """Run argv to completion, reading its output as it comes; never raises for a failing child.

    Each output line goes to the log and to ``on_line(stream, line)`` ("stdout" or
    "stderr", without its line ending) as soon as the child prints it; ``on_tick()``
    is called about every TICK_SECONDS while the child runs. Both are called in the
    caller's thread. The Completed holds the whole output, exactly as captured.

    A timeout gives returncode -9 and ``timed_out=True``; a missing executable
    gives returncode 127 with the reason on stderr. Ctrl-C ends the child too, with every
    process it started (`_kill`); ``own_group`` (a probe) starts it in a process group of its
    own, which ends as well; `cancel` (for a child another thread starts):
    once end_children set it, the child is not started. With ``secret_stdout`` (a credential
    helper's answer) the child's stdout is kept out of the log: only its stderr is logged.
    """
    name = os.path.basename(str(argv[0]))
    log.debug("run: %s", " ".join(str(a) for a in argv))
    # A child is started and registered under the lock end_children takes: it ends every child
    # started before it, and no child given its `cancel` is started after it.
    cancel = cancel if cancel is not None else getattr(_cancelled_with, "event", None)
    with _children_lock:
        if cancel is not None and cancel.is_set():
            return Completed(tuple(argv), -9, "", f"{argv[0]} was not started: the run was interrupted")
        try:
            proc = subprocess.Popen(
                [str(a) for a in argv],
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_environment(env, unset),
                cwd=cwd,
                # A probe gets its own process group, so a timeout ends even what left its tree;
                # uv and git stay in ours, so a kill of the tool's whole group reaches them and
                # what they started (a build backend), and their ssh keeps the terminal to ask on.
                start_new_session=own_group,
                preexec_fn=_dies_with_us(),
            )
        except OSError as exc:
            return Completed(tuple(argv), 127, "", f"cannot run {argv[0]}: {exc.strerror or exc}")
        _children[proc] = own_group
    try:
        return _follow(proc, argv, name, timeout, input_text, on_line, on_tick, own_group, secret_stdout)
    finally:
        with _children_lock:
            _children.pop(proc, None)


_cancelled_with = threading.local()


@contextlib.contextmanager
def cancelled_with(cancel: threading.Event) -> Iterator[None]:
    """Every child this thread starts meanwhile is given `cancel` (for code that starts one
    through functions of its own, such as uv pip check)."""
    _cancelled_with.event = cancel
    try:
        yield
    finally:
        _cancelled_with.event = None


def end_children(cancel: Optional[threading.Event] = None) -> None:
    """End every child that still runs, with what it started (uv's build backend), and set
    `cancel`, so that the other threads given it start none after. A Ctrl-C or
    SIGTERM is raised in the main thread alone, and reaches no child in a group of its own (a
    SIGTERM to the tool alone, as CI runners send it, reaches none at all): one that another
    thread waits for (the doctor's probes and its uv pip check run side by side) would run on
    to its end, and the thread pool would wait for it."""
    with _children_lock:
        if cancel is not None:
            cancel.set()
        running = list(_children.items())
    for proc, own_group in running:
        _kill(proc, own_group)


def _end_timed_out(proc: "subprocess.Popen[bytes]", own_group: bool, threads: Sequence[threading.Thread],
                   arrived: "queue.Queue[Tuple[str, Optional[str]]]", output: Dict[str, List[str]]) -> None:
    """End a child past its timeout and keep what it had written by then."""
    _kill(proc, own_group)
    proc.wait()
    for thread in threads:
        thread.join(timeout=5)  # a grandchild may still hold the pipes open
    while not arrived.empty():
        stream, line = arrived.get()
        if line is not None:
            output[stream].append(line)


def _follow(proc: "subprocess.Popen[bytes]", argv: Sequence[str], name: str, timeout: Optional[float],
            input_text: Optional[str], on_line: Optional[LineCallback], on_tick: Optional[Callable[[], None]],
            own_group: bool, secret_stdout: bool = False) -> Completed:
    """Read a started child's output as it comes, to its end (or its timeout)."""
    arrived: "queue.Queue[Tuple[str, Optional[str]]]" = queue.Queue()
    threads = [threading.Thread(target=_read_lines, args=(proc.stdout, "stdout", arrived), daemon=True),
               threading.Thread(target=_read_lines, args=(proc.stderr, "stderr", arrived), daemon=True)]
    if input_text is not None:
        threads.append(threading.Thread(target=_write_input, args=(proc.stdin, input_text), daemon=True))
    for thread in threads:
        thread.start()
    output: Dict[str, List[str]] = {"stdout": [], "stderr": []}
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    try:
        open_streams = 2
        next_tick = time.monotonic() + TICK_SECONDS
        while open_streams:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                timed_out = True
                break
            if on_tick is not None and now >= next_tick:
                next_tick = now + TICK_SECONDS
                on_tick()
            wait = next_tick - now if deadline is None else min(next_tick, deadline) - now
            try:
                stream, line = arrived.get(timeout=max(wait, 0.001))
            except queue.Empty:
                continue
            if line is None:
                open_streams -= 1
                continue
            output[stream].append(line)
            text = line.rstrip("\r\n")
            if not (secret_stdout and stream == "stdout"):
                log.debug("%s %s: %s", name, stream, text)
            if on_line is not None:
                on_line(stream, text)
        if not timed_out:
            try:
                proc.wait(timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                timed_out = True
    except BaseException as exc:
        # Ctrl-C: never leave the child (or what it started) running behind the interrupted step.
        _kill(proc, own_group)
        proc.wait()
        # A Ctrl-C that lands inside the queue's wait, between its lock's release and the try
        # that takes it again, leaves the lock released; the with-block's exit then raises
        # RuntimeError('release unlocked lock') over it (CPython's Lib/threading.py Condition.wait).
        # The run ends as the interruption it is, not a traceback.
        if isinstance(exc, RuntimeError) and isinstance(exc.__context__, KeyboardInterrupt):
            raise exc.__context__ from None
        raise
    if timed_out:
        _end_timed_out(proc, own_group, threads, arrived, output)
    log.debug("exit %s: %s", -9 if timed_out else proc.returncode, name)
    return Completed(tuple(argv), -9 if timed_out else proc.returncode, _joined(output["stdout"]),
                     _joined(output["stderr"]), timed_out=timed_out)


def _kill(proc: "subprocess.Popen[bytes]", own_group: bool) -> None:
    """End `proc` and every process descended from it; with `own_group`, its whole group too."""
    if proc.returncode is None:  # not reaped: its pid is still its own
        _end_tree(proc.pid)
    if own_group:
        with contextlib.suppress(OSError):  # the group is already gone
            os.killpg(proc.pid, signal.SIGKILL)


def _end_tree(root: int) -> None:
    """SIGKILL `root` and its descendants, found by their parent pids in /proc. Each is stopped
    first, and /proc read again until no new one appears: a stopped process starts none, while
    a killed one's children would go to init, out of the chain, and live on (a SIGTERM to the
    tool alone reaches no child; the children share the tool's group only so that a kill of
    that whole group reaches them all)."""
    stopped: Set[int] = set()
    while True:
        parents = _children_by_parent()
        tree, todo = set(), [root]
        while todo:
            pid = todo.pop()
            if pid not in tree:
                tree.add(pid)
                todo.extend(parents.get(pid, ()))
        found = tree - stopped
        if not found:
            break
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(OSError):  # it ended meanwhile
        os.kill(pid, number)


def _children_by_parent() -> Dict[int, List[int]]:
    """Each process's children by its pid, as /proc says now (none known without a /proc)."""
    children: Dict[int, List[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as stat:
                        # proc(5): "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
                        fields = stat.read().rpartition(b")")[2].split()
                except OSError:  # it ended meanwhile
                    continue
                if len(fields) > 1:
                    children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _read_lines(pipe: IO[bytes], stream: str, arrived: "queue.Queue[Tuple[str, Optional[str]]]") -> None:
    with pipe:
        for raw in iter(pipe.readline, b""):
            arrived.put((stream, raw.decode("utf-8", "replace")))
    arrived.put((stream, None))


def _write_input(pipe: IO[bytes], text: str) -> None:
    try:
        with pipe:
            pipe.write(text.encode("utf-8"))
    except OSError:
        pass  # the child exited without reading it all; its exit status says why


def _joined(lines: List[str]) -> str:
    # As text mode would give it: universal newlines.
    return "".join(lines).replace("\r\n", "\n").replace("\r", "\n")


_FINDING_BINARY = threading.Lock()


def uv_binary() -> str:
    # find_uv_bin reads sysconfig, whose first read is not thread-safe before Python 3.12
    # (https://github.com/python/cpython/issues/92452): two threads at once got EXE as None.
    from uv import find_uv_bin  # where uv runs: a no-op re-run starts none

    with _FINDING_BINARY:
        return find_uv_bin()


def run_uv(argv: Sequence[str], *, timeout: Optional[float] = 3600, indexes: Sequence[str] = (),
           sources: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
           watch: Optional["StepProgress"] = None, input_text: Optional[str] = None) -> Completed:
    """Run an argv uv.py built, with the uv binary jetson-install ships; `indexes` are the URLs
    (with any credentials) the argv may name, `sources` the requirements (with any credentials)
    whose git URLs it names without them; `watch` (the running step) hears of each download
    and build as uv announces it."""
    overrides, unset = uv.environment_for(indexes, argv, sources)
    overrides.update(env or {})
    on_line = on_tick = None
    if watch is not None:
        on_tick = watch.tick

        def on_line(stream: str, line: str) -> None:
            event = uv.read_event(line) if stream == "stderr" else None
            if event is not None:
                watch.event(event)

    return run([uv_binary(), *argv[1:]], timeout=timeout, env=overrides, unset=unset, on_line=on_line,
               on_tick=on_tick, input_text=input_text)
