"""Read a TOML file the same way on Python 3.8 to 3.13, with errors that name the file and line.

Every data file the tool reads (wheels-index.toml, platform-data.toml, preflight.toml, the
bitsandbytes releases, the user's config.toml) is read through `TomlData`, which checks it
against the JSON Schema beside its reader (base/schema.py is the one interpreter) and says
which line is wrong: the key's own line, the entry's line inside an array or an inline table,
or, for a key that is missing, the header of the table that lacks it. A key the schema does
not know gets the nearest one it does ("did you mean"). What a schema cannot say (ranges
that overlap, a preferred set that is not among the sets) the reader checks beside it, and
`refuse` words it the same way.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install.base import schema as schemas
from jetson_install.base.errors import CatalogError
from jetson_install.base.schema import Key, Problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on the JetPack 5/6 Pythons
    import tomli as tomllib

__all__ = ["load_toml", "loads_toml", "load_schema", "FORMATS", "TomlData"]

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
    """The file at `path` as TOML; the parsed value is shared with every other reader of the
    same text in this run (do not change it)."""
    return _parsed(_text(path), path)


@functools.lru_cache(maxsize=None)
def _parsed(text: str, path: Path) -> Dict[str, Any]:
    """`text` parsed once per run: a target's command reads wheels-index.toml for its targets'
    names and then loads the whole catalog. Keyed by the text itself, so a file changed since is
    parsed again."""
    return loads_toml(text, path)


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



# -- the formats the data files' schemas name: packaging parses them, imported only when a file is
# checked; a string the file repeats (the Thor channels share their sets and builds) is parsed once


@functools.lru_cache(maxsize=None)
def _parses(kind: str, text: str) -> bool:
    """Whether packaging reads `text` as a `kind`: version, specifier, requirement or wheel."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    parse: Dict[str, Callable[[str], object]] = {"version": Version, "specifier": SpecifierSet,
                                                 "requirement": Requirement, "wheel": parse_wheel_filename}
    try:
        parse[kind](text)
    except (InvalidVersion, InvalidSpecifier, InvalidRequirement, InvalidWheelFilename):
        return False
    return True


#: The `format`s of the data files' schemas, by name. A pin is a version ("2.8.0", pinned as
#: ==2.8.0) or a version specifier (">=0.46.1,<0.51").
FORMATS: schemas.Formats = {
    "version": lambda text: _parses("version", text),
    "version-specifier": lambda text: _parses("specifier", text),
    "version-or-specifier": lambda text: _parses("specifier" if text[:1] in "<>=!~" else "version", text),
    "requirement": lambda text: _parses("requirement", text),
    "wheel-file": lambda text: _parses("wheel", text),
    "wheel-url": lambda text: _parses("wheel", text.rsplit("/", 1)[-1]),
}


