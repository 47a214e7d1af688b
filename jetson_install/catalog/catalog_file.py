"""Where wheels-index.toml is, and its targets' command names and help lines, read without the
validating loader (catalog.py): `--help` lists the targets of a catalog whose other parts
have a mistake, and running a target's command loads the whole catalog, so that mistake is
`FILE:LINE` and the fix, from the command that reads it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Optional

from jetson_install.base.errors import CatalogError
from jetson_install.base.sourced import DEFAULT, Sourced

__all__ = ["TARGET_NAME", "CATALOG_VARIABLE", "catalog_file", "default_catalog_path", "target_summaries"]

#: The variable that points the tool at another wheels-index.toml (docs/contributing.md).
CATALOG_VARIABLE = "JETSON_INSTALL_WHEELS_INDEX"

#: A target is a command: `jetson-install NAME`.
TARGET_NAME = re.compile(r"[a-z][a-z0-9-]*")


def default_catalog_path() -> Path:
    return catalog_file().value


def catalog_file() -> Sourced[Path]:
    """The wheels-index.toml in use, and where that came from: the variable, or the tool's own."""
    override = os.environ.get(CATALOG_VARIABLE)
    if override:
        return Sourced(Path(override), CATALOG_VARIABLE)
    # Inside the wheel the file sits beside this module; in a source checkout it is
    # at the top level, where reviewers find it.
    here = Path(__file__).resolve().parent
    for candidate in (here / "wheels-index.toml", here.parent.parent / "wheels-index.toml"):
        if candidate.is_file():
            return Sourced(candidate, DEFAULT)  # the tool's own
    raise CatalogError(f"wheels-index.toml is missing from {here}", fix="reinstall: pipx reinstall jetson-install")


def target_summaries(path: Optional[Path] = None) -> Dict[str, str]:
    """Each `[targets.NAME]` whose name is a command and whose `summary` is text, and that
    summary. Raises CatalogError where the file is missing or not TOML."""
    from jetson_install.base.toml_file import load_toml  # not for --version, which only names the file

    targets = load_toml(path or default_catalog_path()).get("targets")
    if not isinstance(targets, dict):
        return {}
    return {name: entry["summary"] for name, entry in targets.items()
            if TARGET_NAME.fullmatch(name) and isinstance(entry, dict) and isinstance(entry.get("summary"), str)}
