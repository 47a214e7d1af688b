"""Targets are data: `jetson-install torch` (the protected stack for any project, with --with),
OBLITERATUS as one entry of the catalog's targets, and a second target that installs with no
code change. Installs run against the loopback stub indexes; the stand-ins are CPU-only stubs
of the real projects (ultralytics asks for torch and torchvision as the real one does)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from support import VENDOR_PINS, isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.planned import assert_ran_as_planned, assert_vendor_set_pinned
from support.wheels import build_wheel
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs

TOP = Path(__file__).resolve().parent.parent
ORIN = "sample:agx-orin-64gb-jp6.2"

# A second target, as a catalog would carry it: a project of its own with its own smoke import.
TINY_TARGET = '''
[targets.tinyproj]
title = "TinyProj"
summary = "Install TinyProj on the protected torch stack."
distribution = "tinyproj"
git = "https://example.invalid/tinyproj"
ref = "v1.0"
requires_python = ">=3.8"
requires_torch = ">=2.2"
smoke = ["python", "-c", "import tinyproj; print(tinyproj.device())"]

'''


def _catalog(tmp_path: Path, vendor_dir: Path, extra: str = "") -> Path:
    text = stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir)
    at = text.index("[[channels]]")
    path = tmp_path / "wheels-index.toml"
    path.write_text(text[:at] + extra + text[at:])
    return path


def _env(tmp_path: Path, catalog: Path) -> Dict[str, str]:
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


def _install(target: str, venv: Path, env: Dict[str, str], vendor: str, public: str,
             *extra: str) -> Tuple[int, Dict[str, Any], str]:
    result = run_cli(target, "--root", ORIN, "--venv", str(venv), "--python", sys.executable, "--vendor-index", vendor,
                     "--default-index", public, "--no-verify", "--yes", "--json", *extra, env=env)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


@pytest.fixture
def stack(tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
          ) -> Tuple[Dict[str, str], str, str]:
    """The stub indexes with CPU stand-ins of real projects a Jetson user puts on the stack."""
    public_dir = private_index_dirs.public
    build_wheel(public_dir, "ultralytics", "8.3.0", requires=("torch>=1.8.0", "torchvision>=0.9.0", "numpy>=1.23.0"),
                source_index="public")
    build_wheel(public_dir, "wants-new-torch", "1.0", requires=("torch>=2.9",), source_index="public")
    catalog = _catalog(tmp_path, private_index_dirs.vendor, TINY_TARGET)
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(public_dir)
    return _env(tmp_path, catalog), vendor.url, public.url


def _python(venv: Path, code: str, env: Dict[str, str]) -> str:
    import subprocess

    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_torch_makes_the_protected_stack_with_additions_and_a_rerun_keeps_them(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, data, stderr = _install("torch", venv, env, vendor, public, "--with", "ultralytics")
    assert code == 0, stderr
    assert data["command"] == "torch"
    assert_ran_as_planned(data)
    assert assert_vendor_set_pinned(venv, list(VENDOR_PINS)) == VENDOR_PINS
    # The addition took the vendor torch, not the index's newer CPU one.
    assert _python(venv, "import importlib.metadata as m, torch; print(m.version('ultralytics'), "
                         "torch.__source_index__)", env) == "8.3.0 vendor"
    assert (venv / "jetson-install" / "added.txt").read_text() == "ultralytics\n"
    # No OBLITERATUS anywhere: the stack alone, and what was added.
    assert "obliteratus" not in data["installed"]
    target = next(step for step in data["plan_steps"] if step["id"] == "target")
    assert target["title"] == "install ultralytics under the vendor constraints"
    # A re-run without --with keeps the addition: the plan says so, and nothing changes.
    plan = run_cli("plan", "torch", "--root", ORIN, "--venv", str(venv), "--json", env=env)
    assert json.loads(plan.stdout)["additions"] == ["ultralytics"], plan.stderr
    code, again, stderr = _install("torch", venv, env, vendor, public)
    assert code == 0 and again["status"] == "unchanged", stderr


@pytest.mark.slow
def test_an_addition_that_needs_another_torch_fails_with_uvs_conflict_and_changes_nothing(
        tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, data, _stderr = _install("torch", venv, env, vendor, public, "--with", "wants-new-torch")
    assert code == 1
    assert data["error"]["step"] == "target", data["error"]
    # uv's own reason, naming the package and the torch it wants.
    assert "wants-new-torch" in data["error"]["message"] and "torch" in data["error"]["message"]
    assert "the vendor pins cannot change" in data["error"]["fix"] or "torch" in data["error"]["fix"]
    assert not venv.exists() and "no environment was made" in data["error"]["message"]


@pytest.mark.slow
def test_the_torch_stacks_doctor_says_which_checks_it_left_out(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, _, stderr = _install("torch", venv, env, vendor, public)
    assert code == 0, stderr
    doctor = run_cli("doctor", "--venv", str(venv), "--root", ORIN, "--json", env=env)
    checks = {check["id"]: check for check in json.loads(doctor.stdout)["checks"]}
    listed = run_cli("doctor", "--list-checks", "--json", env=env)
    # Every check is in the evidence (complete evidence, as a `cuda` label needs); OBLITERATUS'
    # own are not applicable, and say why.
    assert set(checks) == {check["id"] for check in json.loads(listed.stdout)}
    for own in ("obliteratus", "jetson-contract"):
        assert checks[own]["status"] == "not_applicable", checks[own]
        assert "`jetson-install torch`, without OBLITERATUS" in checks[own]["detail"]
    assert checks["transformers-torch"]["status"] == "not_applicable"
    assert checks["torch-build"]["status"] == "ok"
    text = run_cli("doctor", "--venv", str(venv), "--root", ORIN, env=env)
    assert "OBLITERATUS's own check: this environment was made by `jetson-install torch`" in text.stdout


@pytest.mark.slow
def test_a_second_target_in_the_catalog_installs_with_no_code_change(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    wheel = build_wheel(tmp_path / "dist", "tinyproj", "1.0", requires=("torch>=2.2",),
                        init_body="def device():\n    import torch\n    return 'cuda' if torch.cuda.is_available() "
                                  "else 'cpu'\n")
    helped = run_cli("--help", env=env)
    assert "tinyproj" in helped.stdout and "Install TinyProj on the protected torch stack." in helped.stdout
    venv = tmp_path / "tiny"
    code, data, stderr = _install("tinyproj", venv, env, vendor, public, "--source", wheel.as_uri())
    assert code == 0, stderr
    assert data["command"] == "tinyproj"
    assert_ran_as_planned(data)
    check = next(step for step in data["steps"] if step["id"] == "check")
    assert check["detail"].startswith("dependencies consistent; TinyProj imports (device: ")
    assert data["installed"]["tinyproj"] == "1.0" and "obliteratus" not in data["installed"]
    doctor = run_cli("doctor", "--venv", str(venv), "--root", ORIN, "--json", env=env)
    checks = {check["id"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["obliteratus"]["status"] == "not_applicable"
    assert "`jetson-install tinyproj`" in checks["obliteratus"]["detail"]


@pytest.mark.parametrize(("argv", "message", "fix"), [
    # Option words, not a whole command: one would drop the command's other options (plan, --root, a --dry-run).
    (["torch", "--source", "/tmp/project"], "--source /tmp/project: `torch` has no source of its own",
     "run the same command with --with /tmp/project in place of --source /tmp/project"),
    (["torch", "--ref", "v1"], "--ref v1: `torch` has no source of its own",
     "drop --ref (a git project goes on the stack at a ref as --with 'NAME @ git+URL@REF')"),
    (["torch", "--with", "not a requirement!"], "--with 'not a requirement!' is not a requirement",
     "e.g. --with 'transformers>=4.40'"),
    (["torch", "--with", "./no-such-folder"], "--with ./no-such-folder: no Python project there",
     "a package name (e.g. --with transformers)"),
])
def test_bad_additions_and_sources_are_one_line_with_the_fix(argv: List[str], message: str, fix: str,
                                                             tmp_path: Path) -> None:
    result = run_cli("plan", *argv, "--root", ORIN, env=isolated_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: {message}"), result.stderr
    assert lines[1].startswith("  fix: ") and fix in lines[1] and len(lines) == 2


def test_every_targets_own_checks_are_doctor_checks() -> None:
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.doctor import list_checks

    known = {check_id for check_id, _, _ in list_checks()}
    for target in load_catalog(TOP / "wheels-index.toml").targets.values():
        assert set(target.checks) <= known, target.id


@pytest.mark.parametrize(("entry", "line", "message"), [
    ('[targets.tiny]\ntitle = "T"\nsummary = "S"\nrequires_python = ">=3.8"\ndistribution = "tiny"\n'
     'smoke = ["python", "-c", "pass"]\n', 5, "target 'tiny': key 'distribution' needs 'git' and 'ref' beside it"),
    ('[targets.tiny]\ntitle = "T"\nsummary = "S"\nrequires_python = ">=3.8"\nsmoke = []\n', 5,
     "target 'tiny': key 'smoke' has []: it must be the command that proves the target imports"),
    ('[targets.tiny]\ntitle = "T"\nsummary = "S"\nrequires_python = ">=3.8"\nsmoke = ["python"]\nrunner = "x"\n', 6,
     "target 'tiny': key 'runner' is unknown (known: checks, distribution, git, quantization_extra"),
    ('[targets.Tiny]\ntitle = "T"\nsummary = "S"\nrequires_python = ">=3.8"\nsmoke = ["python"]\n', 1,
     "top level: key 'targets' names 'Tiny', which is not a command name: lowercase letters, digits and '-'"),
    ('[targets.tiny]\ntitle = "T"\nsummary = "S"\nrequires_python = ">=3.8"\nsmoke = ["python"]\n'
     'quantization_extra_since = "0.2"\n', 6, "key 'quantization_extra_since' needs 'quantization_extra' beside it"),
])
def test_a_wrong_target_entry_is_named_by_file_and_line(entry: str, line: int, message: str, tmp_path: Path) -> None:
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.base.errors import CatalogError

    real = (TOP / "wheels-index.toml").read_text()
    at = real.index("[[channels]]")
    before = real[:at]
    path = tmp_path / "wheels-index.toml"
    path.write_text(before + entry + "\n" + real[at:])
    with pytest.raises(CatalogError) as raised:
        load_catalog(path)
    start = before.count("\n")
    assert raised.value.message.startswith(f"{path}:{start + line}: "), raised.value.message
    assert message in raised.value.message


def test_obliteratus_extra_follows_the_ref_in_the_data() -> None:
    from jetson_install.catalog.catalog import load_catalog

    target = load_catalog(TOP / "wheels-index.toml").targets["obliteratus"]
    assert target.extra_for("v0.1.2") is None
    assert target.extra_for("v0.1.3") == target.extra_for("main") == target.extra_for("0.2.0") == "quantization"


def test_a_lock_names_its_target_and_another_targets_install_refuses_it() -> None:
    from jetson_install.catalog.lock_file import Lock, lock_mismatch, parse_lock, render_lock

    lock = Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "none (the stack alone)", None, "0", (),
                target="torch")
    text = render_lock(lock)
    assert text.splitlines()[0].endswith("install with `jetson-install torch --lock FILE`")
    read = parse_lock(text, "torch.lock")
    assert read.target == "torch"
    assert lock_mismatch(read, "jp6-cu126", "3.10", "aarch64", "torch") is None
    assert lock_mismatch(read, "jp6-cu126", "3.10", "aarch64", "obliteratus") == (
        "the lock was made by `jetson-install lock torch`, and this is `jetson-install obliteratus`")
    # A lock made before there were targets is OBLITERATUS'.
    old = text.replace("jetson-install torch --lock", "jetson-install obliteratus --lock")
    assert parse_lock(old, "old.lock").target == "obliteratus"


def test_help_lists_the_targets_of_a_catalog_it_does_not_validate_and_their_commands_say_its_mistake(
        tmp_path: Path) -> None:
    real = (TOP / "wheels-index.toml").read_text()
    path = tmp_path / "wheels-index.toml"
    path.write_text(real.replace("schema_version = 2", "schema_version = 9", 1))
    env = {**isolated_env(tmp_path), "JETSON_INSTALL_WHEELS_INDEX": str(path)}
    shown = run_cli("--help", env=env)
    assert shown.returncode == 0
    assert any(line.split()[:1] == ["torch"] for line in shown.stdout.splitlines()), shown.stdout
    for argv in (["torch", "--dry-run"], ["plan", "obliteratus"]):
        result = run_cli(*argv, "--root", ORIN, env=env, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"error: {path}:"), result.stderr
        assert "schema_version" in result.stderr.splitlines()[0]


def test_help_reads_the_targets_without_loading_the_catalog() -> None:
    probe = ("import sys, runpy; sys.argv = ['jetson-install', '--help']\n"
             "try:\n    runpy.run_module('jetson_install', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('LOADED', sorted(m for m in sys.modules if m in ('jetson_install.catalog.catalog', 'packaging')))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "LOADED []" in result.stdout and "  obliteratus " in result.stdout, result.stdout + result.stderr


def test_a_catalog_that_is_not_toml_still_gives_help_and_a_target_command_names_its_line_and_reads_a_value_across_a_header_like_line(
        tmp_path: Path) -> None:
    real = (TOP / "wheels-index.toml").read_text()
    path = tmp_path / "wheels-index.toml"
    env = {**isolated_env(tmp_path), "JETSON_INSTALL_WHEELS_INDEX": str(path)}
    # Not TOML: --help still answers, and a target's command says the file's line, not "No such command".
    path.write_text(real + "\n[[channels]\n")
    shown = run_cli("--help", env=env)
    assert shown.returncode == 0 and "  detect " in shown.stdout, shown.stdout
    for argv in (["plan", "obliteratus", "--root", ORIN], ["obliteratus", "--root", ORIN, "--dry-run"]):
        result = run_cli(*argv, env=env, cwd=tmp_path)
        assert result.returncode == 2 and "invalid TOML" in result.stderr.splitlines()[0], result.stderr
        assert "No such command" not in result.stderr
    # A target's multi-line summary holding a line that looks like a header: read as the file says.
    summary = 'summary = """Install OBLITERATUS\n[channels]\non the stack."""'
    path.write_text(re.sub(r'^summary = ".*"$', summary.replace("\\", "\\\\"), real, count=1, flags=re.M))
    shown = run_cli("--help", env=env)
    assert shown.returncode == 0 and re.search(r"^  obliteratus +Install OBLITERATUS", shown.stdout, re.M), shown.stdout
