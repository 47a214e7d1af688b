"""The OCI registry lane: a real registry (Debian's docker-registry, the CNCF distribution
registry) started on loopback by the test, as a fleet runs one: a wheelhouse pushed to it,
runners installing from it by tag (with their own lock) and by digest, the vendor failover
taking the recorded builds from it when the vendor index is dead, htpasswd authentication with
the credentials where registries' clients keep them, a blob whose bytes were changed in the
registry's store refused, and a site cache (a second registry in proxy mode) in front of it
for eight runners. Stub wheels throughout (tests/support/stub_projects.py), so the lane costs
minutes, not the real torch's gigabytes. tests/setup.d/35-fleet-engines installs the registry.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict

import pytest
from support import isolated_env
from support.catalogs import stub_catalog_text
from support.cli import CliResult, run_cli
from support.engines import Registry
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs

from jetson_install.catalog.lock_file import parse_lock

pytestmark = pytest.mark.lane

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"
DEAD = "http://127.0.0.1:9/simple"  # the discard port: nothing listens there
TOKEN = "s3cret-registry-password"


def _env(folder: Path, vendor_dir: Path) -> Dict[str, str]:
    """A machine of its own (home, uv cache) whose catalog describes the stub vendor builds."""
    folder.mkdir(parents=True, exist_ok=True)
    catalog = folder / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    env = isolated_env(folder, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, stub_index_dirs: IndexDirs, board_here: Path,
           obliteratus_source: Path) -> Dict[str, Path]:
    """A lock for this machine's interpreter and its wheelhouse (its vendor files among them)."""
    folder = tmp_path_factory.mktemp("registry-lane")
    env = _env(folder / "maker", stub_index_dirs.vendor)
    vendor = LoopbackIndex(stub_index_dirs.vendor, name="vendor").start()
    public = LoopbackIndex(stub_index_dirs.public, name="public").start()
    try:
        made = run_cli("lock", "--root", str(board_here), "--vendor-index", vendor.url, "--default-index", public.url,
                       "--source", str(obliteratus_source), "--output", str(folder / "here.lock"),
                       "--python", sys.executable, env=env)
        assert made.returncode == 0, made.stderr
        filled = run_cli("wheelhouse", str(folder / "house"), "--lock", str(folder / "here.lock"), env=env)
        assert filled.returncode == 0, filled.stderr
    finally:
        vendor.stop()
        public.stop()
    return {"lock": folder / "here.lock", "house": folder / "house"}


