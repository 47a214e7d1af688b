"""A channel's protected stack as a uv project's settings, and their edit into its pyproject.toml.

`jetson-install export --uv` makes plain `uv lock` and `uv sync` install the channel's vendor
builds on a Jetson, and leave a workstation that shares the project's uv.lock with its own
torch. Every setting is held to Jetsons by one PEP 508 marker (`BOARD_MARKER`). What uv reads
(https://docs.astral.sh/uv/reference/settings/ and https://docs.astral.sh/uv/concepts/indexes/,
for the uv this tool ships, 0.13):

- `[[tool.uv.index]]` with `explicit = true`: the vendor index, used only for the packages a
  `[tool.uv.sources]` entry sends to it (none for a channel whose builds are on uv's default
  index, which is never named);
- `[tool.uv.sources]`: torch, torchvision, torchaudio and bitsandbytes from that index, on
  Jetsons only (`marker`); uv applies sources to `constraint-dependencies` too (it lowers them
  like requirements: astral-sh/uv crates/uv/src/commands/project/lock.rs, "lower the overrides
  and constraints"), so a torchvision a dependency brings comes from the vendor index as well;
- `[tool.uv] constraint-dependencies`: constraints/<channel>.txt's lines (the preferred set's
  pins, NumPy's bound, the caps), on Jetsons only;
- `[dependency-groups]` `jetson-<channel>`: the stack itself (and the runtime wheels its builds
  need but do not declare), on Jetsons only, which `[tool.uv] default-groups` names so that a
  plain `uv sync` installs it (https://docs.astral.sh/uv/concepts/projects/dependencies/#default-groups).

A source scoped to a group or an extra (`group = ...`) applies only to requirements of that
group (https://github.com/astral-sh/uv/pull/9160); with uv 0.13.9 the project's own `torch`
then resolved to that group's vendor build on the workstation too, marker or not
(tests/test_export_uv_sync.py holds this). So one
uv.lock holds one Jetson channel: markers tell a Jetson from any other machine, but neither the
L4T release nor Orin from Thor on R39, and the exported group names the channel it is for.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from jetson_install.base.errors import BadInput, JetsonInstallError, Unsupported
from jetson_install.base.sourced import Sourced
from jetson_install.base.toml_file import loads_toml
from jetson_install.base.toml_text import (
    Marks, TomlEditError, TomlText, array_block_lines, drop_empty_table, key_text, region_statements, set_array_block,
    set_region, string,
)
from jetson_install.board.root_facts import KERNEL
from jetson_install.board.samples import SAMPLES_DIR, sample_names
from jetson_install.catalog.catalog import Catalog, Channel
from jetson_install.catalog.constraints import channel_constraint_lines
from jetson_install.catalog.identity import VENDOR_PACKAGES

__all__ = ["BOARD_MARKER", "UvSettings", "UvEdit", "uv_settings", "fragment", "edit_project", "on_a_jetson"]

#: Where the settings hold: Linux on aarch64 with an L4T kernel, whose release ends in "-tegra"
#: on every board captured here (jetson_install/board/samples/*/proc/sys/kernel/osrelease, and
#: tests/resources/boards/: 5.10.120-tegra, 5.15.148-tegra, 6.8.12-tegra, 6.8.12-1021-tegra);
#: projects tell Jetsons apart the same way (pollen-robotics/microduck_rl pull request 39).
BOARD_MARKER = "sys_platform == 'linux' and platform_machine == 'aarch64' and 'tegra' in platform_release"

_BEGIN = "# >>> jetson-install export --uv"
_END = "# <<< jetson-install export --uv <<<"
#: The fix for a requirement of the project's own that must not hold on Jetsons.
_OFF_JETSONS = "keep it off Jetsons: add \" ; 'tegra' not in platform_release\" to it (or `and` that to its marker)"
_PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


def _marks(channel_id: str) -> Marks:
    return Marks(f"{_BEGIN}: {channel_id} (each run rewrites these lines) >>>", _BEGIN, _END,
                 f"{_BEGIN}: {channel_id} (each run rewrites this key) >>>", "(each run rewrites this key) >>>")


@dataclass(frozen=True)
class UvSettings:
    """One channel's settings for a uv project, each held to Jetsons by BOARD_MARKER."""

    channel: Channel
    group: str  # the dependency group (and explicit index) name: "jetson-jp6-cu126"
    index: Optional[Sourced[str]]  # the explicit vendor index and where its URL came from; None: uv's default index
    sources: Tuple[Tuple[str, str], ...]  # (package, where it comes from on a Jetson, as an inline table)
    requirements: Tuple[str, ...]  # the group: the vendor set and its companions
    constraints: Tuple[str, ...]  # constraint-dependencies

    @property
    def marks(self) -> Marks:
        return _marks(self.channel.id)

    @property
    def pins(self) -> Dict[str, str]:
        """The exact versions the constraints pin (a package given by a range is left out)."""
        return {name: version for name, version in (_pinned(line) for line in self.constraints) if version}


