"""The command line: parse options, call one plain function per command (commands.py and the
stage modules), render its result.

Kept thin and cheap to import: `--help`, `--version` and `detect` load click and the
detection modules only (never requests, never anything that runs uv).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import click

from jetson_install import __version__
from jetson_install.cli.options import INSTALL_OPTIONS, with_options as _with
from jetson_install.base.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, BadInput, JetsonInstallError

if TYPE_CHECKING:
    from jetson_install.cli.commands import Addition, Given, InstallOptions, PlatformOptions
    from jetson_install.planning.fixes import Rerun

_ENVIRONMENT = {"root": "JETSON_INSTALL_ROOT", "l4t": "JETSON_L4T_VERSION", "soc": "JETSON_INSTALL_SOC",
                "vendor_index": "JETSON_INSTALL_VENDOR_INDEX",
                "default_index": "JETSON_INSTALL_DEFAULT_INDEX"}


_root_options = _with("l4t", "soc", "root")
_install_options = _with(*INSTALL_OPTIONS)


def _given(name: str, value: Optional[str]) -> "Given":
    """The value of option `name` and where it came from: its flag, or its environment variable."""
    from jetson_install.cli.commands import Given

    source = click.get_current_context().get_parameter_source(name)
    from_environment = source is not None and source.name == "ENVIRONMENT"
    return Given(value, _ENVIRONMENT[name] if from_environment else "--" + name.replace("_", "-"))


def _platform_options(root: str, l4t: Optional[str], soc: Optional[str]) -> "PlatformOptions":
    from jetson_install.cli.commands import PlatformOptions

    return PlatformOptions(_given("root", root), _given("l4t", l4t), _given("soc", soc))


def _print_json(data: Any) -> None:
    from jetson_install.base.redact import json_text

    click.echo(json_text(data), nl=False)


def _exit_if(code: int) -> None:
    if code:
        sys.exit(code)


def _target_summaries(ctx: click.Context) -> Dict[str, str]:
    """Each catalog target and its command's help line, read without validating the catalog
    (its mistakes are said by the command that loads it); none where the file cannot be parsed.
    Read once per command line: `--help` asks for every command (the parse was two thirds of
    its cost, read three times); kept on the root context, not the process, since the file
    named by JETSON_INSTALL_WHEELS_INDEX may differ between two command lines of one process."""
    from jetson_install.catalog.catalog_file import target_summaries

    meta = ctx.find_root().meta
    if "jetson_install.targets" not in meta:
        try:
            meta["jetson_install.targets"] = target_summaries()
        except JetsonInstallError:
            meta["jetson_install.targets"] = {}
    summaries: Dict[str, str] = meta["jetson_install.targets"]
    return summaries


class _WithTargets(click.Group):
    """A group with one command per target of the catalog, made from the target's entry when
    it is asked for (so `--version` and `detect` never read the catalog)."""

    def __init__(self, *args: Any, make: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.make = make

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(super().list_commands(ctx)) | set(_target_summaries(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            summary = _target_summaries(ctx).get(cmd_name)
            command = self.make(cmd_name, summary) if summary is not None else None
            if command is not None:
                command.params.extend(_verbosity_options())
        return command


def _install_command(target_id: str, summary: str) -> click.Command:
    """`jetson-install TARGET`: install the target on the protected stack, then prove it works."""
    def install_target(**given: Any) -> None:
        _install(target_id, given)

    for decorate in reversed((
        _install_options,
        click.option("--dry-run", is_flag=True, help="Print the plan and change nothing."),
        click.option("--upgrade", is_flag=True, help="Read the vendor index again instead of reusing the recorded set."),
        click.option("--yes", "-y", is_flag=True, help="Never prompt (prompts happen only on a terminal anyway)."),
        click.option("--lock", "lock_file", metavar="FILE", help="Install exactly this lock (`jetson-install lock`)."),
        click.option("--wheelhouse", metavar="DIR|URL",
                     help="Install the lock of this wheelhouse from it, with no other network."),
    )):
        install_target = decorate(install_target)
    return click.command(target_id, help=summary)(install_target)


def _plan_command(target_id: str, summary: str) -> click.Command:
    """`jetson-install plan TARGET`."""
    def plan_target(**given: Any) -> None:
        _plan(target_id, given)

    plan_target = click.option("--resolve", is_flag=True,
                               help="Read the vendor index and show the set an install would take.")(plan_target)
    plan_target = _install_options(plan_target)
    return click.command(target_id, help=f"The ordered steps `jetson-install {target_id}` would take (offline "
                                         "unless --resolve).")(plan_target)


@click.group(cls=_WithTargets, make=_install_command, context_settings={"help_option_names": ["-h", "--help"]})
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
def detect(root: str, l4t: Optional[str], soc: Optional[str], as_json: bool) -> None:
    """Show which Jetson, L4T, JetPack and CUDA this is."""
    from jetson_install.cli.commands import detect_platform

    platform = detect_platform(_platform_options(root, l4t, soc))
    if as_json:
        _print_json(platform.to_json())
        return
    from jetson_install.cli.render import platform_summary

    click.echo(platform_summary(platform))
    click.echo(f"next: see what an install would do: {_rerun_command().replaced('detect', ('plan', 'obliteratus'))}")


@cli.command()
def samples() -> None:
    """List the sample roots usable as --root sample:NAME."""
    from jetson_install.board.samples import sample_names

    for name in sample_names():
        click.echo(f"sample:{name}")


def _options(target: str, given: Dict[str, Any]) -> "InstallOptions":
    from jetson_install.cli.commands import InstallOptions

    return InstallOptions(
        target=target, platform=_platform_options(given["root"], given["l4t"], given["soc"]),
        vendor_index=_given("vendor_index", given["vendor_index"]),
        default_index=_given("default_index", given["default_index"]),
        allow_insecure_index=given["allow_insecure_index"], venv=given.get("venv"), python=given.get("python"),
        source=given["source"], ref=given["ref"], verify=not given.get("no_verify", False),
        fallback=given["vendor_fallback"], use_existing_torch=given.get("use_existing_torch", False),
        bitsandbytes=given.get("bitsandbytes"), preflight=given.get("preflight", False),
        cpu_index=given.get("cpu_index"), added=tuple(given.get("added", ())))


@cli.group(cls=_WithTargets, make=_plan_command)
def plan() -> None:
    """Show what an install would do, changing nothing."""


def _plan(target_id: str, given: Dict[str, Any]) -> None:
    from jetson_install.cli.commands import make_install_plan, resolve_plan
    from jetson_install.base.errors import EXIT_UNSUPPORTED
    from jetson_install.cli.render import plan_text

    the_plan = make_install_plan(_options(target_id, given))
    if given["resolve"]:
        the_plan = resolve_plan(the_plan, _rerun_command())
    if given["as_json"]:
        _print_json(the_plan.to_json())
    else:
        click.echo(plan_text(the_plan))
        if the_plan.supported:
            from jetson_install.cli.render import install_hint

            click.echo(install_hint(the_plan, _rerun_command()))
    _exit_if(0 if the_plan.supported else EXIT_UNSUPPORTED)


@cli.command()
@click.argument("channel_id", required=False, metavar="[CHANNEL]")
@click.option("--json", "as_json", is_flag=True, help="Print the channels as JSON.")
@click.option("--markdown", is_flag=True, help="Print the support table that README.md carries.")
@click.option("--check", is_flag=True, help="Read each channel's index: preferred set present, hashes unchanged, newer sets.")
@click.option("--vendor-index", metavar="URL", help="With --check: read this mirror instead of the channel's index.")
def channels(channel_id: Optional[str], as_json: bool, markdown: bool, check: bool, vendor_index: Optional[str]) -> None:
    """List the channels in wheels-index.toml (and validate the file)."""
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.cli.render import channels_json, channels_markdown, channels_text, check_lines

    if as_json and markdown:
        raise BadInput("--json and --markdown were both given", fix="pass only one of them")
    catalog = load_catalog()
    if (channel_id or vendor_index) and not check:
        if channel_id is not None and channel_id not in {c.id for c in catalog.channels}:
            from jetson_install.cli.commands import unknown_channel

            raise unknown_channel(catalog, channel_id)
        raise BadInput("CHANNEL and --vendor-index go with --check", fix="jetson-install channels --check [CHANNEL]")
    if check:
        from jetson_install.cli.commands import check_channels

        from jetson_install.tools.index import check_exit_code

        reports = check_channels(catalog, channel_id, vendor_index)
        if as_json:
            _print_json([{"channel": r.channel, "index": r.index, "status": r.status, "ok": r.ok, "lines": list(r.lines)}
                         for r in reports])
        else:
            click.echo("\n".join(check_lines(reports)))
        _exit_if(check_exit_code(reports))
    elif as_json:
        _print_json(channels_json(catalog))
    else:
        click.echo(channels_markdown(catalog) if markdown else channels_text(catalog))


@cli.command()
@click.option("--write", is_flag=True, help="Rewrite the files from wheels-index.toml.")
@click.option("--dir", "directory", default="constraints", show_default=True, metavar="DIR")
def constraints(write: bool, directory: str) -> None:
    """For maintainers, in a checkout: check (or --write) constraints/<channel>.txt against wheels-index.toml.

    Exits 1 when a file is out of date. An installed jetson-install needs none of these
    files: every environment it makes carries its own constraints file.
    """
    from jetson_install.cli.commands import constraint_files

    click.echo("\n".join(constraint_files(directory, write)))


def _install(target_id: str, given: Dict[str, Any], added: Optional["Addition"] = None) -> None:
    """`added`: what `add` asked for (in the JSON beside the install's own)."""
    from jetson_install.cli.commands import install_plan, preview
    from jetson_install.base.errors import EXIT_UNSUPPORTED
    from jetson_install.cli.render import plan_text

    extra = {"add": added.to_json()} if added is not None else {}
    the_plan = install_plan(_options(target_id, given), given["lock_file"], given["wheelhouse"], _rerun_command())
    if given["dry_run"] or not the_plan.supported:
        the_plan, data, warnings = preview(the_plan, given["dry_run"], given["as_json"])
        click.echo("".join(f"warning: {warning}\n" for warning in warnings), err=True, nl=False)
        _print_json({**data, **extra}) if given["as_json"] else click.echo(plan_text(the_plan))
        _exit_if(0 if the_plan.supported else EXIT_UNSUPPORTED)
        return
    if not given["yes"] and sys.stdin.isatty() and not given["as_json"]:
        click.echo(plan_text(the_plan), err=True)
        if not click.confirm("Proceed?", default=True, err=True):
            sys.exit(EXIT_INTERRUPTED)
    from jetson_install.running.install import install
    from jetson_install.base.logs import start_log
    from jetson_install.tools.progress import display_for
    from jetson_install.cli.render import install_lines

    log_file = start_log(target_id)
    result = install(the_plan, progress=display_for(sys.stderr), rerun=_rerun_command(), upgrade=given["upgrade"])
    if added is not None:
        result = added.result(result)
    if given["as_json"]:
        _print_json({**result.to_json(the_plan), "log": str(log_file), **extra})
    click.echo("\n".join(install_lines(result, the_plan, log_file)), err=True)
    _exit_if(result.exit_code)


@cli.command()
@click.argument("requirements", nargs=-1, metavar="REQUIREMENT...")
@click.option("--venv", metavar="DIR",
              help="The environment to add to (default: the one a target's install made at its default location).")
@click.option("--dry-run", is_flag=True, help="Print the plan of the new environment and change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Never prompt (prompts happen only on a terminal anyway).")
@_with("json")
def add(requirements: Tuple[str, ...], venv: Optional[str], dry_run: bool, yes: bool, as_json: bool) -> None:
    """Add packages to an environment, built as a new one beside it.

    REQUIREMENT... are package names (with a version), git URLs or project folders. The new
    environment is made by the command that made the old one, with what that one had added
    kept, and is switched in only if its doctor passes; the old one stays for rollback."""
    import os

    from jetson_install.cli.commands import addition
    from jetson_install.planning.fixes import Rerun

    flags = tuple(flag for flag, given in (("--dry-run", dry_run), ("--yes", yes), ("--json", as_json)) if given)
    made = addition(venv, requirements, flags, _rerun_command())
    click.echo(f"add: {', '.join(made.new)} to {made.link}" + (f" (kept: {', '.join(made.kept)})" if made.kept else "")
               + f"; a new environment from the command that made it: {Rerun(made.command)}", err=True)
    root = click.get_current_context().find_root()
    root.obj = list(made.command)  # a fix names the command that runs, as if typed
    command = cli.get_command(root, made.target)
    assert command is not None  # addition() checked the target is the catalog's
    here = os.getcwd()
    if made.cwd is not None and os.path.isdir(made.cwd):
        os.chdir(made.cwd)  # the recorded command's relative paths (--root, --python) mean what they meant
    try:
        with command.make_context(made.target, list(made.command[1:]), parent=root) as context:
            _install(made.target, context.params, made)
    finally:
        os.chdir(here)


@cli.command("lock")
@_with("json", "vendor-fallback", "allow-insecure-index", "default-index", "vendor-index", "ref", "source", "python",
       "l4t", "soc", "root", python={"help": "Lock for this interpreter on this machine (of the board's architecture) "
                                           "instead of the board's platform."},
       vendor_fallback={"help": "Lock the channel's documented fallback vendor source."})
@click.option("--python-version", metavar="X.Y", help="Lock for the board's platform with this Python (a board whose "
              "Python is not the channel's; its install then takes --python /usr/bin/pythonX.Y).")
@click.option("--output", "-o", metavar="FILE",
              help="Write the lock here (default: TARGET.lock); a target built from its source goes beside it.")
@_with("with")
@click.argument("target", required=False, default="obliteratus", metavar="[TARGET]")
def lock(**given: Any) -> None:
    """Resolve a board's whole environment for TARGET (default: obliteratus) into a hashed lock, on any machine."""
    from pathlib import Path

    from jetson_install.cli.commands import board_lock

    target = given["target"]
    result = board_lock(_options(target, given), given["python"], given["python_version"],
                        Path(given["output"] or f"{target}.lock"), _rerun_command())
    from jetson_install.cli.render import lock_lines

    if given["as_json"]:
        _print_json(result.to_json())
    click.echo("\n".join(lock_lines(result)), err=True)


@cli.command("wheelhouse")
@click.argument("directory", metavar="DIR")
@click.option("--lock", "lock_file", default="obliteratus.lock", show_default=True, metavar="FILE",
              help="The lock whose files to download.")
@click.option("--serve", is_flag=True,
              help="Then serve DIR to a fleet over HTTP until Ctrl-C (without --lock: DIR as it is).")
@click.option("--bind", default="0.0.0.0", show_default=True, metavar="ADDRESS", help="The address --serve listens on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="The port --serve listens on.")
@click.option("--tool-wheel", metavar="FILE", help="Also carry jetson-install (this wheel of it) and its own "
              "dependencies for the lock's board, to install the tool there with no network.")
@_with("default-index", default_index={"help": "With --tool-wheel: resolve the tool's dependencies here "
                                               "(default: uv's own index)."})
@click.option("--json", "as_json", is_flag=True, help="Print one JSON result object on stdout.")
def wheelhouse(directory: str, lock_file: str, serve: bool, bind: str, port: int, tool_wheel: Optional[str],
               default_index: Optional[str], as_json: bool) -> None:
    """Download every file of a lock into DIR, with a PEP 503 index beside them."""
    from pathlib import Path

    from jetson_install.cli.render import wheelhouse_lines

    where = Path(directory).absolute()
    given_lock = click.get_current_context().get_parameter_source("lock_file") != click.core.ParameterSource.DEFAULT
    if given_lock or not serve:
        from jetson_install.cli.commands import fill_wheelhouse

        result = fill_wheelhouse(Path(lock_file), where, tool_wheel, _given("default_index", default_index))
        if as_json:
            _print_json(result)
        click.echo("\n".join(wheelhouse_lines(result)), err=True)
    if serve:
        from jetson_install.fleet.wheelhouse_server import open_server, serving_lines, serving_url

        with open_server(where, bind, port, _rerun_command()) as server:
            if isinstance(sys.stderr, _QuietStream):
                # -q drops notes, but the address is what the user runs this for (port 0 picks it).
                sys.stderr.write_through(serving_url(bind, server.server_address[1]) + "\n")
            else:
                click.echo("\n".join(serving_lines(server, bind)), err=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                click.echo("stopped serving", err=True)


def _rerun_command() -> "Rerun":
    """The command as the user gave it (main's arguments), to run again with changes."""
    from jetson_install.planning.fixes import Rerun

    return Rerun(tuple(click.get_current_context().find_root().obj or ()))


@cli.command()
@_root_options
@click.option("--venv", metavar="DIR", help="Check this environment (default: the one a target's install made at its "
                                            "default location, OBLITERATUS' first).")
@click.option("--python", "python", metavar="PATH", help="Check this interpreter instead of an environment.")
@click.option("--json", "as_json", is_flag=True, help="Print the evidence JSON on stdout.")
@click.option("--evidence", metavar="FILE", help="Also write the evidence JSON to FILE.")
@click.option("--check", "only", metavar="ID", multiple=True, help="Run only this check (and what it needs); repeatable.")
@click.option("--no-gpu", is_flag=True, help="Run only the checks that need no GPU (what an install runs with --no-verify).")
@click.option("--list-checks", is_flag=True, help="List the check ids and exit.")
@click.option("--strict", is_flag=True, help="The gate: every check that applies must run and pass; a skip fails.")
@click.option("--preflight", is_flag=True,
              help="Expect CPU builds (an environment made with --preflight is checked so anyway).")
@click.option("--gate-evidence", metavar="FILE",
              help="Also write the jetson-runtime gate record (upstream's shape) to FILE; implies --strict.")
def doctor(root: str, l4t: Optional[str], soc: Optional[str], venv: Optional[str], python: Optional[str], as_json: bool,
           evidence: Optional[str], only: Tuple[str, ...], no_gpu: bool, list_checks: bool, strict: bool,
           gate_evidence: Optional[str], preflight: bool) -> None:
    """Prove torch.cuda and bitsandbytes run CUDA kernels; read-only."""
    from jetson_install.cli import commands

    if list_checks:
        from jetson_install.doctor import list_checks as checks_listed
        from jetson_install.cli.render import check_list

        if as_json:
            _print_json([{"id": check_id, "title": title, "required": required}
                         for check_id, title, required in checks_listed()])
        else:
            click.echo(check_list(checks_listed()))
        return
    interpreter, note = commands.doctor_interpreter(venv, python)
    if note:
        click.echo(f"note: {note}", err=True)
    run = commands.doctor(interpreter, _platform_options(root, l4t, soc), only,
                          strict or bool(gate_evidence), no_gpu, preflight, evidence, gate_evidence,
                          progress=lambda line: click.echo(line, err=True))
    if as_json:
        _print_json(run.evidence)
    else:
        from jetson_install.doctor import render_lines

        click.echo("\n".join(render_lines(run.report)))
    _exit_if(run.report.exit_code)


@cli.command()
@_root_options
@click.option("--base", metavar="IMAGE", help="Build on this image (default: the first one known to match the channel).")
@click.option("--output", metavar="FILE", help="Write the Dockerfile here (default: standard output).")
def dockerfile(root: str, l4t: Optional[str], soc: Optional[str], base: Optional[str], output: Optional[str]) -> None:
    """A Dockerfile: OBLITERATUS on an image whose CUDA torch matches this Jetson, kept as it is."""
    from pathlib import Path

    from jetson_install.cli.commands import dockerfile as make_dockerfile
    from jetson_install.fleet.container import write_dockerignore
    from jetson_install.base.outputs import write_output

    made = make_dockerfile(_platform_options(root, l4t, soc), base, str(_rerun_command()))
    if output is None:
        click.echo(made.text, nl=False)
        return
    context = Path(output).absolute().parent
    # The Dockerfile's folder is the build context it names: made here, as `docker build` needs it.
    context.mkdir(parents=True, exist_ok=True)
    write_output("--output", output, made.text)
    try:
        kept = write_dockerignore(context)
    except OSError as exc:
        kept = f"could not write {context / '.dockerignore'} ({exc.strerror}): the whole directory is the build context"
    if kept:
        click.echo(f"note: {kept}", err=True)
    click.echo(f"wrote {output} (FROM {made.base}); put jetson_install-{__version__}-py3-none-any.whl beside it "
               f"(pip wheel --no-deps -w {context} <jetson-install checkout>), then build it there: "
               f"cd {context} && docker build -t obliteratus-jetson .", err=True)


@cli.command("container-entrypoint", context_settings={"ignore_unknown_options": True})
@click.option("--venv", metavar="DIR", required=True, help="The environment the image was built with.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def container_entrypoint(venv: str, command: Tuple[str, ...]) -> None:
    """The image's entrypoint: refuse a host the image is not built for, run the strict doctor
    once (evidence for the HEALTHCHECK), then start COMMAND."""
    import os
    from pathlib import Path

    from jetson_install.cli.commands import container_start

    start = container_start(Path(venv), os.environ)
    click.echo("\n".join(start.lines), err=True)
    _exit_if(start.exit_code)
    if command:
        os.execvp(command[0], list(command))


@cli.group()
def evidence() -> None:
    """Read doctor evidence: check it is fresh and passed, or build the support table."""


_MAX_AGE_OPTION = click.option("--max-age", metavar="DAYS", type=click.FloatRange(min=0),
                               help="Evidence older than this is stale (default: upstream's maximum_evidence_age_days, 30).")


@evidence.command("check")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@_MAX_AGE_OPTION
@click.option("--require", "requirements", metavar="KEY=VALUE", multiple=True,
              help="A dotted path into the evidence and its required value, e.g. platform.channel=jp6-cu126.")
def evidence_check(files: Tuple[str, ...], max_age: Optional[float], requirements: Tuple[str, ...]) -> None:
    """Each FILE must be valid, passed, fresh and match every --require; one line per file."""
    from jetson_install.cli.commands import judged

    verdicts = judged(files, max_age, requirements)
    click.echo("\n".join(verdict.line() for verdict in verdicts))
    _exit_if(0 if all(verdict.ok for verdict in verdicts) else EXIT_FAILED)


@evidence.command("table")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@_MAX_AGE_OPTION
def evidence_table(files: Tuple[str, ...], max_age: Optional[float]) -> None:
    """The Markdown support table from fresh passing evidence; stale or failed listed apart."""
    from jetson_install.cli.commands import judged
    from jetson_install.fleet.evidence import support_table

    click.echo(support_table(judged(files, max_age)))


@cli.command()
@_root_options
@click.option("--evidence", "evidence_file", metavar="FILE",
              help="Doctor evidence that may grant `cuda` (default: the environment's own).")
@_MAX_AGE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the labels as JSON.")
def labels(root: str, l4t: Optional[str], soc: Optional[str], evidence_file: Optional[str], max_age: Optional[float], as_json: bool) -> None:
    """Runner labels for this Jetson, comma-separated (what a runner's --labels takes)."""
    from jetson_install.cli.commands import labels as runner_labels

    from jetson_install.cli.commands import default_environment

    environment, note = default_environment("labels") if evidence_file is None else (None, None)
    if note:
        click.echo(f"note: {note}", err=True)
    result = runner_labels(_platform_options(root, l4t, soc), evidence_file, max_age, environment)
    if as_json:
        _print_json(result.to_json())
        return
    click.echo(",".join(result.labels))
    click.echo(f"cuda: {'yes' if 'cuda' in result.labels else 'no'}: {result.cuda_reason}", err=True)


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the environments as JSON.")
def list_command(as_json: bool) -> None:
    """The environments jetson-install made: path, channel, torch build, last doctor result, size."""
    from jetson_install.envs.lifecycle import list_environments
    from jetson_install.cli.render import environments_lines

    listed = list_environments()
    if as_json:
        _print_json({"schema_version": 1, "environments": [entry.to_json() for entry in listed]})
        return
    click.echo("\n".join(environments_lines(listed)))


_LIFECYCLE_VENV = click.option("--venv", metavar="DIR",
                               help="The environment's location (default: the one a target's install made at its "
                                    "default location, OBLITERATUS' first).")


@cli.command()
@_LIFECYCLE_VENV
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def rollback(venv: Optional[str], as_json: bool) -> None:
    """Switch back to the kept previous environment, in one rename; run it again to undo."""
    from jetson_install.cli.commands import environment_link
    from jetson_install.envs.lifecycle import rollback as roll_back
    from jetson_install.cli.render import rollback_lines

    link, where, note = environment_link(venv, "rollback")
    if note:
        click.echo(f"note: {note}", err=True)
    result = roll_back(link, where)
    if as_json:
        _print_json(result.to_json())
    click.echo("\n".join(rollback_lines(result)), err=as_json)


@cli.command()
@_LIFECYCLE_VENV
@click.option("--yes", "-y", is_flag=True, help="Never prompt (prompts happen only on a terminal anyway).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def uninstall(venv: Optional[str], yes: bool, as_json: bool) -> None:
    """Remove an environment jetson-install made, with its kept previous one; nothing else."""
    from jetson_install.cli.commands import environment_link
    from jetson_install.envs.lifecycle import uninstall as remove
    from jetson_install.cli.render import uninstall_lines

    link, where, note = environment_link(venv, "uninstall")
    if note:
        click.echo(f"note: {note}", err=True)
    if not yes and sys.stdin.isatty() and not as_json:
        if not click.confirm(f"Remove {link} and the environments jetson-install made for it?", default=False,
                             err=True):
            sys.exit(EXIT_INTERRUPTED)
    result = remove(link, where)
    if as_json:
        _print_json(result.to_json())
    click.echo("\n".join(uninstall_lines(result)), err=as_json)


@cli.command()
@click.option("--dry-run", is_flag=True, help="Show what would be removed, and its size; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def clean(dry_run: bool, as_json: bool) -> None:
    """Remove the logs, the bitsandbytes build cache, the cache of interpreters' versions and
    what interrupted runs left; never an environment in use or its previous one, nor uv's own
    cache (`uv cache clean`)."""
    from jetson_install.envs.lifecycle import clean as clean_up
    from jetson_install.cli.render import clean_lines

    result = clean_up(dry_run)
    if as_json:
        _print_json(result.to_json())
    click.echo("\n".join(clean_lines(result)), err=as_json)


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
        sys.stderr = _QuietStream(sys.stderr)  # main() gives the real stream back


class _QuietStream:
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


def _verbosity_options() -> List[click.Parameter]:
    return [click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, is_eager=True, callback=_verbosity,
                         help="Print only errors and warnings on stderr (results still go to stdout)."),
            click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, is_eager=True, callback=_verbosity,
                         help="Also print every command jetson-install runs, and its output, as it comes.")]


def _add_verbosity(group: click.Group) -> None:
    """Every command takes -q and -v, declared here once; not the image's entrypoint, whose
    arguments after its own are the command it starts. (A target's commands get them when
    they are made, in _WithTargets.)"""
    options = _verbosity_options()
    group.params.extend(options)
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _add_verbosity(command)
        elif command.name != "container-entrypoint":
            command.params.extend(options)


_add_verbosity(cli)


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point: run the CLI and turn every known failure into one line and an exit code."""
    from jetson_install.base.redact import RedactingStream

    args = sys.argv[1:] if argv is None else argv
    # Every line printed, from any command or error path, has URL credentials masked; the
    # streams are given back afterwards, so a caller (a test, an embedding) keeps its own.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        sys.exit(_run(args))
    finally:
        sys.stdout, sys.stderr = streams


def _run(args: List[str]) -> int:
    as_json = "--json" in args
    if not args:
        # `jetson-install` alone: the help, not an error line; exit 2 all the same, so a script
        # whose command word came out empty does not pass (with every click version).
        click.echo(cli.get_help(click.Context(cli, info_name="jetson-install")))
        return EXIT_BAD_INPUT
    try:
        cli.main(args=args, prog_name="jetson-install", standalone_mode=False, obj=list(args))
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except _NO_ARGS_IS_HELP as exc:
        # A group alone (`jetson-install plan`): its help, as --help shows it, not an error line.
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(click.Context(cli)))
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        # One line and the help of the command that refused it, like every other bad input.
        context = getattr(exc, "ctx", None)
        help_command = f"{context.command_path if context is not None else 'jetson-install'} --help"
        _report_error(BadInput(exc.format_message(), fix=f"see its options: {help_command}"), as_json)
        return EXIT_BAD_INPUT
    except (click.Abort, KeyboardInterrupt):
        from jetson_install.planning.fixes import Rerun

        _report_error(JetsonInstallError("interrupted (Ctrl-C)", fix=f"run it again: {Rerun(tuple(args))}"), as_json)
        return EXIT_INTERRUPTED
    except JetsonInstallError as exc:
        _report_error(exc, as_json)
        return exc.exit_code
    except OSError as exc:
        from jetson_install.planning.fixes import fix_for_os_error, os_error_reason

        _report_error(JetsonInstallError(os_error_reason(exc), fix=fix_for_os_error(exc, "run the command again")),
                      as_json)
        return EXIT_FAILED
    return 0


# click 8.2 and newer raise it for a group given no command; older ones print the help and exit 0.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _report_error(exc: JetsonInstallError, as_json: bool) -> None:
    if as_json:
        # The one object stdout carries under --json when a command could not produce its own.
        _print_json({"schema_version": 1, "error": {"message": exc.message, "fix": exc.fix,
                                                    "exit_code": exc.exit_code}})
    click.echo(f"error: {exc.message}", err=True)
    if exc.fix:
        click.echo(f"  fix: {exc.fix}", err=True)
