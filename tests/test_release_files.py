"""Round trips of the parsers in release_files: a value written as the board writes it (a dpkg
stanza, an apt line, the device tree's NUL-separated list, CUDA's version files, the L4T
release as typed to --l4t) is parsed back to that value, and no text makes a parser raise
anything but the project's errors."""

from __future__ import annotations

import contextlib
import json
from typing import List

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from jetson_install.base.errors import BadInput
from jetson_install.board.release_files import (
    L4T,
    OLDEST_JETSON_MAJOR,
    parse_apt_source,
    parse_compatible,
    parse_cuda_version_json,
    parse_cuda_version_txt,
    parse_dpkg_status,
    parse_l4t,
)

PROPERTY = settings(max_examples=100, deadline=None)
numbers = st.integers(0, 999)
jetson_l4ts = st.builds(L4T, st.integers(OLDEST_JETSON_MAJOR, 999), numbers, numbers)


@PROPERTY
@given(jetson_l4ts, st.sampled_from(["{}", "R{}", "r{}", " {}\n"]))
def test_an_l4t_release_as_typed_parses_back(l4t: L4T, form: str) -> None:
    event(f"typed as {form.strip()!r}")
    assert parse_l4t(form.format(l4t)) == l4t
    assert parse_l4t(f"{l4t.major}.{l4t.minor}") == L4T(l4t.major, l4t.minor, 0)


@PROPERTY
@given(st.integers(0, OLDEST_JETSON_MAJOR - 1), numbers, numbers)
def test_a_release_older_than_any_jetson_is_refused(major: int, minor: int, patch: int) -> None:
    event(f"major {major}")
    with pytest.raises(BadInput, match=f"no Jetson ever ran L4T R{major} "):
        parse_l4t(f"{major}.{minor}.{patch}")


def stanza(package: str, version: str, status: str = "install ok installed") -> str:
    return f"Package: {package}\nStatus: {status}\nArchitecture: arm64\nVersion: {version}\nDescription: x\n multi-line\n"


@PROPERTY
@given(jetson_l4ts, st.text("0123456789", min_size=0, max_size=14),
       st.lists(st.sampled_from(["nvidia-l4t-kernel", "nvidia-l4t-core-dev", "libc6", "nvidia-l4t-cuda"]), max_size=4),
       st.integers(0, 4))
def test_the_installed_l4t_core_parses_back_among_any_packages(
        l4t: L4T, build: str, others: List[str], position: int) -> None:
    """36.4.3-20250107174145: the build stamp after the dash is not the release."""
    event(f"build stamp: {bool(build)}, other packages: {len(others)}")
    stanzas = [stanza(name, "1.0") for name in others]
    stanzas.insert(min(position, len(stanzas)), stanza("nvidia-l4t-core", f"{l4t}-{build}" if build else str(l4t)))
    assert parse_dpkg_status("\n".join(stanzas)) == l4t


@PROPERTY
@given(jetson_l4ts, st.sampled_from(["deinstall ok config-files", "purge ok not-installed", "install ok unpacked"]))
def test_an_l4t_core_that_is_not_installed_gives_nothing(l4t: L4T, status: str) -> None:
    event(f"status {status}")
    assert parse_dpkg_status(stanza("nvidia-l4t-core", str(l4t), status)) is None


@PROPERTY
@given(numbers, numbers, st.sampled_from(["common", "t234", "t194"]), st.sampled_from(["", "#", "  # ", "\t#"]))
def test_the_apt_sources_release_parses_back_and_a_comment_is_skipped(
        major: int, minor: int, channel: str, comment: str) -> None:
    event(f"an older commented line: {bool(comment)}")
    line = f"deb https://mirror.example/jetson/{channel} r{major}.{minor} main"
    old_line = f"{comment}deb https://mirror.example/jetson/{channel} r1.2 main\n" if comment else ""
    assert parse_apt_source(old_line + line + "\n") == (major, minor)
    assert parse_apt_source(old_line) is None


@PROPERTY
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=24)
                .map(str.strip).filter(bool), max_size=5), st.sampled_from(["", " ", "\n"]))
def test_device_tree_entries_parse_back(entries: List[str], padding: str) -> None:
    """The kernel writes each entry NUL-terminated; a copy made as text may pad them."""
    event(f"entries: {len(entries)}, padding {padding!r}")
    data = b"".join(f"{padding}{entry}{padding}".encode() + b"\x00" for entry in entries)
    assert parse_compatible(data) == tuple(entries)


@PROPERTY
@given(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99_999_999),
       st.sampled_from(["cuda", "cuda_cudart", "cuda_nvcc"]))
def test_cuda_version_files_parse_back_to_major_minor(major: int, minor: int, build: int, key: str) -> None:
    event(f"key {key}")
    version = f"{major}.{minor}.{build}"
    assert parse_cuda_version_json(json.dumps({key: {"name": "CUDA", "version": version}})) == f"{major}.{minor}"
    assert parse_cuda_version_txt(f"CUDA Version {version}\n") == f"{major}.{minor}"


@PROPERTY
@given(st.text(max_size=200))
def test_the_text_parsers_answer_any_text(text: str) -> None:
    """A file holds whatever the board (or a broken copy) left: each parser gives a value or
    None, never an exception."""
    event(f"an L4T release read: {parse_dpkg_status(text) is not None or parse_apt_source(text) is not None}")
    for parser in (parse_dpkg_status, parse_apt_source, parse_cuda_version_json, parse_cuda_version_txt):
        parser(text)
    parse_compatible(text.encode("utf-8", "surrogatepass"))
    with contextlib.suppress(BadInput):
        parse_l4t(text)
