"""A TOML file as text: where each table, key, value and comment is, and minimal edits of it.

No TOML writer is a dependency (tomli and tomllib only read), and a writer that parses and
dumps would rewrite the whole file anyway: its comments, its order, its quoting. The edits here
change only what they name: items between two marker comments inside an array (a key made for
them where the table has none), and a region between two marker comments at the top level.
Everything else stays byte for byte. The scanner follows TOML 1.0 (https://toml.io/en/v1.0.0);
it is given only text tomllib has accepted, and the caller parses what it writes again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

__all__ = ["TomlEditError", "Marks", "Value", "Statement", "TomlText", "key_text", "string", "set_array_block",
           "array_block_lines", "drop_empty_table", "set_region", "region_statements"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SPACE = " \t"
# A number, boolean or date: up to what ends a value (a local date-time may hold a space).
_SCALAR = re.compile(r"[^,\]}#\r\n]+")


class TomlEditError(ValueError):
    """The text cannot be edited as asked; `line` (1-based) is where, 0 when nowhere in particular."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Marks:
    """The comment lines around what an edit owns: `begin` is written whole, and a line is taken
    for a begin or end mark when its comment starts with `begin_prefix` or is `end`. `made` is
    the begin line of an array whose key the edit made (it ends in `made_tail`): that key goes
    when its last item does, where a key of the project's own stays, empty or not."""

    begin: str
    begin_prefix: str
    end: str
    made: str = ""
    made_tail: str = ""


@dataclass(frozen=True)
class Value:
    kind: str  # "array", "table" (inline), "string" or "scalar"
    start: int
    end: int  # offset after the value
    items: Tuple["Value", ...] = ()  # an array's items; an inline table's values
    trailing_comma: bool = False  # an array's last item is followed by a comma


@dataclass(frozen=True)
class Statement:
    kind: str  # "table" ([a.b]), "array-table" ([[a.b]]) or "key" (a.b = value)
    path: Tuple[str, ...]  # absolute: a key's table and its own dotted parts
    table: Tuple[str, ...]  # the header a key sits under (() at the top); a header's own path
    start: int  # the offset of its first character
    end: int  # the offset after its line's newline (or the text's end)
    value: Optional[Value] = None


@dataclass(frozen=True)
class Comment:
    start: int  # the offset of '#'
    end: int  # the offset of the newline that ends it (or the text's end)
    alone: bool  # nothing but blanks before it on its line
    top: bool  # outside every value


def key_text(parts: Sequence[str]) -> str:
    """A dotted key as TOML writes it: bare parts where they may be, quoted otherwise."""
    return ".".join(part if _BARE.fullmatch(part) else string(part) for part in parts)


