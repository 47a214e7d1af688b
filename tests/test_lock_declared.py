"""`lock` resolves the rest while its target builds, from a wheel of the metadata the target's
pyproject.toml states (fleet/declared_wheel.py), and keeps that resolution only where the built
wheel says the same: otherwise (a dynamic field, a backend that adds or changes a requirement)
the rest is resolved from the built wheel, as before, and the lock is what boards install."""

from __future__ import annotations

import collections
import http.server
import os
import subprocess
import threading
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from support.index_server import LoopbackIndex
from support.interrupts import wait_until
from support.stub_projects import (OBLITERATUS_DEPENDENCIES, OBLITERATUS_EXTRAS, IndexDirs,
                                   make_obliteratus_source)
from support.wheels import build_wheel
from test_lock import catalog_env
from test_lock_target import _backend_edit, _lock_argv, _source_variant

from jetson_install.catalog.lock_file import parse_lock
from jetson_install.fleet.declared_wheel import built_as_declared, declared_wheel

_BUILD_WHEEL = "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"


def _built(folder: Path, **changed: object) -> Path:
    """The wheel a backend that honours the stub's pyproject.toml builds, with `changed` fields."""
    fields: Dict[str, object] = dict(requires=OBLITERATUS_DEPENDENCIES, extras=OBLITERATUS_EXTRAS,
                                     requires_python=">=3.10")
    fields.update(changed)
    return build_wheel(folder, "obliteratus", "0.1.3", **fields)  # type: ignore[arg-type]


def test_the_declared_wheel_holds_what_pyproject_states_and_a_wheel_built_so_agrees(tmp_path: Path) -> None:
    source = make_obliteratus_source(tmp_path / "source")
    made = declared_wheel(source, tmp_path / "declared")
    assert made is not None
    wheel, declared = made
    assert wheel.name == "obliteratus-0.1.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("obliteratus-0.1.3.dist-info/METADATA").decode()
    assert "Requires-Dist: transformers>=4.40\n" in metadata and "Requires-Python: >=3.10\n" in metadata
    assert 'Requires-Dist: bitsandbytes>=0.46.1; extra == "quantization"\n' in metadata, metadata
    assert built_as_declared(_built(tmp_path / "built"), declared)
    assert built_as_declared(wheel, declared)


@pytest.mark.parametrize(("what", "changed"), [
    ("a requirement pyproject.toml does not state", dict(requires=(*OBLITERATUS_DEPENDENCIES, "pytest>=8"))),
    ("a requirement's bound changed", dict(requires=("torch>=2.1", *OBLITERATUS_DEPENDENCIES[1:]))),
    ("an extra's requirement dropped", dict(extras={extra: () for extra in OBLITERATUS_EXTRAS})),
    ("another Requires-Python", dict(requires_python=">=3.11")),
    ("a platform wheel", dict(tag="cp310-cp310-linux_aarch64")),
])
def test_a_built_wheel_that_says_otherwise_than_pyproject_does_not_agree(tmp_path: Path, what: str,
                                                                          changed: Dict[str, object]) -> None:
    made = declared_wheel(make_obliteratus_source(tmp_path / "source"), tmp_path / "declared")
    assert made is not None
    assert not built_as_declared(_built(tmp_path / "built", **changed), made[1]), what


@pytest.mark.parametrize("dynamic", ["dependencies", "optional-dependencies", "version", "requires-python"])
def test_a_dynamic_field_the_resolution_reads_makes_no_declared_wheel(tmp_path: Path, dynamic: str) -> None:
    source = make_obliteratus_source(tmp_path / "source")
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[project]\n", f'[project]\ndynamic = ["{dynamic}"]\n'))
    assert declared_wheel(source, tmp_path / "declared") is None
    assert not (tmp_path / "declared").exists()


def test_a_pyproject_with_no_project_table_makes_no_declared_wheel(tmp_path: Path) -> None:
    """setup.py's projects: the backend alone says what they require."""
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n')
    assert declared_wheel(tmp_path, tmp_path / "declared") is None


def _rest(lock: Path) -> List[str]:
    """The lock's lines less its source, its commit and its built wheel (each variant's own)."""
    built = {entry.name for entry in parse_lock(lock.read_text(), str(lock)).entries if entry.origin == "built"}
    return [line for line in lock.read_text().splitlines()
            if not line.startswith(("# source", *(f"{name} @ " for name in built), *(f"# {name} " for name in built)))]


