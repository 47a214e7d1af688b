"""`jetson-install detect`, `samples`, `--help` and `--version` as a user runs them."""

from __future__ import annotations

from typing import List
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_cli

BOARDS = Path(__file__).parent / "resources" / "boards"


def test_detect_json_on_a_sample_root() -> None:
    result = run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["l4t"] == "36.4.3"
    assert report["jetpack"] == "6.2"
    assert report["compute_capability"] == "8.7"
    assert report["sources"]["l4t"] == "var/lib/dpkg/status"


def test_detect_human_summary_names_board_and_release() -> None:
    result = run_cli("detect", "--root", "sample:agx-thor-jp7.0")
    assert result.returncode == 0
    assert "NVIDIA Jetson AGX Thor (Developer kit)" in result.stdout
    assert "JetPack  7.0" in result.stdout
    assert "kind     sbsa" in result.stdout


@pytest.mark.parametrize(
    ("board", "code", "fragment"),
    [
        ("empty-release-no-fallback", 2, "--l4t 36.4.3"),
        ("binary-garbage-release", 2, "is not text"),
        ("debian-server-no-jetson", 3, "no Jetson found"),
    ],
)
def test_bad_roots_give_one_line_and_exit_code(board: str, code: int, fragment: str) -> None:
    result = run_cli("detect", "--root", str(BOARDS / board))
    assert result.returncode == code
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("as_json", [False, True])
def test_detect_warns_on_stderr_and_stdout_keeps_the_summary(as_json: bool) -> None:
    """`detect --root R 2>/dev/null` shows the platform alone; the warning reaches the terminal."""
    result = run_cli("detect", "--root", str(BOARDS / "release-not-utf8-dpkg-r36.4.3"), *(["--json"] if as_json else []))
    assert result.returncode == 0, result.stderr
    warning = "etc/nv_tegra_release is not text; L4T taken from var/lib/dpkg/status"
    assert result.stderr.splitlines() == [f"warning: {warning}"]
    if as_json:
        assert json.loads(result.stdout)["warnings"] == [warning]
    else:
        assert "warning" not in result.stdout
        assert result.stdout.splitlines()[-1].startswith("next: see what an install would do: jetson-install plan")


def test_a_nul_inside_the_release_banner_is_no_banner_even_where_the_release_reads(tmp_path: Path) -> None:
    # The release and revision read as a banner's; the NUL after them says the file is not one (a
    # binary file, or text cut into another): refused, never taken as R36.4.3. Trailing NULs are
    # padding, and accepted (tests/test_platform.py).
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_bytes(b"# R36 (release), REVISION: 4.3, GCID: 3896\x008081, BOARD: generic\n")
    result = run_cli("detect", "--root", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {tmp_path}/etc/nv_tegra_release is not an L4T release banner and no other file gives the L4T release",
        "  fix: give the release explicitly: --l4t 36.4.3 (or JETSON_L4T_VERSION=36.4.3)"]


#: `detect --json` of the AGX Orin sample, byte for byte: the key order, two-space indents, \u
#: escapes and the closing newline are what scripts diff and hash, the same on every Python.
DETECT_JSON = """{
  "schema_version": 1,
  "root": ROOT,
  "jetson": true,
  "l4t": "36.4.3",
  "jetpack": "6.2",
  "cuda": "12.6",
  "soc": "tegra234",
  "family": "Orin",
  "module": "NVIDIA Jetson AGX Orin (64GB ram)",
  "model": "NVIDIA Jetson AGX Orin Developer Kit",
  "compute_capability": "8.7",
  "kind": "tegra",
  "ubuntu": "22.04",
  "python": "3.10",
  "kernel": "5.15.148-tegra",
  "arch": "aarch64",
  "sources": {
    "soc": "proc/device-tree/compatible",
    "l4t": "var/lib/dpkg/status",
    "jetpack": "release table",
    "cuda": "usr/local/cuda/version.json",
    "ubuntu": "etc/os-release",
    "python": "default for L4T R36",
    "kernel": "proc/sys/kernel/osrelease"
  },
  "warnings": []
}
"""


def test_json_output_is_byte_stable() -> None:
    from jetson_install.board.samples import SAMPLES_DIR

    result = run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == DETECT_JSON.replace("ROOT", json.dumps(str(SAMPLES_DIR / "agx-orin-64gb-jp6.2")))
    assert run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2", "--json").stdout == result.stdout


def test_json_text_keeps_the_order_given_and_escapes_what_is_not_ascii() -> None:
    from jetson_install.base.redact import json_text

    assert json_text({"b": [1, {"\u00e9": None}], "a": "\u00fc"}) == (
        '{\n  "b": [\n    1,\n    {\n      "\\u00e9": null\n    }\n  ],\n  "a": "\\u00fc"\n}\n')


def test_l4t_from_environment_is_named_as_source(tmp_path: Path) -> None:
    import os

    env = dict(os.environ, JETSON_L4T_VERSION="36.4.3")
    result = run_cli("detect", "--root", str(BOARDS / "empty-release-no-fallback"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sources"]["l4t"] == "JETSON_L4T_VERSION"


def test_error_in_json_mode_is_an_envelope_on_stdout() -> None:
    result = run_cli("detect", "--root", str(BOARDS / "debian-server-no-jetson"), "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout)["error"]["exit_code"] == 3


def test_samples_lists_the_shipped_roots() -> None:
    result = run_cli("samples")
    assert "sample:agx-orin-64gb-jp6.2" in result.stdout.split()
    assert "sample:xavier-nx-jp5.1.2" in result.stdout.split()


def test_unknown_sample_points_at_the_samples_command() -> None:
    result = run_cli("detect", "--root", "sample:orin-agx")
    assert result.returncode == 2
    assert "jetson-install samples" in result.stderr


# What only an install needs: uv's argument lists and binary, git, HTTP, processes, the doctor.
_INSTALL_ONLY = ("jetson_install.tools.uv", "jetson_install.tools.git", "jetson_install.tools.index", "jetson_install.tools.runner",
                 "jetson_install.envs.source_identity", "jetson_install.doctor", "requests", "urllib3", "uv")


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["detect", "--root", "sample:agx-orin-64gb-jp6.2"],
                                  ["detect", "--json", "--root", "sample:agx-orin-64gb-jp6.2"]])
def test_fast_commands_import_nothing_an_install_needs(args: List[str]) -> None:
    probe = (
        "import sys, runpy; sys.argv = ['jetson-install'] + %r\n"
        "try:\n    runpy.run_module('jetson_install', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in %r))\n"
        "print('HEAVY', heavy)\n" % (args, _INSTALL_ONLY)
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr
