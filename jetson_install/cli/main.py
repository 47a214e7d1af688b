"""The command line: parse the options (cli/options.py), call one function of the command's
area (cli/commands/), render what it returns (cli/render.py); how a run ends, and with which exit
code, is cli/exits.py's. A target's install, its plan, `add` and a saved plan's run are
cli/install_commands.py's.

What a command uses, its area's module (uv, HTTP, the doctor at its top), the renderer and the
fixes, it imports when it runs: `--help`, `--version` and `detect` load none of it
(tests/test_cli_detect.py), and `--help` stays within 1.5 times a bare click app's."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

import click

from jetson_install.base.errors import EXIT_CLOSED_OUTPUT, EXIT_FAILED, EXIT_INTERRUPTED, BadInput
from jetson_install.cli import options
from jetson_install.cli.exits import (
    Stderr,
    Stdout,
    StdoutClosed,
    restore,
    run_command,
    stdout_closed,
    stop_like_ctrl_c,
)
from jetson_install.cli.groups import CommandGroup, QuietStream, WithTargets, add_verbosity
from jetson_install.cli.install_commands import add, install_command, plan_add, plan_command
from jetson_install.cli.options import install_options, platform_options
from jetson_install.cli.output import exit_if, print_json, print_note

#: What click reads to complete a command line instead of running it (`_{PROG_NAME}_COMPLETE`,
#: https://click.palletsprojects.com/en/stable/shell-completion/); cli/completion.py answers it.
COMPLETE_VARIABLE = "_JETSON_INSTALL_COMPLETE"


def _print_version(context: click.Context, _: click.Parameter, value: bool) -> None:
    if value and not context.resilient_parsing:
        from jetson_install.cli.commands.version import version_lines

        click.echo("\n".join(version_lines()))
        context.exit()


@click.group(cls=WithTargets, make=install_command, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version of jetson-install, its catalog, its uv and its Python, and exit.")
def cli() -> None:
    """Make a CUDA-enabled OBLITERATUS environment on an NVIDIA Jetson, and prove it works.

    \b
    Try it without a Jetson:
      jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2
    """


@cli.command()
@options.DETECT
def detect(root: str, l4t: Optional[str], soc: Optional[str], as_json: bool) -> None:
    """Show which Jetson, L4T, JetPack and CUDA this is."""
    from jetson_install.cli.commands.platform import detect_platform
    from jetson_install.cli.render import platform_summary

    platform = detect_platform(platform_options(root, l4t, soc))
    print_json(platform.to_json()) if as_json else click.echo(platform_summary(platform, options.typed()))
    click.echo("".join(f"warning: {warning}\n" for warning in platform.warnings), err=True, nl=False)


@cli.command()
@options.INSPECT
def inspect(subject: str, root: str, l4t: Optional[str], soc: Optional[str], as_json: bool) -> None:
    """Read a wheel's (or a library's) GPU code and libraries: can it run on this board?

    Nothing is installed or loaded: each shared object's SASS architectures and PTX, what it
    needs, and a verdict for the board's GPU. Exit 1 when a file cannot run here.
    """
    from jetson_install.cli.commands.inspect import inspect_subject, inspection_lines

    inspection = inspect_subject(subject, platform_options(root, l4t, soc), options.typed())
    print_json(inspection.to_json()) if as_json else click.echo("\n".join(inspection_lines(inspection)))
    exit_if(0 if inspection.ok else EXIT_FAILED)


@cli.command()
def samples() -> None:
    """List the sample roots usable as --root sample:NAME."""
    from jetson_install.board.samples import sample_names

    click.echo("\n".join(f"sample:{name}" for name in sample_names()))


@cli.group(cls=WithTargets, make=plan_command)
def plan() -> None:
    """Show what an install would do, changing nothing."""


cli.add_command(add)
plan.add_command(plan_add)


@cli.command()
@options.CHANNELS
def channels(channel_id: Optional[str], as_json: bool, markdown: bool, check: bool, vendor_index: Optional[str],
             mirrors: Tuple[str, ...], default_index: Optional[str]) -> None:
    """List the channels in wheels-index.toml (and validate the file)."""
    from jetson_install.cli.commands.channels import channels as read_channels
    from jetson_install.cli.commands.channels import check_exit_code
    from jetson_install.cli.render import channels_json, channels_markdown, channels_text, check_json, check_lines

    if as_json and markdown:
        raise BadInput("--json and --markdown were both given", fix="pass only one of them")
    listed = read_channels(channel_id, check, vendor_index, mirrors,
                           options.given(click.get_current_context(), "default_index", default_index), options.typed())
    if listed.reports is not None:
        print_json(check_json(listed.reports)) if as_json else click.echo("\n".join(check_lines(listed.reports)))
        exit_if(check_exit_code(listed.reports))
    else:
        print_json(channels_json(listed.catalog)) if as_json else \
            click.echo(channels_markdown(listed.catalog) if markdown else channels_text(listed.catalog))


@cli.command()
@options.CONSTRAINTS
def constraints(write: bool, directory: str) -> None:
    """For maintainers, in a checkout: check (or --write) constraints/<channel>.txt against wheels-index.toml.

    Exits 1 when a file is out of date. An installed jetson-install needs none of these
    files: every environment it makes carries its own constraints file.
    """
    from jetson_install.cli.commands.channels import constraint_files

    click.echo("\n".join(constraint_files(directory, write)))


@cli.command()
@options.EXPORT
def export(project_dir: str, uv: bool, channel_id: Optional[str], root: str, l4t: Optional[str], soc: Optional[str],
           vendor_index: Optional[str], print_only: bool) -> None:
    """Write a channel's protected stack into a uv project (pyproject.toml), for plain `uv sync` on a Jetson.

    Changes only jetson-install's own lines in the file; a re-run replaces them. Refuses a
    project whose own settings contradict them, naming the line.
    """
    from jetson_install.cli.commands.export import export_uv
    from jetson_install.cli.render import export_lines, export_notes

    if not uv:
        raise BadInput("export needs the settings' kind: --uv (uv's, in pyproject.toml), the one there is",
                       fix=f"jetson-install export --uv {project_dir}")
    context = click.get_current_context()
    source = context.get_parameter_source("root")
    root_given = source is not None and source.name == "COMMANDLINE"
    exported = export_uv(project_dir, channel_id, platform_options(root, l4t, soc), root_given,
                         options.given(context, "vendor_index", vendor_index), print_only)
    click.echo(exported.fragment, nl=False) if exported.fragment is not None else click.echo(
        "\n".join(export_lines(exported)))
    for note in export_notes(exported):
        print_note(note)


@cli.command("lock")
@options.LOCK
def lock(**given: Any) -> None:
    """Resolve a board's whole environment for TARGET (default: obliteratus) into a hashed lock, on any machine."""
    from jetson_install.cli.commands.fleet import board_lock
    from jetson_install.cli.render import lock_lines

    target = given["target"]
    result = board_lock(install_options(target, given), given["python"], given["python_version"],
                        Path(given["output"] or f"{target}.lock"), options.typed())
    if given["as_json"]:
        print_json(result.to_json())
    click.echo("\n".join(lock_lines(result)), err=True)


