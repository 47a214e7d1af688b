"""The command line: parse options, call one plain function per command, render its result.

Kept thin and cheap to import: `--help`, `--version` and `detect` load click and
the detection modules only (never requests, never anything that runs uv).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from jetson_install import __version__
from jetson_install.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, BadInput, JetsonInstallError

if TYPE_CHECKING:
    from pathlib import Path

    from jetson_install.catalog import Channel
    from jetson_install.identity import Resolution
    from jetson_install.plan import Plan
    from jetson_install.platform import Platform
    from jetson_install.preflight import Preflight

ROOT_HELP = "Read the platform from DIR instead of / (or sample:NAME, see `jetson-install samples`)."


def _root_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--l4t", "l4t", metavar="VERSION", envvar="JETSON_L4T_VERSION",
        help="Use this L4T release (e.g. 36.4.3) instead of what the root's files say "
             "(for containers whose release file is empty or missing).",
    )(command)
    return click.option("--root", default="/", envvar="JETSON_INSTALL_ROOT", metavar="DIR", help=ROOT_HELP)(command)


def _detect_platform(root: str, l4t: Optional[str]):
    from jetson_install.platform import L4TOverride, detect
    from jetson_install.samples import resolve_root

    override = None
    if l4t is not None:
        override = L4TOverride(l4t, _option_source("l4t", "JETSON_L4T_VERSION", "--l4t"))
    return detect(resolve_root(root, _option_source("root", "JETSON_INSTALL_ROOT", "--root")), override)


def _json_text(data: Any) -> str:
    import json

    from jetson_install.redact import redact_data

    return json.dumps(redact_data(data), indent=2) + "\n"


def _print_json(data: Any) -> None:
    click.echo(_json_text(data), nl=False)


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
    click.echo(f"next: see what an install would do: {_next_command('detect', ('plan', 'obliteratus'))}")


@cli.command()
def samples() -> None:
    """List the sample roots usable as --root sample:NAME."""
    from jetson_install.samples import sample_names

    for name in sample_names():
        click.echo(f"sample:{name}")


def _install_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--json", "as_json", is_flag=True, help="Print one JSON result object on stdout."),
        click.option("--no-verify", is_flag=True,
                     help="Skip the doctor's GPU checks (for image builds without GPU access); torch is still checked."),
        click.option("--cpu-index", metavar="URL",
                     help="With --preflight: an index with CPU builds of the channel's torch version."),
        click.option("--preflight", is_flag=True,
                     help="Any aarch64 machine: the channel's environment with CPU torch, checked for CPU; "
                          "never Jetson GPU evidence."),
        click.option("--ref", metavar="REF", help="Git tag, branch or commit of the source."),
        click.option("--source", metavar="PATH|URL", help="Install OBLITERATUS from this checkout or git URL."),
        click.option("--allow-insecure-index", is_flag=True, help="Accept plain-http indexes on remote hosts."),
        click.option("--vendor-fallback", is_flag=True,
                     help="Use the channel's documented fallback vendor source (when the first is down)."),
        click.option("--default-index", metavar="URL", envvar="JETSON_INSTALL_DEFAULT_INDEX",
                     help="Replace the general index (default: uv's own)."),
        click.option("--vendor-index", metavar="URL", envvar="JETSON_INSTALL_VENDOR_INDEX",
                     help="Replace the channel's vendor index (a mirror of the same builds)."),
        click.option("--python", "python", metavar="PATH", help="Use this interpreter (default: a system Python of the channel's version)."),
        click.option("--use-existing-torch", is_flag=True,
                     help="Keep the CUDA torch the interpreter already has (an L4T PyTorch image, a system install); "
                          "download no vendor build."),
        click.option("--venv", metavar="DIR", help="Environment location (default: a per-user data directory)."),
        click.option("--bitsandbytes", "bitsandbytes", metavar="build[=VERSION|PATH]",
                     help="Build bitsandbytes on this board for its GPU (where no Jetson build exists): the newest "
                          "release this torch accepts, a release, or a local checkout; cached per user."),
    ]
    for option in options:
        command = option(command)
    return _root_options(command)


def _option_source(name: str, env_name: str, flag: str) -> str:
    source = click.get_current_context().get_parameter_source(name)
    return env_name if source is not None and source.name == "ENVIRONMENT" else flag


def _build_plan(target: str, options: dict):
    from jetson_install.catalog import load_catalog
    from jetson_install.plan import make_plan
    from jetson_install.settings import load_index_settings

    platform = _preflight_platform(options) if options.get("preflight") else _detect_platform(options["root"], options["l4t"])
    settings = load_index_settings(
        options["vendor_index"], _option_source("vendor_index", "JETSON_INSTALL_VENDOR_INDEX", "--vendor-index"),
        options["default_index"], _option_source("default_index", "JETSON_INSTALL_DEFAULT_INDEX", "--default-index"),
        options["allow_insecure_index"],
    )
    venv = _venv_path(options["venv"]) if options["venv"] is not None else _default_venv(target)
    existing = None
    if options["use_existing_torch"]:
        from jetson_install.container import inspect_stack

        existing = inspect_stack(options["python"] or _python3())
    return make_plan(
        platform, load_catalog(), target, settings, venv.absolute(),
        interpreter=options["python"], source=options["source"], ref=options["ref"],
        verify=not options["no_verify"], fallback=options["vendor_fallback"], existing=existing,
        bitsandbytes=options.get("bitsandbytes"), preflight=options.get("preflight", False),
        cpu_index=_checked_cpu_index(options),
    )


def _preflight_platform(options: dict) -> Platform:
    """A preflight runs on aarch64 machines that are mostly not Jetsons: there the channel
    comes from --l4t, and the fix for a missing one says so."""
    from jetson_install.errors import NotAJetson

    try:
        return _detect_platform(options["root"], options["l4t"])
    except NotAJetson as exc:
        raise NotAJetson(exc.message, fix="name the Jetson release to preflight for: --l4t 36.4.3 "
                                          "(JetPack 6.2; see `jetson-install channels`)") from None


def _resolved(the_plan: Plan, where: Optional[str], python: str) -> Resolution:
    """The plan's vendor set as the index resolves it; an index that does not answer gets the
    whole commands that go around it (the fallback source, a mirror), as in an install."""
    from pathlib import Path

    from jetson_install import index
    from jetson_install.fixes import StepContext, index_down_fix

    try:
        return index.resolve(the_plan.vendor, where, python)
    except index.IndexUnreachable as exc:
        context = StepContext("vendor", _rerun_command(), where, Path(the_plan.venv + ".d"), "",
                              fallback=the_plan.fallback_location is not None
                              and the_plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index"))
        raise index.IndexUnreachable(exc.message, fix=index_down_fix(context)) from None


def _python3() -> str:
    """The interpreter an image or a system install carries torch in: python3 on PATH."""
    import shutil

    found = shutil.which("python3")
    if found is None:
        raise BadInput("--use-existing-torch: no python3 on PATH", fix="pass the interpreter that has torch: --python PATH")
    return found


def _venv_path(value: str) -> Path:
    """--venv as typed: an empty value or a control character (a newline from a script) is
    refused, never read as the default location or written into a path."""
    from pathlib import Path

    if not value.strip():
        raise BadInput("--venv is empty", fix="give the environment's location, e.g. --venv ~/obliteratus, or drop --venv")
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7f), None)
    if bad is not None:
        raise BadInput(f"--venv {value!r} contains the control character {bad!r}",
                       fix="give a location without control characters (a newline often comes from a script's variable)")
    return Path(value).expanduser()


def _checked_cpu_index(options: dict) -> Optional[str]:
    from jetson_install.settings import check_index_url

    cpu_index = options.get("cpu_index")
    if cpu_index:
        check_index_url(cpu_index, "--cpu-index", options["allow_insecure_index"])
    return cpu_index


def _doctor_preflight(environment: Path, channel: Optional[Channel], forced: bool) -> Optional[Preflight]:
    """The preflight profile an environment was made with, or the channel's with --preflight."""
    from jetson_install.environment import recorded_plan
    from jetson_install.preflight import Preflight

    recorded = (recorded_plan(environment) or {}).get("preflight")
    if isinstance(recorded, dict):
        return Preflight.from_json(recorded)
    return Preflight.for_channel(channel) if forced else None


