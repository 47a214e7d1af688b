"""The one interpreter of the JSON Schema subset the project's schemas use.

Two kinds of schema are read with it: the evidence's (`evidence.schema.json`, what the doctor
writes) and the data files' (`wheels-index.schema.json` and the others beside their readers,
what the tool reads; `toml_file.TomlData` turns a problem into FILE:LINE and the fix). The
tool does not depend on jsonschema: tests hold this interpreter to jsonschema's answers and
every schema to its metaschema, and `KEYWORDS` is the subset a schema may use.

`problems` says where a value breaks a schema, as values; `errors` writes them as the
evidence's `$.path: problem` lines. `conform` makes the doctor's evidence fit the schema
whatever a probe printed: a probe runs inside the user's environment, where a patched or
broken torch can answer with the wrong type, and the checks already say what is wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

#: The evidence's schema, shipped beside this module.
EVIDENCE_SCHEMA = Path(__file__).with_name("evidence.schema.json")


def evidence_schema() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(EVIDENCE_SCHEMA.read_text(encoding="utf-8"))
    return loaded

__all__ = ["KEYWORDS", "Key", "Problem", "Formats", "problems", "errors", "allows", "conform", "resolve", "where"]

#: The keywords this interpreter acts on, and the annotations it reads (`description`: what a
#: value must be, for the data files' messages; `x-where`: how their messages name an entry,
#: "channel {id!r}", where {key} is the entry's own key and {parent} its container's name).
KEYWORDS = frozenset({
    "type", "const", "enum", "pattern", "format", "minimum", "minLength", "minItems", "minProperties",
    "required", "properties", "additionalProperties", "propertyNames", "dependentRequired", "items",
    "if", "then", "else", "$ref", "$defs",
    "$schema", "$id", "$comment", "title", "description", "x-where",
})

#: A step into a value: a table's key or an array's index.
Key = Union[str, int]
#: Named checks for `format` ("version", "requirement"), supplied by the caller; a format no
#: checker is given for is an annotation, as in jsonschema.
Formats = Mapping[str, Callable[[str], bool]]

_TYPES: Dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


@dataclass(frozen=True)
class Problem:
    """One way a value breaks a schema.

    `path` leads to the value judged; for the keywords that name a key (required,
    additionalProperties, propertyNames, dependentRequired) it ends with that key. `schema` is
    the schema holding `keyword` (the table's, for those four); `value` the value judged (None
    for a missing key); `missing`, the keys dependentRequired wanted.
    """

    path: Tuple[Key, ...]
    keyword: str
    schema: Mapping[str, Any]
    value: Any
    missing: Tuple[str, ...] = ()


#: id(a schema with $ref) -> (that schema, kept alive so the id stays its own; the schema it stands for).
_RESOLVED: Dict[int, Tuple[Mapping[str, Any], Mapping[str, Any]]] = {}


def resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """`schema` with its `$ref` (to "#/$defs/NAME", the only kind the schemas use) followed:
    the definition, with the keywords beside the `$ref` (a description) over its own."""
    if "$ref" not in schema:
        return schema
    known = _RESOLVED.get(id(schema))
    if known is not None:
        return known[1]
    name = schema["$ref"].rsplit("/", 1)[-1]
    merged = {**resolve(root["$defs"][name], root), **{k: v for k, v in schema.items() if k != "$ref"}}
    _RESOLVED[id(schema)] = (schema, merged)
    return merged


def _type_ok(value: Any, kinds: Union[str, Sequence[str]]) -> bool:
    if isinstance(kinds, str):
        return _TYPES[kinds](value)
    return any(_TYPES[kind](value) for kind in kinds)


def _own(value: Any, schema: Mapping[str, Any], path: Tuple[Key, ...], formats: Formats,
         found: List[Problem]) -> bool:
    """Append what `value` itself breaks of `schema`'s keywords; False where it is of another
    type, so that nothing else can be judged."""
    if "type" in schema and not _type_ok(value, schema["type"]):
        found.append(Problem(path, "type", schema, value))
        return False
    if "const" in schema and value != schema["const"]:
        found.append(Problem(path, "const", schema, value))
    if "enum" in schema and value not in schema["enum"]:
        found.append(Problem(path, "enum", schema, value))
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(Problem(path, "pattern", schema, value))
        if "minLength" in schema and len(value) < schema["minLength"]:
            found.append(Problem(path, "minLength", schema, value))
        check = formats.get(schema.get("format", ""))
        if check is not None and not check(value):
            found.append(Problem(path, "format", schema, value))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(Problem(path, "minimum", schema, value))
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            found.append(Problem(path, "minItems", schema, value))
    elif isinstance(value, dict) and "minProperties" in schema and len(value) < schema["minProperties"]:
        found.append(Problem(path, "minProperties", schema, value))
    return True


def _walk(value: Any, schema: Mapping[str, Any], path: Tuple[Key, ...], root: Mapping[str, Any], formats: Formats,
          found: List[Problem]) -> None:
    if "$ref" in schema:
        schema = resolve(schema, root)
    if not _own(value, schema, path, formats, found):
        return  # of another type: nothing inside it can be judged
    if isinstance(value, list) and "items" in schema:
        items = schema["items"]
        for number, item in enumerate(value):
            _walk(item, items, path + (number,), root, formats, found)
    elif isinstance(value, dict):
        _table(value, schema, path, root, formats, found)
    if "if" in schema:
        branch = schema.get("then") if not problems(value, schema["if"], root, formats) else schema.get("else")
        if branch is not None:
            _walk(value, branch, path, root, formats, found)


def _table(value: Dict[str, Any], schema: Mapping[str, Any], path: Tuple[Key, ...], root: Mapping[str, Any],
           formats: Formats, found: List[Problem]) -> None:
    for key in schema.get("required", ()):
        if key not in value:
            found.append(Problem(path + (key,), "required", schema, None))
    for key, wanted in schema.get("dependentRequired", {}).items():
        missing = tuple(other for other in wanted if other not in value)
        if key in value and missing:
            found.append(Problem(path + (key,), "dependentRequired", schema, value[key], missing))
    names = schema.get("propertyNames")
    if names is not None:
        names = resolve(names, root)
        for key in value:
            named: List[Problem] = []
            _own(key, names, path + (key,), formats, named)
            found += [Problem(p.path, "propertyNames", p.schema, key) for p in named[:1]]
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    if isinstance(extra, dict):
        extra = resolve(extra, root)
    for key, item in value.items():
        if key in properties:
            _walk(item, properties[key], path + (key,), root, formats, found)
        elif extra is False:
            found.append(Problem(path + (key,), "additionalProperties", schema, item))
        elif isinstance(extra, dict):
            _walk(item, extra, path + (key,), root, formats, found)


def problems(value: Any, schema: Mapping[str, Any], root: Optional[Mapping[str, Any]] = None,
             formats: Formats = MappingProxyType({})) -> List[Problem]:
    """Where `value` breaks `schema` (a part of `root`, where `$ref`s point), in the order
    the schema and the value are walked."""
    found: List[Problem] = []
    _walk(value, schema, (), schema if root is None else root, formats, found)
    return found


def _dotted(where: str, path: Sequence[Key]) -> str:
    return where + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)


_NAMES_A_KEY = ("required", "additionalProperties", "propertyNames", "dependentRequired")


def _evidence_line(problem: Problem, where: str) -> str:
    """`$.torch.version: expected string, found 2.8`: the evidence's wording of a problem."""
    schema, value = problem.schema, problem.value
    if problem.keyword in _NAMES_A_KEY:
        at, key = _dotted(where, problem.path[:-1]), problem.path[-1]
        return {
            "required": f"{at}: missing {key}",
            "additionalProperties": f"{at}: unexpected key {key}",
            "propertyNames": f"{at}: key {key!r} is not allowed",
        }.get(problem.keyword, f"{at}: {key} needs {', '.join(problem.missing)}")
    at = _dotted(where, problem.path)
    if problem.keyword == "type":
        kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        return f"{at}: expected {' or '.join(kinds)}, found {json.dumps(value)[:40]}"
    texts = {
        "const": f"must be {json.dumps(schema.get('const'))}, found {json.dumps(value)[:40]}",
        "enum": f"must be one of {', '.join(json.dumps(v) for v in schema.get('enum', ()))}",
        "pattern": f"{value!r} does not match {schema.get('pattern')}",
        "minLength": "must not be empty",
        "minimum": f"must be at least {schema.get('minimum')}",
        "format": f"{value!r} is not a {schema.get('format')}",
    }
    return f"{at}: " + texts.get(problem.keyword, f"must have at least {schema.get(problem.keyword)} entries")


