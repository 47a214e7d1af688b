"""The plan is the program: an install runs exactly the commands its plan shows.

Each route's install is run against loopback indexes and its log compared with the plan it
carried out (tests/support/planned.py); the routes whose lanes need more than this machine
(the kept torch, locks, the bitsandbytes build, the preflight) assert the same in their own
test modules. The plan `plan --resolve` prints is the one the install then runs.
"""

from __future__ import annotations

import pytest
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List

from support import VENDOR_PINS, isolated_env
from support.installer import Installer
from support.planned import assert_ran_as_planned, assert_vendor_set_pinned
from support.stub_projects import _TORCH_INIT_BODY, _TORCH_REQUIRES, _torch_modules
from support.manifests import assert_measured_from
from support.wheels import build_wheel, sha256_file
from support.stub_projects import IndexDirs
from support.index_server import LoopbackIndex

TOP = Path(__file__).resolve().parent.parent
THOR = "sample:agx-thor-jp7.2.1"


def _plan(install_argv: List[str], env: Dict[str, str], *extra: str) -> Dict[str, Any]:
    """What `plan obliteratus` says for the same options as the install's."""
    at = install_argv.index("obliteratus")
    argv = [*install_argv[:at], "plan", *[a for a in install_argv[at:] if a != "--yes"], *extra]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    data: Dict[str, Any] = json.loads(result.stdout)
    return data


def _commands(steps: List[Dict[str, Any]]) -> List[List[List[str]]]:
    return [step["commands"] for step in steps]


@pytest.mark.slow
def test_the_download_route_runs_its_plan_and_pins_the_whole_vendor_set(installer: Installer,
                                                                        stub_index_dirs: IndexDirs) -> None:
    resolved = _plan(installer.argv(), installer.env, "--resolve")
    code, data, stderr = installer.run()
    assert code == 0, stderr
    assert_ran_as_planned(data)
    # The fetch step lists each file it downloads, by its URL and sha256: every vendor file's
    # expected hashes are the wheel's own RECORD, and the installed files are its bytes.
    fetch = next(step for step in data["plan_steps"] if step["id"] == "fetch")
    assert [d["url"].rsplit("/", 1)[-1] for d in fetch["downloads"]] == [
        f["file"].replace("+", "%2B") for f in data["resolution"]["files"]]
    for chosen in data["resolution"]["files"]:
        assert_measured_from(installer.venv, chosen["name"], stub_index_dirs.vendor / chosen["file"])
    # What `plan --resolve` showed is what ran: the same steps and commands.
    assert _commands(resolved["steps"]) == _commands(data["plan_steps"])
    pins = assert_vendor_set_pinned(installer.venv, list(VENDOR_PINS))
    assert pins == VENDOR_PINS


def test_thor_plans_uv_resolving_its_set_in_the_fetch_step_with_and_without_resolving(tmp_path: Path) -> None:
    # uv's own default index is never listed by the tool: `plan --resolve` takes the set as the
    # catalog records it, and both have uv resolve it (bitsandbytes by its range) in the fetch
    # step, whose files the tool then downloads and checks; the vendor step installs those alone.
    argv = [sys.executable, "-m", "jetson_install", "obliteratus", "--root", THOR, "--json"]
    env = isolated_env(tmp_path, fast_fail=True)
    plain, resolved = _plan(argv, env), _plan(argv, env, "--resolve")
    fetch = next(step for step in plain["steps"] if step["id"] == "fetch")
    assert fetch["title"].startswith("resolve torch==2.13.0, torchvision==0.28.0, bitsandbytes>=0.48,<0.51 on the "
                                     "default index") and fetch["downloads"] == []
    [compile_] = fetch["commands"]
    assert compile_[:3] == ["uv", "pip", "compile"] and "--no-deps" in compile_ and "pylock.toml" in compile_
    vendor = next(step for step in plain["steps"] if step["id"] == "vendor")
    assert vendor["command"][-1].endswith("/jetson-install/fetched.txt")
    assert "--no-index" in vendor["command"] and "--require-hashes" in vendor["command"]
    assert _commands(plain["steps"]) == _commands(resolved["steps"])
    assert "bitsandbytes>=0.48,<0.51" in plain["constraints"]


@pytest.mark.slow
def test_thor_installs_the_files_uv_resolved_as_the_tool_checked_them_pins_them_and_the_doctor_checks_them(
        tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], obliteratus_source: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Thor's vendor set comes from uv's default index, which the tool never lists itself: uv
    # resolves it (bitsandbytes by its range) in the fetch step, the tool downloads and checks
    # each file, and the vendor step installs those very files, pinned from then on. Here
    # the loopback index stands in for uv's default, read only by uv (the install runs
    # in-process, with the tool's own listing of it turned off).
    from jetson_install.planning import vendor_sources
    from jetson_install.cli.main import main

    public_dir = private_index_dirs.public
    for old in public_dir.glob("torch-*.whl"):
        old.unlink()
    build_wheel(public_dir, "torch", "2.13.0", requires=_TORCH_REQUIRES, requires_python=">=3.8",
                modules=_torch_modules(True, "13.0"), init_body=_TORCH_INIT_BODY, source_index="public")
    build_wheel(public_dir, "torchvision", "0.28.0", requires=("torch==2.13.0",), source_index="public")
    public = start_index(public_dir)
    env = isolated_env(tmp_path, fast_fail=True)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(vendor_sources, "resolve", lambda source, *_: vendor_sources.offline_resolution(source))
    venv = tmp_path / "obl"
    argv = ["obliteratus", "--root", THOR, "--venv", str(venv), "--python", sys.executable, "--default-index",
            public.url, "--source", str(obliteratus_source), "--no-verify", "--yes", "--json"]
    try:
        main(argv)
    except SystemExit as exit:
        assert exit.code == 0, capsys.readouterr().err  # noqa: PT017 - main may return or exit 0
    data = json.loads(capsys.readouterr().out)
    assert_ran_as_planned(data)
    pins = assert_vendor_set_pinned(venv, ["torch", "torchvision", "bitsandbytes"])
    assert pins == {"torch": "2.13.0", "torchvision": "0.28.0", "bitsandbytes": "0.49.0"}
    assert data["installed"]["bitsandbytes"] == "0.49.0"
    record = json.loads((venv / "jetson-install" / "vendor.json").read_text())
    assert record["resolution"]["files"][-1]["version"] == "0.49.0" and "bitsandbytes" in record["installed"]
    # Every vendor file is recorded as measured from the very wheel the tool downloaded: its sha256
    # and its own RECORD, never the environment's (support.manifests).
    for name in ("torch", "torchvision", "bitsandbytes"):
        recorded = next(f for f in record["resolution"]["files"] if f["name"] == name)
        wheel = public_dir / recorded["file"]
        assert recorded["sha256"] == sha256_file(wheel)
        assert_measured_from(venv, name, wheel)
    # Inside the environment, another bitsandbytes is refused, as for every pinned vendor build.
    refused = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index",
                              "--dry-run", "bitsandbytes==0.46.1"], capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode != 0 and "bitsandbytes" in refused.stderr + refused.stdout
    # The doctor judges bitsandbytes as a vendor build here, never "installed without its extra".
    doctor = subprocess.run([sys.executable, "-m", "jetson_install", "doctor", "--venv", str(venv),
                             "--root", THOR, "--json"], capture_output=True, text=True, env=env, timeout=300)
    checks = {check["id"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["bnb-library"]["status"] != "not_applicable", checks["bnb-library"]
