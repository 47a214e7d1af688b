"""`jetson-install outdated` as a user runs it: for each environment `list` shows, what is newer
than it has (the catalog's preferred vendor set, a newer tag of the source it was installed at a
tag) and a newer jetson-install from where it was installed, each with the command that takes it;
read-only; a remote that does not answer is one line while the rest is still reported; exit codes
as `brew outdated`'s (0 for the whole report; with DIRs named, 1 where one is outdated, else 4
where one could not be compared).

Against loopback indexes and local git repositories; nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from support import VENDOR_PINS, VENDOR_TORCH, isolated_env
from support.catalogs import stub_catalog_text
from support.cli import CliResult, run_cli
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.stub_projects import IndexDirs
from support.wheels import build_wheel

from jetson_install.base.upgrade import Installed

TOP = Path(__file__).resolve().parent.parent
NEWER = {"torch": "2.6.0", "torchvision": "0.21.0", "torchaudio": "2.6.0"}


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _outdated(env: Dict[str, str], *args: str) -> CliResult:
    result = run_cli("outdated", *args, env=env)
    assert "Traceback" not in result.stderr
    return result


def _json(env: Dict[str, str], *args: str) -> Dict[str, Any]:
    result = _outdated(env, "--json", *args)
    data: Dict[str, Any] = json.loads(result.stdout)
    assert data["exit_code"] == result.returncode
    return data


@pytest.fixture
def from_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The running tool as pipx installs it from an index (these tests run it from a checkout)."""
    monkeypatch.setattr("jetson_install.cli.commands.outdated.running_install",
                        lambda: Installed("index", None, "pipx upgrade jetson-install"))


@pytest.mark.slow  # it installs
def test_a_newer_preferred_set_and_a_newer_tag_each_with_its_upgrade(
        installer: Installer, obliteratus_git_repo: Path, stub_index_dirs: IndexDirs, tmp_path: Path,
        from_the_index: None) -> None:
    repository = tmp_path / "repository"
    shutil.copytree(obliteratus_git_repo, repository, symlinks=True)
    args = installer.args()
    args[args.index("--source") + 1] = repository.as_uri()
    installed = run_cli(*args, "--ref", "v0.1.3", env=installer.env)
    assert installed.returncode == 0, installed.stderr
    venv = str(installer.venv)
    env = {**installer.env, "JETSON_INSTALL_DEFAULT_INDEX": "http://127.0.0.1:9/simple"}  # nothing listens there
    home = sorted(os.listdir(venv + ".d"))

    nothing = _outdated(env, venv)
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout == f"{venv} (obliteratus, jp6-cu126): up to date\n"
    # The whole report (no DIR named) says the tool could not be compared, in one line, and exits 0.
    report = _outdated(env)
    assert report.returncode == 0
    assert report.stdout.splitlines()[-1].startswith("jetson-install 0.1.0: not known: http://127.0.0.1:9/simple "
                                                     "could not be read (")

    _git("-C", str(repository), "tag", "v0.2.0")
    _git("-C", str(repository), "tag", "v0.3.0rc1")  # a pre-release is not offered for a release
    catalog = Path(installer.env["JETSON_INSTALL_WHEELS_INDEX"])
    older = catalog.read_text()
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), stub_index_dirs.vendor,
                                         sets=[NEWER, VENDOR_PINS], preferred="2.6.0"))
    newer = _outdated(env, venv)
    assert newer.returncode == 1, newer.stderr
    # The command that made the environment, as it recorded it, changed where it must.
    made = [arg for arg in args if arg not in ("--yes", "--json", "--venv", venv)]
    assert newer.stdout.splitlines() == [
        f"{venv} (obliteratus, jp6-cu126):",
        f"  vendor set torch=={VENDOR_TORCH} -> torch==2.6.0 (wheels-index.toml's preferred set for jp6-cu126); "
        f"upgrade: jetson-install {' '.join(made)} --ref v0.1.3 --venv {venv} --upgrade",
        f"  source v0.1.3 -> v0.2.0 (the tags of {repository.as_uri()}); "
        f"upgrade: jetson-install {' '.join(made)} --venv {venv} --ref v0.2.0",
    ]
    data = _json(env, venv)
    assert data["exit_code"] == 1 and "tool" not in data  # DIRs named: about them alone
    assert [item["what"] for item in data["environments"][0]["newer"]] == ["vendor set", "source"]

    # The repository gone: said in one line, and the rest is still reported.
    repository.rename(tmp_path / "gone")
    unread = _outdated(env, venv)
    assert unread.returncode == 1  # the vendor set is still outdated
    assert f"  source: not known: the tags of {repository.as_uri()} could not be read (" in unread.stdout
    catalog.write_text(older)
    assert _outdated(env, venv).returncode == 4  # nothing newer known, something not known
    assert sorted(os.listdir(venv + ".d")) == home  # read-only


