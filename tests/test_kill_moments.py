"""A killed run leaves nothing growing: kill -9 of jetson-install alone (not its process group,
as an OOM killer or a CI runner's timeout may do) at many moments of the vendor, target and lock
steps, and of `jetson-install lock`. No child survives it (each dies with the tool:
PR_SET_PDEATHSIG), the user's environment (or lock) is the one before, and after one more run
DIR.d holds only what the tool marked as its own (and no lock's work is left behind)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict, List

import pytest
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.stub_projects import IndexDirs

from jetson_install.base.layout import OWNER_MARK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
MOMENTS = 20


def _marked(mark: str) -> List[str]:
    """The processes whose environment carries `mark`: the killed tool's children, if any live."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"JETSON_TEST_RUN={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {command[:200]}")
        except OSError:
            continue
    return found


def _survivors(mark: str) -> List[str]:
    """The uv and git processes of the killed run still alive a moment later: the signal a child
    gets when its parent dies is immediate; a uv left running finishes its step within a second.
    Looked for until none is left or the moment has passed."""
    deadline = time.monotonic() + 0.3
    while True:
        found = [process for process in _marked(mark)
                 if Path(process.split(": ", 1)[1].split(" ", 1)[0]).name in ("uv", "git")]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def _kill_at(argv: List[str], env: Dict[str, str], seconds: float) -> "tuple[bool, List[str]]":
    """Start argv, kill -9 it alone after `seconds`; whether it was still running, and what survived it."""
    mark = uuid.uuid4().hex
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=dict(env, JETSON_TEST_RUN=mark))
    try:
        process.wait(timeout=seconds)
        return False, []
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    return True, _survivors(mark)


def _only_what_is_marked(home: Path) -> None:
    from jetson_install.envs.home import EnvironmentHome

    assert EnvironmentHome(home.with_name(home.name[:-2])).strays() == []
    for entry in home.iterdir():
        if entry.name.startswith("env-"):
            assert (entry / "jetson-install" / "complete").is_file(), f"{entry.name} is neither marked nor complete"
        else:
            assert entry.name in (".lock", "previous", OWNER_MARK) or entry.name.startswith("failed-env-"), entry.name


@pytest.mark.slow  # an install to its end, then 20 more killed midway
def test_kill_9_at_twenty_moments_leaves_no_child_and_nothing_growing(
        tmp_path: Path, cli_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex, obliteratus_source: Path) -> None:
    # Servers of its own and an empty uv cache (not `installer`'s shared ones): the moments are
    # fractions of the first run's time, so each later run must cost what the first did, which a
    # cache the first run warmed for the later ones would not hold to.
    installer = Installer(tmp_path / "obl", cli_env, vendor_index.url, public_index.url, obliteratus_source)
    started = time.monotonic()
    first = subprocess.run(installer.argv(), capture_output=True, text=True, env=installer.env, timeout=600)
    assert first.returncode == 0, first.stderr
    before = os.readlink(installer.venv)
    whole = time.monotonic() - started
    changed = tmp_path / "changed"
    shutil.copytree(installer.source, changed)
    moments, killed = [whole * (i + 1) / (MOMENTS + 1) for i in range(MOMENTS)], 0
    for number, seconds in enumerate(moments):
        (changed / "obliteratus" / "extra.py").write_text(f"X = {number}\n")  # each run has work to do
        was_running, survivors = _kill_at(installer.argv(changed), installer.env, seconds)
        assert survivors == [], f"kill -9 at {seconds:.1f} s left {survivors}"
        killed += was_running
        # The user's environment is the one before, or (killed after the switch) the new one, complete.
        now = os.readlink(installer.venv)
        assert now == before or (Path(now) / "jetson-install" / "complete").is_file(), now
    assert killed >= MOMENTS // 2, f"only {killed} of {MOMENTS} runs were still running when killed"
    code, data, stderr = installer.run(changed)
    assert code == 0 and data["status"] in ("installed", "unchanged"), stderr
    _only_what_is_marked(Path(f"{installer.venv}.d"))
    print(f"\nkill moments: {killed} of {MOMENTS} runs killed between {moments[0]:.1f} and {moments[-1]:.1f} s "
          f"(a whole run: {whole:.1f} s)", file=sys.stderr)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
                   check=True, capture_output=True)


def _pair_is_whole(lock_path: Path) -> str:
    """The lock at the output path reads whole, and the built wheel beside it is the one it names
    (its file name is returned)."""
    import hashlib

    from jetson_install.catalog.lock_file import parse_lock

    lock = parse_lock(lock_path.read_text(), str(lock_path))
    [built] = [entry for entry in lock.entries if entry.origin == "built"]
    wheel = lock_path.parent / built.filename
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == built.sha256, f"{wheel.name} is not the lock's"
    return wheel.name


