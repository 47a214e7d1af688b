"""OCI registries as sources, on a loopback stub registry (support/oci_registry.py): references
read, a wheelhouse pushed as `oras push` writes it, blobs fetched by digest and refused with
other bytes, credentials taken where registries' clients keep them and never shown, and an
install from the registry with a lock's hashes deciding. The real registry's lane is
tests/test_registry_lane.py."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List

import pytest
from support import VENDOR_PINS, isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.index_server import LoopbackIndex
from support.oci_registry import StubRegistry
from support.stub_projects import IndexDirs

from jetson_install.base.errors import BadInput, BlobMismatch, RegistryRefused, StepFailed
from jetson_install.base.oci_ref import Reference, parse_reference
from jetson_install.catalog.lock_file import Lock, Locked, parse_lock, render_lock
from jetson_install.fleet.oci_wheelhouse import push_wheelhouse
from jetson_install.tools.oci import Registry

if TYPE_CHECKING:
    from jetson_install.catalog.catalog import VendorSource

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"
TOKEN = "s3cret-token-never-shown"


@pytest.mark.parametrize(("text", "expected"), [
    ("oci://127.0.0.1:5000/fleet/jp6:v1", Reference("127.0.0.1:5000", "fleet/jp6", "v1")),
    ("oci://registry.example/a.b_c--d/e@sha256:" + "0" * 64, Reference("registry.example", "a.b_c--d/e", None, "sha256:" + "0" * 64)),
    ("oci://[::1]:5000/wh:t@sha256:" + "a" * 64, Reference("[::1]:5000", "wh", "t", "sha256:" + "a" * 64)),
    ("oci://ghcr.io/org/wheelhouse", Reference("ghcr.io", "org/wheelhouse")),
])
def test_a_reference_reads_back_as_written(text: str, expected: Reference) -> None:
    assert parse_reference(text, "--mirror") == expected
    assert str(expected) == text


@pytest.mark.parametrize(("text", "said"), [
    ("oci://user:token@ghcr.io/org/wh:v1", "carries credentials"),
    ("oci://ghcr.io", "names no registry host"),
    ("oci://ghcr.io:99999/wh:v1", "names no registry host"),
    ("oci://ghcr.io/Org/wh:v1", "is not a repository name"),
    ("oci://ghcr.io/org/wh:-v1", "is not a tag"),
    ("oci://ghcr.io/org/wh@sha256:abc", "is not a sha256 digest"),
    ("https://ghcr.io/org/wh", "is not an oci:// reference"),
])
def test_a_bad_reference_is_one_line_with_its_form(text: str, said: str) -> None:
    with pytest.raises(BadInput) as refused:
        parse_reference(text, "--wheelhouse")
    assert said in refused.value.message and refused.value.message.startswith("--wheelhouse: ")
    assert "token" not in refused.value.message or "credentials" in said
    assert refused.value.fix


@pytest.fixture
def registry() -> Iterator[StubRegistry]:
    started = StubRegistry(users={"fleet": TOKEN}).start()
    yield started
    started.stop()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own: no ~/.docker or ~/.netrc of the developer's is read."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    return folder


def _house(folder: Path, files: Dict[str, bytes]) -> Path:
    """A wheelhouse as `wheelhouse DIR --lock` leaves it (its files, and their lock)."""
    (folder / "files").mkdir(parents=True)
    entries = []
    for name, data in files.items():
        (folder / "files" / name).write_bytes(data)
        distribution, version = name.split("-")[:2]
        entries.append(Locked(distribution, version, f"https://index.example/files/{name}",
                              hashlib.sha256(data).hexdigest(), "default"))
    (folder / "lock.txt").write_text(render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35",
                                                      "none (the stack alone)", None, "0", tuple(entries), (), "torch")))
    return folder


FILES = {"demo-1.0-py3-none-any.whl": b"demo wheel" * 1000, "other-2.0-py3-none-any.whl": b"other" * 3000}


def test_a_pushed_wheelhouse_is_one_manifest_of_titled_blobs_as_oras_writes_it(
        registry: StubRegistry, home: Path, tmp_path: Path) -> None:
    (home / ".docker").mkdir()
    (home / ".docker" / "config.json").write_text(json.dumps(
        {"auths": {registry.host: {"auth": base64.b64encode(f"fleet:{TOKEN}".encode()).decode()}}}))
    house = _house(tmp_path / "house", FILES)
    said: List[str] = []
    result = push_wheelhouse(house, parse_reference(registry.reference("fleet/jp6", "v1"), "--push"), False, said.append)
    manifest_bytes = registry.manifests["fleet/jp6"]["v1"]
    digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    assert result["digest"] == digest and result["pushed"] == registry.reference("fleet/jp6", "v1") + "@" + digest
    assert result["install"] == f"jetson-install torch --wheelhouse {result['pushed']}"
    manifest = json.loads(manifest_bytes)
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    assert manifest["artifactType"] == "application/vnd.jetson-install.wheelhouse.v1"
    titles = {layer["annotations"]["org.opencontainers.image.title"]: layer["digest"] for layer in manifest["layers"]}
    assert titles == {**{name: "sha256:" + hashlib.sha256(data).hexdigest() for name, data in FILES.items()},
                      "lock.txt": "sha256:" + hashlib.sha256((house / "lock.txt").read_bytes()).hexdigest()}
    assert all(registry.blobs["fleet/jp6"][digest] == (house / "files" / name).read_bytes()
               for name, digest in titles.items() if name != "lock.txt")
    # Pushed again, nothing is sent twice, and the same files give the same digest.
    again = push_wheelhouse(house, parse_reference(registry.reference("fleet/jp6", "v2"), "--push"), False, said.append)
    assert again["digest"] == digest and again["uploaded"] == 0
    assert TOKEN not in json.dumps(result) + "\n".join(said)


def test_a_push_without_credentials_is_refused_with_where_they_go(registry: StubRegistry, home: Path, tmp_path: Path) -> None:
    with pytest.raises(StepFailed) as refused:
        push_wheelhouse(_house(tmp_path / "house", FILES), parse_reference(registry.reference("fleet/jp6", "v1"), "--push"),
                        False, lambda line: None)
    assert "refused" in refused.value.message and "docker login" in (refused.value.fix or "")
    assert "~/.netrc" in (refused.value.fix or "") and not registry.manifests


def test_a_wheelhouse_file_that_is_not_its_locks_is_never_pushed(registry: StubRegistry, home: Path, tmp_path: Path) -> None:
    house = _house(tmp_path / "house", FILES)
    (house / "files" / "demo-1.0-py3-none-any.whl").write_bytes(b"swapped")
    with pytest.raises(BadInput) as refused:
        push_wheelhouse(house, parse_reference(registry.reference("fleet/jp6", "v1"), "--push"), False, lambda line: None)
    assert "does not have the sha256 its lock names" in refused.value.message
    assert refused.value.fix == f"fill it from its lock first: jetson-install wheelhouse {house} --lock FILE"
    assert not registry.requests


@pytest.mark.parametrize("where", ["netrc", "helper", "identity-token"])
def test_credentials_come_from_netrc_or_a_credential_helper_and_reach_only_the_token_service(
        registry: StubRegistry, home: Path, tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "netrc":
        (home / ".netrc").write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
        (home / ".netrc").chmod(0o600)
    elif where == "helper":
        helpers = tmp_path / "bin"
        helpers.mkdir()
        helper = helpers / "docker-credential-stub"
        # As docker's helpers answer `get`: the server on stdin, JSON on stdout.
        helper.write_text(f"#!/bin/sh\nread server\nprintf '{{\"ServerURL\":\"%s\",\"Username\":\"fleet\",\"Secret\":\"{TOKEN}\"}}' \"$server\"\n")
        helper.chmod(0o755)
        monkeypatch.setenv("PATH", f"{helpers}:{os.environ['PATH']}")
        (home / ".docker").mkdir()
        (home / ".docker" / "config.json").write_text(json.dumps({"credHelpers": {registry.host: "stub"}}))
    else:  # docker login's OAuth2 identity token, exchanged by POST at the token service
        registry.identity_tokens["fleet"] = TOKEN
        (home / ".docker").mkdir()
        (home / ".docker" / "config.json").write_text(json.dumps({"auths": {registry.host: {"identitytoken": TOKEN}}}))
    house = _house(tmp_path / "house", FILES)
    push_wheelhouse(house, parse_reference(registry.reference("fleet/jp6", "v1"), "--push"), False, lambda line: None)
    schemes = {scheme for method, path, scheme, _ in registry.requests if path != "/token"}
    assert schemes <= {"", "Bearer"}  # the registry itself never saw the password, only tokens
    assert any(path == "/token" and (scheme == "Basic" or method == "POST") for method, path, scheme, _ in registry.requests)


def test_a_blob_with_other_bytes_is_refused_and_nothing_of_it_kept(registry: StubRegistry, home: Path, tmp_path: Path) -> None:
    data = b"the real wheel"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    registry.blobs["fleet/jp6"] = {digest: data}
    registry.corrupt[digest] = b"the real whee!"
    reference = parse_reference(registry.reference("fleet/jp6"), "--mirror")
    target = tmp_path / "wheel.whl"
    with pytest.raises(BlobMismatch) as refused:
        Registry(reference, False).fetch_blob(reference, digest, target)
    assert refused.value.message.startswith(f"{reference}: the blob {digest} arrived with other bytes")
    assert not target.exists()
    del registry.corrupt[digest]
    assert Registry(reference, False).fetch_blob(reference, digest, target) == len(data) and target.read_bytes() == data


def test_credentials_never_travel_in_clear_beyond_loopback(home: Path, tmp_path: Path) -> None:
    registry = StubRegistry(users={"fleet": TOKEN}, private=True).start()
    try:
        (home / ".netrc").write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
        reference = parse_reference(registry.reference("fleet/jp6", "v1"), "--wheelhouse")
        client = Registry(reference, False)
        # The registry names a token service on another host, over plain http.
        client._root()
        with pytest.raises(RegistryRefused) as refused:
            client._authorize(reference, "repository:fleet/jp6:pull",
                              'Bearer realm="http://192.0.2.1/token",service="stub"')
        assert "over plain http" in refused.value.message and TOKEN not in refused.value.message
    finally:
        registry.stop()


def test_a_private_registry_without_credentials_says_where_they_go(home: Path, tmp_path: Path) -> None:
    registry = StubRegistry(users={"fleet": TOKEN}, private=True).start()
    try:
        reference = parse_reference(registry.reference("fleet/jp6", "v1"), "--wheelhouse")
        with pytest.raises(RegistryRefused) as refused:
            Registry(reference, False).manifest(reference)
        assert "refused an anonymous request (HTTP 401)" in refused.value.message
        assert refused.value.fix and "docker login" in refused.value.fix
    finally:
        registry.stop()


# -- an install from the registry -------------------------------------------------------------------


@pytest.fixture(scope="module")
def locked_house(tmp_path_factory: pytest.TempPathFactory, stub_index_dirs: IndexDirs, board_here: Path,
                 obliteratus_source: Path) -> Dict[str, Path]:
    """A lock for this machine's interpreter and its wheelhouse, made once for the module."""
    folder = tmp_path_factory.mktemp("locked-house")
    env = _runner_env(folder / "maker", stub_index_dirs.vendor)
    vendor = LoopbackIndex(stub_index_dirs.vendor, name="vendor").start()
    public = LoopbackIndex(stub_index_dirs.public, name="public").start()
    try:
        lock = folder / "here.lock"
        made = run_cli("lock", "--root", str(board_here), "--vendor-index", vendor.url, "--default-index", public.url,
                       "--source", str(obliteratus_source), "--output", str(lock), "--python", sys.executable, env=env)
        assert made.returncode == 0, made.stderr
        filled = run_cli("wheelhouse", str(folder / "house"), "--lock", str(lock), env=env)
        assert filled.returncode == 0, filled.stderr
    finally:
        vendor.stop()
        public.stop()
    return {"lock": lock, "house": folder / "house"}


