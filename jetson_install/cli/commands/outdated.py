"""`outdated`: for each environment `list` shows, what is newer than what it has (the catalog's
preferred vendor set, a newer tag of the source it was installed from at a tag), and for the
tool itself (from where it was installed), each with the command that upgrades it. Read-only,
as `brew outdated` and `pipx list --outdated`; reading an index or a git remote is bounded in
time, and one that does not answer is one line while the rest is still reported.

Exit codes as `brew outdated`'s
(https://github.com/Homebrew/brew/blob/master/Library/Homebrew/cmd/outdated.rb: "failed" only
when named items are outdated): 0 for the report of every environment; with DIRs named, 1
where one of them is outdated, else 4 where one's source could not be read.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from packaging.version import InvalidVersion, Version

from jetson_install import __version__
from jetson_install.base.errors import EXIT_CHECK_UNREACHABLE, EXIT_FAILED, EXIT_OK, BadInput, JetsonInstallError
from jetson_install.base.git_urls import split_git_url
from jetson_install.base.redact import redact, redact_data
from jetson_install.base.sourced import Sourced
from jetson_install.base.upgrade import running_install
from jetson_install.catalog.catalog import Catalog, VendorSource, load_catalog
from jetson_install.catalog.settings import load_index_settings
from jetson_install.cli.commands.add import in_folder
from jetson_install.envs.lifecycle import list_environments
from jetson_install.envs.record import read_record
from jetson_install.envs.recorded import recorded_plan
from jetson_install.planning.rerun import Rerun
from jetson_install.tools import git, uv
from jetson_install.tools.runner import run_uv

__all__ = ["SCHEMA_VERSION", "Newer", "Unread", "EnvironmentNews", "Outdated", "outdated"]

SCHEMA_VERSION = 1
#: Seconds a git remote or the package index is given to answer; one that does not is named and passed over.
NETWORK_TIMEOUT = 30.0


@dataclass(frozen=True)
class Newer:
    """Something newer than what is installed, and the command that takes it."""

    what: str  # "vendor set", "source", "jetson-install"
    installed: str
    newer: str
    where: str  # what says it is newer: wheels-index.toml, the repository, the index
    upgrade: str

    def to_json(self) -> Dict[str, Any]:
        return {"what": self.what, "installed": self.installed, "newer": self.newer, "where": self.where,
                "upgrade": self.upgrade}


@dataclass(frozen=True)
class Unread:
    """What could not be read to tell, and why, in one line."""

    what: str
    why: str

    def to_json(self) -> Dict[str, Any]:
        return {"what": self.what, "why": self.why}


Found = Union[Newer, Unread, None]


@dataclass(frozen=True)
class EnvironmentNews:
    """One DIR of `list`, and what is newer than what its environment has."""

    venv: str
    target: Optional[str]
    channel: Optional[str]
    found: Tuple[Union[Newer, Unread], ...]

    @property
    def newer(self) -> Tuple[Newer, ...]:
        return tuple(item for item in self.found if isinstance(item, Newer))

    @property
    def unread(self) -> Tuple[Unread, ...]:
        return tuple(item for item in self.found if isinstance(item, Unread))

    def to_json(self) -> Dict[str, Any]:
        return {"venv": self.venv, "target": self.target, "channel": self.channel, "outdated": bool(self.newer),
                "newer": [item.to_json() for item in self.newer], "unread": [item.to_json() for item in self.unread]}


@dataclass(frozen=True)
class Outdated:
    environments: Tuple[EnvironmentNews, ...]
    tool: Tuple[Union[Newer, Unread], ...]  # none: the tool is the newest there is, or DIRs were named
    named: bool  # DIRs were named: the exit code says whether they are outdated

    @property
    def tool_newer(self) -> Optional[Newer]:
        return next((item for item in self.tool if isinstance(item, Newer)), None)

    @property
    def tool_unread(self) -> Optional[Unread]:
        return next((item for item in self.tool if isinstance(item, Unread)), None)

    @property
    def exit_code(self) -> int:
        if not self.named:
            return EXIT_OK
        if any(news.newer for news in self.environments):
            return EXIT_FAILED
        return EXIT_CHECK_UNREACHABLE if any(news.unread for news in self.environments) else EXIT_OK

    def to_json(self) -> Dict[str, Any]:
        tool = {"installed": __version__, "newer": self.tool_newer.to_json() if self.tool_newer else None,
                "unread": self.tool_unread.to_json() if self.tool_unread else None}
        data = {"schema_version": SCHEMA_VERSION, "environments": [news.to_json() for news in self.environments],
                "exit_code": self.exit_code}
        if not self.named:
            data["tool"] = tool
        return data


def outdated(named: Sequence[str], default_index: Sourced[Optional[str]]) -> Outdated:
    """What is newer for every environment `list` shows (or the DIRs `named`), and for the tool
    (asked of `default_index`, else the configuration's, else uv's own)."""
    listed = [entry for entry in list_environments() if entry.current is not None]
    if named:
        wanted = [Path(name).expanduser().absolute() for name in named]
        by_path = {Path(entry.venv): entry for entry in listed}
        missing = [str(path) for path in wanted if path not in by_path]
        if missing:
            raise BadInput(f"outdated: {missing[0]} is no environment jetson-install made",
                           fix="see them: jetson-install list")
        listed = [by_path[path] for path in wanted]
    catalog = load_catalog()
    environments = []
    for entry in listed:
        assert entry.current is not None
        environment = Path(entry.current.path)
        recorded = recorded_plan(environment) or {}
        command = _recorded_command(Path(entry.venv), environment, recorded)
        found = (_vendor_set(environment, recorded, catalog, command), _source(recorded, command))
        environments.append(EnvironmentNews(entry.venv, entry.current.target, entry.current.channel,
                                            tuple(item for item in found if item is not None)))
    tool = None if named else _tool(default_index)
    return Outdated(tuple(environments), (tool,) if tool is not None else (), bool(named))


def _recorded_command(link: Path, environment: Path, recorded: Mapping[str, Any]) -> Rerun:
    """The command that made the environment at `link`, to run again at the same DIR (paths made
    absolute against the folder it ran in, as `add` runs it)."""
    words = recorded.get("command")
    target = recorded.get("target")
    if not (isinstance(words, list) and words and all(isinstance(word, str) for word in words)):
        words = [target if isinstance(target, str) else "obliteratus"]
    cwd = recorded.get("cwd")
    # How it was shown and confirmed is the user's to say again; --upgrade is what the vendor set's line adds.
    argv = tuple(word for word in words if word not in ("-q", "--quiet", "-v", "--verbose", "--json", "--dry-run",
                                                         "--yes", "-y", "--upgrade"))
    if isinstance(cwd, str):
        argv = in_folder(argv, Path(cwd))
    return Rerun((*Rerun(argv).without("--venv").argv, "--venv", str(link)))


def _vendor_set(environment: Path, recorded: Mapping[str, Any], catalog: Catalog, command: Rerun) -> Found:
    """The catalog's preferred set, where it is newer than the one the environment holds (read
    from the catalog alone: `--upgrade` then reads the index for it)."""
    record = read_record(environment)
    if record is None or any(recorded.get(route) for route in ("existing", "preflight", "lock")):
        return None  # a kept stack, CPU builds or a lock's files: no vendor set the catalog prefers
    source = _source_of(catalog, recorded)
    if source is None:
        return None
    preferred, installed = source.preferred.pins.get("torch"), record.resolution.pins.get("torch")
    if preferred is None or installed is None or not _later(preferred, installed):
        return None
    return Newer("vendor set", record.resolution.set_name, source.preferred.name,
                 f"wheels-index.toml's preferred set for {recorded.get('channel')}", str(command.with_flag("--upgrade")))


def _source_of(catalog: Catalog, recorded: Mapping[str, Any]) -> Optional[VendorSource]:
    """The catalog's source the environment was installed from (by its location, as recorded)."""
    channel = next((channel for channel in catalog.channels if channel.id == recorded.get("channel")), None)
    if channel is None:
        return None
    policy = recorded.get("policy")
    location = policy.get("location") if isinstance(policy, dict) else None
    found: Optional[VendorSource] = next((source for source in channel.sources
                                          if redact_data(source.location) == location), channel.primary)
    return found