@cli.command("wheelhouse")
@options.WHEELHOUSE
def wheelhouse(directory: str, lock_file: str, serve: bool, push: Optional[str], bind: str, port: int,
               tool_wheel: Optional[str], default_index: Optional[str], mirrors: Tuple[str, ...],
               allow_insecure_index: bool, as_json: bool) -> None:
    """Download every file of a lock into DIR, with a PEP 503 index beside them."""
    from jetson_install.cli.commands.fleet import fill_wheelhouse, push_wheelhouse, serve_wheelhouse, serving_lines, serving_url
    from jetson_install.cli.render import pushed_lines, wheelhouse_lines
    from jetson_install.fleet.wheelhouse_server import WheelhouseServer

    where = Path(directory).absolute()
    context = click.get_current_context()
    if context.get_parameter_source("lock_file") != click.core.ParameterSource.DEFAULT or not (serve or push):
        index = options.given(context, "default_index", default_index)
        result = fill_wheelhouse(Path(lock_file), where, tool_wheel, index, options.typed(), mirrors,
                                 allow_insecure_index)
        if as_json and not push:
            print_json(result)
        click.echo("\n".join(wheelhouse_lines(result)), err=True)
    if push:
        pushed = push_wheelhouse(where, push, allow_insecure_index, lambda line: click.echo(line, err=True))
        if as_json:
            print_json(pushed)
        click.echo("\n".join(pushed_lines(pushed)), err=True)
    if serve:
        def serving(server: WheelhouseServer) -> None:
            if isinstance(sys.stderr, QuietStream):
                # -q drops notes, but the address is what the user runs this for (port 0 picks it).
                sys.stderr.write_through(serving_url(bind, server.server_address[1]) + "\n")
            else:
                click.echo("\n".join(serving_lines(server, bind)), err=True)

        serve_wheelhouse(where, bind, port, options.typed(), serving)
        click.echo("stopped serving", err=True)