def _runner_env(folder: Path, vendor_dir: Path) -> Dict[str, str]:
    """A machine of its own (home, uv cache) whose catalog describes the stub vendor builds."""
    folder.mkdir(parents=True, exist_ok=True)
    catalog = folder / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    env = isolated_env(folder, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


@pytest.mark.slow
def test_a_runner_installs_from_the_registry_by_tag_with_its_lock_or_by_digest_alone(
        locked_house: Dict[str, Path], stub_index_dirs: IndexDirs, registry: StubRegistry, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "pusher"))
    (tmp_path / "pusher").mkdir()
    (tmp_path / "pusher" / ".netrc").write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
    pushed = push_wheelhouse(locked_house["house"], parse_reference(registry.reference("fleet/jp6", "v1"), "--push"),
                             False, lambda line: None)
    lock = locked_house["lock"]
    entries = parse_lock(lock.read_text(), "lock").entries
    env = _runner_env(tmp_path / "runner", stub_index_dirs.vendor)
    before = len(registry.blob_gets())
    by_tag = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--python", sys.executable,
                     "--lock", str(lock), "--wheelhouse", registry.reference("fleet/jp6", "v1"),
                     "--no-verify", "--yes", "--json", env=env)
    assert by_tag.returncode == 0, by_tag.stderr
    data = json.loads(by_tag.stdout)
    assert data["installed"]["torch"].startswith("2.5.0a0")
    assert [step["id"] for step in data["steps"]][2:4] == ["fetch", "lock"]
    # Each file once, by its digest; nothing fetched is left in the environment.
    assert sorted(registry.blob_gets()[before:]) == sorted({"sha256:" + entry.sha256 for entry in entries})
    environment = Path(os.path.realpath(tmp_path / "env"))
    assert not (environment / "jetson-install" / "fetched").exists()
    assert (environment / "jetson-install" / "lock.txt").read_text() == lock.read_text()

    # By digest alone: the digest pins the manifest, the manifest the lock, the lock each file.
    by_digest = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env2"), "--python", sys.executable,
                        "--wheelhouse", pushed["pushed"], "--no-verify", "--yes", "--json", env=env)
    assert by_digest.returncode == 0, by_digest.stderr
    assert json.loads(by_digest.stdout)["lock"]["file"] == f"{pushed['pushed']} lock.txt"


