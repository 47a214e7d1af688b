"""`oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:DIGEST]`: where an OCI registry keeps a
wheelhouse (or a catalog's builds), read and written back. Pure: nothing here talks HTTP
(tools/oci.py does).

A reference never carries credentials: a user and token on the command line would show in
`ps` and the shell's history, so they come from ~/.docker/config.json or ~/.netrc, as the
registry's other clients read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from jetson_install.base.errors import BadInput

__all__ = ["SCHEME", "Reference", "is_oci", "parse_reference", "DIGEST"]

SCHEME = "oci://"
# The repository name, the tag and the digest, as the distribution spec writes them:
# https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests
_REPOSITORY = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*")
_TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
#: A sha256 digest as registries name blobs and manifests (the only algorithm a lock records).
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A host name (RFC 1123 labels), an IPv4 address or a bracketed IPv6 one, and a port.
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_EXAMPLE = "give it as oci://HOST[:PORT]/REPOSITORY:TAG or oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST"


@dataclass(frozen=True)
class Reference:
    """A repository of a registry, and the tag or digest of one manifest in it (or neither:
    a repository whose blobs are fetched by their digests alone)."""

    host: str  # HOST[:PORT], as given
    repository: str
    tag: Optional[str] = None
    digest: Optional[str] = None  # sha256:HEX

    def __str__(self) -> str:
        text = f"{SCHEME}{self.host}/{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        return text + (f"@{self.digest}" if self.digest else "")

    @property
    def hostname(self) -> str:
        """The host without its port (and IPv6 brackets): ~/.netrc's `machine`."""
        host = self.host.rsplit(":", 1)[0] if not self.host.endswith("]") and ":" in self.host else self.host
        return host.strip("[]")

    @property
    def manifest_reference(self) -> Optional[str]:
        """What the manifest is asked for by: its digest where given (then no tag can move it), else its tag."""
        return self.digest or self.tag

    def pinned(self, digest: str) -> "Reference":
        """The same repository and tag, pinned to one manifest's digest."""
        return replace(self, digest=digest)


def is_oci(text: str) -> bool:
    return text.startswith(SCHEME)


def parse_reference(text: str, where: str) -> Reference:
    """`text` (an oci:// reference) read, or BadInput naming `where` it was given and the form it takes."""
    if not is_oci(text):
        raise BadInput(f"{where}: {text!r} is not an oci:// reference", fix=_EXAMPLE)
    rest = text[len(SCHEME):]
    host, slash, path = rest.partition("/")
    if "@" in host:
        raise BadInput(f"{where}: {SCHEME}{host.rpartition('@')[2]}/... carries credentials, which would show in the "
                       "process list and the shell's history",
                       fix="drop USER:TOKEN@ and give them where registries' clients read them: `docker login HOST` "
                           "(~/.docker/config.json, or its credential helper) or ~/.netrc (machine HOST login USER "
                           "password TOKEN)")
    if not slash or not _HOST.fullmatch(host) or not _valid_port(host):
        raise BadInput(f"{where}: {text!r} names no registry host (HOST or HOST:PORT) before its repository",
                       fix=_EXAMPLE)
    digest = None
    if "@" in path:
        path, _, digest = path.partition("@")
        if not DIGEST.fullmatch(digest):
            raise BadInput(f"{where}: {text!r}: {digest!r} is not a sha256 digest (sha256: and 64 hex digits)",
                           fix=_EXAMPLE)
    tag = None
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, _, tag = path.rpartition(":")
        if not _TAG.fullmatch(tag):
            raise BadInput(f"{where}: {text!r}: {tag!r} is not a tag (letters, digits, '_', '.', '-'; at most 128)",
                           fix=_EXAMPLE)
    if not _REPOSITORY.fullmatch(path):
        raise BadInput(f"{where}: {text!r}: {path!r} is not a repository name (lowercase letters and digits, "
                       "separated by '.', '_', '-' or '/')", fix=_EXAMPLE)
    return Reference(host, path, tag, digest)


def _valid_port(host: str) -> bool:
    if host.endswith("]") or ":" not in host:
        return True
    port = host.rsplit(":", 1)[1]
    return 0 < int(port) < 65536
