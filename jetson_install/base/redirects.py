"""Which redirects keep what a source guarantees: the one rule for every download the tool
makes itself (vendor indexes, mirrors, registries)."""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

from jetson_install.base.redact import redact

__all__ = ["refused_redirect", "MAX_REDIRECTS"]

#: How many redirects are followed for one request (requests' own limit is 30).
MAX_REDIRECTS = 10


def refused_redirect(source: str, target: str) -> Optional[str]:
    """Why a redirect from `source` to `target` is not followed, or None where it is: an https
    source's to https (a registry's storage on a CDN, a mirror's), a plain-http source's
    (loopback, or allowed insecure) to its own host only, and never off http(s) (file:, ftp:).
    Followed, a loopback source could send the tool to any host, an https one to plain http."""
    here, there = urlsplit(source), urlsplit(target)
    if there.scheme not in ("http", "https"):
        return f"redirected off {here.scheme}, {redact(target)}, which is not followed"
    if (there.scheme, there.hostname, there.port) == (here.scheme, here.hostname, here.port):
        return None
    if here.scheme == "https" and there.scheme == "https":
        return None
    off = "to plain http" if here.scheme == "https" else "to another host"
    return f"redirected {off}, {redact(target)}, which is not followed"
