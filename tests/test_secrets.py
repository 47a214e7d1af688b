"""Credentials in index and source URLs: masked in everything shown or written, and kept
off uv's command line, while uv still authenticates with them."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from support import isolated_env
from support.cli import run_cli

from jetson_install.tools import uv
from jetson_install.base.redact import redact, redact_data

TOP = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-pw"
TOKEN = "ghp_tok3n"
SAMPLE = "sample:agx-orin-64gb-jp6.2"


@pytest.mark.parametrize("text, shown", [
    ("https://alice:s3cr3t@mirror.example/simple", "https://alice:****@mirror.example/simple"),
    ("git+https://ghp_tok3n@git.example/o/r.git@v1", "git+https://****@git.example/o/r.git@v1"),
    ("fix: run --vendor-index https://a:p%40ss@h/simple --json", "fix: run --vendor-index https://a:****@h/simple --json"),
    ("https://user:a@b@host/x", "https://user:****@host/x"),
    ("git+ssh://git@git.example/o/r.git", "git+ssh://git@git.example/o/r.git"),
    ("https://h/x?a=b@c and mail@example.org", "https://h/x?a=b@c and mail@example.org"),
])
def test_redact_masks_the_secret_and_keeps_the_rest(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(shown) == shown


def test_redact_data_reaches_nested_strings() -> None:
    data = {"steps": [{"argv": ["uv", "--default-index", f"https://a:{SECRET}@h/simple"]}], "n": 1}
    assert SECRET not in json.dumps(redact_data(data))


def test_uv_gets_credentials_from_its_environment_not_its_command_line() -> None:
    argv = uv.vendor_install_argv("/py", f"https://alice:{SECRET}@mirror.example/simple", False, ["torch==2.8.0"])
    assert SECRET not in " ".join(argv) and "alice" not in " ".join(argv)
    assert "private=https://mirror.example/simple" in argv
    index = f"https://alice:{SECRET}@mirror.example/simple"
    variables, removed = uv.environment_for([index], argv)
    assert variables["UV_INDEX_PRIVATE_USERNAME"] == "alice" and variables["UV_INDEX_PRIVATE_PASSWORD"] == SECRET
    assert "UV_INDEX_PRIVATE_PASSWORD" in removed  # never the caller's own
    plain = uv.environment_for(["https://mirror.example/simple"], uv.vendor_install_argv("/py", "https://mirror.example/simple", False, []))[0]
    assert "UV_INDEX_PRIVATE_USERNAME" not in plain


def run_process(args, env: Dict[str, str]) -> subprocess.CompletedProcess:
    """In a process of its own: what reaches the real stdout, stderr and log file is masked."""
    return subprocess.run([sys.executable, "-m", "jetson_install", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("command", [["plan", "obliteratus"], ["plan", "obliteratus", "--json"],
                                     ["obliteratus", "--dry-run"], ["obliteratus", "--dry-run", "--json"]])
def test_plan_and_dry_run_show_no_secret(command, tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    env["JETSON_INSTALL_DEFAULT_INDEX"] = f"https://bob:{SECRET}@mirror.example/pypi/simple"
    config = tmp_path / "config.toml"
    config.write_text(f'vendor_index = "https://carol:{SECRET}@mirror.example/jp6/cu126"\n')
    env["JETSON_INSTALL_CONFIG"] = str(config)
    result = run_cli(*command, "--root", SAMPLE, "--venv", str(tmp_path / "v"),
                     "--source", f"https://{TOKEN}@git.example/o/OBLITERATUS.git", env=env)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr
    assert "bob:****@mirror.example" in result.stdout and "carol:****@mirror.example" in result.stdout
    assert "https://****@git.example/o/OBLITERATUS.git" in result.stdout


def test_bad_index_error_and_its_fix_show_no_secret(tmp_path: Path) -> None:
    result = run_cli("plan", "obliteratus", "--root", SAMPLE, "--json",
                     "--vendor-index", f"http://alice:{SECRET}@192.0.2.1/simple", env=isolated_env(tmp_path))
    assert result.returncode == 2
    assert SECRET not in result.stdout + result.stderr
    assert "alice:****@192.0.2.1" in result.stderr


def test_install_authenticates_yet_nothing_written_or_shown_holds_the_secret(
        tmp_path: Path, stub_index_dirs, start_index, obliteratus_source: Path) -> None:
    vendor = start_index(stub_index_dirs.vendor, name="vendor", credentials=f"alice:{SECRET}")
    public = start_index(stub_index_dirs.public, name="public", credentials=f"{TOKEN}:")
    env = isolated_env(tmp_path, fast_fail=True)
    from support.catalogs import stub_catalog_text

    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), stub_index_dirs.vendor))
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    venv = tmp_path / "obl"
    result = run_process(["obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                      "--vendor-index", vendor.url.replace("http://", f"http://alice:{SECRET}@"),
                      "--default-index", public.url.replace("http://", f"http://{TOKEN}@"),
                      "--source", str(obliteratus_source), "--no-verify", "--yes", "--json"], env)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr and TOKEN not in result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert "alice:****@127.0.0.1" in data["vendor_index"]
    log = Path(data["log"])
    assert log.read_text().count("run: ") >= 3 and SECRET not in log.read_text() and TOKEN not in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    plan_json = Path(data["environment"]) / "jetson-install" / "plan.json"
    assert SECRET not in plan_json.read_text() and stat.S_IMODE(plan_json.stat().st_mode) == 0o600
    # The command it was made with (the record's repair command, plan.json's for `add`) is kept masked.
    record = (Path(data["environment"]) / "jetson-install" / "vendor.json").read_text()
    assert SECRET not in record and TOKEN not in record and "alice:****@127.0.0.1" in record
    assert "alice:****@127.0.0.1" in " ".join(json.loads(plan_json.read_text())["command"])
    # Unchanged on a re-run: the redacted record still matches the plan.
    again = run_process(["obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                     "--vendor-index", vendor.url.replace("http://", f"http://alice:{SECRET}@"),
                     "--default-index", public.url.replace("http://", f"http://{TOKEN}@"),
                     "--source", str(obliteratus_source), "--no-verify", "--yes", "--json"], env)
    assert json.loads(again.stdout)["status"] == "unchanged", again.stderr