def _pinned(line: str) -> Tuple[str, Optional[str]]:
    requirement = Requirement(line)
    exact = [s.version for s in requirement.specifier if s.operator == "=="]
    return canonicalize_name(requirement.name), exact[0] if len(exact) == 1 else None


def _on_jetsons(requirement: str) -> str:
    return f"{requirement} ; {BOARD_MARKER}"


def uv_settings(catalog: Catalog, channel: Channel, vendor_index: Optional[Sourced[str]] = None) -> UvSettings:
    """The settings for `channel`'s preferred set; `vendor_index`, a mirror of its builds
    (--vendor-index, or the configuration's vendor_index), replaces its own source."""
    source = channel.primary
    if not channel.installable or source is None:
        raise Unsupported(f"channel {channel.id} is {channel.status}: {channel.reason}", fix=channel.remedy or None)
    group = str(canonicalize_name(f"jetson-{channel.id}"))
    wanted = [name for name in VENDOR_PACKAGES if name in source.preferred.specifiers]
    where: Dict[str, str] = {}
    index: Optional[Sourced[str]] = None
    if vendor_index is not None or source.index is not None:
        index = vendor_index or Sourced(str(source.index), "wheels-index.toml")
        where = {name: f"{{ index = {string(group)}, marker = {string(BOARD_MARKER)} }}" for name in wanted}
    elif source.wheels:
        # A source of direct wheel URLs (NVIDIA's own JetPack 6.0 file): each package from its URL.
        for url in source.wheels:
            name = str(parse_wheel_filename(url.rsplit("/", 1)[-1])[0])
            where[name] = f"{{ url = {string(url)}, marker = {string(BOARD_MARKER)} }}"
    requirements = tuple(_on_jetsons(line) for line in source.preferred.requirement_lines() + list(source.companions))
    constraints = tuple(_on_jetsons(line) for line in channel_constraint_lines(catalog, channel))
    return UvSettings(channel, group, index, tuple((name, where[name]) for name in VENDOR_PACKAGES if name in where),
                      requirements, constraints)


def _index_body(settings: UvSettings) -> str:
    if settings.index is None:
        return ""
    return (f"[[tool.uv.index]]\nname = {string(settings.group)}\nurl = {string(settings.index.value)}\n"
            "explicit = true\n")


@dataclass(frozen=True)
class UvEdit:
    """What `edit_project` changed."""

    text: str  # the new text, as the file's own line endings write it
    replaced: Optional[str]  # the channel whose settings it replaced; None: the file had none
    changed: bool
    default_groups_made: bool  # the project had no default-groups: uv synced its dev group by default
    dev_kept: bool  # ... and it has one, which the default-groups made names