def _install(env: Dict[str, str], venv: Path, *args: str) -> CliResult:
    return run_cli("obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                   "--vendor-index", DEAD, "--default-index", DEAD, *args, "--no-verify", "--yes", "--json", env=env)


def _push(env: Dict[str, str], house: Path, reference: str) -> Dict[str, Any]:
    pushed = run_cli("wheelhouse", str(house), "--push", reference, "--json", env=env)
    assert pushed.returncode == 0, pushed.stderr
    return dict(json.loads(pushed.stdout))


def test_a_wheelhouse_pushed_installs_by_tag_and_by_digest_and_other_bytes_are_refused(
        locked: Dict[str, Path], stub_index_dirs: IndexDirs, tmp_path: Path) -> None:
    registry = Registry(tmp_path / "registry")
    try:
        env = _env(tmp_path / "pusher", stub_index_dirs.vendor)
        pushed = _push(env, locked["house"], registry.reference("jetson/jp6", "v1"))
        entries = parse_lock(locked["lock"].read_text(), "lock").entries
        assert pushed["files"] == len({entry.sha256 for entry in entries})

        runner = _env(tmp_path / "runner", stub_index_dirs.vendor)
        by_tag = _install(runner, tmp_path / "by-tag", "--lock", str(locked["lock"]), "--wheelhouse",
                          registry.reference("jetson/jp6", "v1"))
        assert by_tag.returncode == 0, by_tag.stderr
        assert [step["id"] for step in json.loads(by_tag.stdout)["steps"]][2:4] == ["fetch", "lock"]
        by_digest = _install(runner, tmp_path / "by-digest", "--wheelhouse", pushed["pushed"])
        assert by_digest.returncode == 0, by_digest.stderr
        assert json.loads(by_digest.stdout)["lock"]["file"] == f"{pushed['pushed']} lock.txt"
        served = registry.blob_bytes_served()
        assert all(f"sha256:{entry.sha256}" in served for entry in entries)

        # A blob whose bytes changed in the registry's store: the runner refuses it.
        torch = next(entry for entry in entries if entry.name == "torch")
        registry.blob_file(f"sha256:{torch.sha256}").write_bytes(b"not the torch the lock names")
        cold = _env(tmp_path / "cold-runner", stub_index_dirs.vendor)
        refused = _install(cold, tmp_path / "refused", "--lock", str(locked["lock"]), "--wheelhouse",
                           registry.reference("jetson/jp6", "v1"))
        assert refused.returncode == 1, refused.stderr
        error = json.loads(refused.stdout)["error"]
        assert error["step"] == "fetch" and f"the blob sha256:{torch.sha256} arrived with other bytes" in error["message"]
        assert not (tmp_path / "refused").exists()
    finally:
        registry.stop()


def test_a_registry_stands_in_for_a_dead_vendor_index(locked: Dict[str, Path], stub_index_dirs: IndexDirs,
                                                       tmp_path: Path, obliteratus_source: Path) -> None:
    registry = Registry(tmp_path / "registry")
    public = LoopbackIndex(stub_index_dirs.public, name="public").start()
    try:
        env = _env(tmp_path / "pusher", stub_index_dirs.vendor)
        _push(env, locked["house"], registry.reference("jetson/jp6", "v1"))  # the wheelhouse holds the vendor files
        mirror = registry.reference("jetson/jp6")
        runner = _env(tmp_path / "runner", stub_index_dirs.vendor)
        result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--python", sys.executable,
                         "--vendor-index", DEAD, "--mirror", mirror, "--default-index", public.url,
                         "--source", str(obliteratus_source), "--no-verify", "--yes", "--json", env=runner)
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["resolution"]["source"] == mirror
        assert any(warning.startswith(f"vendor source {DEAD} passed over: did not answer") for warning in data["warnings"])
        checked = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", DEAD, "--mirror", mirror, "--json",
                          env=runner)
        reports = {report["index"]: report["status"] for report in json.loads(checked.stdout)}
        assert reports == {DEAD: "unreachable", mirror: "ok"}, checked.stdout
    finally:
        public.stop()
        registry.stop()


def test_a_registry_with_htpasswd_takes_the_credentials_docker_login_and_netrc_keep(
        locked: Dict[str, Path], stub_index_dirs: IndexDirs, tmp_path: Path) -> None:
    htpasswd = tmp_path / "htpasswd"
    made = subprocess.run(["htpasswd", "-Bbn", "fleet", TOKEN], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"htpasswd: {made.stderr}")
    htpasswd.write_text(made.stdout)
    registry = Registry(tmp_path / "registry", htpasswd=htpasswd)
    try:
        env = _env(tmp_path / "pusher", stub_index_dirs.vendor)
        reference = registry.reference("jetson/jp6", "v1")
        anonymous = run_cli("wheelhouse", str(locked["house"]), "--push", reference, env=env)
        assert anonymous.returncode == 1, anonymous.stderr
        assert anonymous.stderr.splitlines()[0] == (f"error: {reference}: the registry wants credentials, and none are "
                                                    f"kept for {registry.host}")
        assert "docker login HOST" in anonymous.stderr and "~/.netrc" in anonymous.stderr
        # What `docker login` writes, where docker reads it.
        docker = Path(env["HOME"]) / ".docker"
        docker.mkdir()
        (docker / "config.json").write_text(json.dumps(
            {"auths": {registry.host: {"auth": base64.b64encode(f"fleet:{TOKEN}".encode()).decode()}}}))
        pushed = run_cli("wheelhouse", str(locked["house"]), "--push", reference, "--json", env=env)
        assert pushed.returncode == 0, pushed.stderr
        runner = _env(tmp_path / "runner", stub_index_dirs.vendor)
        netrc = Path(runner["HOME"]) / ".netrc"
        netrc.write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
        netrc.chmod(0o600)
        installed = _install(runner, tmp_path / "env", "--lock", str(locked["lock"]), "--wheelhouse", reference)
        assert installed.returncode == 0, installed.stderr
        for result in (anonymous, pushed, installed):
            assert TOKEN not in result.stdout + result.stderr
        logs = [path for path in (tmp_path / "runner").rglob("*") if path.is_file() and "log" in path.parts[-2:][0]]
        assert logs and all(TOKEN not in log.read_text(errors="replace") for log in logs)
    finally:
        registry.stop()


