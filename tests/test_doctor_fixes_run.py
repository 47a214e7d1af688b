"""The doctor names the real cause, and every jetson-install command its fixes print is
accepted as printed (run here with --dry-run): the commonest Jetson mistakes, in stub
environments the doctor reads as a user's (support.doctor_env), through the command line.

- the package index's `torch 2.8.0+cpu` in a plain venv (not made by jetson-install);
- a vendor source's CPU build under the pinned version (no `+cpu` label);
- a torch that names a CUDA version but has none compiled in;
- a bitsandbytes whose native library cannot load for a missing dependency, which
  bitsandbytes itself does not name (a real ELF library, its dependency removed).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest
from support import channel_python
from support.cli import run_cli
from support.doctor_env import make_env
from support.installer import Installer

SAMPLE = "sample:agx-orin-64gb-jp6.2"


def doctor(environment: Path) -> Dict[str, Dict[str, str]]:
    result = run_cli("doctor", "--root", SAMPLE, "--venv", str(environment), "--json")
    assert result.returncode == 1, result.stderr
    return {check["id"]: check for check in json.loads(result.stdout)["checks"]}


def printed_commands(fix: str) -> List[List[str]]:
    """Each jetson-install command in a fix, as words, its placeholder URL filled in."""
    commands = []
    for part in re.split(r";\s+(?:or\s+)?", fix):
        found = re.search(r"jetson-install (?:obliteratus|plan|lock|doctor|channels) .*", part)
        if found is None:
            continue
        words = shlex.split(found.group(0).split(" (", 1)[0])
        commands.append([word if word != "URL" else "http://127.0.0.1:9/simple" for word in words])
    return commands


def assert_every_install_fix_runs(checks: Dict[str, Dict[str, str]]) -> int:
    ran = 0
    for check in checks.values():
        for words in printed_commands(check.get("fix") or ""):
            assert words[1] == "obliteratus", (check["id"], words)
            assert "--root" in words and SAMPLE in words, (check["id"], "the doctor's --root is kept", words)
            accepted = run_cli(*words[1:], "--dry-run")
            assert accepted.returncode == 0, (check["id"], words, accepted.stderr)
            ran += 1
    return ran


def test_the_package_indexs_cpu_torch_gets_the_channels_set_in_a_command_that_runs(tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    make_env(environment, torch_version="2.8.0+cpu", torch_cuda=None, cuda_available=False, device_count=0,
             bnb_library="cpu")
    checks = doctor(environment)
    build = checks["torch-build"]
    assert build["status"] == "fail"
    assert "the package index's CPU-only build (+cpu" in build["detail"]
    # The channel's preferred set (torch 2.8.0), never the JetPack 6.1 fallback wheel (2.5.0a0).
    assert "--vendor-fallback" not in build["fix"] and "2.5.0a0" not in build["fix"]
    assert build["fix"].startswith("install the channel's vendor set in an environment jetson-install makes: "
                                   f"jetson-install obliteratus --venv {environment}-jetson-install --root {SAMPLE}")
    assert '"torch==2.8.0"' in build["fix"]  # or in place, from the channel's index
    assert assert_every_install_fix_runs(checks) >= 1


def test_a_vendor_cpu_build_under_the_pinned_version_points_at_another_source(tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    make_env(environment, torch_version="2.8.0", torch_cuda=None, cuda_available=False, device_count=0,
             bnb_library="cpu")
    checks = doctor(environment)
    build = checks["torch-build"]
    assert build["status"] == "fail" and "is a CPU-only build (torch.version.cuda is None)" in build["detail"]
    assert "package index" not in build["detail"]
    # The vendor source served it: reinstalling from there brings it back.
    assert "install from the channel's fallback source" in build["fix"] and "--vendor-fallback" in build["fix"]
    assert assert_every_install_fix_runs(checks) >= 1


def test_a_torch_naming_cuda_without_cuda_compiled_in_is_not_the_vendor_build(tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    make_env(environment, cuda_built=False, cuda_available=False, device_count=0)
    checks = doctor(environment)
    build = checks["torch-build"]
    assert build["status"] == "fail"
    assert build["detail"] == ("torch 2.8.0 names CUDA 12.6 but has no CUDA compiled in "
                               "(torch.backends.cuda.is_built() is False)")
    assert assert_every_install_fix_runs(checks) >= 1


def _library_needing(folder: Path, needed: str) -> Path:
    """A real shared library whose DT_NEEDED names `needed`, which then is not anywhere."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (it builds the ELF library this test loads)")
    work = folder / "build"
    work.mkdir()
    (work / "dep.c").write_text("int dep(void) { return 1; }\n")
    (work / "lib.c").write_text("int dep(void);\nint lib(void) { return dep(); }\n")
    subprocess.run([gcc, "-shared", "-fPIC", f"-Wl,-soname,{needed}", "-o", str(work / needed), str(work / "dep.c")],
                   check=True)
    library = folder / "libbitsandbytes_cpu.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(library), str(work / "lib.c"), str(work / needed)], check=True)
    shutil.rmtree(work)
    return library