@pytest.mark.slow
def test_a_registry_blob_with_other_bytes_fails_the_fetch_and_keeps_the_environment(
        locked_house: Dict[str, Path], stub_index_dirs: IndexDirs, registry: StubRegistry, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "pusher"))
    (tmp_path / "pusher").mkdir()
    (tmp_path / "pusher" / ".netrc").write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
    push_wheelhouse(locked_house["house"], parse_reference(registry.reference("fleet/jp6", "v1"), "--push"), False,
                    lambda line: None)
    torch = next(entry for entry in parse_lock(locked_house["lock"].read_text(), "lock").entries if entry.name == "torch")
    registry.corrupt["sha256:" + torch.sha256] = b"not torch"
    env = _runner_env(tmp_path / "runner", stub_index_dirs.vendor)
    result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--python", sys.executable,
                     "--lock", str(locked_house["lock"]), "--wheelhouse", registry.reference("fleet/jp6", "v1"),
                     "--no-verify", "--yes", "--json", env=env)
    assert result.returncode == 1, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["step"] == "fetch", error
    assert f"the blob sha256:{torch.sha256} arrived with other bytes" in error["message"] and "refused" in error["message"]
    assert not (tmp_path / "env").exists() and not list(tmp_path.glob("env.d/env-*"))
    assert stat.S_ISDIR(os.stat(tmp_path).st_mode)


