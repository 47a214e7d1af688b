"""`jetson-install obliteratus` end to end, through the CLI, against loopback indexes.

The vendor index carries a Jetson-style torch (2.5.0a0+872d972e41.nv24.08, the
pre-release local version NVIDIA ships) plus bait numpy/filelock 99; the public
index carries newer torches, NumPy 1 and 2, a package needing torch>=2.6, the
squatted `obliteratus` placeholder and the stub OBLITERATUS dependencies.
Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import pytest
from packaging.version import Version
from support import VENDOR_TORCH, isolated_env
from support.cli import run_cli
from support.installer import Installer
from support.catalogs import stub_catalog_text

TOP = Path(__file__).resolve().parent.parent
VENDOR_PACKAGES = {"torch", "torchvision", "torchaudio", "bitsandbytes"}


def test_cold_install_takes_vendor_builds_from_the_vendor_index_only(installer: Installer, vendor_index, public_index) -> None:
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert data["status"] == "installed"
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    assert Version(data["installed"]["torch"]) == Version(VENDOR_TORCH)  # uv prints the normalized nv24.8
    assert data["installed"]["numpy"] != "99.0" and data["installed"]["filelock"] != "99.0"
    # (c) the vendor index supplied nothing but the vendor packages, bait included
    assert set(vendor_index.requested_projects()) <= VENDOR_PACKAGES
    # (g) obliteratus is never asked for by name, from any index
    assert "obliteratus" not in vendor_index.requested_projects() + public_index.requested_projects()
    assert installer.python("import obliteratus.device as d; print(d.get_device('auto'))") == "cuda"
    assert "activate" in data and data["activate"] == f"source {installer.venv}/bin/activate"
    assert [s["id"] for s in data["steps"]] == ["interpreter", "environment", "vendor", "target", "protect", "check",
                                                "verify", "switch"]
    verify = next(step for step in data["steps"] if step["id"] == "verify")
    assert "GPU checks skipped: --no-verify" in verify["detail"]
    assert data["evidence"] == f"{installer.venv}/jetson-install/evidence.json"
    # The evidence says what it proves: the checks that need no GPU passed, no kernel ran (the stub
    # torch's probe got as far as a failing matmul, which no check judged), and the vendor files
    # have their RECORDs' sizes.
    evidence = json.loads(Path(data["evidence"]).read_text())
    assert evidence["status"] == "partial-passed"
    assert evidence["torch"]["kernels"] == {"matmul": "not_run", "conv2d": "not_run", "bf16_autocast_backward": "not_run"}
    assert evidence["runtime"]["jetson_contract"] == "not_run"
    assert evidence["integrity"]["files"] == "sizes" and evidence["integrity"]["result"] == "passed"
    assert sorted(evidence["integrity"]["distributions"]) == sorted(VENDOR_PACKAGES)
    checked = run_cli("evidence", "check", data["evidence"], env=installer.env)
    assert checked.returncode == 1 and ": FAIL: incomplete: platform, cuda-available, " in checked.stdout, checked.stdout


def test_second_run_is_a_no_op(installer: Installer, public_index) -> None:
    assert installer.run()[0] == 0
    first = os.readlink(installer.venv)
    public_index.clear_requests()
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert data["status"] == "unchanged" and data["steps"] == []  # no step ran, no index was asked
    assert os.readlink(installer.venv) == first
    assert public_index.requests == []


def test_dry_run_json_says_whether_the_install_would_change_anything(installer: Installer, tmp_path: Path) -> None:
    def dry_run(source: Optional[Path] = None) -> dict:
        args = [arg for arg in installer.args(source) if arg != "--yes"] + ["--dry-run"]
        result = run_cli(*args, env=installer.env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

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


def test_protection_outlives_the_tool_for_pip_and_for_uv(installer: Installer) -> None:
    assert installer.run()[0] == 0
    pip = subprocess.run(
        [str(installer.venv / "bin" / "pip"), "install", "-U", "torch", "numpy", "transformers",
         "--index-url", installer.public_url],
        capture_output=True, text=True, env=installer.env, timeout=180,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert installer.torch() == f"{VENDOR_TORCH} vendor", pip.stdout + pip.stderr
    assert installer.python("import numpy; print(numpy.__version__)").startswith("1.")  # numpy<2 held too
    uv_bin = installer.env.get("UV_BIN") or __import__("uv").find_uv_bin()
    script = f'. "{installer.venv}/bin/activate" && "{uv_bin}" pip install -U torch --default-index "{installer.public_url}"'
    uv_run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=installer.env, timeout=180)
    assert uv_run.returncode == 0, uv_run.stderr
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    # Without the activate script's UV_CONSTRAINT the same command would replace it.
    unprotected = script.replace(f'. "{installer.venv}/bin/activate" && ', f'VIRTUAL_ENV="{installer.venv}" ')
    dry = subprocess.run(["bash", "-c", unprotected + " --dry-run"], capture_output=True, text=True,
                         env=installer.env, timeout=180)
    assert "- torch==" in dry.stderr, dry.stderr
    unconstrained = subprocess.run(["bash", "-c", f'. "{installer.venv}/bin/activate" && deactivate && echo "[${{UV_CONSTRAINT:-}}]"'],
                                   capture_output=True, text=True, env=installer.env, timeout=30)
    assert unconstrained.stdout.strip() == "[]"


def test_dependent_needing_newer_torch_fails_clearly_and_changes_nothing(installer: Installer, tmp_path: Path) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    greedy = tmp_path / "greedy-source"
    shutil.copytree(installer.source, greedy)
    pyproject = greedy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"torch>=2.0",', '"torch>=2.0", "needs-newer-torch",', 1))
    code, data, stderr = installer.run(greedy)
    assert code == 1
    assert data["status"] == "failed" and data["error"]["step"] == "target"
    assert "torch" in data["error"]["message"] and "unchanged" in data["error"]["message"]
    assert "Traceback" not in stderr
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"


def test_index_going_away_mid_install_keeps_the_old_environment(installer: Installer, public_index, tmp_path: Path) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    changed = tmp_path / "changed-source"
    shutil.copytree(installer.source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 1\n")
    public_index.fail_after(2)
    code, data, stderr = installer.run(changed)
    assert code == 1, stderr
    assert data["error"]["step"] in ("environment", "target")
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"


def reinstall_caught_mid_download(installer: Installer, tmp_path: Path, stub_index_dirs, start_index
                                  ) -> "tuple[subprocess.Popen, str, Path]":
    """Install once, then start a changed install against a slow index and return it mid-download."""
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    slow = start_index(stub_index_dirs.public, name="slow-public", delay=0.5)
    changed = tmp_path / "changed-source"
    shutil.copytree(installer.source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 2\n")
    installer.public_url = slow.url
    process = subprocess.Popen(installer.argv(changed), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=installer.env, text=True, start_new_session=True)
    slow.wait_for_request(lambda path: path.endswith(".whl"), timeout=120)
    return process, before, changed


def test_killed_install_keeps_the_old_environment_and_a_rerun_succeeds(
    installer: Installer, tmp_path: Path, stub_index_dirs, start_index
) -> None:
    process, before, changed = reinstall_caught_mid_download(installer, tmp_path, stub_index_dirs, start_index)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert os.readlink(installer.venv) == before
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    code, data, stderr = installer.run(changed)
    assert code == 0, stderr
    assert data["status"] == "installed"
    assert os.readlink(installer.venv) != before
    leftovers = [p.name for p in Path(f"{installer.venv}.d").glob("env-*")]
    assert len(leftovers) == 2, leftovers  # the new environment and the previous one, no partial build
    # The killed run's environment, removed, is in the result with the disk it took.
    [removed] = data["removed_leftovers"]
    assert Path(removed["path"]).parent == Path(f"{installer.venv}.d") and removed["path"] != os.readlink(installer.venv)
    assert removed["bytes"] > 0 and f"removed {removed['path']}, left by a killed or interrupted run" in stderr


def test_ctrl_c_reports_the_step_and_keeps_the_old_environment(
    installer: Installer, tmp_path: Path, stub_index_dirs, start_index
) -> None:
    process, before, _ = reinstall_caught_mid_download(installer, tmp_path, stub_index_dirs, start_index)
    os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "unchanged" in stderr and "Traceback" not in stderr
    assert os.readlink(installer.venv) == before


def test_existing_foreign_directory_is_never_touched(installer: Installer) -> None:
    installer.venv.mkdir()
    (installer.venv / "keep.txt").write_text("mine")
    code, data, stderr = installer.run()
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


def test_pinned_git_source_installs_and_a_space_in_the_path_keeps_protection(
    installer: Installer, obliteratus_git_repo: Path, tmp_path: Path
) -> None:
    installer.venv = tmp_path / "with space" / "obl"
    args = installer.args()
    args[args.index("--source") + 1] = obliteratus_git_repo.as_uri()
    result = run_cli(*args, "--ref", "v0.1.3", env=installer.env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "installed"
    assert installer.python("import obliteratus; print(obliteratus.__version__)") == "0.1.3"
    pip = subprocess.run([str(installer.venv / "bin" / "pip"), "install", "-U", "torch", "--index-url", installer.public_url],
                         capture_output=True, text=True, env=installer.env, timeout=180)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert installer.torch() == f"{VENDOR_TORCH} vendor"
    assert " " in str(installer.venv) and (installer.venv / "pip.conf").read_text().count("file://") == 1
    activate = json.loads(result.stdout)["activate"]
    assert activate == f"source '{installer.venv}/bin/activate'" and f"activate: {activate}" in result.stderr
    sourced = subprocess.run(["bash", "-c", f"{activate} && echo $VIRTUAL_ENV"], capture_output=True, text=True, timeout=30)
    assert sourced.stdout.strip() == os.path.realpath(installer.venv)


def test_a_tag_that_does_not_exist_is_named_with_the_command_that_lists_the_tags(
    installer: Installer, obliteratus_git_repo: Path
) -> None:
    args = installer.args()
    args[args.index("--source") + 1] = obliteratus_git_repo.as_uri()
    result = run_cli(*args, "--ref", "v9", env=installer.env)
    assert result.returncode == 1, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["step"] == "target" and "no branch, tag or commit 'v9'" in error["message"]
    assert f"git ls-remote --heads --tags {obliteratus_git_repo.as_uri()}" in error["fix"]
    assert error["fix"].endswith("--ref REF") and error["fix"].count("--ref") == 1
    assert "did not answer" not in error["fix"]


def test_a_vendor_index_that_is_down_offers_the_channels_fallback(installer: Installer) -> None:
    installer.vendor_url = "http://127.0.0.1:9/simple"  # nothing listens on the discard port
    code, data, stderr = installer.run()
    assert code == 1
    fix = data["error"]["fix"]
    assert data["error"]["step"] == "vendor" and fix.startswith("http://127.0.0.1:9/simple did not answer")
    assert "use the channel's fallback source: jetson-install obliteratus" in fix and "--vendor-fallback" in fix
    assert fix.count("--vendor-index") == 1 and fix.endswith("--vendor-index URL")
    # A first install reads the index while it makes the environment: that one is gone again.
    assert not installer.venv.exists() and not list(Path(f"{installer.venv}.d").glob("*env-*"))


def test_failed_verification_keeps_the_old_environment_and_the_evidence(installer: Installer) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    result = run_cli(*[arg for arg in installer.args() if arg != "--no-verify"], env=installer.env)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["error"]["step"] == "verify"
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
    code, data, stderr = installer.run()
    assert code == 2 and "did not make" in stderr
    assert os.readlink(installer.venv) == str(elsewhere)


def test_a_second_run_on_the_same_path_waits_for_nobody_and_says_so(installer: Installer) -> None:
    import fcntl

    home = Path(f"{installer.venv}.d")
    home.mkdir(parents=True)
    with open(home / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, data, stderr = installer.run()
    assert code == 2
    assert f"another jetson-install is working on {installer.venv}" in stderr
    assert not installer.venv.exists()


def test_an_explicit_python_of_another_version_is_a_warning_not_an_error(installer: Installer, stub_catalog: Path) -> None:
    host = f"{sys.version_info[0]}.{sys.version_info[1]}"
    other = "3.12" if host != "3.12" else "3.13"
    text = stub_catalog.read_text()
    start = text.index('id = "jp6-cu126"')
    stub_catalog.write_text(text[:start] + text[start:].replace('python = "3.10"', f'python = "{other}"', 1))
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert any(f"is Python {host}" in w and other in w for w in data["warnings"])
    assert f"warning: --python {sys.executable} is Python {host}" in stderr


def test_an_unusable_location_is_bad_input_and_leaves_nothing(installer: Installer) -> None:
    installer.venv = Path("/proc/jetson-install-test/obl")
    code, data, stderr = installer.run()
    assert code == 2
    assert "cannot create /proc/jetson-install-test" in stderr and "--venv DIR" in stderr


def test_an_index_that_does_not_answer_is_named_in_the_fix(installer: Installer, tmp_path: Path) -> None:
    installer.public_url = "http://127.0.0.1:9/simple"  # nothing listens on the discard port
    code, data, stderr = installer.run()
    assert code == 1
    assert data["error"]["step"] == "environment"
    assert "http://127.0.0.1:9/simple did not answer" in data["error"]["fix"]
    assert "--default-index URL" in data["error"]["fix"]
    assert not installer.venv.exists() and not Path(f"{installer.venv}.d").exists()


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
        return json.loads(result.stdout)["status"]

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
def swap_index(tmp_path: Path, start_index):
    """An index serving another torch under the vendor torch's exact version: a CPU build,
    as the public aarch64 torch 2.8.0 is one under plain `2.8.0`."""
    from support import build_wheel
    from support.stub_projects import _TORCH_INIT_BODY, _torch_modules

    directory = tmp_path / "swap"
    build_wheel(directory, "torch", VENDOR_TORCH, modules=_torch_modules(False, None), init_body=_TORCH_INIT_BODY,
                source_index="swap")
    return start_index(directory, name="swap")


def doctor_torch_build(installer: Installer) -> dict:
    result = run_cli("doctor", "--venv", str(installer.venv), "--root", "sample:agx-orin-64gb-jp6.2",
                     "--check", "torch-build", "--json", env=installer.env)
    return next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "torch-build")


@pytest.mark.parametrize("swapper", ["pip", "uv"])
def test_a_same_version_swap_is_caught_by_doctor_and_repaired_by_a_rerun(
    installer: Installer, swap_index, stub_index_dirs, start_index, swapper: str
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


def test_a_noop_rerun_asks_no_index_anything(installer: Installer, vendor_index, public_index) -> None:
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


def test_the_install_records_each_vendor_build_it_installed(installer: Installer, stub_index_dirs) -> None:
    assert installer.run()[0] == 0
    record = json.loads((installer.venv / "jetson-install" / "vendor.json").read_text())
    torch = next(f for f in record["resolution"]["files"] if f["name"] == "torch")
    wheel = next(stub_index_dirs.vendor.glob("torch-*.whl"))
    assert torch["file"] == wheel.name and torch["known"] is True
    assert torch["sha256"] == __import__("hashlib").sha256(wheel.read_bytes()).hexdigest()
    assert record["torch_cuda"] == "12.6"
    assert set(record["installed"]) == VENDOR_PACKAGES
    assert record["installed"]["torch"]["tags"] == ["py3-none-any"] and len(record["installed"]["torch"]["record_sha256"]) == 64


def test_runtime_companions_come_from_the_default_index_by_both_commands_the_plan_shows(
    tmp_path: Path, private_index_dirs, start_index, obliteratus_source: Path
) -> None:
    from support import build_wheel
    from support.planned import assert_ran_as_planned, planned_commands

    companion = "nvidia-cuda-runtime-cu12"
    build_wheel(private_index_dirs.public, companion, "12.9.79", source_index="public")
    # The vendor index carries the name too: a companion must never come from it.
    build_wheel(private_index_dirs.vendor, companion, "99.0", source_index="vendor")
    catalog = tmp_path / "companions-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor,
                                         companions=((f"{companion}==12.9.79", ("libcudart.so.12",)),)))
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(private_index_dirs.public)
    installer = Installer(tmp_path / "obl", env, vendor.url, public.url, obliteratus_source)
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert "companions" in [s["id"] for s in data["steps"]]
    assert_ran_as_planned(data)
    companions = next(step for step in data["plan_steps"] if step["id"] == "companions")
    assert [command[:3] for command in companions["commands"]] == [["uv", "pip", "compile"], ["uv", "pip", "install"]]
    assert any("pip compile" in command for command in planned_commands(data))
    assert installer.python("import nvidia_cuda_runtime_cu12 as m; print(m.__version__, m.__source_index__)") == "12.9.79 public"
    assert companion not in vendor.requested_projects()
    record = json.loads((installer.venv / "jetson-install" / "vendor.json").read_text())
    wheel = next(private_index_dirs.public.glob("nvidia_cuda_runtime_cu12-*.whl"))
    assert record["companions"] == [{"name": companion, "version": "12.9.79",
                                     "hashes": [__import__("hashlib").sha256(wheel.read_bytes()).hexdigest()]}]
    constraints = (installer.venv / "jetson-install" / "constraints.txt").read_text().split()
    assert f"{companion}==12.9.79" in constraints and f"torch=={VENDOR_TORCH}" in constraints
@pytest.fixture
def cpu_vendor_index(private_index_dirs, start_index, cli_env: Dict[str, str], tmp_path: Path):
    """The vendor index serving a CPU-only torch under the pinned vendor version, a build the
    catalog does not list (so only its doctor checks can tell)."""
    from support.stub_projects import _TORCH_INIT_BODY, _TORCH_REQUIRES, _torch_modules
    from support.wheels import build_wheel

    for wheel in private_index_dirs.vendor.glob("torch-*.whl"):
        wheel.unlink()
    build_wheel(private_index_dirs.vendor, "torch", VENDOR_TORCH, requires=_TORCH_REQUIRES, requires_python=">=3.8",
                modules=_torch_modules(False, None), init_body=_TORCH_INIT_BODY, source_index="vendor")
    from support.catalogs import stub_catalog_text

    catalog = tmp_path / "cpu-wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor,
                                         known=("torchvision", "torchaudio", "bitsandbytes")))
    cli_env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return start_index(private_index_dirs.vendor, name="cpu-vendor")


def test_no_verify_still_refuses_a_cpu_only_vendor_torch_before_the_switch(
        tmp_path: Path, cli_env: Dict[str, str], cpu_vendor_index, public_index, obliteratus_source: Path) -> None:
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


def test_kept_failed_evidence_is_rotated(tmp_path: Path, cli_env: Dict[str, str], cpu_vendor_index, public_index,
                                          obliteratus_source: Path) -> None:
    from jetson_install.envs.failed_evidence import KEPT_FAILED_EVIDENCE

    installer = Installer(tmp_path / "obl", cli_env, cpu_vendor_index.url, public_index.url, obliteratus_source)
    home = Path(f"{installer.venv}.d")
    home.mkdir()
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


def test_a_vendor_index_with_credentials_is_the_same_policy_on_a_rerun_and_a_dry_run(installer: Installer,
                                                                                     vendor_index) -> None:
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


def test_two_runs_in_the_same_second_each_log_to_a_file_of_their_own(tmp_path: Path, monkeypatch) -> None:
    # An install and the `add` after it can start in the same second: the second one's commands
    # must not be appended to the first one's log.
    import logging

    from jetson_install.base import logs

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(logs.time, "strftime", lambda pattern: "20261202-103228")
    logger = logging.getLogger("jetson_install")
    handlers = list(logger.handlers)
    try:
        first, second = logs.start_log("obliteratus"), logs.start_log("obliteratus")
    finally:
        for handler in logger.handlers[len(handlers):]:
            handler.close()
        logger.handlers[:] = handlers
    assert first != second and first.is_file() and second.is_file()
    assert logs.own_logs() == sorted([first, second])
