"""Shared pytest fixtures for the loopback-index tests.

Use from tests/conftest.py with ``from support.fixtures import *  # noqa: F401,F403``
(``tests/`` has no ``__init__.py``, so pytest puts it on sys.path and
``support`` is importable as a top-level package).

Cost model: the index directories, the stub OBLITERATUS tree and its git
repo are built once per session (about 0.2 s in all) and treated as
read-only. Index *servers* are per test (start in a millisecond), so every
test that reads a request log or flips a failure switch has its own; the
installs of every other test (``installer``) read ``shared_indexes``, two
servers kept for the session whose files ``uv_cache`` keeps from one test
to the next.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple

import pytest

from jetson_install.tools import runner

from . import board_of_this_machine, find_uv, isolated_env, nobody_runs, venv_python
from .catalogs import stub_catalog_text
from .installer import Installer
from .index_server import LoopbackIndex
from .stub_projects import (
    _TORCH_INIT_BODY,
    _TORCH_REQUIRES,
    VENDOR_PINS,
    VENDOR_TORCH,
    IndexDirs,
    _torch_modules,
    build_index_dirs,
    make_obliteratus_git_repo,
    make_obliteratus_source,
)
from .wheels import build_wheel

__all__ = [
    "processes",
    "stub_index_dirs",
    "private_index_dirs",
    "vendor_index",
    "public_index",
    "shared_indexes",
    "uv_cache",
    "start_index",
    "obliteratus_source",
    "obliteratus_git_repo",
    "uv_bin",
    "tool_env",
    "vendor_constraints",
    "make_venv",
    "stub_catalog",
    "cli_env",
    "installer",
    "clean_pip_check",
    "board_here",
    "nobodys_folder",
]

TOP = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="session")
def stub_index_dirs(tmp_path_factory: pytest.TempPathFactory) -> IndexDirs:
    """Vendor and public wheel directories, built once; do not modify them."""
    return build_index_dirs(tmp_path_factory.mktemp("stub-indexes"))


@pytest.fixture
def private_index_dirs(stub_index_dirs: IndexDirs, tmp_path: Path) -> IndexDirs:
    """A per-test copy of the index directories, for tests that add or remove wheels."""
    base = tmp_path / "indexes"
    copy = IndexDirs(vendor=base / "vendor", public=base / "public")
    shutil.copytree(str(stub_index_dirs.vendor), str(copy.vendor))
    shutil.copytree(str(stub_index_dirs.public), str(copy.public))
    return copy


@pytest.fixture
def start_index() -> Iterator[Callable[..., LoopbackIndex]]:
    """Factory: ``start_index(root, name=..., delay=...)`` -> a started LoopbackIndex, stopped at teardown."""
    started: List[LoopbackIndex] = []

    def _start(root: Path, **kwargs: object) -> LoopbackIndex:
        index = LoopbackIndex(root, **kwargs).start()  # type: ignore[arg-type]
        started.append(index)
        return index

    yield _start
    for index in started:
        index.stop()


@pytest.fixture
def vendor_index(stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> LoopbackIndex:
    return start_index(stub_index_dirs.vendor, name="vendor")


@pytest.fixture
def public_index(stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> LoopbackIndex:
    return start_index(stub_index_dirs.public, name="public")


class SharedIndexes(NamedTuple):
    vendor: LoopbackIndex
    public: LoopbackIndex


@pytest.fixture(scope="session")
def shared_indexes(stub_index_dirs: IndexDirs) -> Iterator[SharedIndexes]:
    """The vendor and public indexes served for the whole session (each xdist worker's), at URLs
    that stay the same, with files a client may keep as a real index's (their folders never
    change): ``uv_cache`` then answers every install after the first. Their request logs mix
    every test's and their switches would reach every test: a test that reads or flips them
    takes ``vendor_index``/``public_index``, servers of its own."""
    vendor = LoopbackIndex(stub_index_dirs.vendor, name="vendor", cache_files=True).start()
    public = LoopbackIndex(stub_index_dirs.public, name="public", cache_files=True).start()
    yield SharedIndexes(vendor, public)
    vendor.stop()
    public.stop()


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's cache for the installs from ``shared_indexes``: the pip and setuptools each seeded
    environment gets, and the stub wheels, are downloaded and unpacked once a session rather
    than once a test."""
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture(scope="session")
def obliteratus_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stub OBLITERATUS 0.1.3 source tree (in-tree PEP 517 backend, builds offline). Read-only."""
    return make_obliteratus_source(tmp_path_factory.mktemp("obliteratus-src") / "OBLITERATUS")


@pytest.fixture(scope="session")
def obliteratus_git_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tree as a git repo tagged ``v0.1.3``; use ``git+file://{path}@v0.1.3``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return make_obliteratus_git_repo(tmp_path_factory.mktemp("obliteratus-git") / "OBLITERATUS")


@pytest.fixture(scope="session")
def board_here(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The AGX Orin sample as a board of this machine's architecture (`lock --python` here). Read-only."""
    return board_of_this_machine(tmp_path_factory.mktemp("board-here"))


@pytest.fixture(scope="session")
def uv_bin() -> str:
    try:
        return find_uv()
    except (ImportError, FileNotFoundError):
        pytest.skip("uv is not installed (pip install uv)")
        raise  # unreachable; keeps type checkers happy


@pytest.fixture
def tool_env(tmp_path: Path) -> Dict[str, str]:
    """Isolated environment for uv/pip children (see ``support.isolated_env``)."""
    return isolated_env(tmp_path)


@pytest.fixture
def vendor_constraints(tmp_path: Path) -> Path:
    """constraints.txt pinning every vendor package to its exact vendor version."""
    path = tmp_path / "vendor-constraints.txt"
    path.write_text("".join("{}=={}\n".format(k, v) for k, v in sorted(VENDOR_PINS.items())), encoding="utf-8")
    return path