@pytest.mark.slow  # a lock to its end, then 10 more killed midway
def test_kill_9_of_lock_leaves_no_child_no_half_lock_and_the_previous_lock_whole(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_git_repo: Path,
        tmp_path: Path) -> None:
    from test_lock import catalog_env, lock_argv

    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    source = tmp_path / "source"
    shutil.copytree(obliteratus_git_repo, source, symlinks=True)
    out = tmp_path / "locks"
    out.mkdir()
    output = out / "fleet.lock"
    argv = [sys.executable, "-m", "jetson_install", *lock_argv(vendor_index.url, public_index.url, source, output,
                                                              "--python", sys.executable, root=board_here)]
    started = time.monotonic()
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    whole = time.monotonic() - started
    moments, killed = [whole * (i + 1) / 11 for i in range(10)], 0
    for number, seconds in enumerate(moments):
        # Each lock builds another commit: its wheel has the previous one's name and other bytes.
        (source / "obliteratus" / "extra.py").write_text(f"X = {number}\n")
        _git(source, "add", "-A")
        _git(source, "commit", "-q", "-m", f"change {number}")
        was_running, survivors = _kill_at(argv, env, seconds)
        assert survivors == [], f"kill -9 of lock at {seconds:.1f} s left {survivors}"
        killed += was_running
        _pair_is_whole(output)  # the previous lock and its wheel, or (killed after both renames) the new pair
    assert killed >= 5, f"only {killed} of 10 locks were still running when killed"
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    wheel = _pair_is_whole(output)
    assert sorted(path.name for path in out.iterdir()) == ["fleet.lock", wheel]  # nothing of the killed locks
    assert list(Path(env["TMPDIR"]).glob("jetson-install-lock-*")) == []  # the killed locks' work folders
    print(f"\nlock kill moments: {killed} of 10 killed between {moments[0]:.1f} and {moments[-1]:.1f} s "
          f"(a whole lock: {whole:.1f} s)", file=sys.stderr)


# A switch (or a rollback) killed at the very moment one of its two renames has happened: the
# rename of the record of the environment to roll back to, and the rename of DIR's link.
_KILLED_AFTER_A_RENAME = """
import os, signal, sys
from pathlib import Path
from jetson_install.envs.home import EnvironmentHome

link, operation, moment = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
replace = os.replace

def replace_then_die(source, destination):
    replace(source, destination)
    if Path(destination).name == moment:
        os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace_then_die
home = EnvironmentHome(link)
home.switch_to(Path(sys.argv[4])) if operation == "switch" else home.rollback()
"""


@pytest.mark.parametrize("operation", ["switch", "rollback"])
@pytest.mark.parametrize("moment", ["previous", "obl"])
def test_a_kill_at_either_rename_of_a_switch_keeps_the_environment_to_roll_back_to(
        tmp_path: Path, operation: str, moment: str) -> None:
    from support.cli import run_cli
    from test_lifecycle import built

    from jetson_install.envs.home import EnvironmentHome

    home = EnvironmentHome(tmp_path / "obl")
    home.lock().__enter__().__exit__()  # as an install leaves it: DIR.d marked, DIR in the user's list
    oldest, older, newer = built(home), built(home), built(home)
    home.switch_to(oldest)
    home.switch_to(older)  # in use: older; kept: oldest; newer is complete, about to be switched to
    if operation == "rollback":
        home.switch_to(newer)
        home.prune(keep=[newer, older])  # in use: newer; kept: older, as an install leaves them
    killed = subprocess.run([sys.executable, "-c", _KILLED_AFTER_A_RENAME, str(home.link), operation, moment,
                             str(newer)], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # Killed before or after DIR's rename: the one to roll back to is the one in use before it.
    in_use = Path(os.readlink(home.link))
    kept = {("switch", newer): older, ("switch", older): oldest,
            ("rollback", newer): older, ("rollback", older): newer}[operation, in_use]

    listed = run_cli("list")
    assert listed.returncode == 0, listed.stderr
    assert f"  current   {in_use.name}" in listed.stdout and f"  previous  {kept.name}" in listed.stdout, listed.stdout
    # What the next run prunes (all but the one in use and the one kept) leaves the rollback's target.
    home.prune(keep=[home.current(), home.previous()])
    rolled = run_cli("rollback", "--venv", str(home.link))
    assert rolled.returncode == 0, rolled.stderr
    assert rolled.stdout.splitlines()[0] == f"{home.link} -> {kept.name} (rolled back; {in_use.name} is kept)"
    assert os.readlink(home.link) == str(kept)
