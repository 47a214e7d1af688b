"""A TOML file as text: where each table, key, value and comment is (and the marker comments
around what an edit owns), for the minimal edits of base/toml_edit.py.

The scanner follows TOML 1.0 (https://toml.io/en/v1.0.0); it is given only text tomllib has
accepted, and the caller parses what it writes again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

__all__ = ["TomlEditError", "Marks", "Value", "Statement", "TomlText", "key_text", "string", "SPACE"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
SPACE = " \t"
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
        while self.pos < len(self.text) and self.text[self.pos] in SPACE:
            self.pos += 1

    def comment(self) -> None:
        if self.peek() != "#":
            return
        start = self.pos
        end = self.text.find("\n", start)
        end = len(self.text) if end < 0 else end
        line_start = self.text.rfind("\n", 0, start) + 1
        alone = not self.text[line_start:start].strip(SPACE)
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
        self.pos = start + len(found.group(0).rstrip(SPACE))
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
                if not line.strip(SPACE).startswith("#"):
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
