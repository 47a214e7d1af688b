"""`wheelhouse DIR --serve`: a wheelhouse served to a fleet over HTTP, read-only, and nothing else.

`python3 -m http.server` is the obvious server and the slow one (bench/bench_fleet.py): it
answers HTTP/1.0, a new connection per request, from a listen queue of 5, while uv opens up to
50 downloads at once, so the connections past the queue wait for TCP to retry them; and it
ignores Range, so uv, which reads a wheel's metadata before installing it, fetches every file
twice. This server keeps connections open (HTTP/1.1), queues what uv opens at once, and
answers single byte ranges.

It also serves what a wheelhouse is and nothing more: a regular file whose real path (links
resolved) is `lock.txt` or under `files/` or `simple/` of DIR, no dotfile, no folder listing,
no FIFO or device (a FIFO would hold a thread forever). A connection that stays silent is
closed after an idle timeout, and past a bound on connections the rest wait in the listen
queue, so half-open connections cannot pile up threads. A request it refuses gets its status
and one log line, never a traceback.
"""

from __future__ import annotations

import email.utils
import errno
import http.server
import io
import ipaddress
import os
import re
import shutil
import socket
import stat
import sys
import threading
from pathlib import Path
from typing import BinaryIO, Callable, List, Optional, Tuple
from urllib.parse import quote, unquote, urlsplit

from jetson_install.base.errors import BadInput
from jetson_install.base.outputs import read_regular_file
from jetson_install.catalog.lock_file import FILES_DIR, SIMPLE_DIR, WHEELHOUSE_LOCK, Lock, parse_lock
from jetson_install.planning.fixes import Rerun, runner_command

__all__ = ["WheelhouseServer", "open_server", "serving_lines", "serving_url", "IDLE_TIMEOUT",
           "MAX_CONNECTIONS"]

# uv downloads up to 50 files at once (DEFAULT_DOWNLOADS in astral-sh/uv
# crates/uv-configuration/src/concurrency.rs); socketserver's queue is 5
# (request_queue_size in cpython Lib/socketserver.py). Room for two runners at once.
_LISTEN_QUEUE = 128
#: Seconds a connection may stay silent before it is closed. A runner's uv closes its
#: connections when it exits; one that neither asks nor leaves holds a thread until then.
IDLE_TIMEOUT = 30.0
#: Connections served at once, each on its thread: four runners' 50 downloads. Past it the
#: next connections wait in the listen queue until one ends.
MAX_CONNECTIONS = 200
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
# A byte position with more digits than this is past any file (and int() refuses 4300 digits).
_POSITION_DIGITS = 18
_LOGGED_REQUEST = 200  # characters of a refused request line a log line quotes
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8"}


