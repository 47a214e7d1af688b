"""One JSON-schema interpreter: what evidence validation rejects is what conforming replaces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import jsonschema
import pytest

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


# The keywords the data files' schemas use beyond the evidence's, each judged as jsonschema does.
DATA_LIKE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False, "minProperties": 1,
    "dependentRequired": {"git": ["ref"]},
    "properties": {
        "git": {"$ref": "#/$defs/url"}, "ref": {"type": "string"},
        "names": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"$ref": "#/$defs/url"}},
        "list": {"type": "array", "minItems": 1, "items": {"type": "string", "format": "even"}},
        "status": {"enum": ["ok", "gone"]}, "remedy": {"type": "string"},
    },
    "if": {"required": ["status"], "properties": {"status": {"const": "gone"}}},
    "then": {"required": ["remedy"]},
    "else": {"properties": {"remedy": {"minLength": 1}}},
    "$defs": {"url": {"type": "string", "pattern": "^https://"}},
}


@pytest.mark.parametrize("value", [
    {}, {"git": "https://x"}, {"git": "https://x", "ref": "v1"}, {"git": "http://x", "ref": "v1"},
    {"names": {"abc": "https://x"}}, {"names": {"Abc": "https://x"}}, {"names": {"abc": "ftp://x"}},
    {"list": []}, {"list": ["aa"]}, {"list": ["abc"]}, {"list": [1]},
    {"status": "gone"}, {"status": "gone", "remedy": "flash"}, {"status": "ok"}, {"status": "ok", "remedy": ""},
    {"status": "late"}, {"other": 1},
])
def test_the_data_files_keywords_judge_as_jsonschema_does(value: Dict[str, Any]) -> None:
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("even")(lambda text: not isinstance(text, str) or len(text) % 2 == 0)
    theirs = [error.message for error in jsonschema.Draft202012Validator(DATA_LIKE, format_checker=checker).iter_errors(value)]
    ours = schema.problems(value, DATA_LIKE, formats={"even": lambda text: len(text) % 2 == 0})
    assert bool(ours) == bool(theirs), (ours, theirs)


def test_problems_say_where_and_which_keyword() -> None:
    found = schema.problems({"git": "http://x", "names": {"Abc": "https://x"}, "other": 1}, DATA_LIKE)
    assert [(problem.path, problem.keyword) for problem in found] == [
        (("git",), "dependentRequired"), (("git",), "pattern"), (("names", "Abc"), "propertyNames"),
        (("other",), "additionalProperties")]
    assert found[0].missing == ("ref",)
    assert schema.errors({"git": "https://x"}, DATA_LIKE) == ["$: git needs ref"]