@cli.command()
@options.DOCTOR
def doctor(root: str, l4t: Optional[str], soc: Optional[str], venv: Optional[str], python: Optional[str], as_json: bool,
           evidence: Optional[str], only: Tuple[str, ...], no_gpu: bool, list_checks: bool, strict: bool,
           gate_evidence: Optional[str], preflight: bool) -> None:
    """Prove torch.cuda and bitsandbytes run CUDA kernels; read-only."""
    from jetson_install.cli.commands import doctor as doctoring
    from jetson_install.cli.render import check_list, check_list_json
    from jetson_install.doctor import list_checks as checks_listed
    from jetson_install.doctor import render_lines

    if list_checks:
        print_json(check_list_json(checks_listed())) if as_json else click.echo(check_list(checks_listed()))
        return
    interpreter, note = doctoring.doctor_interpreter(venv, python)
    print_note(note)
    run = doctoring.doctor(interpreter, platform_options(root, l4t, soc), only, strict or bool(gate_evidence), no_gpu,
                           preflight, evidence, gate_evidence, progress=lambda line: click.echo(line, err=True))
    print_json(run.evidence) if as_json else click.echo("\n".join(render_lines(run.report)))
    exit_if(run.report.exit_code)


@cli.command()
@options.DOCKERFILE
def dockerfile(root: str, l4t: Optional[str], soc: Optional[str], base: Optional[str], output: Optional[str]) -> None:
    """A Dockerfile: OBLITERATUS on an image whose CUDA torch matches this Jetson, kept as it is."""
    from jetson_install.cli.commands.container import dockerfile as make_dockerfile
    from jetson_install.cli.render import dockerfile_written

    made = make_dockerfile(platform_options(root, l4t, soc), base, str(options.typed()), output)
    if made.written is None:
        click.echo(made.text, nl=False)
        return
    print_note(made.note)
    click.echo(dockerfile_written(str(output), made.base, made.written), err=True)


# COMMAND follows `--` (the image's ENTRYPOINT ends with it), or starts at the first word that
# is no option: its own options are its own, and an unknown option before it is refused.
@cli.command("container-entrypoint", context_settings={"allow_interspersed_args": False})
@options.CONTAINER_ENTRYPOINT
def container_entrypoint(venv: str, command: Tuple[str, ...]) -> None:
    """The image's entrypoint: refuse a host the image is not built for, run the strict doctor
    once (evidence for the HEALTHCHECK), then start COMMAND."""
    from jetson_install.cli.commands.container import container_start

    start = container_start(Path(venv), os.environ, command)
    click.echo("\n".join(start.lines), err=True)
    exit_if(start.exit_code)
    if command:
        os.execvp(command[0], list(command))


