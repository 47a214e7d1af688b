"""Detection over mini roots built from real captured files, one folder per capture.

Each folder under tests/resources/boards holds the files a board carries and an
expected.json: the fields `detect --json` must report, or the error it must give.
"""

from __future__ import annotations

from typing import Any, Dict
import json
import re
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from jetson_install.base import errors
from jetson_install.base.sourced import Sourced
from jetson_install.board.platform import detect
from jetson_install.board.release_files import L4T, parse_nv_tegra_release
from jetson_install.board.samples import SAMPLES_DIR, sample_names

BOARDS = Path(__file__).parent / "resources" / "boards"
BOARD_NAMES = sorted(path.name for path in BOARDS.iterdir() if path.is_dir())


def expected_for(name: str) -> Dict[str, Any]:
    expected: Dict[str, Any] = json.loads((BOARDS / name / "expected.json").read_text())
    return expected


@pytest.mark.parametrize("board", BOARD_NAMES)
def test_board(board: str) -> None:
    expected = expected_for(board)
    if "error" in expected:
        with pytest.raises(getattr(errors, expected["error"])) as caught:
            detect(BOARDS / board)
        assert caught.value.exit_code == expected["exit_code"]
        shown = f"{caught.value.message} {caught.value.fix or ''}"
        for fragment in expected["message_contains"]:
            assert fragment in shown
        return
    report = detect(BOARDS / board).to_json()
    for key, value in expected.items():
        if key == "warnings_contain":
            for fragment in value:
                assert any(fragment in warning for warning in report["warnings"]), report["warnings"]
        elif key == "sources":
            for field, source in value.items():
                assert report["sources"].get(field) == source, (field, report["sources"])
        else:
            assert report[key] == value, (key, report[key])


def test_every_board_folder_has_expectations() -> None:
    """Each folder pins what detection must make of it (a release, or an error and its words),
    holds captured files to make it from, says in its name the release it reports, and is
    described in PROVENANCE.md."""
    provenance = (BOARDS / "PROVENANCE.md").read_text()
    for name in BOARD_NAMES:
        expected = expected_for(name)
        if "error" in expected:
            assert {"exit_code", "message_contains"} <= set(expected) and expected["message_contains"], name
        else:
            assert {"l4t", "jetpack"} <= set(expected), name
            named = re.findall(r"r(\d+)\.(\d+)(?:\.(\d+))?", name)
            if named:  # the last release in the name, as an upgrade's folder names from-to
                assert expected["l4t"] == "{}.{}.{}".format(named[-1][0], named[-1][1], named[-1][2] or 0), name
        assert [path for path in (BOARDS / name).rglob("*") if path.is_file() and path.name != "expected.json"], name
        assert re.search(r"(^|[\s,|])" + re.escape(name) + r"([\s,|]|$)", provenance, re.M), name


# Each shipped sample root and the board folder whose expectations pin it (PROVENANCE.md).
SAMPLE_BOARDS = {
    "agx-orin-64gb-jp6.2": "agx-orin-64gb-r36.4.3",
    "agx-orin-jp7.2.1": "agx-orin-r39.2.1",
    "agx-thor-jp7.0": "agx-thor-r38.2.0",
    "agx-thor-jp7.2.1": "agx-thor-r39.2.1",
    "orin-nano-jp6.1": "orin-nano-r36.4.0",
    "xavier-nx-jp5.1.2": "xavier-nx-r35.4.1",
}


def _files(root: Path) -> Dict[str, Any]:
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for path in root.rglob("*") if path.is_file() and path.name != "expected.json"}


def test_each_sample_root_is_its_board_folder_file_for_file() -> None:
    assert sorted(SAMPLE_BOARDS) == sample_names()
    for sample, board in SAMPLE_BOARDS.items():
        assert _files(SAMPLES_DIR / sample) == _files(BOARDS / board), (sample, board)