@pytest.fixture
def make_venv(uv_bin: str, tool_env: Dict[str, str], public_index: LoopbackIndex) -> Callable[..., Path]:
    """Factory: ``make_venv(path, seed=True)`` -> venv dir made by ``uv venv`` for the test interpreter.

    Seeding takes pip/setuptools/wheel from the loopback public index
    (``uv venv --seed`` fetches them from an index; they are not bundled).
    """

    def _make(path: Path, seed: bool = True) -> Path:
        argv = [uv_bin, "venv", "--python", sys.executable, "--default-index", public_index.url, str(path)]
        if seed:
            argv.insert(2, "--seed")
        result = subprocess.run(argv, env=tool_env, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise AssertionError("uv venv failed:\n" + result.stdout + result.stderr)
        assert venv_python(path).exists()
        return Path(path)

    return _make


@pytest.fixture
def stub_catalog(tmp_path: Path, stub_index_dirs: IndexDirs) -> Path:
    """wheels-index.toml with the jp6-cu126 source describing the stub vendor builds."""
    path = tmp_path / "wheels-index.toml"
    path.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), stub_index_dirs.vendor))
    return path


@pytest.fixture
def cli_env(tmp_path: Path, stub_catalog: Path) -> Dict[str, str]:
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(stub_catalog)
    return env


@pytest.fixture
def installer(request: pytest.FixtureRequest, tmp_path: Path, cli_env: Dict[str, str], obliteratus_source: Path
              ) -> Installer:
    """`jetson-install obliteratus` into tmp_path/obl, from the stub indexes.

    A test that starts servers of its own (``start_index``, which ``vendor_index`` and
    ``public_index`` start) counts their requests, flips their switches or serves other files
    under the same names: it installs from its own ``vendor_index`` and ``public_index`` with
    the empty uv cache of ``cli_env``, which no other test's downloads can answer. Every other
    test installs from ``shared_indexes`` with the session's ``uv_cache``."""
    if "start_index" in request.fixturenames:
        vendor: LoopbackIndex = request.getfixturevalue("vendor_index")
        public: LoopbackIndex = request.getfixturevalue("public_index")
    else:
        vendor, public = request.getfixturevalue("shared_indexes")
        # Copies, not hard links: a test that writes into an installed file in place (a truncated
        # torch) would otherwise write into the cache every later install links from.
        cli_env.update(UV_CACHE_DIR=str(request.getfixturevalue("uv_cache")), UV_LINK_MODE="copy")
    return Installer(tmp_path / "obl", cli_env, vendor.url, public.url, obliteratus_source)


@pytest.fixture
def clean_pip_check(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """Replace jetson_install.envs.interpreters.pip_check (uv is not what these tests exercise); returns the calls."""
    calls: List[str] = []

    def pip_check(python: str, command: object = None) -> runner.Completed:
        calls.append(python)
        return runner.Completed(("uv", "pip", "check"), 0, "", "Checked 4 packages in 1ms\nAll installed packages are compatible\n")

    import jetson_install.envs.interpreters as interpreters

    monkeypatch.setattr(interpreters, "pip_check", pip_check)
    return calls


def serve_cpu_only_torch(private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex],
                         cli_env: Dict[str, str], tmp_path: Path, name: str) -> LoopbackIndex:
    """The vendor index serving a CPU-only torch under the pinned vendor version, a build the
    catalog does not list (so only its doctor checks can tell); `cli_env` reads that catalog."""
    for wheel in private_index_dirs.vendor.glob("torch-*.whl"):
        wheel.unlink()
    build_wheel(private_index_dirs.vendor, "torch", VENDOR_TORCH, requires=_TORCH_REQUIRES, requires_python=">=3.8",
                modules=_torch_modules(False, None), init_body=_TORCH_INIT_BODY, source_index="vendor")
    catalog = tmp_path / "cpu-wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor,
                                         known=("torchvision", "torchaudio", "bitsandbytes")))
    cli_env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return start_index(private_index_dirs.vendor, name=name)


@pytest.fixture
def nobodys_folder() -> Iterator[Path]:
    """A folder the user `nobody` owns, under one every user can reach."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root and setpriv to act as another user, and a Python every user may run")
    if not nobody_runs(sys.executable):
        pytest.skip(f"the user nobody cannot start {sys.executable} (a pyenv build loads its libpython from under /root)")
    top = Path(tempfile.mkdtemp(prefix="jetson-install-test-"))
    top.chmod(0o755)
    shutil.chown(top, "nobody")
    yield top
    shutil.rmtree(top)


def as_nobody(top: Path, *args: str, path: str = "/usr/bin:/bin") -> "subprocess.CompletedProcess[str]":
    """`jetson-install ARGS` run as the user `nobody`, its per-user folders under `top` (nobodys_folder)."""
    home = top / "home"
    home.mkdir(exist_ok=True)
    shutil.chown(home, "nobody")
    # By default a PATH without this machine's per-root folders, which `nobody` may not enter.
    env = dict(isolated_env(home, fast_fail=True), XDG_STATE_HOME=str(home / "state"), PATH=path)
    for entry in home.rglob("*"):
        shutil.chown(entry, "nobody")
    argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-m", "jetson_install",
            *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/", env=env)


@pytest.fixture
def processes() -> Iterator[List["subprocess.Popen[str]"]]:
    """Processes a test starts, ended (SIGKILL) when it ends."""
    running: List["subprocess.Popen[str]"] = []
    yield running
    for process in running:
        process.kill()
        process.wait(timeout=30)