def _default_venv(target: str) -> Path:
    from pathlib import Path

    import platformdirs

    return Path(platformdirs.user_data_dir("jetson-install")) / "envs" / target


@cli.group()
def plan() -> None:
    """Show what an install would do, changing nothing."""


@plan.command("obliteratus")
@_install_options
@click.option("--resolve", is_flag=True, help="Read the vendor index and show the set an install would take.")
def plan_obliteratus(**options: Any) -> None:
    """The ordered steps `jetson-install obliteratus` would take (offline unless --resolve)."""
    from jetson_install.errors import EXIT_UNSUPPORTED
    from jetson_install.render import plan_text

    the_plan = _build_plan("obliteratus", options)
    if options["resolve"] and the_plan.supported and the_plan.vendor is not None:
        from jetson_install import index
        from jetson_install.plan import resolved_plan

        vendor = the_plan.vendor
        where = the_plan.settings.default_index.value if vendor.default_index else vendor.index
        python_abi = the_plan.python_abi
        if the_plan.preflight is not None:  # resolved, as the install does, for the Python it would take
            from jetson_install.install import preflight_interpreter

            found = preflight_interpreter(the_plan)
            python_abi = found.abi if found is not None else python_abi
        the_plan = resolved_plan(the_plan, _resolved(the_plan, where, python_abi or "3"))
    if options["as_json"]:
        _print_json(the_plan.to_json())
    else:
        click.echo(plan_text(the_plan))
        if the_plan.supported:
            click.echo(_install_hint(the_plan))
    if not the_plan.supported:
        sys.exit(EXIT_UNSUPPORTED)


