"""`jetson-install lock`, `wheelhouse` and `obliteratus --lock/--wheelhouse`, against loopback indexes.

Locks are made here (x86_64) for the board's platform (aarch64, Python 3.10, manylinux_2_35
for JetPack 6's Ubuntu 22.04), and for this machine's own interpreter to install them offline.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest
from support.cli import CliResult, run_cli
from support import VENDOR_PINS, VENDOR_TORCH, isolated_env, needs_obliteratus_python
from support.catalogs import stub_catalog_text
from support import PROXY_VARIABLES
from support.lanes import lane_unavailable
from support.manifests import assert_measured_from
from support.planned import assert_ran_as_planned
from support.wheels import build_wheel

from jetson_install.catalog.lock_file import Lock, Locked, parse_lock, render_lock
from jetson_install.base.tags import wheel_tags
from support.index_server import LoopbackIndex
from support.interrupts import wait_until
from support.stub_projects import IndexDirs

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"


def catalog_env(tmp_path: Path, vendor_dir: Path) -> Dict[str, str]:
    """The tool's environment, with jp6-cu126 describing the stub vendor builds in `vendor_dir`."""
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


@pytest.fixture
def cli_env(tmp_path: Path, stub_index_dirs: IndexDirs) -> Dict[str, str]:
    return catalog_env(tmp_path, stub_index_dirs.vendor)


@pytest.fixture
def board_indexes(private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
                  ) -> Tuple[LoopbackIndex, LoopbackIndex, Path]:
    """The stub indexes with files only a Jetson (aarch64, glibc 2.35) installs, and one it must not."""
    build_wheel(private_index_dirs.vendor, "torch", VENDOR_TORCH, tag="cp310-cp310-linux_aarch64",
                source_index="vendor-aarch64")
    build_wheel(private_index_dirs.public, "psutil", "6.0.0", tag="cp310-abi3-manylinux_2_35_aarch64",
                source_index="public-aarch64")
    build_wheel(private_index_dirs.public, "psutil", "6.0.0", tag="cp310-abi3-manylinux_2_39_aarch64",
                source_index="too-new-glibc")
    return (start_index(private_index_dirs.vendor, name="vendor"), start_index(private_index_dirs.public, name="public"),
            private_index_dirs.vendor)


def jetson_install(env: Dict[str, str], *args: str) -> CliResult:
    return run_cli(*args, env=env)


def lock_argv(vendor_url: str, public_url: str, source: Path, output: Path, *extra: str,
              root: object = SAMPLE) -> List[str]:
    """`lock` for `root` (a board of this machine's architecture where `extra` has --python)."""
    return ["lock", "--root", str(root), "--vendor-index", vendor_url, "--default-index", public_url,
            "--source", str(source), "--output", str(output), *extra]


@pytest.mark.slow
def test_a_lock_made_here_for_the_board_names_aarch64_files_each_with_its_hash(
        board_indexes: Tuple[LoopbackIndex, LoopbackIndex, Path], obliteratus_git_repo: Path, tmp_path: Path) -> None:
    vendor, public, vendor_dir = board_indexes
    cli_env = catalog_env(tmp_path, vendor_dir)
    output = tmp_path / "board.lock"
    result = jetson_install(cli_env, *lock_argv(vendor.url, public.url, obliteratus_git_repo, output, "--ref", "v0.1.3",
                                               "--json"))
    assert result.returncode == 0, result.stderr
    text = output.read_text()
    lock = parse_lock(text, str(output))
    assert (lock.channel, lock.python, lock.arch, lock.platform) == ("jp6-cu126", "3.10", "aarch64",
                                                                     "aarch64-manylinux_2_35")
    commit = subprocess.run(["git", "-C", str(obliteratus_git_repo), "rev-parse", "v0.1.3^{commit}"],
                            capture_output=True, text=True).stdout.strip()
    assert lock.source_commit == commit and f"# source-commit: {commit}" in text
    files = {entry.name: entry for entry in lock.entries}
    assert files["torch"].filename.endswith("-cp310-cp310-linux_aarch64.whl")
    assert files["torch"].url.startswith(vendor.base_url) and files["torch"].origin == "vendor"
    assert files["psutil"].filename.endswith("-manylinux_2_35_aarch64.whl")  # not the glibc 2.39 build
    assert files["obliteratus"].origin == "built" and files["obliteratus"].filename.endswith("-py3-none-any.whl")
    assert Path(json.loads(result.stdout)["wheel"]).parent == tmp_path
    # the vendor index supplied the vendor set and nothing else; its bait is in no line
    assert {name for name, entry in files.items() if entry.origin == "vendor"} == set(VENDOR_PINS)
    assert all(entry.url.startswith(public.base_url) for entry in files.values() if entry.origin == "default")
    assert files["numpy"].version != "99.0" and files["filelock"].version != "99.0"
    assert set(vendor.requested_projects()) <= set(VENDOR_PINS)
    requirement_lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert requirement_lines and all(re.search(r" --hash=sha256:[0-9a-f]{64}$", line) for line in requirement_lines)
    assert len(requirement_lines) == len(lock.entries)


