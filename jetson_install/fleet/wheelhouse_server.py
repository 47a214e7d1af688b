"""`wheelhouse DIR --serve`: a wheelhouse served to a fleet over HTTP, read-only, and nothing else.

`python3 -m http.server` is the obvious server and the slow one (bench/bench_fleet.py): it
answers HTTP/1.0, a new connection per request, from a listen queue of 5, while uv opens up to
50 downloads at once, so the connections past the queue wait for TCP to retry them; and it
ignores Range, so uv, which reads a wheel's metadata before installing it, fetches every file
twice. This server keeps connections open (HTTP/1.1), queues what uv opens at once, and
answers single byte ranges.

It also serves what a wheelhouse is and nothing more: a regular file that is `lock.txt` or
under `files/` or `simple/` of DIR, opened relative to DIR one name at a time without following
any symbolic link (openat with O_NOFOLLOW), so no link, however swapped in, leads out; no
dotfile, no folder listing, no FIFO or device (a FIFO would hold a thread forever). A request
head must arrive whole within a deadline of its first byte; a connection that says nothing is
closed after an idle timeout; and at the bound on connections, the one idle longest is closed
for the new one, so idle keep-alive connections never make a request wait. A request it refuses
gets its status and one log line, never a traceback.

For a fleet, a static web server (nginx) or an OCI registry serves the same wheelhouse with
engines built for it (docs/fleets.md); this one is for a few boards on a trusted network.
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import http.server
import io
import os
import re
import select
import shutil
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO, Callable, Dict, List, Mapping, Optional, Set, Tuple
from urllib.parse import quote, unquote, urlsplit

from jetson_install.base.errors import BadInput
from jetson_install.catalog.lock_file import FILES_DIR, SIMPLE_DIR, WHEELHOUSE_LOCK, Lock, read_lock
from jetson_install.planning.rerun import Rerun

__all__ = ["WheelhouseServer", "open_server", "IDLE_TIMEOUT", "HEAD_TIMEOUT", "MAX_CONNECTIONS"]

# uv downloads up to 50 files at once (DEFAULT_DOWNLOADS in astral-sh/uv
# crates/uv-configuration/src/concurrency.rs); socketserver's queue is 5
# (request_queue_size in cpython Lib/socketserver.py). Room for twenty runners' connections
# waiting past the bound (Linux caps it at net.core.somaxconn, 4096 since 5.4); a queue too
# short drops the SYNs past it, which clients retry only after a second or more.
_LISTEN_QUEUE = 1024
#: Seconds a connection may stay silent before it is closed. A runner's uv closes its
#: connections when it exits; one that neither asks nor leaves holds a thread until then.
IDLE_TIMEOUT = 30.0
#: Seconds a request head (its line and headers) may take from its first byte: a client that
#: sends a header line every few seconds (slowloris) holds its connection no longer than this.
HEAD_TIMEOUT = 10.0
#: Connections served at once, each on its thread: four runners' 50 downloads. Past it the
#: connection idle longest is closed for the new one; where none is idle, the next wait in
#: the listen queue until one ends.
MAX_CONNECTIONS = 200
# What a connection is doing, for the bound and the head's deadline: waiting for a request,
# reading a request's head, or answering one.
_IDLE, _HEAD, _BUSY = "idle", "head", "busy"
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
    #: The reason phrases of RFC 9110 (https://www.rfc-editor.org/rfc/rfc9110#section-15.5), which
    #: Python 3.13's http.HTTPStatus took up: the same status line from every Python a board runs
    #: (3.12 and older said "Requested Range Not Satisfiable" and "Request-URI Too Long").
    responses: Mapping[int, Tuple[str, str]] = {
        **http.server.BaseHTTPRequestHandler.responses,
        413: ("Content Too Large", http.server.BaseHTTPRequestHandler.responses[413][1]),
        414: ("URI Too Long", http.server.BaseHTTPRequestHandler.responses[414][1]),
        416: ("Range Not Satisfiable", http.server.BaseHTTPRequestHandler.responses[416][1])}
    server: "WheelhouseServer"
    _range_sent: Optional[Tuple[int, int]] = None  # the bytes this response carries, when a range
    # Unbuffered: a request's first byte is seen on the socket itself (select), never left in
    # a buffer; a request head is a few hundred bytes.
    rbufsize = 0

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout)  # each read and write waits this long at most

    def handle_one_request(self) -> None:
        """Wait for the next request idle (where the bound may close this connection for a new
        one), then read its head against the deadline, then answer it."""
        self.server.connections.mark(self, _IDLE)
        try:
            readable, _, _ = select.select([self.connection], [], [], self.server.idle_timeout)
        except (OSError, ValueError):  # closed for a new connection meanwhile
            readable = []
        if not readable or not self.server.connections.mark(self, _HEAD):
            self.close_connection = True
            return
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.server.connections.mark(self, _BUSY)  # the head is read: the answer takes the time it takes
        return parsed

    def finish(self) -> None:
        self.server.connections.forget(self)
        super().finish()

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
            found, redirect = self.server.open_file(self.path)
            if redirect is not None:
                # simple/NAME asked without its slash: the page's relative links need it.
                self.send_response(301)
                self.send_header("Location", quote(redirect) + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            assert found is not None
            handle, status, name = found
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
            self.send_header("Content-Type", _CONTENT_TYPES.get(os.path.splitext(name)[1], "application/octet-stream"))
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


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO's open returns at once (fstat then refuses it) instead of holding the thread.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_at(folder: int, name: str) -> Tuple[int, os.stat_result]:
    """`name` in the open folder `folder`, never through a link (O_NOFOLLOW: ELOOP); a
    device, FIFO or socket is refused by its lstat before it is opened, and by fstat after."""
    try:
        if stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            raise _Refused(404, "a symbolic link (none is followed)")
        descriptor = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        raise _Refused(404, "a symbolic link (none is followed)" if exc.errno == errno.ELOOP
                       else exc.strerror or str(exc)) from None
    status = os.fstat(descriptor)
    if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        os.close(descriptor)
        raise _Refused(404, "not a regular file")
    return descriptor, status


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class _Connections:
    """Each open connection's state (idle, reading a head, answering) and since when, for the
    bound (close the one idle longest) and the head's deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: Dict[_Handler, Tuple[str, float]] = {}
        self._closed: Set[_Handler] = set()

    def mark(self, handler: _Handler, state: str) -> bool:
        """`handler` is now in `state`; False where it was closed meanwhile (for another connection)."""
        with self._lock:
            if handler in self._closed:
                return False
            self._states[handler] = (state, time.monotonic())
            return True

    def forget(self, handler: _Handler) -> None:
        with self._lock:
            self._states.pop(handler, None)
            self._closed.discard(handler)

    def close_one_waiting(self) -> None:
        """Close the connection idle longest, else the one longest in its head: a new connection
        never waits for them."""
        with self._lock:
            waiting = [(state != _IDLE, since, handler) for handler, (state, since) in self._states.items()
                       if state in (_IDLE, _HEAD) and handler not in self._closed]
            if not waiting:
                return
            handler = min(waiting, key=lambda item: item[:2])[2]
            self._close(handler)

    def past_head_deadline(self, seconds: float) -> List[str]:
        """Close every connection whose head began more than `seconds` ago; their clients."""
        now = time.monotonic()
        with self._lock:
            late = [handler for handler, (state, since) in self._states.items()
                    if state == _HEAD and now - since > seconds and handler not in self._closed]
            for handler in late:
                self._close(handler)
        return [str(handler.client_address[0]) for handler in late]

    def _close(self, handler: _Handler) -> None:
        self._closed.add(handler)
        with contextlib.suppress(OSError):  # its thread's select or read returns at once, and the thread ends
            handler.connection.shutdown(socket.SHUT_RDWR)


