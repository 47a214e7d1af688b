"""Every fix a failure prints is a command the tool accepts, run here as printed, in the failure
that prints it (as tests/test_doctor_fixes_run.py does for the doctor's own fixes): a failed
verify's, a folder this user cannot enter, the strict gate on a preflight, a missing torch for
another Python, the container entrypoint's host check and its environment.

Elsewhere, beside the tests of their own failures: an unreadable release file
(test_platform_reads), `add` of the vendor torch (test_add), a mirror refusing `wheelhouse`
(test_lock_trust), a full disk (test_uv_errors). Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from support import channel_python, needs_obliteratus_python
from support.cli import run_cli
from support.fixtures import as_nobody, serve_cpu_only_torch
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.stub_projects import IndexDirs

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"


def printed_commands(fix: str) -> List[List[str]]:
    """Each jetson-install command in a fix, as words (without the program name)."""
    commands = []
    for part in re.split(r";\s+(?:or\s+)?", fix):
        found = re.search(r"jetson-install [a-z].*", part)
        if found is not None:
            commands.append(shlex.split(found.group(0).split(" (", 1)[0])[1:])
    return commands


# -- a failed verify -------------------------------------------------------------------------

@pytest.fixture
def cpu_mirror(private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], cli_env: Dict[str, str],
               tmp_path: Path) -> LoopbackIndex:
    """A --vendor-index mirror serving a CPU-only torch under the pinned version."""
    return serve_cpu_only_torch(private_index_dirs, start_index, cli_env, tmp_path, "cpu-mirror")


@pytest.mark.slow
def test_a_failed_verify_fix_names_another_source_never_the_removed_environment_or_the_mirror(
        tmp_path: Path, cli_env: Dict[str, str], cpu_mirror: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_source: Path) -> None:
    installer = Installer(tmp_path / "obl", cli_env, cpu_mirror.url, public_index.url, obliteratus_source)
    code, data, stderr = installer.run()
    assert code == 1 and data["error"]["step"] == "verify", stderr
    fix = data["error"]["fix"]
    staging = re.search(r"obl\.d/env-[^ )]*", data["error"]["message"] + json.dumps(data))
    assert staging is not None and staging.group(0) not in fix  # the failed environment is gone
    assert cpu_mirror.url not in fix  # the mirror that served it would serve it again
    assert not list(Path(f"{installer.venv}.d").glob("env-*"))
    commands = printed_commands(fix)
    assert commands, fix
    for words in commands:
        assert words[0] == "obliteratus" and "--vendor-fallback" in words, words
        accepted = run_cli(*words, "--dry-run", env=cli_env)
        assert accepted.returncode == 0, (words, accepted.stderr)


def test_a_mirrors_cpu_labelled_torch_in_an_install_gets_another_source_not_the_mirror_or_the_environment(
        tmp_path: Path) -> None:
    """The package index's `+cpu` label, served by a --vendor-index mirror under the pin: in the
    install's verify, the fix is another source, not this (discarded) environment nor the mirror."""
    from dataclasses import replace

    from support.doctor_env import JP6, JP6_SOURCE, make_env, run

    from jetson_install.catalog.catalog import Channel

    mirror = "http://127.0.0.1:9/mirror/simple"
    source = replace(JP6_SOURCE, index=mirror)
    python = make_env(tmp_path / "env", torch_version="2.8.0+cpu", torch_cuda=None, cuda_available=False,
                      device_count=0, bnb_library="cpu")
    install = f"jetson-install obliteratus --root {SAMPLE} --venv {tmp_path / 'obl'} --vendor-index {mirror} --yes"
    report = run(python, channel=Channel(**dict(JP6.__dict__, sources=(source,))), vendor=source,
                 install_command=install)
    fix = report.check("torch-build").fix
    assert fix == ("install from an index that serves the CUDA 12.6 build of torch: jetson-install obliteratus "
                   f"--root {SAMPLE} --venv {tmp_path / 'obl'} --yes --vendor-index URL")
    assert str(tmp_path / "env") not in fix and mirror not in fix
    (words,) = printed_commands(fix)
    other = [word if word != "URL" else "http://127.0.0.1:9/other/simple" for word in words]
    accepted = run_cli(*other, "--dry-run")
    assert accepted.returncode == 0, accepted.stderr