@pytest.mark.slow
def test_a_lock_for_the_board_is_refused_here_in_one_line(board_indexes: Tuple[LoopbackIndex, LoopbackIndex, Path], obliteratus_source: Path,
                                                          tmp_path: Path) -> None:
    vendor, public, vendor_dir = board_indexes
    cli_env = catalog_env(tmp_path, vendor_dir)
    output = tmp_path / "board.lock"
    assert jetson_install(cli_env, *lock_argv(vendor.url, public.url, obliteratus_source, output)).returncode == 0
    vendor.clear_requests()
    result = jetson_install(cli_env, "obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"),
                            "--python", sys.executable, "--lock", str(output), "--yes")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[0] == (f"error: --lock {output}: the lock was made for architecture aarch64, "
                                             f"and this install is for {os.uname().machine}")
    assert not (tmp_path / "env").exists() and vendor.requests == []


HERE = "%d.%d" % sys.version_info[:2]


@needs_obliteratus_python
@pytest.mark.skipif(os.uname().machine == "aarch64", reason="needs a machine of another architecture than the board's")
def test_a_lock_for_an_interpreter_of_another_architecture_is_refused_and_its_fix_locks_for_the_board(
        board_indexes: Tuple[LoopbackIndex, LoopbackIndex, Path], obliteratus_source: Path, tmp_path: Path) -> None:
    vendor, public, vendor_dir = board_indexes
    cli_env = catalog_env(tmp_path, vendor_dir)
    output = tmp_path / "board.lock"
    argv = lock_argv(vendor.url, public.url, obliteratus_source, output)
    refused = jetson_install(cli_env, *argv, "--python", sys.executable)
    assert refused.returncode == 2, refused.stderr
    here = os.uname().machine
    assert refused.stderr.splitlines() == [
        f"error: --python {sys.executable} is this machine's {here} interpreter, and --root {SAMPLE} is an aarch64 "
        f"board: the lock would take the board's aarch64 vendor wheels and {here} wheels for the rest, and install "
        "nowhere",
        f"  fix: lock for the board's platform with that Python: jetson-install {' '.join(argv)} --python-version {HERE}"]
    assert not output.exists()
    # The fix as printed: a lock of the board's platform for this Python, and how the board installs it.
    fixed = jetson_install(cli_env, *shlex.split(refused.stderr.splitlines()[1].split("Python: ", 1)[1])[1:])
    assert fixed.returncode == 0, fixed.stderr
    lock = parse_lock(output.read_text(), str(output))
    assert (lock.python, lock.arch, lock.platform) == (HERE, "aarch64", "aarch64-manylinux_2_35")
    files = {entry.name: entry.filename for entry in lock.entries}
    assert files["psutil"].endswith("-manylinux_2_35_aarch64.whl")
    python = "" if HERE == "3.10" else f" --python /usr/bin/python{HERE}"  # a Python that is not the channel's
    assert f"  install: jetson-install obliteratus --lock {output}{python}" in fixed.stderr.splitlines()