def fragment(settings: UvSettings) -> str:
    """The settings as a project that has none of these tables gets them: what `--print` shows
    and docs/uv-projects.md holds for each channel."""
    header = (f"# jetson-install export --uv --channel {settings.channel.id}: {settings.channel.title}\n"
              f"# Each setting holds on Jetsons only ({BOARD_MARKER}).\n")
    return _apply(header, {}, settings)


# -- what the project already says --------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _board_environments() -> Tuple[Dict[str, str], ...]:
    """Marker environments of a Jetson: the shipped sample boards' kernels, each Python."""
    kernels = sorted({(SAMPLES_DIR / name / KERNEL).read_text().strip() for name in sample_names()
                      if (SAMPLES_DIR / name / KERNEL).is_file()})
    return tuple({
        "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": "aarch64",
        "platform_release": kernel, "implementation_name": "cpython", "platform_python_implementation": "CPython",
        "python_version": python, "python_full_version": f"{python}.0", "implementation_version": f"{python}.0",
        "extra": "",
    } for kernel in kernels for python in _PYTHONS)


def on_a_jetson(marker: Optional[str]) -> bool:
    """Whether a marker can hold on a Jetson (no marker always does; one that cannot be read is
    taken to)."""
    if not marker:
        return True
    try:
        parsed = Marker(marker)
        return any(parsed.evaluate(environment) for environment in _board_environments())
    except (InvalidMarker, ValueError, KeyError, TypeError, AttributeError):
        return True


@dataclass(frozen=True)
class _Project:
    path: Path
    data: Dict[str, Any]
    doc: TomlText
    marks: Marks

    def line(self, path: Tuple[str, ...], item: Optional[int] = None) -> int:
        statement = self.doc.key(path) or self.doc.header(path)
        if statement is None:
            return 0
        value = statement.value
        if item is not None and value is not None and item < len(value.items):
            return self.doc.line(value.items[item].start)
        return self.doc.line(statement.start)

    def where(self, path: Tuple[str, ...], item: Optional[int] = None) -> str:
        line = self.line(path, item)
        return f"{self.path}:{line}" if line else str(self.path)

    def get(self, path: Tuple[str, ...]) -> Any:
        value: Any = self.data
        for part in path:
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    def ours(self, path: Tuple[str, ...]) -> List[Any]:
        """The items between jetson-install's marks in the array at `path`."""
        block = array_block_lines(self.doc, path, self.marks)
        if block is None:
            return []
        items: List[Any] = loads_toml(f"items = [\n{block}]\n", self.path)["items"]
        return items

    def users(self, path: Tuple[str, ...]) -> List[Tuple[int, Any]]:
        """(position, item) for each item of the array at `path` that is the project's own."""
        value = self.get(path)
        if not isinstance(value, list):
            return []
        ours = self.ours(path)
        found = []
        for position, item in enumerate(value):
            if item in ours:
                ours.remove(item)
            else:
                found.append((position, item))
        return found


def _refuse(project: _Project, path: Tuple[str, ...], item: Optional[int], what: str, fix: str) -> BadInput:
    return BadInput(f"{project.where(path, item)}: {what}", fix=fix)


def _previous(project: _Project) -> Optional[str]:
    """The channel whose settings the file holds (the begin mark names it)."""
    for comment in project.doc.comments:
        text = project.doc.text[comment.start:comment.end]
        if text.startswith(f"{_BEGIN}: "):
            return text[len(f"{_BEGIN}: "):].split(" ", 1)[0]
    return None


