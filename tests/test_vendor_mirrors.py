"""Several sources of the same recorded vendor builds: the set comes from the first source
that serves it with the recorded sha256, whatever the sources before it answered.

Every source here is on 127.0.0.1: stub wheels served by LoopbackIndex, and for the faults a
socket that refuses, stays silent, answers 503 or cuts its answer short. The catalog is the
real wheels-index.toml with jp6-cu126 describing the stubs (support.catalogs).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
from support import VENDOR_PINS, VENDOR_TORCH, build_wheel, wheel_filename
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.stub_projects import IndexDirs

from jetson_install.base.errors import IndexUnreachable, JetsonInstallError, StepFailed
from jetson_install.base.layout import EVIDENCE_FILE, RECORD_FILE, STATE_DIR
from jetson_install.base.sourced import Sourced
from jetson_install.catalog.catalog import VendorSource, load_catalog
from jetson_install.catalog.identity import IdentityMismatch, NothingInPolicy, Resolution
from jetson_install.catalog.lock_file import Lock, Locked, file_sha256
from jetson_install.fleet.wheelhouse import fill_wheelhouse
from jetson_install.planning import vendor_sources
from jetson_install.tools import index

TOP = Path(__file__).resolve().parent.parent
REAL = (TOP / "wheels-index.toml").read_text()
OLDER = {"torch": "2.6.0", "torchvision": "0.21.0", "torchaudio": "2.6.0", "bitsandbytes": ">=0.46.1"}
REFUSED = "http://127.0.0.1:9/simple"  # the discard port: nothing listens there


def source_for(tmp_path: Path, vendor_dir: Path, *urls: str, **options: Any) -> VendorSource:
    """jp6-cu126's source describing the stubs, read from `urls[0]` and then the rest."""
    path = tmp_path / "wheels-index.toml"
    path.write_text(stub_catalog_text(REAL, vendor_dir, **options))
    source = load_catalog(path).channel("jp6-cu126").primary
    assert source is not None
    return dataclasses.replace(source, index=urls[0], mirrors=tuple(Sourced(url, "--mirror") for url in urls[1:]))


def resolve(source: VendorSource) -> Resolution:
    return vendor_sources.resolve(source, source.index, "3.10", "2.35")


@pytest.fixture
def vendor_dir(private_index_dirs: IndexDirs) -> Path:
    """The stub vendor builds, plus a complete torch 2.6 set."""
    directory = private_index_dirs.vendor
    for name in ("torch", "torchvision", "torchaudio"):
        build_wheel(directory, name, OLDER[name])
    return directory


def without_the_preferred_set(vendor_dir: Path, directory: Path) -> Path:
    """A copy of the stub builds that lost the preferred set's torch, torchvision and torchaudio."""
    directory.mkdir()
    lost = {wheel_filename(name, VENDOR_PINS[name]) for name in ("torch", "torchvision", "torchaudio")}
    for path in vendor_dir.glob("*.whl"):
        if path.name not in lost:
            shutil.copyfile(path, directory / path.name)
    return directory