def test_a_site_cache_serves_eight_runners_and_the_registry_each_blob_for_its_first_fill_only(
        locked: Dict[str, Path], stub_index_dirs: IndexDirs, tmp_path: Path) -> None:
    registry = Registry(tmp_path / "registry")
    try:
        env = _env(tmp_path / "pusher", stub_index_dirs.vendor)
        _push(env, locked["house"], registry.reference("jetson/jp6", "v1"))
        pushed_blobs = registry.blob_bytes_served()  # a push serves none
        cache = Registry(tmp_path / "site-cache", proxy=registry.url)
        try:
            reference = cache.reference("jetson/jp6", "v1")
            entries = parse_lock(locked["lock"].read_text(), "lock").entries
            sizes = {f"sha256:{entry.sha256}": (locked["house"] / "files" / entry.filename).stat().st_size
                     for entry in entries}

            def runner(number: int) -> "subprocess.CompletedProcess[str]":
                # A process each: eight machines, each with its own home and uv cache.
                folder = tmp_path / f"runner-{number}"
                return subprocess.run(
                    [sys.executable, "-m", "jetson_install", "obliteratus", "--root", SAMPLE, "--venv", str(folder / "env"),
                     "--python", sys.executable, "--vendor-index", DEAD, "--default-index", DEAD, "--lock",
                     str(locked["lock"]), "--wheelhouse", reference, "--no-verify", "--yes", "--json"],
                    capture_output=True, text=True, env=_env(folder, stub_index_dirs.vendor), timeout=900)

            # One runner fills the cache, then seven start at once (a site's runners booting together).
            first = runner(0)
            assert first.returncode == 0, first.stderr
            filled = {digest: list(sent) for digest, sent in registry.blob_bytes_served().items()}
            with ThreadPoolExecutor(7) as pool:
                rest = list(pool.map(runner, range(1, 8)))
            assert all(result.returncode == 0 for result in rest), [result.stderr for result in rest if result.returncode]
            served = registry.blob_bytes_served()
        finally:
            cache.stop()
    finally:
        registry.stop()
    assert pushed_blobs == {}
    # The registry served each blob for the cache's first fill, and nothing to the seven after it:
    # at most twice (distribution 2.8's proxy fetches a blob once for the runner and once for its store).
    assert served == filled
    assert set(served) == set(sizes)
    assert all(1 <= len(sent) <= 2 and all(size == sizes[digest] for size in sent) for digest, sent in served.items())
    asked = sum(sum(sent) for sent in served.values())
    print(f"\nsite cache: eight runners, {sum(sizes.values())} bytes of files each; the registry served {asked} bytes "
          f"({asked / sum(sizes.values()):.2f}x one runner's), {max(len(sent) for sent in served.values())} GETs "
          "per blob at most, all during the first runner")
