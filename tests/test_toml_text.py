"""base/toml_edit.py (on base/toml_text.py): the edits change exactly what they name, in any valid TOML around them."""

from __future__ import annotations

import copy
import sys
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from jetson_install.base.toml_edit import drop_empty_table, set_array_block, set_region
from jetson_install.base.toml_text import Marks, TomlEditError, TomlText

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MARKS = Marks("# >>> mine: one >>>", "# >>> mine", "# <<< mine <<<", "# >>> mine: one, the key too >>>", ", the key too >>>")
OTHER = Marks("# >>> mine: two >>>", "# >>> mine", "# <<< mine <<<", "# >>> mine: two, the key too >>>", ", the key too >>>")


def test_items_go_between_marks_in_an_array_of_one_line_and_come_out_again() -> None:
    text = '[project]\ndependencies = ["a", "b"]  # the project\'s\n'
    added = set_array_block(text, ("project",), "dependencies", ['"c"'], MARKS)
    assert added == ('[project]\ndependencies = ["a", "b",\n    # >>> mine: one >>>\n    "c",\n    # <<< mine <<<\n'
                     ']  # the project\'s\n')
    assert set_array_block(added, ("project",), "dependencies", ['"c"'], MARKS) == added
    replaced = set_array_block(added, ("project",), "dependencies", ['"d"', '"e"'], OTHER)
    assert tomllib.loads(replaced)["project"]["dependencies"] == ["a", "b", "d", "e"]
    assert "# >>> mine: two >>>" in replaced and "one" not in replaced
    assert tomllib.loads(set_array_block(replaced, ("project",), "dependencies", [], MARKS))["project"] == {
        "dependencies": ["a", "b"]}


def test_a_missing_key_is_made_where_its_table_is_written() -> None:
    text = "# top\n[tool.uv]\npackage = false\n\n[other]\nx = 1\n"
    made = set_array_block(text, ("tool", "uv"), "conflicts", ["1"], MARKS)
    assert made.startswith("# top\n[tool.uv]\npackage = false\nconflicts = [\n")
    assert made.endswith("]\n\n[other]\nx = 1\n")
    dotted = set_array_block("[tool]\nuv.package = false\n", ("tool", "uv"), "conflicts", ["1"], MARKS)
    assert dotted.startswith("[tool]\nuv.package = false\nuv.conflicts = [\n")
    new = set_array_block('name = "x"', ("tool", "uv"), "conflicts", ["1"], MARKS)
    assert new.startswith('name = "x"\n\n[tool.uv]\nconflicts = [\n')
    assert tomllib.loads(new) == {"name": "x", "tool": {"uv": {"conflicts": [1]}}}


def test_an_inline_table_or_a_value_that_is_no_array_is_refused_with_its_line() -> None:
    with pytest.raises(TomlEditError) as inline:
        set_array_block("a = 1\n[tool]\nuv = { package = false }\n", ("tool", "uv"), "conflicts", ["1"], MARKS)
    assert inline.value.line == 3 and "tool.uv is written as one value" in str(inline.value)
    with pytest.raises(TomlEditError) as scalar:
        set_array_block('[tool.uv]\nconflicts = "no"\n', ("tool", "uv"), "conflicts", ["1"], MARKS)
    assert scalar.value.line == 2 and "is not an array" in str(scalar.value)


def test_marks_out_of_pairs_are_refused_with_the_line() -> None:
    text = '[p]\nd = [\n    # >>> mine: one >>>\n    "c",\n]\n'
    with pytest.raises(TomlEditError) as found:
        set_array_block(text, ("p",), "d", ['"e"'], MARKS)
    assert found.value.line == 3


def test_a_region_is_replaced_in_place_and_removed_with_its_blank_line() -> None:
    text = "[a]\nx = 1\n\n[b]\ny = 2\n"
    body = '[[tool.uv.index]]\nname = "n"\n'
    once = set_region(text, body, MARKS)
    assert once == text + "\n# >>> mine: one >>>\n" + body + "# <<< mine <<<\n"
    assert set_region(once, body, MARKS) == once
    assert set_region(once, "", MARKS) == text


def test_an_empty_table_left_behind_goes() -> None:
    assert drop_empty_table("[a]\nx = 1\n\n[tool.uv.sources]\n\n[b]\ny = 2\n", ("tool", "uv", "sources")) == \
        "[a]\nx = 1\n\n[b]\ny = 2\n"
    assert drop_empty_table("[a]\nx = 1\n\n[tool.uv.sources]\n", ("tool", "uv", "sources")) == "[a]\nx = 1\n"
    kept = "[tool.uv.sources]\n# the project's own note\n\n[b]\n"
    assert drop_empty_table(kept, ("tool", "uv", "sources")) == kept