# -- a registry as a mirror of the recorded builds ---------------------------------------------------

REFUSED = "http://127.0.0.1:9/simple"  # the discard port: nothing listens there


def _holding(registry: StubRegistry, folder: Path, repository: str = "mirror/jp6") -> str:
    """The registry holding every wheel of `folder` as a blob of `repository`; its reference."""
    registry.blobs[repository] = {"sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(): path.read_bytes()
                                  for path in folder.glob("*.whl")}
    return registry.reference(repository)


def _source(tmp_path: Path, vendor_dir: Path, *urls: str) -> "VendorSource":
    import dataclasses

    from jetson_install.catalog.catalog import load_catalog

    path = tmp_path / "wheels-index.toml"
    path.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    source = load_catalog(path).channel("jp6-cu126").primary
    assert source is not None
    from jetson_install.base.sourced import Sourced

    return dataclasses.replace(source, index=urls[0], mirrors=tuple(Sourced(url, "--mirror") for url in urls[1:]))


def test_a_registry_stands_in_for_a_dead_vendor_index_with_the_recorded_builds_by_sha256(
        registry: StubRegistry, stub_index_dirs: IndexDirs, home: Path, tmp_path: Path) -> None:
    from jetson_install.planning import vendor_sources

    mirror = _holding(registry, stub_index_dirs.vendor)
    source = _source(tmp_path, stub_index_dirs.vendor, REFUSED, mirror)
    resolution = vendor_sources.resolve(source, source.index, "3.10", "2.35")
    assert resolution.source == mirror and resolution.set_name == source.preferred.name
    assert all(chosen.url == f"{mirror}@sha256:{chosen.sha256}" and chosen.known for chosen in resolution.files)
    assert f"vendor source {REFUSED} passed over: did not answer (connection refused)" in resolution.warnings[0]
    # Without a tag the registry is asked for each recorded build's blob; nothing else of it is read.
    assert {method for method, path, _, _ in registry.requests if path.startswith("/v2/mirror")} == {"HEAD"}


