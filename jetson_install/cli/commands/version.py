"""`--version`: what a bug report needs."""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import List, Optional

from jetson_install import __version__
from jetson_install.base.errors import JetsonInstallError
from jetson_install.base.sourced import Sourced
from jetson_install.base.upgrade import running_upgrade_command
from jetson_install.catalog.catalog_file import catalog_file

__all__ = ["CatalogRevision", "catalog_revision", "BundledUv", "bundled_uv", "UV_MISSING", "version_lines"]


@dataclass(frozen=True)
class CatalogRevision:
    """The catalog in use and its revision: its sha256 names it, whichever checkout or wheel it
    came from (`--version`, `paths` and a saved plan say it so)."""

    file: Optional[Sourced[Path]]  # None: none found
    sha256: Optional[str]  # None: it cannot be read (`problem` says why)
    problem: str = ""

    @property
    def revision(self) -> str:
        return f"sha256 {self.sha256[:12]}" if self.sha256 else f"unreadable ({self.problem})"


def catalog_revision() -> CatalogRevision:
    try:
        found = catalog_file()
    except JetsonInstallError as exc:
        return CatalogRevision(None, None, str(exc))
    try:
        return CatalogRevision(found, hashlib.sha256(found.value.read_bytes()).hexdigest())
    except OSError as exc:
        return CatalogRevision(found, None, str(exc))


def version_lines() -> List[str]:
    """What a bug report needs: the tool, the catalog it reads and its revision, the uv it runs
    and the Python it runs on; and how to get a newer one, as the way it was installed gets it
    (README's "Install")."""
    lines = [f"jetson-install {__version__}"]
    catalog = catalog_revision()
    if catalog.file is not None and catalog.sha256 is not None:
        lines.append(f"catalog: {catalog.revision} ({catalog.file.value})")
    else:
        lines.append(f"catalog: {catalog.revision}")
    uv = bundled_uv()
    lines.append(f"uv: {uv.version} ({uv.binary or 'its binary is not listed'})" if uv is not None else
                 f"uv: {UV_MISSING}")
    lines.append(f"python: {sys.version.split()[0]} ({sys.executable})")
    lines.append(f"upgrade: {running_upgrade_command()}")
    return lines


#: What is said where the uv package is not installed beside the tool.
UV_MISSING = "not installed beside jetson-install (reinstall: pipx reinstall jetson-install)"


@dataclass(frozen=True)
class BundledUv:
    version: str
    binary: Optional[str]  # None: its files do not list it


def bundled_uv() -> Optional[BundledUv]:
    """The uv installed beside the tool, which it runs (`--version` and `paths` name it); None where there is none."""
    # The uv distribution is the binary it ships, so its version is the binary's
    # (https://github.com/astral-sh/uv/blob/main/python/uv/_find_uv.py finds it among its files):
    # read from the metadata, neither the uv module nor the binary runs.
    try:
        uv = distribution("uv")
    except PackageNotFoundError:
        return None
    binary = next((uv.locate_file(f) for f in uv.files or () if f.name == "uv"), None)
    return BundledUv(uv.version, os.path.normpath(str(binary)) if binary is not None else None)
