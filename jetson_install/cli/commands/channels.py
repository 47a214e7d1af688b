"""`channels` and `constraints`: the channels of wheels-index.toml (and, with --check, their
vendor indexes read), and the constraints files generated from them."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from jetson_install.base.errors import BadInput, JetsonInstallError
from jetson_install.base.redact import redact
from jetson_install.board.platform_data import major_glibc
from jetson_install.catalog.catalog import Catalog, load_catalog
from jetson_install.catalog.constraints import stale_files, write_files
from jetson_install.catalog.settings import IndexSettings, check_index_url, load_index_settings
from jetson_install.base.sourced import Sourced
from jetson_install.tools import index
from jetson_install.tools.index import SetReport

__all__ = ["Channels", "channels", "unknown_channel", "check_channels", "constraint_files"]


@dataclass(frozen=True)
class Channels:
    catalog: Catalog
    reports: Optional[List[SetReport]]  # with --check: each source read; else None


def channels(channel_id: Optional[str], check: bool, vendor_index: Optional[str],
             mirrors: Sequence[str] = (), default_index: Optional[Sourced[Optional[str]]] = None) -> Channels:
    """The validated catalog, and with `check` its channels' sources read (or `channel_id`'s),
    with the mirrors and default index the configuration (or --mirror, --default-index) names."""
    catalog = load_catalog()
    if (channel_id or vendor_index or mirrors or (default_index and default_index.value)) and not check:
        if channel_id is not None and channel_id not in {c.id for c in catalog.channels}:
            raise unknown_channel(catalog, channel_id)
        raise BadInput("CHANNEL, --vendor-index, --mirror and --default-index go with --check",
                       fix="jetson-install channels --check [CHANNEL]")
    if not check:
        return Channels(catalog, None)
    given = default_index or Sourced(None, "--default-index")
    settings = load_index_settings(None, "--vendor-index", given.value, given.source, False, mirrors)
    return Channels(catalog, check_channels(catalog, channel_id, vendor_index, settings))


def unknown_channel(catalog: Catalog, channel_id: str, vendor_index: Optional[str] = None) -> BadInput:
    """A channel name that is not in the catalog, with the closest one's whole command."""
    names = [channel.id for channel in catalog.channels]
    close = difflib.get_close_matches(channel_id, names, n=1, cutoff=0.6)
    if not close:
        return BadInput(f"no channel {channel_id!r} in {catalog.path}", fix="list them: jetson-install channels")
    command = f"jetson-install channels --check {close[0]}" + (f" --vendor-index {redact(vendor_index)}"
                                                                 if vendor_index else "")
    return BadInput(f"no channel {channel_id!r} in {catalog.path}; did you mean {close[0]}?", fix=command)


def check_channels(catalog: Catalog, channel_id: Optional[str], vendor_index: Optional[str],
                   settings: Optional[IndexSettings] = None) -> List[SetReport]:
    """Each installable channel's sources read (or one mirror for each): `channels --check`.
    Each mirror of a channel's first source (the catalog's, and `settings`' --mirror, mirrors
    and wheelhouse) gets a report of its own; a source on uv's default index is read on the
    default index `settings` name (--default-index or the configuration)."""
    if channel_id is not None and channel_id not in {c.id for c in catalog.channels}:
        raise unknown_channel(catalog, channel_id, vendor_index)
    if vendor_index:
        check_index_url(vendor_index, "--vendor-index", allow_insecure=False)
    default_index = settings.default_index.value if settings else None
    reports = []
    for channel in catalog.channels:
        if (channel_id and channel.id != channel_id) or not channel.installable:
            continue
        python, glibc = channel.python, major_glibc(channel.l4t_from[0])
        for position, source in enumerate(channel.sources):
            if source.wheels:
                continue  # direct files: nothing is listed to check
            where = vendor_index if vendor_index and position == 0 else (
                default_index if source.default_index else source.index)
            reports.append(index.check_source(channel.id, source, where, python, glibc, not_read=(
                "uv's own default index is read only when named: --default-index URL, or default_index in the "
                "configuration")))
            if position == 0 and where:
                first = reports[-1].index
                user = tuple(mirror.value for mirror in settings.mirrors) if settings else ()
                for mirror in dict.fromkeys((*source.mirrors, *user)):
                    reports.append(index.check_source(channel.id, source, mirror, python, glibc, mirror_of=first))
            if vendor_index:
                break  # a mirror stands for the channel's first index
    return reports


def constraint_files(directory: str, write: bool) -> List[str]:
    """`constraints`: check (or rewrite) constraints/<channel>.txt against wheels-index.toml."""
    catalog = load_catalog()
    target = Path(directory)
    if write:
        return [f"wrote {target / name}" for name in write_files(catalog, target)]
    if not target.is_dir():
        raise BadInput(f"--dir {directory}: no such directory (`constraints` is a maintainer command for a "
                       "checkout of jetson-install; an installed one needs no constraints/ folder)",
                       fix="run it at the top of a jetson-install checkout, or pass --dir DIR")
    stale = stale_files(catalog, target)
    if stale:
        raise JetsonInstallError(f"out of date in {target}: {', '.join(stale)}",
                                 fix=f"jetson-install constraints --write --dir {directory}")
    return [f"{target}: up to date with {catalog.path}"]
