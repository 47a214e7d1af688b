"""An OCI registry on 127.0.0.1 for the fast tier: the distribution spec's pull and push
(https://github.com/opencontainers/distribution-spec/blob/main/spec.md: /v2/, manifests by tag
or digest, blobs by digest, a monolithic upload) with the token flow of
https://distribution.github.io/distribution/spec/auth/token/ or basic authentication, in memory.

The lanes run the real one (Debian's docker-registry, tests/test_registry_lane.py); this one
has the switches a test needs: `users` ({user: password}) wanted for a push, or for every
request with `private`; `auth` "bearer" (a token service at /token) or "basic"; `corrupt`
(digest -> other bytes served under it); and `requests`, every request (method, path, the
Authorization scheme it carried, body bytes sent).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

__all__ = ["StubRegistry"]

_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class StubRegistry:
    def __init__(self, auth: str = "bearer", users: Optional[Dict[str, str]] = None, private: bool = False) -> None:
        self.auth = auth
        self.users = dict(users or {})
        self.private = private
        self.blobs: Dict[str, Dict[str, bytes]] = {}  # repository -> digest -> bytes
        self.manifests: Dict[str, Dict[str, bytes]] = {}  # repository -> tag or digest -> bytes
        self.corrupt: Dict[str, bytes] = {}
        self.identity_tokens: Dict[str, str] = {}  # user -> refresh token the token service takes by POST
        self.requests: List[Tuple[str, str, str, int]] = []
        self._uploads: Dict[str, str] = {}  # upload id -> repository
        self._tokens: Dict[str, Tuple[str, str]] = {}  # token -> (user, scope)
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None

    # -- the test's side ----------------------------------------------------------------------
    def start(self) -> "StubRegistry":
        registry = self

        class Handler(_Handler):
            owner = registry

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # polled every 0.05 s: shutdown() waits out a poll, the default 0.5 s at each test's end
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.server_address[1]}"

    def reference(self, repository: str, tag: str = "") -> str:
        return f"oci://{self.host}/{repository}" + (f":{tag}" if tag else "")

    def blob_gets(self) -> List[str]:
        """The digests of the blobs served (GET), one per request."""
        return [path.rsplit("/", 1)[1] for method, path, _, _ in self.requests if method == "GET" and "/blobs/" in path]

    # -- what the handler asks ------------------------------------------------------------------
    def allowed(self, authorization: str, push: bool, repository: str) -> bool:
        if not (push or self.private):
            return True
        scheme, _, value = authorization.partition(" ")
        if self.auth == "basic" and scheme == "Basic":
            user, _, password = base64.b64decode(value).decode().partition(":")
            return self.users.get(user) == password
        if self.auth == "bearer" and scheme == "Bearer" and value in self._tokens:
            user, scope = self._tokens[value]
            return scope.startswith(f"repository:{repository}:") and (not push or "push" in scope) and bool(user)
        return False

    def token(self, authorization: str, scope: str) -> Optional[str]:
        """A token for `scope`: any scope for a user the service knows; pull alone anonymously, unless private."""
        user = ""
        if authorization.startswith("Basic "):
            name, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            if self.users.get(name) != password:
                return None
            user = name
        elif self.private or "push" in scope:
            return None
        token = secrets.token_hex(16)
        with self._lock:
            self._tokens[token] = (user or ("anonymous" if not self.private else ""), scope)
        return token


class _Handler(BaseHTTPRequestHandler):
    owner: StubRegistry
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", headers: Optional[Dict[str, str]] = None, head: bool = False) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)
        with self.owner._lock:
            self.owner.requests.append((self.command, urlsplit(self.path).path,
                                        self.headers.get("Authorization", "").split(" ")[0], 0 if head else len(body)))

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))

    def _challenge(self, repository: str, push: bool, head: bool = False) -> None:
        if self.owner.auth == "basic":
            value = 'Basic realm="stub"'
        else:
            scope = f"repository:{repository}:{'pull,push' if push else 'pull'}"
            value = f'Bearer realm="http://{self.owner.host}/token",service="stub",scope="{scope}"'
        self._send(401, json.dumps({"errors": [{"code": "UNAUTHORIZED"}]}).encode(), {"WWW-Authenticate": value}, head)

    def _route(self) -> Optional[Tuple[str, str, str]]:
        match = re.fullmatch(r"/v2/(.+)/(blobs/uploads|blobs|manifests)/?(.*)", urlsplit(self.path).path)
        return (match.group(1), match.group(2), match.group(3)) if match else None

    def do_GET(self) -> None:
        self._pull(head=False)

    def do_HEAD(self) -> None:
        self._pull(head=True)

    def _pull(self, head: bool) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/token":
            query = parse_qs(parts.query)
            token = self.owner.token(self.headers.get("Authorization", ""), query.get("scope", [""])[0])
            if token is None:
                self._send(401, b"{}")
            else:
                self._send(200, json.dumps({"token": token}).encode(), {"Content-Type": "application/json"})
            return
        if parts.path == "/v2/":
            self._send(200, b"{}")
            return
        route = self._route()
        if route is None:
            self._send(404)
            return
        repository, kind, reference = route
        if not self.owner.allowed(self.headers.get("Authorization", ""), False, repository):
            self._challenge(repository, False, head)
            return
        if kind == "manifests":
            body = self.owner.manifests.get(repository, {}).get(reference)
            if body is None:
                self._send(404, json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN"}]}).encode(), head=head)
                return
            self._send(200, body, {"Content-Type": _MANIFEST_TYPE,
                                   "Docker-Content-Digest": "sha256:" + hashlib.sha256(body).hexdigest()}, head)
            return
        blob = self.owner.blobs.get(repository, {}).get(reference)
        if blob is None:
            self._send(404, json.dumps({"errors": [{"code": "BLOB_UNKNOWN"}]}).encode(), head=head)
            return
        self._send(200, self.owner.corrupt.get(reference, blob), {"Content-Type": "application/octet-stream"}, head)

    def do_POST(self) -> None:
        route = self._route()
        body = self._body()
        if urlsplit(self.path).path == "/token":
            form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
            user = next((user for user, token in self.owner.identity_tokens.items()
                         if form.get("grant_type") == "refresh_token" and form.get("refresh_token") == token), None)
            if user is None:
                self._send(401, b"{}")
                return
            token = secrets.token_hex(16)
            with self.owner._lock:
                self.owner._tokens[token] = (user, form.get("scope", ""))
            self._send(200, json.dumps({"access_token": token}).encode(), {"Content-Type": "application/json"})
            return
        if route is None or route[1] != "blobs/uploads":
            self._send(404)
            return
        repository = route[0]
        if not self.owner.allowed(self.headers.get("Authorization", ""), True, repository):
            self._challenge(repository, True)
            return
        upload = str(uuid.uuid4())
        self.owner._uploads[upload] = repository
        self._send(202, headers={"Location": f"/v2/{repository}/blobs/uploads/{upload}?_state=x"})

    def do_PUT(self) -> None:
        route = self._route()
        body = self._body()
        if route is None:
            self._send(404)
            return
        repository, kind, reference = route
        if not self.owner.allowed(self.headers.get("Authorization", ""), True, repository):
            self._challenge(repository, True)
            return
        if kind == "manifests":
            digest = "sha256:" + hashlib.sha256(body).hexdigest()
            stored = self.owner.manifests.setdefault(repository, {})
            stored[reference] = stored[digest] = body
            self._send(201, headers={"Docker-Content-Digest": digest, "Location": f"/v2/{repository}/manifests/{digest}"})
            return
        digest = parse_qs(urlsplit(self.path).query).get("digest", [""])[0]
        if kind != "blobs/uploads" or self.owner._uploads.get(reference) != repository:
            self._send(404, json.dumps({"errors": [{"code": "BLOB_UPLOAD_UNKNOWN"}]}).encode())
            return
        if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
            self._send(400, json.dumps({"errors": [{"code": "DIGEST_INVALID"}]}).encode())
            return
        self.owner.blobs.setdefault(repository, {})[digest] = body
        self._send(201, headers={"Location": f"/v2/{repository}/blobs/{digest}", "Docker-Content-Digest": digest})
