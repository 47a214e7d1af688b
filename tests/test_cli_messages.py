"""What the command line says in the corners a new user meets first: the tool with no command,
Ctrl-C, a sample root, a board-built bitsandbytes, an L4T release it does not know."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

from support.cli import run_cli

from jetson_install.base.upgrade import running_upgrade_command
from jetson_install.catalog.lock_file import Lock, Locked, render_lock


def test_the_tool_alone_prints_its_help_not_an_error() -> None:
    for args in ((), ("plan",), ("evidence",)):
        result = run_cli(*args)
        assert result.returncode == 2, args  # a script whose command word came out empty does not pass
        assert result.stdout.startswith(f"Usage: jetson-install {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
        assert "error:" not in result.stdout + result.stderr


def test_ctrl_c_in_a_wheelhouse_says_how_to_resume_and_leaves_no_partial_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = tmp_path / "upstream"
    wheels.mkdir()
    done, cut = wheels / "a-1.0-py3-none-any.whl", wheels / "b-1.0-py3-none-any.whl"
    done.write_bytes(b"a" * 100)
    cut.write_bytes(b"b" * 100)
    entries = tuple(Locked(path.name[0], "1.0", path.as_uri(), hashlib.sha256(path.read_bytes()).hexdigest(), "default")
                    for path in (done, cut))
    lock = tmp_path / "obliteratus.lock"
    lock.write_text(render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "obliteratus", None,
                                     "jetson-install 0.1.0", entries)))
    from jetson_install.tools import index

    real = index.fetch_file

    def fetch(url: str, destination: Path) -> None:
        if url.endswith(cut.name):
            destination.write_bytes(b"half")
            raise KeyboardInterrupt
        real(url, destination)

    monkeypatch.setattr("jetson_install.fleet.wheelhouse.fetch_file", fetch)  # where the wheelhouse looks it up
    house = tmp_path / "house"
    result = run_cli("wheelhouse", str(house), "--lock", str(lock))
    assert result.returncode == 130
    # (click ends the line a terminal's ^C was echoed on first)
    assert [line for line in result.stderr.splitlines() if line] == ["error: interrupted (Ctrl-C)",
                                          f"  fix: run it again: jetson-install wheelhouse {house} --lock {lock}"]
    assert sorted(path.name for path in (house / "files").iterdir()) == [done.name]  # no .part left


def test_a_sample_root_is_named_as_the_user_gave_it() -> None:
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2")
    assert result.returncode == 0, result.stderr
    # On stderr, as every command's warnings: `plan ... > plan.txt` keeps the plan alone.
    assert "warning: --root sample:agx-orin-64gb-jp6.2 is an aarch64 machine" in result.stderr
    assert "warning:" not in result.stdout
    assert "site-packages" not in result.stdout and "jetson_install/board/samples" not in result.stdout


def test_bitsandbytes_build_says_it_replaces_the_channels_jetson_build() -> None:
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--bitsandbytes", "build")
    assert result.returncode == 0, result.stderr
    assert ("warning: --bitsandbytes build: builds bitsandbytes on this board instead of the vendor's Jetson build "
            "(bitsandbytes>=0.46.1,<0.51 in set ") in result.stderr
    assert "to use that one, drop --bitsandbytes" in result.stderr
    plain = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2")
    assert "--bitsandbytes build:" not in plain.stdout


def test_a_board_built_bitsandbytes_is_not_also_said_to_be_left_out() -> None:
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-jp7.2.1", "--bitsandbytes", "build")
    assert result.returncode == 0, result.stderr
    assert "build bitsandbytes from release" in result.stdout
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning:")]
    assert not any("is installed without its quantization extra;" in line or "installing without" in line
                   for line in warnings), warnings


def test_an_unknown_l4t_fix_is_the_upgrade_for_the_way_the_tool_was_installed() -> None:
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--l4t", "40.1.0")
    assert result.returncode == 3
    assert f"upgrade jetson-install ({running_upgrade_command()})" in result.stdout


@pytest.mark.parametrize(("typed", "said"), [
    ("obliterats", "Did you mean 'obliteratus'?"),  # a target: made from the catalog when asked for
    ("tourch", "Did you mean 'torch'?"),
    ("rolback", "Did you mean 'rollback'?"),
    ("wheelhose", "Did you mean 'wheelhouse'?"),
])
def test_a_mistyped_command_gets_the_command_it_was_meant_to_be(typed: str, said: str) -> None:
    result = run_cli(typed, "--venv", "x")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: No such command {typed!r}. {said}",
                                          "  fix: see its options: jetson-install --help"]


def test_the_install_docs_say_a_local_bitsandbytes_checkout_builds_with_the_callers_privileges() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "install.md").read_text()
    section = docs.split("## bitsandbytes where no Jetson build exists", 1)[1].split("\n## ", 1)[0]
    assert ("`--bitsandbytes build=PATH` runs that checkout's own CMake files and build backend (its\n"
            "`pyproject.toml`) as you, with your privileges") in section



def test_ctrl_c_under_json_says_the_exit_code_the_run_ends_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """--json's one error object names the exit status, which a script reads there rather than
    from the shell: 130 for an interrupted run, as the process ends (it said 1)."""
    from jetson_install.cli import main

    def interrupted(value: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(main, "print_json", interrupted)
    result = run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2", "--json")
    assert result.returncode == 130, result.stderr
    assert result.stderr.splitlines()[-2] == "error: interrupted (Ctrl-C)"
    assert json.loads(result.stdout)["error"] == {"message": "interrupted (Ctrl-C)", "exit_code": 130, "fix": (
        "run it again: jetson-install detect --root sample:agx-orin-64gb-jp6.2 --json")}


def _one_file_lock(tmp_path: Path) -> Path:
    wheel = tmp_path / "upstream" / "a-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"a" * 100)
    lock = tmp_path / "one.lock"
    lock.write_text(render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "obliteratus", None,
                                     "jetson-install 0.1.0", (Locked("a", "1.0", wheel.as_uri(), hashlib.sha256(
                                         wheel.read_bytes()).hexdigest(), "default"),))))
    return lock


def _run_as_printed(fix: str, env: Dict[str, str]) -> None:
    """The fix's own command, as the fix line prints it inside its parentheses."""
    command = re.search(r"\(((?:sudo )?(?:mv|chattr|rmdir) [^)]*)\)", fix.splitlines()[-1])
    assert command is not None, fix
    subprocess.run(command.group(1), shell=True, check=True, env=env)  # (sudo: the shim where the tests are root)