@pytest.mark.slow  # two locks
def test_the_rest_is_resolved_while_the_build_waits_and_is_what_the_built_wheel_resolves_to(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    """The build backend waits until the test lets it go, which the test does once the rest's
    resolution is written; a variant whose wheel adds a requirement for Python 2 alone (which
    changes nothing for the board, but is not what pyproject.toml states) is resolved from its
    built wheel: the two locks hold the same files."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    go = tmp_path / "go"
    os.mkfifo(go)
    waits = _source_variant(obliteratus_git_repo, tmp_path / "waits", _backend_edit(
        _BUILD_WHEEL, _BUILD_WHEEL + f"    open({str(go)!r}).readline()\n"))
    # Read-write, so that neither side's open waits for the other, and the line waits in the pipe.
    release = os.open(go, os.O_RDWR)
    output = tmp_path / "board.lock"
    process = subprocess.Popen(_lock_argv(vendor_index.url, public_index.url, waits, output), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        def resolved() -> bool:
            return any(Path(env["TMPDIR"]).glob("jetson-install-lock-*/pylock.default.toml"))

        assert wait_until(lambda: process.poll() is not None or resolved(), 60)
        assert process.poll() is None and resolved(), "the rest was not resolved while the target built"
    finally:
        os.write(release, b"go\n")
        _, stderr = process.communicate(timeout=120)
        os.close(release)
    assert process.returncode == 0, stderr
    python2_only = _source_variant(obliteratus_git_repo, tmp_path / "python2-only", _backend_edit(
        "DEPENDENCIES = [", "DEPENDENCIES = ['pytest>=8; python_version < \"3\"', "))
    other = tmp_path / "python2-only.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, python2_only, other), capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert _rest(output) == _rest(other)
    assert len(parse_lock(output.read_text(), str(output)).entries) == 40


@pytest.mark.slow  # a lock
def test_dynamic_dependencies_are_resolved_from_the_built_wheel(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        obliteratus_git_repo: Path, tmp_path: Path) -> None:
    """pyproject.toml leaves its dependencies to the backend (`dynamic`), which requires pytest
    beside the rest: the lock holds it, as boards installing with --no-deps need."""
    env = catalog_env(tmp_path, stub_index_dirs.vendor)

    def dynamic(source: Path) -> None:
        _backend_edit("DEPENDENCIES = [", "DEPENDENCIES = ['pytest>=8', ")(source)
        pyproject = source / "pyproject.toml"
        text = pyproject.read_text()
        start = text.index("dependencies = [")
        pyproject.write_text(text[:start] + 'dynamic = ["dependencies"]' + text[text.index("]\n", start) + 1:])

    variant = _source_variant(obliteratus_git_repo, tmp_path / "dynamic", dynamic)
    assert 'dynamic = ["dependencies"]' in (variant / "pyproject.toml").read_text()
    output = tmp_path / "board.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, public_index.url, variant, output), capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    versions = {entry.name: entry.version for entry in parse_lock(output.read_text(), str(output)).entries}
    assert versions["pytest"] == "8.3.3" and "transformers" in versions, output.read_text()


@pytest.fixture
def counting_index() -> Iterator[Tuple[str, "collections.Counter[str]"]]:
    """An index URL that answers every request 404 (nothing is there), and the paths asked, counted."""
    asked: "collections.Counter[str]" = collections.Counter()

    class Missing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked[self.path] += 1
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Missing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/", asked
    server.shutdown()
    server.server_close()


@pytest.mark.slow  # a lock
def test_a_default_index_that_fails_the_resolution_is_asked_once(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, obliteratus_git_repo: Path, tmp_path: Path,
        counting_index: Tuple[str, "collections.Counter[str]"]) -> None:
    """The resolution from the declared metadata failed, and the built wheel says the same: the
    one from the built wheel would fail alike, so it is not run (an index that times out would
    make the user wait twice). The error is the resolution's."""
    url, asked = counting_index
    env = catalog_env(tmp_path, stub_index_dirs.vendor)
    output = tmp_path / "board.lock"
    done = subprocess.run(_lock_argv(vendor_index.url, url, obliteratus_git_repo, output), capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-2].startswith(f"error: resolving from the default index ({url}) failed: "), \
        done.stderr
    assert asked and max(asked.values()) == 1, asked
    assert not output.exists()
