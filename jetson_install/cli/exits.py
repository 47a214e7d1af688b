"""How a run of the command line ends: every failure as one line (and, under --json, one object)
with its documented exit code; SIGTERM and SIGHUP ending it as Ctrl-C does; a stdout closed early
(`| head -1`) ending it quietly, without a traceback; a stderr closed early (`2>&1 | head -2`)
letting it go on to its end without it."""

from __future__ import annotations

import errno
import os
import signal
from typing import Any, Dict, List

import click

from jetson_install.base.errors import (
    EXIT_BAD_INPUT,
    EXIT_CLOSED_OUTPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    AnotherUsers,
    BadInput,
    Interrupted,
    JetsonInstallError,
    Stopped,
)
from jetson_install.base.redact import RedactingStream, json_text
from jetson_install.cli.control_characters import refuse_control_characters
from jetson_install.cli.groups import NoCommandGiven

__all__ = ["STOPPING", "stop_like_ctrl_c", "restore", "StdoutClosed", "Stdout", "stdout_closed", "Stderr",
           "run_command", "report_error"]


#: The signals that end a run as Ctrl-C does: SIGTERM (CI runners, systemd, docker stop) and SIGHUP
#: (the terminal closed).
STOPPING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def stop_like_ctrl_c() -> Dict[int, Any]:
    """Make SIGTERM and SIGHUP raise Stopped in the main thread; return the handlers they had.
    Python runs signal handlers in the main thread only, where Ctrl-C's KeyboardInterrupt lands."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}  # signal.signal() refuses other threads; an embedding keeps its own handlers

    def stop(number: int, frame: Any) -> None:
        import logging

        name = signal.Signals(number).name
        # Once: a second SIGTERM must not cut short the clean-up that keeps the old environment
        # (SIGKILL, which systemd and CI send after their grace period, still ends it).
        for each in STOPPING:
            signal.signal(each, signal.SIG_IGN)
        logging.getLogger("jetson_install").warning("%s received: ending the run as Ctrl-C does", name)
        raise Stopped(name)

    return {number: signal.signal(number, stop) for number in STOPPING}


def restore(handlers: Dict[int, Any]) -> None:
    """Give the signals back the handlers stop_like_ctrl_c found."""
    for number, handler in handlers.items():
        # None: a handler set outside Python, which cannot be set back; the default stands in.
        signal.signal(number, signal.SIG_DFL if handler is None else handler)


class StdoutClosed(Exception):
    """stdout's reader went away. Not an OSError: click turns those into exit 1 and leaves the
    unwritten rest to fail again in Python's flush at exit (a traceback and exit 120)."""


class Stdout(RedactingStream):
    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except BrokenPipeError:
            raise StdoutClosed from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise StdoutClosed from None


def stdout_closed(stdout: Any) -> int:
    """stdout was closed early (`| head -1`): nothing more to say to it, and no traceback."""
    _devnull_over(stdout)
    return EXIT_CLOSED_OUTPUT


