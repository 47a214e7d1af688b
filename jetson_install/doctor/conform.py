"""Evidence that matches evidence.schema.json whatever a probe printed.

A probe runs inside the user's environment, where a patched or broken torch can answer a
question with the wrong type (a number for a version, a dict for the arch list). The checks
already say what is wrong; the evidence must still validate, so a value the schema does not
allow becomes null (or the schema's empty value) here, by the schema itself.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping

__all__ = ["conform"]

_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _allowed(value: Any, schema: Mapping[str, Any]) -> bool:
    if "enum" in schema and value not in schema["enum"]:
        return False
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_JSON_TYPES[name](value) for name in names):
            return False
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < schema.get("minimum", value):
        return False
    return True


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
    if not _allowed(value, schema):
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
        return {key: item for key, item in value.items() if _allowed(item, extra)}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [item for item in value if _allowed(item, schema["items"])]
    return value
