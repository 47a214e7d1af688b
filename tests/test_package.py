"""The package as it is published: the sdist and wheel hatchling builds, their metadata and
contents, and the tool run from the installed wheel (no checkout beside it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Dict, List

import pytest
from support.lanes import lane_unavailable

TOP = Path(__file__).resolve().parent.parent
DEPENDENCIES = ("click", "distro", "packaging", "platformdirs", "uv")


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """The sdist and the wheel, built without isolation by the hatchling the tests installed."""
    pytest.importorskip("hatchling", reason="install the test extra: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "hatchling", "build", "-d", str(out)], cwd=TOP,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    built = {path.suffix: path for path in out.iterdir()}
    return {"wheel": built[".whl"], "sdist": built[".gz"]}


def wheel_metadata(wheel: Path) -> "tuple[Message, List[str]]":
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(metadata).decode()), names


def test_the_wheel_says_what_it_is_and_carries_its_license(dists: Dict[str, Path]) -> None:
    from jetson_install import __version__

    metadata, names = wheel_metadata(dists["wheel"])
    assert metadata["Name"] == "jetson-install" and metadata["Version"] == __version__
    assert metadata["License-Expression"] == "MIT" and metadata["License-File"] == "LICENSE"
    assert metadata["Requires-Python"] == ">=3.8"
    requires = " ".join(metadata.get_all("Requires-Dist") or [])
    assert all(name in requires for name in DEPENDENCIES)
    assert "Project-URL" not in metadata  # none until the repository is public
    assert f"jetson_install-{__version__}.dist-info/licenses/LICENSE" in names
    entry_points = [n for n in names if n.endswith("entry_points.txt")]
    with zipfile.ZipFile(dists["wheel"]) as archive:
        assert "jetson-install = jetson_install.__main__:main" in archive.read(entry_points[0]).decode()


def test_the_wheel_tells_the_index_what_the_tool_is_for(dists: Dict[str, Path]) -> None:
    metadata, _ = wheel_metadata(dists["wheel"])
    classifiers = metadata.get_all("Classifier") or []
    for version in ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    for classifier in ("Operating System :: POSIX :: Linux", "Environment :: Console",
                       "Topic :: Scientific/Engineering :: Artificial Intelligence", "Topic :: System :: Installation/Setup"):
        assert classifier in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # License-Expression says it
    # hatchling writes them sorted
    assert metadata["Keywords"].split(",") == sorted(["jetson", "jetpack", "l4t", "pytorch", "cuda", "nvidia", "obliteratus"])


def test_the_wheel_carries_the_data_the_tool_reads_and_nothing_of_the_checkout(dists: Dict[str, Path]) -> None:
    _, names = wheel_metadata(dists["wheel"])
    for needed in ("jetson_install/catalog/wheels-index.toml", "jetson_install/board/platform-data.toml",
                   "jetson_install/base/evidence.schema.json", "jetson_install/probes/torch_probe.py",
                   "jetson_install/probes/bnb_probe.py", "jetson_install/planning/routes/preflight.toml",
                   "jetson_install/planning/bitsandbytes_source.py", "jetson_install/planning/bitsandbytes-releases.toml",
                   # Each data file's schema, which its reader checks it against.
                   "jetson_install/catalog/wheels-index.schema.json", "jetson_install/catalog/config.schema.json",
                   "jetson_install/board/platform-data.schema.json", "jetson_install/planning/routes/preflight.schema.json",
                   "jetson_install/planning/bitsandbytes-releases.schema.json"):
        assert needed in names, needed
    assert any(name.startswith("jetson_install/board/samples/agx-orin-64gb-jp6.2/") for name in names)
    assert not [name for name in names if name.startswith(("tests/", "bench/", "constraints/", "docs/"))]


def test_the_sdist_builds_the_same_wheel(dists: Dict[str, Path], tmp_path: Path) -> None:
    with tarfile.open(dists["sdist"]) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path)
    top = names[0].split("/")[0]
    for needed in ("LICENSE", "README.md", "pyproject.toml", "wheels-index.toml", "jetson_install/cli/main.py"):
        assert f"{top}/{needed}" in names, needed
    result = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "out")],
                            cwd=tmp_path / top, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rebuilt = next((tmp_path / "out").glob("*.whl"))
    assert sorted(wheel_metadata(rebuilt)[1]) == sorted(wheel_metadata(dists["wheel"])[1])


def run_installed(command: List[str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETSON_", "PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def check_installed_tool(command: List[str], cwd: Path) -> None:
    """What a user runs first, from an installed wheel, away from any checkout."""
    from jetson_install import __version__

    assert run_installed(command, "--version", cwd=cwd).stdout.splitlines()[0] == f"jetson-install {__version__}"
    plan = run_installed(command, "plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", cwd=cwd)
    assert plan.returncode == 0, plan.stderr
    assert "jp6-cu126" in plan.stdout
    channels = run_installed(command, "channels", cwd=cwd)
    assert channels.returncode == 0 and "valid" in channels.stdout
    constraints = run_installed(command, "constraints", cwd=cwd)
    assert constraints.returncode == 2 and "maintainer command" in constraints.stderr


def test_the_wheel_installed_in_a_fresh_environment_runs_without_a_checkout(dists: Dict[str, Path], tmp_path: Path) -> None:
    """The pipx route without pipx: a new environment holding only the wheel; its dependencies
    come from the test environment (a .pth file), so nothing is downloaded."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    with zipfile.ZipFile(dists["wheel"]) as archive:
        archive.extractall(site)
    import click

    (site / "dependencies.pth").write_text(str(Path(click.__file__).parent.parent) + "\n")
    script = venv / "bin" / "jetson-install"
    script.write_text(f"#!{venv / 'bin' / 'python'}\nfrom jetson_install.__main__ import main\nmain()\n")
    script.chmod(0o755)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import jetson_install; print(jetson_install.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    check_installed_tool([str(script)], cwd=tmp_path)


PIPX_VENV = TOP / ".venv-pipx"


@pytest.mark.lane
def test_pipx_installs_the_wheel_and_the_tool_runs(dists: Dict[str, Path], tmp_path: Path) -> None:
    """The README's first install line, from the built wheel; pipx takes the dependencies from
    the package registry (prepared by tests/setup.d/20-pipx)."""
    pipx = PIPX_VENV / "bin" / "pipx"
    if not pipx.exists():
        lane_unavailable("pipx", f"no {pipx} (tests/setup.d/20-pipx makes it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETSON_", "PIPX_", "VIRTUAL_ENV"))}
    env.update(PIPX_HOME=str(tmp_path / "pipx-home"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"))
    result = subprocess.run([str(pipx), "install", str(dists["wheel"])], capture_output=True, text=True, env=env,
                            timeout=600)
    if result.returncode != 0 and "Could not find a version" in result.stdout + result.stderr:
        lane_unavailable("pipx", "the package registry did not answer")
    assert result.returncode == 0, result.stdout + result.stderr
    check_installed_tool([str(tmp_path / "bin" / "jetson-install")], cwd=tmp_path)
    shutil.rmtree(tmp_path / "pipx-home", ignore_errors=True)
