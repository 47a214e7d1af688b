"""The engines a fleet already runs, started by a lane on loopback: Debian's nginx serving a
wheelhouse with the server block docs/fleets.md shows, and Debian's docker-registry (the CNCF
distribution registry), plain, with htpasswd authentication, or as a pull-through cache of
another. tests/setup.d/35-fleet-engines installs them; each server here runs in the test's
temporary folder, on a port of its own, and is stopped by the test that started it.

Both keep a log of what they served, which a test reads: nginx's access log (the bytes of each
response) and the registry's JSON log (`http.response.written` for each request).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from .doc_blocks import blocks
from .lanes import lane_unavailable

__all__ = ["NGINX", "REGISTRY", "free_port", "documented_server_block", "nginx_server_block", "Nginx", "Registry"]

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
REGISTRY = shutil.which("docker-registry")
_READY_SECONDS = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: "subprocess.Popen[bytes]", log: Path) -> None:
    """Until the server accepts on `port` (a state, not a sleep); its log where it exits first."""
    deadline = time.monotonic() + _READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError(f"the server did not listen on {port} within {_READY_SECONDS} s: {log.read_text()[-2000:]}")


def documented_server_block() -> str:
    """The nginx block of docs/fleets.md, as written."""
    (found,) = [b for b in blocks() if b.file == "docs/fleets.md" and b.language == "nginx"]
    return found.text


def nginx_server_block(root: Path, port: int) -> str:
    """The server block of docs/fleets.md as written, for `root` on 127.0.0.1:`port`."""
    text = documented_server_block()
    assert "listen 8000;" in text and "root /srv/wheelhouse;" in text, text
    return text.replace("listen 8000;", f"listen 127.0.0.1:{port};").replace("root /srv/wheelhouse;", f"root {root};")


class Nginx:
    """nginx serving `root` with the documented server block, on a port of its own."""

    def __init__(self, root: Path, folder: Path, site: Optional[Path] = None, port: Optional[int] = None,
                 lane: str = "fleet") -> None:
        """With `site` (a server block a role wrote, listening on `port`), that file instead of the documented block."""
        if NGINX is None:
            lane_unavailable(lane, "nginx is not installed: run tests/setup (tests/setup.d/35-fleet-engines)")
        self.root, self.folder, self.port = root, folder, port or free_port()
        self.access_log = folder / "access.log"
        folder.mkdir(parents=True, exist_ok=True)
        # As root, nginx's workers would switch to nobody, who cannot enter the test's 0700 folders.
        user = "user root;\n" if os.geteuid() == 0 else ""
        temp = "".join(f"{name}_temp_path {folder / name};\n"
                       for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (folder / "nginx.conf").write_text(
            f"{user}worker_processes 2;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'};\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            "log_format sent '$request_method $uri $status $body_bytes_sent';\n"
            f"access_log {self.access_log} sent;\n{temp}"
            + (f"include {site};\n" if site is not None else nginx_server_block(root, self.port)) + "\n}\n")
        with open(folder / "stderr.log", "wb") as stderr:  # the child keeps its own descriptor
            self.process = subprocess.Popen([NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf"), "-g",
                                             "daemon off;"], stdout=subprocess.DEVNULL, stderr=stderr)
        _wait_for_port(self.port, self.process, folder / "stderr.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def served(self) -> List[Dict[str, str]]:
        """Each request nginx logged: method, path, status and body bytes."""
        lines = self.access_log.read_text().splitlines() if self.access_log.exists() else []
        return [dict(zip(("method", "path", "status", "bytes"), line.split(" "))) for line in lines]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class Registry:
    """docker-registry on a port of its own, storing in `folder`: plain, with `htpasswd` (a
    file `htpasswd -B` wrote), or a pull-through cache of `proxy` (another registry's URL)."""

    def __init__(self, folder: Path, htpasswd: Optional[Path] = None, proxy: Optional[str] = None,
                 lane: str = "oci-registry") -> None:
        if REGISTRY is None:
            lane_unavailable(lane, "docker-registry is not installed: run tests/setup (tests/setup.d/35-fleet-engines)")
        self.folder, self.port = folder, free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "registry.log"
        # https://distribution.github.io/distribution/about/configuration/ (storage, http, auth, proxy).
        config = ["version: 0.1", "log:", "  level: info", "  formatter: json", "  accesslog:", "    disabled: true",
                  "storage:", "  filesystem:", f"    rootdirectory: {folder / 'data'}", "  delete:", "    enabled: true",
                  "http:", f"  addr: 127.0.0.1:{self.port}"]
        if htpasswd is not None:
            config += ["auth:", "  htpasswd:", "    realm: fleet", f"    path: {htpasswd}"]
        if proxy is not None:
            config += ["proxy:", f"  remoteurl: {proxy}"]
        (folder / "config.yml").write_text("\n".join(config) + "\n")
        with open(self.log, "wb") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen([REGISTRY, "serve", str(folder / "config.yml")], stdout=log,
                                            stderr=subprocess.STDOUT)
        _wait_for_port(self.port, self.process, self.log)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def reference(self, repository: str, tag: str = "") -> str:
        return f"oci://{self.host}/{repository}" + (f":{tag}" if tag else "")

    def blob_bytes_served(self) -> Dict[str, List[int]]:
        """digest -> the bytes of each blob GET it answered (from its log)."""
        served: Dict[str, List[int]] = {}
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line.strip("\x00"))
            except ValueError:
                continue
            uri = str(entry.get("http.request.uri", ""))
            if entry.get("msg") == "response completed" and entry.get("http.request.method") == "GET" \
                    and "/blobs/sha256:" in uri:
                served.setdefault(uri.rsplit("/", 1)[1], []).append(int(entry.get("http.response.written", 0)))
        return served

    def blob_file(self, digest: str) -> Path:
        """Where the filesystem driver keeps a blob's bytes (its layout: docker/registry/v2/blobs/sha256/XX/HEX/data)."""
        hexdigest = digest.split(":", 1)[1]
        return self.folder / "data" / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexdigest[:2] / hexdigest / "data"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
