"""What every command prints the same way: its result as one JSON object on stdout (URL
credentials masked, as json_text writes it), a note on stderr; and its exit status where it is
not 0."""

from __future__ import annotations

import sys
from typing import Any, Optional

import click

from jetson_install.base.redact import json_text

__all__ = ["print_json", "exit_if", "print_note"]


def print_json(data: Any) -> None:
    click.echo(json_text(data), nl=False)


def exit_if(code: int) -> None:
    if code:
        sys.exit(code)


def print_note(note: Optional[str]) -> None:
    if note:
        click.echo(f"note: {note}", err=True)
