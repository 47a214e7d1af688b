"""`detect`: the board's platform from the options that name it, and its channel."""

from __future__ import annotations

from typing import Optional, Tuple

from jetson_install.base.errors import NotAJetson
from jetson_install.base.sourced import Sourced
from jetson_install.board.platform import Platform, detect
from jetson_install.board.samples import resolve_root
from jetson_install.catalog.catalog import Channel, load_catalog
from jetson_install.cli.commands.given import PlatformOptions

__all__ = ["detect_platform", "platform_and_channel"]


def detect_platform(options: PlatformOptions) -> Platform:
    override = Sourced(options.l4t.value, options.l4t.source) if options.l4t.value is not None else None
    soc = Sourced(options.soc.value, options.soc.source) if options.soc.value is not None else None
    root = options.root.value if options.root.value is not None else "/"  # "" is refused, not taken as /
    return detect(resolve_root(root, options.root.source), override, soc_override=soc)


def platform_and_channel(options: PlatformOptions) -> Tuple[Optional[Platform], Optional[Channel]]:
    """The platform and its channel, or (None, None) off a Jetson: doctor still checks torch there."""
    try:
        platform = detect_platform(options)
    except NotAJetson:
        return None, None
    return platform, load_catalog().match(platform).channel
