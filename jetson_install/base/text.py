"""Text from outside made inert: what is printed from a root, evidence or an index shows its
control characters as escapes (a terminal would obey them), and what the user types may hold
none (a newline in a requirement becomes a uv directive once requirements go to a file)."""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["printable", "control_character"]

# C0 but tab, DEL and C1: what a terminal reads as a command (ESC starts its sequences, CR and
# BS redraw a line) and what splits one line into two. ECMA-48 sections 5 and 8.3:
# https://ecma-international.org/publications-and-standards/standards/ecma-48/
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, lines: bool = False) -> str:
    """`text` with each control character shown as its escape (`\\x1b`, `\\n`), so a value read
    from outside prints as one inert line; with `lines`, newlines stay (text of many lines)."""
    return (_CONTROL_BUT_NEWLINE if lines else _CONTROL).sub(lambda found: repr(found.group())[1:-1], text)


def control_character(text: str) -> Optional[str]:
    """The first control character in `text`, as its escape, or None where there is none."""
    found = _CONTROL.search(text)
    return None if found is None else repr(found.group())[1:-1]