@pytest.mark.parametrize(("extra", "line"), [
    (("--python", sys.executable, "--python-version", "3.10"),
     "error: --python and --python-version were both given: a lock is for an interpreter here, or for the board's "
     "platform with a Python version"),
    (("--python-version", "3"), "error: --python-version 3: not a Python version as MAJOR.MINOR"),
])
def test_lock_python_options_that_cannot_be_met_are_one_line(cli_env: Dict[str, str], extra: Tuple[str, ...], line: str,
                                                            tmp_path: Path) -> None:
    result = jetson_install(cli_env, "lock", "--root", SAMPLE, "--output", str(tmp_path / "x.lock"), *extra)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == line and len(result.stderr.splitlines()) == 2


def test_a_lock_of_another_python_is_refused(cli_env: Dict[str, str], tmp_path: Path) -> None:
    here = ".".join(map(str, sys.version_info[:2]))
    other = "3.12" if here == "3.10" else "3.10"  # the channel's Python, unless the tests run on it
    lock = Lock("jp6-cu126", other, os.uname().machine, "native", "obliteratus @ file:///src", None, "0", ())
    path = tmp_path / "other-python.lock"
    path.write_text(render_lock(lock))
    result = jetson_install(cli_env, "obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"),
                            "--python", sys.executable, "--lock", str(path), "--yes")
    assert result.returncode == 2, result.stderr
    assert f"the lock was made for Python {other}, and this install is for {here}" in result.stderr.splitlines()[0]
    # The fix is the user's own command: a lock with their --root and --python, then the install from it.
    assert (f"fix: make a lock for this board and interpreter: jetson-install lock --root {SAMPLE} --python "
            f"{sys.executable} --output FILE, then run: jetson-install obliteratus --root {SAMPLE} --venv "
            f"{tmp_path / 'env'} --python {sys.executable} --yes --lock FILE") in result.stderr


