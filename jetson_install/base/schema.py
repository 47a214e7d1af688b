"""The one interpreter of the JSON Schema subset evidence.schema.json uses: type, const, enum,
pattern, minimum, minLength, required, properties, additionalProperties, items, if/then.

It validates evidence (`errors`, which a test holds to jsonschema's answers; the tool does
not depend on jsonschema) and makes the doctor's evidence fit the schema whatever a probe
printed (`conform`): a probe runs inside the user's environment, where a patched or broken
torch can answer with the wrong type, and the checks already say what is wrong.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

#: The evidence's schema, shipped beside this module.
EVIDENCE_SCHEMA = Path(__file__).with_name("evidence.schema.json")


def evidence_schema() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(EVIDENCE_SCHEMA.read_text(encoding="utf-8"))
    return loaded

__all__ = ["errors", "allows", "conform"]

_TYPES: Dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _type_error(value: Any, schema: Mapping[str, Any], where: str) -> Optional[str]:
    kinds = schema.get("type")
    if kinds is None:
        return None
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if any(_TYPES[kind](value) for kind in kinds):
        return None
    return f"{where}: expected {' or '.join(kinds)}, found {json.dumps(value)[:40]}"


def _own_errors(value: Any, schema: Mapping[str, Any], where: str) -> List[str]:
    """What `value` itself breaks of `schema`'s keywords; what it holds is not looked at."""
    mismatch = _type_error(value, schema, where)
    if mismatch is not None:
        return [mismatch]  # of another type: no other keyword can be judged
    found = []
    if "const" in schema and value != schema["const"]:
        found.append(f"{where}: must be {json.dumps(schema['const'])}, found {json.dumps(value)[:40]}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: must be one of {', '.join(json.dumps(v) for v in schema['enum'])}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            found.append(f"{where}: must not be empty")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < schema.get("minimum", value):
        found.append(f"{where}: must be at least {schema['minimum']}")
    return found


def allows(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `value` itself meets `schema` (what it holds is judged by its own schemas)."""
    return not _own_errors(value, schema, "$")


def errors(value: Any, schema: Mapping[str, Any], where: str = "$") -> List[str]:
    """Where `value` breaks `schema`, as 'path: problem' strings ($.torch.version: ...)."""
    mismatch = _type_error(value, schema, where)
    if mismatch is not None:
        return [mismatch]  # of another type: nothing inside it can be judged
    found = _own_errors(value, schema, where)
    if isinstance(value, list) and "items" in schema:
        for number, item in enumerate(value):
            found += errors(item, schema["items"], f"{where}[{number}]")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                found.append(f"{where}: missing {key}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                found += errors(item, properties[key], f"{where}.{key}")
            elif extra is False:
                found.append(f"{where}: unexpected key {key}")
            elif isinstance(extra, dict):
                found += errors(item, extra, f"{where}.{key}")
    if "if" in schema and not errors(value, schema["if"]):
        found += errors(value, schema.get("then", {}), where)
    return found


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
