"""The command line: parse options, call one plain function per command, render its result.

Kept thin and cheap to import: `--help`, `--version` and `detect` load click and
the detection modules only (never requests, never anything that runs uv).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import click

from jetson_install import __version__
from jetson_install.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, JetsonInstallError

ROOT_HELP = "Read the platform from DIR instead of / (or sample:NAME, see `jetson-install samples`)."


def _root_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--l4t", "l4t", metavar="VERSION", envvar="JETSON_L4T_VERSION",
        help="Use this L4T release (e.g. 36.4.3) when the root's release file is empty or missing.",
    )(command)
    return click.option("--root", default="/", envvar="JETSON_INSTALL_ROOT", metavar="DIR", help=ROOT_HELP)(command)


def _detect_platform(root: str, l4t: Optional[str]):
    from jetson_install.platform import L4TOverride, detect
    from jetson_install.samples import resolve_root

    override = None
    if l4t:
        source = click.get_current_context().get_parameter_source("l4t")
        override = L4TOverride(l4t, "JETSON_L4T_VERSION" if source.name == "ENVIRONMENT" else "--l4t")
    return detect(resolve_root(root), override)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="jetson-install")
def cli() -> None:
    """Make a CUDA-enabled OBLITERATUS environment on an NVIDIA Jetson, and prove it works.

    \b
    Try it without a Jetson:
      jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2
    """


@cli.command()
@_root_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object for scripts.")
def detect(root: str, l4t: Optional[str], as_json: bool) -> None:
    """Show which Jetson, L4T, JetPack and CUDA this is."""
    platform = _detect_platform(root, l4t)
    if as_json:
        _print_json(platform.to_json())
        return
    from jetson_install.render import platform_summary

    click.echo(platform_summary(platform))


@cli.command()
def samples() -> None:
    """List the sample roots usable as --root sample:NAME."""
    from jetson_install.samples import sample_names

    for name in sample_names():
        click.echo(f"sample:{name}")


def main(argv: Optional[list] = None) -> None:
    """Entry point: run the CLI and turn every known failure into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        cli.main(args=args, prog_name="jetson-install", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT)
    except click.Abort:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except JetsonInstallError as exc:
        _report_error(exc, as_json="--json" in args)
        sys.exit(exc.exit_code)


def _report_error(exc: JetsonInstallError, as_json: bool) -> None:
    if as_json:
        _print_json({"schema_version": 1, "error": {"message": exc.message, "fix": exc.fix, "exit_code": exc.exit_code}})
    click.echo(f"error: {exc.message}", err=True)
    if exc.fix:
        click.echo(f"  fix: {exc.fix}", err=True)
