"""A certificate authority of a test's own, and a server certificate it signs for loopback
addresses: what a proxy with its own authority, or a registry behind https, presents. openssl
makes them (a test using this is slow: two RSA keys)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple, Sequence


class Authority(NamedTuple):
    """The authority's certificate (what a client is told to trust), and the server's own."""

    ca: Path
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=120)


def local_authority(folder: Path, addresses: Sequence[str], name: str = "a test authority") -> Authority:
    """An authority called `name` in `folder`, and a certificate it signs for `addresses` (IPs)."""
    ca_key, ca, key, request, cert = (folder / part for part in ("ca.key", "ca.pem", "key.pem", "req.csr", "cert.pem"))
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "1",
             "-subj", f"/CN={name}")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request), "-subj",
             f"/CN={addresses[0]}")
    (folder / "san.cnf").write_text("subjectAltName=" + ",".join(f"IP:{address}" for address in addresses) + "\n")
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "1", "-extfile", str(folder / "san.cnf"))
    return Authority(ca, cert, key)