def _check(project: _Project, settings: UvSettings) -> None:
    """Refuse a project whose own settings contradict the channel's, naming the line."""
    channel = settings.channel.id
    _check_workspace(project)
    uv = ("tool", "uv")
    if project.get(uv + ("no-sources",)) is True:
        raise _refuse(project, uv + ("no-sources",), None, "no-sources = true makes uv ignore [tool.uv.sources], "
                      "so Jetsons would take torch from the default index", fix="remove no-sources from [tool.uv]")
    environments = project.get(uv + ("environments",))
    if isinstance(environments, list) and environments and not any(
            isinstance(marker, str) and on_a_jetson(marker) for marker in environments):
        raise _refuse(project, uv + ("environments",), None, "environments leaves out Jetsons, so uv.lock would "
                      "resolve nothing for them", fix=f"add \"{BOARD_MARKER}\" to environments")
    groups = project.get(("dependency-groups",))
    if isinstance(groups, dict) and settings.group in groups and not project.ours(("dependency-groups", settings.group)):
        raise _refuse(project, ("dependency-groups", settings.group), None, f"the dependency group {settings.group} "
                      "is the project's own, and jetson-install names its channel's group so",
                      fix=f"rename the project's {settings.group} group")
    _check_sources(project, settings)
    _check_indexes(project, settings)
    _check_requirements(project, settings, channel)


def _check_workspace(project: _Project) -> None:
    """uv reads constraint-dependencies only at a workspace's root (https://docs.astral.sh/uv/reference/settings/#constraint-dependencies)."""
    here = project.path.parent.resolve()
    for parent in here.parents:
        candidate = parent / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            workspace = loads_toml(candidate.read_text(encoding="utf-8"), candidate).get("tool", {}).get("uv", {}).get(
                "workspace")
        except (OSError, UnicodeDecodeError, JetsonInstallError):
            continue
        if not isinstance(workspace, dict):
            continue
        relative = here.relative_to(parent).as_posix()
        members = [m for m in workspace.get("members", []) if isinstance(m, str)]
        excluded = [m for m in workspace.get("exclude", []) if isinstance(m, str)]
        if any(fnmatch.fnmatch(relative, m) for m in members) and not any(fnmatch.fnmatch(relative, m) for m in excluded):
            raise BadInput(f"{project.path}: is a member of the uv workspace at {candidate}, and uv reads "
                           "constraint-dependencies only from the workspace's root",
                           fix=f"jetson-install export --uv {parent}")


def _check_sources(project: _Project, settings: UvSettings) -> None:
    ours = dict(settings.sources)
    for name in VENDOR_PACKAGES:
        path = ("tool", "uv", "sources", name)
        value = project.get(path)
        if value is None:
            continue
        if isinstance(value, dict):
            if on_a_jetson(value.get("marker")):
                raise _refuse(project, path, None, f"takes {name} from {_described(value)} on Jetsons too, where "
                              f"{settings.channel.id}'s build must come from {_vendor(settings)}",
                              fix=_marker_fix(value, name))
            if name in ours:
                raise _refuse(project, path, None, f"is one source table; jetson-install adds {name}'s Jetson "
                              "source beside it in a list",
                              fix=f"write it as a list: {name} = [{_inline(value)}]")
            continue
        for position, item in project.users(path):
            if isinstance(item, dict) and on_a_jetson(item.get("marker")):
                raise _refuse(project, path, position, f"takes {name} from {_described(item)} on Jetsons too, where "
                              f"{settings.channel.id}'s build must come from {_vendor(settings)}",
                              fix=_marker_fix(item, name))


def _described(source: Mapping[str, Any]) -> str:
    for key in ("index", "url", "git", "path", "workspace"):
        if key in source:
            return f"the index {source[key]}" if key == "index" else f"{key} {source[key]}"
    return "another source"


def _vendor(settings: UvSettings) -> str:
    if settings.index is not None:
        return settings.index.value
    urls = dict(settings.sources)
    return "its wheel URL" if urls else "uv's default index"


def _marker_fix(source: Mapping[str, Any], name: str) -> str:
    marker = source.get("marker")
    held = f"({marker}) and 'tegra' not in platform_release" if marker else "'tegra' not in platform_release"
    return f"keep it off Jetsons: marker = \"{held}\" on {name}'s source"


def _inline(value: Mapping[str, Any]) -> str:
    return "{ " + ", ".join(f"{key_text((k,))} = {string(v) if isinstance(v, str) else str(v).lower()}"
                            for k, v in value.items()) + " }"