@cli.command()
@click.argument("channel_id", required=False, metavar="[CHANNEL]")
@click.option("--json", "as_json", is_flag=True, help="Print the channels as JSON.")
@click.option("--markdown", is_flag=True, help="Print the support table that README.md carries.")
@click.option("--check", is_flag=True, help="Read each channel's index: preferred set present, hashes unchanged, newer sets.")
@click.option("--vendor-index", metavar="URL", help="With --check: read this mirror instead of the channel's index.")
def channels(channel_id: Optional[str], as_json: bool, markdown: bool, check: bool, vendor_index: Optional[str]) -> None:
    """List the channels in wheels-index.toml (and validate the file)."""
    from jetson_install.catalog import load_catalog
    from jetson_install.render import channels_markdown, channels_text

    if as_json and markdown:
        raise BadInput("--json and --markdown were both given", fix="pass only one of them")
    catalog = load_catalog()
    if channel_id is not None and channel_id not in {c.id for c in catalog.channels}:
        raise BadInput(f"no channel {channel_id!r} in {catalog.path}", fix="list them: jetson-install channels")
    if (channel_id or vendor_index) and not check:
        raise BadInput("CHANNEL and --vendor-index go with --check", fix="jetson-install channels --check [CHANNEL]")
    if check:
        _check_channels(catalog, channel_id, vendor_index, as_json)
        return
    if markdown:
        click.echo(channels_markdown(catalog))
    elif as_json:
        _print_json([{"id": c.id, "title": c.title, "status": c.status, "reason": c.reason, "python": c.python,
                      "cuda": c.cuda, "vendor_sources": [s.location for s in c.sources], "pins": dict(c.pins),
                      "containers": [image.to_json() for image in c.containers],
                      "preferred": c.primary.preferred.name if c.primary else None,
                      "sets": [s.requirement_lines() for s in c.primary.sets] if c.primary else []}
                     for c in catalog.channels])
    else:
        click.echo(channels_text(catalog))
        click.echo(f"{catalog.path}: valid, {len(catalog.channels)} channels "
                   f"({sum(1 for c in catalog.channels if c.installable)} installable)")


def _check_channels(catalog: Any, channel_id: Optional[str], vendor_index: Optional[str], as_json: bool) -> None:
    from jetson_install import index
    from jetson_install.settings import check_index_url

    if vendor_index:
        check_index_url(vendor_index, "--vendor-index", allow_insecure=False)
    reports = []
    for channel in catalog.channels:
        if (channel_id and channel.id != channel_id) or not channel.installable:
            continue
        for source in channel.sources:
            if source.index is None:
                continue
            reports.append(index.check_source(channel.id, source, vendor_index or source.index, channel.python))
            if vendor_index:
                break  # a mirror stands for the channel's first index
    if as_json:
        _print_json([{"channel": r.channel, "index": r.index, "ok": r.ok, "lines": list(r.lines)} for r in reports])
    else:
        for report in reports:
            click.echo(f"{report.channel:15} {'ok  ' if report.ok else 'FAIL'} {report.index}")
            for line in report.lines:
                click.echo(f"{'':20} {line}")
    if not all(report.ok for report in reports):
        sys.exit(EXIT_FAILED)


@cli.command()
@click.option("--write", is_flag=True, help="Rewrite the files from wheels-index.toml.")
@click.option("--dir", "directory", default="constraints", show_default=True, metavar="DIR")
def constraints(write: bool, directory: str) -> None:
    """For maintainers, in a checkout: check (or --write) constraints/<channel>.txt against wheels-index.toml.

    Exits 1 when a file is out of date. An installed jetson-install needs none of these
    files: every environment it makes carries its own constraints file.
    """
    from pathlib import Path

    from jetson_install.catalog import load_catalog
    from jetson_install.constraints import stale_files, write_files
    catalog = load_catalog()
    target = Path(directory)
    if write:
        for name in write_files(catalog, target):
            click.echo(f"wrote {target / name}")
        return
    if not target.is_dir():
        raise BadInput(f"--dir {directory}: no such directory (`constraints` is a maintainer command for a "
                       "checkout of jetson-install; an installed one needs no constraints/ folder)",
                       fix="run it at the top of a jetson-install checkout, or pass --dir DIR")
    stale = stale_files(catalog, target)
    if stale:
        click.echo(f"error: out of date in {target}: {', '.join(stale)}", err=True)
        click.echo(f"  fix: jetson-install constraints --write --dir {directory}", err=True)
        sys.exit(EXIT_FAILED)
    click.echo(f"{target}: up to date with {catalog.path}")


