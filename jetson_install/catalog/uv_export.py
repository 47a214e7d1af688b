"""A channel's uv settings (catalog/uv_settings.py) edited into a project's pyproject.toml: only
jetson-install's own lines, between its marks, are rewritten; a project whose own settings
contradict them is refused first (catalog/uv_project.py), and an edit that would change any of
the project's own settings writes nothing. `fragment` is the settings as a project with none of
these tables gets them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from packaging.utils import canonicalize_name

from jetson_install.base.errors import BadInput, JetsonInstallError
from jetson_install.base.toml_file import loads_toml
from jetson_install.base.toml_edit import drop_empty_table, region_statements, set_array_block, set_region
from jetson_install.base.toml_text import TomlEditError, TomlText, string
from jetson_install.catalog.identity import VENDOR_PACKAGES
from jetson_install.catalog.uv_project import Project, check, previous
from jetson_install.catalog.uv_settings import BOARD_MARKER, UvSettings

__all__ = ["UvEdit", "fragment", "edit_project", "write_atomically"]


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


def _managed(project: Project, settings: UvSettings, previous_group: Optional[str]) -> Dict[Tuple[str, ...], List[Any]]:
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
    project = Project(path, data, doc, settings.marks)
    check(project, settings)
    replaced = previous(project)
    previous_group = str(canonicalize_name(f"jetson-{replaced}")) if replaced else None
    before = _managed(project, settings, previous_group)
    try:
        new = _apply(plain, data, settings, previous_group)
    except TomlEditError as exc:
        raise BadInput(f"{path}:{exc.line}: {exc}", fix=f"rewrite it as a table, or add the settings by hand: "
                       f"jetson-install export --uv --channel {settings.channel.id} --print") from None
    new_data = loads_toml(new, path)
    after = _managed(Project(path, new_data, TomlText(new), settings.marks), settings, previous_group)
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