def test_override_wins_for_an_empty_container_release_file() -> None:
    platform = detect(BOARDS / "empty-release-no-fallback", Sourced("36.4.3", "JETSON_L4T_VERSION"))
    assert str(platform.l4t) == "36.4.3"
    assert platform.jetpack == "6.2"
    assert platform.sources["l4t"] == "JETSON_L4T_VERSION"


def test_jetpack_7_2_2_is_named_for_its_l4t_release() -> None:
    # Before it was recorded, detect said "7.x" for L4T 39.2.2.
    platform = detect(BOARDS / "agx-thor-r39.2.1", Sourced("39.2.2", "--l4t"))
    assert (str(platform.l4t), platform.jetpack) == ("39.2.2", "7.2.2")


def test_override_that_is_not_a_version_is_bad_input() -> None:
    with pytest.raises(errors.BadInput, match="--l4t 'six': not an L4T release"):
        detect(BOARDS / "agx-orin-64gb-r36.4.3", Sourced("six", "--l4t"))


@pytest.mark.parametrize(
    ("line", "l4t"),
    [
        ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025", L4T(36, 4, 3)),
        ("# R39 (release), REVISION: 2.1, GCID: 46758480, BOARD: generic, EABI: aarch64, DATE: Fri Aug  7 05:54:22 PM UTC 2026", L4T(39, 2, 1)),
        ("R35 (release), REVISION: 3.1, GCID: 32827747", L4T(35, 3, 1)),
        ("# R32 (release), REVISION: 5", L4T(32, 5, 0)),
        ("  # R32 (release), REVISION: 7.4\r\n", L4T(32, 7, 4)),
        ("# R36 (release), REVISION: 4.3, EABI: aarch64", L4T(36, 4, 3)),
        ("\ufeff# R36 (release), REVISION: 4.3, GCID: 38968081\r\n", L4T(36, 4, 3)),
        ("\ufeff# R39 (release), REVISION: 2.1, EABI: aarch64\x00\x00\x00", L4T(39, 2, 1)),
    ],
)
def test_release_line_variants(line: str, l4t: L4T) -> None:
    assert parse_nv_tegra_release(line.encode())[0] == l4t


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_release_parser_parses_or_raises_its_own_error(data: bytes) -> None:
    try:
        l4t, _ = parse_nv_tegra_release(data)
    except errors.InvalidReleaseFile:
        event("refused")
        return
    assert isinstance(l4t, L4T)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 999), st.integers(0, 999), st.integers(0, 999),
    st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x00\x1c\x1d\x1e\x85\u2028\u2029\x0b\x0c"), max_size=120),
)
def test_any_banner_gives_its_release_whatever_follows(major: int, minor: int, patch: int, tail: str) -> None:
    event(f"text after the revision: {bool(tail.strip())}")
    line = f"# R{major} (release), REVISION: {minor}.{patch}, {tail}"
    assert parse_nv_tegra_release(line.encode())[0] == L4T(major, minor, patch)


def test_absolute_links_resolve_inside_the_root_never_on_the_host(tmp_path: Path) -> None:
    import os

    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_text("# R36 (release), REVISION: 4.3\n")
    cuda = tmp_path / "usr" / "local" / "cuda-12.6"
    cuda.mkdir(parents=True)
    (cuda / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.6.20241114"}}')
    os.symlink("/usr/local/cuda-12.6", tmp_path / "usr" / "local" / "cuda")  # as on every Jetson
    device_tree = tmp_path / "proc" / "device-tree"
    device_tree.mkdir(parents=True)
    os.symlink("/etc/hostname", device_tree / "model")  # the host has one; the root does not
    os.mkfifo(device_tree / "compatible")  # a FIFO would block a plain read
    platform = detect(tmp_path)
    assert platform.cuda == "12.6" and platform.sources["cuda"] == "usr/local/cuda/version.json"
    assert platform.model is None
