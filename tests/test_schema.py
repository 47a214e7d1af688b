"""One JSON-schema interpreter: what evidence validation rejects is what conforming replaces."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from jetson_install.base import schema

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "jetson_install" / "base" / "evidence.schema.json").read_text())
SMALL = {"type": "object", "required": ["c"], "additionalProperties": False,
         "properties": {"a": {"type": "string", "pattern": "^x"}, "n": {"type": "integer", "minimum": 0},
                        "s": {"enum": ["ok", "fail"]}}}


def test_errors_name_the_path_and_the_problem() -> None:
    assert schema.errors({"a": 1, "n": -1, "s": "maybe", "b": True}, SMALL) == [
        "$: missing c",
        "$.a: expected string, found 1",
        "$.n: must be at least 0",
        '$.s: must be one of "ok", "fail"',
        "$: unexpected key b",
    ]
    assert schema.errors([], SMALL) == ["$: expected object, found []"]  # nothing inside is judged
    check = SCHEMA["properties"]["checks"]["items"]
    failing = {"id": "x", "title": "X", "status": "fail", "required": True, "detail": "broken", "fix": None}
    assert schema.errors(failing, check) == ["$.fix: expected string, found null"]  # if/then: a failure needs a fix


def test_conform_replaces_what_validation_rejects_and_the_result_validates() -> None:
    torch = SCHEMA["properties"]["torch"]
    printed = {"version": 2.8, "cuda": "12.6", "capability": 87, "arch_list": {"sm_87": True},
               "total_memory_bytes": -5, "unknown": "x"}
    assert schema.errors(printed, torch)
    conformed = schema.conform(printed, torch)
    assert conformed["version"] is None and conformed["cuda"] == "12.6" and conformed["capability"] is None
    assert conformed["arch_list"] == [] and conformed["total_memory_bytes"] is None
    assert conformed["kernels"] == {"matmul": "not_run", "conv2d": "not_run", "bf16_autocast_backward": "not_run"}
    assert schema.errors(conformed, torch) == []
    jsonschema.validate(conformed, torch)
    assert not schema.allows(1, {"const": 2}) and schema.conform(1, {"const": 2}) is None