def test_a_registry_mirror_that_lacks_the_builds_or_is_down_is_passed_over_with_its_answer(
        registry: StubRegistry, stub_index_dirs: IndexDirs, home: Path, tmp_path: Path,
        start_index: Callable[..., LoopbackIndex]) -> None:
    from jetson_install.planning import vendor_sources

    good = start_index(stub_index_dirs.vendor, name="good")
    empty = registry.reference("empty/jp6")
    dead = "oci://127.0.0.1:9/mirror/jp6"
    source = _source(tmp_path, stub_index_dirs.vendor, REFUSED, dead, empty, good.url)
    resolution = vendor_sources.resolve(source, source.index, "3.10", "2.35")
    assert resolution.source == good.url
    said = "\n".join(resolution.warnings)
    assert f"vendor source {dead} passed over: did not answer (connection refused)" in said, said
    assert f"vendor source {empty} passed over: no complete set within policy" in said, said


def test_channels_check_says_changed_for_a_registry_whose_manifest_names_a_recorded_file_with_another_digest(
        registry: StubRegistry, stub_index_dirs: IndexDirs, tmp_path: Path,
        start_index: Callable[..., LoopbackIndex]) -> None:
    """A tag whose manifest titles the recorded torch wheel with another blob: counted missing before."""
    from jetson_install.base.oci_manifest import Layer, wheelhouse_manifest

    env = _runner_env(tmp_path / "runner", stub_index_dirs.vendor)
    good = start_index(stub_index_dirs.vendor, name="good")
    wheels = {path.name: path.read_bytes() for path in stub_index_dirs.vendor.glob("*.whl")}
    torch = next(name for name in wheels if name.startswith("torch-2.5.0a0"))
    recorded = hashlib.sha256(wheels[torch]).hexdigest()
    wheels[torch] = wheels[torch] + b"another build"
    blobs = {name: ("sha256:" + hashlib.sha256(data).hexdigest(), data) for name, data in wheels.items()}
    registry.blobs["mirror/jp6"] = dict(blobs.values())
    registry.manifests["mirror/jp6"] = {"v1": wheelhouse_manifest(
        [Layer(name, digest, len(data)) for name, (digest, data) in sorted(blobs.items())])}
    mirror = registry.reference("mirror/jp6", "v1")
    result = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", good.url, "--mirror", mirror, "--json",
                     env=env)
    assert result.returncode == 1, result.stderr
    reports = {report["index"]: report for report in json.loads(result.stdout)}
    assert (reports[good.url]["status"], reports[mirror]["status"]) == ("ok", "changed")
    assert reports[mirror]["lines"] == [
        f"preferred set torch=={VENDOR_PINS['torch']}: {mirror} serves {torch} with sha256 "
        f"{blobs[torch][0][len('sha256:'):]}, but wheels-index.toml records sha256 {recorded} for that file: "
        "refusing a different build under a recorded name"]


@pytest.mark.slow
def test_an_install_takes_the_recorded_builds_from_a_registry_when_the_vendor_index_is_down(
        registry: StubRegistry, stub_index_dirs: IndexDirs, tmp_path: Path, public_index: LoopbackIndex,
        obliteratus_source: Path) -> None:
    mirror = _holding(registry, stub_index_dirs.vendor)
    env = _runner_env(tmp_path / "runner", stub_index_dirs.vendor)
    result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--python", sys.executable,
                     "--vendor-index", REFUSED, "--mirror", mirror, "--default-index", public_index.url,
                     "--source", str(obliteratus_source), "--no-verify", "--yes", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["resolution"]["source"] == mirror
    assert data["installed"]["torch"].startswith("2.5.0a0")
    assert sorted(registry.blob_gets()) == sorted(file["sha256"] and "sha256:" + file["sha256"]
                                                  for file in data["resolution"]["files"])
    assert not (Path(os.path.realpath(tmp_path / "env")) / "jetson-install" / "fetched").exists()