@cli.command("obliteratus")
@_install_options
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option("--upgrade", is_flag=True, help="Read the vendor index again instead of reusing the recorded set.")
@click.option("--yes", "-y", is_flag=True, help="Never prompt (prompts happen only on a terminal anyway).")
@click.option("--lock", "lock_file", metavar="FILE", help="Install exactly this lock (`jetson-install lock`).")
@click.option("--wheelhouse", metavar="DIR|URL", help="Install the lock of this wheelhouse from it, with no other network.")
def obliteratus(**options: Any) -> None:
    """Install OBLITERATUS with the JetPack torch kept in place, then prove it works."""
    from jetson_install.errors import EXIT_UNSUPPORTED
    from jetson_install.render import plan_text

    if options["preflight"]:
        from jetson_install.preflight import require_aarch64

        require_aarch64()  # before anything else: no plan made here could run
    the_plan = _build_plan("obliteratus", options)
    if the_plan.supported and (options["lock_file"] or options["wheelhouse"]):
        from jetson_install.plan import with_lock

        the_plan = with_lock(the_plan, _lock_in_use(options, the_plan))
    if options["dry_run"] and the_plan.supported:
        from jetson_install.errors import StepFailed
        from jetson_install.install import check_before_install

        try:
            for warning in check_before_install(the_plan, dry_run=True).warnings:
                click.echo(f"warning: {warning}", err=True)
        except StepFailed as failure:
            # Not bad input: the preview still shows what would run where a Python is found.
            click.echo(f"warning: the install would stop at step '{failure.step}': {failure.message}; "
                       f"fix: {failure.fix}", err=True)
    if options["dry_run"] or not the_plan.supported:
        if options["as_json"]:
            data = the_plan.to_json()
            if the_plan.supported:
                from jetson_install.install import would_change

                data["would_change"], data["would_change_reason"] = would_change(the_plan)
            _print_json(data)
        else:
            click.echo(plan_text(the_plan))
        sys.exit(0 if the_plan.supported else EXIT_UNSUPPORTED)
    if not options["yes"] and sys.stdin.isatty() and not options["as_json"]:
        click.echo(plan_text(the_plan), err=True)
        if not click.confirm("Proceed?", default=True, err=True):
            sys.exit(EXIT_INTERRUPTED)
    from jetson_install.install import install
    from jetson_install.progress import display_for, steps_summary

    display = display_for(sys.stderr)
    log_file = _start_log("obliteratus")
    result = install(the_plan, progress=display, rerun=_rerun_command(), upgrade=options["upgrade"])
    if options["as_json"]:
        data = result.to_json(the_plan)
        data["log"] = str(log_file)
        _print_json(data)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if result.steps:
        click.echo(f"steps: {steps_summary(result.steps)}", err=True)
    if result.failed_step:
        click.echo(f"error: {result.message}", err=True)
        click.echo(f"  fix: {result.fix}", err=True)
        click.echo(f"  log: {log_file}", err=True)
    else:
        verb = "is already up to date" if result.status == "unchanged" else "is ready"
        what = "The OBLITERATUS preflight (CPU torch; not Jetson GPU support)" if the_plan.preflight is not None else "OBLITERATUS"
        click.echo(f"{what} {verb} in {result.venv}", err=True)
        from jetson_install.install import activate_command

        click.echo(f"  activate: {activate_command(result.venv)}", err=True)
        if result.evidence:
            click.echo(f"  evidence: {result.evidence}", err=True)
    sys.exit(result.exit_code)


def _lock_in_use(options: dict, the_plan: Any) -> Any:
    """The lock an install carries out, refused with one line when made for another board."""
    import hashlib
    import os
    from pathlib import Path

    from jetson_install.index import fetch_text
    from jetson_install.interpreters import inspect_interpreter
    from jetson_install.lock import WHEELHOUSE_LOCK, LockInUse, parse_lock, relocated, render_lock

    if options["lock_file"] and options["wheelhouse"]:
        raise BadInput("--lock and --wheelhouse were both given", fix="use one: a wheelhouse carries its own lock")
    if options["wheelhouse"]:
        place = options["wheelhouse"]
        base = place.rstrip("/") if "://" in place else Path(place).absolute().as_uri()
        location = f"{base}/{WHEELHOUSE_LOCK}"
        text = fetch_text(location)
        lock = relocated(parse_lock(text, f"--wheelhouse {place}: {WHEELHOUSE_LOCK}"), base)
        flag = f"--wheelhouse {place}"
    else:
        location = str(Path(options["lock_file"]).absolute())
        try:
            text = Path(location).read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"--lock {options['lock_file']}: {exc.strerror or exc}",
                           fix="pass the file `jetson-install lock --output FILE` wrote") from None
        lock = parse_lock(text, f"--lock {options['lock_file']}")
        flag = f"--lock {options['lock_file']}"
    python = inspect_interpreter(the_plan.interpreter).abi if the_plan.interpreter else the_plan.python_abi
    from jetson_install.lock import lock_mismatch

    mismatch = lock_mismatch(lock, the_plan.channel.id if the_plan.channel else None, python, os.uname().machine)
    if mismatch:
        raise BadInput(f"{flag}: {mismatch}",
                       fix="make a lock for this board: jetson-install lock --root / --output FILE")
    return LockInUse(lock, location, hashlib.sha256(text.encode("utf-8")).hexdigest(), render_lock(lock))


