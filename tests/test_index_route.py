"""The published route, as a board meets it: the sdist and the wheel this tree builds, served
with the tool's dependencies from a loopback PEP 503 index (tests/setup.d/21-index-route
fetched them from uv's default index once), and the README's entry points run against it
exactly as written: `pipx run jetson-install ...`, `pipx install`/`upgrade`, `uvx`; with the
current pipx and Ubuntu 22.04's pipx 1.0.0 (tests/setup.d/20-pipx), on the Pythons JetPack
ships where this machine has them. Nothing here reads the developer's pip, pipx or uv setup."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from support.index_server import LoopbackIndex
from support.lanes import lane_unavailable

from jetson_install import __version__

pytestmark = [pytest.mark.lane, pytest.mark.slow]

TOP = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jetson-install" / "test-lanes" / "index-route"
PIPX = {"current": TOP / ".venv-pipx" / "bin" / "pipx", "1.0.0": TOP / ".venv-pipx" / "pipx-1.0.0" / "bin" / "pipx"}
#: JetPack 5 ships Python 3.8 (Ubuntu 20.04), JetPack 6 3.10 (22.04), JetPack 7 3.12 (24.04).
JETPACK_PYTHONS = ("3.8", "3.10", "3.12")
SAMPLE = "sample:agx-orin-64gb-jp6.2"
#: The version a maintainer's next release would carry, built from a copy of the sdist.
NEXT = re.sub(r"(\d+)$", lambda last: str(int(last.group(1)) + 1), __version__)


def _build(source: Path, out: Path, *targets: str) -> None:
    """hatchling from the test environment, without isolation: nothing is downloaded to build."""
    pytest.importorskip("hatchling", reason="install the test extra: pip install -e '.[test]'")
    flags = [flag for target in targets for flag in ("-t", target)]
    result = subprocess.run([sys.executable, "-m", "hatchling", "build", *flags, "-d", str(out)], cwd=source,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def _unpack_sdist(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(into)
    return into / top


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """This tree's sdist and wheel (folder "this"), and the next version's (folder "next"),
    built from a copy of the sdist whose one version line was bumped, as a release would be."""
    this = tmp_path_factory.mktemp("this")
    _build(TOP, this, "sdist", "wheel")
    copy = _unpack_sdist(next(this.glob("*.tar.gz")), tmp_path_factory.mktemp("copy"))
    # The version's one home, and PKG-INFO, whose metadata hatchling takes when it builds from an sdist.
    for file, line in (("jetson_install/__init__.py", '__version__ = "{}"'), ("PKG-INFO", "Version: {}")):
        text = (copy / file).read_text()
        assert line.format(__version__) in text, file
        (copy / file).write_text(text.replace(line.format(__version__), line.format(NEXT), 1))
    after = tmp_path_factory.mktemp("next")
    _build(copy, after, "sdist", "wheel")
    return {"this": this, "next": after}


@pytest.fixture
def index(releases: Dict[str, Path], tmp_path: Path) -> Iterator[LoopbackIndex]:
    """The dependencies (links into the cache) and this version's sdist and wheel; a test adds
    the next version's files to `index.root` when it wants the index to offer them."""
    if not (CACHE / ".ready").is_file():
        lane_unavailable("index-route", f"no {CACHE} (tests/setup.d/21-index-route fills it)")
    root = tmp_path / "files"
    root.mkdir()
    for path in [*CACHE.glob("*.whl"), *releases["this"].iterdir()]:
        (root / path.name).symlink_to(path)
    with LoopbackIndex(root, name="index-route") as served:
        yield served


def publish_next(index: LoopbackIndex, releases: Dict[str, Path]) -> None:
    for path in releases["next"].iterdir():
        (index.root / path.name).symlink_to(path)


