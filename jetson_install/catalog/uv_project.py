"""A uv project's pyproject.toml as it stands, and what its own settings say: where one
contradicts a channel's settings (takes torch from elsewhere on Jetsons, leaves out its pins,
ignores its sources, is a workspace member uv reads no constraints from), the refusal names its
line and the fix; which channel's settings it already holds.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jetson_install.base.errors import BadInput, JetsonInstallError
from jetson_install.base.toml_file import loads_toml
from jetson_install.base.toml_edit import array_block_lines, region_statements
from jetson_install.base.toml_text import Marks, TomlText, key_text, string
from jetson_install.board.root_facts import KERNEL
from jetson_install.board.samples import SAMPLES_DIR, sample_names
from jetson_install.catalog.identity import VENDOR_PACKAGES
from jetson_install.catalog.uv_settings import BEGIN, BOARD_MARKER, UvSettings, vendor

__all__ = ["Project", "on_a_jetson", "check", "previous"]

#: The fix for a requirement of the project's own that must not hold on Jetsons.
_OFF_JETSONS = "keep it off Jetsons: add \" ; 'tegra' not in platform_release\" to it (or `and` that to its marker)"
_PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


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
class Project:
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


def _refuse(project: Project, path: Tuple[str, ...], item: Optional[int], what: str, fix: str) -> BadInput:
    return BadInput(f"{project.where(path, item)}: {what}", fix=fix)


def previous(project: Project) -> Optional[str]:
    """The channel whose settings the file holds (the begin mark names it)."""
    for comment in project.doc.comments:
        text = project.doc.text[comment.start:comment.end]
        if text.startswith(f"{BEGIN}: "):
            return text[len(f"{BEGIN}: "):].split(" ", 1)[0]
    return None


def check(project: Project, settings: UvSettings) -> None:
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


def _check_workspace(project: Project) -> None:
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


def _check_sources(project: Project, settings: UvSettings) -> None:
    ours = dict(settings.sources)
    for name in VENDOR_PACKAGES:
        path = ("tool", "uv", "sources", name)
        value = project.get(path)
        if value is None:
            continue
        if isinstance(value, dict):
            if on_a_jetson(value.get("marker")):
                raise _refuse(project, path, None, f"takes {name} from {_described(value)} on Jetsons too, where "
                              f"{settings.channel.id}'s build must come from {vendor(settings)}",
                              fix=_marker_fix(value, name))
            if name in ours:
                raise _refuse(project, path, None, f"is one source table; jetson-install adds {name}'s Jetson "
                              "source beside it in a list",
                              fix=f"write it as a list: {name} = [{_inline(value)}]")
            continue
        for position, item in project.users(path):
            if isinstance(item, dict) and on_a_jetson(item.get("marker")):
                raise _refuse(project, path, position, f"takes {name} from {_described(item)} on Jetsons too, where "
                              f"{settings.channel.id}'s build must come from {vendor(settings)}",
                              fix=_marker_fix(item, name))


def _described(source: Mapping[str, Any]) -> str:
    for key in ("index", "url", "git", "path", "workspace"):
        if key in source:
            return f"the index {source[key]}" if key == "index" else f"{key} {source[key]}"
    return "another source"


def _marker_fix(source: Mapping[str, Any], name: str) -> str:
    marker = source.get("marker")
    held = f"({marker}) and 'tegra' not in platform_release" if marker else "'tegra' not in platform_release"
    return f"keep it off Jetsons: marker = \"{held}\" on {name}'s source"


def _inline(value: Mapping[str, Any]) -> str:
    return "{ " + ", ".join(f"{key_text((k,))} = {string(v) if isinstance(v, str) else str(v).lower()}"
                            for k, v in value.items()) + " }"


def _check_indexes(project: Project, settings: UvSettings) -> None:
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


def _requirements(project: Project) -> Iterator[Tuple[Tuple[str, ...], int, str]]:
    """(path, position, requirement) of each of the project's own requirements."""
    for path in [("project", "dependencies")] + [
            ("project", "optional-dependencies", extra) for extra in (project.get(("project", "optional-dependencies"))
                                                                       or {})] + [
            ("dependency-groups", group) for group in (project.get(("dependency-groups",)) or {})]:
        for position, item in project.users(path):
            if isinstance(item, str):
                yield path, position, item


def _check_requirements(project: Project, settings: UvSettings, channel: str) -> None:
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
