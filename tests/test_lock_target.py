"""`jetson-install lock`'s target, checked out and built on a thread of its own while the vendor
index is read (fleet/target_build.py): an interruption or the vendor index's failure ends the
git or uv that thread started (and what uv started: the build backend), the lock says the
error it would have said step by step, and the rest is resolved from the built wheel, never
from anything a uv workspace in a folder above the clone says.

A `git` first on PATH that waits at `clone` holds the thread there, in a known state; a build
backend that waits holds it in the build."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest
from support.index_server import LoopbackIndex
from support.interrupts import alive, wait_until
from support.stub_projects import IndexDirs, planted_workspace_wheel
from test_lock import catalog_env

from jetson_install.catalog.lock_file import parse_lock

SAMPLE = "sample:agx-orin-64gb-jp6.2"


def _lock_argv(vendor_url: str, public_url: str, repository: Path, output: Path) -> List[str]:
    return [sys.executable, "-m", "jetson_install", "lock", "--root", SAMPLE, "--vendor-index", vendor_url,
            "--default-index", public_url, "--source", repository.as_uri(), "--ref", "v0.1.3", "--output", str(output)]


def _git_that_waits_at_clone(tmp_path: Path, env: Dict[str, str]) -> Path:
    """`git clone` starts a process that writes its pid to the file returned and waits (as git's
    ssh or remote helper would), and waits for it; every other git command is git's. Only the
    lock's end of its children ends that process: the kernel's SIGKILL at the tool's death
    (runner._dies_with_us) reaches git alone."""
    started = tmp_path / "clone-started"
    folder = tmp_path / "fake-git"
    folder.mkdir()
    fake = folder / "git"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = clone ]; then\n  sh -c \'echo $$ > {started}; exec sleep 600\' &\n'
                    f'  wait\n  exit 1\nfi\nexec {shutil.which("git")} "$@"\n')
    fake.chmod(0o755)
    env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
    return started


def _wait_for(path: Path, process: "subprocess.Popen[str]") -> int:
    """The pid `path` holds, once the waiting clone (or backend) has written it."""
    assert wait_until(lambda: process.poll() is not None or (path.is_file() and path.read_text().strip() != ""), 60)
    assert process.poll() is None, process.communicate()
    return int(path.read_text())


def _end(*pids: int) -> None:
    """A failed test's cleanup: nothing it started runs on."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def _source_variant(repository: Path, at: Path, edit: Callable[[Path], None]) -> Path:
    """A copy of the stub repository with `edit` made and committed, tagged v0.1.3 again."""
    shutil.copytree(repository, at, symlinks=True)
    edit(at)
    for command in (["add", "-A"], ["commit", "-q", "-m", "a variant"], ["tag", "-f", "v0.1.3"]):
        subprocess.run(["git", "-C", str(at), "-c", "user.name=test", "-c", "user.email=test@example.invalid",
                        *command], check=True, capture_output=True)
    return at


def _backend_edit(old: str, new: str) -> Callable[[Path], None]:
    def edit(source: Path) -> None:
        backend = source / "_build" / "stub_backend.py"
        text = backend.read_text()
        assert old in text
        backend.write_text(text.replace(old, new))
    return edit