def test_a_newer_jetson_install_on_the_index_it_came_from(
        tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex],
        from_the_index: None) -> None:
    build_wheel(private_index_dirs.public, "jetson-install", "9.0.0", source_index="public")
    index = start_index(private_index_dirs.public)
    env = {**isolated_env(tmp_path, fast_fail=True), "JETSON_INSTALL_DEFAULT_INDEX": index.url}
    result = _outdated(env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "no environment made by jetson-install (see: jetson-install list)",
        f"jetson-install 0.1.0 -> 9.0.0 ({index.url}); upgrade: pipx upgrade jetson-install"]
    data = _json(env)
    assert data["tool"]["newer"] == {"what": "jetson-install", "installed": "0.1.0", "newer": "9.0.0",
                                     "where": index.url, "upgrade": "pipx upgrade jetson-install"}
    assert data["environments"] == [] and data["exit_code"] == 0


def test_a_newer_commit_on_the_branch_the_checkout_follows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    origin, checkout = tmp_path / "origin.git", tmp_path / "jetson-install"
    _git("init", "-q", "--bare", "-b", "main", str(origin))
    _git("clone", "-q", str(origin), str(checkout))
    (checkout / "README.md").write_text("one\n")
    _git("-C", str(checkout), "add", "-A")
    _git("-C", str(checkout), "commit", "-qm", "one")
    _git("-C", str(checkout), "push", "-q", "origin", "HEAD:main")
    upgrade = f"git -C {checkout} pull && pipx install --force {checkout}"
    monkeypatch.setattr("jetson_install.cli.commands.outdated.running_install",
                        lambda: Installed("checkout", checkout, upgrade))
    env = isolated_env(tmp_path)
    # A branch that follows none: nothing to compare with, and said so (never "up to date").
    _git("-C", str(checkout), "branch", "-q", "--unset-upstream")
    assert _outdated(env).stdout.splitlines()[-1] == (f"jetson-install 0.1.0: not known: the checkout it was installed "
                                                      f"from, {checkout}, follows no remote branch: nothing says "
                                                      "what is newer")
    _git("-C", str(checkout), "branch", "-q", "--set-upstream-to=origin/main")
    assert _outdated(env).stdout.splitlines()[-1] == "jetson-install 0.1.0: up to date"
    other = tmp_path / "other"
    _git("clone", "-q", str(origin), str(other))
    (other / "README.md").write_text("two\n")
    _git("-C", str(other), "commit", "-qam", "two")
    _git("-C", str(other), "push", "-q", "origin", "HEAD:main")
    pushed = _git("-C", str(other), "rev-parse", "HEAD")
    head = _git("-C", str(checkout), "rev-parse", "HEAD")
    line = _outdated(env).stdout.splitlines()[-1]
    assert line == (f"jetson-install 0.1.0 ({head[:12]}) -> origin/main at {pushed[:12]} (origin/main); "
                    f"upgrade: {upgrade}")
    assert _git("-C", str(checkout), "rev-parse", "HEAD") == head  # nothing fetched, nothing moved
    # A checkout ahead of its remote is not behind it.
    _git("-C", str(checkout), "pull", "-q")
    (checkout / "README.md").write_text("three\n")
    _git("-C", str(checkout), "commit", "-qam", "three")
    assert _outdated(env).stdout.splitlines()[-1] == "jetson-install 0.1.0: up to date"


def test_a_dir_that_is_no_environment_is_refused(tmp_path: Path) -> None:
    result = _outdated(isolated_env(tmp_path), str(tmp_path / "nothing"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: outdated: {tmp_path / 'nothing'} is no environment jetson-install "
                                          "made", "  fix: see them: jetson-install list"]