@pytest.mark.parametrize(("kind", "given", "why", "build", "name"), [
    ("folder", "./addon", "a project folder is built on each board from whatever its own copy holds",
     "build its wheel (uv build --wheel {addon})", "addon"),
    ("git", "git+https://s3cr3t@git.example.com/me/addon@v1",
     "a git repository is built on each board from source, with no sha256 to pin",
     "build its wheel from a checkout (uv build --wheel CHECKOUT)", "NAME"),
    ("url", "addon @ https://me:s3cr3t@files.example.com/addon-0.1-py3-none-any.whl",
     "a URL is not looked up in the default index, where a lock takes --with by name", "take that file", "addon"),
])
def test_lock_with_what_no_index_lists_is_one_line_before_any_index_is_read_with_the_two_ways_that_work(
        cli_env: Dict[str, str], tmp_path: Path, kind: str, given: str, why: str, build: str, name: str) -> None:
    """`lock --with` a folder, a git URL or another URL failed after both resolutions, as "no file
    of addon None installs on the board's platform": refused first, naming it (its token
    masked), why a lock cannot hold it, and the lock by name once it is published, or the
    install without a lock on each board (planned here as printed)."""
    addon = tmp_path / "addon"
    addon.mkdir()
    (addon / "pyproject.toml").write_text('[project]\nname = "addon"\nversion = "0.1"\n')
    dead, output = _dead_url(), tmp_path / "torch.lock"  # an index read would fail otherwise
    result = run_cli("lock", "torch", "--root", SAMPLE, "--vendor-index", dead, "--default-index", dead, "--with", "transformers", "--with",
                     given, "--output", str(output), env=cli_env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "s3cr3t" not in result.stdout + result.stderr and not output.exists()
    shown = given.replace("s3cr3t", "****")
    on_board = shlex.quote(str(addon) if kind == "folder" else given).replace("s3cr3t", "****")
    assert result.stderr.splitlines() == [
        f"error: --with {shown}: a lock holds only files an index lists, each pinned by its sha256 so that every "
        f"board installs the same, and {why}",
        f"  fix: {build.format(addon=addon)} and publish it to the index the lock resolves names from "
        f"(--default-index), then: jetson-install lock torch --root {SAMPLE} --vendor-index {dead} --default-index {dead} "
        f"--output {output} "
        f"--with transformers --with {name}; or install it on each board without a lock: jetson-install torch "
        f"--vendor-index {dead} --default-index {dead} --with transformers --with {on_board}"]
    if kind == "folder":
        command = shlex.split(result.stderr.rsplit("without a lock: ", 1)[1])
        planned = run_cli("plan", *command[1:], "--root", SAMPLE, "--json", env=cli_env, cwd=tmp_path)
        assert planned.returncode == 0, planned.stderr
        assert json.loads(planned.stdout)["additions"] == ["transformers", str(addon)]


@pytest.mark.parametrize("option", ["--lock", "--wheelhouse"])
def test_an_install_with_a_lock_and_a_folder_is_told_to_install_it_without_a_lock_not_to_lock_it(
        cli_env: Dict[str, str], tmp_path: Path, option: str) -> None:
    """Its fix was `lock ... --with FOLDER`, which a lock refuses: it is the install without one."""
    addon = tmp_path / "addon"
    addon.mkdir()
    (addon / "pyproject.toml").write_text('[project]\nname = "addon"\nversion = "0.1"\n')
    venv = tmp_path / "stack"
    result = run_cli("torch", "--root", SAMPLE, "--venv", str(venv), option, str(tmp_path / "board.lock"),
                     "--with", "./addon", "--yes", env=cli_env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: --with and {option} were both given: a lock installs exactly its files, so --with would add nothing",
        "  fix: --with ./addon: a lock holds only files an index lists, each pinned by its sha256 so that every board "
        "installs the same, and a project folder is built on each board from whatever its own copy holds; install it "
        f"without a lock: jetson-install torch --root {SAMPLE} --venv {venv} --with ./addon --yes"]
    command = shlex.split(result.stderr.rsplit("without a lock: ", 1)[1])
    planned = run_cli("plan", *[word for word in command[1:] if word != "--yes"], "--json", env=cli_env, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["additions"] == [str(addon)]


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple/"  # nothing listens there


@pytest.mark.slow
def test_a_lock_for_this_machine_installs_offline_from_its_wheelhouse(
        cli_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_source: Path, tmp_path: Path) -> None:
    output = tmp_path / "here.lock"
    made = jetson_install(cli_env, *lock_argv(vendor_index.url, public_index.url, obliteratus_source, output,
                                              "--python", sys.executable, root=board_here))
    assert made.returncode == 0, made.stderr
    house = tmp_path / "wheelhouse"
    filled = jetson_install(cli_env, "wheelhouse", str(house), "--lock", str(output), "--json")
    assert filled.returncode == 0, filled.stderr
    lock = parse_lock(output.read_text(), "lock")
    assert sorted(p.name for p in (house / "files").iterdir()) == sorted(e.filename for e in lock.entries)
    torch_page = (house / "simple" / "torch" / "index.html").read_text()
    assert "#sha256=" in torch_page and "../../files/torch-" in torch_page
    vendor_index.stop()
    public_index.stop()
    dead = _dead_url()
    venv = tmp_path / "env"
    argv = ["obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable, "--vendor-index", dead,
            "--default-index", dead, "--wheelhouse", str(house), "--no-verify", "--yes", "--json"]
    result = jetson_install(cli_env, *argv)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert_ran_as_planned(data)
    assert [s["id"] for s in data["steps"]] == ["interpreter", "environment", "fetch", "lock", "protect", "check", "verify",
                                                "switch"]
    assert data["lock"]["file"] == f"{house.as_uri()}/lock.txt"
    # The lock's hashes decide which wheel: its vendor files are read where the wheelhouse holds them.
    for entry in lock.entries:
        if entry.origin == "vendor":
            assert_measured_from(venv, entry.name, house / "files" / entry.filename)
    assert data["installed"]["torch"].startswith("2.5.0a0")
    rerun = jetson_install(cli_env, *argv)
    assert rerun.returncode == 0 and json.loads(rerun.stdout)["status"] == "unchanged", rerun.stderr
    recorded = venv / "jetson-install" / "lock.txt"
    assert parse_lock(recorded.read_text(), "recorded").entries[0].url.startswith(house.as_uri())
    if os.geteuid() == 0 and shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"]).returncode == 0:
        again = subprocess.run(["unshare", "-n", sys.executable, "-m", "jetson_install",
                                *[a if a != str(venv) else str(tmp_path / "env2") for a in argv]],
                               capture_output=True, text=True, env=cli_env, timeout=300)
        assert again.returncode == 0, again.stderr


def _commit(repo: Path, message: str) -> None:
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.invalid", *args],
                       check=True, capture_output=True)


def _built(lock_path: Path) -> Path:
    """The built wheel a lock names, beside it, checked to hold the bytes the lock's sha256 says."""
    import hashlib

    [built] = [entry for entry in parse_lock(lock_path.read_text(), str(lock_path)).entries if entry.origin == "built"]
    wheel = lock_path.parent / built.filename
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == built.sha256, f"{wheel.name} is not {lock_path.name}'s"
    return wheel


@pytest.mark.slow
def test_a_lock_made_again_for_another_commit_keeps_one_wheel_of_its_own_and_a_sibling_locks(
        cli_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_git_repo: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(obliteratus_git_repo, source, symlinks=True)
    out = tmp_path / "locks"
    out.mkdir()
    (out / "obliteratus-0.1.0-py3-none-any.whl").write_bytes(b"the user's own file")
    for name in ("orin.lock", "thor.lock"):
        made = jetson_install(cli_env, *lock_argv(vendor_index.url, public_index.url, source, out / name,
                                                  "--python", sys.executable, root=board_here))
        assert made.returncode == 0, made.stderr
    first = _built(out / "thor.lock")
    assert re.fullmatch(r"obliteratus-0\.1\.3-0[0-9a-f]{16}-py3-none-any\.whl", first.name), first.name
    # What a killed lock left (its pid is gone): the lock's text and a wheel, neither yet renamed.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (out / f".orin.lock.{gone}.k2j3h4.tmp").write_text("half a lock")
    (out / f".{first.name}.{gone}.part").write_bytes(b"half a wheel")
    # Named by a live pid: a killed container's lock was pid 1 (as a later one is), and its pid
    # names another process here. No live lock's file is there while this lock holds the folder.
    (out / ".orin.lock.1.a7b8c9.tmp").write_text("half a lock")
    (out / f".{first.name}.{os.getpid()}.part").write_bytes(b"half a wheel")
    # The user's own files of the same look are not the lock's: kept, whatever their form.
    (out / ".thesis.pdf.part").write_text("a download of the user's")
    (out / ".mydir.part").mkdir()
    (out / ".mydir.part" / "notes").write_text("kept")
    (out / f".notes.txt.{gone}.part").write_text("not a wheel the lock writes")
    (source / "obliteratus" / "extra.py").write_text("X = 1\n")
    _commit(source, "another commit")
    again = jetson_install(cli_env, *lock_argv(vendor_index.url, public_index.url, source, out / "orin.lock",
                                               "--python", sys.executable, root=board_here))
    assert again.returncode == 0, again.stderr
    orin, thor = _built(out / "orin.lock"), _built(out / "thor.lock")
    assert orin != thor and thor == first  # the other lock's wheel stays; each lock names its own bytes
    users = [".thesis.pdf.part", ".mydir.part", f".notes.txt.{gone}.part"]
    assert sorted(path.name for path in out.iterdir()) == sorted(
        ["orin.lock", "thor.lock", orin.name, thor.name, "obliteratus-0.1.0-py3-none-any.whl", *users])
    assert (out / ".mydir.part" / "notes").read_text() == "kept"
    (out / "thor.lock").unlink()
    once_more = jetson_install(cli_env, *lock_argv(vendor_index.url, public_index.url, source, out / "orin.lock",
                                                   "--python", sys.executable, root=board_here))
    assert once_more.returncode == 0, once_more.stderr
    assert sorted(path.name for path in out.iterdir()) == sorted(
        ["orin.lock", orin.name, "obliteratus-0.1.0-py3-none-any.whl", *users])  # thor's build, named by no lock, went


@pytest.mark.slow
def test_a_lock_keeps_the_part_file_of_a_lock_that_holds_the_folder_though_its_pid_names_no_process_here(
        cli_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path,
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    # Another lock writing into the same folder from another pid namespace (a container sharing
    # it): its pid names no process here, and it holds the folder's flock while its file exists.
    import fcntl
    import threading

    out = tmp_path / "locks"
    out.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    theirs = out / f".obliteratus-0.1.3-0{'a' * 16}-py3-none-any.whl.{gone}.part"
    held = os.open(out, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    theirs.write_bytes(b"a wheel another lock is writing")
    made: List[CliResult] = []
    running = threading.Thread(target=lambda: made.append(jetson_install(
        cli_env, *lock_argv(vendor_index.url, public_index.url, obliteratus_git_repo, out / "orin.lock",
                            "--python", sys.executable, root=board_here))))
    running.start()
    try:
        # This lock waits for the folder (/proc/locks lists a waiter, "->", on its inode).
        waiting = f":{out.stat().st_ino} "
        assert wait_until(lambda: any("->" in line and waiting in line
                                      for line in Path("/proc/locks").read_text().splitlines()), 120), \
            made[0].stderr if made else "the lock never came to the folder"
        assert theirs.read_bytes() == b"a wheel another lock is writing"
        theirs.unlink()  # the other lock renames its wheel into place and lets the folder go
    finally:
        os.close(held)
        running.join(timeout=120)
    assert made and made[0].returncode == 0, made[0].stderr if made else "the lock did not end"
    assert sorted(path.name for path in out.iterdir() if path.name.startswith(".")) == []


@pytest.mark.slow
def test_two_locks_of_two_commits_made_at_once_in_one_folder_each_keep_their_wheel(
        cli_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_git_repo: Path, tmp_path: Path) -> None:
    sources = [tmp_path / "orin-source", tmp_path / "thor-source"]
    for number, source in enumerate(sources):
        shutil.copytree(obliteratus_git_repo, source, symlinks=True)
        (source / "obliteratus" / "extra.py").write_text(f"X = {number}\n")
        _commit(source, f"commit {number}")
    out = tmp_path / "locks"
    for _ in range(3):
        runs = [subprocess.Popen([sys.executable, "-m", "jetson_install",
                                  *lock_argv(vendor_index.url, public_index.url, source, out / f"{source.name}.lock",
                                             "--python", sys.executable, root=board_here)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env)
                for source in sources]
        for run in runs:
            assert run.wait(timeout=300) == 0, run.stderr.read() if run.stderr else ""
        wheels = {_built(out / f"{source.name}.lock").name for source in sources}
        assert len(wheels) == 2 and sorted(path.name for path in out.iterdir()) == sorted(
            [f"{source.name}.lock" for source in sources] + list(wheels))


@needs_obliteratus_python
def test_lock_torch_with_an_addition_then_install_from_the_lock_here(
        cli_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, tmp_path: Path) -> None:
    """`lock torch --with` to `torch --lock`, end to end: the stack and the addition, each by
    its hash, with no index read by the install; `add` then refuses a lock's environment."""
    output = tmp_path / "torch.lock"
    made = jetson_install(cli_env, "lock", "torch", "--root", str(board_here), "--vendor-index", vendor_index.url,
                          "--default-index", public_index.url, "--with", "transformers", "--python", sys.executable,
                          "--output", str(output))
    assert made.returncode == 0, made.stderr
    assert output.read_text().splitlines()[0].endswith("install with `jetson-install torch --lock FILE`")
    assert "install: jetson-install torch --lock " in made.stderr
    lock = parse_lock(output.read_text(), "lock")
    assert lock.target == "torch" and {"torch", "transformers"} <= {entry.name for entry in lock.entries}
    assert "obliteratus" not in {entry.name for entry in lock.entries}
    dead = _dead_url()  # the lock names every file: an index the install asked would fail it
    venv = tmp_path / "stack"
    result = jetson_install(cli_env, "torch", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                            "--vendor-index", dead, "--default-index", dead, "--lock", str(output), "--no-verify",
                            "--yes", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert_ran_as_planned(data)
    assert data["command"] == "torch" and data["route"] == "lock"
    assert data["installed"]["torch"] == VENDOR_PINS["torch"] and data["installed"]["transformers"] == "4.46.0"
    # An obliteratus install refuses the torch lock, in one line.
    other = jetson_install(cli_env, "obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "obl"), "--python",
                           sys.executable, "--lock", str(output), "--yes")
    assert other.returncode == 2 and "the lock was made by `jetson-install lock torch`" in other.stderr
    # --with beside a lock would add nothing: refused, with the commands that lock it and install that.
    beside = jetson_install(cli_env, "torch", "--root", SAMPLE, "--venv", str(venv), "--lock", str(output),
                            "--with", "accelerate", "--yes")
    assert beside.returncode == 2
    assert beside.stderr.splitlines() == [
        "error: --with and --lock were both given: a lock installs exactly its files, so --with would add nothing",
        f"  fix: lock the additions with the rest, then install that lock: jetson-install lock torch --root {SAMPLE} "
        f"--with accelerate --output new.lock && jetson-install torch --root {SAMPLE} --venv {venv} --yes "
        "--lock new.lock"]
    added = jetson_install(cli_env, "add", "--venv", str(venv), "accelerate")
    assert added.returncode == 2
    assert f"error: {venv} was installed from a lock" in added.stderr


def test_the_lock_format_reads_back_what_it_wrote() -> None:
    entry = Locked("torch", "2.5.0", "http://127.0.0.1/files/torch-2.5.0-cp310-cp310-linux_aarch64.whl", "a" * 64,
                   "vendor")
    lock = Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "obliteratus @ git+x@v1", "c0ffee", "1.0",
                (entry,), ("torch-2.5.0-cp310-cp310-linux_aarch64.whl from MIRROR is not a build wheels-index.toml lists",))
    assert parse_lock(render_lock(lock), "x") == lock
    accepted = [str(tag) for tag in wheel_tags("3.10", "aarch64", "2.35")]
    assert "cp310-cp310-manylinux_2_35_aarch64" in accepted and "cp310-cp310-linux_aarch64" in accepted
    assert not any(tag.endswith(("manylinux_2_39_aarch64", "x86_64")) for tag in accepted)


# OBLITERATUS 0.1.2's dependencies as its pyproject.toml declares them (0.1.3 moved
# bitsandbytes into its `quantization` extra): https://github.com/elder-plinius/OBLITERATUS
OBLITERATUS_0_1_2 = ("torch>=2.0", "transformers>=4.40", "datasets>=2.14", "accelerate>=0.24", "safetensors>=0.4",
                     "pyyaml>=6.0", "rich>=13.0", "matplotlib>=3.7", "seaborn>=0.12", "pandas>=2.0", "numpy>=1.24",
                     "scikit-learn>=1.3", "tqdm>=4.64", "bitsandbytes>=0.46.1")


@pytest.mark.lane
def test_registry_lane_locks_obliteratus_0_1_2_for_the_board(board_indexes: Tuple[LoopbackIndex, LoopbackIndex, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The real dependency list, resolved for aarch64/Python 3.10 against the real default index
    (uv's own), with the stub vendor set: which packages the board would build from source."""
    from support.stub_projects import make_obliteratus_source

    vendor, _, vendor_dir = board_indexes
    env = catalog_env(tmp_path, vendor_dir)
    # This lane alone may reach the registry: the machine's own proxy settings, not the dead one.
    for variable in PROXY_VARIABLES:
        env.pop(variable, None)
        if variable in os.environ:
            env[variable] = os.environ[variable]
    source = make_obliteratus_source(tmp_path / "OBLITERATUS", "0.1.2", dependencies=OBLITERATUS_0_1_2, extras={})
    output = tmp_path / "registry.lock"
    result = jetson_install(env, "lock", "--root", SAMPLE, "--vendor-index", vendor.url, "--source", str(source),
                            "--output", str(output), "--json")
    if result.returncode != 0 and ("did not answer" in result.stderr or "Failed to fetch" in result.stderr
                                   or "dns error" in result.stderr):
        lane_unavailable("registry", f"the default index did not answer: {result.stderr.splitlines()[0]}")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    lock = parse_lock(output.read_text(), str(output))
    files = {entry.name: entry for entry in lock.entries}
    assert {name for name, entry in files.items() if entry.origin == "vendor"} == set(VENDOR_PINS)
    assert {"transformers", "accelerate", "scikit-learn", "pandas", "matplotlib", "numpy"} <= set(files)
    assert files["numpy"].version.startswith("1.")  # the vendor builds' numpy<2
    accepted = [str(tag) for tag in wheel_tags("3.10", "aarch64", "2.35")]
    for entry in lock.entries:
        if entry.origin == "default" and not entry.sdist:
            from packaging.utils import parse_wheel_filename

            assert any(str(tag) in accepted for tag in parse_wheel_filename(entry.filename)[3]), entry.filename
    with capsys.disabled():
        print(f"\nregistry lane: {len(lock.entries)} files locked for aarch64/Python 3.10; built from source on "
              f"the board: {', '.join(data['built_from_source_on_the_board']) or 'none'}")


def test_a_tool_wheel_that_is_not_jetson_installs_is_one_line(tmp_path: Path) -> None:
    from jetson_install.catalog.lock_file import Lock, render_lock
    from jetson_install.base.tags import platform_glibc

    assert platform_glibc("aarch64-manylinux_2_35") == "2.35" and platform_glibc("native") is None
    lock = tmp_path / "board.lock"
    lock.write_text(render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "obliteratus", None,
                                     "0.1.0", ())))
    other = tmp_path / "requests-2.0-py3-none-any.whl"
    other.write_bytes(b"")
    for wheel, said in ((other, f"error: --tool-wheel {other} is requests, not jetson-install"),
                        (tmp_path / "tool.zip", f"error: --tool-wheel {tmp_path / 'tool.zip'}: not a wheel file name"),
                        (tmp_path / "jetson_install-0.1.0-py3-none-any.whl",
                         f"error: --tool-wheel {tmp_path / 'jetson_install-0.1.0-py3-none-any.whl'}: no such file")):
        result = subprocess.run([sys.executable, "-m", "jetson_install", "wheelhouse", str(tmp_path / "house"),
                                 "--lock", str(lock), "--tool-wheel", str(wheel)], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 2 and result.stderr.splitlines()[0] == said, result.stderr
        assert not (tmp_path / "house").exists()


def test_where_a_folder_cannot_be_flocked_as_on_nfs_the_output_folder_is_held_by_a_hidden_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock written into a folder on an NFS home: Linux's NFS client refuses an exclusive flock
    on a folder (EBADF, flock(2) "NFS details"), where every lock failed on that error."""
    import errno
    import fcntl
    import stat

    from jetson_install.fleet.lock import _folder_held

    real = fcntl.flock

    def as_nfs_gives_it(descriptor: int, operation: int) -> None:
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        real(descriptor, operation)

    monkeypatch.setattr(fcntl, "flock", as_nfs_gives_it)
    with _folder_held(tmp_path):
        [held] = [path for path in tmp_path.iterdir()]
        assert held.name.startswith(".") and stat.S_ISREG(held.lstat().st_mode)
        other = os.open(held, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # another lock in the same folder waits
                real(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(held, os.O_RDWR)
    try:
        real(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # let go at the end
    finally:
        os.close(other)


def test_when_the_default_index_fails_the_fix_runs_the_lock_again(
        cli_env: Dict[str, str], vendor_index: LoopbackIndex, tmp_path: Path) -> None:
    """The lock's own words (inspect, which resolves the same way, names itself: test_inspect.py)."""
    dead = _dead_url()
    output = tmp_path / "torch.lock"
    result = jetson_install(cli_env, "lock", "torch", "--root", SAMPLE, "--vendor-index", vendor_index.url,
                            "--default-index", dead, "--output", str(output))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert lines[-2].startswith(f"error: resolving from the default index ({dead}) failed: "), result.stderr
    assert lines[-1] == f"  fix: check that {dead} answers and carries what the message names, then run the lock again"
    assert not output.exists()


def test_when_the_default_index_fails_the_tool_wheels_resolution_runs_the_wheelhouse_again(tmp_path: Path) -> None:
    lock = tmp_path / "board.lock"
    lock.write_text(render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "obliteratus", None,
                                     "0.1.0", ())))
    tool = build_wheel(tmp_path / "tool", "jetson-install", "0.1.0", requires=["packaging"])
    dead = _dead_url()
    argv = ["wheelhouse", str(tmp_path / "house"), "--lock", str(lock), "--tool-wheel", str(tool), "--default-index", dead]
    result = run_cli(*argv, env=isolated_env(tmp_path, fast_fail=True))
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == (f"  fix: check that {dead} answers and carries what the message names, "
                                              f"then run it again: jetson-install {shlex.join(argv)}")