@cli.group(cls=CommandGroup)
def evidence() -> None:
    """Read doctor evidence: check it is fresh and passed, or build the support table."""


@evidence.command("check")
@options.EVIDENCE_CHECK
def evidence_check(files: Tuple[str, ...], max_age: Optional[float], requirements: Tuple[str, ...],
                   partial: bool) -> None:
    """Each FILE must be valid, passed, fresh, match every --require and prove CUDA (the strict
    doctor's full run); one line per file."""
    from jetson_install.cli.commands.doctor import judged

    verdicts = judged(files, max_age, requirements, partial)
    click.echo("\n".join(verdict.line() for verdict in verdicts))
    exit_if(0 if all(verdict.ok for verdict in verdicts) else EXIT_FAILED)


@evidence.command("table")
@options.EVIDENCE_TABLE
def evidence_table(files: Tuple[str, ...], max_age: Optional[float]) -> None:
    """The Markdown support table from fresh passing evidence; stale or failed listed apart."""
    from jetson_install.cli.commands.doctor import tabulated
    from jetson_install.fleet.evidence import support_table

    click.echo(support_table(tabulated(files, max_age)))


@cli.command()
@options.LABELS
def labels(root: str, l4t: Optional[str], soc: Optional[str], evidence_file: Optional[str], venv: Optional[str],
           max_age: Optional[float], as_json: bool) -> None:
    """Runner labels for this Jetson, comma-separated (what a runner's --labels takes)."""
    from jetson_install.cli.commands.doctor import labels as runner_labels
    from jetson_install.cli.commands.lifecycle import default_environment

    if evidence_file is not None and venv is not None:
        raise BadInput("labels: --evidence and --venv both name the evidence to read",
                       fix=f"give one: {options.typed().without('--evidence')}")
    if venv is not None:
        environment: Optional[Path] = Path(venv).absolute()
    else:
        environment, note = default_environment("labels") if evidence_file is None else (None, None)
        print_note(note)
    result = runner_labels(platform_options(root, l4t, soc), evidence_file, max_age, environment, options.typed())
    click.echo("".join(f"warning: {warning}\n" for warning in result.warnings), err=True, nl=False)
    if as_json:
        print_json(result.to_json())
        return
    click.echo(",".join(result.labels))
    click.echo(f"cuda: {'yes' if 'cuda' in result.labels else 'no'}: {result.cuda_reason}", err=True)


@cli.command("list")
@options.LIST
def list_command(as_json: bool) -> None:
    """The environments jetson-install made: path, channel, torch build, last doctor result, size."""
    from jetson_install.cli.render import environments_json, environments_lines
    from jetson_install.envs.lifecycle import list_environments

    listed = list_environments()
    print_json(environments_json(listed)) if as_json else click.echo("\n".join(environments_lines(listed)))


def _environment(venv: Optional[str], command: str) -> Tuple[Path, str]:
    """The DIR a lifecycle command works on, and how to name it; the default it took, said first."""
    from jetson_install.cli.commands.lifecycle import environment_link

    link, where, note = environment_link(venv, command)
    print_note(note)
    return link, where


@cli.command()
@options.ROLLBACK
def rollback(venv: Optional[str], as_json: bool) -> None:
    """Switch back to the kept previous environment, in one rename; run it again to undo."""
    from jetson_install.cli.render import rollback_lines
    from jetson_install.envs.lifecycle import rollback as roll_back

    result = roll_back(*_environment(venv, "rollback"))
    if as_json:
        print_json(result.to_json())
    click.echo("\n".join(rollback_lines(result)), err=as_json)