def string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's for every character JSON escapes."""
    return json.dumps(value, ensure_ascii=False)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.comments: List[Comment] = []
        self.depth = 0

    def line(self, offset: Optional[int] = None) -> int:
        return self.text.count("\n", 0, self.pos if offset is None else offset) + 1

    def fail(self, what: str) -> TomlEditError:
        return TomlEditError(f"cannot read {what}", self.line())

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos:self.pos + count]

    def blanks(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
            self.pos += 1

    def comment(self) -> None:
        if self.peek() != "#":
            return
        start = self.pos
        end = self.text.find("\n", start)
        end = len(self.text) if end < 0 else end
        line_start = self.text.rfind("\n", 0, start) + 1
        alone = not self.text[line_start:start].strip(_SPACE)
        self.comments.append(Comment(start, end, alone, self.depth == 0))
        self.pos = end

    def blanks_newlines_comments(self) -> None:
        while self.pos < len(self.text):
            self.blanks()
            if self.peek() == "#":
                self.comment()
            elif self.peek(2) == "\r\n":
                self.pos += 2
            elif self.peek() == "\n":
                self.pos += 1
            else:
                return

    def end_of_line(self) -> int:
        """After a statement: blanks, a comment, then the newline; the offset after it."""
        self.blanks()
        self.comment()
        if self.peek(2) == "\r\n":
            self.pos += 2
        elif self.peek() == "\n":
            self.pos += 1
        elif self.pos < len(self.text):
            raise self.fail("the end of a line")
        return self.pos

    def key(self) -> Tuple[str, ...]:
        parts = []
        while True:
            self.blanks()
            char = self.peek()
            if char == '"':
                parts.append(json.loads(self.text[self.pos:self.basic_string_end()]))
            elif char == "'":
                end = self.text.index("'", self.pos + 1)
                parts.append(self.text[self.pos + 1:end])
                self.pos = end + 1
            else:
                found = _BARE.match(self.text, self.pos)
                if found is None:
                    raise self.fail("a key")
                parts.append(found.group(0))
                self.pos = found.end()
            self.blanks()
            if self.peek() != ".":
                return tuple(parts)
            self.pos += 1

    def basic_string_end(self) -> int:
        """From the opening quote of a one-line basic string: the offset after its closing quote
        (self.pos moves there)."""
        index = self.pos + 1
        while index < len(self.text):
            char = self.text[index]
            if char == "\\":
                index += 2
                continue
            if char == '"':
                self.pos = index + 1
                return self.pos
            if char == "\n":
                break
            index += 1
        raise self.fail("a string")

    def multiline_end(self, quote: str) -> None:
        """From an opening triple quote: past the closing one, with the one or two quotes TOML
        lets stand just inside it."""
        index = self.pos + 3
        while True:
            found = self.text.find(quote * 3, index)
            if found < 0:
                raise self.fail("a multi-line string")
            if quote == '"':
                backslashes = len(self.text[:found]) - len(self.text[:found].rstrip("\\"))
                if backslashes % 2:
                    index = found + 1
                    continue
            end = found + 3
            while end < len(self.text) and self.text[end] == quote and end - found < 5:
                end += 1
            self.pos = end
            return

    def value(self) -> Value:
        start, char = self.pos, self.peek()
        if self.peek(3) in ('"""', "'''"):
            self.multiline_end(self.peek())
            return Value("string", start, self.pos)
        if char == '"':
            self.basic_string_end()
            return Value("string", start, self.pos)
        if char == "'":
            end = self.text.find("'", start + 1)
            if end < 0 or "\n" in self.text[start:end]:
                raise self.fail("a string")
            self.pos = end + 1
            return Value("string", start, self.pos)
        if char == "[":
            return self.array()
        if char == "{":
            return self.inline_table()
        found = _SCALAR.match(self.text, self.pos)
        if found is None or not found.group(0).strip():
            raise self.fail("a value")
        self.pos = start + len(found.group(0).rstrip(_SPACE))
        return Value("scalar", start, self.pos)

    def array(self) -> Value:
        start = self.pos
        self.pos += 1
        self.depth += 1
        items: List[Value] = []
        comma = False
        while True:
            self.blanks_newlines_comments()
            if self.peek() == "]":
                break
            items.append(self.value())
            comma = False
            self.blanks_newlines_comments()
            if self.peek() == ",":
                self.pos += 1
                comma = True
            elif self.peek() != "]":
                raise self.fail("an array")
        self.pos += 1
        self.depth -= 1
        return Value("array", start, self.pos, tuple(items), comma)

    def inline_table(self) -> Value:
        start = self.pos
        self.pos += 1
        self.depth += 1
        values: List[Value] = []
        while True:
            self.blanks_newlines_comments()
            if self.peek() == "}":
                break
            self.key()
            self.blanks()
            if self.peek() != "=":
                raise self.fail("an inline table")
            self.pos += 1
            self.blanks()
            values.append(self.value())
            self.blanks_newlines_comments()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "}":
                raise self.fail("an inline table")
        self.pos += 1
        self.depth -= 1
        return Value("table", start, self.pos, tuple(values))

    def statements(self) -> List[Statement]:
        found: List[Statement] = []
        table: Tuple[str, ...] = ()
        while True:
            self.blanks_newlines_comments()
            if self.pos >= len(self.text):
                return found
            line_start = self.text.rfind("\n", 0, self.pos) + 1
            if self.peek() == "[":
                array = self.peek(2) == "[["
                self.pos += 2 if array else 1
                table = self.key()
                closing = "]]" if array else "]"
                if self.peek(len(closing)) != closing:
                    raise self.fail("a table header")
                self.pos += len(closing)
                found.append(Statement("array-table" if array else "table", table, table, line_start,
                                       self.end_of_line()))
                continue
            parts = self.key()
            if self.peek() != "=":
                raise self.fail("a key and its value")
            self.pos += 1
            self.blanks()
            value = self.value()
            found.append(Statement("key", table + parts, table, line_start, self.end_of_line(), value))


class TomlText:
    """The statements and comments of a TOML text (tomllib has accepted it), with their offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        scanner = _Scanner(text)
        self.statements = scanner.statements()
        self.comments = scanner.comments

    def line(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def key(self, path: Tuple[str, ...]) -> Optional[Statement]:
        return next((s for s in self.statements if s.kind == "key" and s.path == path), None)

    def header(self, path: Tuple[str, ...]) -> Optional[Statement]:
        return next((s for s in self.statements if s.kind == "table" and s.path == path), None)

    def section_end(self, header: Optional[Statement]) -> int:
        """After the last key of the section `header` starts (None: the top level, before any
        header): where a key added to that table goes."""
        position = self.statements.index(header) + 1 if header is not None else 0
        end = header.end if header is not None else 0
        keys = False
        for statement in self.statements[position:]:
            if statement.kind != "key":
                break
            end, keys = statement.end, True
        if header is not None and not keys:
            # Comment lines right under a header with no key are that section's: the key goes below them.
            while True:
                line_end = self.text.find("\n", end)
                line = self.text[end:len(self.text) if line_end < 0 else line_end]
                if not line.strip(_SPACE).startswith("#"):
                    return end
                end = len(self.text) if line_end < 0 else line_end + 1
        return end

    def marks(self, marks: Marks, start: int = 0, end: Optional[int] = None,
              top: bool = False) -> Optional[Tuple[Comment, Comment]]:
        """The begin and end mark comments between `start` and `end` (each alone on its line)."""
        stop = len(self.text) if end is None else end
        inside = [c for c in self.comments if start <= c.start < stop and c.alone and (c.top or not top)]
        begins = [c for c in inside if self.text[c.start:c.end].startswith(marks.begin_prefix)]
        ends = [c for c in inside if self.text[c.start:c.end].rstrip() == marks.end]
        if not begins and not ends:
            return None
        if len(begins) != 1 or len(ends) != 1 or ends[0].start < begins[0].start:
            where = (begins or ends)[0].start
            raise TomlEditError("has the marks around jetson-install's lines out of pairs (one begin, then one end)",
                                self.line(where))
        return begins[0], ends[0]

    def whole_lines(self, begin: Comment, end: Comment) -> Tuple[int, int]:
        """From the start of `begin`'s line to after `end`'s newline."""
        first = self.text.rfind("\n", 0, begin.start) + 1
        return first, min(end.end + 1, len(self.text))


def _indent_of(doc: TomlText, array: Value) -> str:
    """The indentation of an array's first item that starts its own line, else four spaces."""
    for item in array.items:
        line_start = doc.text.rfind("\n", 0, item.start) + 1
        before = doc.text[line_start:item.start]
        if line_start > array.start and not before.strip(_SPACE):
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
    if line_start > array.start and not text[line_start:close].strip(_SPACE):
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