def _check_indexes(project: _Project, settings: UvSettings) -> None:
    path = ("tool", "uv", "index")
    value = project.get(path)
    if not isinstance(value, list):
        return
    _, region = region_statements(project.doc, project.marks)
    headers = [s for s in project.doc.statements if s.kind == "array-table" and s.path == path]
    if headers:  # [[tool.uv.index]] tables, in the order tomllib lists them
        theirs = [(project.doc.line(h.start), e) for h, e in zip(headers, value) if h not in region]
    else:  # index = [...] in [tool.uv]
        theirs = [(project.line(path, position), e) for position, e in project.users(path)]
    for line, entry in theirs:
        if not isinstance(entry, dict):
            continue
        where = f"{project.path}:{line}" if line else str(project.path)
        if entry.get("name") == settings.group:
            raise BadInput(f"{where}: the index {settings.group} is the project's own, and jetson-install names "
                           "its channel's index so", fix=f"rename the project's index {settings.group}")
        if settings.index is None and not entry.get("explicit") and not entry.get("default"):
            # uv searches such an index before the default one for every package (first-index):
            # https://docs.astral.sh/uv/concepts/indexes/#searching-across-multiple-indexes
            raise BadInput(f"{where}: the index {entry.get('name') or entry.get('url')} is searched before the "
                           f"default index, where {settings.channel.id}'s torch must come from on Jetsons",
                           fix="add explicit = true to it (and a [tool.uv.sources] entry for what it serves)")


def _requirements(project: _Project) -> Iterator[Tuple[Tuple[str, ...], int, str]]:
    """(path, position, requirement) of each of the project's own requirements."""
    for path in [("project", "dependencies")] + [
            ("project", "optional-dependencies", extra) for extra in (project.get(("project", "optional-dependencies"))
                                                                       or {})] + [
            ("dependency-groups", group) for group in (project.get(("dependency-groups",)) or {})]:
        for position, item in project.users(path):
            if isinstance(item, str):
                yield path, position, item


def _check_requirements(project: _Project, settings: UvSettings, channel: str) -> None:
    pins = settings.pins
    for path, position, text in _requirements(project):
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        name = canonicalize_name(requirement.name)
        if name not in VENDOR_PACKAGES or not on_a_jetson(str(requirement.marker) if requirement.marker else None):
            continue
        if requirement.url:
            raise _refuse(project, path, position, f"{text} takes {name} from a URL on Jetsons too, where {channel}'s "
                          "build must come from its source", fix=_OFF_JETSONS)
        version = pins.get(name)
        if version and not requirement.specifier.contains(version, prereleases=True):
            raise _refuse(project, path, position, f"{text} leaves out {channel}'s {name} {version}",
                          fix=f"allow {version} on Jetsons, e.g. \"{name}>={version.split('+')[0]}\"")
    for key in ("constraint-dependencies", "override-dependencies"):
        path = ("tool", "uv", key)
        for position, item in project.users(path):
            try:
                requirement = Requirement(item)
            except (InvalidRequirement, TypeError):
                continue
            name = canonicalize_name(requirement.name)
            if name not in pins and name not in VENDOR_PACKAGES and name != "numpy":
                continue
            if not on_a_jetson(str(requirement.marker) if requirement.marker else None):
                continue
            version = pins.get(name)
            if key == "override-dependencies" or (version and not requirement.specifier.contains(
                    version, prereleases=True)):
                what = "replaces" if key == "override-dependencies" else "leaves out"
                raise _refuse(project, path, position, f"{item} {what} {channel}'s {name}"
                              + (f" {version}" if version else "") + " on Jetsons", fix=_OFF_JETSONS)


# -- the edit -----------------------------------------------------------------------------------

