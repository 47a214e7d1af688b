"""Minimal edits of a TOML file as text (base/toml_text.py reads where everything is).

No TOML writer is a dependency (tomli and tomllib only read), and a writer that parses and
dumps would rewrite the whole file anyway: its comments, its order, its quoting. The edits here
change only what they name: items between two marker comments inside an array (a key made for
them where the table has none), and a region between two marker comments at the top level.
Everything else stays byte for byte.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from jetson_install.base.toml_text import SPACE, Marks, Statement, TomlEditError, TomlText, Value, key_text

__all__ = ["set_array_block", "array_block_lines", "drop_empty_table", "set_region", "region_statements"]


def _indent_of(doc: TomlText, array: Value) -> str:
    """The indentation of an array's first item that starts its own line, else four spaces."""
    for item in array.items:
        line_start = doc.text.rfind("\n", 0, item.start) + 1
        before = doc.text[line_start:item.start]
        if line_start > array.start and not before.strip(SPACE):
            return before
    return "    "


def _block(marks: Marks, items: Sequence[str], indent: str, made: bool = False) -> str:
    begin = marks.made if made and marks.made else marks.begin
    return "".join(f"{indent}{line}\n" for line in [begin] + [f"{item}," for item in items] + [marks.end])


def array_block_lines(doc: TomlText, path: Tuple[str, ...], marks: Marks) -> Optional[str]:
    """The text between the marks inside the array at `path` (None: no marks there)."""
    statement = doc.key(path)
    if statement is None or statement.value is None or statement.value.kind != "array":
        return None
    found = doc.marks(marks, statement.value.start, statement.value.end)
    if found is None:
        return None
    return doc.text[found[0].end + 1:doc.text.rfind("\n", 0, found[1].start) + 1]


def set_array_block(text: str, table: Tuple[str, ...], key: str, items: Sequence[str], marks: Marks) -> str:
    """`items` (TOML values as text) between the marks inside the array `table.key`, replacing
    what the marks held; the key is made where the table has none, and goes when nothing else
    is left in it. Refuses a key whose value is not an array."""
    doc = TomlText(text)
    path = table + (key,)
    statement = doc.key(path)
    if statement is None:
        if not items:
            return text
        return _insert_key(doc, table, key, "[\n" + _block(marks, items, "    ", made=True) + "]")
    array = statement.value
    if array is None or array.kind != "array":
        raise TomlEditError(f"{key_text(path)} is not an array", doc.line(statement.start))
    found = doc.marks(marks, array.start, array.end)
    if found is not None:
        first, last = doc.whole_lines(*found)
        made = bool(marks.made_tail) and text[found[0].start:found[0].end].rstrip().endswith(marks.made_tail)
        new = text[:first] + (_block(marks, items, _indent_of(doc, array), made) if items else "") + text[last:]
        return _drop_if_empty(new, path) if made and not items else new
    if not items:
        return text
    block = _block(marks, items, _indent_of(doc, array))
    close = array.end - 1
    line_start = text.rfind("\n", 0, close) + 1
    if line_start > array.start and not text[line_start:close].strip(SPACE):
        text = text[:line_start] + block + text[line_start:]  # `]` alone on its line: the block goes above it
    else:
        text = text[:close] + "\n" + block + text[close:]
    if array.items and not array.trailing_comma:
        last = array.items[-1].end  # before either insertion point
        text = text[:last] + "," + text[last:]
    return text


def _drop_if_empty(text: str, path: Tuple[str, ...]) -> str:
    """Remove the key at `path` where its array holds nothing now (no item, no comment)."""
    doc = TomlText(text)
    statement = doc.key(path)
    if statement is None or statement.value is None or statement.value.items:
        return text
    if any(statement.value.start < c.start < statement.value.end for c in doc.comments):
        return text
    return text[:statement.start] + text[statement.end:]


def drop_empty_table(text: str, table: Tuple[str, ...]) -> str:
    """Remove the header [table] where nothing follows it before the next header (no key, no
    comment): what removing the last key an edit made there leaves."""
    doc = TomlText(text)
    header = doc.header(table)
    if header is None:
        return text
    following = doc.statements[doc.statements.index(header) + 1:]
    if following and following[0].kind == "key":
        return text
    stop = following[0].start if following else len(text)
    if text[header.end:stop].strip():
        return text
    if not following:
        return text[:header.start].rstrip("\n") + "\n"
    return text[:header.start] + text[stop:]


def _insert_key(doc: TomlText, table: Tuple[str, ...], key: str, value: str) -> str:
    """`key = value` added to `table`: at the end of its [table] section; as a dotted key in the
    section whose dotted keys define the table; else in a new [table] at the end of the text."""
    text = doc.text
    header = doc.header(table) if table else None
    if header is not None or not table:
        return _insert_at(text, doc.section_end(header), f"{key_text((key,))} = {value}\n")
    for statement in doc.statements:
        if statement.kind != "key":
            continue
        depth = len(statement.path)
        if statement.path[:len(table)] == table and depth > len(table) and len(statement.table) < len(table):
            # `[tool]` with `uv.package = false`: the table is made of dotted keys in that section.
            owner = doc.header(statement.table) if statement.table else None
            relative = table[len(statement.table):] + (key,)
            return _insert_at(text, doc.section_end(owner), f"{key_text(relative)} = {value}\n")
        if statement.path == table[:depth]:
            raise TomlEditError(f"{key_text(statement.path)} is written as one value (an inline table); "
                                f"jetson-install adds {key_text(table + (key,))} to it as a [{key_text(table)}] table",
                                doc.line(statement.start))
    separator = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return text + f"{separator}[{key_text(table)}]\n{key_text((key,))} = {value}\n"


def _insert_at(text: str, offset: int, insert: str) -> str:
    if offset > 0 and not text[:offset].endswith("\n"):
        insert = "\n" + insert
    return text[:offset] + insert + text[offset:]


def region_statements(doc: TomlText, marks: Marks) -> Tuple[Optional[Tuple[int, int]], List[Statement]]:
    """The top-level region between the marks (its offsets), and the statements in it."""
    found = doc.marks(marks, top=True)
    if found is None:
        return None, []
    first, last = doc.whole_lines(*found)
    return (first, last), [s for s in doc.statements if first <= s.start < last]


def set_region(text: str, body: str, marks: Marks) -> str:
    """`body` (whole lines) between the marks at the top level, replacing the region where there
    is one, else after everything; an empty body removes the region and the blank line before it."""
    doc = TomlText(text)
    span, _ = region_statements(doc, marks)
    region = f"{marks.begin}\n{body}{marks.end}\n" if body else ""
    if span is not None:
        first, last = span
        if not body and text[:first].endswith("\n\n"):
            first -= 1
        return text[:first] + region + text[last:]
    if not body:
        return text
    separator = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return text + separator + region
