"""`jetson-install wheelhouse DIR --serve`: what a runner's uv gets from it, what nobody gets
from it, and what the runners are told to run, on loopback."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import http.client
import json
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from support import isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.stub_projects import IndexDirs
from support.index_server import LoopbackIndex

from jetson_install.cli.commands.fleet import serve_wheelhouse, serving_lines
from jetson_install.fleet import wheelhouse_server
from jetson_install.planning.rerun import Rerun
from jetson_install.catalog.lock_file import Lock, Locked, parse_lock, render_lock
from jetson_install.fleet.wheelhouse_server import WheelhouseServer, open_server

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"
WHEEL = bytes(range(256)) * 40  # 10240 bytes whose every offset is recognisable
WHEEL_NAME = "demo-1.0-py3-none-any.whl"


@pytest.fixture
def house(tmp_path: Path) -> Path:
    directory = tmp_path / "wheelhouse"
    (directory / "files").mkdir(parents=True)
    (directory / "files" / WHEEL_NAME).write_bytes(WHEEL)
    (directory / "simple" / "demo").mkdir(parents=True)
    (directory / "simple" / "index.html").write_text('<a href="demo/">demo</a>\n')
    (directory / "simple" / "demo" / "index.html").write_text(f'<a href="../../files/{WHEEL_NAME}">demo</a>\n')
    entry = Locked("demo", "1.0", f"http://127.0.0.1:9/files/{WHEEL_NAME}", hashlib.sha256(WHEEL).hexdigest(), "default")
    (directory / "lock.txt").write_text(render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35",
                                                         "none (the stack alone)", None, "0", (entry,), (), "torch")))
    return directory


def _serve(directory: Path, logged: List[str], **limits: float) -> Iterator[WheelhouseServer]:
    server = open_server(directory, "127.0.0.1", 0, Rerun(("wheelhouse", str(directory), "--serve")),
                         log=logged.append, **limits)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def logged() -> List[str]:
    return []


def test_the_served_wheelhouse_collects_its_garbage_where_the_start_turned_the_collector_off(house: Path) -> None:
    """jetson_install/__main__.py turns the garbage collector off for a run; a server runs until
    stopped, and its requests' cyclic garbage (a broken pipe's traceback) must not pile up."""
    collecting: List[bool] = []

    def serving(server: WheelhouseServer) -> None:
        collecting.append(gc.isenabled())
        threading.Thread(target=server.shutdown, daemon=True).start()

    gc.disable()
    try:
        serve_wheelhouse(house, "127.0.0.1", 0, Rerun(("wheelhouse", str(house), "--serve")), serving)
    finally:
        gc.enable()
    assert collecting == [True]


@pytest.fixture
def served(house: Path, logged: List[str]) -> Iterator[WheelhouseServer]:
    yield from _serve(house, logged)


def _get(server: WheelhouseServer, headers: Dict[str, str], method: str = "GET",
         path: str = f"/files/{WHEEL_NAME}") -> Tuple[int, Dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(("asked", "status", "content_range", "body"), [
    ("bytes=0-99", 206, "bytes 0-99/10240", WHEEL[:100]),
    ("bytes=10200-", 206, "bytes 10200-10239/10240", WHEEL[10200:]),
    ("bytes=-22", 206, "bytes 10218-10239/10240", WHEEL[-22:]),  # a zip's end record, where uv looks first
    ("bytes=10000-99999", 206, "bytes 10000-10239/10240", WHEEL[10000:]),
    ("bytes=20000-", 416, "bytes */10240", b""),
    ("bytes=" + "9" * 5000 + "-", 416, "bytes */10240", b""),  # past any file, and past what int() reads
    ("bytes=10000-" + "9" * 5000, 206, "bytes 10000-10239/10240", WHEEL[10000:]),
    ("bytes=" + "0" * 5000 + "1-1", 206, "bytes 1-1/10240", WHEEL[1:2]),
])
def test_a_range_gets_exactly_its_bytes(served: WheelhouseServer, asked: str, status: int, content_range: str, body: bytes) -> None:
    got_status, headers, got = _get(served, {"Range": asked})
    assert (got_status, headers["content-range"], got) == (status, content_range, body)
    assert headers["content-length"] == str(len(body))


def test_a_whole_file_says_ranges_are_answered(served: WheelhouseServer) -> None:
    status, headers, body = _get(served, {})
    assert (status, body, headers["accept-ranges"]) == (200, WHEEL, "bytes")
    status, headers, body = _get(served, {}, method="HEAD")
    assert (status, body, headers["accept-ranges"], headers["content-length"]) == (200, b"", "bytes", "10240")


def test_one_connection_carries_a_runners_requests(served: WheelhouseServer) -> None:
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


def _runner_env(folder: Path, vendor_dir: Path) -> Dict[str, str]:
    """A machine of its own (home, uv cache) whose catalog describes the stub vendor builds."""
    catalog = folder / "wheels-index.toml"
    folder.mkdir(parents=True, exist_ok=True)
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    env = isolated_env(folder, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    return env


def _locked_wheelhouse(env: Dict[str, str], vendor_url: str, public_url: str, board: Path, source: Path,
                       lock: Path) -> Path:
    """A lock for this machine's interpreter (on a board of its architecture), and its wheelhouse."""
    made = run_cli("lock", "--root", str(board), "--vendor-index", vendor_url, "--default-index", public_url,
                   "--source", str(source), "--output", str(lock), "--python", sys.executable, env=env)
    assert made.returncode == 0, made.stderr
    house = lock.parent / "wheelhouse"
    filled = run_cli("wheelhouse", str(house), "--lock", str(lock), env=env)
    assert filled.returncode == 0, filled.stderr
    return house