# -- a folder this user cannot enter ---------------------------------------------------------

def test_a_folder_the_user_cannot_enter_is_named_with_the_permission_it_lacks(nobodys_folder: Path) -> None:
    closed = nobodys_folder / "closed"
    closed.mkdir(mode=0o666)
    closed.chmod(0o666)  # readable and writable, but no one may enter it
    shutil.chown(closed, "nobody")
    result = as_nobody(nobodys_folder, "obliteratus", "--root", SAMPLE, "--venv", str(closed / "venv"),
                       "--python", "/usr/bin/python3", "--vendor-index", "http://127.0.0.1:9/simple", "--default-index", "http://127.0.0.1:9/simple",
                       "--yes")
    # README: a place the user may not use is "the command could not run", 2.
    assert result.returncode == 2, result.stderr
    fix = result.stderr.splitlines()[-1]
    assert fix.startswith(f"  fix: let this user enter {closed} (it lacks execute permission: chmod a+x {closed}), "
                          "or choose another location, then run: jetson-install obliteratus "), fix
    assert "writable" not in fix
    # The fix, as printed: the permission given, the printed command gets past the folder (and
    # on to the indexes, which do not answer here).
    subprocess.run(shlex.split(re.search(r"chmod a\+x [^)]*", fix).group(0)), check=True)  # type: ignore[union-attr]
    again = as_nobody(nobodys_folder, *printed_commands(fix)[-1])
    assert again.returncode == 1, again.stderr
    assert "Permission denied" not in again.stderr and "did not answer" in again.stderr


