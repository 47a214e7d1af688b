"""The command line's declarations: each option and argument once (the table of those several
commands take, and each command's whole set, in the order its --help lists them); and what a
command line gave, read back as the values cli/commands/ takes (the groups, and -q and -v, are
cli/groups.py's). What only a running command needs (the values' module, the log, the
fixes) is imported where it is used: `--help` loads none of it (see cli/main.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import click

from jetson_install.base.errors import BadInput
from jetson_install.base.sourced import Sourced

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from jetson_install.cli.commands.given import InstallOptions, PlatformOptions
    from jetson_install.planning.rerun import Rerun

__all__ = ["OPTIONS", "INSTALL_OPTIONS", "with_options", "given", "platform_options", "install_options", "parsed", "typed",
           "given_on_command_line", "WITH_PLAN", "INSTALL", "PLAN", "PLAN_ADD", "PATHS", "OUTDATED", "DETECT", "CHANNELS", "CONSTRAINTS", "EXPORT", "ADD", "LOCK",
           "WHEELHOUSE", "DOCTOR",
           "DOCKERFILE", "CONTAINER_ENTRYPOINT", "EVIDENCE_CHECK", "EVIDENCE_TABLE", "LABELS", "LIST", "ROLLBACK",
           "UNINSTALL", "CLEAN"]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

#: A word click would take as an option's value although it is an option (`--yes`, `-q`); a
#: number (`-1`) and `-` (stdin) are values.
_OPTION_LIKE = re.compile(r"-[-A-Za-z]")


class _Option(click.Option):
    """An option whose value, when typed, is never another option: click takes the next word
    whatever it is, so `--venv --yes` made ./--yes and ./--yes.d/ (issue 41); as uv (clap)
    does, such a value is refused, and a path that starts with '-' is given as ./-NAME."""

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        if not self.is_flag and not self.count and \
                ctx.get_parameter_source(self.name or "") == click.core.ParameterSource.COMMANDLINE:
            for one in value if self.multiple else (value,):
                if isinstance(one, str) and _OPTION_LIKE.match(one):
                    raise BadInput(f"{self.opts[0]} {one!r}: {one.split('=', 1)[0]} is an option, not "
                                   f"{self.opts[0]}'s value", fix=self._value_fix(one))
        return super().process_value(ctx, value)

    def _value_fix(self, given: str) -> str:
        name, metavar = self.opts[0], self.metavar or "VALUE"
        fix = f"give {name} its {metavar} before the next option"
        if any(word in metavar for word in ("DIR", "PATH", "FILE")):
            fix += f" (one whose name starts with '-' as ./{given}: {name} ./{given})"
        return fix


def _option(*declarations: str, **settings: Any) -> Decorator:
    return click.option(*declarations, cls=_Option, **settings)


ROOT_HELP = ("Read the platform from DIR instead of / (or sample:NAME, see `jetson-install samples`); its files are "
             "read, never run: the board's programs that run (its CUDA's ptxas) are this machine's.")


def _complete_root(context: click.Context, parameter: click.Parameter, incomplete: str) -> List[CompletionItem]:
    """--root's completions: the sample roots (`sample:NAME`), and folders."""
    # Only a shell's completion request runs this: click imports its completion module then
    # (click/core.py), and so does this, with the samples' (`--help` and `--version` load neither).
    from click.shell_completion import CompletionItem

    from jetson_install.board.samples import PREFIX as SAMPLE_PREFIX
    from jetson_install.board.samples import sample_names

    samples = [CompletionItem(SAMPLE_PREFIX + name) for name in sample_names()
               if (SAMPLE_PREFIX + name).startswith(incomplete)]
    if incomplete.startswith(SAMPLE_PREFIX):
        return samples
    # Folders first: click's bash script offers them only where no sample matches.
    return [CompletionItem(incomplete, type="dir"), *samples]


