"""`lock` and `wheelhouse`: a board's whole environment resolved into a lock, and a lock's
files downloaded for a fleet and served to it (and what `--serve` says: where it listens, who
can reach it, each runner's command)."""

from __future__ import annotations

import gc
import ipaddress
import shlex
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement

from jetson_install.base.errors import BadInput, JetsonInstallError, StepFailed, Unsupported
from jetson_install.base.oci_ref import parse_reference
from jetson_install.base.outputs import check_output
from jetson_install.base.sourced import Sourced
from jetson_install.base.toml_file import loads_toml
from jetson_install.catalog.identity import NoBuildForPython
from jetson_install.catalog.lock_file import FILES_DIR, SIMPLE_DIR, WHEELHOUSE_LOCK, read_lock
from jetson_install.catalog.settings import check_index_url, load_index_settings, wheelhouse_index
from jetson_install.cli.commands.given import InstallOptions
from jetson_install.cli.commands.plan import make_install_plan, resolve_plan
from jetson_install.fleet.lock import LockResult, lock_target, make_lock, no_build_for_the_boards_python, tool_entries
from jetson_install.planning.fixes import runner_command
from jetson_install.planning.planner import addition_kind, additions
from jetson_install.planning.rerun import Rerun
from jetson_install.tools.index import RUN_AGAIN

if TYPE_CHECKING:
    from jetson_install.fleet.wheelhouse_server import WheelhouseServer
    from jetson_install.planning.plan import Plan

__all__ = ["board_lock", "unlockable", "why_not_lockable", "fill_wheelhouse", "push_wheelhouse", "serve_wheelhouse", "serving_url", "serving_lines"]


def board_lock(options: InstallOptions, python: Optional[str], python_version: Optional[str], output: Path,
               rerun: Rerun) -> LockResult:
    """Resolve the board's whole environment (or, with `python`, this interpreter's) into a lock."""
    check_output("--output", output, make_folder=True)  # before anything is resolved
    _refuse_what_a_lock_cannot_hold(options, python, python_version, rerun)
    plan = make_install_plan(replace(options, venv=None, verify=False, use_existing_torch=False, python=None),
                             keep_added=False)
    if not plan.supported or plan.vendor is None or plan.channel is None:
        raise Unsupported(plan.reason or "no vendor source for this board", fix=plan.remedy or None)
    target = lock_target(plan, python, python_version, rerun)

    def resolved() -> "Plan":
        try:
            return resolve_plan(plan, rerun, target.python)
        except NoBuildForPython as exc:
            raise no_build_for_the_boards_python(exc, target, plan.vendor_index or "the vendor source", rerun) from None

    # The vendor index is read while the target is checked out and built.
    return make_lock(plan, target, output, resolved)


#: Why a lock cannot hold a --with value of each kind planner.addition_kind tells apart, and
#: how to make it a file an index lists.
_NOT_LOCKABLE = {
    "folder": ("a project folder is built on each board from whatever its own copy holds",
               "build its wheel (uv build --wheel {value})"),
    "git": ("a git repository is built on each board from source, with no sha256 to pin",
            "build its wheel from a checkout (uv build --wheel CHECKOUT)"),
    "url": ("a URL is not looked up in the default index, where a lock takes --with by name", "take that file"),
}


def unlockable(added: Sequence[str]) -> Optional[Tuple[str, str]]:
    """The first of `added` (--with values, `add`'s) that a lock cannot hold, and its kind."""
    return next(((given, addition_kind(given)) for given in added if addition_kind(given) != "name"), None)


def why_not_lockable(kind: str) -> str:
    return (f"a lock holds only files an index lists, each pinned by its sha256 so that every board installs the "
            f"same, and {_NOT_LOCKABLE[kind][0]}")


def _refuse_what_a_lock_cannot_hold(options: InstallOptions, python: Optional[str], python_version: Optional[str],
                                    rerun: Rerun) -> None:
    """`lock --with` a folder, a git URL or another URL, refused before any index is read or
    process started (uv's resolution put them in pylock.toml as a directory, a vcs or an archive
    entry, without the wheel the lock names): the first one, with the two ways it works."""
    refused = unlockable(options.added)
    if refused is not None:
        given, kind = refused
        value = additions((given,))[0]  # as the install takes it: a folder made absolute
        build = _NOT_LOCKABLE[kind][1]
        by_name = Rerun(rerun.without("--with").argv + tuple(
            word for added in options.added for word in ("--with", _addition_name(added) if added == given else added)))
        on_board = rerun.without("--with").keeping(
            options.target, ("--vendor-index", "--mirror", "--default-index", "--source", "--ref", "--python"),
            ("--vendor-fallback", "--allow-insecure-index"))
        if python_version and not python:
            on_board = on_board.with_option("--python", f"/usr/bin/python{python_version}")  # as the lock's install
        for added in additions(options.added):
            on_board = on_board.with_another("--with", added)
        raise BadInput(f"--with {given}: {why_not_lockable(kind)}",
                       fix=f"{build.format(value=shlex.quote(value))} and publish it to the index the lock resolves "
                           f"names from (--default-index), then: {by_name}; or install it on each board without a "
                           f"lock: {on_board}")


