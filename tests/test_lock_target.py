"""`jetson-install lock`'s target, checked out and built on a thread of its own while the vendor
index is read and the rest resolved (fleet/target_build.py): an interruption or the vendor
index's failure ends the git or uv that thread started, the lock says the error it would have
said step by step, and the rest is resolved from the checkout, leaving nothing in uv's cache.

A `git` first on PATH that waits at `clone` holds the thread there, in a known state."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from support.index_server import LoopbackIndex
from support.interrupts import alive, wait_until
from support.stub_projects import IndexDirs
from test_lock import catalog_env

from jetson_install.catalog.lock_file import parse_lock

SAMPLE = "sample:agx-orin-64gb-jp6.2"


def _lock_argv(vendor_url: str, public_url: str, repository: Path, output: Path) -> List[str]:
    return [sys.executable, "-m", "jetson_install", "lock", "--root", SAMPLE, "--vendor-index", vendor_url,
            "--default-index", public_url, "--source", repository.as_uri(), "--ref", "v0.1.3", "--output", str(output)]


def _git_that_waits_at_clone(tmp_path: Path, env: Dict[str, str]) -> Path:
    """`git clone` writes its pid to the file returned and waits; every other git command is git's."""
    started = tmp_path / "clone-started"
    folder = tmp_path / "fake-git"
    folder.mkdir()
    fake = folder / "git"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = clone ]; then echo $$ > {started}; exec sleep 600; fi\n'
                    f'exec {shutil.which("git")} "$@"\n')
    fake.chmod(0o755)
    env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
    return started


def _wait_for(path: Path, process: "subprocess.Popen[str]") -> int:
    """The pid `path` holds, once the waiting clone has written it."""
    assert wait_until(lambda: process.poll() is not None or (path.is_file() and path.read_text().strip() != ""), 60)
    assert process.poll() is None, process.communicate()
    return int(path.read_text())


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
    clone = _wait_for(started, process)
    os.kill(process.pid, getattr(signal, stop))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    how = "Ctrl-C" if stop == "SIGINT" else stop
    assert stderr.splitlines()[-2:][0] == f"error: interrupted ({how})" and "Traceback" not in stderr, stderr
    assert wait_until(lambda: not alive(clone), 10), "the clone the lock's thread started outlived it"
    assert output.read_text() == "the previous lock\n"
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".board.lock")) == []
    assert list(Path(env["TMPDIR"]).glob("jetson-install-lock-*")) == []  # its work folder


def test_a_vendor_index_that_does_not_answer_ends_the_clone_and_is_the_error_said(
        stub_index_dirs: IndexDirs, public_index: LoopbackIndex, obliteratus_git_repo: Path, tmp_path: Path) -> None:
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    started = _git_that_waits_at_clone(tmp_path, env)
    gone = LoopbackIndex(stub_index_dirs.vendor, name="gone").start()
    gone_url = gone.url
    gone.stop()  # nothing listens at its port now
    output = tmp_path / "board.lock"
    process = subprocess.Popen(_lock_argv(gone_url, public_index.url, obliteratus_git_repo, output),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    [error, fix] = stderr.splitlines()[:2]
    assert error.startswith("error: ") and gone_url.split("/simple")[0] in error and "clone" not in error, stderr
    assert fix.startswith("  fix: "), stderr
    if started.is_file():  # the clone had started: it was ended with the lock
        assert wait_until(lambda: not alive(int(started.read_text())), 10)
    assert not output.exists()
    assert list(Path(env["TMPDIR"]).glob("jetson-install-lock-*")) == []


def _cache_files(env: Dict[str, str]) -> List[str]:
    cache = Path(env["UV_CACHE_DIR"])
    return sorted(str(path.relative_to(cache)) for path in cache.rglob("*"))


@pytest.mark.slow  # three locks
def test_the_rest_is_resolved_from_the_checkout_leaving_nothing_in_uvs_cache_and_a_dynamic_project_from_its_wheel(
        stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], obliteratus_git_repo: Path,
        tmp_path: Path) -> None:
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    # Files a client may keep, as a real index's: uv fetches the vendor files by URL once.
    vendor_index = start_index(stub_index_dirs.vendor, name="vendor", cache_files=True)
    public_index = start_index(stub_index_dirs.public, name="public", cache_files=True)
    first, second = tmp_path / "first.lock", tmp_path / "second.lock"
    for output in (first, second):
        done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, obliteratus_git_repo, output),
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        if output == first:
            cache = _cache_files(env)
    # uv read the checkout's pyproject.toml: no copy of the target, at a path of this run's own,
    # is kept in uv's cache by each lock (it was, unpacked, while uv read the built wheel).
    assert _cache_files(env) == cache
    assert first.read_text() == second.read_text()
    # A project whose version its build backend decides: uv would build it to learn it, in the
    # checkout the wheel is built in, so the rest is resolved from the built wheel: the same lock.
    dynamic = tmp_path / "dynamic"
    shutil.copytree(obliteratus_git_repo, dynamic, symlinks=True)
    pyproject = dynamic / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.3"', 'dynamic = ["version"]'))
    for command in (["add", "-A"], ["commit", "-q", "-m", "dynamic version"], ["tag", "-f", "v0.1.3"]):
        subprocess.run(["git", "-C", str(dynamic), "-c", "user.name=test", "-c", "user.email=test@example.invalid",
                        *command], check=True, capture_output=True)
    third = tmp_path / "third.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, dynamic, third), capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr

    def entries(path: Path) -> List[object]:
        return [(entry.name, entry.version, entry.url, entry.sha256) for entry in parse_lock(path.read_text(), str(path)).entries
                if entry.origin != "built"]

    assert entries(third) == entries(first)
    [built] = [entry for entry in parse_lock(third.read_text(), str(third)).entries if entry.origin == "built"]
    assert (built.name, built.version) == ("obliteratus", "0.1.3")