# Each option once: what it is called, and how click takes it; commands name the ones they take.
OPTIONS: Dict[str, Tuple[Tuple[str, ...], Dict[str, Any]]] = {
    "root": (("--root",), dict(default="/", envvar="JETSON_INSTALL_ROOT", metavar="DIR", help=ROOT_HELP,
                               shell_complete=_complete_root)),
    "l4t": (("--l4t", "l4t"), dict(metavar="VERSION", envvar="JETSON_L4T_VERSION",
                                   help="Use this L4T release (e.g. 36.4.3) instead of what the root's files say "
                                        "(for containers whose release file is empty or missing).")),
    "soc": (("--soc", "soc"), dict(metavar="SOC", envvar="JETSON_INSTALL_SOC",
                                   help="Use this SoC (tegra264 Thor, tegra234 Orin) where the device tree cannot be "
                                        "read (containers); it tells Thor from Orin on L4T R39.")),
    "json": (("--json", "as_json"), dict(is_flag=True, help="Print one JSON object on stdout.")),
    "no-verify": (("--no-verify",), dict(is_flag=True, help="Skip the doctor's GPU checks (for image builds without "
                                                            "GPU access); torch is still checked.")),
    "cpu-index": (("--cpu-index",), dict(metavar="URL", help="With --preflight: an index with CPU builds of the "
                                                             "channel's torch version.")),
    "preflight": (("--preflight",), dict(is_flag=True, help="Any aarch64 machine: the channel's environment with CPU "
                                                            "torch, checked for CPU; never Jetson GPU evidence.")),
    "ref": (("--ref",), dict(metavar="REF", help="Git tag, branch or commit of --source.")),
    "source": (("--source",), dict(metavar="PATH|URL", help="OBLITERATUS from this checkout or git URL (a target with "
                                                            "a project of its own; torch has none: --with adds one).")),
    "allow-insecure-index": (("--allow-insecure-index",), dict(is_flag=True, help="Accept plain-http indexes on "
                                                                                  "remote hosts.")),
    "vendor-fallback": (("--vendor-fallback",), dict(is_flag=True, help="Use the channel's documented fallback vendor "
                                                                        "source (when the first is down).")),
    "default-index": (("--default-index",), dict(metavar="URL", envvar="JETSON_INSTALL_DEFAULT_INDEX",
                                                 help="Replace the general index (default: uv's own).")),
    "vendor-index": (("--vendor-index",), dict(metavar="URL", envvar="JETSON_INSTALL_VENDOR_INDEX",
                                               help="Replace the channel's vendor index (a mirror of the same builds).")),
    "mirror": (("--mirror", "mirrors"), dict(multiple=True, metavar="URL", help="Also look for the recorded vendor "
                                             "builds here (an index, or oci://HOST/REPOSITORY[:TAG], a registry), by "
                                             "sha256, after the vendor index; repeatable.")),
    "python": (("--python", "python"), dict(metavar="PATH", help="Use this interpreter (default: a system Python of "
                                                                 "the channel's version).")),
    "use-existing-torch": (("--use-existing-torch",), dict(is_flag=True, help="Keep the CUDA torch the interpreter "
                                                           "already has (an L4T PyTorch image, a system install); "
                                                           "download no vendor build.")),
    "with": (("--with", "added"), dict(multiple=True, metavar="REQUIREMENT", help="Also install this (a package "
                                       "name, a git URL or a project folder) under the stack's constraints; "
                                       "repeatable. A re-run keeps what an environment was given.")),
    "check-command": (("--check-command", "check_commands"), dict(
        multiple=True, metavar="CMD", help="Also run this command in the new environment when checking it and "
        "in its doctor, e.g. a --with project's own smoke test; a first word without a slash is the "
        "environment's own program (`python`, `yolo`); repeatable. "
        "A re-run keeps what an environment was given.")),
    "venv": (("--venv",), dict(metavar="DIR", help="Environment location (default: a per-user data directory).")),
    "dry-run": (("--dry-run",), dict(is_flag=True, help="Print the plan and change nothing.")),
    "yes": (("--yes", "-y"), dict(is_flag=True, help="Never prompt (prompts happen only on a terminal anyway).")),
    "max-age": (("--max-age",), dict(metavar="DAYS", type=click.FloatRange(min=0), help="Evidence older than this is "
                                     "stale (default: upstream's maximum_evidence_age_days, 30).")),
    "plan-file": (("--plan", "plan_file"), dict(
        metavar="FILE", help="Run exactly the plan `jetson-install plan ... --out FILE` saved, or refuse with the "
                             "reason (another board, catalog, environment or source; a vendor set no longer served).")),
    "detailed-exitcode": (("--detailed-exitcode",), dict(
        is_flag=True, help="Exit 6 where the environment changed, or with --dry-run would change; 0 where nothing "
                           "did or would (for Ansible's `changed` and scripts).")),
    "bitsandbytes": (("--bitsandbytes", "bitsandbytes"), dict(
        metavar="build[=VERSION|PATH]", help="Build bitsandbytes on this board for its GPU (where no Jetson build "
                                             "exists): the newest release this torch accepts, a release, or a local "
                                             "checkout; cached per user.")),
}
#: The variables options read: as much the user's input as the options themselves.
ENVIRONMENT_VARIABLES = tuple(spec["envvar"] for _, spec in OPTIONS.values() if "envvar" in spec)
INSTALL_OPTIONS = ("json", "no-verify", "cpu-index", "preflight", "with", "check-command", "ref", "source", "allow-insecure-index",
                   "vendor-fallback",
                   "default-index", "vendor-index", "mirror", "python", "use-existing-torch", "venv", "bitsandbytes", "l4t", "soc", "root")