def _apply(text: str, data: Mapping[str, Any], settings: UvSettings, previous_group: Optional[str] = None) -> str:
    marks = settings.marks
    if previous_group and previous_group != settings.group:
        text = set_array_block(text, ("dependency-groups",), previous_group, [], marks)
    text = set_array_block(text, ("dependency-groups",), settings.group, [string(r) for r in settings.requirements],
                           marks)
    uv = ("tool", "uv")
    if not _default_all(data):
        made = TomlText(text).key(uv + ("default-groups",)) is None
        text = set_array_block(text, uv, "default-groups", [string(settings.group)], marks)
        if made and _has_dev(data):
            # uv syncs the dev group by default while default-groups is unset: naming it keeps that.
            text = text.replace("default-groups = [\n", 'default-groups = [\n    "dev",\n', 1)
    text = set_array_block(text, uv, "constraint-dependencies", [string(c) for c in settings.constraints], marks)
    sources, untouched = dict(settings.sources), text
    for name in VENDOR_PACKAGES:
        text = set_array_block(text, uv + ("sources",), name, [sources[name]] if name in sources else [], marks)
    sourced = text != untouched
    if TomlText(text).key(uv + ("index",)) is None:
        text = set_region(text, _index_body(settings), marks)
    else:  # the project writes its indexes as `index = [...]` in [tool.uv]
        entry = (f"{{ name = {string(settings.group)}, url = {string(settings.index.value)}, explicit = true }}"
                 if settings.index is not None else None)
        text = set_array_block(text, uv, "index", [entry] if entry else [], marks)
    if sourced:  # a [tool.uv.sources] that held only the earlier channel's sources goes with them
        text = drop_empty_table(text, uv + ("sources",))
    return text


def _default_all(data: Mapping[str, Any]) -> bool:
    return bool(data.get("tool", {}).get("uv", {}).get("default-groups") == "all")


def _has_dev(data: Mapping[str, Any]) -> bool:
    groups = data.get("dependency-groups")
    return isinstance(groups, dict) and "dev" in groups


def _without_ours(data: Dict[str, Any], ours: Mapping[Tuple[str, ...], List[Any]]) -> Dict[str, Any]:
    """`data` less jetson-install's items (and what held nothing else), to compare the project's own."""
    import copy

    data = copy.deepcopy(data)
    for path, items in ours.items():
        parent: Any = data
        for part in path[:-1]:
            parent = parent.get(part, {}) if isinstance(parent, dict) else {}
        value = parent.get(path[-1]) if isinstance(parent, dict) else None
        if isinstance(value, list):
            for item in items:
                if item in value:
                    value.remove(item)
            if not value or (path[-1] == "default-groups" and value == ["dev"]):
                del parent[path[-1]]
    for path in (("tool", "uv", "sources"), ("tool", "uv"), ("tool",), ("dependency-groups",)):
        parent = data
        for part in path[:-1]:
            parent = parent.get(part, {})
        if parent.get(path[-1]) == {}:
            del parent[path[-1]]
    return data


def _managed(project: _Project, settings: UvSettings, previous_group: Optional[str]) -> Dict[Tuple[str, ...], List[Any]]:
    """jetson-install's items in the project, at each path it writes (the old and the new)."""
    uv: Tuple[str, ...] = ("tool", "uv")
    paths: List[Tuple[str, ...]] = [uv + ("default-groups",), uv + ("constraint-dependencies",), uv + ("index",)]
    paths += [uv + ("sources", name) for name in VENDOR_PACKAGES]
    paths += [("dependency-groups", group) for group in {settings.group, previous_group} if group]
    found: Dict[Tuple[str, ...], List[Any]] = {path: project.ours(path) for path in paths}
    span, _ = region_statements(project.doc, project.marks)
    if span is not None:
        region = loads_toml(project.doc.text[span[0]:span[1]], project.path)
        found[uv + ("index",)] += region.get("tool", {}).get("uv", {}).get("index", [])
    return found


