"""What --with and `add` put on the stack is proven, not only installed: its top-level modules
import (from its installed metadata) in the install's check step and in the doctor, and a
failure names the shared library the loader missed and the apt package that provides it.
--check-command runs a project's own smoke command there too, and is kept with the environment.

The stand-in for ultralytics on a headless image is a stub whose import raises what OpenCV's
does without libGL (`ImportError: libGL.so.1: cannot open shared object file`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import pytest
from support import isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.doctor_env import make_env, run
from support.index_server import LoopbackIndex
from support.planned import assert_ran_as_planned
from support.stub_projects import IndexDirs
from support.elf_files import Code, fat_binary, shared_object
from support.wheels import build_wheel

from jetson_install.probes import additions_command

TOP = Path(__file__).resolve().parent.parent
ORIN = "sample:agx-orin-64gb-jp6.2"
NO_LIBGL = "libGL.so.1: cannot open shared object file: No such file or directory"
# What `import cv2` raises on an image without libgl1, as the stub's import raises it.
NEEDS_GL = f"raise ImportError({NO_LIBGL!r})\n"


def _dist(site: Path, name: str, version: str, files: Mapping[str, str], top_level: str = "",
          direct_url: str = "") -> None:
    """An installed project: its files and a dist-info whose RECORD lists them."""
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    dist_info = site / f"{name}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if top_level:
        (dist_info / "top_level.txt").write_text(top_level)
    if direct_url:
        (dist_info / "direct_url.json").write_text(json.dumps({"url": direct_url, "dir_info": {}}))
    (dist_info / "RECORD").write_text("".join(f"{path},,\n" for path in files) + f"{dist_info.name}/RECORD,,\n")


def _probe(site: Path, *requirements: str) -> List[Dict[str, Any]]:
    done = subprocess.run(list(additions_command(sys.executable, requirements)), capture_output=True, text=True,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["probe"] == "additions"
    entries: List[Dict[str, Any]] = report["additions"]
    return entries


def test_the_probe_imports_each_additions_top_level_modules_and_names_the_one_that_fails(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # top_level.txt names the modules where the project has one; otherwise its RECORD does.
    _dist(site, "needs-gl", "8.3.0", {"needs_gl/__init__.py": NEEDS_GL}, top_level="needs_gl\n")
    _dist(site, "Plain_Project", "1.0", {"plain/__init__.py": "", "plain_single.py": "", "_private.py": "raise SystemExit"})
    _dist(site, "from-folder", "0.1", {"from_folder.py": ""}, direct_url=(tmp_path / "checkout").as_uri())
    (tmp_path / "checkout").mkdir()
    found = {entry["requirement"]: entry for entry in
             _probe(site, "needs-gl>=8", "plain-project", str(tmp_path / "checkout"), "git+https://h.invalid/o/r@v1",
                    "absent")}
    assert found["needs-gl>=8"] == {"requirement": "needs-gl>=8", "distribution": "needs-gl", "version": "8.3.0",
                                    "modules": ["needs_gl"], "module": "needs_gl", "error": f"ImportError: {NO_LIBGL}"}
    assert found["plain-project"]["modules"] == ["plain", "plain_single"] and found["plain-project"]["error"] is None
    assert found[str(tmp_path / "checkout")]["distribution"] == "from-folder"
    assert found[str(tmp_path / "checkout")]["error"] is None
    # A URL whose project is not found is said, never taken for a failed import; a name is an error.
    assert (found["git+https://h.invalid/o/r@v1"]["distribution"], found["git+https://h.invalid/o/r@v1"]["error"]) \
        == (None, None)
    assert found["absent"]["error"] == "not installed in this environment"


def _stub_addition(python: str) -> None:
    (site,) = Path(python).parent.parent.glob("lib/python*/site-packages")
    _dist(site, "needs-gl", "8.3.0", {"needs_gl/__init__.py": NEEDS_GL}, top_level="needs_gl\n")


def test_the_doctor_fails_an_addition_that_cannot_load_a_library_naming_the_apt_package(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    _stub_addition(python)
    report = run(python, additions=("needs-gl",))
    check = report.check("additions")
    assert check.status == "fail"
    assert check.detail == f"needs-gl: import needs_gl failed: ImportError: {NO_LIBGL} (libGL.so.1 is in apt: libgl1)"
    assert check.fix is not None and check.fix.startswith("sudo apt-get install libgl1, then run: jetson-install ")
    assert report.exit_code != 0
    (project,) = report.to_json()["additions"]["projects"]
    assert project["imported"] is False and project["failed_module"] == "needs_gl"
    assert project["missing_library"] == {"file": "libGL.so.1", "provided_by": "apt: libgl1"}


def _gpu_addition(python: str, *codes: Code) -> None:
    """An added project whose extension module carries GPU code for `codes` only."""
    (site,) = Path(python).parent.parent.glob("lib/python*/site-packages")
    _dist(site, "gpu-addon", "1.0", {"gpu_addon/__init__.py": "", "gpu_addon/_C.so": ""}, top_level="gpu_addon\n")
    (site / "gpu_addon" / "_C.so").write_bytes(shared_object("_C.so", fatbin=fat_binary(list(codes))))


def test_the_doctor_fails_an_addition_whose_gpu_code_cannot_run_here_and_records_each_file(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    _gpu_addition(python, Code("sass", 90), Code("sass", 110))
    report = run(python, additions=("gpu-addon",))
    check = report.check("additions")
    assert check.status == "fail"
    assert check.detail == ("gpu_addon/_C.so: cannot run here (no sm_87 code and no PTX: CUDA will report 'no kernel "
                            "image is available for execution on the device' at the first kernel)")
    assert check.fix is not None and check.fix.startswith("add a build with code for this GPU, or leave it out, then run: ")
    (recorded,) = report.to_json()["additions"]["gpu_code"]
    assert (recorded["file"], recorded["distribution"], recorded["sass"]) == ("gpu_addon/_C.so", "gpu-addon", ["sm_90", "sm_110"])
    assert recorded["verdict"]["verdict"] == "cannot run here"


def test_the_doctor_passes_code_that_runs_by_the_rule_and_says_so(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    _gpu_addition(python, Code("sass", 80))
    check = run(python, additions=("gpu-addon",)).check("additions")
    assert check.status == "ok"
    assert "GPU code: 1 files read, 1 by CUDA's compatibility rule only (gpu_addon/_C.so: runs by CUDA's compatibility " \
           "rule, not yet shown on this board (sm_80 SASS on sm_87, unproven on tegra CUDA" in check.detail


def test_the_doctor_runs_the_check_commands_and_records_them(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    passing, failing = "python -c 'import sys'", f"python -c \"raise ImportError('{NO_LIBGL}')\""
    report = run(python, check_commands=(passing,))
    assert report.check("additions").status == "ok"
    assert report.check("additions").detail == f"`{passing}` passed"
    assert report.to_json()["additions"]["check_commands"] == [
        {"command": passing, "exit_code": 0, "passed": True, "last_line": None}]
    failed = run(python, check_commands=(passing, failing)).check("additions")
    assert failed.status == "fail" and failed.detail.startswith(f"--check-command {failing} -> ImportError: libGL.so.1")
    assert failed.fix is not None and failed.fix.startswith("sudo apt-get install libgl1, then run: ")


# -- installs against the loopback indexes ----------------------------------------------------


@pytest.fixture
def stack(tmp_path: Path, private_index_dirs: IndexDirs, start_index: Any) -> Tuple[Dict[str, str], str, str]:
    public_dir = private_index_dirs.public
    build_wheel(public_dir, "needs-gl", "8.3.0", requires=("torch>=1.8.0",), init_body=NEEDS_GL, source_index="public")
    build_wheel(public_dir, "imports-fine", "1.0", requires=("torch>=1.8.0",), source_index="public")
    for name, arch in (("gpu-sm90", 90), ("gpu-sm80", 80)):
        module = name.replace("-", "_")
        build_wheel(public_dir, name, "1.0", requires=("torch>=1.8.0",), source_index="public",
                    modules={f"{module}/_C.so": shared_object("_C.so", fatbin=fat_binary([Code("sass", arch)]))})
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor))
    vendor: LoopbackIndex = start_index(private_index_dirs.vendor, name="vendor")
    public: LoopbackIndex = start_index(public_dir)
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env, vendor.url, public.url


def _install(venv: Path, stack: Tuple[Dict[str, str], str, str], *extra: str) -> Tuple[int, Dict[str, Any], str]:
    env, vendor, public = stack
    result = run_cli("torch", "--root", ORIN, "--venv", str(venv), "--python", sys.executable, "--vendor-index", vendor,
                     "--default-index", public, "--no-verify", "--yes", "--json", *extra, env=env)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


@pytest.mark.slow
def test_an_addition_missing_a_system_library_fails_the_check_step_with_its_apt_package(
        tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    venv = tmp_path / "stack"
    code, data, stderr = _install(venv, stack, "--with", "needs-gl")
    assert code == 1, stderr
    assert data["error"]["step"] == "check", data["error"]
    assert data["error"]["message"].startswith(
        f"step 'check' failed: needs-gl: import needs_gl failed: ImportError: {NO_LIBGL} (libGL.so.1 is in apt: libgl1)")
    assert data["error"]["fix"].startswith("sudo apt-get install libgl1, then run: jetson-install torch ")
    assert not venv.exists()  # never "installed" with an addition that does not import


@pytest.mark.slow
def test_an_addition_whose_gpu_code_cannot_run_here_fails_the_check_step_before_the_switch(
        tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    venv = tmp_path / "stack"
    code, data, stderr = _install(venv, stack, "--with", "gpu-sm90")
    assert code == 1, stderr
    assert data["error"]["step"] == "check", data["error"]
    assert data["error"]["message"].startswith(
        "step 'check' failed: gpu-sm90: gpu_sm90/_C.so: cannot run here (no sm_87 code and no PTX: CUDA will report "
        "'no kernel image is available for execution on the device' at the first kernel)")
    assert data["error"]["fix"].startswith("add a build of gpu-sm90 with code for this GPU (sm_87 SASS, or PTX its "
                                           "driver compiles")
    assert not venv.exists()
    # sm_80 SASS on the Orin: the compatibility rule, unproven on JetPack 6: installed, with a warning.
    code, data, stderr = _install(venv, stack, "--with", "gpu-sm80")
    assert code == 0, stderr
    assert any(warning.startswith("gpu-sm80: gpu_sm80/_C.so: runs by CUDA's compatibility rule, not yet shown on this "
                                  "board (sm_80 SASS on sm_87, unproven on tegra CUDA") for warning in data["warnings"])
    check = next(step for step in data["steps"] if step["id"] == "check")
    assert "GPU code of gpu-sm80: 1 file read, 1 by CUDA's compatibility rule only" in check["detail"]


@pytest.mark.slow
def test_additions_and_check_commands_are_proven_recorded_and_kept(
        tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    venv = tmp_path / "stack"
    smoke = "python -c 'import imports_fine'"
    code, data, stderr = _install(venv, stack, "--with", "imports-fine", "--check-command", smoke)
    assert code == 0, stderr
    assert_ran_as_planned(data)
    check = next(step for step in data["steps"] if step["id"] == "check")
    assert "imports-fine 1.0 imports (imports_fine)" in check["detail"] and f"`{smoke}` passed" in check["detail"]
    assert (venv / "jetson-install" / "check-commands.txt").read_text() == f"{smoke}\n"
    evidence = json.loads((venv / "jetson-install" / "evidence.json").read_text())
    (project,) = evidence["additions"]["projects"]
    assert (project["distribution"], project["imported"], project["modules"]) == ("imports-fine", True, ["imports_fine"])
    assert evidence["additions"]["check_commands"][0]["passed"] is True
    assert {c["id"]: c["status"] for c in evidence["checks"]}["additions"] == "ok"
    # A re-run without the options keeps both: the plan says so, and nothing changes.
    env = stack[0]
    plan = json.loads(run_cli("plan", "torch", "--root", ORIN, "--venv", str(venv), "--json", env=env).stdout)
    assert (plan["additions"], plan["check_commands"]) == (["imports-fine"], [smoke])
    code, again, stderr = _install(venv, stack)
    assert code == 0 and again["status"] == "unchanged", stderr
    # The doctor on the environment runs them again.
    doctor = run_cli("doctor", "--venv", str(venv), "--root", ORIN, "--check", "additions", "--json", env=env)
    checks = {c["id"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["additions"]["status"] == "ok", doctor.stderr


@pytest.mark.parametrize(("value", "message"), [
    ("python -c 'unclosed", "--check-command \"python -c 'unclosed\": No closing quotation"),
    ("  ", "--check-command is empty"),
])
def test_a_check_command_that_does_not_split_is_one_line_with_the_fix(value: str, message: str, tmp_path: Path) -> None:
    result = run_cli("plan", "torch", "--root", ORIN, "--check-command", value, env=isolated_env(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: {message}"
    assert lines[1].startswith("  fix: ") and "Traceback" not in result.stderr


@pytest.mark.slow
def test_add_of_a_project_that_does_not_import_keeps_the_environment_in_use(
        tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    venv = tmp_path / "stack"
    smoke = "python -c 'import imports_fine'"
    code, _, stderr = _install(venv, stack, "--with", "imports-fine", "--check-command", smoke)
    assert code == 0, stderr
    before = venv.resolve()
    added = run_cli("add", "--venv", str(venv), "needs-gl", "--check-command", "python -c 'import sys'", "--yes",
                    "--json", env=stack[0])
    assert added.returncode == 1, added.stderr
    error = json.loads(added.stdout)["error"]
    assert error["step"] == "check" and "(libGL.so.1 is in apt: libgl1)" in error["message"], error
    assert error["fix"].startswith("sudo apt-get install libgl1, then run: jetson-install ")
    # The install `add` ran, which the fix runs again, carries the new check command.
    assert "--with needs-gl" in error["fix"] and "--check-command 'python -c '\"'\"'import sys'\"'\"''" in error["fix"]
    assert venv.resolve() == before


def test_the_probe_reports_past_a_module_that_prints_and_leaves_a_thread_running(tmp_path: Path) -> None:
    site = tmp_path / "site"
    chatty = ("import sys, threading, time\nsys.stdout.write('loading...')\n"
              "threading.Thread(target=time.sleep, args=(3600,)).start()\n")
    _dist(site, "chatty", "1.0", {"chatty/__init__.py": chatty}, top_level="chatty\n")
    (entry,) = _probe(site, "chatty")
    assert (entry["distribution"], entry["modules"], entry["error"]) == ("chatty", ["chatty"], None)
