"""Shell completion as a user gets it: click's own mechanism (`_JETSON_INSTALL_COMPLETE=bash_source
jetson-install` and its zsh and fish kin), completing a command, an option and a sample root
(`--root sample:<TAB>`); and in a real interactive bash, whose word splitting at a colon is the
hard part, the line completed as typed.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
from support.cli import run_cli

from jetson_install.board.samples import sample_names

SAMPLES = [f"sample:{name}" for name in sample_names()]
BIN = Path(sys.executable).parent  # the console script beside the interpreter running the tests


def _complete(shell: str, words: str, cword: str) -> List[str]:
    """What the tool answers a shell's completion request (as its sourced script asks it)."""
    env = {**os.environ, "_JETSON_INSTALL_COMPLETE": f"{shell}_complete", "COMP_WORDS": words, "COMP_CWORD": cword}
    result = run_cli(env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _bash(words: str, cword: int) -> List[str]:
    """bash's answers: `type,value` lines; the values of the plain ones."""
    return [line.split(",", 1)[1] for line in _complete("bash", words, str(cword)) if line.startswith("plain,")]


def test_bash_completes_a_command_an_option_and_a_sample_root() -> None:
    assert _bash("jetson-install pl", 1) == ["plan"]
    assert "obliteratus" in _bash("jetson-install plan ob", 2)  # a catalog target, made on demand
    assert _bash("jetson-install plan obliteratus --ro", 3) == ["--root"]
    # bash splits `--root sample:` at the colon (`:` is in COMP_WORDBREAKS), and replaces only what
    # follows it: the answers are the names.
    assert _bash("jetson-install plan obliteratus --root sample :", 5) == [s[len("sample:"):] for s in SAMPLES]
    assert _bash("jetson-install plan obliteratus --root sample : agx-t", 6) == ["agx-thor-jp7.0", "agx-thor-jp7.2.1"]
    # Unsplit (a COMP_WORDBREAKS without the colon), the whole word is the answer.
    assert _bash("jetson-install detect --root sample:agx-t", 3) == ["sample:agx-thor-jp7.0", "sample:agx-thor-jp7.2.1"]
    # Anything else after --root is a folder: bash's own directory completion (`dir`).
    assert _complete("bash", "jetson-install detect --root /us", "3") == ["dir,/us"]


def test_zsh_and_fish_complete_the_same() -> None:
    zsh = _complete("zsh", "jetson-install plan obliteratus --root sample:agx-o", "4")
    assert zsh == ["plain", "sample:agx-orin-64gb-jp6.2", "_", "plain", "sample:agx-orin-jp7.2.1", "_"]
    assert "plan" in _complete("zsh", "jetson-install pl", "1")
    fish = _complete("fish", "jetson-install plan obliteratus --root sample:", "sample:")
    assert fish == [f"plain,{sample}" for sample in SAMPLES]
    assert _complete("fish", "jetson-install doctor --str", "--str") == ["plain,--strict\tThe gate: every check that "
                                                                         "applies must run and pass; a skip fails."]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_its_script(shell: str) -> None:
    result = run_cli(env={**os.environ, "_JETSON_INSTALL_COMPLETE": f"{shell}_source"})
    assert result.returncode == 0, result.stderr
    assert "_JETSON_INSTALL_COMPLETE=" in result.stdout and "jetson-install" in result.stdout
    assert "\\x1b" not in result.stdout and "\\t" not in result.stdout  # nothing escaped by the redacting stream


def test_without_the_variable_no_arguments_is_still_the_help() -> None:
    result = run_cli(env={key: value for key, value in os.environ.items() if key != "_JETSON_INSTALL_COMPLETE"})
    assert result.returncode == 2 and result.stdout.startswith("Usage: jetson-install")


def _type_and_read(fd: int, keys: bytes, expected: bytes, seconds: float = 60.0) -> bytes:
    """Type `keys` into the terminal, then read what it shows until `expected` appears."""
    os.write(fd, keys)
    shown, deadline = b"", time.monotonic() + seconds
    while expected not in shown and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                shown += os.read(fd, 65536)
            except OSError:
                break
    return shown


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_interactive_bash_completes_a_sample_root_after_the_colon(tmp_path: Path) -> None:
    """As the README's line sets it up, in bash as a terminal runs it: `--root sample:agx-thor-jp7.2<TAB>`
    becomes `--root sample:agx-thor-jp7.2.1 ` (what bash replaces is the word after the colon)."""
    rc = tmp_path / "bashrc"
    rc.write_text('eval "$(_JETSON_INSTALL_COMPLETE=bash_source jetson-install)"\n'
                  "PS1='ready> '\n")
    env: Dict[str, str] = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TERM": "dumb",
                           "INPUTRC": "/dev/null"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive bash with the completion loaded
        os.execve(shutil.which("bash") or "bash", ["bash", "--rcfile", str(rc), "--noprofile", "-i"], env)
    try:
        assert b"ready> " in _type_and_read(fd, b"", b"ready> ")
        # `jp7.2` matches one sample: TAB puts the rest of its name, and a space, after it.
        shown = _type_and_read(fd, b"jetson-install detect --root sample:agx-thor-jp7.2\t", b"jp7.2.1 ")
        assert b"sample:agx-thor-jp7.2.1 " in shown, shown
        shown = _type_and_read(fd, b"--json; echo done-$?\n", b"done-0")
        assert b'"soc": "tegra264"' in shown and b"done-0" in shown, shown
    finally:
        os.write(fd, b"\x15exit\n")  # Ctrl-U first: whatever is left on the line goes
        _type_and_read(fd, b"", b"exit", seconds=10)
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)  # a bash that did not take the exit (this test's own child)
            os.waitpid(pid, 0)
        os.close(fd)


def test_the_completion_module_loads_only_when_completing() -> None:
    code = ("import sys; from jetson_install.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print([name in sys.modules for name in ('click.shell_completion', 'jetson_install.cli.completion', "
            "'jetson_install.board.samples')])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={key: value for key, value in os.environ.items() if key != "_JETSON_INSTALL_COMPLETE"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[False, False, False]"