def _devnull_over(stream: Any) -> None:
    """The recipe of https://docs.python.org/3/library/signal.html#note-on-sigpipe: devnull over
    a stream whose reader is gone, so Python's own flush at exit does not fail again (exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass  # a stream with no file descriptor (an embedding's): nothing is flushed at exit


class Stderr(RedactingStream):
    """stderr whose reader may go away (`2>&1 | head -2`, a tee that died, a CI log pipe): the run
    goes on to its end without it, as it does when stdout closes, so an install is never left half
    made; what it would have shown is in the log, which says stderr closed. `closed_early` makes
    the exit status 141 at the end of a run that would have ended 0."""

    closed_early = False

    def write(self, text: str) -> int:
        if not self.closed_early:
            try:
                super().write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def write_controls(self, controls: str) -> None:
        if not self.closed_early:
            try:
                super().write_controls(controls)
            except BrokenPipeError:
                self._gone()

    def flush(self) -> None:
        if not self.closed_early:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        import logging

        self.closed_early = True  # first: a -v log handler writing here must not come back in
        _devnull_over(self._stream)
        logging.getLogger("jetson_install").warning("stderr was closed: going on without it")


def run_command(group: click.Group, args: List[str], completing: bool = False) -> int:
    """Run the command line `args` names; every failure becomes one line (or the help) and its exit
    code. `completing`: a shell asks for completions (click answers them, given no arguments)."""
    as_json = "--json" in args
    if not args and not completing:
        # `jetson-install` alone: the help, not an error line; exit 2 all the same, so a script
        # whose command word came out empty does not pass (with every click version).
        click.echo(group.get_help(click.Context(group, info_name="jetson-install")))
        return EXIT_BAD_INPUT
    try:
        refuse_control_characters(args, group)
        group.main(args=args, prog_name="jetson-install", standalone_mode=False, obj=list(args))
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except NoCommandGiven as exc:
        # A group alone (`jetson-install plan`): its help, as --help shows it, not an error line.
        click.echo(exc.ctx.get_help() if exc.ctx is not None else group.get_help(click.Context(group)))
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        # One line and the help of the command that refused it, like every other bad input.
        context = getattr(exc, "ctx", None)
        help_command = f"{context.command_path if context is not None else _command_path(group, args)} --help"
        report_error(BadInput(_said(exc), fix=f"see its options: {help_command}"), as_json)
        return EXIT_BAD_INPUT
    except (click.Abort, KeyboardInterrupt) as exc:
        from jetson_install.planning.rerun import Rerun

        # click turns an interruption in a command into Abort, keeping it as the cause.
        stopped = exc.__cause__ if isinstance(exc, click.Abort) else exc
        how = stopped.signal_name if isinstance(stopped, Stopped) else "Ctrl-C"
        report_error(Interrupted(f"interrupted ({how})", fix=f"run it again: {Rerun(tuple(args))}"), as_json)
        # Handled: under `python -m` CPython ends the process by SIGINT, not with this status, where the
        # interruption passed through code a string's exec ran (a dataclass's methods, made as a
        # module is imported), whose end left its "unhandled" flag set; the next such exec clears it
        # (Python/pythonrun.c run_eval_code_obj; https://github.com/python/cpython/pull/21956).
        exec("")
        return EXIT_INTERRUPTED
    except AnotherUsers as exc:
        from jetson_install.planning.rerun import Rerun

        report_error(BadInput(exc.message, fix=f"run it as the user who made it: sudo -u {exc.owner} "
                                               f"{Rerun(tuple(args))}"), as_json)
        return exc.exit_code
    except JetsonInstallError as exc:
        report_error(exc, as_json)
        return exc.exit_code
    except OSError as exc:
        from jetson_install.planning.fixes import fix_for_os_error, os_error_reason
        from jetson_install.planning.rerun import Rerun

        report_error(JetsonInstallError(os_error_reason(exc), fix=fix_for_os_error(exc, f"run: {Rerun(tuple(args))}")),
                     as_json)
        # A place the user may not write or enter, or cannot use (a file where a folder is needed, a
        # folder where a file is, a mount point): the command could not run (README's exit codes).
        unusable = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.EBUSY)
        return EXIT_BAD_INPUT if exc.errno in unusable else EXIT_FAILED
    return 0


def _command_path(group: click.Group, args: List[str]) -> str:
    """The command `args` name (`jetson-install plan obliteratus`), read from its words: click
    gives an option's parse error (`--root` without its value) no context to say it with."""
    path: List[str] = ["jetson-install"]
    command: click.Command = group
    for word in args:
        found = command.get_command(click.Context(command), word) if isinstance(command, click.Group) else None
        if found is None:
            break
        path.append(word)
        command = found
    return " ".join(path)


def _said(exc: click.ClickException) -> str:
    """click's message, an unknown option's in the same words under every click release (8.1, the
    newest for Python 3.8 and 3.9, said "No such option: --x"), as cli/groups.py words an
    unknown command."""
    if isinstance(exc, click.NoSuchOption):
        close = sorted(exc.possibilities or ())
        suggestion = f" Did you mean {' or '.join(repr(match) for match in close)}?" if close else ""
        return f"No such option {exc.option_name!r}.{suggestion}"
    return exc.format_message()


def report_error(exc: JetsonInstallError, as_json: bool) -> None:
    if as_json:
        # The one object stdout carries under --json when a command could not produce its own.
        click.echo(json_text({"schema_version": 1, "error": {"message": exc.message, "fix": exc.fix,
                                                    "exit_code": exc.exit_code}}), nl=False)
    click.echo(f"error: {exc.message}", err=True)
    if exc.fix:
        click.echo(f"  fix: {exc.fix}", err=True)
