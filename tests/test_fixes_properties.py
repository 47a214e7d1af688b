"""Properties of `Rerun`, which rewrites the command the user ran into the one a `fix:` line
tells them to run: the rewritten command reads back (as a shell splits it) as the user's words
with exactly the change, whatever text their arguments hold."""

from __future__ import annotations

import shlex
from typing import List, Tuple

from hypothesis import event, given, settings
from hypothesis import strategies as st

from jetson_install.planning.rerun import Rerun

PROPERTY = settings(max_examples=80, deadline=None)

OPTIONS = ("--venv", "--ref", "--vendor-index", "--python", "--default-index", "--root")
FLAGS = ("--yes", "--no-verify", "--vendor-fallback", "--json", "--resolve")
COMMANDS = ("obliteratus", "plan", "detect", "lock", "torch")
# Any argument a user can type on one line: a path with spaces, a quote, a '$', a URL, non-ASCII.
CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7f, 0xa0)]))
texts = st.text(st.characters(codec="utf-8", exclude_characters=CONTROLS), max_size=20)


# A value never starts with "--": the tool's parser would read one as an option.
values = texts.filter(lambda text: not text.startswith("--"))


@st.composite
def units(draw: st.DrawFn, leaving_out: str = "") -> List[Tuple[str, ...]]:
    """A command line as the user wrote it, word groups the parser reads as one: a command, then
    options (`--opt VALUE` or `--opt=VALUE`), flags and other words in any order; without the
    option `leaving_out`."""
    options = [option for option in OPTIONS if option != leaving_out]
    found: List[Tuple[str, ...]] = [(draw(st.sampled_from(COMMANDS)),)]
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["option", "option=", "flag", "word"]))
        if kind == "option":
            found.append((draw(st.sampled_from(options)), draw(values)))
        elif kind == "option=":
            found.append((f"{draw(st.sampled_from(options))}={draw(values)}",))
        elif kind == "flag":
            found.append((draw(st.sampled_from(FLAGS)),))
        else:
            found.append((draw(texts.filter(lambda text: not text.startswith("-"))),))
    return found


def joined(groups: List[Tuple[str, ...]]) -> Tuple[str, ...]:
    return tuple(word for group in groups for word in group)


argvs = units().map(joined)


@st.composite
def with_option_given(draw: st.DrawFn) -> Tuple[Tuple[str, ...], str, Tuple[str, ...]]:
    """The user's words without an option, the option, and the words with it put in anywhere
    after the command (none, once or more), as `--opt VALUE` or `--opt=VALUE`."""
    option = draw(st.sampled_from(OPTIONS))
    groups = draw(units(leaving_out=option))
    base = joined(groups)
    for _ in range(draw(st.integers(0, 3))):
        at, value = draw(st.integers(1, len(groups))), draw(values)
        groups.insert(at, (option, value) if draw(st.booleans()) else (f"{option}={value}",))
    return base, option, joined(groups)


@PROPERTY
@given(argvs)
def test_the_command_shown_reads_back_as_the_users_words(argv: Tuple[str, ...]) -> None:
    event(f"quoted words: {sum(shlex.quote(word) != word for word in argv) > 0}")
    assert shlex.split(str(Rerun(argv))) == ["jetson-install", *argv]


@PROPERTY
@given(argvs, st.sampled_from(FLAGS))
def test_with_flag_adds_the_flag_once(argv: Tuple[str, ...], flag: str) -> None:
    event(f"the flag was given already: {flag in argv}")
    once = Rerun(argv).with_flag(flag)
    assert once.argv == (argv if flag in argv else argv + (flag,))
    assert once.with_flag(flag) == once
    assert shlex.split(str(once)) == ["jetson-install", *once.argv]


@PROPERTY
@given(with_option_given())
def test_without_drops_the_option_and_its_value_however_written(given_words: Tuple[Tuple[str, ...], str, Tuple[str, ...]]) -> None:
    base, option, argv = given_words
    event(f"the option given {min(len(argv) - len(base), 4)} words")
    assert Rerun(argv).without(option).argv == base


@PROPERTY
@given(with_option_given(), values)
def test_with_option_sets_the_option_to_the_value_once(given_words: Tuple[Tuple[str, ...], str, Tuple[str, ...]],
                                                       value: str) -> None:
    base, option, argv = given_words
    event(f"the option was given: {argv != base}")
    once = Rerun(argv).with_option(option, value)
    assert once.argv == base + (option, value)
    assert once.with_option(option, value) == once
    assert shlex.split(str(once)) == ["jetson-install", *base, option, value]


@PROPERTY
@given(argvs, st.sampled_from(COMMANDS), st.lists(st.sampled_from(OPTIONS), unique=True).map(tuple),
       st.lists(st.sampled_from(FLAGS), unique=True).map(tuple))
def test_keeping_takes_only_the_named_options_and_flags_in_the_users_order(
        argv: Tuple[str, ...], command: str, options: Tuple[str, ...], flags: Tuple[str, ...]) -> None:
    event(f"words kept of those given: {min(len(Rerun(argv).keeping(command, options, flags).argv) - 1, 3)}+")
    kept = Rerun(argv).keeping(command, options, flags).argv
    assert kept[0] == command
    rest = iter(argv)
    assert all(any(word == given for given in rest) for word in kept[1:])  # in the user's order
    words = iter(kept[1:])
    for word in words:
        if word in options:
            next(words, None)  # its value, as the user wrote it
        else:
            assert word in flags or word.split("=", 1)[0] in options


@PROPERTY
@given(argvs, st.sampled_from(COMMANDS), st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=2).map(tuple),
       st.lists(st.sampled_from(FLAGS), unique=True, max_size=2).map(tuple),
       st.lists(st.sampled_from(OPTIONS), unique=True, max_size=2).map(tuple))
def test_replaced_swaps_the_command_and_drops_what_only_made_sense_here(
        argv: Tuple[str, ...], command: str, replacement: Tuple[str, ...], only_here: Tuple[str, ...],
        elsewhere: Tuple[str, ...]) -> None:
    event(f"the command is the one replaced: {argv[0] == command}")
    shown = Rerun(argv).replaced(command, replacement, only_here=only_here, elsewhere=elsewhere)
    assert not any(word in only_here or word in elsewhere or word.split("=", 1)[0] in elsewhere for word in shown.argv)
    assert shlex.split(str(shown)) == ["jetson-install", *shown.argv]
    if argv[0] == command:
        assert shown.argv[:len(replacement)] == replacement
