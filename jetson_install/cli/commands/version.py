"""`--version`: what a bug report needs."""

from __future__ import annotations

import hashlib
import os
import sys
from importlib.metadata import PackageNotFoundError, distribution
from typing import List

from jetson_install import __version__
from jetson_install.base.errors import JetsonInstallError
from jetson_install.catalog.catalog_file import default_catalog_path

__all__ = ["version_lines"]


def version_lines() -> List[str]:
    """What a bug report needs: the tool, the catalog it reads (its sha256 names the revision,
    whichever checkout or wheel it came from), the uv it runs and the Python it runs on."""
    lines = [f"jetson-install {__version__}"]
    try:
        catalog = default_catalog_path()
        digest = hashlib.sha256(catalog.read_bytes()).hexdigest()[:12]
        lines.append(f"catalog: sha256 {digest} ({catalog})")
    except (JetsonInstallError, OSError) as exc:
        lines.append(f"catalog: unreadable ({exc})")
    # The uv distribution is the binary it ships, so its version is the binary's
    # (https://github.com/astral-sh/uv/blob/main/python/uv/_find_uv.py finds it among its files):
    # read from the metadata, neither the uv module nor the binary runs.
    try:
        uv = distribution("uv")
    except PackageNotFoundError:
        lines.append("uv: not installed beside jetson-install (reinstall: pipx reinstall jetson-install)")
    else:
        binary = next((uv.locate_file(f) for f in uv.files or () if f.name == "uv"), None)
        where = os.path.normpath(str(binary)) if binary is not None else "its binary is not listed"
        lines.append(f"uv: {uv.version} ({where})")
    lines.append(f"python: {sys.version.split()[0]} ({sys.executable})")
    return lines
