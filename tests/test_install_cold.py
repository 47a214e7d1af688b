"""A first install through the CLI (`jetson-install obliteratus`): what it installs, from which
index, how the vendor builds stay protected afterwards, and what it records.

Against loopback indexes (support.stub_projects describes them: the vendor index's Jetson-style
torch and bait numpy/filelock 99, the public index's newer torches and OBLITERATUS's
dependencies). Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from support import VENDOR_TORCH, isolated_env, needs_obliteratus_python
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.installer import VENDOR_PACKAGES, Installer
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs, planted_workspace_wheel
from typing import Callable

TOP = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_cold_install_takes_vendor_builds_from_the_vendor_index_only(installer: Installer, vendor_index: LoopbackIndex, public_index: LoopbackIndex) -> None:
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
    assert [s["id"] for s in data["steps"]] == ["interpreter", "environment", "fetch", "vendor", "target", "protect",
                                                "check", "verify", "switch"]
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@needs_obliteratus_python
def test_the_install_records_each_vendor_build_it_installed(installer: Installer, stub_index_dirs: IndexDirs) -> None:
    assert installer.run()[0] == 0
    record = json.loads((installer.venv / "jetson-install" / "vendor.json").read_text())
    torch = next(f for f in record["resolution"]["files"] if f["name"] == "torch")
    wheel = next(stub_index_dirs.vendor.glob("torch-*.whl"))
    assert torch["file"] == wheel.name and torch["known"] is True
    assert torch["sha256"] == __import__("hashlib").sha256(wheel.read_bytes()).hexdigest()
    assert record["torch_cuda"] == "12.6"
    assert set(record["installed"]) == VENDOR_PACKAGES
    assert record["installed"]["torch"]["tags"] == ["py3-none-any"] and len(record["installed"]["torch"]["record_sha256"]) == 64


@pytest.mark.slow
def test_runtime_companions_come_from_the_default_index_as_uv_resolves_them_and_the_tool_checks_them(
    tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], obliteratus_source: Path
) -> None:
    from support import build_wheel
    from support.manifests import assert_measured_from
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
    assert_ran_as_planned(data)
    # uv resolves them on the default index (each file's URL and sha256); the tool downloads and
    # checks each, and the vendor step installs them beside the vendor builds, with no index.
    fetch = next(step for step in data["plan_steps"] if step["id"] == "fetch")
    [compile_] = fetch["commands"]
    assert compile_[:3] == ["uv", "pip", "compile"] and compile_[-1].endswith("/jetson-install/companions.in")
    assert any("pip compile" in command for command in planned_commands(data))
    assert companion in next(step for step in data["steps"] if step["id"] == "vendor")["detail"]
    assert installer.python("import nvidia_cuda_runtime_cu12 as m; print(m.__version__, m.__source_index__)") == "12.9.79 public"
    assert companion not in vendor.requested_projects()
    record = json.loads((installer.venv / "jetson-install" / "vendor.json").read_text())
    wheel = next(private_index_dirs.public.glob("nvidia_cuda_runtime_cu12-*.whl"))
    assert record["companions"] == [{"name": companion, "version": "12.9.79",
                                     "hashes": [__import__("hashlib").sha256(wheel.read_bytes()).hexdigest()]}]
    assert_measured_from(installer.venv, companion, wheel)
    constraints = (installer.venv / "jetson-install" / "constraints.txt").read_text().split()
    assert f"{companion}==12.9.79" in constraints and f"torch=={VENDOR_TORCH}" in constraints


def test_two_runs_in_the_same_second_each_log_to_a_file_of_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An install and the `add` after it can start in the same second: the second one's commands
    # must not be appended to the first one's log.
    import logging

    from jetson_install.base import logs

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("jetson_install.base.logs.time.strftime", lambda pattern: "20261202-103228")
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


@pytest.mark.slow
def test_a_uv_workspace_planted_above_the_checkout_neither_chooses_packages_nor_runs_in_the_build(
        installer: Installer, tmp_path: Path) -> None:
    """What another local user can write into a shared folder above the user's checkout
    (`--source /tmp/OBLITERATUS`): a workspace naming the checkout a member, whose sources send
    a dependency of OBLITERATUS and a requirement of its build to their own wheels."""
    shared = tmp_path / "shared"
    checkout = shared / "OBLITERATUS"
    shutil.copytree(installer.source, checkout)
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("requires = []", 'requires = ["six"]'))
    planted, ran = tmp_path / "planted", tmp_path / "planted-code-ran"
    planted.mkdir()
    for name in ("rich", "six"):
        planted_workspace_wheel(planted, name, "99.0", ran)
    (shared / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["OBLITERATUS"]\n'
        f'[[tool.uv.index]]\nname = "planted"\nurl = "{planted}"\nformat = "flat"\nexplicit = true\n'
        '[tool.uv.sources]\nrich = { index = "planted" }\nsix = { index = "planted" }\n')
    status, _, stderr = installer.run(checkout)
    assert status == 0, stderr
    assert not ran.exists(), "a planted wheel was installed and ran"
    assert installer.python("import importlib.metadata as m; print(m.version('rich'))") != "99.0"
