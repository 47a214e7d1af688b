"""The upgrade command a message names follows the way the running tool was installed
(jetson_install/base/upgrade.py): its dist-info's direct_url.json (PEP 610), or none."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import pytest
from support.cli import run_cli

from jetson_install.base.upgrade import FROM_CHECKOUT, running_upgrade_command, upgrade_command


def test_an_install_from_the_index_upgrades_from_the_index() -> None:
    assert upgrade_command(None) == "pipx upgrade jetson-install"


def test_an_install_from_a_checkout_pulls_it_and_installs_it_again() -> None:
    record = json.dumps({"url": "file:///home/nvidia/jetson-install", "dir_info": {}})
    assert upgrade_command(record) == "git -C /home/nvidia/jetson-install pull && pipx install --force /home/nvidia/jetson-install"


def test_a_checkout_path_is_quoted_for_the_shell() -> None:
    record = json.dumps({"url": "file:///home/nvidia/my%20tools/jetson-install", "dir_info": {"editable": False}})
    assert upgrade_command(record) == ("git -C '/home/nvidia/my tools/jetson-install' pull && "
                                       "pipx install --force '/home/nvidia/my tools/jetson-install'")


def test_an_editable_install_only_pulls_its_checkout() -> None:
    record = json.dumps({"url": "file:///home/nvidia/jetson-install", "dir_info": {"editable": True}})
    assert upgrade_command(record) == "git -C /home/nvidia/jetson-install pull"


@pytest.mark.parametrize("record", [
    json.dumps({"url": "file:///home/nvidia/dist/jetson_install-0.1.0-py3-none-any.whl",
                "archive_info": {"hashes": {"sha256": "00" * 32}}}),
    json.dumps({"url": "https://git.example/jetson-install.git", "vcs_info": {"vcs": "git", "commit_id": "ab" * 20}}),
    "{not json",
    "[]",
])
def test_a_wheel_a_git_url_or_an_unreadable_record_reinstalls_from_the_index(record: str) -> None:
    assert upgrade_command(record) == "pipx install --force jetson-install"


def _dist_info(site: Path, direct_url: Optional[str]) -> None:
    info = site / "jetson_install-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: jetson-install\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)


@pytest.mark.parametrize(("direct_url", "expected"), [
    (None, "pipx upgrade jetson-install"),
    (json.dumps({"url": "file:///srv/jetson-install", "dir_info": {}}),
     "git -C /srv/jetson-install pull && pipx install --force /srv/jetson-install"),
])
def test_the_running_tool_reads_its_own_dist_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  direct_url: Optional[str], expected: str) -> None:
    _dist_info(tmp_path, direct_url)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert running_upgrade_command() == expected


def test_a_tool_no_installer_recorded_names_the_readme_checkout_route(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert running_upgrade_command() == FROM_CHECKOUT
    assert FROM_CHECKOUT == "git -C jetson-install pull && pipx install --force ./jetson-install"


def test_detect_names_the_running_tools_upgrade_for_an_unknown_release() -> None:
    result = run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2", "--l4t", "40.1.0")
    assert result.returncode == 0, result.stderr
    assert (f"warning: L4T R40 is not known to this jetson-install; JetPack unknown "
            f"(upgrade: {running_upgrade_command()})") in result.stderr


@pytest.mark.parametrize(("direct_url", "expected"), [
    (None, "uv tool upgrade jetson-install"),
    (json.dumps({"url": "file:///srv/jetson-install", "dir_info": {}}),
     "git -C /srv/jetson-install pull && uv tool install --force /srv/jetson-install"),
    (json.dumps({"url": "file:///srv/dist/jetson_install-0.1.0-py3-none-any.whl", "archive_info": {}}),
     "uv tool install --force jetson-install"),
])
def test_a_tool_uv_installed_is_upgraded_by_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               direct_url: Optional[str], expected: str) -> None:
    """`uv tool install` leaves uv-receipt.toml in the tool's environment: its user has uv, maybe no pipx."""
    _dist_info(tmp_path / "site", direct_url)
    (tmp_path / "uv-receipt.toml").write_text('[tool]\nrequirements = [{ name = "jetson-install" }]\n')
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert running_upgrade_command() == expected


@pytest.mark.parametrize(("direct_url", "receipt", "expected"), [
    (None, False, "pipx upgrade jetson-install"),
    (None, True, "uv tool upgrade jetson-install"),
    (json.dumps({"url": "file:///srv/jetson-install", "dir_info": {"editable": True}}), False,
     "git -C /srv/jetson-install pull"),
])
def test_the_version_ends_with_the_upgrade_the_readme_promises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               direct_url: Optional[str], receipt: bool,
                                                               expected: str) -> None:
    """README's "Install": `--version` names the tool ... an upgrade hint follows the way it was installed."""
    _dist_info(tmp_path / "site", direct_url)
    if receipt:
        (tmp_path / "uv-receipt.toml").write_text('[tool]\nrequirements = [{ name = "jetson-install" }]\n')
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *sys.path])
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"upgrade: {expected}"
