"""Properties of the lock format (catalog/lock_file.py): every lock `render_lock` writes reads
back as the same lock, and a damaged lock text is refused with one line naming where it is
damaged, never a traceback."""

from __future__ import annotations

import dataclasses
import re
from typing import List, Optional, Tuple
from urllib.parse import quote

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from support import reached

from jetson_install.base.errors import BadInput
from jetson_install.catalog.lock_file import Lock, Locked, parse_lock, render_lock

# Each example renders and parses a whole lock; forty keep the file within the fast tier.
PROPERTY = settings(max_examples=40, deadline=None)
WHERE = "board.lock"

# Python's str.splitlines ends a line at each of these; a lock's header value holds one line.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
any_line = st.text(st.characters(codec="utf-8", exclude_characters=LINE_BREAKS), max_size=40)
# A source or warning may read like an entry's note ("# torch 2.8.0 from the vendor index").
one_line = any_line | st.builds("{} {} from the {} {}".format, any_line, any_line,
                                st.sampled_from(["vendor", "default", "built"]), any_line)
names = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,6}([-_.][A-Za-z0-9]{1,4}){0,2}", fullmatch=True)
versions = st.builds(lambda parts, local: ".".join(map(str, parts)) + local,
                     st.lists(st.integers(0, 30), min_size=1, max_size=4),
                     st.sampled_from(["", "+cu126", "+nv24.8", "a0"]))
hashes = st.text("0123456789abcdef", min_size=64, max_size=64)
bases = st.sampled_from(["https://mirror.example/jp6/cu126/+f/abc", "file:///srv/wheelhouse/files",
                         "http://127.0.0.1:8000/files", "https://mirror.example/a b/simple"])


@st.composite
def entries(draw: st.DrawFn) -> Locked:
    name, version, sdist = draw(names), draw(versions), draw(st.booleans())
    filename = (f"{name}-{version}.tar.gz" if sdist else
                f"{name.replace('-', '_')}-{version}-{draw(st.sampled_from(['py3-none-any', 'cp310-cp310-linux_aarch64']))}.whl")
    url = f"{quote(draw(bases), safe=':/')}/{quote(filename)}"
    return Locked(name, version, url, draw(hashes), draw(st.sampled_from(["vendor", "default", "built"])), sdist)


locks = st.builds(
    Lock,
    channel=one_line, python=one_line, arch=one_line, platform=one_line, source=one_line,
    source_commit=st.none() | st.text("0123456789abcdef", min_size=7, max_size=40),
    tool=one_line,
    entries=st.lists(entries(), max_size=5, unique_by=lambda entry: entry.name).map(lambda found: tuple(sorted(found, key=lambda entry: entry.name))),
    # A warning is written on one line with its spaces collapsed: a lock holds it so.
    warnings=st.lists(one_line.map(lambda text: " ".join(text.split())), max_size=3).map(tuple),
    target=st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
)


def entry_lines(text: str) -> List[int]:
    """The 0-based indexes of the requirement lines (`NAME @ URL --hash=...`) of a rendered lock."""
    return [number for number, line in enumerate(text.splitlines()) if " --hash=sha256:" in line and not line.startswith("#")]


def refusal(text: str) -> Optional[str]:
    """The one line parse_lock refuses `text` with, or None when it reads it."""
    try:
        parse_lock(text, WHERE)
    except BadInput as refused:
        reached("refused")
        return str(refused)
    return None


@PROPERTY
@given(locks)
def test_every_lock_reads_back_as_the_lock_that_was_written(lock: Lock) -> None:
    event(f"entries: {min(len(lock.entries), 3)}+")
    assert parse_lock(render_lock(lock), WHERE) == lock


@PROPERTY
@given(locks)
def test_a_lock_reads_back_the_same_whatever_order_its_entries_were_made_in(lock: Lock) -> None:
    event(f"entries: {min(len(lock.entries), 3)}+")
    shuffled = dataclasses.replace(lock, entries=tuple(reversed(lock.entries)))
    assert render_lock(shuffled) == render_lock(lock)