@cli.command("lock")
@_root_options
@click.option("--output", "-o", default="obliteratus.lock", show_default=True, metavar="FILE",
              help="Write the lock here; the built OBLITERATUS wheel goes beside it.")
@click.option("--python", "python", metavar="PATH",
              help="Lock for this interpreter on this machine instead of the board's platform.")
@click.option("--source", metavar="PATH|URL", help="Build OBLITERATUS from this checkout or git URL.")
@click.option("--ref", metavar="REF", help="Git tag, branch or commit of the source.")
@click.option("--vendor-index", metavar="URL", envvar="JETSON_INSTALL_VENDOR_INDEX",
              help="Replace the channel's vendor index (a mirror of the same builds).")
@click.option("--default-index", metavar="URL", envvar="JETSON_INSTALL_DEFAULT_INDEX",
              help="Replace the general index (default: uv's own).")
@click.option("--allow-insecure-index", is_flag=True, help="Accept plain-http indexes on remote hosts.")
@click.option("--vendor-fallback", is_flag=True, help="Lock the channel's documented fallback vendor source.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON result object on stdout.")
def lock(**options: Any) -> None:
    """Resolve a board's whole environment into a hashed lock, on any machine."""
    import os
    from pathlib import Path

    from jetson_install.errors import Unsupported
    from jetson_install.interpreters import inspect_interpreter
    from jetson_install.lock import LockTarget, make_lock, python_platform

    options.update(venv=None, no_verify=True, use_existing_torch=False)
    the_plan = _build_plan("obliteratus", {**options, "python": None})
    if not the_plan.supported or the_plan.vendor is None or the_plan.channel is None:
        raise Unsupported(the_plan.reason or "no vendor source for this board", fix=the_plan.remedy or None)
    if options["python"]:
        interpreter = inspect_interpreter(options["python"])
        target = LockTarget(interpreter.abi, os.uname().machine, "native", interpreter.path)
    else:
        arch = the_plan.platform.arch or "aarch64"
        target = LockTarget(the_plan.channel.python, arch, python_platform(arch, the_plan.platform.ubuntu))
    from jetson_install import index
    from jetson_install.plan import resolved_plan

    vendor = the_plan.vendor
    where = the_plan.settings.default_index.value if vendor.default_index else vendor.index
    resolution = _resolved(the_plan, where, target.python)
    the_plan = resolved_plan(the_plan, resolution)
    result = make_lock(the_plan.channel.id, target, resolution, where, vendor.companions, the_plan.constraints,
                       the_plan.requirement, the_plan.settings.default_index.value, Path(options["output"]))
    if options["as_json"]:
        _print_json(result.to_json())
    built = result.lock.from_source
    click.echo(f"locked {len(result.lock.entries)} files for {target.arch}/Python {target.python} "
               f"(channel {result.lock.channel}) in {result.path}", err=True)
    click.echo(f"  OBLITERATUS wheel: {result.wheel} (commit {result.lock.source_commit or 'none'})", err=True)
    if built:
        click.echo(f"  built from source on the board: {', '.join(built)}", err=True)
    click.echo(f"  install: jetson-install obliteratus --lock {result.path}", err=True)


@cli.command("wheelhouse")
@click.argument("directory", metavar="DIR")
@click.option("--lock", "lock_file", default="obliteratus.lock", show_default=True, metavar="FILE",
              help="The lock whose files to download.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON result object on stdout.")
def wheelhouse(directory: str, lock_file: str, as_json: bool) -> None:
    """Download every file of a lock into DIR, with a PEP 503 index beside them."""
    from pathlib import Path

    from jetson_install.lock import fill_wheelhouse, read_lock

    result = fill_wheelhouse(read_lock(Path(lock_file)), Path(directory).absolute())
    if as_json:
        _print_json(result)
    click.echo(f"{result['files']} files in {result['directory']} ({result['downloaded_bytes']} bytes downloaded)",
               err=True)
    click.echo(f"  install offline: jetson-install obliteratus --wheelhouse {result['directory']}", err=True)
    click.echo(f"  serve to a fleet: python3 -m http.server --directory {result['directory']}, then "
               "--wheelhouse http://HOST:8000/", err=True)


def _install_hint(the_plan: Plan) -> str:
    """What to run next after a plan, and where: a preview made for another machine says so."""
    import os

    here = os.uname().machine
    if the_plan.preflight is not None and here != "aarch64":
        command = _next_command("plan", ("obliteratus",), drop=("obliteratus",), only_here=("--resolve",))
        return f"next: on an aarch64 machine (a hosted ARM runner, or the Jetson), install it: {command}"
    if the_plan.preflight is None and the_plan.platform.arch != here:
        command = _next_command("plan", ("obliteratus",), drop=("obliteratus",), only_here=("--resolve",),
                                elsewhere=("--root",))
        return f"next: on the {the_plan.platform.arch} board itself, install it: {command}"
    return f"next: install it: {_next_command('plan', ('obliteratus',), drop=('obliteratus',), only_here=('--resolve',))}"


