"""Read a TOML file the same way on Python 3.8 to 3.13, with errors that name the file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict

from jetson_install.errors import CatalogError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on the JetPack 5/6 Pythons
    import tomli as tomllib

__all__ = ["load_toml"]


def load_toml(path: Path) -> Dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot be read ({exc.strerror})", fix=f"check that {path} is a readable file") from None
    except UnicodeDecodeError:
        raise CatalogError(f"{path}: is not UTF-8 text", fix=f"save {path} as UTF-8 TOML") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message already carries "(at line N, column M)".
        raise CatalogError(f"{path}: invalid TOML: {exc}", fix=f"correct {path} at that line") from None