def with_options(*names: str, **changed: Dict[str, Any]) -> Decorator:
    """The options `names` from the table; `changed` replaces some of one's settings."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            declarations, settings = OPTIONS[name]
            command = _option(*declarations, **{**settings, **changed.get(name.replace("-", "_"), {})})(command)
        return command
    return decorate


def _stacked(*decorators: Decorator) -> Decorator:
    """The decorators as if written above a command, first on top (the top one's first in --help)."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command
    return decorate


_ROOT = with_options("l4t", "soc", "root")
_LIFECYCLE_VENV = with_options("venv", venv={"help": "The environment's location (default: the one a target's install "
                                                     "made at its default location, OBLITERATUS' first)."})

#: `jetson-install TARGET`.
INSTALL = _stacked(
    with_options(*INSTALL_OPTIONS), with_options("dry-run"),
    _option("--upgrade", is_flag=True, help="Read the vendor index again instead of reusing the recorded set."),
    with_options("yes"),
    _option("--lock", "lock_file", metavar="FILE", help="Install exactly this lock (`jetson-install lock`)."),
    _option("--wheelhouse", metavar="DIR|URL|oci://HOST/REPOSITORY:TAG|@sha256:DIGEST",
                 help="Install the lock of this wheelhouse from it (a folder, a web server, an OCI registry), with no "
                      "other network; with --lock FILE, that lock's hashes decide every file."),
    with_options("plan-file", "detailed-exitcode"),
)
#: Beside --plan FILE: what only changes how the run is shown or confirmed (the rest is the plan's).
WITH_PLAN = ("plan_file", "dry_run", "yes", "as_json", "detailed_exitcode")
_OUT = _option("--out", metavar="FILE", help="Also save the whole plan (its vendor set read as the install "
                    "would: the environment's recorded one, else the index's) for `--plan FILE` to run exactly.")
_RESOLVE = _option("--resolve", is_flag=True, help="Read the vendor index and show the set an install would take.")
#: `jetson-install plan TARGET`.
PLAN = _stacked(with_options(*INSTALL_OPTIONS), _RESOLVE, _OUT)
DETECT = _stacked(_ROOT, with_options("json", json={"help": "Print one JSON object for scripts."}))
CHANNELS = _stacked(
    click.argument("channel_id", required=False, metavar="[CHANNEL]"),
    with_options("json", json={"help": "Print the channels as JSON."}),
    _option("--markdown", is_flag=True, help="Print the support table that README.md carries."),
    _option("--check", is_flag=True, help="Read each channel's index: preferred set present, hashes unchanged, "
                                               "newer sets."),
    _option("--vendor-index", metavar="URL",
                 help="With --check: read this mirror instead of the channel's index."),
    with_options("mirror", "default-index", mirror={"help": "With --check: also check this mirror of each channel's "
                                                             "first source, on its own; repeatable."},
                 default_index={"help": "With --check: read the sources on uv's default index here."}),
)
CONSTRAINTS = _stacked(_option("--write", is_flag=True, help="Rewrite the files from wheels-index.toml."),
                       _option("--dir", "directory", default="constraints", show_default=True, metavar="DIR"))
_ADD_VENV = with_options("venv", venv={"help": "The environment to add to (default: the one a target's install "
                                                "made at its default location)."})
ADD = _stacked(
    click.argument("requirements", nargs=-1, metavar="REQUIREMENT..."), _ADD_VENV,
    with_options("dry-run", dry_run={"help": "Print the plan of the new environment and change nothing."}),
    with_options("yes"), with_options("json"), with_options("check-command"),
    with_options("plan-file", plan_file={"help": "Run exactly the plan `jetson-install plan add ... --out FILE` "
                                                 "saved (no REQUIREMENT then), or refuse with the reason."}),
    with_options("detailed-exitcode"),
)
#: `jetson-install plan add`.
PLAN_ADD = _stacked(click.argument("requirements", nargs=-1, metavar="REQUIREMENT..."), _ADD_VENV,
                    with_options("check-command"), with_options("json"), _RESOLVE, _OUT)
LOCK = _stacked(
    with_options("json", "vendor-fallback", "allow-insecure-index", "default-index", "vendor-index", "mirror", "ref",
                 "source",
                 "python", "l4t", "soc", "root",
                 python={"help": "Lock for this interpreter on this machine (of the board's architecture) "
                                 "instead of the board's platform."},
                 vendor_fallback={"help": "Lock the channel's documented fallback vendor source."}),
    _option("--python-version", metavar="X.Y", help="Lock for the board's platform with this Python (a board whose "
                 "Python is not the channel's; its install then takes --python /usr/bin/pythonX.Y)."),
    _option("--output", "-o", metavar="FILE",
                 help="Write the lock here (default: TARGET.lock); a target built from its source goes beside it."),
    with_options("with", **{"with": {"help": "Also lock this requirement, by name from the default index (e.g. "
                                             "transformers, 'accelerate>=1.0'); a folder or URL is refused, as a lock "
                                             "holds only files an index lists; repeatable."}}),
    click.argument("target", required=False, default="obliteratus", metavar="[TARGET]"),
)
WHEELHOUSE = _stacked(
    click.argument("directory", metavar="DIR"),
    _option("--lock", "lock_file", default="obliteratus.lock", show_default=True, metavar="FILE",
                 help="The lock whose files to download."),
    _option("--serve", is_flag=True,
                 help="Then serve DIR over HTTP until Ctrl-C, to a few boards on a trusted network (without --lock: "
                      "DIR as it is). A fleet's server is nginx (docs/fleets.md) or a registry: --push."),
    _option("--push", metavar="oci://HOST[:PORT]/REPOSITORY:TAG",
                 help="Then push DIR to this OCI registry as one artifact, each file a blob by its sha256 (without "
                      "--lock: DIR as it is); the registry's credentials come from docker login or ~/.netrc."),
    _option("--bind", default="0.0.0.0", show_default=True, metavar="ADDRESS",
                 help="The address --serve listens on."),
    _option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
                 help="The port --serve listens on."),
    _option("--tool-wheel", metavar="FILE", help="Also carry jetson-install (this wheel of it) and its own "
                 "dependencies for the lock's board, to install the tool there with no network."),
    with_options("default-index", default_index={"help": "With --tool-wheel: resolve the tool's dependencies here "
                                                         "(default: uv's own index)."}),
    with_options("mirror", mirror={"help": "Where the lock's URL of a vendor file does not deliver it: take it from "
                                           "here (an index, or an oci:// registry), with the lock's sha256; "
                                           "repeatable."}),
    with_options("allow-insecure-index", allow_insecure_index={"help": "Accept plain http to remote mirrors and "
                                                                       "registries."}),
    with_options("json", json={"help": "Print one JSON result object on stdout."}),
)
DOCTOR = _stacked(
    _ROOT,
    with_options("venv", venv={"help": "Check this environment (default: the one a target's install made at its "
                                       "default location, OBLITERATUS' first)."}),
    with_options("python", python={"help": "Check this interpreter instead of an environment."}),
    with_options("json", json={"help": "Print the evidence JSON on stdout."}),
    _option("--evidence", metavar="FILE", help="Also write the evidence JSON to FILE."),
    _option("--check", "only", metavar="ID", multiple=True,
                 help="Run only this check (and what it needs); repeatable."),
    _option("--no-gpu", is_flag=True,
                 help="Run only the checks that need no GPU (what an install runs with --no-verify)."),
    _option("--list-checks", is_flag=True, help="List the check ids and exit."),
    _option("--strict", is_flag=True, help="The gate: every check that applies must run and pass; a skip fails."),
    with_options("preflight", preflight={"help": "Expect CPU builds (an environment made with --preflight is checked "
                                                 "so anyway)."}),
    _option("--gate-evidence", metavar="FILE",
                 help="Also write the jetson-runtime gate record (upstream's shape) to FILE; implies --strict."),
)
DOCKERFILE = _stacked(
    _ROOT,
    _option("--base", metavar="IMAGE",
                 help="Build on this image (default: the first one known to match the channel)."),
    _option("--output", metavar="FILE", help="Write the Dockerfile here (default: standard output)."),
)
CONTAINER_ENTRYPOINT = _stacked(
    with_options("venv", venv={"required": True, "help": "The environment the image was built with."}),
    click.argument("command", nargs=-1, type=click.UNPROCESSED),
)
EVIDENCE_CHECK = _stacked(
    click.argument("files", nargs=-1, required=True, metavar="FILE..."), with_options("max-age"),
    _option("--require", "requirements", metavar="KEY=VALUE", multiple=True,
                 help="A dotted path into the evidence and its required value, e.g. platform.channel=jp6-cu126."),
    _option("--partial", is_flag=True,
                 help="Also accept evidence that passed without proving CUDA (a --check or --no-gpu run, an install's "
                      "--no-verify, a run without --strict); its line says what it lacks."),
)
EVIDENCE_TABLE = _stacked(click.argument("files", nargs=-1, required=True, metavar="FILE..."), with_options("max-age"))
INSPECT = _stacked(
    click.argument("subject", metavar="WHEEL|FILE|REQUIREMENT"),
    _ROOT, with_options("json", json={"help": "Print the inspection as one JSON object."}),
)
LABELS = _stacked(
    _ROOT,
    _option("--evidence", "evidence_file", metavar="FILE",
                 help="Doctor evidence that may grant `cuda` (default: the environment's own)."),
    with_options("venv", venv={"help": "The environment whose own evidence may grant `cuda` (default: the one a "
                                       "target's install made at its default location, OBLITERATUS' first)."}),
    with_options("max-age"), with_options("json", json={"help": "Print the labels as JSON."}),
)
#: `jetson-install export`.
EXPORT = _stacked(
    click.argument("project_dir", required=False, default=".", metavar="[PROJECT_DIR]"),
    _option("--uv", "uv", is_flag=True, help="Write the settings uv reads into PROJECT_DIR/pyproject.toml "
                                                  "(default: the current folder), so that plain `uv sync` installs "
                                                  "the channel's stack on a Jetson."),
    _option("--channel", "channel_id", metavar="ID", help="The channel's settings (`jetson-install channels` "
                                                                "lists them); default: the board's, read from --root."),
    _ROOT,
    with_options("vendor-index"),
    _option("--print", "print_only", is_flag=True, help="Print the settings as TOML; change no file."),
)
LIST = with_options("json", json={"help": "Print the environments as JSON."})
PATHS = with_options("json", json={"help": "Print the folders and files as JSON."})
OUTDATED = _stacked(click.argument("venvs", nargs=-1, metavar="[DIR]..."),
                    with_options("default-index", default_index={"help": "Ask this index for a newer jetson-install "
                                                                         "(default: uv's own)."}),
                    with_options("json", json={"help": "Print what is newer as JSON."}))
