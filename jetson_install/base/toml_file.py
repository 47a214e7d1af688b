"""Read a TOML file the same way on Python 3.8 to 3.13, with errors that name the file and line.

Every data file the tool reads (wheels-index.toml, platform-data.toml, preflight.toml, the
bitsandbytes releases, the user's config.toml) is read through `TomlData`, whose `fail` says
which line is wrong: the key's own line, the entry's line inside an array or an inline table,
or, for a key that is missing, the header of the table that lacks it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from jetson_install.base.errors import CatalogError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on the JetPack 5/6 Pythons
    import tomli as tomllib

__all__ = ["load_toml", "loads_toml", "TomlData"]

# A table header, `[name]` or `[[name]]`, of bare or quoted keys (an array's `["a", "b"]` has commas).
_HEADER = re.compile(r"""^\s*\[\[?\s*([A-Za-z0-9_.\-"' ]+?)\s*\]\]?\s*(?:#.*)?$""")
_AT_LINE = re.compile(r"at line (\d+)")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot be read ({exc.strerror})", fix=f"check that {path} is a readable file") from None
    except UnicodeDecodeError:
        raise CatalogError(f"{path}: is not UTF-8 text", fix=f"save {path} as UTF-8 TOML") from None


def load_toml(path: Path) -> Dict[str, Any]:
    return loads_toml(_text(path), path)


def loads_toml(text: str, path: Path = Path("pyproject.toml")) -> Dict[str, Any]:
    """`text` as TOML; `path`: what a mistake's message names (a file read from git's objects)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message carries "(at line N, column M)".
        found = _AT_LINE.search(str(exc))
        where = f"{path}:{found.group(1)}" if found else str(path)
        fix = f"correct {path.name} at line {found.group(1)}" if found else f"correct {path}"
        raise CatalogError(f"{where}: invalid TOML: {exc}", fix=fix) from None


def _table_name(header: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in header.split("."))


class TomlData:
    """A TOML data file as parsed (`data`) and as written (`lines`), for errors that name
    FILE:LINE and the command that checks the file again (`check`).

    A table is named by the index of its header line (`header`), -1 for the top level; it
    reaches to the next header.
    """

    def __init__(self, path: Path, check: str) -> None:
        self.path = path
        self.check = check
        self.data = load_toml(path)
        self.lines = path.read_text(encoding="utf-8").splitlines()
        self._headers: List[Tuple[int, str]] = [
            (number, _table_name(found.group(1))) for number, line in enumerate(self.lines)
            for found in [_HEADER.match(line)] if found
        ]

    def header(self, name: str, nth: int = 0) -> int:
        """The index of the `nth` `[name]` (or `[[name]]`) header line; -1 when there is none."""
        found = [number for number, table in self._headers if table == name]
        return found[nth] if nth < len(found) else -1

    def count(self, name: str) -> int:
        return sum(1 for _, table in self._headers if table == name)

    def _end(self, start: int) -> int:
        return next((number for number, _ in self._headers if number > start), len(self.lines))

    def line(self, key: str, start: int = -1, near: str = "") -> int:
        """The 1-based line of `key` in the table at `start`; with `near`, the first line from
        there that holds it (an array's entry, an inline table's key). A key the table lacks is
        reported at the table's header (line 1 for the top level)."""
        pattern = re.compile(r"""^\s*(?:{0}|"{0}"|'{0}')\s*=""".format(re.escape(key)))
        end = self._end(start)
        found = next((number for number in range(start + 1, end) if pattern.match(self.lines[number])), None)
        if found is None:
            # The key may be a table of its own, `[table.key]`.
            name = next((table for number, table in self._headers if number == start), "")
            sub = self.header(f"{name}.{key}" if name else key)
            if sub >= 0:
                return sub + 1
        if near:
            origin = found if found is not None else start + 1
            hit = next((number for number in range(max(origin, 0), end) if near in self.lines[number]), None)
            if hit is not None:
                return hit + 1
        if found is not None:
            return found + 1
        return start + 1 if start >= 0 else 1

    def fail(self, where: str, key: str, problem: str, start: int = -1, near: str = "") -> CatalogError:
        """The error for `key` of `where` (the table at `start`): FILE:LINE, and the fix."""
        line = self.line(key, start, near)
        return CatalogError(f"{self.path}:{line}: {where}: key '{key}' {problem}",
                            fix=f"edit {self.path} line {line}, then check it: {self.check}")

    def unknown(self, where: str, entry: Dict[str, Any], known: Any, what: str, start: int = -1,
                near: str = "") -> None:
        """Raise for the first key of `entry` that is not `known`."""
        extra = sorted(set(entry) - set(known))
        if extra:
            raise self.fail(where, extra[0], f"is not {what} (known: {', '.join(sorted(known))})", start, near)

    def table(self, where: str, value: Any, key: str, start: int = -1) -> Dict[str, Any]:
        """`value` (the key's), which must be a table."""
        if not isinstance(value, dict):
            raise self.fail(where, key, "is required: a table" if value is None else "must be a table", start)
        return value

    def string(self, where: str, entry: Dict[str, Any], key: str, start: int = -1, near: str = "",
               pattern: Optional[str] = None, shape: str = "a non-empty string") -> str:
        """The string at `key` of `entry` (required; matching `pattern` where given)."""
        value = entry.get(key)
        if not isinstance(value, str) or not value or (pattern is not None and not re.fullmatch(pattern, value)):
            problem = "is required" if key not in entry else f"has {value!r}"
            raise self.fail(where, key, f"{problem}; it must be {shape}", start, near)
        return value