@functools.lru_cache(maxsize=None)
def load_schema(path: Path) -> Dict[str, Any]:
    """A data file's schema, shipped beside its reader."""
    loaded: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _shown(value: Any) -> str:
    """A value as the TOML file writes it, cut short."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, list):
        text = "[" + ", ".join(_shown(item) for item in value) + "]"
    elif isinstance(value, dict):
        text = "{ " + ", ".join(f"{key} = {_shown(item)}" for key, item in value.items()) + " }" if value else "{}"
    else:
        text = str(value)
    return text if len(text) <= 70 else text[:67] + "..."


_TYPE_WORDS = {"object": "a table", "array": "an array", "string": "a string", "integer": "a whole number",
               "number": "a number", "boolean": "true or false", "null": "nothing"}


def _must(problem: Problem) -> str:
    """What the value must be, for a problem with the value itself."""
    schema, keyword = problem.schema, problem.keyword
    described = schema.get("description", "")
    if keyword == "enum":
        return "one of " + ", ".join(_shown(choice) for choice in schema["enum"])
    if keyword == "const":
        return _shown(schema["const"]) + (f" ({described})" if described else "")
    if described:
        return str(described)
    if keyword == "type":
        kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        return " or ".join(_TYPE_WORDS[kind] for kind in kinds)
    limit = schema.get(keyword)
    return {
        "pattern": f"text matching {limit}",
        "minLength": "text, not empty",
        "minItems": f"at least {limit} {'entry' if limit == 1 else 'entries'}",
        "minProperties": f"a table of at least {limit} {'key' if limit == 1 else 'keys'}",
        "minimum": f"at least {limit}",
    }.get(keyword, f"a {schema.get('format')}")


def _suggestion(name: str, known: Sequence[str]) -> str:
    """"; did you mean 'vendor_index'?", or the keys there are when none is near."""
    import difflib  # only for a file with a mistake

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(known))})"


class TomlData:
    """A TOML data file as parsed (`data`) and as written (`lines`), checked against its
    schema (`schema`, a JSON Schema file beside the reader); a mistake is one CatalogError
    naming FILE:LINE and the command that checks the file again (`check`).

    A table is named by the index of its header line, -1 for the top level; its body reaches
    to the next header, and its scope to the next header that is not one of its sub-tables.
    """

    def __init__(self, path: Path, check: str, schema: Path) -> None:
        self.path = path
        self.check = check
        text = _text(path)
        self.data = _parsed(text, path)
        self.lines = text.splitlines()
        self._headers: List[Tuple[int, str]] = [
            (number, _table_name(found.group(1))) for number, line in enumerate(self.lines)
            for found in [_HEADER.match(line)] if found
        ]
        self.schema: Mapping[str, Any] = load_schema(schema)
        found = schemas.problems(self.data, self.schema, formats=FORMATS)
        if found:
            # The first mistake as the file reads, not as the schema is walked; for a missing key,
            # a key of the same table the schema does not know (often the missing one, misspelt).
            first = min(found, key=lambda problem: (self.locate(problem.path),
                                                    problem.keyword != "additionalProperties"))
            if first.keyword == "required":
                first = next((problem for problem in found if problem.keyword == "additionalProperties"
                              and problem.path[:-1] == first.path[:-1]), first)
            raise self._error(first.path, self._explain(first))

    # -- where a value is written ------------------------------------------
    def locate(self, path: Sequence[Key]) -> int:
        """The 1-based line of the value `path` leads to: a key's own line, an array entry's
        line, a table's header; for a key that is missing, the line of the table or inline
        value that lacks it (line 1 for the top level)."""
        name, header, body_end, scope_end = "", -1, self._next_header(-1), len(self.lines)
        table_line = 1  # where a key the table lacks is reported: its header's line
        value: Any = self.data
        inline: Optional[int] = None  # the line an inline value (not a [table]) starts on
        extent = 0  # and the last line it reaches
        step = 0
        while step < len(path):
            key = path[step]
            if inline is None and isinstance(key, str):
                full = f"{name}.{key}" if name else key
                item = value.get(key) if isinstance(value, dict) else None
                own = [number for number, table in self._headers if table == full and header < number < scope_end]
                deeper = [number for number, table in self._headers
                          if table.startswith(full + ".") and header < number < scope_end]
                if own and isinstance(item, list):  # [[full]]: the entry's own header
                    index = path[step + 1] if step + 1 < len(path) else 0
                    if not isinstance(index, int) or index >= len(own):
                        return own[0] + 1
                    header, value, step = own[index], item[index], step + 2
                    body_end = self._next_header(header)
                elif own:  # [full]
                    header, value, step = own[0], item, step + 1
                    body_end = self._next_header(header)
                elif deeper:  # a table only its sub-tables' headers name: no lines of its own
                    value, step, body_end = item, step + 1, header + 1
                    table_line = deeper[0] + 1
                    name = full
                    continue
                else:
                    found = self._key_line(key, header + 1, body_end, anchored=True)
                    if found is None:
                        return table_line
                    inline, extent, value, step = found, self._extent(found), item, step + 1
                    continue
                name, scope_end, table_line = full, self._scope_end(header, full), header + 1
                continue
            if inline is None:
                break
            if isinstance(key, int):
                if not isinstance(value, list) or key >= len(value):
                    break
                for element in value[: key + 1]:
                    inline = self._element_line(element, inline, extent)
                extent = self._extent(inline) if isinstance(value[key], (dict, list)) else inline
                value = value[key]
            else:
                found = self._key_line(key, inline, extent + 1, anchored=False)
                if found is None:
                    break
                inline, value = found, value.get(key) if isinstance(value, dict) else None
            step += 1
        return inline + 1 if inline is not None else table_line

    def _next_header(self, after: int) -> int:
        return next((number for number, _ in self._headers if number > after), len(self.lines))

    def _scope_end(self, header: int, name: str) -> int:
        return next((number for number, table in self._headers
                     if number > header and not table.startswith(name + ".")), len(self.lines))

    def _key_line(self, key: str, begin: int, end: int, anchored: bool) -> Optional[int]:
        pattern = re.compile((r"^\s*" if anchored else r"(?:^|[\s{,])")
                             + r"""(?:{0}|"{0}"|'{0}')\s*=""".format(re.escape(key)))
        return next((number for number in range(max(begin, 0), min(end, len(self.lines)))
                     if pattern.search(_code(self.lines[number], strings=True))), None)

    def _extent(self, start: int) -> int:
        """The last line of the value that starts on line `start` (arrays span lines)."""
        depth = 0
        for number in range(start, len(self.lines)):
            code = _code(self.lines[number])
            depth += sum(code.count(c) for c in "[{") - sum(code.count(c) for c in "]}")
            if depth <= 0:
                return number
        return len(self.lines) - 1

    def _element_line(self, element: Any, begin: int, end: int) -> int:
        """The first line from `begin` that writes `element` of an array (all the strings of
        an inline table; TOML keeps an inline table on one line)."""
        if isinstance(element, dict):
            wanted = [item for item in element.values() if isinstance(item, str)]
        elif isinstance(element, list):
            wanted = [item for item in element[:1] if isinstance(item, str)]
        else:
            wanted = [element] if isinstance(element, str) else []
        if not wanted:
            return begin
        for number in range(begin, min(end + 1, len(self.lines))):
            line = _code(self.lines[number], strings=True)
            if all(json.dumps(item, ensure_ascii=False) in line or f"'{item}'" in line for item in wanted):
                return number
        return begin

    # -- what is wrong --------------------------------------------------------
    def _error(self, path: Sequence[Key], message: str) -> CatalogError:
        line = self.locate(path)
        return CatalogError(f"{self.path}:{line}: {message}",
                            fix=f"edit {self.path} line {line}, then check it: {self.check}")

    def refuse(self, path: Sequence[Key], problem: str) -> CatalogError:
        """The error for a rule the reader checks beside the schema: "channel 'x': key 'l4t'
        overlaps ...", at the line of the value `path` leads to."""
        label, depth = schemas.where(self.data, self.schema, path)
        return self._error(path, f"{label}: key '{path[depth]}' {problem}")

    def _explain(self, problem: Problem) -> str:
        label, depth = schemas.where(self.data, self.schema, problem.path)
        key, rest = problem.path[depth], problem.path[depth + 1:]
        if problem.keyword in ("required", "additionalProperties", "propertyNames", "dependentRequired"):
            return f"{label}: key '{key}' " + self._about_key(problem, rest)
        field = f"{_key(rest[-1])} = " if rest and isinstance(rest[-1], str) else ""
        return f"{label}: key '{key}' has {field}{_shown(problem.value)}: it must be {_must(problem)}"

    def _about_key(self, problem: Problem, rest: Sequence[Key]) -> str:
        """The end of a message about a key that is missing, unknown, misnamed or alone."""
        named, owner = problem.path[-1], problem.schema
        properties = owner.get("properties", {})
        described = schemas.resolve(properties.get(named, {}), self.schema).get("description")
        if problem.keyword == "required":
            about = f"{'has an entry without' if len(rest) > 1 and isinstance(rest[-2], int) else 'lacks'} '{named}'" \
                if rest else "is required"
            return about + (f": {described}" if described else "")
        if problem.keyword == "additionalProperties":
            return (f"has the key '{named}', which is unknown" if rest else "is unknown") \
                + _suggestion(str(named), list(properties))
        if problem.keyword == "propertyNames":
            return f"names '{named}', which is not {_must(problem)}" if rest else f"is not {_must(problem)}"
        wanted = " and ".join(f"'{other}'" for other in problem.missing)
        return f"has '{named}' without {wanted}" if rest else f"needs {wanted} beside it"


def _key(name: str) -> str:
    """A key as TOML writes it: bare where it may be, else quoted."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def _code(line: str, strings: bool = False) -> str:
    """A line without its comment, and without the text of its strings unless `strings`
    (brackets there are not the file's)."""
    kept, quote, escaped = [], "", False
    for char in line:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
            if strings or not quote:
                kept.append(char)
            continue
        if char == "#":
            break
        if char in "\"'":
            quote = char
        kept.append(char)
    return "".join(kept)