@pytest.mark.slow
def test_a_runner_installs_from_the_served_wheelhouse_fetching_each_file_once(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_source: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = _runner_env(tmp_path, stub_index_dirs.vendor)
    lock = tmp_path / "here.lock"
    house = _locked_wheelhouse(env, vendor_index.url, public_index.url, board_here, obliteratus_source, lock)
    sent: List[int] = []
    copy = wheelhouse_server._Handler.copyfile

    def counted(handler, source, output) -> None:  # type: ignore[no-untyped-def]
        before = source.tell()
        copy(handler, source, output)
        sent.append(source.tell() - before)

    monkeypatch.setattr(wheelhouse_server._Handler, "copyfile", counted)
    dead = _dead_url()
    for server in _serve(house, []):
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
    port = url.split(":")[2].rstrip("/")
    assert lines == ([url] if quiet else [
        f"serving {house} (its lock.txt, files/ and simple/, read-only, nothing else) on 127.0.0.1:{port}: this "
        "machine only; Ctrl-C stops",
        f"  on each runner, with its own copy of {house}/lock.txt (the hashes come from it, so copy it as you trust "
        f"it): jetson-install torch --lock {house}/lock.txt --wheelhouse {url}",
        f"  this server is for a few boards on a trusted network; a fleet's is nginx serving {house} as it is "
        f"(docs/fleets.md) or an OCI registry: jetson-install wheelhouse {house} --push oci://HOST/REPOSITORY:TAG",
        "stopped serving"])


# -- the wheelhouse and nothing else --------------------------------------------------------------

@pytest.fixture
def planted(house: Path, tmp_path: Path) -> Path:
    """A wheelhouse with what a served folder must never give: links out of it, dotfiles, a
    FIFO, files beside files/ and simple/; and a link that stays inside it (no link is followed)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the wheelhouse's\n")
    (house / "files" / "secret.txt").symlink_to(outside / "secret.txt")
    (house / "files" / "linked").symlink_to(outside, target_is_directory=True)
    (house / "files" / ".hidden.whl").write_bytes(b"a dotfile")
    (house / ".git").mkdir()
    (house / ".git" / "config").write_text("[remote]\n")
    (house / "notes.txt").write_text("beside the wheelhouse's folders\n")
    (house / "simple" / "up").symlink_to(house / "notes.txt")
    os.mkfifo(house / "files" / "pipe.whl")
    (house / "files" / "alias.whl").symlink_to(Path("..") / "simple" / "demo" / "index.html")
    return house


@pytest.mark.parametrize(("path", "status"), [
    ("/files/secret.txt", 404),  # a link to a file out of the wheelhouse
    ("/files/linked/secret.txt", 404),  # through a linked folder
    ("/files/.hidden.whl", 404),
    ("/.git/config", 404),
    ("/notes.txt", 404),  # in DIR, but not under files/, simple/ or lock.txt
    ("/simple/up", 404),  # a link from simple/ to it
    ("/files/pipe.whl", 404),  # a FIFO: answered at once, its thread free
    ("/", 404),  # no listing
    ("/files/", 404),  # no listing
    ("/files/%2e%2e/notes.txt", 404),
    ("/files/%00", 400),
    ("/files/%ff", 400),  # not UTF-8
    ("/files/alias.whl", 404),  # a link, even one whose real path is inside simple/
    ("/simple/demo", 301),  # a PEP 503 page's folder, asked without its slash
    ("/simple/demo/", 200),
    ("/simple/", 200),
    ("/lock.txt", 200),
])
def test_only_the_wheelhouses_own_files_are_served_and_each_refusal_logs_one_line(
        planted: Path, logged: List[str], path: str, status: int) -> None:
    for server in _serve(planted, logged):
        got, _, body = _get(server, {}, path=path)
    assert got == status
    assert b"not the wheelhouse's" not in body and b"beside the wheelhouse" not in body
    assert len(logged) == (1 if status >= 400 else 0), logged
    if logged:
        assert logged[0].startswith(f"127.0.0.1: {status} for 'GET {path} HTTP/1.1': "), logged


def _raw(server: WheelhouseServer, request: bytes) -> str:
    """The status line answering `request`, sent as it is."""
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as connection:
        connection.sendall(request)
        return connection.makefile("rb").readline().decode("latin-1").rstrip("\r\n")


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"GET /files/%00 HTTP/1.1\r\nHost: x\r\n\r\n", "400 Bad Request"),
    (b"GET /files/" + WHEEL_NAME.encode() + b" HTTP/1.1\r\nRange: bytes=" + b"7" * 5000 + b"-\r\n\r\n",
     "416 Range Not Satisfiable"),  # RFC 9110's phrase, on every Python
    (b"BREW /lock.txt HTTP/1.1\r\n\r\n", "501 Not Implemented"),  # RFC 9110: a method it does not know
    (b"GET /lock.txt and more HTTP/1.1\r\n\r\n", "400 Bad Request"),  # not METHOD PATH VERSION
    (b"GET /lock.txt HTTP/9.9\r\n\r\n", "505 HTTP Version Not Supported"),
    (b"GET /lock.txt\x1b[2J HTTP/1.1\r\n\r\n", "400 Bad Request"),  # an escape sequence in the path
])
def test_a_malformed_request_gets_its_status_and_one_inert_log_line_never_a_traceback(
        served: WheelhouseServer, logged: List[str], request_bytes: bytes, status: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _raw(served, request_bytes) == f"HTTP/1.1 {status}"
    # Logged before the answer is sent: the line is there once the status is read.
    assert len(logged) == 1 and logged[0].startswith(f"127.0.0.1: {status[:3]} for "), logged
    assert "\x1b" not in logged[0]
    assert capsys.readouterr().err == ""  # no traceback from any thread


def _closed_within(connection: socket.socket, seconds: float) -> bool:
    connection.settimeout(seconds)
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _one_closed_within(connections: List[socket.socket], seconds: float) -> bool:
    """Whether the server closed one of `connections` within `seconds`, waiting for the first
    (each read its answer whole, so what becomes readable was closed): one by one, each still
    open would cost the whole wait."""
    readable, _, _ = select.select(connections, [], [], seconds)
    return any(_closed_within(connection, seconds) for connection in readable)


def test_half_open_connections_are_closed_after_the_idle_timeout(house: Path, logged: List[str]) -> None:
    for server in _serve(house, logged, idle_timeout=3.0):
        before = threading.active_count()
        silent = [socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) for _ in range(50)]
        try:
            # Open while it may still speak: the newest, seconds from its timeout whatever the load.
            assert not _closed_within(silent[-1], 0.3)
            started = time.monotonic()
            assert all(_closed_within(connection, 20) for connection in silent)
            assert time.monotonic() - started < 20
            deadline = time.monotonic() + 10
            while threading.active_count() > before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert threading.active_count() == before  # every connection's thread ended with it
            assert _get(server, {})[0] == 200  # and the server still answers
        finally:
            for connection in silent:
                connection.close()
    assert logged == []  # an idle runner connection closing is no event


def test_at_the_bound_an_idle_connection_is_closed_for_a_new_request_which_never_waits(
        house: Path, logged: List[str]) -> None:
    # Idle keep-alive connections (a finished runner's uv holds them open) filling every slot.
    for server in _serve(house, logged, max_connections=4):
        idle = []
        for _ in range(10):
            connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
            connection.request("GET", "/lock.txt")
            connection.getresponse().read()
            idle.append(connection)
        try:
            started = time.monotonic()
            assert _get(server, {})[0] == 200
            assert time.monotonic() - started < 5  # not the idle timeout (30 s)
            assert _one_closed_within([connection.sock for connection in idle if connection.sock], 5)
        finally:
            for connection in idle:
                connection.close()
    assert logged == []


def test_a_request_head_that_does_not_arrive_whole_within_its_deadline_is_closed(
        house: Path, logged: List[str]) -> None:
    # Slowloris: a header line every so often, each read within the idle timeout.
    for server in _serve(house, logged, head_timeout=1.0, max_connections=4):
        slow = [socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) for _ in range(6)]
        try:
            for connection in slow:
                connection.sendall(b"GET /lock.txt HTTP/1.1\r\n")
            started = time.monotonic()
            assert _get(server, {})[0] == 200  # the bound closes one of them for it at once
            assert time.monotonic() - started < 5
            for _ in range(3):
                time.sleep(0.4)
                for connection in slow:
                    with contextlib.suppress(OSError):
                        connection.sendall(b"X-Slow: 1\r\n")
            assert all(_closed_within(connection, 10) for connection in slow)
            assert time.monotonic() - started < 10
        finally:
            for connection in slow:
                connection.close()
    assert logged and all(line == "127.0.0.1: closed: its request head did not arrive within 1 s" for line in logged)


def test_a_folder_swapped_for_a_link_while_files_are_asked_never_leads_out(house: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.whl").write_bytes(b"outside the wheelhouse")
    inside = house / "files" / "sub"
    inside.mkdir()
    (inside / "a.whl").write_bytes(b"the wheelhouse's own")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            inside.rename(house / "files" / "sub.real")
            inside.symlink_to(outside, target_is_directory=True)
            inside.unlink()
            (house / "files" / "sub.real").rename(inside)

    swapper = threading.Thread(target=swap, daemon=True)
    bodies: Dict[bytes, int] = {}
    for server in _serve(house, []):
        swapper.start()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
            for _ in range(600):
                connection.request("GET", "/files/sub/a.whl")
                body = connection.getresponse().read()
                bodies[body] = bodies.get(body, 0) + 1
        finally:
            stop.set()
            swapper.join()
        connection.request("GET", "/files/sub/a.whl")  # the folder in place again: served
        assert connection.getresponse().read() == b"the wheelhouse's own"
        connection.close()
    assert b"outside the wheelhouse" not in bodies, bodies


# -- what the runners are told to run -------------------------------------------------------------

@pytest.mark.slow
def test_the_command_serve_prints_for_each_runner_runs_as_printed_and_names_the_wheelhouse_when_it_is_down(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_source: Path,
        tmp_path: Path) -> None:
    env = _runner_env(tmp_path / "builder", stub_index_dirs.vendor)
    lock = tmp_path / "builder" / "fleet.lock"
    house = _locked_wheelhouse(env, vendor_index.url, public_index.url, board_here, obliteratus_source, lock)
    vendor_index.stop()
    public_index.stop()
    server = subprocess.Popen([sys.executable, "-m", "jetson_install", "wheelhouse", str(house), "--serve", "--bind",
                               "127.0.0.1", "--port", "0"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stderr is not None
        first, hint = server.stderr.readline(), server.stderr.readline()
        assert first.startswith(f"serving {house} (its lock.txt, files/ and simple/, read-only, nothing else) on "
                                "127.0.0.1:"), first
        words = shlex.split(hint.split(": ", 1)[1])
        assert words[:4] == ["jetson-install", "obliteratus", "--lock", f"{house}/lock.txt"], hint
        # As printed, on a runner of its own; this machine adds only what a board has no need of:
        # which board it stands for, its interpreter (not the channel's Python) and no GPU check.
        runner = _runner_env(tmp_path / "runner", stub_index_dirs.vendor)
        runner["JETSON_INSTALL_ROOT"] = SAMPLE
        here = ["--python", sys.executable, "--no-verify", "--json"]
        result = run_cli(*words[1:], *here, env=runner)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["installed"]["torch"].startswith("2.5.0a0")
    finally:
        server.terminate()
        server.wait(timeout=30)
    # The wheelhouse gone: the error and its fix are the wheelhouse's, not an index's.
    other = _runner_env(tmp_path / "runner2", stub_index_dirs.vendor)
    other["JETSON_INSTALL_ROOT"] = SAMPLE
    down = run_cli(*words[1:], *here, env=other)
    assert down.returncode == 1, down.stderr
    fix = next(line for line in down.stderr.splitlines() if line.startswith("  fix: "))
    url = words[-1]
    assert fix.startswith(f"  fix: the wheelhouse {url} did not answer, or lacks the file: check that it is served "
                          "there (jetson-install wheelhouse DIR --serve"), fix
    assert "--default-index" not in fix and "default index" not in down.stderr
    assert fix.endswith(f"then run: {' '.join(words)} {' '.join(here)}"), fix


def test_the_command_printed_for_all_addresses_is_the_fleet_route_which_takes_plain_http(
        house: Path, logged: List[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    here_lock = Lock("jp6-cu126", "%d.%d" % sys.version_info[:2], os.uname().machine, "native",
                     "none (the stack alone)", None, "0", parse_lock((house / "lock.txt").read_text(), "lock").entries,
                     (), "torch")
    (house / "lock.txt").write_text(render_lock(here_lock))
    monkeypatch.setattr(socket, "gethostname", lambda: "wheelhouse-host")
    for server in _serve(house, logged):
        first, hint, _ = serving_lines(server, "0.0.0.0")  # listening on 127.0.0.1 alone: no test reaches further
    port = server.server_address[1]
    assert first.endswith(f"on 0.0.0.0:{port}: all of this machine's addresses, so any host that reaches this port "
                          "can download them, as the fleet's runners must (--bind 127.0.0.1 keeps it to this machine); "
                          "Ctrl-C stops")
    words = shlex.split(hint.split(": ", 1)[1])
    assert words[-2:] == ["--wheelhouse", f"http://wheelhouse-host:{port}/"]
    env = dict(isolated_env(tmp_path), JETSON_INSTALL_ROOT=SAMPLE)
    accepted = run_cli(*words[1:], "--python", sys.executable, "--dry-run", env=env)
    assert accepted.returncode == 0, accepted.stderr
    # What the hint said before: the mirror's own lock.txt over plain http, which is refused.
    refused = run_cli("torch", "--wheelhouse", f"http://wheelhouse-host:{port}/", "--python", sys.executable,
                      "--dry-run", env=env)
    assert refused.returncode == 2 and "uses plain http to a remote host" in refused.stderr


def test_filling_a_wheelhouse_prints_the_fleet_route(house: Path) -> None:
    from jetson_install.cli.render import wheelhouse_lines

    lines = wheelhouse_lines({"directory": str(house), "files": 1, "downloaded_bytes": 0, "target": "torch",
                              "lock": str(house / "lock.txt")})
    assert lines[2] == (f"  serve to a fleet: any static web server (nginx: docs/fleets.md) serves {house} as it is, "
                        f"or push it to a registry (jetson-install wheelhouse {house} --push oci://HOST/REPOSITORY:TAG);"
                        f" then on each runner, with its own copy of {house}/lock.txt (the hashes come from it, so "
                        f"copy it as you trust it): jetson-install torch --lock {house}/lock.txt --wheelhouse "
                        "http://HOST/")
