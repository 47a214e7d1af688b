"""Untrusted text is inert: a value the user types holds no control character (a newline in a
requirement became a uv directive), what a root, evidence or an index says reaches the terminal
with its control characters shown as escapes, and a printed shell command runs as one command."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from support.cli import run_cli

from jetson_install.base.redact import RedactingStream
from jetson_install.base.text import control_character, printable
from jetson_install.fleet.wheelhouse import tool_install_command
from jetson_install.tools.progress import TerminalDisplay

BOARDS = Path(__file__).parent / "resources" / "boards"
SAMPLE = "sample:agx-orin-64gb-jp6.2"
# What an attacker's model or evidence field says: erase the line, go back to its start, and
# draw a green verdict over the real one.
REDRAW = "\x1b[2K\r\x1b[32mok: passed strict\x1b[0m"


@pytest.mark.parametrize(("args", "where", "value", "character"), [
    (["plan", "obliteratus", "--root", SAMPLE, "--with", "numpy\n-e /tmp/x"], "--with", "numpy\\n-e /tmp/x", "\\n"),
    (["plan", "obliteratus", "--root", SAMPLE, "--with=numpy\r"], "--with", "numpy\\r", "\\r"),
    (["add", "--venv", "/tmp/v", "numpy\x00"], "argument 4", "numpy\\x00", "\\x00"),
    (["plan", "obliteratus", "--root", SAMPLE, "--venv", "/tmp/a\x1b[2Kb"], "--venv", "/tmp/a\\x1b[2Kb", "\\x1b"),
    (["detect", "--root", "/tmp\x07"], "--root", "/tmp\\x07", "\\x07"),
])
def test_a_control_character_in_a_value_is_refused_naming_the_option(args: List[str], where: str, value: str,
                                                                     character: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {where} '{value}' contains the control character '{character}'",
        f"  fix: give {where} without control characters: one line, one requirement, path or URL (a newline often "
        "comes from a script's variable)"]


def test_a_variable_an_option_reads_is_held_to_the_same_rule() -> None:
    result = run_cli("detect", env={"JETSON_INSTALL_ROOT": "/\n"})
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == "error: $JETSON_INSTALL_ROOT '/\\n' contains the control character '\\n'"


def test_a_tab_is_text_and_escapes_are_shown_not_obeyed() -> None:
    assert control_character("numpy\t>=1") is None
    assert printable(REDRAW) == "\\x1b[2K\\r\\x1b[32mok: passed strict\\x1b[0m"
    assert printable("a\nb\x85", lines=True) == "a\nb\\x85"


def _on_a_terminal(args: List[str], env: Dict[str, str]) -> str:
    """What a terminal shows of `jetson-install ARGS` (click keeps escape sequences for a terminal)."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "jetson_install", *args], stdout=follower, stderr=follower,
                                   env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    finally:
        os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_roots_device_tree_model_cannot_redraw_the_terminal(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(BOARDS / "agx-orin-64gb-r36.4.3", root)
    (root / "proc" / "device-tree" / "model").write_bytes(f"NVIDIA Jetson AGX Orin{REDRAW}\0".encode())
    shown = _on_a_terminal(["detect", "--root", str(root)], dict(os.environ, TERM="xterm"))
    assert "\x1b" not in shown and "\r\n" in shown and "\r" not in shown.replace("\r\n", "")
    assert "  model    NVIDIA Jetson AGX Orin\\x1b[2K\\r\\x1b[32mok: passed strict\\x1b[0m\r\n" in shown


def test_the_live_line_keeps_its_own_controls_and_shows_a_packages_as_escapes() -> None:
    out = io.StringIO()
    display = TerminalDisplay(RedactingStream(out), columns=lambda: 200)  # type: ignore[arg-type]
    display(f"warning: torch{REDRAW}")
    step = display.start("target", "[4/7] target")
    step.tick()
    display.finish(step, "ok")
    text = out.getvalue()
    assert "warning: torch\\x1b[2K\\r\\x1b[32mok: passed strict\\x1b[0m\n" in text
    assert text.count("\x1b") == text.count("\x1b[K") and "\r" in text  # the display's own, and only those


def test_the_printed_tool_install_command_runs_as_one_command_in_a_shell(tmp_path: Path) -> None:
    house = tmp_path / "x;touch PWNED;#"
    command = tool_install_command(house)
    # python3 a stub that fails: the command stops at its first step, and only an injected
    # command (after a `;`) would go on to run.
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "python3").write_text("#!/bin/sh\nexit 1\n")
    (stubs / "python3").chmod(0o755)
    ran = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}", HOME=str(tmp_path)))
    assert ran.returncode == 1
    assert not (tmp_path / "PWNED").exists()
    assert f"--find-links '{house}/files' jetson-install" in command
