"""A registry read as a mirror of the recorded builds: which of them it serves, as a listing
whose files are named by their digest, and a blob fetched by the reference a listing gave.
Nothing here trusts a name: a blob is the build only by its digest, checked as it arrives
(tools/oci.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from jetson_install.base.oci_ref import Reference
from jetson_install.catalog.resolve import ListedFile
from jetson_install.tools.oci import registry_for

__all__ = ["recorded_listings", "blob_reference", "fetch_by_reference"]


def blob_reference(reference: Reference, sha256: str) -> str:
    """How a listing names a blob of the repository: its reference by digest (a tag never moves it)."""
    return str(Reference(reference.host, reference.repository, None, f"sha256:{sha256}"))


def recorded_listings(reference: Reference, builds: Mapping[str, List[Tuple[str, str]]],
                      plain_http_allowed: bool) -> Dict[str, List[ListedFile]]:
    """What a registry serves of the recorded builds, as a listing: for each project, each
    build (file name, sha256) whose blob the repository holds, named by its digest. With a tag
    or digest, its manifest says which it holds (one request); without, each blob is asked for
    (HEAD). Nothing here trusts a name: a blob is the build only by its digest."""
    registry = registry_for(reference, plain_http_allowed)
    manifest = registry.manifest(reference) if reference.manifest_reference else None
    held = manifest.by_digest() if manifest is not None else None
    # A manifest that titles a recorded file with another digest serves another build under
    # its name: listed with the digest it has, so that the reader refuses it as changed, as it
    # refuses an index's (catalog/resolve.complete_set), instead of counting it missing.
    titled = {layer.title: layer.digest for layer in manifest.layers} if manifest is not None else {}

    def served(file: str, sha256: str) -> Optional[str]:
        if held is not None:
            return sha256 if f"sha256:{sha256}" in held else _hex(titled.get(file))
        return sha256 if registry.blob_size(reference, f"sha256:{sha256}") is not None else None

    listings: Dict[str, List[ListedFile]] = {}
    for project, files in builds.items():
        found = [(file, served(file, sha256)) for file, sha256 in files]
        listings[project] = [ListedFile(file, blob_reference(reference, digest), digest) for file, digest in found
                             if digest is not None]
    return listings


def _hex(digest: Optional[str]) -> Optional[str]:
    """A layer's `sha256:HEX` digest as the hex a listing carries; None for none, or another algorithm."""
    return digest[len("sha256:"):] if digest is not None and digest.startswith("sha256:") else None


def fetch_by_reference(blob: str, destination: Path, plain_http_allowed: bool) -> int:
    """The blob `blob` (an `oci://HOST/REPOSITORY@sha256:...` a listing gave) into `destination`, checked."""
    from jetson_install.base.oci_ref import parse_reference

    reference = parse_reference(blob, "a blob")
    assert reference.digest is not None
    return registry_for(reference, plain_http_allowed).fetch_blob(reference, reference.digest, destination)
