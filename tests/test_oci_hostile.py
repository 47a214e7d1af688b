"""A registry that lies, as a hostile peer runs it: a manifest that never ends, a blob that runs
past its size, redirects to another host or off http, a token service that redirects, a host it
redirects to asking for credentials, an upload sent elsewhere, a credential helper that hangs or
prints garbage. Each is one RegistryError naming what happened; the credentials kept for the
registry reach no other host; nothing is read without a bound. Servers on 127.0.0.1 and
127.0.0.2 (both loopback): nothing here reaches beyond this machine."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from support.tls import local_authority

from jetson_install.base.errors import BlobMismatch, RegistryRefused, RegistryUnreachable
from jetson_install.base.oci_ref import Reference, parse_reference
from jetson_install.tools import oci_credentials
from jetson_install.tools.oci import Registry

TOKEN = "s3cret-token-never-elsewhere"
DIGEST = "sha256:" + hashlib.sha256(b"the real wheel").hexdigest()
Route = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _any(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        length = int(self.headers.get("Content-Length", "0") or 0)
        if length:
            self.rfile.read(length)
        route = next((route for prefix, route in self.server.routes.items() if self.path.startswith(prefix)), None)
        if route is None:
            self.reply(200 if self.path == "/v2/" else 404)
        else:
            route(self)

    do_GET = do_HEAD = do_POST = do_PUT = _any

    def reply(self, code: int, body: bytes = b"", headers: Optional[Dict[str, str]] = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def endless(self, code: int = 200, piece: bytes = b"x" * (1 << 16)) -> None:
        """An answer without a length that never ends (until the client stops reading)."""
        self.send_response(code)
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            while True:
                self.wfile.write(piece)
                self.server.sent += len(piece)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str, context: Optional[ssl.SSLContext] = None) -> None:
        super().__init__((address, 0), _Handler)
        self.address = address
        if context is not None:
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.routes: Dict[str, Route] = {}
        self.seen: List[Tuple[str, str, str]] = []
        self.sent = 0
        self.scheme = "https" if context is not None else "http"
        # polled every 0.05 s: shutdown() waits out a poll, the default 0.5 s at each test's end
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def root(self) -> str:
        return f"{self.scheme}://{self.address}:{self.server_address[1]}"

    @property
    def host(self) -> str:
        return f"{self.address}:{self.server_address[1]}"


def _pair(context: Optional[ssl.SSLContext] = None) -> Iterator[Tuple[_Server, _Server]]:
    here, there = _Server("127.0.0.1", context), _Server("127.0.0.2", context)
    try:
        yield here, there
    finally:
        for server in (here, there):
            server.shutdown()
            server.server_close()


@pytest.fixture
def servers() -> Iterator[Tuple[_Server, _Server]]:
    """The registry on 127.0.0.1 and another host on 127.0.0.2, both plain http."""
    yield from _pair()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own, whose ~/.netrc holds the registry's (127.0.0.1's) credentials."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    (folder / ".netrc").write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n")
    (folder / ".netrc").chmod(0o600)
    return folder


def _client(server: _Server, reference: str = "fleet/jp6:v1") -> Tuple[Registry, Reference]:
    parsed = parse_reference(f"oci://{server.host}/{reference}", "--wheelhouse")
    return Registry(parsed, False), parsed


def _no_secret_reached(server: _Server) -> None:
    secret = base64.b64encode(f"fleet:{TOKEN}".encode()).decode()
    assert all(secret not in authorization and TOKEN not in path for _, path, authorization in server.seen), server.seen


def test_a_manifest_that_never_ends_is_refused_after_4_mib(servers: Tuple[_Server, _Server], home: Path) -> None:
    registry, _ = servers
    registry.routes["/v2/fleet/jp6/manifests/"] = lambda handler: handler.endless(piece=b" " * (1 << 16))
    client, reference = _client(registry)
    with pytest.raises(RegistryUnreachable) as refused:
        client.manifest(reference)
    assert "a manifest larger than any a registry's clients read (4 MiB): refused" in refused.value.message


def test_an_error_answer_that_never_ends_is_read_no_further_than_its_start(
        servers: Tuple[_Server, _Server], home: Path, tmp_path: Path) -> None:
    registry, _ = servers
    registry.routes["/v2/fleet/jp6/blobs/"] = lambda handler: handler.endless(500, b"{" * (1 << 16))
    client, reference = _client(registry)
    with pytest.raises(RegistryUnreachable) as refused:
        client.fetch_blob(reference, DIGEST, tmp_path / "wheel.whl")
    assert refused.value.message.endswith(f"the registry answered HTTP 500 for the blob {DIGEST}")
    assert not (tmp_path / "wheel.whl").exists()


@pytest.mark.parametrize("announced", [False, True])
def test_a_blob_running_past_its_size_is_refused_as_it_arrives_and_nothing_of_it_kept(
        servers: Tuple[_Server, _Server], home: Path, tmp_path: Path, announced: bool) -> None:
    registry, _ = servers
    if announced:  # a length past the manifest's size: refused before a byte is written
        registry.routes["/v2/fleet/jp6/blobs/"] = lambda handler: handler.reply(200, b"y" * 4096)
    else:
        registry.routes["/v2/fleet/jp6/blobs/"] = lambda handler: handler.endless()
    client, reference = _client(registry)
    target = tmp_path / "wheel.whl"
    with pytest.raises(BlobMismatch) as refused:
        client.fetch_blob(reference, DIGEST, target, size=1000)
    assert refused.value.message.endswith(f"the blob {DIGEST} runs past its 1000 bytes: refused")
    assert not target.exists()


@pytest.mark.parametrize(("where", "said"), [
    ("http://127.0.0.2:{port}/blob", "redirected to another host, http://127.0.0.2:{port}/blob, which is not followed"),
    ("file:///etc/passwd", "redirected off http, file:///etc/passwd, which is not followed"),
])
def test_a_redirect_off_a_plain_http_registry_is_not_followed(
        servers: Tuple[_Server, _Server], home: Path, tmp_path: Path, where: str, said: str) -> None:
    registry, other = servers
    port = other.server_address[1]
    registry.routes["/v2/fleet/jp6/blobs/"] = lambda handler: handler.reply(307, headers={
        "Location": where.format(port=port)})
    client, reference = _client(registry)
    with pytest.raises(RegistryUnreachable) as refused:
        client.fetch_blob(reference, DIGEST, tmp_path / "wheel.whl")
    assert said.format(port=port) in refused.value.message
    assert not other.seen


def test_a_registry_that_redirects_without_end_is_refused_after_its_tenth_redirect(
        servers: Tuple[_Server, _Server], home: Path, tmp_path: Path) -> None:
    registry, _ = servers
    registry.routes["/v2/fleet/jp6/blobs/"] = lambda handler: handler.reply(307, headers={
        "Location": f"/v2/fleet/jp6/blobs/{DIGEST}?hop={len(handler.server.seen)}"})
    client, reference = _client(registry)
    with pytest.raises(RegistryUnreachable) as refused:
        client.fetch_blob(reference, DIGEST, tmp_path / "wheel.whl")
    assert refused.value.message.endswith("the registry redirected more than 10 times")
    # The first request and the ten redirects followed: an eleventh is never asked for.
    assert len([path for _, path, _ in registry.seen if path.startswith("/v2/fleet/jp6/blobs/")]) == 11
    assert not (tmp_path / "wheel.whl").exists()


def _challenge(server: _Server, token_path: str = "/token") -> Route:
    def route(handler: _Handler) -> None:
        if handler.headers.get("Authorization", "").startswith("Bearer "):
            handler.reply(200, b"the real wheel")
        else:
            handler.reply(401, headers={"WWW-Authenticate": f'Bearer realm="{server.root}{token_path}",service="x"'})
    return route


def test_a_token_service_that_redirects_is_not_followed_with_the_credentials(
        servers: Tuple[_Server, _Server], home: Path, tmp_path: Path) -> None:
    registry, other = servers
    registry.routes["/v2/fleet/jp6/blobs/"] = _challenge(registry)
    registry.routes["/token"] = lambda handler: handler.reply(307, headers={"Location": f"{other.root}/token"})
    client, reference = _client(registry)
    with pytest.raises(RegistryUnreachable) as refused:
        client.fetch_blob(reference, DIGEST, tmp_path / "wheel.whl")
    assert f"redirected to {other.root}/token, which is not followed" in refused.value.message
    assert not other.seen


def test_an_upload_sent_to_another_host_carries_none_of_the_registrys_credentials(
        servers: Tuple[_Server, _Server], home: Path) -> None:
    registry, other = servers

    def basic(handler: _Handler) -> None:
        if not handler.headers.get("Authorization", "").startswith("Basic "):
            handler.reply(401, headers={"WWW-Authenticate": 'Basic realm="stub"'})
        elif handler.command == "POST":
            handler.reply(202, headers={"Location": f"{other.root}/upload/1"})
        else:
            handler.reply(404)

    registry.routes["/v2/fleet/jp6/blobs/"] = basic
    other.routes["/upload/"] = lambda handler: handler.reply(401, headers={"WWW-Authenticate": 'Basic realm="x"'})
    client, reference = _client(registry)
    with pytest.raises(RegistryRefused) as refused:
        client.push_blob(reference, DIGEST, 14, b"the real wheel")
    assert f"{other.root}/upload/1, where the registry redirected, asked for credentials: not sent" in \
        refused.value.message
    assert [method for method, _, _ in other.seen] == ["PUT"]
    _no_secret_reached(other)


@pytest.fixture
def tls_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[_Server, _Server]]:
    """The registry on https://127.0.0.1 and storage on https://127.0.0.2, under an authority the client trusts."""
    authority = local_authority(tmp_path, ["127.0.0.1", "127.0.0.2"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(authority.cert), str(authority.key))
    for name in ("CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(authority.ca))
    yield from _pair(context)


@pytest.mark.slow  # openssl makes an authority and a certificate
def test_storage_an_https_registry_redirects_to_gets_no_credentials_and_its_challenge_none(
        tls_servers: Tuple[_Server, _Server], home: Path, tmp_path: Path) -> None:
    registry, storage = tls_servers
    (home / ".netrc").write_text(f"machine 127.0.0.1 login fleet password {TOKEN}\n"
                                 f"machine 127.0.0.2 login other password {TOKEN}-2\n")
    registry.routes["/token"] = lambda handler: handler.reply(200, json.dumps({"token": "registry-token"}).encode())

    def redirect(handler: _Handler) -> None:
        if not handler.headers.get("Authorization", "").startswith("Bearer "):
            _challenge(registry)(handler)
        else:
            handler.reply(307, headers={"Location": f"{storage.root}/blob{handler.path[-3:]}"})

    registry.routes["/v2/fleet/jp6/blobs/"] = redirect
    # Storage as a CDN serves it: over https on another host, the blob checked by its digest.
    storage.routes["/blob"] = lambda handler: handler.reply(200, b"the real wheel")
    client, reference = _client(registry)
    assert client.fetch_blob(reference, DIGEST, tmp_path / "wheel.whl") == len(b"the real wheel")
    assert [authorization for _, _, authorization in storage.seen] == [""]
    # Storage that asks for credentials names a token service of its own: none are sent there.
    storage.routes["/blob"] = _challenge(storage)
    with pytest.raises(RegistryRefused) as refused:
        client.fetch_blob(reference, DIGEST, tmp_path / "again.whl")
    assert f"{storage.root}/blob{DIGEST[-3:]}, where the registry redirected, asked for credentials: not sent" in \
        refused.value.message
    assert not any(path.startswith("/token") for _, path, _ in storage.seen)
    _no_secret_reached(storage)
    assert all(authorization == "" for _, _, authorization in storage.seen)


@pytest.mark.parametrize(("script", "said"), [
    ("#!/bin/sh\nexec sleep 60\n", "gave no answer for {host} within 1 s"),
    (f"#!/bin/sh\necho 'not json {TOKEN}'\n", "answered for {host} with something other than its JSON"),
])
def test_a_credential_helper_that_hangs_or_prints_garbage_is_one_line_never_its_output(
        servers: Tuple[_Server, _Server], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        script: str, said: str) -> None:
    registry, _ = servers
    registry.routes["/v2/fleet/jp6/manifests/"] = _challenge(registry)
    helpers = tmp_path / "bin"
    helpers.mkdir()
    (helpers / "docker-credential-odd").write_text(script)
    (helpers / "docker-credential-odd").chmod(0o755)
    monkeypatch.setenv("PATH", f"{helpers}:{os.environ['PATH']}")
    monkeypatch.setattr(oci_credentials, "_HELPER_TIMEOUT", 1.0)
    (home / ".docker").mkdir()
    (home / ".docker" / "config.json").write_text(json.dumps({"credHelpers": {registry.host: "odd"}}))
    client, reference = _client(registry)
    with pytest.raises(RegistryRefused) as refused:
        client.manifest(reference)
    assert refused.value.message.startswith("the credential helper docker-credential-odd ")
    assert said.format(host=registry.host) in refused.value.message
    assert refused.value.fix == f"check it by hand: echo {registry.host} | docker-credential-odd get"
    assert TOKEN not in refused.value.message + (refused.value.fix or "")
    assert not any(path.startswith("/token") for _, path, _ in registry.seen)


def test_a_docker_config_that_is_a_fifo_is_passed_over(servers: Tuple[_Server, _Server], home: Path) -> None:
    registry, _ = servers
    (home / ".docker").mkdir()
    os.mkfifo(home / ".docker" / "config.json")
    registry.routes["/v2/fleet/jp6/blobs/"] = lambda handler: handler.reply(200, b"the real wheel", {})
    client, reference = _client(registry)
    assert client.blob_size(reference, DIGEST) == len(b"the real wheel")
    assert oci_credentials.credentials(reference) == ("fleet", TOKEN)  # ~/.netrc's, read on