@PROPERTY
@given(locks.filter(lambda lock: bool(lock.entries)), st.data())
def test_a_requirement_line_cut_short_is_refused_naming_its_line(lock: Lock, data: st.DataObject) -> None:
    lines = render_lock(lock).splitlines()
    at = data.draw(st.sampled_from(entry_lines(render_lock(lock))))
    lines[at] = lines[at][:data.draw(st.integers(1, len(lines[at]) - 1))]
    with pytest.raises(BadInput, match=rf"^{re.escape(WHERE)}:{at + 1}: "):
        parse_lock("\n".join(lines) + "\n", WHERE)


@PROPERTY
@given(locks.filter(lambda lock: bool(lock.entries)), st.data())
def test_a_hash_that_is_not_hex_is_refused_naming_its_line(lock: Lock, data: st.DataObject) -> None:
    lines = render_lock(lock).splitlines()
    at = data.draw(st.sampled_from(entry_lines(render_lock(lock))))
    digits = data.draw(st.text(min_size=1, max_size=64).filter(lambda text: not re.fullmatch(r"[0-9a-f]{64}", text)))
    lines[at] = lines[at].rsplit("sha256:", 1)[0] + "sha256:" + digits
    with pytest.raises(BadInput, match=rf"^{re.escape(WHERE)}:{at + 1}: "):
        parse_lock("\n".join(lines) + "\n", WHERE)


@PROPERTY
@given(locks.filter(lambda lock: bool(lock.entries)), st.data())
def test_a_lock_cut_off_between_a_note_and_the_end_of_its_line_is_refused(lock: Lock, data: st.DataObject) -> None:
    # A download that stopped part way. A lock that ends after a whole entry is a lock of fewer
    # files, and one cut inside a note leaves a comment; from a note's end to its line's, the
    # lock shows its damage.
    text = render_lock(lock)
    lines = text.splitlines()
    at = data.draw(st.sampled_from(entry_lines(text)))
    line_start = sum(len(line) + 1 for line in lines[:at])
    cut = data.draw(st.integers(line_start - 1, line_start + len(lines[at]) - 1))
    with pytest.raises(BadInput, match=rf"^{re.escape(WHERE)}:({at}|{at + 1}): "):
        parse_lock(text[:cut], WHERE)


@PROPERTY
@given(locks.filter(lambda lock: bool(lock.entries)), st.sampled_from(["https://", "http://[", "file:///", ""]),
       st.text(st.characters(exclude_categories=("Cs", "Zs", "Cc")), max_size=40), st.data())
def test_a_url_of_any_text_is_read_or_refused_naming_its_line(lock: Lock, scheme: str, rest: str,
                                                                 data: st.DataObject) -> None:
    lines = render_lock(lock).splitlines()
    at = data.draw(st.sampled_from(entry_lines(render_lock(lock))))
    name, _, hashed = lines[at].partition(" @ ")
    lines[at] = f"{name} @ {scheme}{rest} --hash={hashed.rpartition(' --hash=')[2]}"
    shown = refusal("\n".join(lines))
    assert shown is None or shown.startswith(f"{WHERE}:{at + 1}: ")


lock_texts = st.builds(lambda lock, lines: render_lock(lock).splitlines() + lines, locks, st.lists(st.text(max_size=80), max_size=4))


@settings(max_examples=100, deadline=None)
@given(lock_texts, st.data())
def test_any_damage_to_a_lock_is_refused_as_bad_input_or_read_never_a_traceback(lines: List[str], data: st.DataObject) -> None:
    # Damage: a line replaced, dropped or doubled, or text put in.
    kind: Tuple[str, int] = data.draw(st.tuples(st.sampled_from(["replace", "drop", "double"]), st.integers(0, len(lines) - 1)))
    what, at = kind
    if what == "replace":
        lines[at] = data.draw(st.text(max_size=120))
    elif what == "drop":
        del lines[at]
    else:
        lines.insert(at, lines[at])
    shown = refusal("\n".join(lines))
    assert shown is None or (shown.startswith(WHERE) and "\n" not in shown)
