"""Every value the user gives is one line of text: a control character in an argument or in one
of the tool's environment variables is refused, naming the option it was given to."""

from __future__ import annotations

import os
from typing import List, Set

import click

from jetson_install.base.errors import BadInput
from jetson_install.cli import options

__all__ = ["refuse_control_characters"]


def refuse_control_characters(args: List[str], group: click.Group) -> None:
    """Every value the user gives is one line of text: a requirement, a path, a URL. A control
    character in one is refused before anything reads it (a newline in a --with requirement
    became a uv directive, `-e FOLDER`, once the requirements went to a file)."""
    from jetson_install.base.text import control_character, printable

    given = [(f"${variable}", os.environ[variable]) for variable in options.ENVIRONMENT_VARIABLES
             if variable in os.environ]
    taking_values = set(_taking_values(group))  # the whole command tree's, walked once
    given += [(_named(args, number, taking_values), arg.split("=", 1)[-1] if arg.startswith("--") else arg)
              for number, arg in enumerate(args)]
    for where, value in given:
        if where in _CHECKED_ON_THEIR_OWN:
            continue
        found = control_character(value)
        if found is not None:
            raise BadInput(f"{where} '{printable(value)}' contains the control character '{found}'",
                           fix=f"give {where} without control characters: one line, one requirement, path or URL "
                               "(a newline often comes from a script's variable)")


#: Values whose own check refuses a control character with the finer reason: an index URL
#: (catalog/settings.check_index_url) and an image reference (dockerfile's --base).
_CHECKED_ON_THEIR_OWN = ("--vendor-index", "--default-index", "--cpu-index", "$JETSON_INSTALL_DEFAULT_INDEX",
                         "$JETSON_INSTALL_VENDOR_INDEX", "--base")


def _named(args: List[str], number: int, taking_values: Set[str]) -> str:
    """What the user calls args[number]: its option (`--with`, one of `taking_values`), or the
    argument it is."""
    arg = args[number]
    if arg.startswith("--") and "=" in arg:
        return arg.split("=", 1)[0]
    before = args[number - 1] if number else ""
    if before.startswith("-") and "=" not in before and before in taking_values:
        return before
    return f"argument {number + 1}"


def _taking_values(command: click.Command) -> List[str]:
    """Every option of `command` and its subcommands that takes a value (not a flag)."""
    found = [name for parameter in command.params if isinstance(parameter, click.Option)
             and not parameter.is_flag and not parameter.count for name in parameter.opts]
    for sub in getattr(command, "commands", {}).values():
        found += _taking_values(sub)
    return found
