"""`wheelhouse DIR --serve`: a wheelhouse served to a fleet over HTTP, read-only.

`python3 -m http.server` is the obvious server and the slow one (bench/bench_fleet.py): it
answers HTTP/1.0, a new connection per request, from a listen queue of 5, while uv opens up to
50 downloads at once, so the connections past the queue wait for TCP to retry them; and it
ignores Range, so uv, which reads a wheel's metadata before installing it, fetches every file
twice. This server keeps connections open (HTTP/1.1), queues what uv opens at once, and
answers single byte ranges.
"""

from __future__ import annotations

import errno
import http.server
import os
import re
import shutil
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.catalog.lock_file import WHEELHOUSE_LOCK

if TYPE_CHECKING:
    from jetson_install.planning.fixes import Rerun

__all__ = ["WheelhouseServer", "open_server"]

# uv downloads up to 50 files at once (DEFAULT_DOWNLOADS in astral-sh/uv
# crates/uv-configuration/src/concurrency.rs); socketserver's queue is 5
# (request_queue_size in cpython Lib/socketserver.py). Room for two runners at once.
_LISTEN_QUEUE = 128
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class _Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # a runner's connections stay open between files
    _range: Optional[Tuple[int, int]] = None  # the bytes this response carries, when a range

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
        pass  # a line per request would drown the one line that says where the wheelhouse is served

    def send_head(self) -> Optional[BinaryIO]:  # type: ignore[override]
        self._range = None
        asked = _RANGE.fullmatch(self.headers.get("Range", "").strip())
        path = self.translate_path(self.path)
        if asked is None or not os.path.isfile(path):
            return super().send_head()  # type: ignore[return-value]
        size = os.path.getsize(path)
        first, last = asked.groups()
        if first:
            start, end = int(first), min(int(last), size - 1) if last else size - 1
        elif last:
            start, end = max(size - int(last), 0), size - 1
        else:
            start, end = 0, -1
        if start > end:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        handle = open(path, "rb")  # noqa: SIM115 - closed by the base class after copyfile
        handle.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self._range = (start, end)
        return handle

    def end_headers(self) -> None:
        self.send_header("Accept-Ranges", "bytes")  # what makes uv ask for a wheel's metadata alone
        super().end_headers()

    def copyfile(self, source: BinaryIO, outputfile: BinaryIO) -> None:  # type: ignore[override]
        if self._range is None:
            shutil.copyfileobj(source, outputfile)
            return
        left = self._range[1] - self._range[0] + 1
        while left > 0:
            chunk = source.read(min(left, 1 << 16))
            if not chunk:
                break
            outputfile.write(chunk)
            left -= len(chunk)


class WheelhouseServer(http.server.ThreadingHTTPServer):
    request_queue_size = _LISTEN_QUEUE
    daemon_threads = True  # a runner that stops mid-download does not keep the server from stopping


def open_server(directory: Path, bind: str, port: int, rerun: "Rerun") -> WheelhouseServer:
    """A server for the wheelhouse in `directory`, listening (not yet serving) on bind:port.

    Refused with one line: a folder that is not a wheelhouse, a port already in use, an
    address not this machine's."""
    if not (directory / WHEELHOUSE_LOCK).is_file():
        raise BadInput(f"{directory} is not a wheelhouse (it has no {WHEELHOUSE_LOCK})",
                       fix=f"fill it from a lock, then serve it: {rerun.with_option('--lock', 'FILE')}")
    try:
        return WheelhouseServer((bind, port), partial(_Handler, directory=str(directory)))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise BadInput(f"port {port} on {bind} is already in use",
                           fix=f"serve on another port: {rerun.with_option('--port', str(port + 1))}") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise BadInput(f"--bind {bind} is not an address of this machine",
                           fix=f"use one of its addresses, or all of them: {rerun.with_option('--bind', '0.0.0.0')}") \
                from None
        raise
