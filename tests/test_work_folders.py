"""A run holds its work folder (an flock on a file in it) while it lives, and the next run of the same kind
removes what a killed one left (base/work_folders.py): only this user's real folders of the form
make_work_folder makes that no run holds, whatever pid namespace the run is in."""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any, Dict, List, Set, Tuple, cast

import pytest

from jetson_install.base.work_folders import HELD_FILE, make_work_folder, remove_abandoned
from jetson_install.catalog.identity import ChosenFile
from jetson_install.running import fetch
from jetson_install.tools import index

# A run of the tool's kind: makes a folder, says where, and uses it until its stdin closes.
_RUN = ("import sys; from pathlib import Path; from jetson_install.base.work_folders import make_work_folder; "
        "folder = make_work_folder(sys.argv[1], Path(sys.argv[2])); print(folder.path, flush=True); "
        "sys.stdin.read(); folder.close()")
# Another process that holds a folder as a run does (a run of another pid namespace): its file's flock.
_HOLD = ("import fcntl, os, sys; descriptor = os.open(os.path.join(sys.argv[1], sys.argv[2]), os.O_RDWR | os.O_CREAT); "
         "fcntl.flock(descriptor, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()")
# A run of an earlier version, which held its folder by the folder's flock alone.
_HOLD_FOLDER = ("import fcntl, os, sys; descriptor = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY); "
                "fcntl.flock(descriptor, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()")
# A run killed while it makes its folder: it stops (until its stdin closes) once mkdtemp made the
# staging folder and the file it holds it by, before that file's flock, and says which folder it made.
_MAKING = """
import fcntl, os, sys
from pathlib import Path
from jetson_install.base import work_folders
flock = fcntl.flock
def stopped_before_the_folder_s(descriptor, operation):
    named = os.path.dirname(os.readlink("/proc/self/fd/%d" % descriptor))
    if named.endswith(".new"):
        print(named, flush=True)
        sys.stdin.read()
    flock(descriptor, operation)
fcntl.flock = stopped_before_the_folder_s
work_folders.make_work_folder(sys.argv[1], Path(sys.argv[2]))
"""
# flock as Linux's NFS client gives it (POSIX locks, flock(2) "NFS details"): refused on a folder,
# and an exclusive lock refused on a file not opened for writing, a shared one on a file not opened
# for reading (EBADF, as fcntl's F_SETLK answers).
_NFS = """
import errno, fcntl, os, stat
def as_nfs_gives_it(descriptor, operation, _flock=fcntl.flock):
    mode = fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE
    kind = operation & (fcntl.LOCK_SH | fcntl.LOCK_EX)
    if (stat.S_ISDIR(os.fstat(descriptor).st_mode) or (kind == fcntl.LOCK_EX and mode == os.O_RDONLY)
            or (kind == fcntl.LOCK_SH and mode == os.O_WRONLY)):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    _flock(descriptor, operation)
"""
# A run on such a filesystem: its folder (a partial wheel in it), used until it is killed.
_ON_NFS = _NFS + """
import sys
from pathlib import Path
fcntl.flock = as_nfs_gives_it
from jetson_install.base.work_folders import make_work_folder
folder = make_work_folder(sys.argv[1], Path(sys.argv[2]))
(folder.path / "torch-2.5.0-cp310-cp310-linux_aarch64.whl").write_bytes(b"part of a wheel")
print(folder.path, flush=True)
sys.stdin.read()
"""
_SOURCE = str(Path(__file__).resolve().parent.parent)


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def started(argv: List[str]) -> "subprocess.Popen[str]":
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=_SOURCE))


def a_run(processes: List["subprocess.Popen[str]"], prefix: str, parent: Path) -> Tuple["subprocess.Popen[str]", Path]:
    process = started([sys.executable, "-c", _RUN, prefix, str(parent)])
    processes.append(process)
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def names(folder: Path) -> Set[str]:
    return {path.name for path in folder.iterdir()}


def lock_file(prefix: str) -> str:
    """The one file make_work_folder keeps beside the folders of `prefix` (this user's lock)."""
    return f".{prefix.lstrip('.')}uid{os.geteuid()}.lock"