class _Refused(Exception):
    """A request answered with an error status; `why` is its log line's reason."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code
        self.why = why


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # a runner's connections stay open between files
    # A request line without a valid version (malformed) is answered with a status line too,
    # where the stdlib answers it as HTTP/0.9: a bare body.
    default_request_version = "HTTP/1.1"
    server_version = "jetson-install-wheelhouse"
    sys_version = ""  # the Server header names no Python version
    server: "WheelhouseServer"
    _range_sent: Optional[Tuple[int, int]] = None  # the bytes this response carries, when a range

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout)  # each read and write waits this long at most

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            # The runner went away (reset, broken pipe) or stopped reading for the idle timeout
            # while a file was sent: the connection ends, with nothing more to say.
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass  # a line per request would drown the one line that says where the wheelhouse is served

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        """Every refusal, the stdlib's own (a malformed request line or header) included: one log
        line, and the status with its standard reason (the client's text is never echoed)."""
        self._log_refusal(code, message or self.responses.get(code, ("",))[0])
        super().send_error(code)

    def _log_refusal(self, code: int, why: str) -> None:
        request = getattr(self, "requestline", "")
        if len(request) > _LOGGED_REQUEST:
            request = request[:_LOGGED_REQUEST] + "..."
        # ascii(): a request line is the client's text; escape sequences in it stay inert.
        self.server.log(f"{self.client_address[0]}: {code} for {request!a}: {ascii(why)[1:-1]}")

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        try:
            found, folder = self.server.locate(self.path)
            if folder:
                # simple/NAME asked without its slash: the page's relative links need it.
                self.send_response(301)
                self.send_header("Location", quote(found) + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            handle, status = _open_regular(found)
        except _Refused as refused:
            self.send_error(refused.code, refused.why)
            return
        with handle:
            size = status.st_size
            try:
                self._range_sent = self._range(size)
            except _Refused as refused:
                self._log_refusal(refused.code, refused.why)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self._range_sent is None and self._unmodified(status):
                self.send_response(304)
                self.end_headers()
                return
            start, end = self._range_sent or (0, size - 1)
            self.send_response(200 if self._range_sent is None else 206)
            self.send_header("Content-Type", _CONTENT_TYPES.get(os.path.splitext(found)[1], "application/octet-stream"))
            if self._range_sent is not None:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(end - start + 1))
            self.send_header("Last-Modified", self.date_time_string(int(status.st_mtime)))
            self.end_headers()
            if body:
                handle.seek(start)
                self.copyfile(handle, self.wfile)

    def _range(self, size: int) -> Optional[Tuple[int, int]]:
        """The bytes one `Range: bytes=` range asks for; None for the whole file: no Range, or
        another form (several ranges, other units), which RFC 9110 lets a server ignore."""
        asked = _RANGE.fullmatch(self.headers.get("Range", "").strip())
        if asked is None:
            return None
        first, last = (_position(text) if text else None for text in asked.groups())
        if first is not None:
            start, end = first, size - 1 if last is None else min(last, size - 1)
        elif last is not None:
            start, end = max(size - last, 0), size - 1
        else:
            start, end = 0, -1
        if start > end:
            raise _Refused(416, f"the range {asked.group(0)[:40]} is outside the file's {size} bytes")
        return start, end

    def _unmodified(self, status: os.stat_result) -> bool:
        """If-Modified-Since names the file's time or later: uv revalidating an index page."""
        since = self.headers.get("If-Modified-Since")
        if since is None:
            return False
        try:
            when = email.utils.parsedate_to_datetime(since)
        except (TypeError, ValueError, IndexError):
            return False
        return when.tzinfo is not None and int(status.st_mtime) <= when.timestamp()

    def end_headers(self) -> None:
        self.send_header("Accept-Ranges", "bytes")  # what makes uv ask for a wheel's metadata alone
        super().end_headers()

    def copyfile(self, source: BinaryIO, outputfile: io.BufferedIOBase) -> None:
        if self._range_sent is None:
            shutil.copyfileobj(source, outputfile)
            return
        left = self._range_sent[1] - self._range_sent[0] + 1
        while left > 0:
            chunk = source.read(min(left, 1 << 16))
            if not chunk:
                break
            outputfile.write(chunk)
            left -= len(chunk)


def _position(digits: str) -> int:
    """A byte position of a Range header; one too long to be a file's is past every file."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _POSITION_DIGITS else 10 ** _POSITION_DIGITS


def _open_regular(path: str) -> Tuple[BinaryIO, os.stat_result]:
    """`path` opened for reading if it is a regular file: a FIFO, a device or a socket is never
    opened (a FIFO would block the thread), and O_NONBLOCK with fstat holds if one is swapped in."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise _Refused(404, "not a regular file")
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _Refused(404, exc.strerror or str(exc)) from None
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise _Refused(404, "not a regular file")
    return os.fdopen(descriptor, "rb"), status


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class WheelhouseServer(http.server.ThreadingHTTPServer):
    """The wheelhouse in `directory`, served on `address`; `idle_timeout` and `max_connections`
    bound what silent or piled-up connections hold, `log` takes each refusal's one line."""

    request_queue_size = _LISTEN_QUEUE
    daemon_threads = True  # a runner that stops mid-download does not keep the server from stopping

    def __init__(self, directory: Path, address: Tuple[str, int], lock: Lock, *,
                 idle_timeout: float = IDLE_TIMEOUT, max_connections: int = MAX_CONNECTIONS,
                 log: Callable[[str], None] = _to_stderr) -> None:
        self.directory = directory
        self.lock = lock
        self.idle_timeout = idle_timeout
        self._root = os.path.realpath(directory)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = False
        self._log = log
        self._log_lock = threading.Lock()
        super().__init__(address, _Handler)

    def log(self, line: str) -> None:
        with self._log_lock:  # one whole line at a time, from any connection's thread
            self._log(line)

    def locate(self, request_path: str) -> Tuple[str, bool]:
        """The real path a request names, and whether it is a folder to redirect to with its
        slash; _Refused for anything that is not the wheelhouse's."""
        # An origin-form path ("/files/x?query"), or the path of an absolute-form URL.
        path = request_path.split("?", 1)[0].split("#", 1)[0] if request_path.startswith("/") \
            else urlsplit(request_path).path
        try:
            text = unquote(path, errors="strict")
        except UnicodeDecodeError:
            raise _Refused(400, "the path is not UTF-8") from None
        if not text.startswith("/") or any(ord(char) < 32 or char in "\\\x7f" for char in text):
            raise _Refused(400, "the path has a control character or a backslash")
        names = text[1:].split("/")
        folder = names[-1] == ""
        if folder:
            names.pop()
        if not names or any(not name or name.startswith(".") for name in names):
            raise _Refused(404, "not a file of the wheelhouse (a folder listing, a dotfile or an empty name)")
        real = self._confined(os.path.join(self._root, *names))
        if os.path.isdir(real):
            page = self._confined(os.path.join(real, "index.html"))  # a PEP 503 page, never a listing
            if not os.path.isfile(page):
                raise _Refused(404, "a folder without an index page (no listings)")
            return (text, True) if not folder else (page, False)
        if folder:
            raise _Refused(404, "not a folder")
        return real, False

    def _confined(self, path: str) -> str:
        """`path`'s real path, if it is the wheelhouse's lock or inside its files/ or simple/."""
        real = os.path.realpath(path)
        inside = os.path.relpath(real, self._root).split(os.sep)
        if inside[0] == os.pardir or any(name.startswith(".") for name in inside):
            raise _Refused(404, "outside the wheelhouse (a link out of it, or a dotfile)")
        if inside != [WHEELHOUSE_LOCK] and inside[0] not in (FILES_DIR, SIMPLE_DIR):
            raise _Refused(404, f"not under {FILES_DIR}/, {SIMPLE_DIR}/ or {WHEELHOUSE_LOCK}")
        return real

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        # At the bound, accepting waits: the next connections wait in the listen queue.
        while not self._slots.acquire(timeout=0.5):
            if self._stopping:
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        where = client_address[0] if isinstance(client_address, tuple) else client_address
        self.log(f"{where}: the connection ended: {type(error).__name__}: {ascii(str(error))[1:-1]}")

    def shutdown(self) -> None:
        self._stopping = True
        super().shutdown()


def open_server(directory: Path, bind: str, port: int, rerun: "Rerun", *, idle_timeout: float = IDLE_TIMEOUT,
                max_connections: int = MAX_CONNECTIONS, log: Callable[[str], None] = _to_stderr) -> WheelhouseServer:
    """A server for the wheelhouse in `directory`, listening (not yet serving) on bind:port.

    Refused with one line: a folder that is not a wheelhouse, a port already in use, an
    address not this machine's."""
    fill = f"fill it from a lock, then serve it: {rerun.with_option('--lock', 'FILE')}"
    try:
        raw = read_regular_file(directory / WHEELHOUSE_LOCK, 16 * 2**20, follow=False)
    except OSError:
        raw = None
    if raw is None:
        raise BadInput(f"{directory} is not a wheelhouse (it has no {WHEELHOUSE_LOCK})", fix=fill)
    try:
        lock = parse_lock(raw.decode("utf-8", "replace"), str(directory / WHEELHOUSE_LOCK))
    except BadInput as exc:
        raise BadInput(exc.message, fix=fill) from None
    try:
        return WheelhouseServer(directory, (bind, port), lock, idle_timeout=idle_timeout,
                                max_connections=max_connections, log=log)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise BadInput(f"port {port} on {bind} is already in use",
                           fix=f"serve on another port: {rerun.with_option('--port', str(port + 1))}") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise BadInput(f"--bind {bind} is not an address of this machine",
                           fix=f"use one of its addresses, or all of them: {rerun.with_option('--bind', '0.0.0.0')}") \
                from None
        raise


def serving_url(bind: str, port: int) -> str:
    """The address runners reach a served wheelhouse at: this host's name where it listens on all."""
    host = socket.gethostname() if bind in ("0.0.0.0", "::") else bind
    return f"http://{host}:{port}/"


def _reach(bind: str) -> str:
    """Who can download what is served on `bind`."""
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        return "this machine only" if bind == "localhost" else "the hosts that reach that address"
    if address.is_unspecified:
        # The default: the fleet's runners are other hosts, and must reach it.
        return ("all of this machine's addresses, so any host that reaches this port can download them, as the "
                "fleet's runners must (--bind 127.0.0.1 keeps it to this machine)")
    return "this machine only" if address.is_loopback else "the hosts that reach that address"


def serving_lines(server: WheelhouseServer, bind: str) -> List[str]:
    """What `--serve` prints: first where it listens and what that exposes, then each runner's command."""
    port = server.server_address[1]
    lock = str(server.directory / WHEELHOUSE_LOCK)
    return [f"serving {server.directory} (its {WHEELHOUSE_LOCK}, {FILES_DIR}/ and {SIMPLE_DIR}/, read-only, nothing "
            f"else) on {bind}:{port}: {_reach(bind)}; Ctrl-C stops",
            f"  on each runner, with its own copy of {lock} (the hashes come from it, so copy it as you trust it): "
            + runner_command(server.lock.target, lock, serving_url(bind, port))]