def test_the_scanner_finds_every_statement_of_tricky_text() -> None:
    text = ('a = """x = [1,\n# not a comment\n]"""\nb = \'\'\'[tool.uv]\'\'\'\n"c.d" = { e = [1, 2], f = "}" }\n'
            "g = 1979-05-27 07:32:00  # a date with a blank\n[[h.i]]\nj = [\n  [1, 2],  # nested\n  'k',\n]\n")
    doc = TomlText(text)
    assert [s.path for s in doc.statements] == [("a",), ("b",), ("c.d",), ("g",), ("h", "i"), ("h", "i", "j")]
    j = doc.key(("h", "i", "j"))
    assert j is not None and j.value is not None and len(j.value.items) == 2 and j.value.trailing_comma


# -- any document ------------------------------------------------------------------------------

_STRINGS = st.sampled_from(['"plain"', '"a # b"', '"[x]"', "'lit # ]'", '"q\\"uote"', '"""multi\n[line] # x"""',
                            "'''raw\n'''"])
_SCALARS = st.one_of(_STRINGS, st.sampled_from(["1", "true", "2.5", "1979-05-27"]))


def _array(items: List[str], multiline: bool, comment: bool, trailing: bool) -> str:
    if not multiline:
        return "[" + ", ".join(items) + ("," if trailing and items else "") + "]"
    lines = "".join(f"    {item},{'  # note' if comment else ''}\n" for item in items)
    return "[\n" + lines + ("    # the end\n" if comment else "") + "]"


_ARRAYS = st.builds(_array, st.lists(_SCALARS, max_size=3), st.booleans(), st.booleans(), st.booleans())
_VALUES = st.one_of(_SCALARS, _ARRAYS, st.sampled_from(['{ a = 1, "b c" = "d" }', "{}"]))
_KEYS = st.sampled_from(["name", "x", '"quoted key"', "dotted.part", "uv.package", "constraint-dependencies",
                         "default-groups"])
_HEADERS = st.sampled_from([None, "[tool]", "[tool.uv]", "[tool.uv.sources]", "[dependency-groups]", "[project]",
                            "[[tool.uv.index]]", "[tool.ruff]"])
_SECTIONS = st.lists(st.tuples(_HEADERS, st.lists(st.tuples(_KEYS, _VALUES), max_size=3),
                               st.sampled_from(["", "# a comment\n", "\n"])), max_size=5)
_TARGETS = st.sampled_from([(("tool", "uv"), "constraint-dependencies"), (("dependency-groups",), "jetson-x"),
                            (("tool", "uv", "sources"), "torch"), (("project",), "x")])


def _document(sections: List[Tuple[Optional[str], List[Tuple[str, str]], str]]) -> str:
    out = []
    for position, (header, pairs, gap) in enumerate(sections):
        if header is None and position > 0:
            continue  # keys without a header belong only at the top
        if header is not None:
            out.append(header + "\n")
        out.extend(f"{key} = {value}\n" for key, value in pairs)
        out.append(gap)
    return "".join(out)


def _with(data: Dict[str, Any], path: Tuple[str, ...], items: List[Any]) -> Dict[str, Any]:
    data = copy.deepcopy(data)
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = list(node.get(path[-1], [])) + items
    return data


def _drop_empty(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _drop_empty(v) for k, v in data.items() if not (isinstance(v, dict) and not _drop_empty(v))}
    return data


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(_SECTIONS, _TARGETS, st.lists(st.sampled_from(['"n<2"', '"t==1 ; m"', "{ index = \"j\" }"]), min_size=1, max_size=3))
def test_any_document_gains_exactly_the_items_and_loses_them_again(
        sections: List[Tuple[Optional[str], List[Tuple[str, str]], str]], target: Tuple[Tuple[str, ...], str],
        items: List[str]) -> None:
    event(f"sections: {len(sections)}, target table depth {len(target[0])}")
    text = _document(sections)
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assume(False)
        return
    table, key = target
    existing: Any = before
    for part in table + (key,):
        existing = existing.get(part) if isinstance(existing, dict) else None
    assume(existing is None or isinstance(existing, list))
    try:
        added = set_array_block(text, table, key, items, MARKS)
    except TomlEditError as refused:
        message = str(refused)
    else:
        message = ""
    if message:
        event("refused: an inline table")
        assert "inline table" in message  # the one text it may refuse: a table written as one value
        return
    values = [tomllib.loads(f"v = {item}")["v"] for item in items]
    assert tomllib.loads(added) == _with(before, table + (key,), values)
    assert set_array_block(added, table, key, items, MARKS) == added
    removed = set_array_block(added, table, key, [], MARKS)
    assert _drop_empty(tomllib.loads(removed)) == _drop_empty(before)