def test_a_killed_run_s_folder_is_removed_and_a_live_run_s_and_other_names_are_kept(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    killed, killed_folder = a_run(processes, "work-", tmp_path)
    _, live_folder = a_run(processes, "work-", tmp_path)
    assert killed_folder.name.startswith(f"work-{killed.pid}-") and stat.S_IMODE(killed_folder.stat().st_mode) == 0o700
    (killed_folder / "inside").mkdir()
    killed.send_signal(signal.SIGKILL)  # no `finally` runs: the folder stays, its lock goes with the process
    killed.wait(timeout=30)
    gone = ended_pid()
    (tmp_path / f"work-{gone}-abcd_f9h").mkdir()  # a run killed by an earlier version (nothing held it)
    (tmp_path / f"work-{gone}-abcdefgh.new" / "inside").mkdir(parents=True)  # one killed while making its folder
    # Names of another form than make_work_folder's, though their pid is gone: a user's own.
    kept = {f"work-{gone}-abc", f"work-{gone}-abcdefgh-notes", f"work-{gone}-ABCDEFGH", f"work-{gone}-abcdefghi",
            f"work-{gone}x", "work-notapid", "work-0-abcdefgh", f"other-{gone}-abcdefgh",
            f"work-{gone}-abcdefgh.newer", f"work-{gone}-abc.new", f"work-{gone}-abcdefgh.new.old"}
    for name in kept:
        (tmp_path / name).mkdir()
    made = make_work_folder("work-", tmp_path)
    kept.add(lock_file("work-"))  # the one file the runs keep
    assert names(tmp_path) == kept | {live_folder.name, made.path.name}
    assert made.path.name.startswith(f"work-{os.getpid()}-") and stat.S_IMODE(made.path.stat().st_mode) == 0o700
    again = make_work_folder("work-", tmp_path)  # each fresh, and a live run's (this one's) is kept
    assert again.path != made.path and made.path.is_dir()
    made.close()
    again.close()
    assert names(tmp_path) == kept | {live_folder.name}


def test_where_no_folder_can_be_locked_as_on_nfs_a_killed_run_s_folder_is_removed_and_a_live_one_s_kept(
        tmp_path: Path, processes: List["subprocess.Popen[str]"], monkeypatch: pytest.MonkeyPatch) -> None:
    """An NFS home's ~/.cache, where the fetch's partial wheels are: a folder's flock is refused
    there, so each run holds a file in its folder, opened for writing."""
    nfs: Dict[str, Any] = {}
    exec(_NFS, nfs)
    monkeypatch.setattr(fcntl, "flock", nfs["as_nfs_gives_it"])
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    with pytest.raises(OSError, match="Bad file descriptor"):
        fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as NFS answers
    os.close(folder)
    runs = [started([sys.executable, "-c", _ON_NFS, ".part-", str(tmp_path)]) for _ in range(4)]
    processes.extend(runs)
    folders = [Path(cast(IO[str], run.stdout).readline().strip()) for run in runs]
    assert all((folder / "torch-2.5.0-cp310-cp310-linux_aarch64.whl").is_file() for folder in folders)
    for killed in runs[:3]:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    with make_work_folder(".part-", tmp_path) as made:
        assert names(tmp_path) == {made.name, folders[3].name, lock_file(".part-")}
        assert names(made) == {HELD_FILE}  # hidden: no `*.whl` listing of the folder takes it


def test_a_run_of_an_earlier_version_and_this_one_never_take_each_other_s_live_folder(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    """An earlier version held a folder by the folder's flock and took one whose flock it got (two
    versions of the tool sharing /tmp, a container's and the host's): each keeps the other's."""
    earlier = tmp_path / f"work-{ended_pid()}-abcdefgh"
    earlier.mkdir()
    holder = started([sys.executable, "-c", _HOLD_FOLDER, str(earlier)])
    processes.append(holder)
    assert cast(IO[str], holder.stdout).readline() == "held\n"
    with make_work_folder("work-", tmp_path) as made:
        assert names(tmp_path) == {earlier.name, made.name, lock_file("work-")}
        folder = os.open(made, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):  # what the earlier version's remover tried
                fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(folder)
    holder.kill()
    holder.wait(timeout=30)
    remove_abandoned("work-", tmp_path)
    assert names(tmp_path) == {lock_file("work-")}


def test_a_user_s_own_folder_of_a_like_name_is_kept(tmp_path: Path) -> None:
    mine = {"jetson-install-lock-2024-notes", f"jetson-install-lock-{ended_pid()}-notes"}
    for name in mine:
        (tmp_path / name / "notes.txt").mkdir(parents=True)
    with make_work_folder("jetson-install-lock-", tmp_path) as made:
        assert names(tmp_path) == mine | {made.name, lock_file("jetson-install-lock-")}
    assert names(tmp_path) == mine | {lock_file("jetson-install-lock-")}


def test_a_folder_another_process_holds_is_kept_though_its_pid_is_gone(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    held = tmp_path / f"work-{ended_pid()}-abcdefgh"  # the pid its run has in its own pid namespace
    held.mkdir()
    holder = started([sys.executable, "-c", _HOLD, str(held), HELD_FILE])
    processes.append(holder)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    remove_abandoned("work-", tmp_path)
    assert held.is_dir()
    holder.kill()
    holder.wait(timeout=30)
    remove_abandoned("work-", tmp_path)
    assert not held.exists()


def test_a_live_run_in_another_pid_namespace_keeps_its_folder(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    """A container sharing the host's /tmp: its run's pid there names no process here."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare --pid does not work here (it needs root or user namespaces); "
                    "test_a_folder_another_process_holds_is_kept_though_its_pid_is_gone holds the rule")
    gone = ended_pid()  # the pid the run gets in its namespace: none of this namespace's has it
    # The namespace's first process sets its next pid, then starts the run.
    code = (f"import subprocess, sys; open('/proc/sys/kernel/ns_last_pid', 'w').write('{gone - 1}'); "
            f"sys.exit(subprocess.run([sys.executable, '-c', {_RUN!r}, 'work-', {str(tmp_path)!r}]).returncode)")
    namespace = started(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code])
    processes.append(namespace)
    assert namespace.stdout is not None
    made = Path(namespace.stdout.readline().strip())
    assert made.name.startswith(f"work-{gone}-") and not Path(f"/proc/{gone}").exists()
    remove_abandoned("work-", tmp_path)
    assert made.is_dir()
    assert namespace.stdin is not None
    namespace.stdin.close()  # the run ends as it should: its folder goes with it
    assert namespace.wait(timeout=60) == 0
    assert names(tmp_path) == {lock_file("work-")}


def test_a_remover_never_takes_a_folder_being_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A remover that cannot see this process (another pid namespace's), running between each
    step of making a folder: after mkdtemp (not yet held) and after the rename (held)."""
    def unseen(pid: int, signal_number: int) -> None:
        raise ProcessLookupError(pid)

    made = tempfile.mkdtemp
    renamed = os.rename

    def mkdtemp(*args: Any, **kwargs: Any) -> str:
        path: str = made(*args, **kwargs)
        with monkeypatch.context() as other_namespace:
            other_namespace.setattr(os, "kill", unseen)
            remove_abandoned("work-", tmp_path)
        assert Path(path).is_dir()
        return path

    def rename(source: str, destination: str) -> None:
        renamed(source, destination)
        with monkeypatch.context() as other_namespace:
            other_namespace.setattr(os, "kill", unseen)
            remove_abandoned("work-", tmp_path)

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(os, "rename", rename)
    folder = make_work_folder("work-", tmp_path)
    assert names(tmp_path) == {folder.path.name, lock_file("work-")}
    folder.close()
    assert names(tmp_path) == {lock_file("work-")}


def test_a_run_killed_while_making_its_folder_leaves_it_to_the_next_run_and_a_live_one_keeps_it(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    """SIGKILL between mkdtemp and the folder's flock: the staging folder, held by no one, is the
    next run's to remove; while its maker lives (in any pid namespace) no remover takes it."""
    maker = started([sys.executable, "-c", _MAKING, "work-", str(tmp_path)])
    processes.append(maker)
    assert maker.stdout is not None
    staging = Path(maker.stdout.readline().strip())
    assert staging.name.startswith(f"work-{maker.pid}-") and staging.name.endswith(".new") and staging.is_dir()
    remove_abandoned("work-", tmp_path)
    assert staging.is_dir()  # its maker is alive: not yet held, but being made
    maker.kill()
    maker.wait(timeout=30)
    with make_work_folder("work-", tmp_path) as made:
        assert names(tmp_path) == {made.name, lock_file("work-")}


def test_a_folder_being_made_that_its_maker_holds_is_kept(
        tmp_path: Path, processes: List["subprocess.Popen[str]"]) -> None:
    staging = tmp_path / f"work-{ended_pid()}-abcdefgh.new"  # held, not yet renamed
    staging.mkdir()
    holder = started([sys.executable, "-c", _HOLD, str(staging), HELD_FILE])
    processes.append(holder)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    remove_abandoned("work-", tmp_path)
    assert staging.is_dir()


def test_a_lock_file_name_that_is_no_file_of_this_user_s_keeps_folders_being_made(tmp_path: Path) -> None:
    """A symlink (or another user's file) at the lock's name: nothing is written through it, no
    folder being made is removed (none can be proved abandoned), and runs still make theirs."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / lock_file("work-")).symlink_to(elsewhere / "planted")
    staging = work / f"work-{ended_pid()}-abcdefgh.new"
    staging.mkdir()
    with make_work_folder("work-", work) as made:
        assert names(work) == {made.name, staging.name, lock_file("work-")}
    assert names(elsewhere) == set() and staging.is_dir()


def test_a_symlink_and_a_file_of_an_abandoned_name_are_left_alone(tmp_path: Path) -> None:
    gone = ended_pid()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "keep").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / f"work-{gone}-linkabcd").symlink_to(elsewhere, target_is_directory=True)
    (work / f"work-{gone}-fileabcd").write_text("not a folder of ours\n")
    remove_abandoned("work-", work)
    assert names(work) == {f"work-{gone}-linkabcd", f"work-{gone}-fileabcd"}
    assert (elsewhere / "keep").is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another user owns")
def test_another_user_s_folder_is_left_alone(tmp_path: Path) -> None:
    theirs = tmp_path / f"work-{ended_pid()}-abcdefgh"
    (theirs / "inside").mkdir(parents=True)
    os.chown(theirs, 65534, 65534)  # nobody's
    remove_abandoned("work-", tmp_path)
    assert (theirs / "inside").is_dir()


def test_two_downloads_of_one_pid_at_once_get_folders_of_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two fetch steps of the same pid (two containers' runs sharing the cache, here two threads
    of one process): each downloads into a fresh folder of its own, removed when it is done."""
    cache = tmp_path / "cache"
    monkeypatch.setattr(fetch, "wheels_cache", lambda: cache)
    both = threading.Barrier(2, timeout=60)
    folders: List[Path] = []

    class Stop(Exception):
        pass

    def fetch_file(url: str, destination: Path, shown: object) -> None:
        folders.append(destination.parent)
        destination.write_bytes(b"part of a wheel")
        both.wait()  # both downloads under way at once
        raise Stop

    monkeypatch.setattr(index, "fetch_file", fetch_file)
    plan = cast(Any, SimpleNamespace(vendor_location="the vendor index", indexes=(),
                                     route=SimpleNamespace(source_option="--vendor-index", file_sources=lambda: ())))
    run = cast(Any, SimpleNamespace(current=None, rerun=SimpleNamespace(with_option=lambda option, value: "again")))
    chosen = ChosenFile("torch", "2.5.0", "torch-2.5.0-cp310-cp310-linux_aarch64.whl",
                        "http://127.0.0.1:9/torch-2.5.0-cp310-cp310-linux_aarch64.whl", "", False)
    stopped: List[BaseException] = []

    def download() -> None:
        try:
            fetch._checked(chosen, "the vendor index", plan, run)
        except Stop as stop:
            stopped.append(stop)

    threads = [threading.Thread(target=download) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(stopped) == 2 and len(set(folders)) == 2, folders
    assert all(folder.name.startswith(f".part-{os.getpid()}-") for folder in folders)
    assert names(cache) == {lock_file(".part-")}  # each removed its own


def test_a_folder_whose_held_file_is_a_link_or_no_file_is_left_alone(tmp_path: Path) -> None:
    """Only a run's own file holds a folder: a link there (to a file no run holds) or a folder
    of that name proves nothing of the folder, which is kept whole."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("another's file\n")
    work = tmp_path / "work"
    gone = ended_pid()
    (work / f"work-{gone}-linkabcd").mkdir(parents=True)
    (work / f"work-{gone}-linkabcd" / HELD_FILE).symlink_to(elsewhere)
    (work / f"work-{gone}-fldrabcd" / HELD_FILE).mkdir(parents=True)
    remove_abandoned("work-", work)
    assert names(work) == {f"work-{gone}-linkabcd", f"work-{gone}-fldrabcd"}
    assert names(work / f"work-{gone}-linkabcd") == {HELD_FILE} and elsewhere.read_text() == "another's file\n"
