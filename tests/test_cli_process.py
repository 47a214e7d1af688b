"""The command line in a process of its own, for what only a real process shows: the
`python -m jetson_install` entry, exit statuses as a shell sees them, credentials masked on
the real stdout and stderr; and that the in-process runs the other CLI tests use
(support.cli) see exactly what such a process shows.

Elsewhere in a process of their own: Ctrl-C and kill mid-install (test_install_interrupted.py),
progress on a pipe and a terminal (test_install_progress.py), an install's log and output
with credentials (test_secrets.py), the console script of the built wheel (test_package.py).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from support.cli import run_cli

from jetson_install import __version__
from jetson_install.base.upgrade import running_upgrade_command
from jetson_install.catalog.catalog_file import default_catalog_path
from jetson_install.tools.runner import uv_binary
from support.installer import Installer

BOARDS = Path(__file__).parent / "resources" / "boards"
SAMPLE = "sample:agx-orin-64gb-jp6.2"
SECRET = "s3cr3t-pw"


def process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jetson_install", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_the_module_entry_runs_the_command_line(flag: str) -> None:
    result = process(flag)
    assert (result.returncode, result.stdout.splitlines()[0], result.stderr) == (0, f"jetson-install {__version__}", "")
    # The same lines in process, after another flag too (the version option is eager).
    assert run_cli(flag, "-q").stdout == result.stdout


def test_the_version_says_what_a_bug_report_needs() -> None:
    """The tool, the catalog it reads, the uv binary it runs and the Python it runs on."""
    lines = process("--version").stdout.splitlines()
    catalog = default_catalog_path()
    uv_says = subprocess.run([uv_binary(), "--version"], capture_output=True, text=True, timeout=60).stdout.split()
    assert lines == [
        f"jetson-install {__version__}",
        f"catalog: sha256 {hashlib.sha256(catalog.read_bytes()).hexdigest()[:12]} ({catalog})",
        f"uv: {uv_says[1]} ({os.path.normpath(uv_binary())})",
        f"python: {sys.version.split()[0]} ({sys.executable})",
        f"upgrade: {running_upgrade_command()}",
    ]


def test_the_version_names_a_catalog_it_cannot_read_and_still_answers(tmp_path: Path) -> None:
    missing = tmp_path / "wheels-index.toml"
    result = run_cli("--version", env={**os.environ, "JETSON_INSTALL_WHEELS_INDEX": str(missing)})
    assert result.returncode == 0
    assert f"catalog: unreadable ([Errno 2] No such file or directory: '{missing}')" in result.stdout.splitlines()


@pytest.mark.parametrize(("args", "code"), [
    (["detect", "--root", SAMPLE], 0),
    (["plan", "obliteratus", "--bogus"], 2),
    (["detect", "--root", str(BOARDS / "empty-release-no-fallback")], 2),
    (["detect", "--root", str(BOARDS / "debian-server-no-jetson")], 3),
    (["plan", "obliteratus", "--root", "sample:xavier-nx-jp5.1.2"], 3),
])
def test_a_process_exits_with_the_documented_status_and_says_it_in_one_line(args: List[str], code: int) -> None:
    result = process(*args)
    assert result.returncode == code, result.stderr
    if code == 2 or (code == 3 and args[0] == "detect"):
        lines = result.stderr.splitlines()
        assert lines[0].startswith("error: ") and lines[1].startswith("  fix: ") and len(lines) == 2, result.stderr


def test_credentials_are_masked_on_the_real_streams() -> None:
    url = f"http://alice:{SECRET}@192.0.2.1/simple"
    result = process("plan", "obliteratus", "--root", SAMPLE, "--vendor-index", url, "--json")
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert "alice:****@192.0.2.1" in result.stderr and "alice:****@192.0.2.1" in json.loads(result.stdout)["error"]["message"]


@pytest.mark.parametrize("args", [
    ["detect", "--root", SAMPLE],
    ["detect", "--root", str(BOARDS / "debian-server-no-jetson"), "--json"],
    ["plan", "obliteratus", "--root", SAMPLE, "--venv", "/tmp/my envs/obl"],
    ["plan", "obliteratus", "--bogus"],
    ["plan", "obliteratus", "--root", SAMPLE, "--vendor-index", f"http://alice:{SECRET}@192.0.2.1/simple"],
    ["channels"],
    ["doctor", "--list-checks"],
])
def test_an_in_process_run_shows_what_a_process_shows(args: List[str]) -> None:
    real, here = process(*args), run_cli(*args)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)


def test_main_puts_back_the_streams_it_wraps(capsys: pytest.CaptureFixture[str]) -> None:
    from jetson_install.cli.main import main

    streams = sys.stdout, sys.stderr
    with pytest.raises(SystemExit) as exited:
        main(["detect", "--root", str(BOARDS / "debian-server-no-jetson")])
    assert exited.value.code == 3
    assert (sys.stdout, sys.stderr) == streams
    assert capsys.readouterr().err.startswith("error: ")


def test_the_catalog_follows_its_variable_within_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.catalog.catalog import default_catalog_path, load_catalog

    real = load_catalog()
    edited = tmp_path / "wheels-index.toml"
    edited.write_text(default_catalog_path().read_text().replace('id = "jp6-cu126"', 'id = "jp6-edited"', 1))
    monkeypatch.setenv("JETSON_INSTALL_WHEELS_INDEX", str(edited))
    assert load_catalog().path == str(edited) and "jp6-edited" in {channel.id for channel in load_catalog().channels}
    monkeypatch.delenv("JETSON_INSTALL_WHEELS_INDEX")
    assert load_catalog() is real
    channels = run_cli("channels", "--json", env=dict(os.environ, JETSON_INSTALL_WHEELS_INDEX=str(edited)))
    assert "jp6-edited" in {channel["id"] for channel in json.loads(channels.stdout)}


@pytest.mark.slow
def test_an_in_process_install_leaves_this_process_as_it_found_it(installer: Installer) -> None:
    import logging

    logger = logging.getLogger("jetson_install")

    def state() -> Tuple[object, ...]:
        return (list(logger.handlers), logger.level, dict(os.environ), os.getcwd(), list(sys.argv),
                (sys.stdin, sys.stdout, sys.stderr))

    before = state()
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert Path(data["log"]).read_text().count("run: ") >= 3  # the install logged, through a handler now gone
    assert state() == before


@pytest.mark.parametrize("args", [["plan", "obliteratus", "--root", SAMPLE], ["channels", "--json"], ["--help"]])
def test_a_closed_stdout_ends_quietly_with_the_documented_status(args: List[str]) -> None:
    # `jetson-install plan ... | head -1`: the reader is gone before the tool is done writing.
    # Here it is gone before the first line, so the outcome does not depend on timing.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = subprocess.run([sys.executable, "-m", "jetson_install", *args], stdout=writer,
                                stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)
    assert (result.returncode, result.stderr) == (141, "")


def test_only_the_process_s_own_command_line_leaves_its_objects_to_the_exit() -> None:
    # The process's command line freezes what it made (Python's last collections would walk it
    # all before the exit frees it); a caller's in-process run leaves its collector as it was.
    at_exit = ("import atexit, gc, runpy, sys\n"
               "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
               f"sys.argv = ['jetson-install', 'detect', '--root', {SAMPLE!r}]\n"
               "runpy.run_module('jetson_install', run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", at_exit], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "frozen True"
    before = gc.get_freeze_count()
    assert run_cli("detect", "--root", SAMPLE).returncode == 0
    assert gc.get_freeze_count() == before


def test_an_interruption_that_passed_through_a_string_s_exec_still_exits_130(tmp_path: Path) -> None:
    """A Ctrl-C that lands while a module being imported makes a dataclass (whose methods CPython
    makes with exec of a string) ends a `python -m` run by SIGINT unless the run clears CPython's
    flag for it: here the interruption comes from such an exec at once, as the signal did."""
    (tmp_path / "interrupted_run.py").write_text(
        "import sys\n\nimport click\n\nimport jetson_install.planning.rerun  # imported already, as in a real run\n"
        "from jetson_install.cli.exits import run_command\n\n\n"
        "@click.group()\ndef group() -> None:\n    pass\n\n\n"
        "@group.command()\ndef lock() -> None:\n    exec('raise KeyboardInterrupt')\n\n\n"
        "sys.exit(run_command(group, ['lock']))\n")
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-m", "interrupted_run"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines()[-2] == "error: interrupted (Ctrl-C)", done.stderr
