"""`channels` and `constraints`: the channels of wheels-index.toml (and, with --check, their
vendor indexes read and each source judged: its preferred set present and unchanged, newer sets),
and the constraints files generated from them."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from packaging.version import Version

from jetson_install.base.errors import (
    EXIT_CHECK_UNLISTED,
    EXIT_CHECK_UNREACHABLE,
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    IndexRefused,
    IndexUnreachable,
    JetsonInstallError,
)
from jetson_install.base.redact import redact
from jetson_install.base.tags import wheel_tags
from jetson_install.board.platform_data import major_glibc
from jetson_install.catalog.catalog import Catalog, VendorSource, load_catalog
from jetson_install.catalog.constraints import stale_files, write_files
from jetson_install.catalog.identity import IdentityMismatch, NothingInPolicy
from jetson_install.catalog.resolve import complete_set, served_pythons
from jetson_install.catalog.settings import IndexSettings, check_index_url, load_index_settings
from jetson_install.base.sourced import Sourced
from jetson_install.planning.vendor_sources import ARCH, recorded_only
from jetson_install.tools.index import recorded_url, source_listings
from jetson_install.planning.rerun import Rerun

__all__ = ["Channels", "channels", "unknown_channel", "check_channels", "CHECK_STATUSES", "SetReport",
           "check_exit_code", "check_source", "constraint_files"]


@dataclass(frozen=True)
class Channels:
    catalog: Catalog
    reports: Optional[List[SetReport]]  # with --check: each source read; else None


def channels(channel_id: Optional[str], check: bool, vendor_index: Optional[str], mirrors: Sequence[str],
             default_index: Optional[Sourced[Optional[str]]], rerun: Rerun) -> Channels:
    """The validated catalog, and with `check` its channels' sources read (or `channel_id`'s),
    with the mirrors and default index the configuration (or --mirror, --default-index) names;
    `rerun`: the command as typed, which a refusal's fix repeats with --check."""
    catalog = load_catalog()
    if (channel_id or vendor_index or mirrors or (default_index and default_index.value)) and not check:
        if channel_id is not None and channel_id not in {c.id for c in catalog.channels}:
            raise unknown_channel(catalog, channel_id)
        raise BadInput("CHANNEL, --vendor-index, --mirror and --default-index go with --check",
                       fix=f"run it with --check: {rerun.with_flag('--check')}")
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
            reports.append(check_source(channel.id, source, where, python, glibc, not_read=(
                "uv's own default index is read only when named: --default-index URL, or default_index in the "
                "configuration")))
            if position == 0 and where:
                first = reports[-1].index
                user = tuple(mirror.value for mirror in settings.mirrors) if settings else ()
                insecure = settings.allow_insecure if settings else False
                for mirror in dict.fromkeys((*(own.value for own in source.mirrors), *user)):
                    reports.append(check_source(channel.id, source, mirror, python, glibc, mirror_of=first,
                                                allow_insecure=insecure))
            if vendor_index:
                break  # a mirror stands for the channel's first index
    return reports


#: `channels --check` statuses, and the exit code each gives (the README's table).
CHECK_STATUSES = {"ok": EXIT_OK, "not-read": EXIT_OK, "missing": EXIT_FAILED, "changed": EXIT_FAILED,
                  "unreachable": EXIT_CHECK_UNREACHABLE, "unlisted": EXIT_CHECK_UNLISTED}


@dataclass(frozen=True)
class SetReport:
    """`channels --check` for one source: the preferred set present and unchanged, newer sets.

    `status`: ok; not-read (a source with no index to list); missing (the index lacks part of
    the preferred set); changed (a recorded file name served with another sha256);
    unreachable; unlisted (the preferred set is there, but none of its files is one
    wheels-index.toml records: another build of the same versions, not proven the vendor's).
    """

    channel: str
    index: str
    status: str
    lines: Tuple[str, ...]
    mirror_of: Optional[str] = None  # a mirror's report: the source whose recorded builds it serves

    @property
    def ok(self) -> bool:
        return CHECK_STATUSES[self.status] == 0


def check_exit_code(reports: Sequence[SetReport]) -> int:
    """The worst finding decides: a missing or changed build (1) over an index that did not
    answer (4) over an unlisted set (5)."""
    codes = {CHECK_STATUSES[report.status] for report in reports} - {EXIT_OK}
    for code in (EXIT_FAILED, EXIT_CHECK_UNREACHABLE, EXIT_CHECK_UNLISTED):
        if code in codes:
            return code
    return 0


def check_source(channel_id: str, source: VendorSource, index: Optional[str], python: str, glibc: str,
                 mirror_of: Optional[str] = None, not_read: str = "the source has no index URL to list", allow_insecure: bool = False) -> SetReport:
    """`channels --check` of `source` on `index`; `mirror_of`: `index` is a mirror of that
    source, which counts only the recorded builds (ok, missing, changed or unreachable)."""
    where = recorded_url(index) if index else source.location
    if index is None:
        return SetReport(channel_id, where, "not-read", (f"not read: {not_read}",))
    try:
        listings = source_listings(source, index, allow_insecure)
    except (IndexUnreachable, IndexRefused) as exc:  # not read, the message says why
        return SetReport(channel_id, where, "unreachable", (exc.message,), mirror_of)
    if mirror_of is not None:
        listings = recorded_only(source, listings)
    known = {build.file: build for build in source.builds}
    lines: List[str] = []
    try:
        preferred = complete_set(where, source.preferred, source.prereleases, known, listings,
                                 wheel_tags(python, ARCH, glibc))
    except IdentityMismatch as exc:
        return SetReport(channel_id, where, "changed", (f"preferred set {source.preferred.name}: {exc.message}",),
                         mirror_of)
    status = "ok"
    if preferred is None:
        status = "missing"
        line = f"preferred set {source.preferred.name}: missing for Python {python} (the index does not list all of it)"
        others = []
        for other in served_pythons(listings):
            try:
                if other != python and complete_set(where, source.preferred, source.prereleases, known, listings,
                                                    wheel_tags(other, ARCH, glibc)):
                    others.append(other)
            except IdentityMismatch as exc:  # a changed build is the finding, whichever Python it is for
                return SetReport(channel_id, where, "changed", (f"{line}; for Python {other}: {exc.message}",),
                                 mirror_of)
        if others:
            line += (f"; it has the set for Python {', '.join(others)}, which an install with that interpreter "
                     "takes (--python)")
        lines.append(line)
    else:
        unknown = [chosen.file for chosen in preferred if not chosen.known]
        if unknown and len(unknown) == len(preferred):
            status = "unlisted"
            lines.append(f"preferred set {source.preferred.name}: present, but none of its files is a build "
                         f"wheels-index.toml lists: {', '.join(unknown)}")
        else:
            lines.append(f"preferred set {source.preferred.name}: present"
                         + (f"; not in wheels-index.toml: {', '.join(unknown)}" if unknown else ", hashes unchanged"))

    floor = Version(preferred[0].version) if preferred else None
    tags = wheel_tags(python, ARCH, glibc)
    for version_set in source.sets:
        if version_set is source.preferred:
            continue
        try:
            found = complete_set(where, version_set, source.prereleases, known, listings, tags)
        except (IdentityMismatch, NothingInPolicy) as exc:
            lines.append(f"set {version_set.name}: {exc.message}")
            continue
        if found and (floor is None or Version(found[0].version) > floor):
            lines.append(f"newer set within policy: {version_set.name} ({', '.join(c.file for c in found)})")
    return SetReport(channel_id, where, status, tuple(lines), mirror_of)


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