def errors(value: Any, schema: Mapping[str, Any], where: str = "$") -> List[str]:
    """Where `value` breaks `schema`, as 'path: problem' strings ($.torch.version: ...)."""
    return [_evidence_line(problem, where) for problem in problems(value, schema)]


def where(data: Any, root: Mapping[str, Any], path: Sequence[Key]) -> Tuple[str, int]:
    """How a data file's message names the entry that holds what `path` leads to, and that
    entry's depth: the innermost `x-where` on the way ("channel 'jp6-cu126' source", 4), else
    ("top level", 0)."""
    label, depth = "top level", 0
    schema: Mapping[str, Any] = root
    for step, key in enumerate(path):
        schema = resolve(schema, root)
        template = schema.get("x-where")
        if template is not None and isinstance(data, dict):
            fields = {name: item for name, item in data.items() if isinstance(item, (str, int))}
            fields.update(key=path[step - 1] if step else "", parent=label)
            try:
                label = template.format_map(fields)
            except (KeyError, ValueError):
                label = template.split("{", 1)[0].strip() or label  # the entry lacks what names it
            depth = step
        if isinstance(key, int):
            schema = schema.get("items", {}) if isinstance(schema.get("items"), dict) else {}
            data = data[key] if isinstance(data, list) and key < len(data) else None
        else:
            extra = schema.get("additionalProperties")
            schema = schema.get("properties", {}).get(key, extra if isinstance(extra, dict) else {})
            data = data.get(key) if isinstance(data, dict) else None
    return label, depth


