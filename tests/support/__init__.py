"""Test infrastructure: stub wheels, loopback PEP 503 indexes, isolated uv/pip environments.

Everything here works offline; the only sockets are on 127.0.0.1.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional, TypeVar

import pytest

from .index_server import LoopbackIndex
from .stub_projects import (
    NEWEST_PUBLIC_TORCH,
    OBLITERATUS_DEPENDENCIES,
    OBLITERATUS_TAG,
    VENDOR_BAIT,
    VENDOR_BITSANDBYTES,
    VENDOR_PINS,
    VENDOR_TORCH,
    VENDOR_TORCHAUDIO,
    VENDOR_TORCHVISION,
    IndexDirs,
    build_index_dirs,
    make_obliteratus_git_repo,
    make_obliteratus_source,
    make_public_index_files,
    make_vendor_index_files,
)
from .wheels import build_wheel, normalize_name, wheel_filename

__all__ = [
    "LoopbackIndex",
    "IndexDirs",
    "build_index_dirs",
    "build_wheel",
    "normalize_name",
    "wheel_filename",
    "make_vendor_index_files",
    "make_public_index_files",
    "make_obliteratus_source",
    "make_obliteratus_git_repo",
    "isolated_env",
    "board_of_this_machine",
    "find_uv",
    "venv_python",
    "present",
    "needs_obliteratus_python",
    "channel_python",
    "nobody_runs",
    "reached",
    "VENDOR_TORCH",
    "VENDOR_TORCHVISION",
    "VENDOR_TORCHAUDIO",
    "VENDOR_BITSANDBYTES",
    "VENDOR_PINS",
    "VENDOR_BAIT",
    "NEWEST_PUBLIC_TORCH",
    "OBLITERATUS_DEPENDENCIES",
    "OBLITERATUS_TAG",
]

_T = TypeVar("_T")


def present(value: Optional[_T]) -> _T:
    """The value a test expects to be there (a channel's primary source, a chosen file, a fix), failing the test
    where it is missing; it narrows the Optional for strict mypy too."""
    assert value is not None, "expected a value, found None"
    return value


# Inherited variables that would point a child Python, pip or uv elsewhere.
_DROP_EXACT = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONSTARTUP")
_DROP_PREFIXES = ("PIP_", "UV_", "GIT_CONFIG", "JETSON_")
# Every request not to loopback is sent to this proxy, which refuses connections:
# a child that forgets an --index flag and falls back to uv's default index fails fast
# instead of silently reaching the network (port 9 "discard" is never served).
DEAD_PROXY = "http://127.0.0.1:9"
PROXY_VARIABLES = _PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
               "no_proxy", "NO_PROXY")


def inside_temporary_folder(path: Path) -> Path:
    """`path`, where it is in the temporary folder (pytest's tmp_path, a mkdtemp): a test writes
    nowhere else. A folder elsewhere (/nonexistent, which root may create) fails the test before
    anything is made there."""
    folder = Path(tempfile.gettempdir()).resolve()
    if folder != path.resolve() and folder not in path.resolve().parents:
        raise AssertionError(f"{path} is outside the temporary folder {folder}: a test writes only under its tmp_path")
    return path


def isolated_env(
    tmp_path: Path, extra: Optional[Dict[str, str]] = None, *, fast_fail: bool = False
) -> Dict[str, str]:
    """Environment for uv/pip children that reads no user, system or inherited configuration.

    - every inherited ``PIP_*``/``UV_*`` variable is dropped (this machine sets
      PIP_FIND_LINKS and friends), and every ``JETSON_*`` one (the tool's settings);
    - ``PIP_CONFIG_FILE`` names an empty file: pip then skips the user config
      but still reads the *site* config (``<venv>/pip.conf``), which is the
      file the installer relies on; ``XDG_CONFIG_DIRS`` points pip's "global"
      lookup at an empty dir instead of /etc/xdg;
    - all proxies point at a dead loopback port and NO_PROXY exempts only
      127.0.0.1/localhost, so anything aimed beyond loopback fails at once;
    - ``HOME``/``XDG_*`` are temp dirs, ``UV_NO_CONFIG=1`` stops uv's
      uv.toml discovery, ``UV_CACHE_DIR`` is private, ``UV_PYTHON_DOWNLOADS=never``;
    - ``fast_fail`` turns off uv's and pip's HTTP retries (3 retries cost uv ~4 s).
    """
    inside_temporary_folder(Path(tmp_path))
    base = Path(tmp_path) / "isolated-env"
    dirs = {}
    for key in ("home", "xdg-config", "xdg-config-dirs", "xdg-cache", "xdg-data", "uv-cache", "tmp"):
        dirs[key] = base / key
        dirs[key].mkdir(parents=True, exist_ok=True)
    pip_conf = base / "pip-empty.conf"
    pip_conf.write_text("", encoding="utf-8")

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _DROP_EXACT and k not in _PROXY_VARS and not k.startswith(_DROP_PREFIXES)
    }
    env.update(
        HOME=str(dirs["home"]),
        XDG_CONFIG_HOME=str(dirs["xdg-config"]),
        XDG_CONFIG_DIRS=str(dirs["xdg-config-dirs"]),
        XDG_CACHE_HOME=str(dirs["xdg-cache"]),
        XDG_DATA_HOME=str(dirs["xdg-data"]),
        TMPDIR=str(dirs["tmp"]),
        PIP_CONFIG_FILE=str(pip_conf),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        UV_NO_CONFIG="1",
        UV_CACHE_DIR=str(dirs["uv-cache"]),
        UV_PYTHON_DOWNLOADS="never",
        UV_NO_PROGRESS="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        HTTP_PROXY=DEAD_PROXY,
        HTTPS_PROXY=DEAD_PROXY,
        ALL_PROXY=DEAD_PROXY,
        http_proxy=DEAD_PROXY,
        https_proxy=DEAD_PROXY,
        all_proxy=DEAD_PROXY,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        PYTHONIOENCODING="utf-8",
    )
    if fast_fail:
        # For "index goes away" tests: no retries, so a failure shows in well under a second.
        env.update(UV_HTTP_RETRIES="0", UV_HTTP_TIMEOUT="10", PIP_RETRIES="0", PIP_TIMEOUT="10")
    if extra:
        env.update(extra)
    return env


def board_of_this_machine(folder: Path) -> Path:
    """A root of the AGX Orin sample whose kernel says it is this machine's architecture: what
    `lock --python` locks on, as a Jetson locking for its own interpreter does (a lock for an
    interpreter of another architecture than the board's is refused)."""
    root = Path(folder) / "board-of-this-machine"
    if not root.is_dir():
        samples = Path(__file__).resolve().parent.parent.parent / "jetson_install" / "board" / "samples"
        shutil.copytree(str(samples / "agx-orin-64gb-jp6.2"), str(root))
        (root / "proc" / "sys" / "kernel" / "arch").write_text(os.uname().machine + "\n")
    return root


def find_uv() -> str:
    """Path of the uv binary shipped by the ``uv`` package (falls back to PATH)."""
    try:
        import uv

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
        raise


def venv_python(venv: Path) -> Path:
    """Interpreter of a venv (POSIX layout; Jetson is Linux only)."""
    return Path(venv) / "bin" / "python"


# Keep the interpreter tests run under importable for fixtures.
TEST_PYTHON = sys.executable

#: OBLITERATUS needs Python 3.10 or newer, and so does its stub (stub_projects.REQUIRES_PYTHON): a
#: test that makes its environment with the interpreter running the tests cannot install it on
#: JetPack 5's 3.8 (tests/test_pythons.py runs the fast tier there too). The tool itself runs there.
needs_obliteratus_python = pytest.mark.skipif(
    sys.version_info < (3, 10),
    reason="OBLITERATUS (and its stub) needs Python >=3.10, and this test makes its environment with the "
           "interpreter that runs the tests")


def channel_python() -> str:
    """A real Python 3.10, the sample JetPack 6 channels' (their vendor builds are for it alone):
    the system's, else pyenv's (tests/setup), never pyenv's shim; where there is none, the test
    skips with one line (fails under CI=true), as a lane does."""
    from .lanes import lane_unavailable

    for python in ("/usr/bin/python3.10", "/root/.pyenv/versions/3.10.13/bin/python3.10"):
        if os.access(python, os.X_OK):
            return python
    lane_unavailable("python3.10", "neither /usr/bin/python3.10 nor pyenv's 3.10.13 is here")


@functools.lru_cache(maxsize=None)
def nobody_runs(python: str) -> bool:
    """Whether the user `nobody` can start `python`: pyenv's builds load their libpython from under
    /root, which no other user may enter."""
    try:
        return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", python, "-c", "pass"],
                              capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


def reached(label: str) -> None:
    """The branch a property test reached, as hypothesis.event (`pytest -m property
    --hypothesis-show-statistics` counts them); nothing outside one, so a helper that records its
    branch serves plain tests too."""
    from hypothesis import currently_in_test_context, event

    if currently_in_test_context():
        event(label)
