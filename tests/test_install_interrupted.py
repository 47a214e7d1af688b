"""An install cut off midway (kill -9, Ctrl-C, an index that goes away) keeps the environment
DIR pointed at, and a re-run succeeds.

Against loopback indexes (support.stub_projects), one of them slow enough to catch the install
mid-download; nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import VENDOR_TORCH
from support.installer import Installer
from support.interrupts import wait_until
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs
from typing import Callable

# Each test installs, then interrupts a second install.
pytestmark = pytest.mark.slow


def group_ends(group: int, seconds: float = 30) -> bool:
    """Whether process group `group` is gone within `seconds`, looked at until it is."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def test_index_going_away_mid_install_keeps_the_old_environment(installer: Installer, public_index: LoopbackIndex, tmp_path: Path) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    changed = tmp_path / "changed-source"
    shutil.copytree(installer.source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 1\n")
    public_index.fail_after(2)
    code, data, stderr = installer.run(changed)
    assert code == 1, stderr
    assert data["error"]["step"] in ("environment", "target")
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"


def reinstall_caught_mid_download(installer: Installer, tmp_path: Path, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
                                  ) -> "tuple[subprocess.Popen[str], str, Path, LoopbackIndex]":
    """Install once, then start a changed install against an index that holds its downloads
    half-way, and return it while one is held (and the index, to release them)."""
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    slow = start_index(stub_index_dirs.public, name="slow-public", hold=True)
    changed = tmp_path / "changed-source"
    shutil.copytree(installer.source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 2\n")
    installer.public_url = slow.url
    # Ctrl-C reaches it as a terminal's foreground job: SIGINT not ignored, even where this run
    # was started in the background (a shell's `&`), whose children inherit it ignored.
    process = subprocess.Popen(installer.argv(changed), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=installer.env, text=True, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    slow.wait_for_request(lambda path: path.endswith(".whl"), timeout=120)
    return process, before, changed, slow


def test_killed_install_keeps_the_old_environment_and_a_rerun_succeeds(
    installer: Installer, tmp_path: Path, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
) -> None:
    process, before, changed, slow = reinstall_caught_mid_download(installer, tmp_path, stub_index_dirs, start_index)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    slow.release()
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    code, data, stderr = installer.run(changed)
    assert code == 0, stderr
    assert data["status"] == "installed"
    assert os.readlink(installer.venv) != before
    leftovers = [p.name for p in Path(f"{installer.venv}.d").glob("env-*")]
    assert len(leftovers) == 2, leftovers  # the new environment and the previous one, no partial build
    # The killed run's environment, removed, is in the result with the disk it took.
    [removed] = data["removed_leftovers"]
    assert Path(removed["path"]).parent == Path(f"{installer.venv}.d") and removed["path"] != os.readlink(installer.venv)
    assert removed["bytes"] > 0 and f"removed {removed['path']}, left by a killed or interrupted run" in stderr


def test_ctrl_c_reports_the_step_and_keeps_the_old_environment(
    installer: Installer, tmp_path: Path, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
) -> None:
    process, before, _, _ = reinstall_caught_mid_download(installer, tmp_path, stub_index_dirs, start_index)
    os.killpg(process.pid, signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "unchanged" in stderr and "Traceback" not in stderr
    assert os.readlink(installer.venv) == before
    # The README's "a line in the log": the error and fix lines stderr showed, in the run's log.
    [log] = [line.split("log: ", 1)[1] for line in stderr.splitlines() if line.startswith("  log: ")]
    shown = [line for line in stderr.splitlines() if line.startswith(("error: interrupted during step", "  fix: "))]
    logged = Path(log).read_text()
    assert len(shown) == 2 and all(f"ERROR {line}" in logged for line in shown), (shown, logged[-600:])


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_end_an_install_as_ctrl_c_does(
    installer: Installer, tmp_path: Path, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], stop: str
) -> None:
    # CI runners and systemd stop a job with SIGTERM to the tool alone; a closed terminal sends SIGHUP.
    process, before, _, _ = reinstall_caught_mid_download(installer, tmp_path, stub_index_dirs, start_index)
    os.kill(process.pid, getattr(signal, stop))
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert json.loads(stdout)["status"] == "interrupted"
    assert "error: interrupted during step" in stderr and "is unchanged)" in stderr
    [log] = [line.split("log: ", 1)[1] for line in stderr.splitlines() if line.startswith("  log: ")]
    assert f"{stop} received: ending the run as Ctrl-C does" in Path(log).read_text()
    assert "ERROR error: interrupted during step" in Path(log).read_text()
    # The step's uv ended with the tool: nothing is left in the group the install was started in
    # (the signal a child gets when its parent dies is immediate; its end is waited for).
    assert group_ends(process.pid), "a child of the install outlived it"
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"


def test_a_closed_stderr_lets_the_install_finish_quietly_and_says_so_in_its_log(installer: Installer) -> None:
    # `jetson-install obliteratus ... 2>&1 | head -2`, a tee that died, a CI log pipe gone: the
    # progress lines have no reader. Here it is gone before the first line, so nothing depends on timing.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = subprocess.run(installer.argv(), stdout=subprocess.PIPE, stderr=writer, text=True,
                                env=installer.env, timeout=600)
    finally:
        os.close(writer)
    data = json.loads(result.stdout)
    # As a closed stdout: the work is done, and the status tells a pipeline (set -o pipefail) that
    # not everything was written.
    assert (result.returncode, data["status"]) == (141, "installed"), result.stdout
    assert "stderr was closed: going on without it" in Path(data["log"]).read_text()
    assert os.readlink(installer.venv) == data["environment"]
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    assert sorted(path.name for path in Path(f"{installer.venv}.d").iterdir() if path.name.startswith(".env-")) == []


def test_an_install_piped_to_head_finishes_and_exits_as_a_closed_pipe_does(installer: Installer) -> None:
    # The issue's own words: `... 2>&1 | head -2`; the two streams' reader goes away after the
    # first lines, whenever that is.
    command = " ".join(shlex.quote(word) for word in installer.argv())
    result = subprocess.run(["bash", "-c", f"{command} 2>&1 | head -2; exit ${{PIPESTATUS[0]}}"], capture_output=True,
                            text=True, env=installer.env, timeout=600)
    assert result.returncode == 141, result.stdout
    assert len(result.stdout.splitlines()) == 2 and "Traceback" not in result.stdout + result.stderr
    assert (Path(os.readlink(installer.venv)) / "jetson-install" / "complete").is_file()
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    assert sorted(path.name for path in Path(f"{installer.venv}.d").iterdir() if path.name.startswith(".env-")) == []


def test_sigterm_during_the_check_step_ends_the_smoke_command_at_once(installer: Installer, tmp_path: Path) -> None:
    # The smoke command imports the target (minutes for a real one on a board): a SIGTERM to the
    # tool alone (a CI runner's stop) reaches no child, so the tool must end them itself.
    changed = tmp_path / "slow-import"
    shutil.copytree(installer.source, changed)
    started = tmp_path / "smoke-started"
    device = changed / "obliteratus" / "device.py"
    device.write_text(f"import os, time\nopen({str(started)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
                      + device.read_text())
    # Ctrl-C reaches it as a terminal's foreground job: SIGINT not ignored, even where this run
    # was started in the background (a shell's `&`), whose children inherit it ignored.
    process = subprocess.Popen(installer.argv(changed), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=installer.env, text=True, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while not started.exists() or not started.read_text():
            assert process.poll() is None, process.communicate()[1]
            time.sleep(0.05)
        smoke = int(started.read_text())
        os.kill(process.pid, signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)  # not the import's 600 s
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert json.loads(stdout)["error"]["step"] == "check"
    assert "error: interrupted during step 'check'" in stderr
    assert not Path(f"/proc/{smoke}").exists() or "\nState:\tZ" in Path(f"/proc/{smoke}/status").read_text()
    assert not os.path.lexists(installer.venv)  # a first install: nothing made, nothing half-made left


def test_ctrl_c_while_the_install_waits_for_the_vendor_index_names_its_read_not_the_step_before(
        installer: Installer) -> None:
    """A first install reads the vendor index while the environment step runs, then waits for the
    read (a slow board's, a slow index's): a Ctrl-C there is the vendor step's, as a failed read
    is, never the environment step's, which had ended."""
    main = threading.main_thread()

    def waiting_for_the_index() -> bool:
        frame = sys._current_frames().get(main.ident or 0)
        while frame is not None:
            if frame.f_code.co_name == "resolution" and frame.f_code.co_filename.endswith("install.py"):
                return True
            frame = frame.f_back
        return False

    def ctrl_c_there() -> None:
        if wait_until(waiting_for_the_index, 120):
            os.kill(os.getpid(), signal.SIGINT)

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # never accepted: the read's request waits for its answer
        installer.vendor_url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        # A terminal's foreground job gets Ctrl-C; a test's process may have inherited SIGINT ignored.
        ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
        pressing = threading.Thread(target=ctrl_c_there)
        pressing.start()
        try:
            code, data, stderr = installer.run()
        finally:
            pressing.join()
            signal.signal(signal.SIGINT, ignored)
    assert code == 130, stderr
    assert [step["id"] for step in data["steps"]] == ["interpreter", "environment"]
    assert data["status"] == "interrupted" and data["error"]["step"] == "vendor"
    assert data["error"]["message"].startswith("interrupted during step 'vendor' (no environment was made at ")
    assert "error: interrupted during step 'vendor'" in stderr
    assert not installer.venv.exists() and not list(Path(f"{installer.venv}.d").glob("*env-*"))
