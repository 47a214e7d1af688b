"""`jetson-install wheelhouse DIR --serve`: what a runner's uv gets from it, on loopback."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from support import isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli

from jetson_install.fleet import wheelhouse_server
from jetson_install.planning.fixes import Rerun
from jetson_install.catalog.lock_file import parse_lock
from jetson_install.fleet.wheelhouse_server import WheelhouseServer, open_server

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"
WHEEL = bytes(range(256)) * 40  # 10240 bytes whose every offset is recognisable


@pytest.fixture
def house(tmp_path: Path) -> Path:
    directory = tmp_path / "wheelhouse"
    (directory / "files").mkdir(parents=True)
    (directory / "files" / "demo-1.0-py3-none-any.whl").write_bytes(WHEEL)
    (directory / "lock.txt").write_text("# a wheelhouse's lock\n")
    return directory


def _serve(directory: Path) -> Iterator[WheelhouseServer]:
    server = open_server(directory, "127.0.0.1", 0, Rerun(("wheelhouse", str(directory), "--serve")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(house: Path) -> Iterator[WheelhouseServer]:
    yield from _serve(house)


def _get(server: WheelhouseServer, headers: Dict[str, str], method: str = "GET") -> Tuple[int, Dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        connection.request(method, "/files/demo-1.0-py3-none-any.whl", headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("asked, status, content_range, body", [
    ("bytes=0-99", 206, "bytes 0-99/10240", WHEEL[:100]),
    ("bytes=10200-", 206, "bytes 10200-10239/10240", WHEEL[10200:]),
    ("bytes=-22", 206, "bytes 10218-10239/10240", WHEEL[-22:]),  # a zip's end record, where uv looks first
    ("bytes=10000-99999", 206, "bytes 10000-10239/10240", WHEEL[10000:]),
    ("bytes=20000-", 416, "bytes */10240", b""),
])
def test_a_range_gets_exactly_its_bytes(served, asked: str, status: int, content_range: str, body: bytes) -> None:
    got_status, headers, got = _get(served, {"Range": asked})
    assert (got_status, headers["content-range"], got) == (status, content_range, body)
    assert headers["content-length"] == str(len(body))


def test_a_whole_file_says_ranges_are_answered(served) -> None:
    status, headers, body = _get(served, {})
    assert (status, body, headers["accept-ranges"]) == (200, WHEEL, "bytes")
    status, headers, body = _get(served, {}, method="HEAD")
    assert (status, body, headers["accept-ranges"], headers["content-length"]) == (200, b"", "bytes", "10240")


def test_one_connection_carries_a_runners_requests(served) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.server_address[1], timeout=10)
    try:
        connection.request("GET", "/lock.txt")
        first = connection.getresponse()
        first.read()
        opened = connection.sock
        connection.request("GET", "/files/demo-1.0-py3-none-any.whl", headers={"Range": "bytes=0-9"})
        second = connection.getresponse()
        assert second.read() == WHEEL[:10]
        assert first.version == 11 and opened is not None and connection.sock is opened
    finally:
        connection.close()


def test_a_folder_that_is_not_a_wheelhouse_is_refused_with_the_command_that_fills_it(tmp_path: Path) -> None:
    result = run_cli("wheelhouse", str(tmp_path), "--serve", "--port", "0")
    assert result.returncode == 2
    assert f"error: {tmp_path} is not a wheelhouse (it has no lock.txt)" in result.stderr
    assert f"fix: fill it from a lock, then serve it: jetson-install wheelhouse {tmp_path} --serve --port 0 --lock FILE" \
        in result.stderr


def test_a_port_in_use_is_refused_with_the_next_one(house: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("wheelhouse", str(house), "--serve", "--bind", "127.0.0.1", "--port", str(port))
    assert result.returncode == 2
    assert f"error: port {port} on 127.0.0.1 is already in use" in result.stderr
    assert f"--port {port + 1}" in result.stderr.splitlines()[-1]


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/simple/"  # nothing listens there


def test_a_runner_installs_from_the_served_wheelhouse_fetching_each_file_once(
        stub_index_dirs, vendor_index, public_index, obliteratus_source: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), stub_index_dirs.vendor))
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    lock = tmp_path / "here.lock"
    made = run_cli("lock", "--root", SAMPLE, "--vendor-index", vendor_index.url, "--default-index", public_index.url,
                   "--source", str(obliteratus_source), "--output", str(lock), "--python", sys.executable, env=env)
    assert made.returncode == 0, made.stderr
    house = tmp_path / "wheelhouse"
    assert run_cli("wheelhouse", str(house), "--lock", str(lock), env=env).returncode == 0
    sent: List[int] = []
    copy = wheelhouse_server._Handler.copyfile

    def counted(handler, source, output) -> None:  # type: ignore[no-untyped-def]
        before = source.tell()
        copy(handler, source, output)
        sent.append(source.tell() - before)

    monkeypatch.setattr(wheelhouse_server._Handler, "copyfile", counted)
    dead = _dead_url()
    for server in _serve(house):
        result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--python", sys.executable,
                         "--vendor-index", dead, "--default-index", dead, "--wheelhouse",
                         f"http://127.0.0.1:{server.server_address[1]}/", "--no-verify", "--yes", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["installed"]["torch"].startswith("2.5.0a0")
    files = sum(path.stat().st_size for path in (house / "files").iterdir())
    entries = parse_lock(lock.read_text(), "lock").entries
    # Every file whole once, and only a wheel's metadata (its last bytes) more: not each file twice.
    assert files <= sum(sent) - (house / "lock.txt").stat().st_size < files * 1.25, (files, sum(sent), len(entries))


@pytest.mark.parametrize("quiet", [False, True])
def test_serving_says_its_address_even_under_quiet(house: Path, quiet: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    def stop(server: WheelhouseServer) -> None:
        raise KeyboardInterrupt  # Ctrl-C at once: what was printed before serving is what a user saw

    monkeypatch.setattr(WheelhouseServer, "serve_forever", stop)
    result = run_cli("wheelhouse", str(house), "--serve", "--bind", "127.0.0.1", "--port", "0", *(["-q"] if quiet else []))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    url = lines[0] if quiet else lines[1].split()[-1]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/") and int(url.split(":")[2].rstrip("/")) > 0
    assert lines == ([url] if quiet else [f"serving {house} on 127.0.0.1:{url.split(':')[2].rstrip('/')} (Ctrl-C stops)",
                                          f"  install on each runner: jetson-install obliteratus --wheelhouse {url}",
                                          "stopped serving"])