@pytest.fixture
def closing_index(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """An index URL whose server, once `state` exists (or `wait` seconds passed, for a state
    that must not come), closes each connection unanswered (a vendor index that fails at a
    moment the test chose)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    state: List[Tuple[Path, float]] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            wait_until(lambda: state[0][0].exists(), state[0][1])
            connection.close()

    threading.Thread(target=serve, daemon=True).start()

    def url(after: Path, wait: float = 60) -> str:
        state.append((after, wait))
        return f"http://127.0.0.1:{listener.getsockname()[1]}/simple/"

    yield url
    listener.close()


def _stop_once_started(process: "subprocess.Popen[str]", started: Path, stop: str, child: str) -> None:
    """Send `stop` to the lock once `started` names the pid of its `child`: the lock ends with
    exit 130 and its one line, and the child with it; whatever fails, neither is left running."""
    pid = 0
    try:
        pid = _wait_for(started, process)
        os.kill(process.pid, getattr(signal, stop))
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr
        how = "Ctrl-C" if stop == "SIGINT" else stop
        assert stderr.splitlines()[-2:][0] == f"error: interrupted ({how})" and "Traceback" not in stderr, stderr
        assert wait_until(lambda: not alive(pid), 10), f"{child} outlived the lock"
    finally:
        _end(process.pid, *([pid] if pid else []))


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_an_interrupted_lock_ends_the_clone_its_thread_started_and_keeps_the_previous_lock(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path, stop: str) -> None:
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    started = _git_that_waits_at_clone(tmp_path, env)
    output = tmp_path / "board.lock"
    output.write_text("the previous lock\n")
    # Ctrl-C as a terminal's foreground job gets it (a run started in the background inherits
    # SIGINT ignored), sent to the tool alone: its git, in the same group, gets none of its own.
    process = subprocess.Popen(_lock_argv(vendor_index.url, public_index.url, obliteratus_git_repo, output),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _stop_once_started(process, started, stop, "the helper of the clone the lock's thread started")
    assert output.read_text() == "the previous lock\n"
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".board.lock")) == []
    assert list(Path(env["TMPDIR"]).glob("jetson-install-lock-*")) == []  # its work folder


def test_a_vendor_index_that_fails_while_the_clone_runs_ends_the_clone_and_is_the_error_said(
        stub_index_dirs: IndexDirs, public_index: LoopbackIndex, obliteratus_git_repo: Path, tmp_path: Path,
        closing_index: Callable[..., str]) -> None:
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    started = _git_that_waits_at_clone(tmp_path, env)
    failing = closing_index(started)  # fails once the clone runs
    output = tmp_path / "board.lock"
    process = subprocess.Popen(_lock_argv(failing, public_index.url, obliteratus_git_repo, output),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    clone = 0
    try:
        clone = _wait_for(started, process)
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 1, stderr
        [error, fix] = stderr.splitlines()[:2]
        assert error.startswith("error: ") and failing.split("/simple")[0] in error and "clone" not in error, stderr
        assert fix.startswith("  fix: "), stderr
        assert wait_until(lambda: not alive(clone), 10), "the clone's helper outlived the lock"
    finally:
        _end(process.pid, *([clone] if clone else []))
    assert not output.exists()
    assert list(Path(env["TMPDIR"]).glob("jetson-install-lock-*")) == []


def test_a_token_in_a_source_url_without_a_ref_reaches_neither_gits_command_line_nor_the_output(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, tmp_path: Path) -> None:
    """The token's `@` is not a ref's: git is given the repository without the token (ps shows
    every local user a command line), and the error line and -v output name it masked."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    argv_file = tmp_path / "git-argv"
    folder = tmp_path / "fake-git"
    folder.mkdir()
    fake = folder / "git"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {argv_file}\n'
                    "echo 'fatal: unable to access the repository' >&2\nexit 128\n")
    fake.chmod(0o755)
    env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
    done = subprocess.run([sys.executable, "-m", "jetson_install", "lock", "--root", SAMPLE, "--vendor-index",
                           vendor_index.url, "--default-index", public_index.url, "--source",
                           "https://ci-bot:s3cr3t-t0ken@127.0.0.1:9/team/obliteratus.git",
                           "--output", str(tmp_path / "board.lock"), "-v"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert argv_file.read_text().splitlines()[:4] == ["clone", "--quiet", "--", "https://127.0.0.1:9/team/obliteratus.git"]
    logs = "".join(path.read_text(errors="replace") for path in tmp_path.rglob("*.log"))
    assert "s3cr3t" not in done.stdout + done.stderr + logs + argv_file.read_text(), done.stderr
    assert "git clone https://ci-bot:****@127.0.0.1:9/team/obliteratus.git failed" in done.stderr, done.stderr


def test_when_the_vendor_index_and_the_build_both_fail_the_vendor_index_is_the_error_said(
        stub_index_dirs: IndexDirs, public_index: LoopbackIndex, obliteratus_git_repo: Path, tmp_path: Path,
        closing_index: Callable[..., str]) -> None:
    """The order a lock made step by step meets them: the vendor index first, though the build
    failed before it on the thread."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    failed = tmp_path / "build-failed"
    broken = _source_variant(obliteratus_git_repo, tmp_path / "broken", _backend_edit(
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        f"    open({str(failed)!r}, 'w').close()\n    raise SystemExit('the stub build fails')\n"))
    failing = closing_index(failed)  # fails once the build has
    output = tmp_path / "board.lock"
    done = subprocess.run(_lock_argv(failing, public_index.url, broken, output), capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert failed.exists(), done.stderr
    [error, fix] = done.stderr.splitlines()[:2]
    assert error.startswith("error: ") and failing.split("/simple")[0] in error and "build" not in error, done.stderr
    assert fix.startswith("  fix: ") and "stub build fails" not in done.stderr, done.stderr
    assert not output.exists()


@pytest.mark.slow  # the vendor index waits for a build that must not start
def test_the_build_of_the_users_own_checkout_waits_for_the_vendor_index(
        stub_index_dirs: IndexDirs, public_index: LoopbackIndex, obliteratus_git_repo: Path, tmp_path: Path,
        closing_index: Callable[..., str]) -> None:
    """A lock that fails before its vendor set is known leaves no build of its own in the
    user's tree (a backend writes build/ and egg-info there), as when its steps ran in turn."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    built = tmp_path / "build-started"
    checkout = _source_variant(obliteratus_git_repo, tmp_path / "checkout", _backend_edit(
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        f"    open({str(built)!r}, 'w').close()\n"))
    failing = closing_index(built, 10)  # fails once a build started, or after 10 s without one
    done = subprocess.run([sys.executable, "-m", "jetson_install", "lock", "--root", SAMPLE, "--vendor-index", failing,
                           "--default-index", public_index.url, "--source", str(checkout),
                           "--output", str(tmp_path / "board.lock")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1 and failing.split("/simple")[0] in done.stderr.splitlines()[0], done.stderr
    assert not built.exists(), "the lock built the user's checkout before its vendor index answered"



def _backend_that_waits(repository: Path, tmp_path: Path) -> Tuple[Path, Path]:
    """A variant whose build backend writes its pid to the file returned, then waits until it is
    ended; the variant's path first."""
    building = tmp_path / "backend-pid"
    waiting = _source_variant(repository, tmp_path / "waiting", _backend_edit(
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        f"    open({str(building)!r}, 'w').write(str(os.getpid()))\n"
        "    import threading\n    threading.Event().wait()  # until it is ended\n"))
    return waiting, building

@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_a_lock_stopped_during_the_build_ends_the_build_backend_too(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path, stop: str) -> None:
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    waiting, building = _backend_that_waits(obliteratus_git_repo, tmp_path)
    output = tmp_path / "board.lock"
    process = subprocess.Popen(_lock_argv(vendor_index.url, public_index.url, waiting, output),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _stop_once_started(process, building, stop, "the build backend")
    assert not output.exists()
    assert list(Path(env["TMPDIR"]).glob("jetson-install-lock-*")) == []


def test_a_kill_of_the_lock_s_whole_process_group_ends_the_build_backend_too(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    """`timeout -s KILL`, `kill -9 -- -PGID`, a CI runner's kill of the job's group after its
    grace period: the lock can do nothing then, so its children must be in that group."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    waiting, building = _backend_that_waits(obliteratus_git_repo, tmp_path)
    process = subprocess.Popen(_lock_argv(vendor_index.url, public_index.url, waiting, tmp_path / "board.lock"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)  # the lock leads its group, as under timeout(1)
    backend = 0
    try:
        backend = _wait_for(building, process)
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
        assert wait_until(lambda: not alive(backend), 10), "the build backend outlived a kill of the lock's group"
    finally:
        _end(process.pid, *([backend] if backend else []))


def test_the_ssh_of_the_lock_s_clone_can_ask_on_the_terminal(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, tmp_path: Path) -> None:
    """ssh asks for a key's passphrase or about a new host key on /dev/tty, whatever
    GIT_TERMINAL_PROMPT says: a lock run at a terminal keeps it for its clone. Where the clone
    fails, the error names ssh's cause, not git's advice, and the fix the command to check with."""
    import fcntl
    import pty
    import termios

    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    said = tmp_path / "ssh-saw-a-terminal"
    fake = tmp_path / "fake-ssh"
    fake.write_text(f"#!/bin/sh\nif (exec 3</dev/tty) 2>/dev/null; then echo yes > {said}; else echo no > {said}; fi\n"
                    "echo 'Host key verification failed.' >&2\nexit 255\n")
    fake.chmod(0o755)
    env["GIT_SSH_COMMAND"] = str(fake)
    master, terminal = pty.openpty()

    def take_the_terminal() -> None:  # after the new session's setsid: the terminal becomes its own
        fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        [sys.executable, "-m", "jetson_install", "lock", "--root", SAMPLE, "--vendor-index", vendor_index.url,
         "--default-index", public_index.url, "--source", "git+ssh://git@example.invalid/team/obliteratus.git",
         "--ref", "v0.1.3", "--output", str(tmp_path / "board.lock")],
        stdin=terminal, stdout=terminal, stderr=terminal, env=env, start_new_session=True,
        preexec_fn=take_the_terminal)
    os.close(terminal)
    shown = b""
    try:
        with contextlib.suppress(OSError):  # EIO once the lock has closed the terminal
            for chunk in iter(lambda: os.read(master, 4096), b""):
                shown += chunk
        assert process.wait(timeout=120) == 1, shown
    finally:
        os.close(master)
        _end(process.pid)
    assert said.read_text() == "yes\n", shown
    url = "ssh://git@example.invalid/team/obliteratus.git"
    [error, fix] = shown.decode().splitlines()[:2]
    assert error == f"error: git clone {url} failed: Host key verification failed. fatal: Could not read from remote " \
                    "repository.", shown
    assert fix.startswith("  fix: ") and "ssh-add" in fix and f"check with: git ls-remote {url};" in fix, shown


@pytest.mark.slow  # two locks
@pytest.mark.parametrize("explicit", [True, False])
def test_a_uv_workspace_planted_in_the_temporary_folder_neither_changes_the_lock_nor_runs_in_the_build(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path, explicit: bool) -> None:
    """What any local user can write into a shared temporary folder, where the lock clones its
    target: a workspace naming the clone a member, with an index of their wheels (explicit,
    reached through `tool.uv.sources`, or not) for a package the lock resolves and one the
    target's build requires. (The lock resolves wheel files, which no workspace's sources
    reach; a folder, which they would, is refused before it, by `lock --with` and by inspect: the
    `--with FOLDER` test below. The resolution's own --no-sources stays, as a defense.)"""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)

    def build_requires_six(source: Path) -> None:
        pyproject = source / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace("requires = []", 'requires = ["six"]'))

    needs_six = _source_variant(obliteratus_git_repo, tmp_path / "needs-six", build_requires_six)
    clean = tmp_path / "clean.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, needs_six, clean), capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    planted, ran = tmp_path / "planted", tmp_path / "planted-code-ran"
    planted.mkdir()
    for name in ("rich", "six"):
        planted_workspace_wheel(planted, name, "99.0", ran)
    sources = '[tool.uv.sources]\nrich = { index = "planted" }\nsix = { index = "planted" }\n' if explicit else ""
    (Path(env["TMPDIR"]) / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["jetson-install-lock-*/source"]\n'
        f'[[tool.uv.index]]\nname = "planted"\nurl = "{planted}"\nformat = "flat"\n'
        f'explicit = {str(explicit).lower()}\n{sources}')
    output = tmp_path / "board.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, needs_six, output), capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert not ran.exists(), "a planted build requirement ran in the target's build"
    assert output.read_text() == clean.read_text()
    assert "99.0" not in output.read_text()


def test_a_folder_given_to_with_in_the_temporary_folder_is_refused_before_its_build_or_a_planted_workspace_runs(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    """`lock --with FOLDER` and `inspect 'NAME @ file://FOLDER'`, the ways a folder reached the
    lock's resolution, are each refused before it (a lock holds no folder: test_lock.py has the
    line; inspect reads files: test_inspect.py has its). Kept in a shared temporary folder, the
    folder is a member of another user's workspace there, whose sources would put their wheel
    into the build uv ran for the folder's metadata: now neither that build nor theirs runs."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    addon = Path(env["TMPDIR"]) / "addon"
    addon.mkdir()
    # A version the backend says (dynamic): uv builds the folder's metadata, in an environment
    # with the build's requirement, six.
    (addon / "pyproject.toml").write_text(
        '[project]\nname = "addon"\ndynamic = ["version"]\n'
        '[build-system]\nrequires = ["six"]\nbuild-backend = "addon_backend"\nbackend-path = ["."]\n')
    built = tmp_path / "metadata-built"
    (addon / "addon_backend.py").write_text(
        "import os\n\n\ndef prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):\n"
        f"    open({str(built)!r}, 'w').close()\n"
        "    os.mkdir(os.path.join(metadata_directory, 'addon-0.1.dist-info'))\n"
        "    with open(os.path.join(metadata_directory, 'addon-0.1.dist-info', 'METADATA'), 'w') as metadata:\n"
        "        metadata.write('Metadata-Version: 2.1\\nName: addon\\nVersion: 0.1\\n')\n"
        "    return 'addon-0.1.dist-info'\n")
    planted, ran = tmp_path / "planted", tmp_path / "planted-code-ran"
    planted.mkdir()
    planted_workspace_wheel(planted, "six", "99.0", ran)
    (Path(env["TMPDIR"]) / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["addon"]\n'
        f'[[tool.uv.index]]\nname = "planted"\nurl = "{planted}"\nformat = "flat"\nexplicit = true\n'
        '[tool.uv.sources]\nsix = { index = "planted" }\n')
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, obliteratus_git_repo,
                                     tmp_path / "board.lock") + ["--with", str(addon)],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0].startswith(f"error: --with {addon}: a lock holds only files an index lists")
    assert not built.exists(), "the folder's build backend ran"
    assert not ran.exists(), "a planted build requirement ran in the build of the folder's metadata"
    # The folder as a requirement, `inspect 'addon @ file://...'`, reached the lock's own
    # resolution (requirement_files), which built it: refused before it now.
    config = tmp_path / "config.toml"
    config.write_text(f'default_index = "{public_index.url}"\n')
    inspected = subprocess.run([sys.executable, "-m", "jetson_install", "inspect", f"addon @ {addon.as_uri()}",
                                "--root", SAMPLE], capture_output=True, text=True,
                               env=dict(env, JETSON_INSTALL_CONFIG=str(config)))
    assert inspected.returncode == 2, inspected.stderr
    assert inspected.stderr.splitlines()[0] == (f"error: addon @ {addon.as_uri()}: a project folder holds source, "
                                                "not the built code inspect reads")
    assert not built.exists(), "the folder's build backend ran"
    assert not ran.exists(), "a planted build requirement ran in the build of the folder's metadata"


@pytest.mark.slow  # a lock
def test_the_rest_is_resolved_from_the_built_wheel_whose_backend_adds_a_dependency_pyproject_does_not_state(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    """As setuptools does with `install_requires` in setup.py beside a [project] table that has
    no `dependencies`: the wheel requires what pyproject.toml does not say, and a board installs
    the lock with --no-deps, so the lock must hold it."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    adds = _source_variant(obliteratus_git_repo, tmp_path / "adds", _backend_edit(
        "DEPENDENCIES = [", "DEPENDENCIES = ['pytest>=8', "))
    output = tmp_path / "board.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, adds, output), capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert [entry.version for entry in parse_lock(output.read_text(), str(output)).entries
            if entry.name == "pytest"] == ["8.3.3"], output.read_text()