ROLLBACK = _stacked(_LIFECYCLE_VENV, with_options("json"))
UNINSTALL = _stacked(_LIFECYCLE_VENV, with_options("yes"), with_options("json"))
CLEAN = _stacked(with_options("dry-run", dry_run={"help": "Show what would be removed, and its size; remove nothing."}),
                 _option("--failed-evidence", is_flag=True,
                              help="Also remove the doctor evidence kept of failed verifies (kept by default)."),
                 with_options("json"))


def typed() -> Rerun:
    """The command as the user gave it (main's arguments), to run again with changes."""
    from jetson_install.planning.rerun import Rerun

    return Rerun(tuple(click.get_current_context().find_root().obj or ()))


def given(context: click.Context, name: str, value: Optional[str]) -> Sourced[Optional[str]]:
    """The value of option `name` and where it came from: its flag, or its environment variable."""
    flag = "--" + name.replace("_", "-")
    source = context.get_parameter_source(name)
    if source is not None and source.name == "ENVIRONMENT":
        return Sourced(value, OPTIONS[flag[2:]][1]["envvar"])
    return Sourced(value, flag)


def given_on_command_line(context: click.Context, keep: Sequence[str]) -> List[str]:
    """The options typed on the command line in `context`, but those named in `keep` (by their
    parameter names): each as the user wrote it (`--venv`)."""
    typed = []
    for parameter in context.command.params:
        source = context.get_parameter_source(parameter.name) if parameter.name else None
        if parameter.name in keep or source is None or source.name != "COMMANDLINE":
            continue
        if isinstance(parameter, click.Argument) and context.params.get(parameter.name) in ((), None):
            continue  # click 8.1 (the newest for Python 3.8 and 3.9) says an empty `ARG...` came from the command line
        typed.append(parameter.opts[0] if isinstance(parameter, click.Option) else parameter.human_readable_name)
    return typed