def _next_command(command: str, replacement: tuple, drop: tuple = (), only_here: tuple = (),
                  elsewhere: tuple = ()) -> str:
    """The command the user typed, with `command` (and the words in `drop` right after it)
    replaced, without the flags `only_here` that only it takes, and without the options
    `elsewhere` (with their values) that only make sense on this machine: what to run next."""
    from jetson_install.fixes import Rerun

    args: list = []
    words = iter(sys.argv[1:])
    for word in words:
        if word in elsewhere:
            next(words, None)  # its value
        elif word not in only_here and word.split("=", 1)[0] not in elsewhere:
            args.append(word)
    if command in args:
        at = args.index(command)
        end = at + 1 + sum(1 for word in drop if args[at + 1:at + 2] == [word])
        args[at:end] = replacement
    return str(Rerun(tuple(args)))


def _rerun_command():
    from jetson_install.fixes import Rerun

    return Rerun(tuple(sys.argv[1:]))


def _start_log(command: str) -> Path:
    """Log every subprocess and its output to a file in the per-user log directory."""
    from pathlib import Path

    import logging
    import os
    import time

    import platformdirs

    from jetson_install.redact import RedactingFormatter

    # Logs hold command lines and uv's output: private to the user, and redacted all the same.
    directory = Path(platformdirs.user_log_dir("jetson-install"))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    path = directory / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    path.chmod(0o600)
    handler = logging.FileHandler(path)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("jetson_install")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    return path


@cli.command()
@_root_options
@click.option("--venv", metavar="DIR", help="Check this environment (default: the one `jetson-install obliteratus` made).")
@click.option("--python", "python", metavar="PATH", help="Check this interpreter instead of an environment.")
@click.option("--json", "as_json", is_flag=True, help="Print the evidence JSON on stdout.")
@click.option("--evidence", metavar="FILE", help="Also write the evidence JSON to FILE.")
@click.option("--check", "only", metavar="ID", multiple=True, help="Run only this check (and what it needs); repeatable.")
@click.option("--list-checks", is_flag=True, help="List the check ids and exit.")
@click.option("--strict", is_flag=True, help="The gate: every check that applies must run and pass; a skip fails.")
@click.option("--preflight", is_flag=True,
              help="Expect CPU builds (an environment made with --preflight is checked so anyway).")
@click.option("--gate-evidence", metavar="FILE",
              help="Also write the jetson-runtime gate record (upstream's shape) to FILE; implies --strict.")
def doctor(root: str, l4t: Optional[str], venv: Optional[str], python: Optional[str], as_json: bool,
           evidence: Optional[str], only: tuple, list_checks: bool, strict: bool, gate_evidence: Optional[str],
           preflight: bool) -> None:
    """Prove torch.cuda and bitsandbytes run CUDA kernels; read-only."""
    from pathlib import Path

    from jetson_install import doctor as doctor_module

    if list_checks:
        checks = doctor_module.list_checks()
        if as_json:
            _print_json([{"id": check_id, "title": title, "required": required} for check_id, title, required in checks])
        else:
            for check_id, title, required in checks:
                click.echo(f"{check_id:14} {'required' if required else 'optional':9} {title}")
        return
    if venv and python:
        raise BadInput("--venv and --python were both given", fix="pass only one of them")
    interpreter = python or str((_venv_path(venv) if venv is not None else _default_venv("obliteratus")) / "bin" / "python")
    if not python and not Path(interpreter).exists():
        raise BadInput(f"no environment at {Path(interpreter).parent.parent}",
                       fix="pass --venv DIR or --python PATH, or install first: jetson-install obliteratus")
    for option, path in (("--evidence", evidence), ("--gate-evidence", gate_evidence)):
        if path and not Path(path).absolute().parent.is_dir():
            raise BadInput(f"{option} {path}: its directory does not exist",
                           fix=f"mkdir -p {Path(path).absolute().parent}, or pass another file")
    from jetson_install.environment import recorded_doctor_inputs, recorded_plan

    platform, channel = _platform_and_channel(root, l4t)
    environment = Path(interpreter).parent.parent
    channel, vendor = recorded_doctor_inputs(environment, channel)
    from jetson_install.source_identity import recorded_commit

    report = doctor_module.run_doctor(interpreter, platform=platform, channel=channel, vendor=vendor, only=only,
                                      strict=strict or bool(gate_evidence),
                                      progress=lambda line: click.echo(line, err=True),
                                      source_commit=recorded_commit((recorded_plan(environment) or {}).get("source")),
                                      preflight=_doctor_preflight(environment, channel, preflight))
    outputs = [("--evidence", evidence, _json_text(report.to_json()))]
    if gate_evidence:
        import json
        import os

        from jetson_install.evidence import gate_record
        from jetson_install.redact import redact_data

        # Upstream's gate records GITHUB_SHA, or "local" outside Actions, sorted and indented.
        record = gate_record(report.to_json(), report.exit_code, os.environ.get("GITHUB_SHA") or "local")
        outputs.append(("--gate-evidence", gate_evidence,
                        json.dumps(redact_data(record), indent=2, sort_keys=True) + "\n"))
    for option, path, text in outputs:
        if path:
            _write_output(option, path, text)
    if as_json:
        _print_json(report.to_json())
    else:
        click.echo("\n".join(doctor_module.render_lines(report)))
    sys.exit(report.exit_code)


