"""Proves the test infrastructure itself: stub wheels, loopback indexes, the
stub OBLITERATUS, and the uv/pip behaviours the installer relies on.

The "uv behaviour" tests pin down facts of the installed uv (and of pip as
seeded by ``uv venv --seed``); if a uv upgrade changes one, the installer's
design assumption breaks and these fail first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence

import pytest

from support import needs_obliteratus_python
from support import (
    IndexDirs,
    LoopbackIndex,
    NEWEST_PUBLIC_TORCH,
    OBLITERATUS_TAG,
    VENDOR_BAIT,
    VENDOR_PINS,
    VENDOR_TORCH,
    build_index_dirs,
    build_wheel,
    isolated_env,
    venv_python,
)


def _run(argv: Sequence[object], env: Dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout)


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, "rc={}\n{}{}".format(result.returncode, result.stdout, result.stderr)
    return result


def _pyval(python: Path, code: str, env: Dict[str, str]) -> str:
    return _ok(_run([python, "-c", code], env)).stdout.strip()


def _vendor_pin_args() -> List[str]:
    return ["{}=={}".format(k, v) for k, v in sorted(VENDOR_PINS.items())]


def _get(url: str) -> bytes:
    # urllib honours *_proxy variables; loopback must bypass any proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        body: bytes = response.read()
        return body


# ---------------------------------------------------------------------------
# wheels
# ---------------------------------------------------------------------------
def test_local_version_wheel_filename_and_contents(tmp_path: Path) -> None:
    path = build_wheel(
        tmp_path, "typing-extensions", "2.5.0a0+872d972e41.nv24.08", requires=["numpy>=1.17"],
        extras={"q": ['bitsandbytes>=0.46.1; sys_platform == "linux"']}, source_index="vendor",
    )
    assert path.name == "typing_extensions-2.5.0a0+872d972e41.nv24.08-py3-none-any.whl"
    with zipfile.ZipFile(str(path)) as archive:
        names = archive.namelist()
        meta = archive.read("typing_extensions-2.5.0a0+872d972e41.nv24.08.dist-info/METADATA").decode()
        init = archive.read("typing_extensions/__init__.py").decode()
        record = archive.read("typing_extensions-2.5.0a0+872d972e41.nv24.08.dist-info/RECORD").decode()
        for line in record.splitlines():
            file, digest, size = line.rsplit(",", 2)
            if not digest:
                continue
            data = archive.read(file)
            assert int(size) == len(data)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert "Requires-Dist: numpy>=1.17" in meta
    assert "Provides-Extra: q" in meta
    assert 'Requires-Dist: bitsandbytes>=0.46.1; (sys_platform == "linux") and extra == "q"' in meta
    assert '__version__ = "2.5.0a0+872d972e41.nv24.08"' in init and '__source_index__ = "vendor"' in init
    assert len(names) == len(set(names))


def test_index_build_is_fast_and_deterministic(tmp_path: Path) -> None:
    start = time.monotonic()
    first = build_index_dirs(tmp_path / "a")
    elapsed = time.monotonic() - start
    second = build_index_dirs(tmp_path / "b")
    assert elapsed < 1.0, elapsed
    for a_dir, b_dir in zip(first, second):
        a_files = sorted(p.name for p in a_dir.iterdir())
        assert a_files == sorted(p.name for p in b_dir.iterdir())
        for name in a_files:
            assert (a_dir / name).read_bytes() == (b_dir / name).read_bytes(), name
    vendor = sorted(p.name for p in first.vendor.iterdir())
    assert "torch-2.5.0a0+872d972e41.nv24.08-py3-none-any.whl" in vendor
    assert "numpy-99.0-py3-none-any.whl" in vendor and "filelock-99.0-py3-none-any.whl" in vendor


# ---------------------------------------------------------------------------
# index server
# ---------------------------------------------------------------------------
def test_index_serves_pep503_pages_and_logs_requests(vendor_index: LoopbackIndex) -> None:
    root = _get(vendor_index.url + "/").decode()
    assert 'href="torch/"' in root and 'href="numpy/"' in root
    page = _get(vendor_index.url + "/torch/").decode()
    match = re.search(r'href="\.\./\.\./files/([^"#]+)#sha256=([0-9a-f]{64})"', page)
    assert match, page
    filename, digest = match.group(1), match.group(2)
    assert filename == "torch-2.5.0a0%2B872d972e41.nv24.08-py3-none-any.whl"
    data = _get(vendor_index.base_url + "/files/" + filename)
    assert hashlib.sha256(data).hexdigest() == digest
    assert b"Version: 2.5.0a0+872d972e41.nv24.08" in _get(vendor_index.base_url + "/files/" + filename + ".metadata")
    with pytest.raises(urllib.error.HTTPError) as info:
        _get(vendor_index.url + "/no-such-project/")
    assert info.value.code == 404
    # Non-normalized names resolve to the normalized project.
    assert b"torch" in _get(vendor_index.url + "/Torch/")
    assert vendor_index.requested_projects() == ["torch", "no-such-project"]
    assert vendor_index.downloaded_files() == ["torch-2.5.0a0+872d972e41.nv24.08-py3-none-any.whl"]


def test_fail_after_stop_and_delay(stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> None:
    index = start_index(stub_index_dirs.public, name="public")
    index.fail_after(1)
    _get(index.url + "/numpy/")
    with pytest.raises(urllib.error.HTTPError) as info:
        _get(index.url + "/numpy/")
    assert info.value.code == 503
    index.fail_after(0, mode="close")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        _get(index.url + "/numpy/")
    index.heal()
    assert _get(index.url + "/numpy/")

    index.delay = 0.3
    start = time.monotonic()
    _get(index.base_url + "/files/numpy-2.1.0-py3-none-any.whl")
    assert time.monotonic() - start >= 0.3
    assert index.wait_for_request(lambda p: p.endswith(".whl"), timeout=1).endswith("numpy-2.1.0-py3-none-any.whl")

    port = index.port
    index.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_no_isolated_environment_is_made_outside_the_temporary_folder(tmp_path: Path) -> None:
    # As root, isolated_env(Path("/nonexistent")) made /nonexistent/isolated-env at the filesystem
    # root, which every later run of the suite then saw.
    from support import isolated_env

    outside = Path("/") / f"jetson-install-test-{os.getpid()}"
    with pytest.raises(AssertionError, match="is outside the temporary folder"):
        isolated_env(outside)
    assert not outside.exists()
    assert Path(isolated_env(tmp_path)["HOME"]).is_dir()


def test_isolated_env_drops_inherited_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("UV_INDEX_URL", "https://example.invalid/simple")
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere")
    env = isolated_env(tmp_path)
    assert "PIP_FIND_LINKS" not in env and "UV_INDEX_URL" not in env and "VIRTUAL_ENV" not in env
    assert env["UV_NO_CONFIG"] == "1" and env["UV_PYTHON_DOWNLOADS"] == "never"
    assert Path(env["PIP_CONFIG_FILE"]).read_text() == ""
    assert Path(env["UV_CACHE_DIR"]).is_dir() and env["HOME"].startswith(str(tmp_path))
    assert "127.0.0.1" in env["NO_PROXY"] and env["HTTPS_PROXY"].startswith("http://127.0.0.1:")


# ---------------------------------------------------------------------------
# stub OBLITERATUS
# ---------------------------------------------------------------------------
def test_obliteratus_backend_builds_offline(obliteratus_source: Path, tmp_path: Path) -> None:
    code = (
        "import sys; sys.path.insert(0, '_build'); import stub_backend as b;"
        "print(b.get_requires_for_build_wheel()); print(b.build_wheel(sys.argv[1])); print(b.build_sdist(sys.argv[1]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=str(obliteratus_source), capture_output=True, text=True,
        check=True,
    ).stdout.split()
    assert out == ["[]", "obliteratus-0.1.3-py3-none-any.whl", "obliteratus-0.1.3.tar.gz"]
    with zipfile.ZipFile(str(tmp_path / out[1])) as archive:
        meta = archive.read("obliteratus-0.1.3.dist-info/METADATA").decode()
        entry_points = archive.read("obliteratus-0.1.3.dist-info/entry_points.txt").decode()
        assert "obliteratus/device.py" in archive.namelist()
    assert "Requires-Dist: torch>=2.0" in meta and "Requires-Dist: numpy>=1.24" in meta
    assert 'Requires-Dist: bitsandbytes>=0.46.1; extra == "quantization"' in meta
    assert "obliteratus = obliteratus.cli:main" in entry_points


# ---------------------------------------------------------------------------
# end to end with the real uv
# ---------------------------------------------------------------------------
def _install_two_steps(venv: Path, uv_bin: str, env: Dict[str, str], vendor_url: str, public_url: str, constraints: Path,
                       source: Path) -> Path:
    """The two-step recipe: vendor pins from the vendor index only (--no-deps),
    then OBLITERATUS from source with the public index only, under constraints."""
    python = venv_python(venv)
    _ok(_run([uv_bin, "pip", "install", "--python", python, "--index-url", vendor_url, "--no-deps"]
             + _vendor_pin_args(), env))
    _ok(_run([uv_bin, "pip", "install", "--python", python, "--default-index", public_url,
              "-c", constraints, "obliteratus[quantization] @ {}".format(source.as_uri())], env))
    return venv


@pytest.fixture
def installed_venv(
    tmp_path: Path, uv_bin: str, tool_env: Dict[str, str], make_venv: Callable[..., Path], vendor_index: LoopbackIndex, public_index: LoopbackIndex, vendor_constraints: Path, obliteratus_source: Path
) -> Path:
    return _install_two_steps(make_venv(tmp_path / "venv"), uv_bin, tool_env, vendor_index.url, public_index.url,
                              vendor_constraints, obliteratus_source)


@pytest.fixture(scope="module")
def dry_run_venv(tmp_path_factory: pytest.TempPathFactory, uv_bin: str, stub_index_dirs: IndexDirs, obliteratus_source: Path) -> Iterator[Path]:
    """installed_venv made once, for the tests that only dry-run against it; it must be unchanged after them."""
    base = tmp_path_factory.mktemp("dry-run-venv")
    env = isolated_env(base)
    constraints = base / "vendor-constraints.txt"
    constraints.write_text("".join("{}=={}\n".format(k, v) for k, v in sorted(VENDOR_PINS.items())))
    vendor = LoopbackIndex(stub_index_dirs.vendor, name="vendor").start()
    public = LoopbackIndex(stub_index_dirs.public, name="public").start()
    try:
        venv = base / "venv"
        _ok(_run([uv_bin, "venv", "--seed", "--python", sys.executable, "--default-index", public.url, venv], env))
        _install_two_steps(venv, uv_bin, env, vendor.url, public.url, constraints, obliteratus_source)
        freeze = [uv_bin, "pip", "freeze", "--python", venv_python(venv)]
        installed = _ok(_run(freeze, env)).stdout
        yield venv
        assert _ok(_run(freeze, env)).stdout == installed, "a dry-run test changed the shared environment"
    finally:
        vendor.stop()
        public.stop()


@pytest.mark.slow
def test_seeded_venv_has_pip(tmp_path: Path, make_venv: Callable[..., Path], tool_env: Dict[str, str]) -> None:
    venv = make_venv(tmp_path / "venv")
    out = _ok(_run([venv_python(venv), "-m", "pip", "--version"], tool_env)).stdout
    assert out.startswith("pip ")


def test_vendor_torch_installs_from_vendor_index(tmp_path: Path, uv_bin: str, tool_env: Dict[str, str], make_venv: Callable[..., Path], vendor_index: LoopbackIndex) -> None:
    venv = make_venv(tmp_path / "venv", seed=False)
    python = venv_python(venv)
    _ok(_run([uv_bin, "pip", "install", "--python", python, "--index-url", vendor_index.url, "--no-deps",
              "torch==" + VENDOR_TORCH], tool_env))
    assert _pyval(python, "import torch; print(torch.__version__, torch.__source_index__, torch.cuda.is_available())",
                  tool_env) == VENDOR_TORCH + " vendor True"


@pytest.mark.slow
def test_obliteratus_installs_offline_keeping_vendor_packages(
    installed_venv: Path, uv_bin: str, tool_env: Dict[str, str], vendor_index: LoopbackIndex, public_index: LoopbackIndex
) -> None:
    python = venv_python(installed_venv)
    code = (
        "import torch, numpy, filelock, bitsandbytes, obliteratus;"
        "from obliteratus.device import get_device;"
        "print(torch.__version__, torch.__source_index__, bitsandbytes.__version__, bitsandbytes.__source_index__,"
        " numpy.__source_index__, filelock.__source_index__, obliteratus.__version__, get_device())"
    )
    assert _pyval(python, code, tool_env).split() == [
        VENDOR_TORCH, "vendor", VENDOR_PINS["bitsandbytes"], "vendor", "public", "public", "0.1.3", "cuda",
    ]
    assert _ok(_run([installed_venv / "bin" / "obliteratus", "--version"], tool_env)).stdout.strip() == "0.1.3"
    _ok(_run([uv_bin, "pip", "check", "--python", python], tool_env))
    # (c) the vendor index served exactly the vendor pins, nothing else was downloaded from it.
    assert sorted(f.split("-")[0] for f in vendor_index.downloaded_files()) == sorted(VENDOR_PINS)
    # (g) nothing ever asked an index for `obliteratus` by name.
    assert not public_index.was_requested("obliteratus") and not vendor_index.was_requested("obliteratus")


@needs_obliteratus_python
def test_git_tag_source_installs_offline(
    tmp_path: Path, uv_bin: str, tool_env: Dict[str, str], make_venv: Callable[..., Path], vendor_index: LoopbackIndex, public_index: LoopbackIndex, vendor_constraints: Path, obliteratus_git_repo: Path
) -> None:
    venv = make_venv(tmp_path / "venv", seed=False)
    python = venv_python(venv)
    _ok(_run([uv_bin, "pip", "install", "--python", python, "--index-url", vendor_index.url, "--no-deps"]
             + _vendor_pin_args(), tool_env))
    url = "git+{}@{}".format(obliteratus_git_repo.as_uri(), OBLITERATUS_TAG)
    _ok(_run([uv_bin, "pip", "install", "--python", python, "--default-index", public_index.url,
              "-c", vendor_constraints, "obliteratus[quantization] @ " + url], tool_env))
    assert _pyval(python, "import obliteratus, torch; print(obliteratus.__version__, torch.__source_index__)",
                  tool_env) == "0.1.3 vendor"
    assert not public_index.was_requested("obliteratus")


def _is_wheel_download(path: str) -> bool:
    return path.startswith("/files/") and path.endswith(".whl")


@needs_obliteratus_python
def test_uv_fails_cleanly_when_index_goes_away_mid_install(
    tmp_path: Path, uv_bin: str, make_venv: Callable[..., Path], public_index: LoopbackIndex
) -> None:
    env = isolated_env(tmp_path, fast_fail=True)
    venv = make_venv(tmp_path / "venv", seed=False)
    # Resolution (pages + .metadata) succeeds; every wheel download then gets a 503.
    public_index.fail_after(0, match=_is_wheel_download)
    result = _run([uv_bin, "pip", "install", "--python", venv_python(venv), "--default-index", public_index.url,
                   "transformers"], env, timeout=60)
    assert result.returncode != 0 and "503" in result.stderr
    assert _ok(_run([uv_bin, "pip", "freeze", "--python", venv_python(venv)], env)).stdout.strip() == ""


@needs_obliteratus_python
def test_uv_killed_mid_download_installs_nothing(tmp_path: Path, uv_bin: str, tool_env: Dict[str, str], make_venv: Callable[..., Path], stub_index_dirs: IndexDirs,
                                                 start_index: Callable[..., LoopbackIndex]) -> None:
    index = start_index(stub_index_dirs.public, name="slow", delay=30.0)
    venv = make_venv(tmp_path / "venv", seed=False)
    argv = [uv_bin, "pip", "install", "--python", str(venv_python(venv)), "--default-index", index.url, "transformers"]
    proc = subprocess.Popen(argv, env=tool_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        index.wait_for_request(_is_wheel_download, timeout=30)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert _ok(_run([uv_bin, "pip", "freeze", "--python", venv_python(venv)], tool_env)).stdout.strip() == ""


# ---------------------------------------------------------------------------
# uv / pip behaviour the installer relies on
# ---------------------------------------------------------------------------
def test_uv_first_index_takes_bait_from_vendor_index(
    tmp_path: Path, uv_bin: str, tool_env: Dict[str, str], make_venv: Callable[..., Path], vendor_index: LoopbackIndex, public_index: LoopbackIndex
) -> None:
    """Why the vendor step must be separate and --no-deps: with the vendor index
    first, first-index takes numpy/filelock 99 (the bait) from it."""
    venv = make_venv(tmp_path / "venv", seed=False)
    result = _ok(_run([uv_bin, "pip", "install", "--python", venv_python(venv), "--dry-run", "--output-format", "json",
                       "--index", vendor_index.url, "--default-index", public_index.url,
                       "--index-strategy", "first-index", "torch==" + VENDOR_TORCH, "numpy", "filelock"], tool_env))
    planned = {c["name"]: c["version"] for c in json.loads(result.stdout)["changes"] if c["action"] == "installed"}
    assert planned["numpy"] == VENDOR_BAIT["numpy"] and planned["filelock"] == VENDOR_BAIT["filelock"]


@needs_obliteratus_python
@pytest.mark.slow
def test_uv_dry_run_json_shows_replacement_without_constraint(dry_run_venv: Path, uv_bin: str, tool_env: Dict[str, str],
                                                              public_index: LoopbackIndex, vendor_constraints: Path) -> None:
    python = venv_python(dry_run_venv)
    base = [uv_bin, "pip", "install", "--python", python, "--dry-run", "--output-format", "json",
            "--default-index", public_index.url, "-U", "torch"]
    changes = json.loads(_ok(_run(base, tool_env)).stdout)["changes"]
    assert {"name": "torch", "version": NEWEST_PUBLIC_TORCH, "action": "installed"} in changes
    assert any(c["name"] == "torch" and c["action"] == "uninstalled" for c in changes)
    changes = json.loads(_ok(_run(base + ["-c", vendor_constraints], tool_env)).stdout)["changes"]
    assert not any(c["name"] == "torch" for c in changes)


@pytest.mark.slow
def test_uv_constraint_env_protects_activated_venv(installed_venv: Path, uv_bin: str, tool_env: Dict[str, str], public_index: LoopbackIndex,
                                                   vendor_constraints: Path) -> None:
    env = dict(tool_env, VIRTUAL_ENV=str(installed_venv), UV_CONSTRAINT=str(vendor_constraints),
               PATH=str(installed_venv / "bin") + os.pathsep + tool_env["PATH"])
    _ok(_run([uv_bin, "pip", "install", "--default-index", public_index.url, "-U", "torch", "numpy",
              "transformers", "bitsandbytes", "torchvision"], env))
    conflict = _run([uv_bin, "pip", "install", "--default-index", public_index.url, "needs-newer-torch"], env)
    assert conflict.returncode == 1 and "torch>=2.6" in conflict.stderr
    assert _pyval(venv_python(installed_venv), "import torch, bitsandbytes as b; print(torch.__version__, b.__version__)",
                  tool_env) == "{} {}".format(VENDOR_TORCH, VENDOR_PINS["bitsandbytes"])


@pytest.mark.slow
def test_pip_honours_constraint_in_venv_pip_conf(installed_venv: Path, tool_env: Dict[str, str], public_index: LoopbackIndex,
                                                 vendor_constraints: Path) -> None:
    (installed_venv / "pip.conf").write_text("[install]\nconstraint = {}\n".format(vendor_constraints))
    pip = installed_venv / "bin" / "pip"
    _ok(_run([pip, "install", "-U", "--index-url", public_index.url, "torch", "numpy", "transformers"], tool_env))
    conflict = _run([pip, "install", "--index-url", public_index.url, "needs-newer-torch"], tool_env)
    assert conflict.returncode != 0 and "torch==" + VENDOR_TORCH in conflict.stdout + conflict.stderr
    assert _pyval(venv_python(installed_venv), "import torch; print(torch.__version__)", tool_env) == VENDOR_TORCH


def _planned_torch(result: subprocess.CompletedProcess[str]) -> List[str]:
    changes = json.loads(_ok(result).stdout)["changes"]
    return [c["version"] for c in changes if c["name"] == "torch" and c["action"] == "installed"]


@needs_obliteratus_python
def test_uv_constraint_env_is_replaced_by_cli_constraint(dry_run_venv: Path, uv_bin: str, tool_env: Dict[str, str], public_index: LoopbackIndex,
                                                         vendor_constraints: Path, tmp_path: Path) -> None:
    """A caveat the installer must document: an explicit ``-c`` replaces UV_CONSTRAINT (it does not add to it)."""
    other = tmp_path / "other.txt"
    other.write_text("numpy<2\n")
    env = dict(tool_env, VIRTUAL_ENV=str(dry_run_venv), UV_CONSTRAINT=str(vendor_constraints))
    base = [uv_bin, "pip", "install", "--dry-run", "--output-format", "json", "--default-index", public_index.url,
            "-U", "torch"]
    assert _planned_torch(_run(base, env)) == []
    assert _planned_torch(_run(base + ["-c", other], env)) == [NEWEST_PUBLIC_TORCH]


@needs_obliteratus_python
def test_uv_constraint_env_splits_on_spaces_file_uri_works(dry_run_venv: Path, uv_bin: str, tool_env: Dict[str, str], public_index: LoopbackIndex,
                                                           vendor_constraints: Path, tmp_path: Path) -> None:
    """UV_CONSTRAINT is a space-separated list: a path with a space breaks it; its file:// URI does not."""
    spaced = tmp_path / "dir with space" / "constraints.txt"
    spaced.parent.mkdir()
    spaced.write_text(vendor_constraints.read_text())
    base = [uv_bin, "pip", "install", "--dry-run", "--output-format", "json", "--default-index", public_index.url,
            "-U", "torch"]
    broken = _run(base, dict(tool_env, VIRTUAL_ENV=str(dry_run_venv), UV_CONSTRAINT=str(spaced)))
    assert broken.returncode != 0 and "not found" in broken.stderr.lower()
    assert _planned_torch(_run(base, dict(tool_env, VIRTUAL_ENV=str(dry_run_venv), UV_CONSTRAINT=spaced.as_uri()))) == []


def test_a_test_sees_neither_the_developers_jetson_variables_nor_their_user_folders(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    import platformdirs
    from conftest import SUITE_VARIABLES

    assert [name for name in os.environ if name.startswith("JETSON_") and name not in SUITE_VARIABLES] == []
    base = tmp_path_factory.getbasetemp().resolve()
    for folder in (platformdirs.user_config_dir("jetson-install"), platformdirs.user_data_dir("jetson-install"),
                   platformdirs.user_cache_dir("jetson-install"), platformdirs.user_log_dir("jetson-install"),
                   str(Path.home()), os.path.expanduser("~")):
        assert base in Path(folder).resolve().parents, folder