def allows(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `value` itself meets `schema` (what it holds is judged by its own schemas)."""
    found: List[Problem] = []
    _own(value, schema, (), {}, found)
    return not found


def _empty(schema: Mapping[str, Any]) -> Any:
    """What stands for "unknown" under this schema: null where allowed, else its empty value."""
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    if "null" in names or None in schema.get("enum", ()):
        return None
    if "array" in names:
        return []
    if "object" in names:
        return conform({}, schema)
    if "enum" in schema:
        return "not_run" if "not_run" in schema["enum"] else schema["enum"][0]
    return None


def conform(value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` with every part the schema does not allow replaced by its empty value."""
    if not allows(value, schema):
        return _empty(schema)
    if isinstance(value, dict) and "properties" in schema:
        properties: Mapping[str, Any] = schema["properties"]
        result: Dict[str, Any] = {}
        for key in schema.get("required", ()):
            result[key] = conform(value.get(key), properties[key]) if key in value else _empty(properties[key])
        for key, item in value.items():
            if key in properties and key not in result:
                result[key] = conform(item, properties[key])
            elif key not in properties and isinstance(schema.get("additionalProperties"), dict):
                result[key] = conform(item, schema["additionalProperties"])
        return result
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        extra = schema["additionalProperties"]
        return {key: item for key, item in value.items() if allows(item, extra)}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [item for item in value if allows(item, schema["items"])]
    return value