def _later(newer: str, older: str) -> bool:
    try:
        return Version(newer) > Version(older)
    except InvalidVersion:
        return False


def _source(recorded: Mapping[str, Any], command: Rerun) -> Found:
    """A newer tag of the repository the target was installed from at a tag."""
    identity = recorded.get("source")
    requirement = recorded.get("requirement")
    if not (isinstance(identity, dict) and identity.get("kind") == "tag" and isinstance(requirement, str)):
        return None  # a branch or checkout is the user's to move; a release by name has no tags here
    url = requirement.partition(" @ ")[2]
    repository, ref = split_git_url(url)
    if ref is None:
        return None
    answer = git.remote_tags(repository, NETWORK_TIMEOUT)
    if not answer.ok:
        why = f"no answer within {NETWORK_TIMEOUT:g} s" if answer.timed_out else git.failure(answer)
        return Unread("source", f"the tags of {redact(repository)} could not be read ({why})")
    tags = [line.partition("\t")[2][len("refs/tags/"):] for line in answer.stdout.splitlines() if "\trefs/tags/" in line]
    newest = _newest_tag(ref, tags)
    if newest is None:
        return None
    return Newer("source", ref, newest, f"the tags of {redact(repository)}", str(_with_ref(command, ref, newest)))


def _newest_tag(current: str, tags: Sequence[str]) -> Optional[str]:
    """The tag of the newest version later than `current`'s (`v1.2` read as 1.2); pre-releases
    only where the current one is one."""
    try:
        installed = Version(current)
    except InvalidVersion:
        return None  # a tag that is no version: nothing is "newer" than it
    versions = []
    for tag in tags:
        try:
            version = Version(tag)
        except InvalidVersion:
            continue
        if version > installed and (not version.is_prerelease or installed.is_prerelease):
            versions.append((version, tag))
    return max(versions)[1] if versions else None