def test_a_wheelhouse_where_a_file_stands_says_what_it_could_not_make_and_why(tmp_path: Path) -> None:
    lock = _one_file_lock(tmp_path)
    house = tmp_path / "afile"
    house.write_text("mine\n")
    argv = ("wheelhouse", str(house), "--lock", str(lock))
    result = run_cli(*argv)
    assert result.returncode == 2  # an output folder it cannot use: README's exit codes
    assert result.stderr.splitlines() == [
        f"error: cannot create {house}/files: {house} is a file, not a folder",
        f"  fix: move the file {house} out of the way (mv {house} {house}.old), or choose another location, then "
        f"run: jetson-install {' '.join(argv)}"]
    _run_as_printed(result.stderr, dict(os.environ))
    assert run_cli(*argv).returncode == 0 and (house / "files" / "a-1.0-py3-none-any.whl").is_file()
    assert (tmp_path / "afile.old").read_text() == "mine\n"


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Path]:
    """A folder the kernel keeps from change (chattr +i), made changeable again after the test."""
    folder = tmp_path / "kept"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i needs root and a filesystem with the flag")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


def _with_sudo(tmp_path: Path) -> Dict[str, str]:
    """This environment, where `sudo` runs its command as the root these tests run as (no sudo here)."""
    shim = tmp_path / "bin" / "sudo"
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nexec "$@"\n')
    shim.chmod(0o755)
    return dict(os.environ, PATH=f"{shim.parent}:{os.environ['PATH']}")


def test_an_immutable_folder_is_named_as_such_with_the_fix_that_clears_it(immutable: Path, tmp_path: Path) -> None:
    lock = _one_file_lock(tmp_path)
    argv = ("wheelhouse", str(immutable / "house"), "--lock", str(lock))
    result = run_cli(*argv)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: cannot create {immutable}/house: {immutable} is immutable (chattr +i)",
        f"  fix: clear {immutable}'s immutable flag (sudo chattr -i {immutable}), or choose another location, then "
        f"run: jetson-install {' '.join(argv)}"]
    _run_as_printed(result.stderr, _with_sudo(tmp_path))
    assert run_cli(*argv).returncode == 0


def test_an_immutable_empty_venv_is_refused_with_a_fix_that_removes_it(immutable: Path, tmp_path: Path) -> None:
    argv = ("torch", "--root", "sample:agx-orin-64gb-jp6.2", "--python", sys.executable, "--venv", str(immutable),
            "--yes", "--dry-run")
    result = run_cli(*argv)
    assert result.returncode == 2 and result.stderr.splitlines()[1] == (
        f"  fix: remove it (sudo chattr -ia {immutable} && rmdir {immutable}), then run: jetson-install {' '.join(argv)}")
    fix = re.search(r"\((.*)\)", result.stderr.splitlines()[1])
    assert fix is not None
    subprocess.run(fix.group(1), shell=True, check=True, env=_with_sudo(tmp_path))
    assert run_cli(*argv).returncode == 0


def test_a_channel_named_without_check_gets_the_command_with_check_added() -> None:
    """The fix was `jetson-install channels --check [CHANNEL]`, a placeholder, not a command."""
    result = run_cli("channels", "jp6-cu126")
    assert (result.returncode, result.stderr.splitlines()) == (2, [
        "error: CHANNEL, --vendor-index, --mirror and --default-index go with --check",
        "  fix: run it with --check: jetson-install channels jp6-cu126 --check"])
