"""Constraints files: a channel's preferred vendor set, in pip/uv constraints syntax.

The same text protects an installed environment (pip.conf and UV_CONSTRAINT point
at it) and is checked in as constraints/<channel>.txt for people installing by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from jetson_install.catalog.catalog import Catalog, Channel
from jetson_install.base.errors import BadInput

__all__ = ["constraint_lines", "channel_constraint_lines", "render_channel_file", "expected_files", "write_files",
           "stale_files"]


def constraint_lines(requirements: Sequence[str], numpy: Optional[str]) -> List[str]:
    """`requirements` are lines such as "torch==2.8.0" or "bitsandbytes>=0.46.1,<0.51"."""
    lines = list(requirements)
    if numpy:
        lines.append(f"numpy{numpy}")
    return sorted(lines)


def channel_constraint_lines(catalog: Catalog, channel: Channel) -> List[str]:
    """What constraints/<channel>.txt holds: the preferred set's pins, NumPy's bound, and the
    caps every target's companions need for the channel's torch and Python."""
    source = channel.primary
    assert source is not None
    torch = source.preferred.pins.get("torch")
    caps = sorted({cap for target in catalog.targets.values() for cap, _ in target.caps_for(torch, channel.python)})
    return constraint_lines(source.preferred.requirement_lines() + caps, source.numpy)


def render_channel_file(channel: Channel, lines: Sequence[str]) -> str:
    """`lines`: the channel's constraints (`channel_constraint_lines`)."""
    source = channel.primary
    assert source is not None
    header = [
        f"# constraints/{channel.id}.txt: {channel.title}",
        f"# Vendor source: {source.location}",
        f"# Preferred set: {source.preferred.name} (wheels-index.toml lists {len(source.sets)} set(s) for this source)",
        "# Generated from wheels-index.toml by `jetson-install constraints --write`; do not edit by hand.",
        f"# Use: pip install -c constraints/{channel.id}.txt ...  or  UV_CONSTRAINT=constraints/{channel.id}.txt uv pip install ...",
    ]
    return "\n".join(header + list(lines)) + "\n"


def expected_files(catalog: Catalog) -> Dict[str, str]:
    """File name -> content, for every channel that can be installed."""
    files = {}
    for channel in catalog.channels:
        if channel.installable and channel.primary is not None:
            files[f"{channel.id}.txt"] = render_channel_file(channel, channel_constraint_lines(catalog, channel))
    return files


def _generated(path: Path) -> bool:
    """Only files this module wrote (they start with its header) are ever replaced or removed."""
    try:
        with path.open() as handle:
            return handle.readline().startswith(f"# constraints/{path.name}:")
    except (OSError, UnicodeDecodeError):
        return False


def stale_files(catalog: Catalog, directory: Path) -> List[str]:
    """Names of files in `directory` that differ from what `write_files` would write, or should not be there."""
    expected = expected_files(catalog)
    present = {path.name for path in directory.glob("*.txt") if _generated(path)} if directory.is_dir() else set()
    stale = [name for name, text in expected.items() if not (directory / name).is_file() or (directory / name).read_text() != text]
    stale.extend(sorted(present - set(expected)))
    return sorted(stale)


def write_files(catalog: Catalog, directory: Path) -> List[str]:
    """Write every channel's file; remove generated files of channels that are gone."""
    if directory.exists() and not directory.is_dir():
        raise BadInput(f"--dir {directory}: is not a directory", fix="jetson-install constraints --write --dir constraints")
    directory.mkdir(parents=True, exist_ok=True)
    expected = expected_files(catalog)
    for name, text in expected.items():
        path = directory / name
        if path.exists() and not _generated(path):
            raise BadInput(f"{path}: exists and was not written by jetson-install; it is left as it is",
                           fix=f"move {path} away, or write elsewhere: jetson-install constraints --write --dir DIR")
        path.write_text(text)
    for path in directory.glob("*.txt"):
        if path.name not in expected and _generated(path):
            path.unlink()
    return sorted(expected)