def _with_ref(command: Rerun, old: str, new: str) -> Rerun:
    """`command` installing the source at `new`: its --ref, or the ref in its --source URL, replaced."""
    if command.gives("--ref") or not command.gives("--source"):
        return command.with_option("--ref", new)
    words = list(command.argv)
    for at, word in enumerate(words):
        if word.endswith(f"@{old}") and (word.startswith("--source=") or (at and words[at - 1] == "--source")):
            words[at] = word[: -len(old)] + new
    return Rerun(tuple(words))


def _tool(default_index: Sourced[Optional[str]]) -> Found:
    """A newer jetson-install, from where the running one was installed."""
    installed = running_install()
    if installed.checkout is not None:
        return _checkout(installed.checkout, installed.upgrade)
    if installed.kind == "source tree":
        return Unread("jetson-install", "it runs from a source tree that no installer recorded and no git checkout "
                                        "holds: nothing says what is newer")
    try:
        settings = load_index_settings(None, "", default_index.value, default_index.source, False)
    except JetsonInstallError as exc:
        return Unread("jetson-install", f"the index could not be asked: {exc.message}")
    index = settings.default_index.value
    where = redact(index) if index else "uv's default index"
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    answer = run_uv(uv.newest_release_argv(python, index), timeout=NETWORK_TIMEOUT,
                    indexes=(index,) if index else (), input_text="jetson-install\n")
    if not answer.ok:
        why = f"no answer within {NETWORK_TIMEOUT:g} s" if answer.timed_out else (answer.last_stderr_line() or
                                                                                   f"uv exited {answer.returncode}")
        return Unread("jetson-install", f"{where} could not be read ({redact(why)})")
    found = next((line.split("==", 1)[1].strip() for line in answer.stdout.splitlines() if line.startswith("jetson-install==")),
                 None)
    if found is None or not _later(found, __version__):
        return None
    return Newer("jetson-install", __version__, found, where, installed.upgrade)


def _checkout(checkout: Path, upgrade: str) -> Found:
    """Newer commits on the branch the checkout the tool was installed from follows."""
    followed = git.upstream(checkout)
    if followed is None:
        return Unread("jetson-install", f"the checkout it was installed from, {shlex.quote(str(checkout))}, follows "
                                        "no remote branch: nothing says what is newer")
    remote, branch = followed
    answer = git.upstream_commit(checkout, remote, branch, NETWORK_TIMEOUT)
    commit = answer.stdout.split("\t", 1)[0].strip() if answer.ok else ""
    if not commit:
        why = (f"no answer within {NETWORK_TIMEOUT:g} s" if answer.timed_out else
               git.failure(answer) if not answer.ok else f"{branch} is not there")
        return Unread("jetson-install", f"{remote}/{branch} of {shlex.quote(str(checkout))} could not be read "
                                        f"({redact(why)})")
    if git.contains(checkout, commit):
        return None
    head = git.head_commit(checkout) or "?"
    return Newer("jetson-install", f"{__version__} ({head[:12]})", f"{remote}/{branch} at {commit[:12]}",
                 f"{remote}/{branch}", upgrade)