class RawServer:
    """A loopback socket that answers every connection the same way: `reply` bytes then a
    close (an answer cut short, a 503), or nothing at all while the client waits."""

    def __init__(self, reply: bytes = b"", silent: bool = False) -> None:
        self.reply, self.silent = reply, silent
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.held: List[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/simple"

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            connection.recv(65536)
            if self.silent:
                self.held.append(connection)  # kept open, never answered
                continue
            connection.sendall(self.reply)
            connection.close()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    started: List[RawServer] = []

    def start(reply: bytes = b"", silent: bool = False) -> RawServer:
        server = RawServer(reply, silent)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def test_a_refused_first_source_gives_the_preferred_set_from_the_mirror_and_says_so(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    mirror = start_index(vendor_dir, name="mirror")
    resolution = resolve(source_for(tmp_path, vendor_dir, REFUSED, mirror.url, sets=[VENDOR_PINS, OLDER]))
    assert resolution.pins == VENDOR_PINS and resolution.source == mirror.url
    assert resolution.reason == (f"the preferred set torch=={VENDOR_TORCH} is listed on {mirror.url} "
                                 f"(passed over: {REFUSED})")
    assert f"vendor source {REFUSED} passed over: did not answer (connection refused)" in resolution.warnings[0]
    assert all(chosen.url.startswith(mirror.base_url) for chosen in resolution.files)


def test_a_silent_first_source_costs_the_read_timeout_then_the_mirror_serves(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex],
        raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "READ_TIMEOUT", 0.5)
    silent = raw_server(silent=True)
    mirror = start_index(vendor_dir, name="mirror")
    started = time.monotonic()
    resolution = resolve(source_for(tmp_path, vendor_dir, silent.url, mirror.url))
    # Bounded: the first request's wait, and no further request to the silent source.
    assert time.monotonic() - started < 3
    assert resolution.source == mirror.url and resolution.pins == VENDOR_PINS
    assert f"{silent.url} passed over: did not answer (no answer within 0.5 s)" in resolution.warnings[0]


@pytest.mark.parametrize(("reply", "said"), [
    (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", "did not answer (HTTP 503)"),
    # Content-Length promises more than comes: the listing is cut short.
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n<html><a href=", "did not answer "
     "(its answer was cut short)"),
    # PEP 691 JSON that stops half-way, with no length to tell.
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.pypi.simple.v1+json\r\nConnection: close\r\n\r\n"
     b'{"files": [{"filename": "torch', "did not answer (a listing that is not whole JSON)"),
])
def test_a_503_or_a_listing_cut_short_passes_over_to_the_next_source(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex],
        raw_server: Callable[..., RawServer], reply: bytes, said: str) -> None:
    broken = raw_server(reply)
    mirror = start_index(vendor_dir, name="mirror")
    resolution = resolve(source_for(tmp_path, vendor_dir, broken.url, mirror.url))
    assert resolution.source == mirror.url and resolution.pins == VENDOR_PINS
    assert f"vendor source {broken.url} passed over: {said}" in resolution.warnings[0]