def isolated_env(tmp_path: Path, index: LoopbackIndex) -> Dict[str, str]:
    """A user with no pip, pipx or uv settings, a fresh HOME, and the loopback as the only index."""
    drop = ("JETSON_", "PIP_", "PIPX_", "UV_", "VIRTUAL_ENV", "PYTHON", "XDG_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(drop)}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home), PIPX_HOME=str(tmp_path / "pipx-home"), PIPX_BIN_DIR=str(tmp_path / "bin"),
        PIPX_MAN_DIR=str(tmp_path / "man"), PATH=f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        # pip: the loopback only; os.devnull as its config file is pip's "read no configuration file".
        PIP_INDEX_URL=index.url, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
        UV_DEFAULT_INDEX=index.url, UV_NO_CONFIG="1", UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_TOOL_DIR=str(tmp_path / "uv-tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"), UV_PYTHON_DOWNLOADS="never",
    )
    return env


def _python_version(path: str) -> Optional[str]:
    try:
        answer = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return answer.stdout.strip() if answer.returncode == 0 else None


def find_python(version: str) -> str:
    """The machine's own Python `version` (a distribution's, or one pyenv built); none is
    downloaded. A pyenv shim for a version pyenv does not select fails to run and is passed over."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = [shutil.which(f"python{version}"), f"/usr/bin/python{version}",
                  *sorted(str(p) for p in pyenv.glob(f"versions/{version}.*/bin/python{version}"))]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and _python_version(candidate) == version:
            return candidate
    pytest.skip(f"no Python {version} on this machine (/usr/bin/python{version}, PATH, pyenv); JetPack ships it")


def pipx_release(pipx: Path) -> "Tuple[str, SpecifierSet]":
    """A pipx's version, and the Pythons it runs on (it makes the pip its environments share for those only)."""
    metadata = next(pipx.parent.parent.glob("lib/python*/site-packages/pipx-*.dist-info/METADATA")).read_text()
    version = re.search(r"^Version: (.+)$", metadata, re.MULTILINE)
    requires = re.search(r"^Requires-Python: (.+)$", metadata, re.MULTILINE)
    assert version is not None, metadata
    return version.group(1), SpecifierSet(requires.group(1) if requires else "")