def _write_output(option: str, path: str, text: str) -> None:
    """Write what an option asked for; a path that cannot be written is bad input, not a traceback."""
    from pathlib import Path

    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write it ({exc.strerror})",
                       fix="pass a file in an existing, writable directory") from None


@cli.command()
@_root_options
@click.option("--base", metavar="IMAGE", help="Build on this image (default: the first one known to match the channel).")
@click.option("--output", metavar="FILE", help="Write the Dockerfile here (default: standard output).")
def dockerfile(root: str, l4t: Optional[str], base: Optional[str], output: Optional[str]) -> None:
    """A Dockerfile: OBLITERATUS on an image whose CUDA torch matches this Jetson, kept as it is."""
    from pathlib import Path

    from jetson_install.catalog import load_catalog
    from jetson_install.container import dockerfile_text
    from jetson_install.errors import Unsupported

    platform = _detect_platform(root, l4t)
    match = load_catalog().match(platform)
    if match.channel is None:
        raise Unsupported(match.reason, fix=match.remedy)
    if not match.channel.installable:
        # The image's own install step would refuse the channel: the build could never pass.
        raise Unsupported(f"unsupported: {match.channel.reason}", fix=match.channel.remedy or None)
    text = dockerfile_text(platform, match.channel, base, str(_rerun_command()))
    if output is None:
        click.echo(text, nl=False)
        return
    _write_output("--output", output, text)
    context = Path(output).absolute().parent
    click.echo(f"wrote {output} (FROM {base or match.channel.containers[0].image}); put "
               f"jetson_install-{__version__}-py3-none-any.whl beside it (pip wheel --no-deps -w {context} "
               f"<jetson-install checkout>), then build it there: cd {context} && docker build -t obliteratus-jetson .",
               err=True)


