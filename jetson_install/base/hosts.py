"""Which hosts a plain-http URL may name without --allow-insecure-index: loopback only, the one
rule for an index (catalog/settings.py) and a registry (tools/oci.py)."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Loopback only in forms every URL parser reads alike: 'localhost', a canonical IPv4
    address (uv reads '0127.0.0.1' as octal, 87.0.0.1) or an IPv6 one; never a %-escaped host."""
    if host == "localhost":
        return True
    if "%" in host:  # a %-escaped host, or an IPv6 zone: read differently by different parsers
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback and (address.version == 6 or str(address) == host)