@cli.command()
@options.UNINSTALL
def uninstall(venv: Optional[str], yes: bool, as_json: bool) -> None:
    """Remove an environment jetson-install made, with its kept previous one; nothing else."""
    from jetson_install.cli.render import uninstall_lines
    from jetson_install.envs.lifecycle import uninstall as remove

    link, where = _environment(venv, "uninstall")
    if not yes and sys.stdin.isatty() and not as_json and not click.confirm(
            f"Remove {link} and the environments jetson-install made for it?", default=False, err=True):
        sys.exit(EXIT_INTERRUPTED)
    result = remove(link, where)
    if as_json:
        print_json(result.to_json())
    click.echo("\n".join(uninstall_lines(result)), err=as_json)


@cli.command()
@options.CLEAN
def clean(dry_run: bool, failed_evidence: bool, as_json: bool) -> None:
    """Remove the logs, the bitsandbytes build cache, the cache of interpreters' versions and
    what interrupted runs left; never an environment in use or its previous one, nor uv's own
    cache (`uv cache clean`), nor failed verifies' evidence unless --failed-evidence."""
    from jetson_install.cli.render import clean_lines
    from jetson_install.envs.lifecycle import clean as clean_up

    result = clean_up(dry_run, failed_evidence)
    if as_json:
        print_json(result.to_json())
    click.echo("\n".join(clean_lines(result)), err=as_json)


@cli.command()
@options.PATHS
def paths(as_json: bool) -> None:
    """The folders and files jetson-install uses, and where each came from (default, variable, configuration)."""
    from jetson_install.cli.commands.paths import SCHEMA_VERSION
    from jetson_install.cli.commands.paths import paths as find_paths
    from jetson_install.cli.render import paths_lines

    found = find_paths()
    print_json({"schema_version": SCHEMA_VERSION, "paths": [place.to_json() for place in found]}) if as_json \
        else click.echo("\n".join(paths_lines(found)))


@cli.command()
@options.OUTDATED
def outdated(venvs: Tuple[str, ...], default_index: Optional[str], as_json: bool) -> None:
    """What is newer than each environment has (the catalog's preferred set, its source's newer
    tag) and than this jetson-install, with the command that upgrades each; read-only.

    Exits 0 for the report of every environment; with DIRs named, 1 where one is outdated, else
    4 where what one has could not be compared (a remote did not answer)."""
    from jetson_install.cli.commands.outdated import outdated as find_outdated
    from jetson_install.cli.render import outdated_lines

    found = find_outdated(venvs, options.given(click.get_current_context(), "default_index", default_index))
    print_json(found.to_json()) if as_json else click.echo("\n".join(outdated_lines(found)))
    exit_if(found.exit_code)


add_verbosity(cli)


def main(argv: Optional[List[str]] = None) -> None:
    """The command line (the console script's and `python -m jetson_install`'s, by way of
    `__main__.py`, or a caller's `argv`): run the CLI and turn every known failure into one line
    and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    # Every line printed, from any command or error path, has URL credentials masked; the
    # streams are given back afterwards, so a caller (a test, an embedding) keeps its own.
    streams = sys.stdout, sys.stderr
    stderr = Stderr(sys.stderr)
    sys.stdout, sys.stderr = Stdout(sys.stdout), stderr
    handlers = stop_like_ctrl_c()
    completing = COMPLETE_VARIABLE in os.environ
    if completing:
        from jetson_install.cli.completion import register

        register()
    code: Any
    try:
        try:
            code = run_command(cli, args, completing)
        except SystemExit as exc:  # a command's own exit status (sys.exit in cli/)
            code = exc.code
        sys.stdout.flush()  # here, not at exit, so a closed stdout is caught below
        sys.stderr.flush()
    except StdoutClosed:
        code = stdout_closed(streams[0])
    finally:
        sys.stdout, sys.stderr = streams
        restore(handlers)
    if argv is None:
        # The process's own command line (the console script, `python -m`), not a caller's: what
        # the run made is freed with the process. Python's last garbage collections at exit would
        # walk every object first; frozen, they are not walked.
        gc.freeze()
    sys.exit(EXIT_CLOSED_OUTPUT if stderr.closed_early and code in (0, None) else code)
