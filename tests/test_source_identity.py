"""A source is known by its content: build outputs and file times never count, edits always do."""

from __future__ import annotations

from typing import Any, Dict
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jetson_install.envs.source_identity import SourceIdentity


def build_outputs(tree: Path) -> None:
    """What building writes into a source tree (setuptools' egg-info, bytecode, build/)."""
    (tree / "obliteratus.egg-info").mkdir(exist_ok=True)
    (tree / "obliteratus.egg-info" / "PKG-INFO").write_text("Name: obliteratus\n")
    (tree / "obliteratus" / "__pycache__").mkdir(exist_ok=True)
    (tree / "obliteratus" / "__pycache__" / "cli.cpython-310.pyc").write_bytes(b"\0")
    (tree / "build" / "lib").mkdir(parents=True, exist_ok=True)
    for path in tree.rglob("*.py"):
        os.utime(path, (1, 1))


def test_a_folder_is_known_by_content_without_build_outputs_or_times(obliteratus_source: Path, tmp_path: Path) -> None:
    tree = tmp_path / "src"
    shutil.copytree(obliteratus_source, tree)
    before = identity(tree)
    assert before["kind"] == "folder"
    build_outputs(tree)
    assert identity(tree) == before
    (tree / "obliteratus" / "cli.py").write_text("changed = True\n")
    assert identity(tree) != before


def test_a_dangling_symlink_or_unreadable_file_does_not_stop_the_digest(obliteratus_source: Path, tmp_path: Path) -> None:
    tree = tmp_path / "src"
    shutil.copytree(obliteratus_source, tree)
    (tree / "obliteratus" / "gone.py").symlink_to(tmp_path / "nowhere")
    first = identity(tree)
    (tmp_path / "nowhere").write_text("X = 1\n")  # what the link points at comes to be
    assert identity(tree) != first


def test_a_link_out_of_the_folder_counts_by_what_the_build_reads_there(obliteratus_source: Path,
                                                                        tmp_path: Path) -> None:
    # uv builds the folder in place, so the wheel holds what a link points at, wherever it is.
    tree, shared = tmp_path / "src", tmp_path / "shared"
    shutil.copytree(obliteratus_source, tree)
    (shared / "presets").mkdir(parents=True)
    (shared / "config.py").write_text("LAYERS = 1\n")
    (shared / "presets" / "small.py").write_text("SIZE = 1\n")
    (tree / "obliteratus" / "config.py").symlink_to(shared / "config.py")
    (tree / "obliteratus" / "presets").symlink_to(shared / "presets")
    first = identity(tree)
    (shared / "config.py").write_text("LAYERS = 2\n")
    second = identity(tree)
    (shared / "presets" / "small.py").write_text("SIZE = 2\n")
    assert len({str(first), str(second), str(identity(tree))}) == 3


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(obliteratus_git_repo: Path, tmp_path: Path) -> Path:
    tree = tmp_path / "checkout"
    shutil.copytree(obliteratus_git_repo, tree, symlinks=True)
    return tree


def identity(tree: Path) -> Dict[str, Any]:
    return SourceIdentity(tree.as_uri()).current()


def test_a_checkout_is_its_commit_and_its_uncommitted_changes(checkout: Path) -> None:
    clean = identity(checkout)
    assert clean["kind"] == "git-checkout" and clean["commit"] == git(checkout, "rev-parse", "HEAD")
    build_outputs(checkout)
    assert identity(checkout) == clean
    (checkout / "obliteratus" / "cli.py").write_text("edited = True\n")
    edited = identity(checkout)
    assert edited != clean
    (checkout / "obliteratus" / "cli.py").write_text("edited again = True\n")
    assert identity(checkout) != edited
    git(checkout, "checkout", "--", "obliteratus/cli.py")
    assert identity(checkout) == clean
    (checkout / "obliteratus" / "new.py").write_text("X = 1\n")
    assert identity(checkout) != clean


def test_a_branch_is_its_commit_and_a_tag_needs_no_look_up_after_the_first(checkout: Path) -> None:
    branch = SourceIdentity(f"git+{checkout.as_uri()}@main")
    recorded = branch.current()
    assert recorded == {"kind": "branch", "commit": git(checkout, "rev-parse", "main")}
    assert SourceIdentity(f"git+{checkout.as_uri()}@main").unchanged_since(recorded)
    (checkout / "more.txt").write_text("x")
    git(checkout, "add", "more.txt")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@example", "commit", "-q", "-m", "move main")
    assert not SourceIdentity(f"git+{checkout.as_uri()}@main").unchanged_since(recorded)
    tag = SourceIdentity(f"git+{checkout.as_uri()}@v0.1.3").current()
    assert tag["kind"] == "tag"
    offline = SourceIdentity("git+file:///nonexistent/repository@v0.1.3")
    assert offline.unchanged_since(tag)  # a recorded tag is not looked up again
    assert SourceIdentity("git+file:///nonexistent/repository@" + "a" * 40).current() == {"kind": "commit"}