@cli.command("container-entrypoint", context_settings={"ignore_unknown_options": True})
@click.option("--venv", metavar="DIR", required=True, help="The environment the image was built with.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def container_entrypoint(venv: str, command: tuple) -> None:
    """The image's entrypoint: refuse a host the image is not built for, run the strict doctor
    once (evidence for the HEALTHCHECK), then start COMMAND."""
    import os
    from pathlib import Path

    from jetson_install import doctor as doctor_module
    from jetson_install.catalog import load_catalog
    from jetson_install.container import START_EVIDENCE, START_STATUS, host_facts, host_mismatch
    from jetson_install.environment import recorded_doctor_inputs
    from jetson_install.errors import EXIT_UNSUPPORTED
    from jetson_install.platform import L4TOverride, detect

    status = Path(START_STATUS)
    status.parent.mkdir(parents=True, exist_ok=True)
    host = host_facts(Path("/"), os.environ)
    mismatch = host_mismatch(host, os.environ)
    platform = detect(Path("/"), L4TOverride(str(host.l4t), host.l4t_source)) if mismatch is None else None
    channel = load_catalog().match(platform).channel if platform is not None else None
    built_channel = os.environ.get("JETSON_INSTALL_IMAGE_CHANNEL", "")
    if mismatch is None and (channel is None or channel.id != built_channel):
        mismatch = (f"this image is built for channel {built_channel}, and the host's L4T R{host.l4t} "
                    f"({host.l4t_source}) is {'channel ' + channel.id if channel else 'in no channel'}",
                    "build the image for this host: run `jetson-install dockerfile` on it")
    if mismatch is not None:
        status.write_text("refused\n")
        click.echo(f"error: {mismatch[0]}", err=True)
        click.echo(f"  fix: {mismatch[1]}", err=True)
        sys.exit(EXIT_UNSUPPORTED)
    channel, vendor = recorded_doctor_inputs(Path(venv), channel)
    report = doctor_module.run_doctor(str(Path(venv) / "bin" / "python"), platform=platform, channel=channel,
                                      vendor=vendor, strict=True)
    Path(START_EVIDENCE).write_text(_json_text(report.to_json()))
    status.write_text(("passed" if report.passed else "failed") + "\n")
    if not report.passed:
        click.echo("\n".join(doctor_module.render_lines(report)), err=True)
        click.echo(f"error: the strict doctor did not pass on this device (evidence: {START_EVIDENCE})", err=True)
        sys.exit(report.exit_code)
    click.echo(f"jetson-install: host L4T R{host.l4t} matches the image; strict doctor passed "
               f"(evidence: {START_EVIDENCE})", err=True)
    if command:
        os.execvp(command[0], list(command))


@cli.group()
def evidence() -> None:
    """Read doctor evidence: check it is fresh and passed, or build the support table."""


def _judged(files: tuple, max_age: Optional[float], requirements: tuple = ()) -> list:
    from jetson_install.evidence import DEFAULT_MAX_AGE_DAYS, judge, load, parse_requirement

    if max_age is None:
        max_age = DEFAULT_MAX_AGE_DAYS

    wanted = [parse_requirement(text) for text in requirements]
    # Every file is read first: an unreadable one is bad input (exit 2), before any verdict.
    loaded = [(path, load(path)) for path in files]
    return [judge(path, data, max_age_days=max_age, requirements=wanted) for path, data in loaded]


_MAX_AGE_OPTION = click.option("--max-age", metavar="DAYS", type=click.FloatRange(min=0),
                               help="Evidence older than this is stale (default: upstream's maximum_evidence_age_days, 30).")


@evidence.command("check")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@_MAX_AGE_OPTION
@click.option("--require", "requirements", metavar="KEY=VALUE", multiple=True,
              help="A dotted path into the evidence and its required value, e.g. platform.channel=jp6-cu126.")
def evidence_check(files: tuple, max_age: Optional[float], requirements: tuple) -> None:
    """Each FILE must be valid, passed, fresh and match every --require; one line per file."""
    verdicts = _judged(files, max_age, requirements)
    for verdict in verdicts:
        click.echo(verdict.line())
    sys.exit(0 if all(verdict.ok for verdict in verdicts) else EXIT_FAILED)


@evidence.command("table")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@_MAX_AGE_OPTION
def evidence_table(files: tuple, max_age: Optional[float]) -> None:
    """The Markdown support table from fresh passing evidence; stale or failed listed apart."""
    from jetson_install.evidence import support_table

    click.echo(support_table(_judged(files, max_age)))


@cli.command()
@_root_options
@click.option("--evidence", "evidence_file", metavar="FILE",
              help="Doctor evidence that may grant `cuda` (default: the environment's own).")
@_MAX_AGE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the labels as JSON.")
def labels(root: str, l4t: Optional[str], evidence_file: Optional[str], max_age: Optional[float], as_json: bool) -> None:
    """Runner labels for this Jetson, comma-separated (what a runner's --labels takes)."""
    from jetson_install.labels import runner_labels
    from jetson_install.plan import EVIDENCE_FILE, STATE_DIR

    platform = _detect_platform(root, l4t)
    if evidence_file is None:
        own = _default_venv("obliteratus") / STATE_DIR / EVIDENCE_FILE
        evidence_file = str(own) if own.is_file() else None
    verdict = _judged((evidence_file,), max_age)[0] if evidence_file else None
    result = runner_labels(platform, verdict)
    if as_json:
        _print_json(result.to_json())
        return
    click.echo(",".join(result.labels))
    click.echo(f"cuda: {'yes' if 'cuda' in result.labels else 'no'}: {result.cuda_reason}", err=True)


def _platform_and_channel(root: str, l4t: Optional[str]):
    """The platform and its channel, or (None, None) off a Jetson: doctor still checks torch there."""
    from jetson_install.catalog import load_catalog
    from jetson_install.errors import NotAJetson

    try:
        platform = _detect_platform(root, l4t)
    except NotAJetson:
        return None, None
    return platform, load_catalog().match(platform).channel


def main(argv: Optional[list] = None) -> None:
    """Entry point: run the CLI and turn every known failure into one line and an exit code."""
    args = sys.argv[1:] if argv is None else argv
    from jetson_install.redact import RedactingStream

    # Every line printed, from any command or error path, has URL credentials masked; the
    # streams are put back after, for a caller that runs main() in its own process.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        cli.main(args=args, prog_name="jetson-install", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        # One line and the help of the command that refused it, like every other bad input.
        context = getattr(exc, "ctx", None)
        help_command = f"{context.command_path if context is not None else 'jetson-install'} --help"
        _report_error(BadInput(exc.format_message(), fix=f"see its options: {help_command}"),
                      as_json="--json" in args)
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
    except OSError as exc:
        from jetson_install.fixes import fix_for_os_error, os_error_reason

        _report_error(JetsonInstallError(os_error_reason(exc), fix=fix_for_os_error(exc, "run the command again")),
                      as_json="--json" in args)
        sys.exit(EXIT_FAILED)
    finally:
        sys.stdout, sys.stderr = streams


def _error_json(message: str, fix: Optional[str], exit_code: int) -> dict:
    """The one object stdout carries under --json when a command could not produce its own."""
    return {"schema_version": 1, "error": {"message": message, "fix": fix, "exit_code": exit_code}}


def _report_error(exc: JetsonInstallError, as_json: bool) -> None:
    if as_json:
        _print_json(_error_json(exc.message, exc.fix, exc.exit_code))
    click.echo(f"error: {exc.message}", err=True)
    if exc.fix:
        click.echo(f"  fix: {exc.fix}", err=True)