def edit_project(path: Path, text: str, settings: UvSettings) -> UvEdit:
    """The project's pyproject.toml with `settings` in place of jetson-install's earlier ones, or
    a refusal that names the line where the project's own settings contradict them."""
    crlf = "\r\n" in text
    plain = text.replace("\r\n", "\n")
    data = loads_toml(plain, path)
    try:
        doc = TomlText(plain)
    except TomlEditError as exc:
        raise BadInput(f"{path}:{exc.line}: jetson-install cannot edit this file ({exc})",
                       fix=f"add the settings by hand: jetson-install export --uv --channel {settings.channel.id} "
                           "--print") from None
    project = _Project(path, data, doc, settings.marks)
    _check(project, settings)
    replaced = _previous(project)
    previous_group = str(canonicalize_name(f"jetson-{replaced}")) if replaced else None
    before = _managed(project, settings, previous_group)
    try:
        new = _apply(plain, data, settings, previous_group)
    except TomlEditError as exc:
        raise BadInput(f"{path}:{exc.line}: {exc}", fix=f"rewrite it as a table, or add the settings by hand: "
                       f"jetson-install export --uv --channel {settings.channel.id} --print") from None
    new_data = loads_toml(new, path)
    after = _managed(_Project(path, new_data, TomlText(new), settings.marks), settings, previous_group)
    wanted = _wanted(settings, data)
    mine = {key: value for key, value in after.items() if value}
    if mine != wanted or _without_ours(new_data, after) != _without_ours(data, before):
        raise JetsonInstallError(f"{path}: jetson-install could not edit it without changing the project's own "
                                 "settings; nothing was written",
                                 fix=f"add the settings by hand: jetson-install export --uv --channel "
                                     f"{settings.channel.id} --print")
    made = data.get("tool", {}).get("uv", {}).get("default-groups") is None
    return UvEdit(new.replace("\n", "\r\n") if crlf else new, replaced, new != plain, made, made and _has_dev(data))


def _wanted(settings: UvSettings, data: Mapping[str, Any]) -> Dict[Tuple[str, ...], List[Any]]:
    uv = ("tool", "uv")
    wanted: Dict[Tuple[str, ...], List[Any]] = {
        ("dependency-groups", settings.group): list(settings.requirements),
        uv + ("constraint-dependencies",): list(settings.constraints),
    }
    if not _default_all(data):
        wanted[uv + ("default-groups",)] = [settings.group]
    for name, source in settings.sources:
        wanted[uv + ("sources", name)] = [loads_toml(f"x = {source}\n")["x"]]
    if settings.index is not None:
        wanted[uv + ("index",)] = [{"name": settings.group, "url": settings.index.value, "explicit": True}]
    return wanted


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename, keeping its mode: an interrupted run leaves the old file."""
    temporary = path.with_name(f".{path.name}.jetson-install-{os.getpid()}")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def settings_lines(settings: UvSettings) -> Sequence[str]:
    """What the settings are, a line each, for the command's output."""
    lines = []
    if settings.index is not None:
        lines.append(f"[[tool.uv.index]] {settings.group}: {settings.index.value} (explicit: only for the packages "
                     "its sources name)")
    stack = {canonicalize_name(Requirement(line).name) for line in settings.requirements}
    names = ", ".join(name for name in VENDOR_PACKAGES if name in stack)
    if settings.sources:
        lines.append(f"[tool.uv.sources] {', '.join(name for name, _ in settings.sources)}: from "
                     f"{_vendor(settings)}, on Jetsons")
    else:
        lines.append(f"[tool.uv.sources] none: on Jetsons {names} come from uv's default index at the pinned "
                     "versions; uv.lock records each file's sha256, and uv sync installs only those files")
    pins = ", ".join(line.split(" ;")[0] for line in settings.constraints)
    lines.append(f"[tool.uv] constraint-dependencies: {pins}, on Jetsons")
    lines.append(f"[dependency-groups] {settings.group}: the stack a plain `uv sync` installs on Jetsons "
                 "([tool.uv] default-groups names it)")
    return lines
