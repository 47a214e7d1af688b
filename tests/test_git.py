"""git through one module: a URL's token reaches the server, never git's command line or the log."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Iterator, Tuple

import pytest
from support.git_server import GitServer, bare_repository

from jetson_install.tools import git
from jetson_install.envs.source_identity import SourceIdentity

TOKEN = "ghp-s3cret-token"


def run_git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repository(tmp_path: Path) -> Tuple[Path, str]:
    """A bare repository with one tagged commit, ready for git's dumb http protocol; and the tag's commit."""
    work = tmp_path / "work"
    work.mkdir()
    run_git("-C", str(work), "init", "--quiet", "--initial-branch=main")
    (work / "README").write_text("hello\n")
    run_git("-C", str(work), "add", "README")
    run_git("-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "-m", "one")
    run_git("-C", str(work), "tag", "v1")
    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repository(work, served / "repo.git")
    return bare, run_git("-C", str(work), "rev-parse", "v1")


@pytest.fixture
def server(repository: Tuple[Path, str]) -> Iterator[str]:
    """The repository over http, answering only the token, as a user:token or a lone token."""
    with GitServer(repository[0].parent, {"repo.git": (f"user:{TOKEN}", TOKEN)}) as served:
        yield served.url("repo.git")


@pytest.mark.parametrize("userinfo", [f"user:{TOKEN}", TOKEN])
def test_a_token_in_the_url_clones_and_stays_off_the_command_line_and_the_log(
        server: str, repository: Tuple[Path, str], tmp_path: Path, caplog: pytest.LogCaptureFixture,
        userinfo: str) -> None:
    caplog.set_level(logging.DEBUG, logger="jetson_install")
    url = server.replace("http://", f"http://{userinfo}@")
    destination = tmp_path / "clone"
    cloned = git.clone(url, destination, timeout=60)
    assert cloned.ok, cloned.stderr
    assert (destination / "README").read_text() == "hello\n"
    assert git.head_commit(destination) == repository[1]
    assert TOKEN not in " ".join(cloned.argv) and server in cloned.argv
    assert caplog.records and not any(TOKEN in record.getMessage() for record in caplog.records)
    assert TOKEN not in (destination / ".git" / "config").read_text()  # the remote is the bare URL


def test_a_branch_or_tag_is_found_with_the_token_kept_out_of_git_ls_remotes_argv(
        server: str, repository: Tuple[Path, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="jetson_install")
    identity = SourceIdentity("git+" + server.replace("http://", f"http://user:{TOKEN}@") + "@v1").current()
    assert identity == {"kind": "tag", "commit": repository[1]}
    assert any("ls-remote" in record.getMessage() for record in caplog.records)
    assert not any(TOKEN in record.getMessage() for record in caplog.records)


def test_without_the_token_git_fails_at_once_instead_of_asking(server: str, tmp_path: Path) -> None:
    cloned = git.clone(server, tmp_path / "clone", timeout=60)
    assert not cloned.ok and not cloned.timed_out
    assert git.remote_refs(server.replace("http://", "http://user:wrong@"), "v1") is None


def test_a_failure_is_said_by_its_cause_not_by_gits_advice_after_it(tmp_path: Path) -> None:
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text("#!/bin/sh\necho \"Warning: Permanently added 'example.invalid' to the list of known hosts.\" >&2\n"
                        "echo 'Permission denied (publickey).' >&2\nexit 255\n")
    fake_ssh.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_SSH_COMMAND", str(fake_ssh))
        cloned = git.clone("ssh://git@example.invalid/team/repo.git", tmp_path / "clone", timeout=60)
    assert "and the repository exists." in cloned.stderr  # git's advice, after a blank line
    assert git.failure(cloned) == "Permission denied (publickey). fatal: Could not read from remote repository."


def test_reading_the_users_checkout_takes_no_lock_a_kill_could_leave(repository: Tuple[Path, str]) -> None:
    """`git status` refreshes a stale index under .git/index.lock unless told not to: a lock
    stopped meanwhile (SIGKILL) would leave that file, and the user's next `git commit` fails."""
    work = repository[0].parent.parent / "work"
    readme = work / "README"
    stat = readme.stat()
    os.utime(readme, (stat.st_atime, stat.st_mtime + 10))  # the index's record of it is stale now
    index = (work / ".git" / "index").stat()
    assert git.changes(work) == ""  # the same content: no change
    assert (work / ".git" / "index").stat().st_ino == index.st_ino, "git status wrote the index (under its lock)"


def test_a_shallow_clone_of_a_tag_is_at_the_tags_commit(repository: Tuple[Path, str], tmp_path: Path) -> None:
    destination = tmp_path / "shallow"
    cloned = git.clone(repository[0].as_uri(), destination, timeout=60, branch="v1", shallow=True)
    assert cloned.ok, cloned.stderr
    assert git.head_commit(destination) == repository[1]
    assert run_git("-C", str(destination), "rev-list", "--count", "HEAD") == "1"
    assert git.head_commit(tmp_path) is None  # not a checkout
