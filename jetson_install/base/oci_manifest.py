"""What a wheelhouse pushed to an OCI registry is: one OCI image manifest whose layers are its
files, each named by the `org.opencontainers.image.title` annotation, as `oras push` writes
files (https://oras.land/docs/commands/oras_push), so `oras pull` reads it too; its config is
the empty descriptor. Pure: tools/oci.py sends and reads it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

__all__ = ["MANIFEST_TYPE", "ARTIFACT_TYPE", "TITLE", "EMPTY", "Layer", "Manifest", "sha256_digest",
           "wheelhouse_manifest"]

# The media types of an OCI image manifest and of its unused config, the empty descriptor
# (https://github.com/opencontainers/image-spec/blob/main/manifest.md#guidance-for-an-empty-descriptor).
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
_EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
# What `oras push` gives a file's layer by default (https://oras.land/docs/commands/oras_push).
_FILE_TYPE = "application/vnd.oci.image.layer.v1.tar"
# An artifact sets artifactType where its config is empty
# (https://github.com/opencontainers/image-spec/blob/main/artifacts-guidance.md).
ARTIFACT_TYPE = "application/vnd.jetson-install.wheelhouse.v1"
# A layer's file name (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
TITLE = "org.opencontainers.image.title"


@dataclass(frozen=True)
class Layer:
    """One file of a manifest: its name (the title annotation), digest and size."""

    title: str
    digest: str
    size: int


@dataclass(frozen=True)
class Manifest:
    """A manifest as the registry served it: its digest (of these very bytes) and its layers."""

    digest: str
    layers: Tuple[Layer, ...]
    artifact_type: Optional[str]

    def by_digest(self) -> Dict[str, Layer]:
        return {layer.digest: layer for layer in self.layers}


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def wheelhouse_manifest(layers: List[Layer]) -> bytes:
    """An OCI image manifest of `layers` (the wheelhouse's files, in order), its config the
    empty descriptor and its artifactType the wheelhouse's. Deterministic: the same files give
    the same bytes, so the same digest."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": _EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY),
                   "data": base64.b64encode(EMPTY).decode("ascii")},
        "layers": [{"mediaType": _FILE_TYPE, "digest": layer.digest, "size": layer.size,
                    "annotations": {TITLE: layer.title}} for layer in layers],
    }
    return json.dumps(manifest, indent=2, sort_keys=False).encode("utf-8")
