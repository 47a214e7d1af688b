"""Runs `jetson-install ARGS` in the test's own process, as a user's shell would run it in a new one.

A subprocess per CLI run cost most CLI tests more than their checks. `run_cli` calls
`jetson_install.cli.main.main` with what a new process would have (its arguments in sys.argv,
the environment and working folder it is given, empty stdin, stdout and stderr of its
own, and the package's caches empty, as a new process starts with them) and gives back what a
user sees: the exit status and the two streams' text, as `subprocess.run(..., text=True)`
does. Afterwards everything the run could change in this
process is as it was: the environment, sys.argv, the streams, the working folder, the
temporary folder, and the log handlers an install adds.

Tests that need a real process keep one: the console script, the real streams' redaction,
Ctrl-C and kill, a terminal, a child killed mid-install.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Tuple, Union

__all__ = ["CliResult", "run_cli"]


@dataclass(frozen=True)
class CliResult:
    """What `subprocess.run(argv, capture_output=True, text=True)` gives, for the same run."""

    args: Tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw: bytes = stream.buffer.getvalue()  # type: ignore[attr-defined]
    # As text mode reads a child's output: universal newlines.
    return raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _exit_status(code: object, stderr: io.TextIOWrapper) -> int:
    """The status a process ending with SystemExit(code) has, as Python's own exit gives it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    stderr.write(f"{code}\n")
    return 1


def _clear_caches() -> None:
    """Empty every functools cache in the package: a file a test rewrote is read again."""
    for name, module in list(sys.modules.items()):
        if name == "jetson_install" or name.startswith("jetson_install."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def run_cli(*args: str, env: Optional[Mapping[str, str]] = None, cwd: Union[str, Path, None] = None) -> CliResult:
    """`jetson-install ARGS`, with `env` as its whole environment (default: this process's)."""
    from jetson_install.cli.main import main

    logger = logging.getLogger("jetson_install")
    saved_environment, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_handlers, saved_level, saved_tempdir = list(logger.handlers), logger.level, tempfile.tempdir
    stdout, stderr = _stream(), _stream()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        tempfile.tempdir = None  # found again from TMPDIR, as a new process finds it
        _clear_caches()
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["jetson-install", *args]
        sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        sys.stdout, sys.stderr = stdout, stderr
        try:
            main(list(args))
            returncode = 0
        except SystemExit as exc:
            returncode = _exit_status(exc.code, stderr)
        # main() wraps the streams to redact them; a run must leave them as it found them.
        assert (sys.stdout, sys.stderr) == (stdout, stderr), "main() did not put sys.stdout/sys.stderr back"
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environment)
        tempfile.tempdir = saved_tempdir
        for handler in logger.handlers[:]:
            if handler not in saved_handlers:
                logger.removeHandler(handler)
                handler.close()
        logger.setLevel(saved_level)
    return CliResult(("jetson-install", *args), returncode, _text(stdout), _text(stderr))
