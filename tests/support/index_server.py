"""A PEP 503 "simple" index on 127.0.0.1, served from a directory of wheels.

Only loopback is ever bound, so a test using it cannot reach beyond the machine.
The server re-reads its directory on each page request (it holds a handful of
files), so a test may drop a new wheel in mid-test and see it offered.

Failure switches let tests simulate an index that goes away mid-install:
``fail_after(n)`` answers every request after the next ``n`` with HTTP 503
(or closes the connection without an answer), ``stop()`` closes the listening
socket so further connections are refused, ``delay`` stalls file
downloads half-way, and ``hold`` holds them (or those of the projects it names) half-way until ``release()``, so a test can
interrupt the installer while it is provably downloading, whatever the machine's load.
``slow`` spreads the files of named projects over some seconds, so a test
sees an installer's progress while a download runs; ``cache_files`` lets
clients keep the files (as a real index does), so a second install is a cache hit.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import re
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import unquote, urlsplit

from .wheels import normalize_name, parse_wheel_filename

__all__ = ["LoopbackIndex"]

_FAIL_MODES = ("503", "close", "truncate")


class _FileInfo(object):
    """What a project page needs to know about one file, cached by (mtime, size)."""

    __slots__ = ("key", "metadata", "requires_python", "sha256")

    def __init__(self, key: Tuple[float, int], sha256: str, requires_python: Optional[str], metadata: Optional[bytes]):
        self.key = key
        self.sha256 = sha256
        self.requires_python = requires_python
        self.metadata = metadata


def _read_wheel_metadata(path: Path) -> Optional[bytes]:
    try:
        with zipfile.ZipFile(str(path)) as archive:
            for member in archive.namelist():
                parts = member.split("/")
                if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                    return archive.read(member)
    except (zipfile.BadZipFile, OSError):
        return None
    return None


def _requires_python(metadata: Optional[bytes]) -> Optional[str]:
    if not metadata:
        return None
    match = re.search(rb"^Requires-Python:\s*(.+?)\s*$", metadata, re.MULTILINE)
    return match.group(1).decode("utf-8") if match else None


def _project_of(filename: str) -> Optional[str]:
    if filename.endswith(".whl"):
        try:
            return parse_wheel_filename(filename)[0]
        except ValueError:
            return None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            # sdist: <name>-<version><suffix>; the version never contains '-'.
            stem = filename[: -len(suffix)]
            if "-" in stem:
                return normalize_name(stem.rsplit("-", 1)[0])
    return None


class _QuietServer(ThreadingHTTPServer):
    # Daemon handler threads and no join on close: a handler stalled by
    # ``delay`` must never make stop() (or interpreter exit) hang.
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: object, client_address: object) -> None:
        # A client killed mid-request (the point of several tests) resets its
        # connection; that is expected, not worth a traceback on stderr.
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, TimeoutError)):
            return
        ThreadingHTTPServer.handle_error(self, request, client_address)  # type: ignore[arg-type]


class LoopbackIndex(object):
    """Serve ``root`` (a flat directory of wheels/sdists) as a PEP 503 index.

    ``url`` is the index URL to hand to uv/pip (``http://127.0.0.1:PORT/simple``).
    ``requests`` lists every request path in arrival order (thread-safe appends).
    ``core_metadata`` adds PEP 658/714 ``data-core-metadata`` links, so resolvers
    fetch ``<file>.metadata`` while resolving and the ``.whl`` only to install,
    which keeps resolution and download visible as separate steps in ``requests``.
    """

    def __init__(
        self,
        root: Path,
        *,
        name: str = "index",
        delay: float = 0.0,
        core_metadata: bool = True,
        hide: Tuple[str, ...] = (),
        credentials: Optional[str] = None,
        slow: Optional[Dict[str, float]] = None,
        cache_files: bool = False,
        pep691: bool = False,
        port: int = 0,
        hold: Union[bool, Sequence[str]] = False,
    ) -> None:
        self.root = Path(root)
        self.credentials = credentials  # "user:password": every request must carry them (HTTP Basic)
        self.name = name
        self.delay = delay
        # Set: held downloads go on (release(), and stop() so that no handler outlives the server).
        self._released = threading.Event()
        self._held = None if isinstance(hold, bool) else {normalize_name(name) for name in hold}  # None: all files
        if not hold:
            self._released.set()
        self.slow = dict((normalize_name(k), v) for k, v in (slow or {}).items())
        self.cache_files = cache_files
        self.core_metadata = core_metadata
        self.hidden = set(normalize_name(n) for n in hide)
        # Answer clients that ask for it (Accept: application/vnd.pypi.simple.v1+json) with PEP 691 JSON.
        self.pep691 = pep691
        # A fixed port keeps the URLs, and so uv's cache of what they served, across runs.
        self.fixed_port = port
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: List[str] = []
        self._bytes_sent = 0
        self._cache: Dict[str, _FileInfo] = {}
        self._fail_countdown: Optional[int] = None
        self._fail_mode = "503"
        self._fail_match: Optional[Callable[[str], bool]] = None
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._port: Optional[int] = None

    # ---- lifecycle -------------------------------------------------------
    def start(self) -> "LoopbackIndex":
        if self._server is not None:
            return self
        handler = _make_handler(self)
        server = _QuietServer(("127.0.0.1", self.fixed_port), handler)
        self._server = server
        self._port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="loopback-" + self.name, daemon=True
        )
        self._thread.start()
        return self

    def release(self) -> None:
        """Let the downloads ``hold`` holds half-way go on, and every later one run through."""
        self._released.set()

    def stop(self) -> None:
        """The index goes away: the listening socket closes, new connections are refused."""
        self._released.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LoopbackIndex":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("index not started")
        return self._port

    @property
    def base_url(self) -> str:
        return "http://127.0.0.1:{}".format(self.port)

    @property
    def url(self) -> str:
        return self.base_url + "/simple"

    # ---- request log -----------------------------------------------------
    @property
    def requests(self) -> List[str]:
        with self._lock:
            return list(self._requests)

    @property
    def bytes_sent(self) -> int:
        """Bytes of every answer's body sent whole since the last clear_requests (bench/bench_fetch.py)."""
        return self._bytes_sent

    def _sent(self, size: int) -> None:
        with self._lock:
            self._bytes_sent += size

    def clear_requests(self) -> None:
        with self._lock:
            del self._requests[:]
            self._bytes_sent = 0

    def requested_projects(self) -> List[str]:
        """Normalized names whose /simple/<name>/ page was asked for, in first-request order."""
        seen: List[str] = []
        for path in self.requests:
            parts = [p for p in path.split("/") if p]
            if len(parts) >= 2 and parts[0] == "simple":
                project = normalize_name(parts[1])
                if project not in seen:
                    seen.append(project)
        return seen

    def downloaded_files(self) -> List[str]:
        """File names fetched in full (``.metadata`` sidecars excluded)."""
        out = []
        for path in self.requests:
            if path.startswith("/files/") and not path.endswith(".metadata"):
                out.append(path[len("/files/"):])
        return out

    def was_requested(self, project: str) -> bool:
        return normalize_name(project) in self.requested_projects()

    def _log(self, path: str) -> None:
        with self._arrived:
            self._requests.append(path)
            self._arrived.notify_all()

    def wait_for_request(self, match: Callable[[str], bool], timeout: float = 30.0) -> str:
        """Block until a request whose path satisfies ``match`` arrives; return that path.

        For kill-mid-download tests: ``wait_for_request(lambda p: p.endswith(".whl"))``
        with ``delay`` set returns while that download is stalled half-way.
        Raises TimeoutError if none arrives in time.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._arrived:
            while True:
                for path in self._requests[seen:]:
                    if match(path):
                        return path
                seen = len(self._requests)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("no matching request to {} within {}s".format(self.name, timeout))
                self._arrived.wait(remaining)

    # ---- failure switches ------------------------------------------------
    def fail_after(self, n: int, mode: str = "503", match: Optional[Callable[[str], bool]] = None) -> None:
        """Serve the next ``n`` (matching) requests, then fail every matching one.

        ``mode`` "503" answers HTTP 503; "close" drops the connection without
        a response; "truncate" announces the whole file and sends half of it.
        ``match`` (a predicate on the request path) limits which requests count
        and fail, e.g. ``lambda p: p.startswith("/files/")`` lets resolution
        succeed and makes the downloads fail.
        """
        if mode not in _FAIL_MODES:
            raise ValueError("mode must be one of {}".format(_FAIL_MODES))
        with self._lock:
            self._fail_countdown = max(0, int(n))
            self._fail_mode = mode
            self._fail_match = match

    def heal(self) -> None:
        """Undo ``fail_after``."""
        with self._lock:
            self._fail_countdown = None
            self._fail_match = None

    def _should_fail(self, path: str) -> Optional[str]:
        with self._lock:
            if self._fail_countdown is None:
                return None
            if self._fail_match is not None and not self._fail_match(path):
                return None
            if self._fail_countdown > 0:
                self._fail_countdown -= 1
                return None
            return self._fail_mode

    # ---- content ---------------------------------------------------------
    def _file_info(self, path: Path) -> _FileInfo:
        stat = path.stat()
        key = (stat.st_mtime, stat.st_size)
        with self._lock:
            cached = self._cache.get(path.name)
        if cached is not None and cached.key == key:
            return cached
        data = path.read_bytes()
        metadata = _read_wheel_metadata(path) if path.name.endswith(".whl") else None
        info = _FileInfo(key, hashlib.sha256(data).hexdigest(), _requires_python(metadata), metadata)
        with self._lock:
            self._cache[path.name] = info
        return info

    def projects(self) -> Dict[str, List[Path]]:
        """Normalized project name -> its files, read from ``root`` now."""
        out: Dict[str, List[Path]] = {}
        if not self.root.is_dir():
            return out
        for path in sorted(self.root.iterdir()):
            project = _project_of(path.name)
            if project is None or project in self.hidden or not path.is_file():
                continue
            out.setdefault(project, []).append(path)
        return out

    def root_page(self) -> bytes:
        links = [
            '<a href="{0}/">{0}</a>'.format(html.escape(project)) for project in sorted(self.projects())
        ]
        return _html_page("Simple index", links)

    def project_page(self, project: str) -> Optional[bytes]:
        files = self.projects().get(normalize_name(project))
        if not files:
            return None
        links = []
        for path in files:
            info = self._file_info(path)
            attrs = ['href="../../files/{}#sha256={}"'.format(_quote_filename(path.name), info.sha256)]
            if info.requires_python:
                attrs.append('data-requires-python="{}"'.format(html.escape(info.requires_python, quote=True)))
            if self.core_metadata and info.metadata is not None:
                meta_hash = hashlib.sha256(info.metadata).hexdigest()
                # PEP 714 spelling plus the older PEP 658 one, for older clients.
                attrs.append('data-core-metadata="sha256={}"'.format(meta_hash))
                attrs.append('data-dist-info-metadata="sha256={}"'.format(meta_hash))
            links.append("<a {}>{}</a>".format(" ".join(attrs), html.escape(path.name)))
        return _html_page("Links for " + html.escape(project), links)

    def project_json(self, project: str) -> Optional[bytes]:
        """The PEP 691 JSON form of ``project_page``: the same files, hashes as a mapping."""
        import json

        files = self.projects().get(normalize_name(project))
        if not files:
            return None
        entries = []
        for path in files:
            info = self._file_info(path)
            entry = {"filename": path.name, "url": "../../files/" + _quote_filename(path.name),
                     "hashes": {"sha256": info.sha256}}
            if info.requires_python:
                entry["requires-python"] = info.requires_python
            entries.append(entry)
        body = {"meta": {"api-version": "1.0"}, "name": normalize_name(project), "files": entries}
        return json.dumps(body).encode("utf-8")

    def file_bytes(self, filename: str) -> Optional[bytes]:
        if "/" in filename or filename.startswith("."):
            return None
        if filename.endswith(".metadata"):
            path = self.root / filename[: -len(".metadata")]
            if not path.is_file() or _project_of(path.name) in self.hidden:
                return None
            return self._file_info(path).metadata
        path = self.root / filename
        if not path.is_file() or _project_of(path.name) in self.hidden:
            return None
        return path.read_bytes()


def _quote_filename(name: str) -> str:
    # '+' in a local version must survive as a literal '+', not become a space.
    return name.replace("+", "%2B")


def _html_page(title: str, links: List[str]) -> bytes:
    body = "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>{}</title></head><body>\n{}\n</body></html>\n".format(
        title, "<br>\n".join(links)
    )
    return body.encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    # The index this handler serves: _make_handler binds it in a subclass per server.
    index: LoopbackIndex
    protocol_version = "HTTP/1.1"
    server_version = "loopback-index/1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # the request log is ``index.requests``; stderr noise helps nobody

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        self.index._log(path)
        if self.index.credentials is not None:
            expected = "Basic " + base64.b64encode(self.index.credentials.encode()).decode()
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="index"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        failure = self.index._should_fail(path)
        if failure == "close":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return
        if failure == "503":
            self._send(503, b"index unavailable\n", "text/plain", head)
            return
        if failure == "truncate":
            # The whole file's length announced, half of it sent, the connection closed.
            whole = self.index.file_bytes(path.rsplit("/", 1)[-1]) or b"x" * 64
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(whole)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(whole[:len(whole) // 2])
                self.wfile.flush()
                self.connection.shutdown(2)
            return
        parts = [p for p in path.split("/") if p]
        if parts == ["simple"]:
            self._send(200, self.index.root_page(), "text/html", head)
            return
        if len(parts) == 2 and parts[0] == "simple":
            if self.index.pep691 and "application/vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or ""):
                body = self.index.project_json(parts[1])
                if body is not None:
                    self._send(200, body, "application/vnd.pypi.simple.v1+json", head)
                    return
            page = self.index.project_page(parts[1])
            if page is None:
                self._send(404, b"not found\n", "text/plain", head)
            else:
                self._send(200, page, "text/html", head)
            return
        if len(parts) == 2 and parts[0] == "files":
            data = self.index.file_bytes(parts[1])
            if data is None:
                self._send(404, b"not found\n", "text/plain", head)
            elif parts[1].endswith(".metadata"):
                self._send(200, data, "text/plain", head)
            else:
                pace = self.index.slow.get(_project_of(parts[1]) or "", 0.0)
                held = self.index._held is None or _project_of(parts[1]) in self.index._held
                self._send(200, data, "application/octet-stream", head, stall=self.index.delay, pace=pace,
                           cache=self.index.cache_files, held=self.index._released if held else None)
            return
        self._send(404, b"not found\n", "text/plain", head)

    def _send(self, code: int, data: bytes, ctype: str, head: bool, stall: float = 0.0, pace: float = 0.0,
              cache: bool = False, held: Optional[threading.Event] = None) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            # No caching unless asked: tests swap index contents between runs.
            self.send_header("Cache-Control", "max-age=3600, immutable" if cache else "no-store")
            self.end_headers()
            if head:
                return
            if held is not None and not held.is_set():
                # Half, then held until the test releases it: the client is provably mid-download.
                half = len(data) // 2
                self.wfile.write(data[:half])
                self.wfile.flush()
                held.wait(600)
                self.wfile.write(data[half:])
            elif stall > 0:
                # Send half, then stall: the client is provably mid-download.
                half = len(data) // 2
                self.wfile.write(data[:half])
                self.wfile.flush()
                time.sleep(stall)
                self.wfile.write(data[half:])
            elif pace > 0:
                # Twenty equal parts over `pace` seconds: slow, but always finished in bounded time.
                part = len(data) // 20 + 1
                for start in range(0, len(data), part):
                    self.wfile.write(data[start:start + part])
                    self.wfile.flush()
                    time.sleep(pace / 20)
            else:
                self.wfile.write(data)
            self.index._sent(len(data))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client (an installer a test just killed) went away


def _make_handler(index: LoopbackIndex) -> type:
    class Handler(_Handler):
        pass

    Handler.index = index
    return Handler