def test_a_mirror_serving_another_build_under_a_recorded_name_is_refused_and_the_next_one_serves(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    source = source_for(tmp_path, vendor_dir, REFUSED, "placeholder")  # records the hashes before the change
    tampered_dir = tmp_path / "tampered"
    shutil.copytree(vendor_dir, tampered_dir)
    name = wheel_filename("torchvision", VENDOR_PINS["torchvision"])
    shutil.copyfile(build_wheel(tmp_path / "other", "torchvision", VENDOR_PINS["torchvision"], summary="another"),
                    tampered_dir / name)
    tampered = start_index(tampered_dir, name="tampered")
    good = start_index(vendor_dir, name="good")
    resolution = resolve(dataclasses.replace(source, mirrors=(Sourced(tampered.url, "--mirror"), Sourced(good.url, "--mirror"))))
    assert resolution.source == good.url and resolution.pins == VENDOR_PINS
    refusal = next(line for line in resolution.warnings if tampered.url in line)
    assert f"vendor source {tampered.url} passed over: refused, it serves {name} with sha256" in refusal


def test_a_mirror_never_brings_in_an_unlisted_build(tmp_path: Path, vendor_dir: Path,
                                                    start_index: Callable[..., LoopbackIndex]) -> None:
    mirror = start_index(vendor_dir, name="mirror")
    # torchaudio is not a recorded build: the first source may offer it (with its warning), a mirror may not.
    unlisted = {"known": ("torch", "torchvision", "bitsandbytes")}
    first = resolve(source_for(tmp_path, vendor_dir, mirror.url, **unlisted))
    assert first.pins == VENDOR_PINS and any("is not a build wheels-index.toml lists" in w for w in first.warnings)
    with pytest.raises(NothingInPolicy) as caught:
        resolve(source_for(tmp_path, vendor_dir, REFUSED, mirror.url, **unlisted))
    assert caught.value.message.startswith("no vendor source serves a complete set within policy (")
    assert f"{REFUSED}: did not answer (connection refused)" in caught.value.message
    assert f"{mirror.url}: no complete set within policy of the recorded builds" in caught.value.message


def test_the_preferred_set_comes_from_whichever_source_has_it(tmp_path: Path, vendor_dir: Path,
                                                              start_index: Callable[..., LoopbackIndex]) -> None:
    """A first source that lost the preferred set does not move the choice while a mirror has it."""
    older_dir = without_the_preferred_set(vendor_dir, tmp_path / "older")
    first = start_index(older_dir, name="first")
    mirror = start_index(vendor_dir, name="mirror")
    resolution = resolve(source_for(tmp_path, vendor_dir, first.url, mirror.url, sets=[VENDOR_PINS, OLDER]))
    assert resolution.set_name == f"torch=={VENDOR_TORCH}" and resolution.source == mirror.url
    assert f"{first.url} passed over: no preferred set torch=={VENDOR_TORCH} (it has torch==2.6.0)" in \
        resolution.warnings[0]


def test_only_when_no_source_has_the_preferred_set_does_the_choice_move_and_it_says_why(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    older_dir = without_the_preferred_set(vendor_dir, tmp_path / "older")
    mirror = start_index(older_dir, name="mirror")
    resolution = resolve(source_for(tmp_path, vendor_dir, REFUSED, mirror.url, sets=[VENDOR_PINS, OLDER]))
    assert resolution.set_name == "torch==2.6.0" and resolution.source == mirror.url
    assert resolution.reason == (
        f"the preferred set torch=={VENDOR_TORCH} is on none of the 2 sources ({REFUSED}: did not answer "
        f"(connection refused); {mirror.url}: no preferred set torch=={VENDOR_TORCH} (it has torch==2.6.0)); "
        f"torch==2.6.0 is the newest complete set within policy on {mirror.url}")


def test_all_sources_down_is_one_error_naming_each_and_the_fix(tmp_path: Path, vendor_dir: Path,
                                                               raw_server: Callable[..., RawServer]) -> None:
    unavailable = raw_server(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(IndexUnreachable) as caught:
        resolve(source_for(tmp_path, vendor_dir, REFUSED, unavailable.url))
    assert caught.value.message == (f"none of the 2 vendor sources answered ({REFUSED}: did not answer (connection "
                                    f"refused); {unavailable.url}: did not answer (HTTP 503))")
    assert "--vendor-index URL" in (caught.value.fix or "")


def test_every_source_refusing_a_changed_build_is_a_refusal(tmp_path: Path, vendor_dir: Path,
                                                            start_index: Callable[..., LoopbackIndex]) -> None:
    source = source_for(tmp_path, vendor_dir, REFUSED, "placeholder")
    name = wheel_filename("torch", VENDOR_PINS["torch"])
    shutil.copyfile(build_wheel(tmp_path / "other", "torch", VENDOR_PINS["torch"], summary="another"), vendor_dir / name)
    served = start_index(vendor_dir, name="changed")
    with pytest.raises(IdentityMismatch) as caught:
        resolve(dataclasses.replace(source, mirrors=(Sourced(served.url, "--mirror"),)))
    assert caught.value.message.startswith("no vendor source serves the recorded builds (")
    assert f"{served.url}: refused, it serves {name} with sha256" in caught.value.message


def cli_env(tmp_path: Path, vendor_dir: Path, config: str = "") -> Dict[str, str]:
    path = tmp_path / "cli-index.toml"
    path.write_text(stub_catalog_text(REAL, vendor_dir))
    settings = tmp_path / "config.toml"
    settings.write_text(config)
    return dict(os.environ, JETSON_INSTALL_WHEELS_INDEX=str(path), JETSON_INSTALL_CONFIG=str(settings),
                NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")


def test_plan_shows_the_order_of_sources_and_resolve_takes_the_configured_wheelhouse(
        tmp_path: Path, vendor_dir: Path) -> None:
    """A fleet's wheelhouse, named once in the configuration, serves when the vendor index is down."""
    wheelhouse = tmp_path / "wheelhouse"
    entries = tuple(Locked(path.name.split("-")[0], path.name.split("-")[1], path.as_uri(), file_sha256(path), "vendor")
                    for path in sorted(vendor_dir.glob("*.whl")))
    fill_wheelhouse(Lock("jp6-cu126", "3.10", "aarch64", "native", "none", None, "test", entries), wheelhouse)
    env = cli_env(tmp_path, vendor_dir, f'vendor_index = "{REFUSED}"\nwheelhouse = "{wheelhouse}"\n')
    base = ["plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--mirror", "http://127.0.0.1:8/simple"]
    shown = run_cli(*base, env=env)
    assert shown.returncode == 0, shown.stderr
    config = env["JETSON_INSTALL_CONFIG"]
    assert "  then      http://127.0.0.1:8/simple   (--mirror; recorded builds only)" in shown.stdout
    assert f"  then      {wheelhouse.as_uri()}/simple/   (config {config} wheelhouse; recorded builds only)" \
        in shown.stdout
    resolved = json.loads(run_cli(*base, "--resolve", "--json", env=env).stdout)
    assert [m["url"] for m in resolved["vendor_mirrors"]] == ["http://127.0.0.1:8/simple", f"{wheelhouse.as_uri()}/simple/"]
    assert resolved["resolution"]["source"] == f"{wheelhouse.as_uri()}/simple/"
    assert resolved["pins"] == VENDOR_PINS



@pytest.mark.slow
def test_a_vendor_file_cut_short_is_taken_from_the_next_source_and_a_rerun_reads_no_index(
        installer: Installer, vendor_index: LoopbackIndex, public_index: LoopbackIndex,
        stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> None:
    mirror = start_index(stub_index_dirs.vendor, name="mirror")
    torch = wheel_filename("torch", VENDOR_PINS["torch"])
    vendor_index.fail_after(0, "truncate", match=lambda path: path == f"/files/{torch}")
    code, data, stderr = installer.run(extra=("--mirror", mirror.url))
    assert code == 0, stderr
    assert data["resolution"]["source"] == mirror.url
    assert all(file["url"].startswith(mirror.base_url) for file in data["resolution"]["files"] if file["url"])
    said = f"vendor source {vendor_index.url} failed to deliver the files"
    assert any(warning.startswith(said) and warning.endswith(f"taking them from {mirror.url}")
               for warning in data["warnings"]), data["warnings"]
    assert torch in mirror.downloaded_files()
    recorded = json.loads((installer.venv / STATE_DIR / RECORD_FILE).read_text())
    assert recorded["resolution"]["source"] == mirror.url
    evidence = json.loads((installer.venv / STATE_DIR / EVIDENCE_FILE).read_text())
    assert evidence["integrity"]["distributions"]["torch"]["served_by"] == mirror.url
    for server in (vendor_index, mirror, public_index):
        server.clear_requests()
    code, data, stderr = installer.run(extra=("--mirror", mirror.url))
    assert code == 0 and data["status"] == "unchanged", stderr
    assert vendor_index.requests == [] and mirror.requests == [] and public_index.requests == []


def test_a_source_that_redirects_to_another_host_is_passed_over_with_where_it_led(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex],
        raw_server: Callable[..., RawServer]) -> None:
    """A loopback source redirecting elsewhere was followed, and its dead target read as the
    source's own "connection refused"; a redirect off a loopback (or https) source is not followed."""
    elsewhere = "http://127.0.0.2:9/simple/torch/"  # another host (and nothing listens there)
    redirecting = raw_server(reply=f"HTTP/1.1 302 Found\r\nLocation: {elsewhere}\r\nContent-Length: 0\r\n"
                                   "Connection: close\r\n\r\n".encode())
    mirror = start_index(vendor_dir, name="mirror")
    resolution = resolve(source_for(tmp_path, vendor_dir, redirecting.url, mirror.url))
    assert resolution.source == mirror.url
    assert (f"vendor source {redirecting.url} passed over: did not answer (it redirected to another host, "
            f"{elsewhere}, which is not followed)") in resolution.warnings[0], resolution.warnings
    with pytest.raises(StepFailed) as failed:
        index.fetch_file(f"{redirecting.url}/torch.whl", tmp_path / "torch.whl")
    assert failed.value.message == (f"could not fetch {redirecting.url}/torch.whl (it redirected to another host, "
                                    f"{elsewhere}, which is not followed)")
    assert not (tmp_path / "torch.whl").exists()


def test_channels_check_gives_each_mirror_its_own_status(tmp_path: Path, vendor_dir: Path,
                                                         start_index: Callable[..., LoopbackIndex]) -> None:
    env = cli_env(tmp_path, vendor_dir)  # records the hashes before torchvision changes on one mirror
    good = start_index(vendor_dir, name="good")
    changed_dir = tmp_path / "changed"
    shutil.copytree(vendor_dir, changed_dir)
    name = wheel_filename("torchvision", VENDOR_PINS["torchvision"])
    shutil.copyfile(build_wheel(tmp_path / "other", "torchvision", VENDOR_PINS["torchvision"], summary="another"),
                    changed_dir / name)
    changed = start_index(changed_dir, name="changed")
    missing = start_index(without_the_preferred_set(vendor_dir, tmp_path / "older"), name="missing")
    result = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", good.url, "--mirror", missing.url,
                     "--mirror", REFUSED, "--mirror", changed.url, "--json", env=env)
    assert result.returncode == 1, result.stderr  # the worst finding, a changed build, decides
    reports = {report["index"]: report for report in json.loads(result.stdout)}
    assert {url: reports[url]["status"] for url in (good.url, missing.url, REFUSED, changed.url)} == {
        good.url: "ok", missing.url: "missing", REFUSED: "unreachable", changed.url: "changed"}
    assert reports[good.url]["mirror_of"] is None
    assert {reports[url]["mirror_of"] for url in (missing.url, REFUSED, changed.url)} == {good.url}
    text = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", good.url, "--mirror", REFUSED, env=env)
    assert f"jp6-cu126       unreachable {REFUSED}   (mirror of {good.url})" in text.stdout


def test_channels_check_says_changed_for_a_mirror_whatever_python_its_changed_build_is_for(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    """A mirror of the Python 3.12 builds, one served with another sha256 under its recorded name:
    the check of every source ended in that one error before ('a changed line for that mirror, as
    docs/fleets.md says')."""
    for name in ("torch", "torchvision", "torchaudio"):  # the preferred set for CPython 3.12 too
        build_wheel(vendor_dir, name, VENDOR_PINS[name], tag="cp312-cp312-linux_aarch64")
    env = cli_env(tmp_path, vendor_dir)  # records every file's sha256, the 3.12 builds too
    good = start_index(vendor_dir, name="good")
    only_312 = tmp_path / "only-312"
    only_312.mkdir()
    for path in vendor_dir.glob("*.whl"):
        if "cp312" in path.name or path.name.startswith("bitsandbytes"):
            shutil.copyfile(path, only_312 / path.name)
    torch = wheel_filename("torch", VENDOR_PINS["torch"]).replace("py3-none-any", "cp312-cp312-linux_aarch64")
    rebuilt = build_wheel(tmp_path / "other", "torch", VENDOR_PINS["torch"], tag="cp312-cp312-linux_aarch64",
                          summary="another build")
    shutil.copyfile(rebuilt, only_312 / torch)
    changed = start_index(only_312, name="changed")
    result = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", good.url, "--mirror", changed.url, env=env)
    assert result.returncode == 1 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["jp6-cu126", "ok", good.url]
    assert lines[2].split()[:3] == ["jp6-cu126", "changed", changed.url]
    assert lines[3].strip() == (
        f"preferred set torch=={VENDOR_TORCH}: missing for Python 3.10 (the index does not list all of it); for Python "
        f"3.12: {changed.url} serves {torch} with sha256 {file_sha256(only_312 / torch)}, but wheels-index.toml "
        f"records sha256 {file_sha256(vendor_dir / torch)} for that file: refusing a different build under a "
        "recorded name")


def test_channels_check_reads_a_thor_channels_primary_source_on_the_default_index(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    """Thor's first source is uv's default index: read where one is named, and said when not."""
    catalog = tmp_path / "thor-index.toml"
    # The channel's second source, on a loopback port nothing listens on: nothing leaves 127.0.0.1.
    catalog.write_text(REAL.replace("https://pypi.jetson-ai-lab.io/sbsa/cu130/+simple/", "https://127.0.0.1:9/simple/"))
    default = start_index(vendor_dir, name="default")
    env = dict(cli_env(tmp_path, vendor_dir), JETSON_INSTALL_WHEELS_INDEX=str(catalog))
    read = run_cli("channels", "--check", "jp7-thor-cu130", "--default-index", default.url, "--json", env=env)
    reports = json.loads(read.stdout)
    assert [report["index"] for report in reports] == [default.url, "https://127.0.0.1:9/simple/"], read.stderr
    assert default.was_requested("torch")
    unnamed = json.loads(run_cli("channels", "--check", "jp7-thor-cu130", "--json", env=env).stdout)
    assert unnamed[0]["status"] == "not-read"
    assert unnamed[0]["lines"] == ["not read: uv's own default index is read only when named: --default-index URL, "
                                   "or default_index in the configuration"]


def test_a_wheelhouse_takes_a_vendor_file_its_lock_url_does_not_deliver_from_a_mirror(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    torch = vendor_dir / wheel_filename("torch", VENDOR_PINS["torch"])
    changed_dir = tmp_path / "changed"
    changed_dir.mkdir()
    shutil.copyfile(build_wheel(tmp_path / "other", "torch", VENDOR_PINS["torch"], summary="another"),
                    changed_dir / torch.name)
    changed = start_index(changed_dir, name="changed")
    good = start_index(vendor_dir, name="good")
    entry = Locked("torch", VENDOR_PINS["torch"], f"{REFUSED.rsplit('/', 1)[0]}/files/{torch.name}",
                   file_sha256(torch), "vendor")
    lock = Lock("jp6-cu126", "3.10", "aarch64", "native", "none", None, "test", (entry,))
    with pytest.raises(StepFailed) as caught:
        fill_wheelhouse(lock, tmp_path / "alone", mirrors=(changed.url,))
    assert caught.value.message.startswith(f"no source served {torch.name} with the lock's sha256 (")
    assert f"{changed.base_url}/files/" in caught.value.message and "refused, another sha256" in caught.value.message
    fill_wheelhouse(lock, tmp_path / "wheelhouse", mirrors=(changed.url, good.url))
    assert file_sha256(tmp_path / "wheelhouse" / "files" / torch.name) == entry.sha256
    assert good.downloaded_files() == [torch.name]


def test_a_wheelhouse_asks_a_stalling_mirror_once_and_says_so(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex],
        raw_server: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a mirror that stalls, `wheelhouse --lock` waited out the read timeout for each file,
    silently, before the next mirror; the stalling one is now passed over after its first wait."""
    monkeypatch.setattr(index, "READ_TIMEOUT", 0.5)
    stalling = raw_server(silent=True)
    good = start_index(vendor_dir, name="good")
    entries = tuple(Locked(name, VENDOR_PINS[name], f"{REFUSED.rsplit('/', 1)[0]}/files/{path.name}",
                           file_sha256(path), "vendor")
                    for name in ("torch", "torchvision", "torchaudio")
                    for path in [vendor_dir / wheel_filename(name, VENDOR_PINS[name])])
    lock = Lock("jp6-cu126", "3.10", "aarch64", "native", "none", None, "test", entries)
    result = fill_wheelhouse(lock, tmp_path / "wheelhouse", mirrors=(stalling.url, good.url))
    assert sorted(good.downloaded_files()) == sorted(entry.filename for entry in entries)
    assert len(stalling.held) == 1  # asked for the first file's listing only
    said = (f"{stalling.url} passed over for the rest of the run: the vendor index {stalling.url} did not answer "
            "(no answer within 0.5 s)")
    assert result["warnings"] == [said]
    from jetson_install.cli.render import wheelhouse_lines

    assert wheelhouse_lines(result)[0] == f"warning: {said}"


def test_plan_resolve_with_every_source_down_names_each_and_prints_whole_commands(
        tmp_path: Path, vendor_dir: Path, raw_server: Callable[..., RawServer]) -> None:
    unavailable = raw_server(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
    env = cli_env(tmp_path, vendor_dir)
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", REFUSED,
                     "--mirror", unavailable.url, "--resolve", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: none of the 2 vendor sources answered ({REFUSED}: did not answer "
                                    f"(connection refused); {unavailable.url}: did not answer (HTTP 503))")
    command = (f"jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 --mirror {unavailable.url} --resolve "
               "--vendor-index URL")
    assert f"use another vendor index: {command}" in result.stderr
    assert ("add a mirror of its recorded builds: jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 "
            f"--vendor-index {REFUSED} --mirror {unavailable.url} --resolve --mirror URL") in result.stderr


def test_a_catalog_source_lists_https_mirrors_of_its_index_only(tmp_path: Path) -> None:
    line = 'index = "https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/"\n'
    path = tmp_path / "wheels-index.toml"
    path.write_text(REAL.replace(line, line + 'mirrors = ["https://mirror.fleet.example/jp6/cu126/+simple/"]\n', 1))
    source = load_catalog(path).channel("jp6-cu126").primary
    # Kept with where it was named, which the plan shows beside it.
    assert source is not None and source.mirrors == (Sourced("https://mirror.fleet.example/jp6/cu126/+simple/",
                                                              "wheels-index.toml"),)
    plain = tmp_path / "plain-http.toml"  # a file of its own: a catalog is read once per path
    plain.write_text(REAL.replace(line, line + 'mirrors = ["http://mirror.fleet.example/simple/"]\n', 1))
    with pytest.raises(JetsonInstallError) as caught:
        load_catalog(plain)
    assert ("channel 'jp6-cu126' source: key 'mirrors' has \"http://mirror.fleet.example/simple/\": it must be an "
            "https:// URL") in caught.value.message
    thor = 'index = "default"\n'
    default = tmp_path / "default-index.toml"
    default.write_text(REAL.replace(thor, thor + 'mirrors = ["https://mirror.fleet.example/simple/"]\n', 1))
    with pytest.raises(JetsonInstallError) as caught:
        load_catalog(default)
    assert "'mirrors' go with an index URL" in caught.value.message


def test_the_configuration_names_mirrors_and_a_wheelhouse_and_refuses_other_shapes(
        tmp_path: Path, vendor_dir: Path) -> None:
    env = cli_env(tmp_path, vendor_dir, 'mirrors = "https://mirror.fleet.example/simple"\n')
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", env=env)
    assert result.returncode == 2
    assert 'must be a list of URLs, like ["https://mirror.example/simple"]' in result.stderr
    env = cli_env(tmp_path, vendor_dir, 'mirrors = ["http://mirror.fleet.example/simple"]\n')
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", env=env)
    assert result.returncode == 2 and "uses plain http to a remote host" in result.stderr


def test_a_mirror_given_for_a_source_it_cannot_stand_in_for_is_said_unused(tmp_path: Path, vendor_dir: Path) -> None:
    env = cli_env(tmp_path, vendor_dir)
    plan = json.loads(run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--vendor-fallback",
                              "--mirror", "http://127.0.0.1:8/simple", "--json", env=env).stdout)
    assert plan["vendor_mirrors"] == []
    assert any(warning.startswith("the mirrors http://127.0.0.1:8/simple are not read: the vendor source here (")
               for warning in plan["warnings"]), plan["warnings"]
