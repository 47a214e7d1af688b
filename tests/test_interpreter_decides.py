"""The interpreter's Python decides the vendor files: install, `plan --resolve`, `lock --python`
and `channels --check`, against loopback mirrors of cp310 and cp311 stub builds.

The channel (jp6-cu126) is built for Python 3.10 and its catalog records the cp310 files;
this machine's interpreter is another Python (3.11 here). A `cpXY-none-any` stub stands for
a build of one Python that installs on any platform.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, TypedDict

import pytest
from support import isolated_env, make_vendor_index_files, present, needs_obliteratus_python
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.index_server import LoopbackIndex

from jetson_install.planning import vendor_sources
from jetson_install.catalog.catalog import load_catalog
from jetson_install.catalog.identity import NoBuildForPython
from jetson_install.catalog.lock_file import parse_lock
from jetson_install.tools.runner import Completed

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"
HERE = "%d.%d" % sys.version_info[:2]
HERE_TAG = "cp%d%d" % sys.version_info[:2]
# The channel's Python, unless this machine happens to run it: then another stands in.
CHANNEL = "3.10"
OTHER_TAG = "cp310" if HERE != CHANNEL else "cp39"

pytestmark = pytest.mark.skipif(HERE == CHANNEL, reason="needs an interpreter other than the channel's Python 3.10")


class Mirrors(TypedDict):
    """The catalog that names the cp310 files, and the three mirrors."""

    catalog: Path
    channel: LoopbackIndex
    both: LoopbackIndex
    here: LoopbackIndex


@pytest.fixture
def mirrors(tmp_path: Path, start_index: Callable[..., LoopbackIndex]) -> Mirrors:
    """Three mirrors: the channel's cp310 builds only; cp310 and this Python's; the catalog
    records the cp310 files, as the real one does."""
    channel_only, both, here_only = tmp_path / "cp310", tmp_path / "both", tmp_path / "here"
    make_vendor_index_files(channel_only, tag=f"{OTHER_TAG}-none-any", bait=False)
    make_vendor_index_files(both, tag=f"{OTHER_TAG}-none-any", bait=False)
    make_vendor_index_files(both, tag=f"{HERE_TAG}-none-any", bait=False)
    make_vendor_index_files(here_only, tag=f"{HERE_TAG}-none-any", bait=False)
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), channel_only))
    return {"catalog": catalog, "channel": start_index(channel_only, name="cp310"), "both": start_index(both, name="both"),
            "here": start_index(here_only, name="here")}


def env_for(tmp_path: Path, catalog: Path) -> Dict[str, str]:
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


def install_args(tmp_path: Path, vendor_url: str, public_url: str, source: Path) -> List[str]:
    return ["obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "obl"), "--python", sys.executable,
            "--vendor-index", vendor_url, "--default-index", public_url, "--source", str(source), "--no-verify",
            "--yes", "--json"]


def test_the_resolution_takes_the_files_of_the_python_it_is_asked_for(mirrors: Mirrors) -> None:
    source = present(load_catalog(mirrors["catalog"]).channel("jp6-cu126").primary)
    here = vendor_sources.resolve(source, mirrors["both"].url, HERE, "2.35")
    assert {f.file.split("-")[-3] for f in here.files} == {HERE_TAG}
    # Those are not the files the catalog records: taken within policy, and said.
    assert all(not f.known for f in here.files)
    assert any("not a build wheels-index.toml lists" in w for w in here.warnings)
    channel = vendor_sources.resolve(source, mirrors["both"].url, CHANNEL, "2.35")
    assert {f.file.split("-")[-3] for f in channel.files} == {OTHER_TAG} and all(f.known for f in channel.files)


def test_a_mirror_without_builds_for_the_interpreter_says_which_tags_were_wanted_and_which_it_has(mirrors: Mirrors) -> None:
    source = present(load_catalog(mirrors["catalog"]).channel("jp6-cu126").primary)
    with pytest.raises(NoBuildForPython) as caught:
        vendor_sources.resolve(source, mirrors["channel"].url, HERE, "2.35")
    message = caught.value.message
    assert f"no complete set within policy for Python {HERE}" in message
    assert f"wanted wheels tagged {HERE_TAG}-{HERE_TAG}, {HERE_TAG}-abi3 or py3-none" in message
    assert f"serves the sets only as {OTHER_TAG} builds" in message
    assert "does not carry the pinned vendor builds" not in message


@pytest.mark.slow
def test_an_install_with_another_python_takes_its_builds_from_the_mirror(
        mirrors: Mirrors, public_index: LoopbackIndex, obliteratus_source: Path, tmp_path: Path) -> None:
    result = run_cli(*install_args(tmp_path, mirrors["both"].url, public_index.url, obliteratus_source),
                     env=env_for(tmp_path, mirrors["catalog"]))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "installed"
    recorded = json.loads((tmp_path / "obl" / "jetson-install" / "vendor.json").read_text())
    files = json.dumps(recorded)
    assert f"-{HERE_TAG}-none-any.whl" in files and f"-{OTHER_TAG}-none-any.whl" not in files
    warnings = " ".join(data["warnings"])
    assert f"is Python {HERE}, but channel jp6-cu126 wheels are built for Python 3.10" in warnings
    assert "not a build wheels-index.toml lists" in warnings


@pytest.mark.slow
def test_a_mirror_with_only_the_channels_python_fails_with_a_fix_that_runs_as_printed(
        mirrors: Mirrors, public_index: LoopbackIndex, obliteratus_source: Path, tmp_path: Path) -> None:
    env = env_for(tmp_path, mirrors["catalog"])
    args = install_args(tmp_path, mirrors["channel"].url, public_index.url, obliteratus_source)
    failed = run_cli(*args, env=env)
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    error = next(line for line in lines if line.startswith("error: "))
    fix = lines[lines.index(error) + 1]
    assert error.startswith("error: step 'vendor' failed: ") and f"for Python {HERE}" in error
    assert f"serves the sets only as {OTHER_TAG} builds" in error
    assert fix.startswith("  fix: ") and "does not carry the pinned vendor builds" not in fix
    assert not (tmp_path / "obl").exists()
    # Every command the fix names is the user's own with one option changed; the mirror one runs.
    mirror = fix.split(f"or use a vendor index with builds for Python {HERE}: ", 1)[1]
    argv = shlex.split(mirror)
    assert argv[0] == "jetson-install" and "--vendor-index" in argv and "URL" in argv
    assert argv[1:].count("--python") == 1 and sys.executable in argv and "--source" in argv
    argv[argv.index("URL")] = mirrors["here"].url
    ran = run_cli(*argv[1:], env=env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "installed"


def test_plan_resolve_with_python_takes_that_pythons_files(mirrors: Mirrors, tmp_path: Path) -> None:
    env = env_for(tmp_path, mirrors["catalog"])
    planned = run_cli("plan", "obliteratus", "--root", SAMPLE, "--python", sys.executable, "--vendor-index",
                      mirrors["both"].url, "--resolve", "--json", env=env)
    assert planned.returncode == 0, planned.stderr
    files = [f["file"] for f in json.loads(planned.stdout)["resolution"]["files"]]
    assert files and all(name.endswith(f"-{HERE_TAG}-none-any.whl") for name in files)
    refused = run_cli("plan", "obliteratus", "--root", SAMPLE, "--python", sys.executable, "--vendor-index",
                      mirrors["channel"].url, "--resolve", env=env)
    assert refused.returncode == 1
    assert f"serves the sets only as {OTHER_TAG} builds" in refused.stderr
    assert f"jetson-install plan obliteratus --root {SAMPLE} --python {sys.executable}" in refused.stderr


@needs_obliteratus_python
def test_a_lock_for_this_python_takes_its_files_and_keeps_the_unlisted_warning(
        mirrors: Mirrors, public_index: LoopbackIndex, board_here: Path, obliteratus_source: Path, tmp_path: Path) -> None:
    output = tmp_path / "here.lock"
    result = run_cli("lock", "--root", str(board_here), "--vendor-index", mirrors["both"].url, "--default-index",
                     public_index.url, "--source", str(obliteratus_source), "--output", str(output), "--python",
                     sys.executable, "--json", env=env_for(tmp_path, mirrors["catalog"]))
    assert result.returncode == 0, result.stderr
    lock = parse_lock(output.read_text(), str(output))
    vendor = [entry for entry in lock.entries if entry.origin == "vendor"]
    assert vendor and all(entry.filename.endswith(f"-{HERE_TAG}-none-any.whl") for entry in vendor)
    assert lock.warnings and all("not a build wheels-index.toml lists" in w for w in lock.warnings)
    assert "# warning: " in output.read_text()
    assert json.loads(result.stdout)["warnings"] == list(lock.warnings)
    assert "warning: torch-" in result.stderr


def test_a_lock_for_a_boards_python_the_mirror_lacks_names_the_python_it_has(mirrors: Mirrors, public_index: LoopbackIndex,
                                                                             tmp_path: Path) -> None:
    argv = ["lock", "--root", SAMPLE, "--vendor-index", mirrors["channel"].url, "--default-index", public_index.url,
            "--output", str(tmp_path / "board.lock"), "--python-version", HERE]
    refused = run_cli(*argv, env=env_for(tmp_path, mirrors["catalog"]))
    assert refused.returncode == 1, refused.stderr
    # A board's Python is named by --python-version: not by an interpreter here, which lock refuses.
    fix = refused.stderr.splitlines()[1]
    mirror = ["--vendor-index", mirrors["channel"].url]
    rest = [word for word in argv[:-2] if word not in mirror]
    assert fix == (f"  fix: {mirrors['channel'].url} has the set for Python {CHANNEL}: lock for that Python: "
                   f"jetson-install {' '.join(argv[:-2])} --python-version {CHANNEL}; or use a vendor index with builds for "
                   f"Python {HERE}: jetson-install {' '.join(rest)} --python-version {HERE} --vendor-index URL")


def test_channels_check_says_a_mirror_has_the_set_for_another_python(mirrors: Mirrors, tmp_path: Path) -> None:
    env = env_for(tmp_path, mirrors["catalog"])
    checked = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", mirrors["here"].url, env=env)
    assert checked.returncode == 1
    assert "missing for Python 3.10" in checked.stdout
    assert f"it has the set for Python {HERE}, which an install with that interpreter takes (--python)" in checked.stdout


def _probes(monkeypatch: pytest.MonkeyPatch) -> List[List[str]]:
    from jetson_install.envs import interpreters
    from jetson_install.tools.runner import run as real

    ran: List[List[str]] = []

    def counted(argv: Sequence[str], **kwargs: Any) -> Completed:
        ran.append(list(argv))
        return real(argv, **kwargs)

    monkeypatch.setattr(interpreters, "run", counted)
    return ran


def test_an_interpreter_is_asked_once_while_its_binary_is_unchanged(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.envs.interpreters import inspect_interpreter

    binary = tmp_path / "bin" / "python3"
    binary.parent.mkdir()
    shutil.copy2(os.path.realpath(sys.executable), binary)
    link = tmp_path / "env" / "bin" / "python"  # a venv's python: a link to the binary
    link.parent.mkdir(parents=True)
    link.symlink_to(binary)
    ran = _probes(monkeypatch)
    first = inspect_interpreter(str(link))
    assert inspect_interpreter(str(link)) == first and first.version.startswith(HERE + ".") and len(ran) == 1
    # Another Python put at the same path (an upgrade, a rebuilt venv) is asked again.
    os.utime(binary, ns=(binary.stat().st_atime_ns, binary.stat().st_mtime_ns + 10**9))
    assert inspect_interpreter(str(link)) == first and len(ran) == 2
    assert inspect_interpreter(str(link)) == first and len(ran) == 2


def test_a_wrapper_script_is_asked_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.envs.interpreters import inspect_interpreter

    shim = tmp_path / "python3"  # as a pyenv shim is: it answers for whichever Python it selects
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    shim.chmod(0o755)
    ran = _probes(monkeypatch)
    assert inspect_interpreter(str(shim)) == inspect_interpreter(str(shim))
    assert len(ran) == 2


def test_an_unreadable_interpreter_cache_is_asked_past(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    from jetson_install.envs.interpreters import inspect_interpreter

    cache = Path(platformdirs.user_cache_dir("jetson-install")) / "interpreters.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("{not json")
    ran = _probes(monkeypatch)
    found = inspect_interpreter(sys.executable)
    assert found.version.startswith(HERE + ".") and len(ran) == 1
    assert json.loads(cache.read_text())["interpreters"][os.path.realpath(sys.executable)]["version"] == found.version


def test_the_doctor_asks_no_version_of_a_venv_whose_python_the_install_asked(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.tools import runner
    from jetson_install.doctor.run import _resolve_interpreter
    from jetson_install.envs.interpreters import inspect_interpreter

    link = tmp_path / "env" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.realpath(sys.executable))
    ran: List[List[str]] = []
    real = runner.run

    def counted(argv: Sequence[str], **kwargs: Any) -> Completed:
        ran.append(list(argv))
        return real(argv, **kwargs)

    monkeypatch.setattr(runner, "run", counted)
    assert _resolve_interpreter(str(link)) == str(link) and len(ran) == 1  # not known yet: asked
    inspect_interpreter(sys.executable)  # what an install does first
    ran.clear()
    assert _resolve_interpreter(str(link)) == str(link) and ran == []


def test_a_cap_keyed_on_python_follows_the_interpreter_the_install_takes(tmp_path: Path) -> None:
    """transformers 5.21.0 says Requires-Python >=3.11: a 3.10 channel's plan caps it, but an
    install with a 3.11 (or newer) interpreter takes what that Python can."""
    env = isolated_env(tmp_path)
    channel_plan = json.loads(run_cli("plan", "obliteratus", "--root", SAMPLE, "--json", env=env).stdout)
    assert {"constraint": "transformers<5.21.0", "why": "transformers 5.21.0 needs Python 3.11, the channel's is 3.10"} \
        in channel_plan["caps"]
    result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "obl"), "--python", sys.executable,
                     "--dry-run", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["python"], data["interpreter_python"]) == (CHANNEL, HERE)
    if sys.version_info >= (3, 11):
        assert not [cap for cap in data["caps"] if cap["constraint"].startswith("transformers")]
        assert not [line for line in data["constraints"] if line.startswith("transformers")]
    else:
        assert {"constraint": "transformers<5.21.0",
                "why": f"transformers 5.21.0 needs Python 3.11, the interpreter's is {HERE}"} in data["caps"]