def test_a_native_library_missing_a_dependency_is_named_with_its_package(tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    # What bitsandbytes 0.49.2 and 0.50.2 say when their library cannot load: not why.
    make_env(environment, torch_version="2.8.0", torch_cuda=None, cuda_available=False, device_count=0,
             bnb_load_error="XPU/CPU can run without native library.")
    (site_packages,) = environment.glob("lib/python*/site-packages")
    _library_needing(site_packages / "bitsandbytes", "libcudss.so.0")
    checks = doctor(environment)
    library = checks["bnb-library"]
    assert library["status"] == "fail"
    assert library["detail"].startswith("bitsandbytes 0.46.1 cannot load libbitsandbytes_cpu.so: it needs "
                                        "libcudss.so.0, which is not installed (apt: cudss; the loader: ")
    # cudss is a package of NVIDIA's CUDA repository: the fix adds it first.
    assert library["fix"] == ("wget https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/"
                              "cuda-keyring_1.1-1_all.deb && sudo dpkg -i cuda-keyring_1.1-1_all.deb && "
                              "sudo apt-get update && sudo apt-get install cudss")


# -- the doctor's own fixes, run as printed, in an environment jetson-install made ----------------

def doctor_of(installer: Installer, *options: str) -> Dict[str, Dict[str, str]]:
    result = run_cli("doctor", "--venv", str(installer.venv), "--root", SAMPLE, "--json", *options, env=installer.env)
    assert result.returncode in (0, 1), result.stderr
    return {check["id"]: check for check in json.loads(result.stdout)["checks"]}


def printed_uv_installs(fix: str) -> List[str]:
    """Each `uv pip install` a fix prints, as printed, without its trailing note."""
    parts = re.split(r";\s+(?:or\s+)?", fix)
    return [re.sub(r" \(channel [^)]*\)$", "", part) for part in parts if re.match(r"\S*uv pip install ", part)]


def install_with_channel_python(installer: Installer) -> None:
    args = installer.args()
    args[args.index("--python") + 1] = channel_python()
    result = run_cli(*args, env=installer.env)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_the_vendor_reinstalls_the_doctor_prints_run_as_printed_and_break_no_check_that_passed(
        installer: Installer) -> None:
    """A stub torch sees no GPU, so the doctor prints the channel's vendor reinstalls; run as
    printed, they put the same wheels back (uv then writes REQUESTED, lists it in RECORD and
    drops direct_url.json): every check that passed before passes after."""
    install_with_channel_python(installer)
    before = doctor_of(installer)
    assert before["torch-build"]["status"] == "ok" and before["cuda-available"]["status"] == "fail"
    commands = [command for check in before.values() if check["status"] == "fail"
                for command in printed_uv_installs(check.get("fix") or "")]
    assert any("--reinstall-package torch " in command for command in commands), before["cuda-available"]["fix"]
    assert any("--reinstall-package bitsandbytes " in command for command in commands), commands
    for command in commands:
        ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=installer.env, timeout=300)
        assert ran.returncode == 0, (command, ran.stderr)
    (site_packages,) = installer.venv.glob("lib/python*/site-packages")
    (torch_info,) = site_packages.glob("torch-*.dist-info")
    assert f"{torch_info.name}/REQUESTED," in (torch_info / "RECORD").read_text()  # uv's own rows, as the user saw
    after = doctor_of(installer)
    broken = {name: after[name]["detail"] for name, check in before.items()
              if check["status"] == "ok" and after[name]["status"] != "ok"}
    assert broken == {}
    no_gpu = doctor_of(installer, "--no-gpu")
    assert no_gpu["torch-build"]["status"] == "ok", no_gpu["torch-build"]["detail"]


@pytest.mark.slow
def test_a_bitsandbytes_from_another_file_is_named_by_the_bitsandbytes_check_not_torchs(
        installer: Installer, tmp_path: Path) -> None:
    from support.stub_projects import VENDOR_BITSANDBYTES, _bnb_modules
    from support.wheels import build_wheel

    install_with_channel_python(installer)
    # The same version from another file: one of its modules differs.
    modules = {path: body + "# another build\n" for path, body in _bnb_modules(True).items()}
    other = build_wheel(tmp_path / "other", "bitsandbytes", VENDOR_BITSANDBYTES, modules=modules,
                        requires=("torch<3,>=2.2", "numpy>=1.17"), source_index="other")
    uv_bin = __import__("uv").find_uv_bin()
    swapped = subprocess.run([uv_bin, "pip", "install", "--python", str(installer.venv / "bin" / "python"), "--no-deps",
                              "--reinstall", str(other)], capture_output=True, text=True, env=installer.env, timeout=300)
    assert swapped.returncode == 0, swapped.stderr
    checks = doctor_of(installer)
    assert checks["torch-build"]["status"] == "ok", checks["torch-build"]["detail"]
    library = checks["bnb-library"]
    assert library["status"] == "fail"
    assert library["detail"] == (f"not the installed vendor build: bitsandbytes {VENDOR_BITSANDBYTES} has other files "
                                 f"than the installed bitsandbytes-{VENDOR_BITSANDBYTES}-py3-none-any.whl (their RECORD "
                                 "hashes differ: reinstalled from another file)")
    assert library["fix"].startswith("jetson-install obliteratus ")