def run(argv: List[str], env: Dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def said(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"


def check_first_run(command: List[str], env: Dict[str, str], cwd: Path) -> None:
    """README's first line, off a board: the plan on a sample root, then the doctor, which finds
    no environment there and says so (exit 2: the command could not run, README's Exit codes)."""
    plan = run([*command, "obliteratus", "--root", SAMPLE, "--dry-run"], env, cwd)
    assert plan.returncode == 0, said(plan)
    assert "switch" in plan.stdout and "jp6-cu126" in plan.stdout, said(plan)
    doctor = run([*command, "doctor", "--root", SAMPLE], env, cwd)
    assert doctor.returncode == 2, said(doctor)
    assert doctor.stderr.startswith("error: no environment at "), said(doctor)
    assert "fix: " in doctor.stderr and "Traceback" not in doctor.stderr, said(doctor)


def version_line(command: List[str], env: Dict[str, str], cwd: Path) -> str:
    result = run([*command, "--version"], env, cwd)
    assert result.returncode == 0, said(result)
    return result.stdout.splitlines()[0]


@pytest.mark.parametrize("python_version", JETPACK_PYTHONS)
@pytest.mark.parametrize("pipx_version", sorted(PIPX))
def test_pipx_from_the_index(pipx_version: str, python_version: str, index: LoopbackIndex,
                             releases: Dict[str, Path], tmp_path: Path) -> None:
    pipx = PIPX[pipx_version]
    if not pipx.exists():
        lane_unavailable("index-route", f"no {pipx} (tests/setup.d/20-pipx makes it)")
    python = find_python(python_version)
    release, runs_on = pipx_release(pipx)
    if Version(python_version) not in runs_on:
        pytest.skip(f"pipx {release} runs on Python {runs_on} only (its Requires-Python): a board with "
                    f"Python {python_version} has an older pipx (pipx 1.0.0 runs there)")
    env = isolated_env(tmp_path, index)
    # On a board pipx's Python is the system one; PIPX_DEFAULT_PYTHON makes it the one under test
    # for the environments and the pip they share, which pipx makes and upgrades from the index.
    env["PIPX_DEFAULT_PYTHON"] = python
    check_first_run([str(pipx), "run", "jetson-install"], env, tmp_path)
    assert f"/files/jetson_install-{__version__}-py3-none-any.whl" in index.requests

    installed = run([str(pipx), "install", "jetson-install"], env, tmp_path)
    assert installed.returncode == 0, said(installed)
    tool = str(tmp_path / "bin" / "jetson-install")
    assert version_line([tool], env, tmp_path) == f"jetson-install {__version__}"
    assert f"python: {python_version}." in run([tool, "--version"], env, tmp_path).stdout

    publish_next(index, releases)
    upgraded = run([str(pipx), "upgrade", "jetson-install"], env, tmp_path)
    assert upgraded.returncode == 0, said(upgraded)
    assert version_line([tool], env, tmp_path) == f"jetson-install {NEXT}"


@pytest.mark.parametrize("python_version", JETPACK_PYTHONS)
def test_uvx_from_the_index(python_version: str, index: LoopbackIndex, releases: Dict[str, Path],
                            tmp_path: Path) -> None:
    python = find_python(python_version)
    env = {**isolated_env(tmp_path, index), "UV_PYTHON": python}
    uvx = str(Path(sys.executable).parent / "uvx")
    check_first_run([uvx, "jetson-install"], env, tmp_path)
    assert version_line([uvx, "jetson-install"], env, tmp_path) == f"jetson-install {__version__}"
    publish_next(index, releases)
    # uvx keeps what it resolved; --refresh asks the index again, as a user wanting the new release does.
    newer = version_line([uvx, "--refresh", "jetson-install"], env, tmp_path)
    assert newer == f"jetson-install {NEXT}"


def test_a_board_resolves_the_tool_and_its_own_uv_from_the_index(index: LoopbackIndex, tmp_path: Path) -> None:
    """What a JetPack 6 board (aarch64, Python 3.10) would install from this index, uv's aarch64
    wheel among it, resolved for that platform from here."""
    env = isolated_env(tmp_path, index)
    uv = str(Path(sys.executable).parent / "uv")
    lock = tmp_path / "pylock.toml"
    result = subprocess.run([uv, "pip", "compile", "--format", "pylock.toml", "--python-platform",
                             "aarch64-manylinux_2_35", "--python-version", "3.10", "-", "-o", str(lock)],
                            input="jetson-install\n", capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=300)
    assert result.returncode == 0, said(result)
    files = re.findall(r'url = "[^"]*/files/([^"]+)"', lock.read_text())
    assert f"jetson_install-{__version__}-py3-none-any.whl" in files
    assert [name for name in files if name.startswith("uv-") and "aarch64" in name], files


def wheel_contents(wheel: Path) -> Dict[str, str]:
    """Each file the wheel holds and the hash its RECORD gives it (the RECORD itself has none)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record = next(name for name in names if name.endswith(".dist-info/RECORD"))
        hashes = dict(line.split(",")[:2] for line in archive.read(record).decode().splitlines() if line)
    assert sorted(hashes) == sorted(names)
    return hashes


def test_the_sdist_alone_builds_the_same_wheel(releases: Dict[str, Path], tmp_path: Path) -> None:
    """A user or a distribution that builds from the sdist gets the very wheel the index serves."""
    unpacked = _unpack_sdist(next(releases["this"].glob("*.tar.gz")), tmp_path)
    _build(unpacked, tmp_path / "out", "wheel")
    from_sdist = wheel_contents(next((tmp_path / "out").glob("*.whl")))
    from_tree = wheel_contents(next(releases["this"].glob("*.whl")))
    assert from_sdist == from_tree
