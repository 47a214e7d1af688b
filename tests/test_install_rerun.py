"""Re-running `jetson-install obliteratus` on an installed DIR: a no-op that asks no index
anything while nothing changed, and a new environment when the source, the branch or the
installed vendor files did.

Against loopback indexes (support.stub_projects); nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from support import VENDOR_PINS, VENDOR_TORCH, build_wheel
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.installer import VENDOR_PACKAGES, Installer
from support.index_server import LoopbackIndex
from support.stub_projects import _TORCH_INIT_BODY, _TORCH_REQUIRES, IndexDirs, _torch_modules

TOP = Path(__file__).resolve().parent.parent

# Each test installs, then installs again.
pytestmark = pytest.mark.slow


def test_second_run_is_a_no_op(installer: Installer, public_index: LoopbackIndex) -> None:
    code, _, stderr = installer.run()  # --no-verify: ready is not said, the doctor that proves it is
    assert code == 0, stderr
    assert f"OBLITERATUS is installed, its GPU not checked (--no-verify) in {installer.venv}" in stderr.splitlines()
    assert f"  prove it: jetson-install doctor --venv {installer.venv}" in stderr.splitlines()
    first = os.readlink(installer.venv)
    public_index.clear_requests()
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert data["status"] == "unchanged" and data["steps"] == []  # no step ran, no index was asked
    assert os.readlink(installer.venv) == first
    assert public_index.requests == []


def test_dry_run_json_says_whether_the_install_would_change_anything(installer: Installer, tmp_path: Path) -> None:
    def dry_run(source: Optional[Path] = None) -> Dict[str, Any]:
        args = [arg for arg in installer.args(source) if arg != "--yes"] + ["--dry-run"]
        result = run_cli(*args, env=installer.env)
        assert result.returncode == 0, result.stderr
        parsed: Dict[str, Any] = json.loads(result.stdout)
        return parsed

    first = dry_run()
    assert first["would_change"] is True and first["would_change_reason"] == f"no environment at {installer.venv} yet"
    assert not installer.venv.exists()
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    unchanged = dry_run()
    assert unchanged["would_change"] is False, unchanged["would_change_reason"]
    changed = tmp_path / "changed-source"
    shutil.copytree(installer.source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 1\n")
    assert dry_run(changed)["would_change"] is True
    assert os.readlink(installer.venv) == before


def test_a_rerun_with_a_local_folder_is_a_no_op_after_the_build_wrote_into_it(installer: Installer, tmp_path: Path) -> None:
    source = tmp_path / "plain-source"
    shutil.copytree(installer.source, source)
    assert installer.run(source)[0] == 0
    # What a setuptools build leaves in the tree, and fresh file times (a CI checkout).
    (source / "obliteratus.egg-info").mkdir()
    (source / "obliteratus.egg-info" / "PKG-INFO").write_text("Name: obliteratus\n")
    (source / "obliteratus" / "__pycache__").mkdir()
    for path in source.rglob("*.py"):
        os.utime(path, None)
    for _ in range(2):
        code, data, stderr = installer.run(source)
        assert (code, data["status"]) == (0, "unchanged"), stderr
    (source / "obliteratus" / "extra.py").write_text("X = 1\n")
    assert installer.run(source)[1]["status"] == "installed"


def test_a_rerun_with_a_git_checkout_is_a_no_op_until_it_changes(installer: Installer, obliteratus_git_repo: Path,
                                                                tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(obliteratus_git_repo, checkout, symlinks=True)
    assert installer.run(checkout)[0] == 0
    (checkout / "obliteratus.egg-info").mkdir()
    (checkout / "obliteratus.egg-info" / "PKG-INFO").write_text("Name: obliteratus\n")
    for path in checkout.rglob("*.py"):
        os.utime(path, None)
    assert installer.run(checkout)[1]["status"] == "unchanged"
    (checkout / "obliteratus" / "device.py").write_text((checkout / "obliteratus" / "device.py").read_text() + "\n# edited\n")
    assert installer.run(checkout)[1]["status"] == "installed"
    assert installer.run(checkout)[1]["status"] == "unchanged"


def test_a_no_op_trusts_the_check_steps_uv_pip_check_only_while_no_distribution_changed(installer: Installer) -> None:
    assert installer.run()[0] == 0
    code, data, stderr = installer.run(extra=("-v",))
    assert (code, data["status"]) == (0, "unchanged"), stderr
    assert "pip check" not in stderr  # the check step's answer, on these very distributions, stands
    # A dependency removed by hand: the no-op asks uv again, which finds it missing, and the run rebuilds.
    uv_bin = __import__("uv").find_uv_bin()
    removed = subprocess.run([uv_bin, "pip", "uninstall", "--python", str(installer.venv / "bin" / "python"), "pyyaml"],
                             capture_output=True, text=True, env=installer.env, timeout=60)
    assert removed.returncode == 0, removed.stderr
    code, data, stderr = installer.run(extra=("-v",))
    assert "uv pip check" in stderr and (code, data["status"]) == (0, "installed"), stderr
    assert installer.python("import yaml; print('ok')") == "ok"


def counting_git(tmp_path: Path, env: Dict[str, str]) -> Path:
    """Put a `git` first on PATH that logs each `git ls-remote`, then runs the real git."""
    log = tmp_path / "ls-remote.log"
    wrapper = tmp_path / "git-wrapper"
    wrapper.mkdir()
    (wrapper / "git").write_text(f'#!/bin/sh\n[ "$1" = ls-remote ] && echo "$*" >> "{log}"\nexec {shutil.which("git")} "$@"\n')
    (wrapper / "git").chmod(0o755)
    env["PATH"] = f"{wrapper}{os.pathsep}{env['PATH']}"
    log.write_text("")
    return log


def test_a_branch_is_looked_up_once_per_run_and_a_tag_never_after_the_first(
    installer: Installer, obliteratus_git_repo: Path, tmp_path: Path
) -> None:
    repository = tmp_path / "repository"
    shutil.copytree(obliteratus_git_repo, repository, symlinks=True)
    lookups = counting_git(tmp_path, installer.env)
    args = installer.args()
    args[args.index("--source") + 1] = repository.as_uri()

    def run(ref: str) -> str:
        result = run_cli(*args, "--ref", ref, env=installer.env)
        assert result.returncode == 0, result.stderr
        status: str = json.loads(result.stdout)["status"]
        return status

    assert run("main") == "installed"
    lookups.write_text("")
    assert run("main") == "unchanged"
    assert len(lookups.read_text().splitlines()) == 1
    (repository / "obliteratus" / "extra.py").write_text("X = 3\n")
    subprocess.run(["git", "-C", str(repository), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@example", "commit", "-qm", "move"],
                   check=True)
    assert run("main") == "installed"  # the branch moved: not mistaken for unchanged
    assert installer.python("import obliteratus.extra as e; print(e.X)") == "3"
    assert run("v0.1.3") == "installed"
    lookups.write_text("")
    assert run("v0.1.3") == "unchanged"
    assert lookups.read_text() == ""


@pytest.fixture
def swap_index(tmp_path: Path, start_index: Callable[..., LoopbackIndex]) -> LoopbackIndex:
    """An index serving another torch under the vendor torch's exact version: a CPU build,
    as the public aarch64 torch 2.8.0 is one under plain `2.8.0`."""
    from support import build_wheel
    from support.stub_projects import _TORCH_INIT_BODY, _torch_modules

    directory = tmp_path / "swap"
    build_wheel(directory, "torch", VENDOR_TORCH, modules=_torch_modules(False, None), init_body=_TORCH_INIT_BODY,
                source_index="swap")
    return start_index(directory, name="swap")


def doctor_torch_build(installer: Installer) -> Dict[str, Any]:
    result = run_cli("doctor", "--venv", str(installer.venv), "--root", "sample:agx-orin-64gb-jp6.2",
                     "--check", "torch-build", "--json", env=installer.env)
    return next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "torch-build")


@pytest.mark.parametrize("swapper", ["pip", "uv"])
def test_a_same_version_swap_is_caught_by_doctor_and_repaired_by_a_rerun(
    installer: Installer, swap_index: LoopbackIndex, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], swapper: str
) -> None:
    # Files are immutable under their names, as public indexes serve them: uv may cache them.
    vendor_index = start_index(stub_index_dirs.vendor, name="vendor", cache_files=True)
    installer.vendor_url = vendor_index.url
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    assert doctor_torch_build(installer)["status"] == "ok"
    if swapper == "pip":
        argv = [str(installer.venv / "bin" / "pip"), "install", "--force-reinstall", "--no-deps", "torch",
                "--index-url", swap_index.url]
        swapped = subprocess.run(argv, capture_output=True, text=True, env=installer.env, timeout=180)
    else:
        uv_bin = __import__("uv").find_uv_bin()
        script = f'. "{installer.venv}/bin/activate" && "{uv_bin}" pip install --reinstall torch --default-index "{swap_index.url}"'
        swapped = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=installer.env, timeout=180)
    assert swapped.returncode == 0, swapped.stdout + swapped.stderr
    assert installer.torch() == f"{VENDOR_TORCH} swap"  # the constraint `torch==<version>` let it in
    check = doctor_torch_build(installer)
    assert check["status"] == "fail"
    assert "not the installed vendor build: torch" in check["detail"]
    assert check["fix"].startswith("jetson-install obliteratus ")
    vendor_index.clear_requests()
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert data["status"] == "installed" and os.readlink(installer.venv) != before
    assert "building a new environment with the recorded builds" in stderr
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    assert vendor_index.downloaded_files() == []  # the recorded files came from the uv cache
    assert doctor_torch_build(installer)["status"] == "ok"


def test_a_noop_rerun_asks_no_index_anything(installer: Installer, vendor_index: LoopbackIndex, public_index: LoopbackIndex) -> None:
    assert installer.run()[0] == 0
    vendor_index.clear_requests()
    public_index.clear_requests()
    code, data, stderr = installer.run()
    assert code == 0 and data["status"] == "unchanged", stderr
    assert vendor_index.requests == [] and public_index.requests == []
    assert "as recorded in" in stderr
    upgraded = run_cli(*installer.args(), "--upgrade", env=installer.env)
    assert upgraded.returncode == 0 and json.loads(upgraded.stdout)["status"] == "unchanged", upgraded.stderr
    assert set(vendor_index.requested_projects()) == VENDOR_PACKAGES  # --upgrade read the index again


def _listings(index: LoopbackIndex) -> List[str]:
    """The index pages asked for, in order: what reading the vendor set costs (files aside)."""
    return [path for path in index.requests if path.startswith("/simple/")]


def test_a_dry_run_with_upgrade_reads_what_the_upgrade_reads_and_answers_what_it_then_does(
        installer: Installer, vendor_index: LoopbackIndex) -> None:
    assert installer.run()[0] == 0
    vendor_index.clear_requests()
    dry = run_cli(*[arg for arg in installer.args() if arg != "--yes"], "--dry-run", "--upgrade", env=installer.env)
    assert dry.returncode == 0, dry.stderr
    answer, read = json.loads(dry.stdout), vendor_index.requests
    assert set(vendor_index.requested_projects()) == VENDOR_PACKAGES  # the dry run read the index, as --upgrade does
    vendor_index.clear_requests()
    code, data, stderr = installer.run(extra=("--upgrade",))
    assert code == 0, stderr
    assert vendor_index.requests == read  # the same requests, nothing more
    assert (answer["would_change"], data["status"]) == (False, "unchanged"), answer["would_change_reason"]
    assert answer["resolution"] == data["resolution"]


NEWER_PINS = {"torch": "2.5.1a0+8f3c1d2a9b.nv24.10", "torchvision": "0.20.1a0+3ac97aa",
              "torchaudio": "2.5.1a0+bb2c6e5", "bitsandbytes": VENDOR_PINS["bitsandbytes"]}


def test_a_dry_run_with_upgrade_says_the_newer_set_the_upgrade_then_takes(
        tmp_path: Path, cli_env: Dict[str, str], obliteratus_source: Path, private_index_dirs: IndexDirs,
        start_index: Callable[..., LoopbackIndex], public_index: LoopbackIndex) -> None:
    # The catalog prefers a newer set the vendor index does not serve yet: the first install
    # takes the older one within policy; then the index serves the newer set.
    later, pin = tmp_path / "later", f"torch=={NEWER_PINS['torch']}"
    build_wheel(later, "torch", NEWER_PINS["torch"], requires=_TORCH_REQUIRES, requires_python=">=3.8",
                modules=_torch_modules(True, "12.6"), init_body=_TORCH_INIT_BODY, source_index="vendor")
    build_wheel(later, "torchvision", NEWER_PINS["torchvision"], requires=("numpy", pin), source_index="vendor")
    build_wheel(later, "torchaudio", NEWER_PINS["torchaudio"], requires=(pin,), source_index="vendor")
    for wheel in later.glob("*.whl"):
        shutil.copy(wheel, private_index_dirs.vendor)
    catalog = tmp_path / "newer-wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor,
                                         sets=[NEWER_PINS, VENDOR_PINS], preferred=NEWER_PINS["torch"]))
    for wheel in later.glob("*.whl"):
        (private_index_dirs.vendor / wheel.name).unlink()
    cli_env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    vendor = start_index(private_index_dirs.vendor, name="vendor-newer")
    installer = Installer(tmp_path / "obl", cli_env, vendor.url, public_index.url, obliteratus_source)
    code, data, stderr = installer.run()
    assert code == 0 and data["resolution"]["set"] == f"torch=={VENDOR_TORCH}", stderr
    for wheel in later.glob("*.whl"):
        shutil.copy(wheel, private_index_dirs.vendor)
    assert installer.run()[1]["status"] == "unchanged"  # the recorded set: no index read, nothing newer seen
    vendor.clear_requests()
    shown = [arg for arg in installer.args() if arg not in ("--yes", "--json")]
    text = run_cli(*shown, "--dry-run", "--upgrade", env=installer.env)
    assert text.returncode == 0, text.stderr
    assert f"torch=={NEWER_PINS['torch']}" in text.stdout  # the set it would take, said
    vendor.clear_requests()
    dry = run_cli(*shown, "--json", "--dry-run", "--upgrade", env=installer.env)
    answer, read = json.loads(dry.stdout), _listings(vendor)
    assert answer["would_change"] is True, answer["would_change_reason"]
    assert answer["resolution"]["set"] == f"torch=={NEWER_PINS['torch']}"
    assert answer["pins"]["torch"] == NEWER_PINS["torch"]
    vendor.clear_requests()
    code, data, stderr = installer.run(extra=("--upgrade",))
    assert code == 0 and data["status"] == "installed", stderr
    assert _listings(vendor) == read  # the listings it read are the dry run's
    assert data["resolution"] == answer["resolution"] and data["pins"] == answer["pins"]
    assert installer.torch() == f"{NEWER_PINS['torch']} vendor"


def test_a_vendor_index_with_credentials_is_the_same_policy_on_a_rerun_and_a_dry_run(installer: Installer,
                                                                                     vendor_index: LoopbackIndex) -> None:
    # The record keeps the policy redacted; the plan's has the credentials: they must compare equal.
    installer.vendor_url = installer.vendor_url.replace("http://", "http://fleet:s3cret@")
    assert installer.run()[0] == 0
    vendor_index.clear_requests()
    code, data, stderr = installer.run()
    assert code == 0 and data["status"] == "unchanged", stderr
    assert vendor_index.requests == []  # the recorded set was reused, no index read
    args = [arg for arg in installer.args() if arg != "--yes"] + ["--dry-run"]
    dry = json.loads(run_cli(*args, env=installer.env).stdout)
    assert dry["would_change"] is False, dry["would_change_reason"]


def test_a_rerun_rebuilds_an_environment_whose_vendor_files_were_deleted(installer: Installer, tmp_path: Path) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    [site_packages] = (installer.venv / "lib").glob("python*/site-packages")
    shutil.rmtree(site_packages / "torch")  # dist-info, versions and RECORD unchanged: only the files are gone
    args = [arg for arg in installer.args() if arg != "--yes"] + ["--dry-run"]
    dry_run = json.loads(run_cli(*args, env=installer.env).stdout)
    assert dry_run["would_change"] is True
    assert "torch" in dry_run["would_change_reason"] and "torch/__init__.py is gone" in dry_run["would_change_reason"]
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert data["status"] == "installed" and os.readlink(installer.venv) != before
    [damage] = data["damaged"]
    assert damage.startswith(f"torch {VENDOR_TORCH} lost files its RECORD lists: torch/__init__.py is gone")
    assert f"{damage}; building a new environment with the recorded builds" in stderr
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    again = installer.run()
    assert again[1]["status"] == "unchanged" and again[1]["damaged"] == [], again[2]


def test_a_truncated_vendor_file_is_seen_by_its_size(installer: Installer) -> None:
    assert installer.run()[0] == 0
    [site_packages] = (installer.venv / "lib").glob("python*/site-packages")
    (site_packages / "torch" / "__init__.py").write_text("")
    code, data, stderr = installer.run()
    assert code == 0 and data["status"] == "installed", stderr
    assert "torch/__init__.py has 0 bytes, not " in data["damaged"][0]


def test_an_environment_without_its_vendor_files_hashes_is_made_again_from_the_checked_wheels(
        installer: Installer, vendor_index: LoopbackIndex) -> None:
    # As one made before the fetch step kept them: the strict doctor could prove nothing there.
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    (installer.venv / "jetson-install" / "vendor-files.json").unlink()
    args = [arg for arg in installer.args() if arg != "--yes"] + ["--dry-run"]
    dry_run = json.loads(run_cli(*args, env=installer.env).stdout)
    assert dry_run["would_change"] is True
    assert dry_run["would_change_reason"] == (
        f"{installer.venv.parent / before} has no record of its vendor files' expected hashes (vendor-files.json: made "
        "by an older jetson-install); a new environment measures them from the wheels")
    vendor_index.clear_requests()
    code, data, stderr = installer.run()
    assert code == 0 and data["status"] == "installed" and os.readlink(installer.venv) != before, stderr
    assert (installer.venv / "jetson-install" / "vendor-files.json").is_file()
    assert vendor_index.requests == []  # the recorded set, its files from the cache of checked wheels
    assert installer.run()[1]["status"] == "unchanged"


def test_the_oldest_kept_environment_is_removed_inside_the_switch_step(installer: Installer) -> None:
    """From the third changed re-run on, the environment before the previous one was removed after
    the switch, outside every step and silently (seconds for a real torch); it is now the switch
    step's, and said."""
    environments = []
    for extra in ((), ("--check-command", "python -c 'print(1)'"), ("--check-command", "python -c 'print(2)'")):
        code, data, stderr = installer.run(extra=extra)
        assert code == 0 and data["status"] == "installed", stderr
        environments.append(Path(data["environment"]).name)
    switch = next(step for step in data["steps"] if step["id"] == "switch")
    assert switch["detail"].endswith(f"; removed the older {environments[0]}"), switch
    planned = next(step for step in data["plan_steps"] if step["id"] == "switch")
    assert planned["title"].endswith("in one atomic rename, keeping the one it replaces for rollback and removing "
                                     "older ones")
    assert f"removed the older {environments[0]}" in stderr
    assert sorted(path.name for path in Path(f"{installer.venv}.d").glob("env-*")) == sorted(environments[1:])