def platform_options(root: str, l4t: Optional[str], soc: Optional[str],
                     context: Optional[click.Context] = None) -> PlatformOptions:
    """--root, --l4t and --soc as parsed in `context` (else the current one)."""
    from jetson_install.cli.commands.given import PlatformOptions

    context = context or click.get_current_context()
    return PlatformOptions(given(context, "root", root), given(context, "l4t", l4t), given(context, "soc", soc))


def install_options(target: str, params: Dict[str, Any], context: Optional[click.Context] = None) -> InstallOptions:
    """What a target's install, `plan TARGET` or `lock` parsed (in `context`, else the current one)."""
    from jetson_install.cli.commands.given import InstallOptions

    context = context or click.get_current_context()
    return InstallOptions(
        target=target, platform=platform_options(params["root"], params["l4t"], params["soc"], context),
        vendor_index=given(context, "vendor_index", params["vendor_index"]),
        default_index=given(context, "default_index", params["default_index"]),
        allow_insecure_index=params["allow_insecure_index"], venv=params.get("venv"), python=params.get("python"),
        source=params["source"], ref=params["ref"], verify=not params.get("no_verify", False),
        fallback=params["vendor_fallback"], use_existing_torch=params.get("use_existing_torch", False),
        bitsandbytes=params.get("bitsandbytes"), preflight=params.get("preflight", False),
        cpu_index=params.get("cpu_index"), added=tuple(params.get("added", ())), mirrors=tuple(params.get("mirrors", ())),
        check_commands=tuple(params.get("check_commands", ())))


def parsed(target: str, words: Sequence[str]) -> click.Context:
    """`words` parsed as the command of `target` parses them (nothing is run): `add` takes the
    options of the command that made an environment from what it recorded."""
    root = click.get_current_context().find_root()
    assert isinstance(root.command, click.Group)
    command = root.command.get_command(root, target)
    assert command is not None  # `add` checked the target is the catalog's
    return command.make_context(target, list(words), parent=root)
