"""An install that is refused (bad input, a DIR it did not make, an unsupported board) or fails at
a step (a dependency wanting another torch, an index down, a failed verification): one clear
line with the fix, and the environment DIR pointed at, if any, untouched.

Against loopback indexes (support.stub_projects); nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support import VENDOR_TORCH
from support.cli import run_cli
from support.fixtures import serve_cpu_only_torch
from support.installer import Installer

from jetson_install.base.layout import OWNER_MARK, OWNER_MARK_PREFIX
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs
from typing import Callable, Dict

TOP = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_dependent_needing_newer_torch_fails_clearly_and_changes_nothing(installer: Installer, tmp_path: Path) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    greedy = tmp_path / "greedy-source"
    shutil.copytree(installer.source, greedy)
    pyproject = greedy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"torch>=2.0",', '"torch>=2.0", "needs-newer-torch",', 1))
    code, data, stderr = installer.run(greedy)
    assert code == 1
    assert data["status"] == "failed" and data["error"]["step"] == "target", data["error"]
    assert "torch" in data["error"]["message"] and "unchanged" in data["error"]["message"]
    assert "Traceback" not in stderr
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"


def test_existing_foreign_directory_is_never_touched(installer: Installer) -> None:
    installer.venv.mkdir()
    (installer.venv / "keep.txt").write_text("mine")
    code, _data, stderr = installer.run()
    assert code == 2
    assert "was not made by jetson-install" in stderr
    assert (installer.venv / "keep.txt").read_text() == "mine"


def test_unsupported_platform_exits_3_without_touching_anything(installer: Installer) -> None:
    args = installer.args()
    args[args.index("sample:agx-orin-64gb-jp6.2")] = "sample:xavier-nx-jp5.1.2"
    result = run_cli(*args, env=installer.env)
    assert result.returncode == 3
    assert json.loads(result.stdout)["supported"] is False
    assert not installer.venv.exists()
    # The refusal on stderr too, where a script (and a -q run) reads it, with the way out.
    assert result.stderr.splitlines()[-2:] == [
        "error: OBLITERATUS is not supported here: JetPack 5 ships Python 3.8 and NVIDIA's torch for it stops at 2.1 "
        "(2.1.0a0+41361538.nv23.06); OBLITERATUS needs Python 3.10 or newer, and bitsandbytes 0.46.1 or newer needs "
        "torch 2.2 or newer",
        "  fix: flash JetPack 6.2 (L4T R36.4.3) on Orin; Xavier cannot run JetPack 6, so it would need a source-built "
        "torch 2.2+ for Python 3.10"]


def test_a_tag_that_does_not_exist_is_named_with_the_command_that_lists_the_tags(
    installer: Installer, obliteratus_git_repo: Path
) -> None:
    args = installer.args()
    args[args.index("--source") + 1] = obliteratus_git_repo.as_uri()
    result = run_cli(*args, "--ref", "v9", env=installer.env)
    assert result.returncode == 1, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["step"] == "target" and "no branch, tag or commit 'v9'" in error["message"], error
    assert f"git ls-remote --heads --tags {obliteratus_git_repo.as_uri()}" in error["fix"]
    assert error["fix"].endswith("--ref REF") and error["fix"].count("--ref") == 1
    assert "did not answer" not in error["fix"]


def test_a_vendor_index_that_is_down_offers_the_channels_fallback(installer: Installer) -> None:
    installer.vendor_url = "http://127.0.0.1:9/simple"  # nothing listens on the discard port
    code, data, _stderr = installer.run()
    assert code == 1
    fix = data["error"]["fix"]
    assert data["error"]["step"] == "vendor" and fix.startswith("http://127.0.0.1:9/simple did not answer"), data["error"]
    assert "use the channel's fallback source: jetson-install obliteratus" in fix and "--vendor-fallback" in fix
    assert fix.endswith("--vendor-index URL") and "--mirror URL" in fix
    assert all(command.count("--vendor-index") <= 1 for command in fix.split("; "))
    # A first install reads the index while it makes the environment: that one is gone again.
    assert not installer.venv.exists() and not list(Path(f"{installer.venv}.d").glob("*env-*"))


@pytest.mark.slow
def test_failed_verification_keeps_the_old_environment_and_the_evidence(installer: Installer) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    result = run_cli(*[arg for arg in installer.args() if arg != "--no-verify"], env=installer.env)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["error"]["step"] == "verify", data["error"]
    assert "--no-verify" in data["error"]["fix"]
    assert os.readlink(installer.venv) == before
    kept = list(Path(f"{installer.venv}.d").glob("failed-*-evidence.json"))
    assert len(kept) == 1 and str(kept[0]) in data["error"]["message"]
    assert data["evidence"] == str(kept[0])
    evidence = json.loads(kept[0].read_text())
    # The fixes in kept evidence never point at the environment that was discarded.
    assert not [c["fix"] for c in evidence["checks"] if c["fix"] and "/env-" in c["fix"]]
    assert evidence["status"] == "failed"
    import jsonschema

    from jetson_install.doctor import evidence_schema

    jsonschema.validate(evidence, evidence_schema())


def test_a_link_jetson_install_did_not_make_is_left_alone(installer: Installer, tmp_path: Path) -> None:
    elsewhere = tmp_path / "my-env"
    elsewhere.mkdir()
    installer.venv.symlink_to(elsewhere)
    code, _data, stderr = installer.run()
    assert code == 2 and "did not make" in stderr
    assert os.readlink(installer.venv) == str(elsewhere)


def test_a_second_run_on_the_same_path_waits_for_nobody_and_says_so(installer: Installer) -> None:
    import fcntl

    home = Path(f"{installer.venv}.d")
    home.mkdir(parents=True)
    with open(home / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _data, stderr = installer.run()
    assert code == 2
    assert f"another jetson-install is working on {installer.venv}" in stderr
    assert not installer.venv.exists()


def test_an_unusable_location_is_bad_input_and_leaves_nothing(installer: Installer) -> None:
    installer.venv = Path("/proc/jetson-install-test/obl")
    code, _data, stderr = installer.run()
    assert code == 2
    assert "cannot create /proc/jetson-install-test" in stderr and "--venv DIR" in stderr


def test_an_index_that_does_not_answer_is_named_in_the_fix(installer: Installer, tmp_path: Path) -> None:
    installer.public_url = "http://127.0.0.1:9/simple"  # nothing listens on the discard port
    code, data, _stderr = installer.run()
    assert code == 1
    assert data["error"]["step"] == "environment", data["error"]
    assert "http://127.0.0.1:9/simple did not answer" in data["error"]["fix"]
    assert "--default-index URL" in data["error"]["fix"]
    assert not installer.venv.exists() and not Path(f"{installer.venv}.d").exists()


@pytest.fixture
def cpu_vendor_index(private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], cli_env: Dict[str, str],
                     tmp_path: Path) -> LoopbackIndex:
    """The vendor index serving a CPU-only torch under the pinned vendor version, a build the
    catalog does not list (so only its doctor checks can tell)."""
    return serve_cpu_only_torch(private_index_dirs, start_index, cli_env, tmp_path, "cpu-vendor")


@pytest.mark.slow
def test_no_verify_still_refuses_a_cpu_only_vendor_torch_before_the_switch(
        tmp_path: Path, cli_env: Dict[str, str], cpu_vendor_index: LoopbackIndex, public_index: LoopbackIndex, obliteratus_source: Path) -> None:
    installer = Installer(tmp_path / "obl", cli_env, cpu_vendor_index.url, public_index.url, obliteratus_source)
    code, data, stderr = installer.run()
    assert code == 1, stderr
    assert data["status"] == "failed" and data["error"]["step"] == "verify", data["error"]
    assert data["error"]["message"].startswith(f"step 'verify' failed: torch-build: torch {VENDOR_TORCH} is a "
                                               "CPU-only build (torch.version.cuda is None)")
    # The vendor index served it: the fix is another source, never that index again, and
    # never --no-verify, which was given.
    fix = data["error"]["fix"]
    assert cpu_vendor_index.url not in fix and "for image builds without GPU access" not in fix
    assert fix.startswith("install from the channel's fallback source") and fix.endswith("--vendor-fallback")
    assert not installer.venv.exists() and "OBLITERATUS is ready" not in stderr
    assert data["evidence"] and Path(data["evidence"]).is_file()


@pytest.mark.slow
def test_kept_failed_evidence_is_rotated(tmp_path: Path, cli_env: Dict[str, str], cpu_vendor_index: LoopbackIndex, public_index: LoopbackIndex,
                                          obliteratus_source: Path) -> None:
    from jetson_install.envs.failed_evidence import KEPT_FAILED_EVIDENCE

    installer = Installer(tmp_path / "obl", cli_env, cpu_vendor_index.url, public_index.url, obliteratus_source)
    home = Path(f"{installer.venv}.d")
    home.mkdir()
    (home / OWNER_MARK).write_text(f"{OWNER_MARK_PREFIX}{'0' * 32}\n")  # as the failed runs before left it
    for number in range(KEPT_FAILED_EVIDENCE + 2):
        old = home / f"failed-env-old{number}-evidence.json"
        old.write_text("{}")
        os.utime(old, (1_000_000 + number, 1_000_000 + number))
    code, data, _ = installer.run()
    assert code == 1
    kept = sorted(path.name for path in home.glob("failed-*-evidence.json"))
    assert len(kept) == KEPT_FAILED_EVIDENCE
    assert Path(data["evidence"]).name in kept
    assert "failed-env-old0-evidence.json" not in kept


def test_a_run_its_own_checks_refuse_says_why_in_its_log_too(tmp_path: Path) -> None:
    """Its log was left empty (0 bytes) when the install's checks refused it before any step."""
    from support import isolated_env

    env = isolated_env(tmp_path, {"XDG_STATE_HOME": str(tmp_path / "state")})
    result = run_cli("torch", "--root", "sample:agx-orin-64gb-jp6.2", "--venv", str(tmp_path / "v"),
                     "--python", str(tmp_path / "no-python"), "--yes", env=env)
    assert result.returncode == 2, result.stderr
    [log] = (tmp_path / "state" / "jetson-install" / "log").glob("torch-*.log")
    logged = [line.split(" ", 3)[3] for line in log.read_text().splitlines() if " ERROR " in line]
    assert logged == result.stderr.splitlines()[-2:]
