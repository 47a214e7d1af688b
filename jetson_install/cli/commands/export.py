"""`export --uv`: a channel's protected stack as a uv project's settings, written into the
project's pyproject.toml (or printed), so that plain `uv sync` installs it on a Jetson."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from jetson_install.base.errors import BadInput, NotAJetson, Unsupported
from jetson_install.base.sourced import Sourced
from jetson_install.catalog.catalog import Channel, load_catalog
from jetson_install.catalog.settings import load_index_settings
from jetson_install.catalog.uv_export import UvEdit, edit_project, fragment, write_atomically
from jetson_install.catalog.uv_settings import UvSettings, uv_settings
from jetson_install.cli.commands.channels import unknown_channel
from jetson_install.cli.commands.given import PlatformOptions
from jetson_install.cli.commands.platform import detect_platform

__all__ = ["Exported", "export_uv"]


@dataclass(frozen=True)
class Exported:
    settings: UvSettings
    path: Optional[Path]  # the pyproject.toml written; None with --print
    edit: Optional[UvEdit]
    fragment: Optional[str]  # with --print: the settings as TOML


def _channel(channel_id: Optional[str], platform: PlatformOptions, root_given: bool) -> Channel:
    catalog = load_catalog()
    if channel_id is not None:
        if root_given:
            raise BadInput("--channel and --root were both given: the channel is named, or read from the root",
                           fix=f"jetson-install export --uv --channel {channel_id}")
        if channel_id not in {c.id for c in catalog.channels}:
            raise unknown_channel(catalog, channel_id)
        return catalog.channel(channel_id)
    try:
        found = detect_platform(platform)
    except NotAJetson as exc:
        raise NotAJetson(f"{exc.message}; export --uv writes a board's channel",
                         fix="name it: jetson-install export --uv --channel ID (see `jetson-install channels`)") from None
    match = catalog.match(found)
    if match.channel is None:
        raise Unsupported(match.reason, fix=match.remedy)
    return match.channel


def export_uv(project_dir: str, channel_id: Optional[str], platform: PlatformOptions, root_given: bool,
              vendor_index: Sourced[Optional[str]], print_only: bool) -> Exported:
    """The channel's settings (`channel_id`, else the board's under --root), written into
    PROJECT_DIR/pyproject.toml, or only shown with --print."""
    channel = _channel(channel_id, platform, root_given)
    index = load_index_settings(vendor_index.value, vendor_index.source, None, "uv default", False).vendor_index
    mirror = Sourced(index.value, index.source) if index.value is not None else None
    settings = uv_settings(load_catalog(), channel, mirror)
    if print_only:
        return Exported(settings, None, None, fragment(settings))
    folder = Path(project_dir).expanduser()
    path = folder / "pyproject.toml" if folder.is_dir() or not folder.name.endswith(".toml") else folder
    if not path.is_file():
        what = "has no pyproject.toml" if folder.is_dir() else "is not a folder"
        raise BadInput(f"{folder}: {what}; export --uv edits a uv project's pyproject.toml",
                       fix=f"make one (uv init {folder}), or see the settings: jetson-install export --uv --channel "
                           f"{channel.id} --print")
    try:
        text = path.read_bytes().decode("utf-8")  # as it is: CRLF stays CRLF
    except UnicodeDecodeError:
        raise BadInput(f"{path}: is not UTF-8 text", fix=f"save {path} as UTF-8") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror})", fix=f"check that {path} is a readable file") from None
    edit = edit_project(path, text, settings)
    if edit.changed:
        try:
            write_atomically(path, edit.text)
        except OSError as exc:
            raise BadInput(f"{path}: cannot be written ({exc.strerror})",
                           fix=f"check that you may write {path.parent}") from None
    return Exported(settings, path, edit, None)