class WheelhouseServer(http.server.ThreadingHTTPServer):
    """The wheelhouse in `directory`, served on `address`; `idle_timeout` and `max_connections`
    bound what silent or piled-up connections hold, `log` takes each refusal's one line."""

    request_queue_size = _LISTEN_QUEUE
    daemon_threads = True  # a runner that stops mid-download does not keep the server from stopping

    def __init__(self, directory: Path, address: Tuple[str, int], lock: Lock, *,
                 idle_timeout: float = IDLE_TIMEOUT, head_timeout: float = HEAD_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS, log: Callable[[str], None] = _to_stderr) -> None:
        self.directory = directory
        self.lock = lock
        self.idle_timeout = idle_timeout
        self.head_timeout = head_timeout
        # DIR itself is opened once, as given; nothing under it is reached through a link.
        self._root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.connections = _Connections()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = False
        self._log = log
        self._log_lock = threading.Lock()
        super().__init__(address, _Handler)  # a failed bind calls server_close, which closes DIR

    def log(self, line: str) -> None:
        with self._log_lock:  # one whole line at a time, from any connection's thread
            self._log(line)

    def open_file(self, request_path: str
                  ) -> Tuple[Optional[Tuple[BinaryIO, os.stat_result, str]], Optional[str]]:
        """The file a request names, opened (its handle, status and name), or the path to
        redirect to with its slash (a PEP 503 page's folder); _Refused for anything that is not
        the wheelhouse's. Each name is opened relative to the folder before it, from DIR down,
        without following a link, so what is opened is inside DIR whatever is swapped meanwhile."""
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
        if names != [WHEELHOUSE_LOCK] and names[0] not in (FILES_DIR, SIMPLE_DIR):
            raise _Refused(404, f"not under {FILES_DIR}/, {SIMPLE_DIR}/ or {WHEELHOUSE_LOCK}")
        opened: List[int] = [os.dup(self._root)]
        try:
            for name in names[:-1]:
                try:
                    opened.append(os.open(name, _DIRECTORY_FLAGS, dir_fd=opened[-1]))
                except OSError as exc:
                    raise _Refused(404, "a symbolic link (none is followed)" if exc.errno == errno.ELOOP
                                   else exc.strerror or str(exc)) from None
            descriptor, status = _open_at(opened[-1], names[-1])
            if stat.S_ISDIR(status.st_mode):
                opened.append(descriptor)
                if not folder:
                    # Answered only where the folder has its page.
                    os.close(_open_at(descriptor, "index.html")[0])
                    return None, text
                descriptor, status = _open_at(descriptor, "index.html")  # a PEP 503 page, never a listing
                if not stat.S_ISREG(status.st_mode):
                    os.close(descriptor)
                    raise _Refused(404, "a folder without an index page (no listings)")
                return (os.fdopen(descriptor, "rb"), status, "index.html"), None
            if folder:
                os.close(descriptor)
                raise _Refused(404, "not a folder")
            return (os.fdopen(descriptor, "rb"), status, names[-1]), None
        finally:
            for descriptor in opened:
                os.close(descriptor)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        # At the bound, the connection idle longest (or, with none idle, the one longest in its
        # head) is closed for this one; where every one is answering, accepting waits and the
        # next connections wait in the listen queue.
        while not self._slots.acquire(timeout=0.05):
            self.connections.close_one_waiting()
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

    def service_actions(self) -> None:
        """Between accepts (serve_forever's poll): close each connection whose request head has
        not arrived whole within its deadline."""
        for client in self.connections.past_head_deadline(self.head_timeout):
            self.log(f"{client}: closed: its request head did not arrive within {self.head_timeout:g} s")

    def server_close(self) -> None:
        super().server_close()
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        where = client_address[0] if isinstance(client_address, tuple) else client_address
        self.log(f"{where}: the connection ended: {type(error).__name__}: {ascii(str(error))[1:-1]}")

    def shutdown(self) -> None:
        self._stopping = True
        super().shutdown()


def open_server(directory: Path, bind: str, port: int, rerun: "Rerun", *, idle_timeout: float = IDLE_TIMEOUT,
                head_timeout: float = HEAD_TIMEOUT, max_connections: int = MAX_CONNECTIONS,
                log: Callable[[str], None] = _to_stderr) -> WheelhouseServer:
    """A server for the wheelhouse in `directory`, listening (not yet serving) on bind:port.

    Refused with one line: a folder that is not a wheelhouse, a port already in use, an
    address not this machine's."""
    fill = f"fill it from a lock, then serve it: {rerun.with_option('--lock', 'FILE')}"
    if not os.path.lexists(directory / WHEELHOUSE_LOCK):
        raise BadInput(f"{directory} is not a wheelhouse (it has no {WHEELHOUSE_LOCK})", fix=fill)
    lock = read_lock(directory / WHEELHOUSE_LOCK, str(directory / WHEELHOUSE_LOCK), follow=False, fix=fill)
    try:
        return WheelhouseServer(directory, (bind, port), lock, idle_timeout=idle_timeout, head_timeout=head_timeout,
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
