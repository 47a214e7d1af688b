"""Properties of `Step.bound`, which turns a planned step into the step the executor runs: the
new environment's path in place of the plan's DIR.d/<new>, and nothing else changed (the plan
`plan` and `--dry-run` print is the program that runs)."""

from __future__ import annotations

from typing import List, Tuple

from hypothesis import event, given, settings
from hypothesis import strategies as st

from jetson_install.base.layout import staging_placeholder
from jetson_install.base.steps import KINDS, Step

PROPERTY = settings(max_examples=60, deadline=None)

# A --venv the user may give (any path but NUL); '<' is left out so that the placeholder's own
# "<new>" is the only '<' in a command: its occurrences are then exactly the ones put there.
venvs = st.text(st.characters(codec="utf-8", exclude_characters="\x00<"), min_size=1, max_size=20).map(lambda text: "/" + text)
pieces = st.text(st.characters(codec="utf-8", exclude_characters="\x00<"), max_size=12)
# A part of a command line as a plan writes it: text around any number of placeholders
# (--python DIR.d/<new>/bin/python, a bare DIR.d/<new>, a word without one).
parts = st.lists(pieces, min_size=1, max_size=4)
commands = st.lists(st.lists(parts, max_size=5), max_size=3)
staging_names = st.from_regex(r"env-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}", fullmatch=True)


def step_of(kind: str, planned: List[List[List[str]]], placeholder: str, equivalent: Tuple[str, ...]) -> Step:
    """The step whose command parts are `planned`'s pieces joined by the placeholder."""
    return Step(f"{kind}-step", kind, f"the {kind} step", tuple(tuple(placeholder.join(part) for part in command)
                                                                for command in planned), equivalent)


@PROPERTY
@given(venvs, staging_names, st.sampled_from(KINDS), commands, st.lists(pieces, max_size=3).map(tuple))
def test_a_bound_step_runs_the_planned_commands_with_the_new_environment_in_place_of_the_placeholder(
        venv: str, name: str, kind: str, planned: List[List[List[str]]], equivalent: Tuple[str, ...]) -> None:
    event(f"kind {kind}, placeholders: {min(sum(len(part) - 1 for command in planned for part in command), 3)}+")
    placeholder, staging = staging_placeholder(venv), f"{venv}.d/{name}"
    bound = step_of(kind, planned, placeholder, equivalent).bound(placeholder, staging)
    assert bound == step_of(kind, planned, staging, equivalent)
    assert not any(placeholder in part for command in bound.commands for part in command)


@PROPERTY
@given(venvs, staging_names, st.sampled_from(KINDS), st.lists(st.lists(pieces, max_size=5), max_size=3),
       st.lists(pieces, max_size=3).map(tuple))
def test_a_step_without_the_placeholder_runs_as_it_was_planned(venv: str, name: str, kind: str, planned: List[List[str]],
                                                               equivalent: Tuple[str, ...]) -> None:
    event(f"commands: {len(planned)}")
    step = Step("s", kind, "a step", tuple(tuple(command) for command in planned), equivalent)
    assert step.bound(staging_placeholder(venv), f"{venv}.d/{name}") == step


@PROPERTY
@given(venvs, staging_names, st.sampled_from(KINDS), commands)
def test_binding_a_bound_step_again_changes_nothing(venv: str, name: str, kind: str, planned: List[List[List[str]]]) -> None:
    event(f"commands: {len(planned)}")
    # The new environment's path never holds DIR.d/<new>: a bound step has nothing left to bind.
    placeholder, staging = staging_placeholder(venv), f"{venv}.d/{name}"
    once = step_of(kind, planned, placeholder, ()).bound(placeholder, staging)
    assert once.bound(placeholder, staging) == once


@PROPERTY
@given(venvs, staging_names, st.sampled_from(KINDS), commands)
def test_binding_keeps_what_the_plan_shows_of_a_step_but_its_commands(venv: str, name: str, kind: str,
                                                                      planned: List[List[List[str]]]) -> None:
    event(f"commands: {len(planned)}")
    placeholder = staging_placeholder(venv)
    step = step_of(kind, planned, placeholder, ("jetson-install", "doctor", "--venv", venv))
    bound = step.bound(placeholder, f"{venv}.d/{name}").to_json()
    shown = step.to_json()
    # The equivalent is what a user runs later, against DIR (routes/shared.py): it is kept as planned.
    assert {key: bound[key] for key in ("id", "kind", "title", "equivalent")} == \
        {key: shown[key] for key in ("id", "kind", "title", "equivalent")}
    assert [len(command) for command in bound["commands"]] == [len(command) for command in shown["commands"]]