@needs_obliteratus_python
def test_a_path_folder_the_user_cannot_enter_is_passed_over_in_the_search_for_a_python(nobodys_folder: Path) -> None:
    """As `sudo -u` leaves root's ~/.cargo/bin on PATH: the search goes on past it, as a shell's does."""
    closed = nobodys_folder / "closed"
    closed.mkdir(mode=0o000)
    closed.chmod(0o000)
    found = nobodys_folder / "bin"
    found.mkdir(mode=0o755)
    python = found / "python3.10"  # the channel's Python, answering the version question as one does
    python.write_text('#!/bin/sh\necho "3.10.12 "\n')
    python.chmod(0o755)
    result = as_nobody(nobodys_folder, "obliteratus", "--root", SAMPLE, "--venv", str(nobodys_folder / "home" / "venv"),
                       "--dry-run", path=f"{closed}:{found}:/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    assert "Permission denied" not in result.stderr
    assert f"  python    {python}\n" in result.stdout
    assert f"$ uv venv --no-config --seed --python {python} " in result.stdout


# -- the doctor's gate and its Python --------------------------------------------------------

@pytest.fixture
def plain_venv(tmp_path: Path) -> Path:
    """An environment jetson-install did not make, with nothing in it (this interpreter's Python)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    return tmp_path / "venv"


def test_the_strict_gate_with_preflight_given_says_it_was_given_and_how_to_drop_it(plain_venv: Path) -> None:
    result = run_cli("doctor", "--root", SAMPLE, "--venv", str(plain_venv), "--strict", "--preflight")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: --strict is the Jetson runtime gate, and {plain_venv} is checked as a preflight (--preflight was given)",
        "  fix: drop --preflight to check it as a Jetson environment (or drop --strict)"]
    # As the fix says: without --preflight the gate runs (and fails: nothing is installed).
    gate = run_cli("doctor", "--root", SAMPLE, "--venv", str(plain_venv), "--strict")
    assert gate.returncode == 1, gate.stderr


@pytest.mark.skipif(sys.version_info[:2] == (3, 10), reason="the channel's own Python: no mismatch to show")
def test_a_missing_torch_for_another_python_is_fixed_by_an_install_with_the_channels_python(
        plain_venv: Path, tmp_path: Path) -> None:
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "python3.10").symlink_to(channel_python())
    # The tool looks in /usr/bin and /usr/local/bin before PATH.
    found = next((python for python in ("/usr/bin/python3.10", "/usr/local/bin/python3.10") if os.access(python, os.X_OK)),
                 str(on_path / "python3.10"))
    result = run_cli("doctor", "--root", SAMPLE, "--venv", str(plain_venv), "--json",
                     env=dict(os.environ, PATH=f"{on_path}:{os.environ['PATH']}"))
    checks = {check["id"]: check for check in json.loads(result.stdout)["checks"]}
    fix = checks["torch-import"]["fix"]
    python = "{}.{}.{}".format(*sys.version_info[:3])
    assert fix == (f"channel jp6-cu126's vendor builds are for Python 3.10, this environment's is {python}: "
                   # a venv jetson-install did not make, without OBLITERATUS: judged as the stack alone
                   "install them with Python 3.10: jetson-install torch "
                   f"--venv {plain_venv}-jetson-install --root {SAMPLE} --python {found} "
                   "(a new environment: jetson-install changes only environments it made)")
    assert "uv pip install" not in fix  # the channel's builds would not install into this Python
    commands = printed_commands(fix)
    assert len(commands) == 1
    accepted = run_cli(*commands[0], "--dry-run")
    assert accepted.returncode == 0, accepted.stderr


# -- the container entrypoint ----------------------------------------------------------------

def test_the_entrypoints_fix_for_an_unreadable_host_release_names_its_own_variable(tmp_path: Path) -> None:
    from jetson_install.fleet.container import host_facts, host_mismatch

    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_text("not a release\n")
    built = {"JETSON_INSTALL_IMAGE_L4T_MAJOR": "36"}
    environ = {"JETSON_INSTALL_HOST_SOC": "tegra234"}
    mismatch = host_mismatch(host_facts(tmp_path, environ), built)
    assert mismatch is not None
    assert "--l4t" not in mismatch[1] and "JETSON_INSTALL_HOST_L4T=<the host's release>" in mismatch[1]
    # As the fix says: the variable set, the host is the image's.
    assert host_mismatch(host_facts(tmp_path, dict(environ, JETSON_INSTALL_HOST_L4T="36.4.3")), built) is None


def test_the_entrypoints_fix_for_a_missing_environment_is_its_own_command_and_runs_as_printed(
        tmp_path: Path, plain_venv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The doctor's fix for a missing interpreter names --python, which the entrypoint does not take."""
    from jetson_install.cli.commands import container

    status = tmp_path / "start" / "start-status"  # not this machine's /tmp/jetson-install
    monkeypatch.setattr(container, "START_STATUS", str(status))
    monkeypatch.setattr(container, "START_EVIDENCE", str(tmp_path / "start" / "start-evidence.json"))
    # An Orin host as an image built for it sees it, the image's environment in VIRTUAL_ENV as its Dockerfile sets it.
    env = dict(os.environ, JETSON_INSTALL_IMAGE_L4T_MAJOR="36", JETSON_INSTALL_IMAGE_CAPABILITY="8.7",
               JETSON_INSTALL_IMAGE_CHANNEL="jp6-cu126", JETSON_INSTALL_HOST_L4T="36.4.3",
               JETSON_INSTALL_HOST_SOC="tegra234", VIRTUAL_ENV=str(plain_venv))
    marker = tmp_path / "started"
    missing = tmp_path / "none"
    result = run_cli("container-entrypoint", "--venv", str(missing), "--", "touch", str(marker), env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: container-entrypoint --venv {missing}: no environment there (no bin/python)",
        "  fix: start it with the environment the image was built with: jetson-install container-entrypoint "
        f"--venv {plain_venv} -- touch {marker}"]
    assert not marker.exists() and status.read_text() == "refused\n"  # the HEALTHCHECK need not wait it out
    # As printed: past the environment to the strict doctor, which this empty one fails.
    (words,) = printed_commands(result.stderr.splitlines()[1])
    again = run_cli(*words, env=env)
    assert again.returncode == 1, again.stderr
    assert "no environment" not in again.stderr and "error: the strict doctor did not pass" in again.stderr
    assert not marker.exists() and status.read_text() == "failed\n"