def test_a_wheelhouse_takes_a_vendor_file_its_lock_url_does_not_deliver_from_a_registry(
        registry: StubRegistry, stub_index_dirs: IndexDirs, home: Path, tmp_path: Path) -> None:
    from jetson_install.base.errors import StepFailed as Failed
    from jetson_install.catalog.lock_file import file_sha256
    from jetson_install.fleet.wheelhouse import fill_wheelhouse

    torch = next(stub_index_dirs.vendor.glob("torch-*.whl"))
    entry = Locked("torch", torch.name.split("-")[1], f"http://127.0.0.1:9/files/{torch.name}", file_sha256(torch),
                   "vendor")
    lock = Lock("jp6-cu126", "3.10", "aarch64", "native", "none", None, "test", (entry,))
    mirror = registry.reference("mirror/jp6")
    registry.blobs["mirror/jp6"] = {"sha256:" + entry.sha256: b"not the wheel"}
    with pytest.raises(Failed) as refused:
        fill_wheelhouse(lock, tmp_path / "refused", mirrors=(mirror,))
    assert "arrived with other bytes" in refused.value.message
    assert not any((tmp_path / "refused" / "files").iterdir())
    _holding(registry, stub_index_dirs.vendor)
    fill_wheelhouse(lock, tmp_path / "wheelhouse", mirrors=(mirror,))
    assert file_sha256(tmp_path / "wheelhouse" / "files" / torch.name) == entry.sha256


def test_the_wheelhouse_command_pushes_and_prints_the_digest_and_each_runners_command(
        registry: StubRegistry, tmp_path: Path) -> None:
    house = _house(tmp_path / "house", FILES)
    env = isolated_env(tmp_path, fast_fail=True)
    netrc = Path(env["HOME"]) / ".netrc"
    netrc.write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
    netrc.chmod(0o600)
    reference = registry.reference("fleet/jp6", "v1")
    result = run_cli("wheelhouse", str(house), "--push", reference, "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    pinned = f"{reference}@{data['digest']}"
    assert data["pushed"] == pinned and data["files"] == 2 and data["uploaded"] == 2
    lines = result.stderr.splitlines()
    assert lines[-3].startswith(f"pushed 2 files of {house} and its lock to {pinned} (2 uploaded")
    assert lines[-2] == f"  on each runner (the digest pins the lock, the lock each file): jetson-install torch --wheelhouse {pinned}"
    assert lines[-1] == f"  or with the runner's own copy of the lock: jetson-install torch --lock FILE --wheelhouse {reference}"
    assert TOKEN not in result.stdout + result.stderr
    bad = run_cli("wheelhouse", str(house), "--push", "oci://user:pw@127.0.0.1:5000/fleet/jp6:v1", env=env)
    assert bad.returncode == 2 and "pw" not in bad.stderr.replace("password", "")
    assert bad.stderr.splitlines()[0].startswith("error: --push: oci://127.0.0.1:5000/... carries credentials")


def test_plain_http_is_never_tried_beyond_loopback_without_allow_insecure_index() -> None:
    remote = parse_reference("oci://192.0.2.1:5000/fleet/jp6:v1", "--wheelhouse")
    assert Registry(remote, False)._root() == "https://192.0.2.1:5000"  # decided without a request


def test_the_configuration_takes_a_registry_among_its_mirrors_and_refuses_a_bad_one(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from jetson_install.catalog.settings import load_index_settings

    config = tmp_path / "config.toml"
    monkeypatch.setenv("JETSON_INSTALL_CONFIG", str(config))
    config.write_text('mirrors = ["oci://registry.fleet.example/jetson/jp6:2026-12"]\nwheelhouse = "oci://127.0.0.1:5000/w"\n')
    settings = load_index_settings(None, "--vendor-index", None, "--default-index", False, ("oci://127.0.0.1:5000/m",))
    assert [mirror.value for mirror in settings.mirrors] == [
        "oci://127.0.0.1:5000/m", "oci://registry.fleet.example/jetson/jp6:2026-12", "oci://127.0.0.1:5000/w"]
    config.write_text('mirrors = ["oci://registry.fleet.example/Jetson:v1"]\n')
    with pytest.raises(BadInput) as refused:
        load_index_settings(None, "--vendor-index", None, "--default-index", False)
    assert refused.value.message.startswith(f"config {config} mirrors: ") and "is not a repository name" in refused.value.message
