"""The command line's groups and the options every command takes: a group given no command
shows its help and exits 2; the top level and `plan` have a command per catalog target, made
when it is asked for (so `--version` and `detect` never read the catalog); -q and -v, before
the command or after it."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from jetson_install.base.errors import BadInput, JetsonInstallError
from jetson_install.catalog.catalog_file import target_summaries

__all__ = ["QuietStream", "verbosity_options", "add_verbosity", "NoCommandGiven", "CommandGroup", "WithTargets"]


def _verbosity(context: click.Context, parameter: click.Parameter, value: bool) -> None:
    """-q/--quiet and -v/--verbose, before the command or after it."""
    if not value:
        return
    root = context.find_root()
    chosen = root.meta.setdefault("jetson_install.verbosity", parameter.name)
    if chosen != parameter.name:
        raise BadInput("-q/--quiet and -v/--verbose were both given", fix="pass only one of them")
    if parameter.name == "verbose":
        from jetson_install.base.logs import show_log

        show_log(sys.stderr)
    else:
        sys.stderr = QuietStream(sys.stderr)  # main() gives the real stream back


class QuietStream:
    """stderr under -q: errors, their fix and log lines, and warnings pass; progress and notes do not.
    Results on stdout are never touched."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._line = ""
        self._in_error = False  # an error's fix and log lines pass with it

    def write(self, text: str) -> int:
        self._line += text
        *lines, self._line = self._line.split("\n")
        for line in lines:
            if not line.startswith("  "):
                self._in_error = line.startswith("error:")
            if line.startswith(("error:", "warning:")) or (self._in_error and line.startswith(("  fix:", "  log:"))):
                self._stream.write(line + "\n")
        return len(text)

    def write_through(self, text: str) -> None:
        """A line -q must not drop: what the command is for, like the address it serves on."""
        self._stream.write(text)
        self._stream.flush()

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False  # no live progress line under -q

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def verbosity_options() -> List[click.Parameter]:
    """-q and -v, which every command takes."""
    return [click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, is_eager=True, callback=_verbosity,
                         help="Print only errors and warnings on stderr (results still go to stdout)."),
            click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, is_eager=True, callback=_verbosity,
                         help="Also print every command jetson-install runs, and its output, as it comes.")]


def add_verbosity(group: click.Group) -> None:
    """Every command takes -q and -v, declared here once; the image's entrypoint too, before
    its COMMAND (it parses no option after the first word that is none, nor after `--`, so a
    COMMAND's own -q or -v stays the COMMAND's). (A target's commands get them when they are
    made.)"""
    options = verbosity_options()
    group.params.extend(options)
    for command in group.commands.values():
        if isinstance(command, click.Group):
            add_verbosity(command)
        else:
            command.params.extend(options)


def _target_summaries(ctx: click.Context) -> Dict[str, str]:
    """Each catalog target and its command's help line, read without validating the catalog
    (its mistakes are said by the command that loads it). Read once per command line, kept on
    the root context: the file JETSON_INSTALL_WHEELS_INDEX names may differ between two
    command lines of one process. Where the file cannot be read, none, and the reason is kept
    for a command that names a target (`_catalog_error`)."""
    meta = ctx.find_root().meta
    if "jetson_install.targets" not in meta:
        try:
            meta["jetson_install.targets"] = target_summaries()
        except JetsonInstallError as exc:
            meta["jetson_install.targets"], meta["jetson_install.catalog_error"] = {}, exc
    summaries: Dict[str, str] = meta["jetson_install.targets"]
    return summaries


def _catalog_error(ctx: click.Context) -> Optional[JetsonInstallError]:
    error: Optional[JetsonInstallError] = ctx.find_root().meta.get("jetson_install.catalog_error")
    return error


class NoCommandGiven(click.UsageError):
    """A group given no command (`jetson-install plan`): its help is shown, and the run exits 2."""


class CommandGroup(click.Group):
    """A group that, given no command, shows its help and exits 2 under every click release:
    click 8.2 and newer raise NoArgsIsHelpError there, and 8.1 (the newest for Python 3.8 and
    3.9) printed the help and exited 0, passing a script whose command word came out empty."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            raise NoCommandGiven("", ctx)
        return super().parse_args(ctx, args)


class WithTargets(CommandGroup):
    """A group with one command per target of the catalog, made from the target's entry when
    it is asked for (so `--version` and `detect` never read the catalog)."""

    def __init__(self, *args: Any, make: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.make = make

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(super().list_commands(ctx)) | set(_target_summaries(ctx)))

    def resolve_command(self, ctx: click.Context, args: List[str]) -> Tuple[Optional[str], Optional[click.Command], List[str]]:
        # click suggests among its registered commands only (and some versions not at all): a
        # typed target (`obliterats`) gets its suggestion from every command, the targets too.
        name = args[0] if args else ""
        if not ctx.resilient_parsing and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib  # only for a command that does not exist

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            suggestion = f" Did you mean {' or '.join(repr(match) for match in close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}.{suggestion}", ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            summary = _target_summaries(ctx).get(cmd_name)
            command = self.make(cmd_name, summary) if summary is not None else None
            if command is not None:
                command.params.extend(verbosity_options())
            else:
                # The command may be a target of a catalog that cannot be read: its FILE:LINE and
                # fix say more than "No such command".
                error = _catalog_error(ctx)
                if error is not None and not ctx.resilient_parsing:
                    raise error
        return command
