"""The command the user ran, as every fix and every next step the tool prints repeats it: with an
option changed, dropped or added, or another command keeping the options it also takes.

Apart from the fix texts (fixes.py): an install that succeeds, a no-op re-run above all, carries
its command but prints no fix.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import List, Tuple

__all__ = ["Rerun"]


@dataclass(frozen=True)
class Rerun:
    """The command the user ran, to be repeated with options changed, never repeated twice."""

    argv: Tuple[str, ...]  # without the program name

    def without(self, option: str) -> "Rerun":
        """Drop `option` and its value, written `--opt VALUE` or `--opt=VALUE`."""
        kept = []
        skip = False
        for arg in self.argv:
            if skip:
                skip = False
            elif arg == option:
                skip = True
            elif not arg.startswith(option + "="):
                kept.append(arg)
        return Rerun(tuple(kept))

    def gives(self, option: str) -> bool:
        """Whether the command has `option`, written `--opt VALUE` or `--opt=VALUE`."""
        return self.without(option) != self

    def with_option(self, option: str, value: str) -> "Rerun":
        return Rerun(self.without(option).argv + (option, value))

    def with_another(self, option: str, value: str) -> "Rerun":
        """One more `option VALUE` of an option given as often as wanted (--mirror, --with)."""
        return Rerun(self.argv + (option, value))

    def with_flag(self, flag: str) -> "Rerun":
        return self if flag in self.argv else Rerun(self.argv + (flag,))

    def replaced(self, command: str, replacement: Tuple[str, ...], drop: Tuple[str, ...] = (),
                 only_here: Tuple[str, ...] = (), elsewhere: Tuple[str, ...] = ()) -> "Rerun":
        """What to run next: this command with `command` (and the words in `drop` right after
        it) replaced, without the flags `only_here` that only it takes, and without the options
        `elsewhere` (with their values) that only make sense on this machine."""
        args: List[str] = []
        words = iter(self.argv)
        for word in words:
            if word in elsewhere:
                next(words, None)  # its value
            elif word not in only_here and word.split("=", 1)[0] not in elsewhere:
                args.append(word)
        if command in args:
            at = args.index(command)
            end = at + 1 + sum(1 for word in drop if args[at + 1:at + 2] == [word])
            args[at:end] = replacement
        return Rerun(tuple(args))

    def keeping(self, command: str, options: Tuple[str, ...], flags: Tuple[str, ...] = ()) -> "Rerun":
        """Another command, `command`, with only the `options` (and their values) and `flags`
        of this one that it also takes, as the user wrote them."""
        args: List[str] = [command]
        words = iter(self.argv)
        for word in words:
            name = word.split("=", 1)[0]
            if word in options:
                args += [word, next(words, "")]
            elif name in options or word in flags:
                args.append(word)
        return Rerun(tuple(args))

    def __str__(self) -> str:
        # A placeholder the user replaces (URL, TAG) stays readable, unquoted.
        return "jetson-install " + " ".join(arg if arg.isalpha() and arg.isupper() else shlex.quote(arg)
                                            for arg in self.argv)