def _addition_name(value: str) -> str:
    """The project a --with folder or `NAME @ URL` names, as the index would list it; NAME where
    it is not read here (a git URL, a name the build backend says)."""
    try:
        return Requirement(value).name
    except InvalidRequirement:
        pass
    try:
        project = loads_toml((Path(value).expanduser() / "pyproject.toml").read_text(encoding="utf-8")).get("project")
    except (OSError, UnicodeDecodeError, JetsonInstallError):
        return "NAME"
    name = project.get("name") if isinstance(project, dict) else None
    return name if isinstance(name, str) and name else "NAME"


def fill_wheelhouse(lock_file: Path, directory: Path, tool_wheel: Optional[str], default_index: Sourced[Optional[str]],
                    rerun: Rerun, mirrors: Sequence[str] = (), allow_insecure: bool = False) -> Dict[str, Any]:
    """`wheelhouse`: the lock's files, and with `tool_wheel` jetson-install's own for the board;
    a vendor file its URL does not deliver comes from the mirrors (--mirror, the configuration's);
    a failed download's fix names this command to run again."""
    lock = read_lock(lock_file)
    if tool_wheel is not None and default_index.value is not None:
        check_index_url(default_index.value, default_index.source, False)
    settings = load_index_settings(None, "--vendor-index", None, "--default-index", allow_insecure, mirrors)
    # The wheelhouse being filled is no source of its own files.
    own = wheelhouse_index(str(directory))
    sources = [mirror.value for mirror in settings.mirrors if mirror.value != own]
    tool = (tool_entries(Path(tool_wheel), lock, default_index.value, f"run it again: {rerun}")
            if tool_wheel is not None else [])
    # Here and in the two below, not at the top: `lock` never fills, pushes or serves a wheelhouse.
    from jetson_install.fleet.wheelhouse import fill_wheelhouse as fill

    try:
        return fill(lock, directory, tool, sources, settings.allow_insecure)
    except StepFailed as exc:
        raise StepFailed(exc.step, exc.message, (exc.fix or "").replace(RUN_AGAIN, f"run: {rerun}") or None) from None


def push_wheelhouse(directory: Path, reference: str, allow_insecure: bool,
                    progress: Callable[[str], None]) -> Dict[str, Any]:
    """`wheelhouse --push`: DIR to an OCI registry, as one artifact of its lock's files."""
    from jetson_install.fleet.oci_wheelhouse import push_wheelhouse as push

    return push(directory, parse_reference(reference, "--push"), allow_insecure, progress)


def serve_wheelhouse(directory: Path, bind: str, port: int, rerun: Rerun,
                     serving: Callable[[WheelhouseServer], None]) -> None:
    """`wheelhouse --serve`: `directory` over HTTP until Ctrl-C; `serving` is told the server
    (the port it listens on: port 0 picks one) once it does."""
    from jetson_install.fleet.wheelhouse_server import open_server

    gc.enable()  # off for the start (jetson_install/__main__.py); a server runs until stopped
    with open_server(directory, bind, port, rerun) as server:
        serving(server)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            return


def serving_url(bind: str, port: int) -> str:
    """The address runners reach a served wheelhouse at: this host's name where it listens on all."""
    host = socket.gethostname() if bind in ("0.0.0.0", "::") else bind
    return f"http://{host}:{port}/"


def _reach(bind: str) -> str:
    """Who can download what is served on `bind`."""
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        return "this machine only" if bind == "localhost" else "the hosts that reach that address"
    if address.is_unspecified:
        # The default: the fleet's runners are other hosts, and must reach it.
        return ("all of this machine's addresses, so any host that reaches this port can download them, as the "
                "fleet's runners must (--bind 127.0.0.1 keeps it to this machine)")
    return "this machine only" if address.is_loopback else "the hosts that reach that address"


def serving_lines(server: WheelhouseServer, bind: str) -> List[str]:
    """What `--serve` prints: first where it listens and what that exposes, then each runner's command."""
    port = server.server_address[1]
    lock = str(server.directory / WHEELHOUSE_LOCK)
    return [f"serving {server.directory} (its {WHEELHOUSE_LOCK}, {FILES_DIR}/ and {SIMPLE_DIR}/, read-only, nothing "
            f"else) on {bind}:{port}: {_reach(bind)}; Ctrl-C stops",
            f"  on each runner, with its own copy of {lock} (the hashes come from it, so copy it as you trust it): "
            + runner_command(server.lock.target, lock, serving_url(bind, port)),
            f"  this server is for a few boards on a trusted network; a fleet's is nginx serving {server.directory} "
            "as it is (docs/fleets.md) or an OCI registry: jetson-install wheelhouse "
            f"{shlex.quote(str(server.directory))} --push oci://HOST/REPOSITORY:TAG"]
