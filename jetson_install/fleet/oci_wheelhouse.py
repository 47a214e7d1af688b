"""`wheelhouse DIR --push oci://HOST[:PORT]/REPOSITORY:TAG`: a wheelhouse put in an OCI
registry as one artifact, so a fleet installs from the registry it already runs (and its
pull-through caches) with the hashes of its own lock deciding.

Every file of the wheelhouse's lock is one blob, whose digest is the file's sha256, and the
lock itself another; the manifest names each by the `org.opencontainers.image.title`
annotation, as `oras push` does (base/oci_manifest.py). Each file is checked against the lock before it
is sent, and the registry checks each blob against its digest on arrival.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Callable, Dict, List

from jetson_install.base.errors import BadInput, RegistryError, StepFailed
from jetson_install.base.oci_manifest import Layer, wheelhouse_manifest
from jetson_install.base.oci_ref import Reference
from jetson_install.catalog.lock_file import FILES_DIR, WHEELHOUSE_LOCK, file_sha256, parse_lock, read_lock_text
from jetson_install.tools.oci import registry_for

__all__ = ["push_wheelhouse", "registry_runner_command"]


def registry_runner_command(target: str, pinned: Reference) -> str:
    """What each runner runs: the manifest's digest pins the lock it carries, and the lock each file."""
    return f"jetson-install {target} --wheelhouse {pinned}"


def push_wheelhouse(directory: Path, reference: Reference, allow_insecure: bool,
                    progress: Callable[[str], None]) -> Dict[str, Any]:
    """Push the wheelhouse in `directory` (filled by `wheelhouse DIR --lock FILE`) to `reference`'s
    repository under its tag: every file of its lock, checked against the lock first, then the
    lock, then the manifest. Blobs the repository holds already are not sent again."""
    if reference.tag is None or reference.digest is not None:
        raise BadInput(f"--push {reference}: a push names the tag it puts the wheelhouse under, and no digest "
                       "(the registry gives the manifest its digest)",
                       fix=f"name a tag: --push oci://{reference.host}/{reference.repository}:TAG")
    refill = f"fill it from its lock first: jetson-install wheelhouse {directory} --lock FILE"
    if not os.path.lexists(directory / WHEELHOUSE_LOCK):
        raise BadInput(f"{directory} is not a wheelhouse (it has no {WHEELHOUSE_LOCK})", fix=refill)
    text = read_lock_text(directory / WHEELHOUSE_LOCK, str(directory / WHEELHOUSE_LOCK), follow=False, fix=refill)
    lock, raw = parse_lock(text, str(directory / WHEELHOUSE_LOCK)), text.encode("utf-8")
    layers: List[Layer] = []
    paths: Dict[str, Path] = {}
    for entry in {entry.sha256: entry for entry in lock.entries}.values():
        path = directory / FILES_DIR / entry.filename
        try:
            status = os.lstat(path)
        except OSError:
            raise BadInput(f"{path} is missing: the wheelhouse lacks a file of its lock", fix=refill) from None
        if not stat.S_ISREG(status.st_mode):
            raise BadInput(f"{path} is not a regular file (a link, or a folder): only the wheelhouse's own files are "
                           "pushed", fix=refill)
        if file_sha256(path) != entry.sha256:
            raise BadInput(f"{path} does not have the sha256 its lock names ({entry.sha256})", fix=refill)
        digest = f"sha256:{entry.sha256}"
        layers.append(Layer(entry.filename, digest, status.st_size))
        paths[digest] = path
    lock_layer = Layer(WHEELHOUSE_LOCK, "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw))
    sent = sent_bytes = 0
    try:
        registry = registry_for(reference, allow_insecure)
        for number, layer in enumerate(layers, 1):
            if registry.push_blob(reference, layer.digest, layer.size, paths[layer.digest]):
                sent, sent_bytes = sent + 1, sent_bytes + layer.size
                progress(f"pushed {number}/{len(layers)}: {layer.title} ({layer.size} bytes)")
            else:
                progress(f"pushed {number}/{len(layers)}: {layer.title} (the registry has it already)")
        registry.push_blob(reference, lock_layer.digest, lock_layer.size, raw)
        registry.push_empty_config(reference)
        digest = registry.push_manifest(reference, wheelhouse_manifest(layers + [lock_layer]))
    except RegistryError as exc:
        raise StepFailed("push", exc.message, exc.fix) from None
    pinned = reference.pinned(digest)
    return {"schema_version": 1, "command": "wheelhouse", "directory": str(directory), "pushed": str(pinned),
            "tag": str(reference), "digest": digest, "files": len(layers), "uploaded": sent,
            "uploaded_bytes": sent_bytes, "target": lock.target,
            "install": registry_runner_command(lock.target, pinned)}
