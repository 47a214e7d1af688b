"""The one module that talks to OCI registries: a manifest, blobs by their digest, and the
registry's token flow, on requests (the distribution spec's pull and push,
https://github.com/opencontainers/distribution-spec/blob/main/spec.md).

A registry is a store addressed by sha256, and every file this tool installs is already known
by its sha256 (a lock's entries, the catalog's builds): a blob is asked for by that digest and
its bytes are checked against it as they arrive, so a registry, a tag or a manifest never
decides a hash. What a wheelhouse's manifest holds is base/oci_manifest.py's; a registry read
as a mirror of the recorded builds, tools/oci_mirror.py's.

Credentials are the registry clients' own (tools/oci_credentials.py finds them), read only when
a registry asks for them, sent only to that registry or the token service it names, over https
(or to loopback), and never logged or shown.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union
from urllib.parse import urljoin, urlsplit

import requests
import requests.auth

from jetson_install.base.errors import BlobMismatch, RegistryError, RegistryRefused, RegistryUnreachable
from jetson_install.base.hosts import is_loopback_host
from jetson_install.base.oci_manifest import EMPTY, MANIFEST_TYPE, TITLE, Layer, Manifest, sha256_digest
from jetson_install.base.oci_ref import DIGEST, Reference
from jetson_install.base.redirects import MAX_REDIRECTS, refused_redirect
from jetson_install.tools.oci_credentials import CREDENTIALS_FIX, IDENTITY_TOKEN_USER, Secret, credentials

__all__ = ["Registry", "registry_for"]

#: Seconds to open a connection, and to wait for each read: a registry that is down costs seconds, never a hang.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0  # a blob may be torch (0.5-2 GB), and a registry may assemble an upload before it answers

_CHUNK = 1 << 20
# The most of a manifest read: what registries accept and their clients read (the distribution
# spec: "Registries SHOULD accept manifests of at least 4 megabytes"; containerd reads no more),
# https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pushing-manifests
_MANIFEST_LIMIT = 4 << 20
# The most of any other answer read whole (a token, an error's JSON): each is a few hundred bytes.
_ANSWER_LIMIT = 64 << 10


def registry_for(reference: Reference, plain_http_allowed: bool) -> "Registry":
    """The one Registry of this run for the reference's host: its scheme found once, its
    connections and tokens kept for every blob and repository the run asks of it."""
    return _registry(reference.host, plain_http_allowed)


@functools.lru_cache(maxsize=None)  # thread-safe: at worst two threads each make one, and one is kept
def _registry(host: str, plain_http_allowed: bool) -> "Registry":
    return Registry(Reference(host, "_"), plain_http_allowed)


# -- the token flow -----------------------------------------------------------------------------

_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def _challenge(header: str) -> Tuple[str, Dict[str, str]]:
    """`WWW-Authenticate: Bearer realm="...",service="...",scope="..."` -> ("bearer", {realm, service, scope})."""
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), {key.lower(): value for key, value in _CHALLENGE.findall(rest)}


class _OwnAuthorization(requests.auth.AuthBase):
    """Leaves a request as it is: the Authorization header, if any, is the token flow's."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        return request


def _too_long(reference: Reference, digest: str, size: int) -> BlobMismatch:
    return BlobMismatch(f"{reference}: the blob {digest} runs past its {size} bytes: refused",
                        fix="the registry's store is damaged or altered: push the wheelhouse again, or use another "
                            "registry")


class Registry:
    """The registry of `reference`'s host: one session, its scheme found once, and a token
    per repository scope. http is used only where `plain_http_allowed` (a loopback host, or
    --allow-insecure-index), and only after https did not answer there, as docker does for
    an insecure registry; credentials never travel over plain http beyond loopback."""

    def __init__(self, reference: Reference, plain_http_allowed: bool) -> None:
        self.host = reference.host
        self._reference = reference
        self._loopback = is_loopback_host(reference.hostname)
        self._plain_http_allowed = plain_http_allowed or self._loopback
        self._session = requests.Session()
        # An auth of its own keeps requests from adding ~/.netrc's line to every request (the
        # token flow decides where credentials go), while the proxies of the environment still apply.
        self._session.auth = _OwnAuthorization()
        self._base: Optional[str] = None
        self._authorization: Dict[str, str] = {}  # scope -> Authorization header
        self._secret: Optional[Secret] = None
        self._secret_read = False
        self._lock = threading.Lock()

    # -- pull ------------------------------------------------------------------------------

    def manifest(self, reference: Reference) -> Manifest:
        """The manifest `reference` names (by digest where it gives one: then its bytes are
        checked against it), with the layers' names and digests."""
        wanted = reference.manifest_reference
        assert wanted is not None
        response = self._request("GET", reference, f"manifests/{wanted}", headers={"Accept": MANIFEST_TYPE})
        with response:
            if response.status_code == 404:
                raise RegistryUnreachable(f"{reference}: the registry has no such manifest (HTTP 404)",
                                          fix=f"push the wheelhouse there first (jetson-install wheelhouse DIR --push "
                                              f"{reference}), or name the tag or digest it printed")
            self._answered(response, reference, "the manifest")
            body = _read(response, reference, "the manifest", _MANIFEST_LIMIT)
        if len(body) > _MANIFEST_LIMIT:
            raise RegistryUnreachable(f"{reference}: the registry served a manifest larger than any a registry's "
                                      f"clients read ({_MANIFEST_LIMIT >> 20} MiB): refused",
                                      fix=f"push the wheelhouse there again: jetson-install wheelhouse DIR --push "
                                          f"{reference}")
        digest = sha256_digest(body)
        if reference.digest and digest != reference.digest:
            raise BlobMismatch(f"{reference}: the registry served a manifest whose sha256 is {digest}: refused",
                               fix="the registry's store is damaged or altered: push the wheelhouse again, or use "
                                   "another registry")
        try:
            data = json.loads(body)
            layers = tuple(Layer(str((item.get("annotations") or {}).get(TITLE, "")), str(item["digest"]),
                                 int(item["size"])) for item in data.get("layers", []))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RegistryUnreachable(f"{reference}: the manifest is not an OCI image manifest",
                                      fix=f"push the wheelhouse there again: jetson-install wheelhouse DIR --push "
                                          f"{reference}") from None
        artifact = data.get("artifactType")
        return Manifest(digest, layers, artifact if isinstance(artifact, str) else None)

    def blob_size(self, reference: Reference, digest: str) -> Optional[int]:
        """The size of the blob `digest` in the repository, or None where it has none."""
        response = self._request("HEAD", reference, f"blobs/{digest}")
        with response:
            if response.status_code == 404:
                return None
            self._answered(response, reference, f"the blob {digest}")
        length = response.headers.get("Content-Length", "")
        return int(length) if length.isdigit() else -1

    def fetch_blob(self, reference: Reference, digest: str, destination: Path,
                   progress: Optional[Callable[[int], None]] = None, size: Optional[int] = None) -> int:
        """Write the blob `digest` to `destination`, checking its sha256 as it arrives; a blob
        with other bytes is removed and refused (BlobMismatch), and so is one that runs past
        `size` (the manifest's), as soon as it does. Returns its size."""
        if not DIGEST.fullmatch(digest):
            raise RegistryError(f"{digest!r} is not a sha256 digest")
        response = self._request("GET", reference, f"blobs/{digest}")
        with response:
            if response.status_code == 404:
                raise RegistryUnreachable(f"{reference}: the registry has no blob {digest} (HTTP 404)",
                                          fix=f"push the wheelhouse there again: jetson-install wheelhouse DIR --push "
                                              f"{reference}")
            self._answered(response, reference, f"the blob {digest}")
            announced = response.headers.get("Content-Length", "")
            if size is not None and announced.isdigit() and int(announced) > size:
                raise _too_long(reference, digest, size)
            hasher = hashlib.sha256()
            got_size = 0
            try:
                with destination.open("wb") as stream:
                    for chunk in response.iter_content(chunk_size=_CHUNK):
                        got_size += len(chunk)
                        if size is not None and got_size > size:
                            raise _too_long(reference, digest, size)
                        hasher.update(chunk)
                        stream.write(chunk)
                        if progress is not None:
                            progress(len(chunk))
            except requests.RequestException as exc:
                destination.unlink(missing_ok=True)
                raise RegistryUnreachable(f"{reference}: the blob {digest} was cut short ({type(exc).__name__})",
                                          fix="check that the registry answers, then run the command again") from None
            except BaseException:
                destination.unlink(missing_ok=True)
                raise
        got = "sha256:" + hasher.hexdigest()
        if got != digest:
            destination.unlink(missing_ok=True)
            raise BlobMismatch(f"{reference}: the blob {digest} arrived with other bytes ({got_size} bytes, {got}): "
                               "refused",
                               fix="the registry's store is damaged or altered: push the wheelhouse again, or use "
                                   "another registry")
        return got_size

    def blob_bytes(self, reference: Reference, digest: str, limit: int) -> bytes:
        """A small blob (a wheelhouse's lock), checked against its digest, of at most `limit` bytes."""
        response = self._request("GET", reference, f"blobs/{digest}")
        with response:
            self._answered(response, reference, f"the blob {digest}")
            data = _read(response, reference, f"the blob {digest}", limit)
        if len(data) > limit or sha256_digest(data) != digest:
            raise BlobMismatch(f"{reference}: the blob {digest} arrived with other bytes: refused",
                               fix="the registry's store is damaged or altered: push the wheelhouse again, or use "
                                   "another registry")
        return data

    # -- push ------------------------------------------------------------------------------

    def push_blob(self, reference: Reference, digest: str, size: int, content: Union[bytes, Path]) -> bool:
        """Put one blob in the repository, monolithically (POST, then PUT with its digest);
        False where the registry has it already."""
        if self.blob_size(reference, digest) is not None:
            return False
        started = self._request("POST", reference, "blobs/uploads/", push=True, headers={"Content-Length": "0"})
        with started:
            self._answered(started, reference, "a blob upload", expected=(202,))
        location = started.headers.get("Location")
        if not location:
            raise RegistryUnreachable(f"{reference}: the registry started an upload without a Location",
                                      fix="use a registry that follows the distribution spec")
        url = urljoin(self._root(), location)
        url += ("&" if "?" in url else "?") + f"digest={digest}"
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        if isinstance(content, Path):
            with content.open("rb") as stream:  # a file object: requests streams it, with its Content-Length
                done = self._send("PUT", reference, url, push=True, data=stream, headers=headers)
        else:
            done = self._send("PUT", reference, url, push=True, data=content, headers=headers)
        with done:
            self._answered(done, reference, f"the blob {digest}", expected=(201,))
        return True

    def push_manifest(self, reference: Reference, body: bytes) -> str:
        """Put a manifest under `reference`'s tag; its digest (of `body`, as we sent it)."""
        assert reference.tag is not None
        response = self._request("PUT", reference, f"manifests/{reference.tag}", push=True, data=body,
                                 headers={"Content-Type": MANIFEST_TYPE})
        with response:
            self._answered(response, reference, "the manifest", expected=(201,))
        return sha256_digest(body)

    def push_empty_config(self, reference: Reference) -> None:
        self.push_blob(reference, sha256_digest(EMPTY), len(EMPTY), EMPTY)

    # -- HTTP ------------------------------------------------------------------------------

    def _root(self) -> str:
        """scheme://host: https, or http where allowed and https does not answer there (a TLS
        handshake refused, the connection refused or reset, or no answer within the connect
        timeout: a plain-http registry answers a TLS hello with an error, or with nothing)."""
        with self._lock:
            if self._base is not None:
                return self._base
            https = f"https://{self.host}"
            if not self._plain_http_allowed:
                self._base = https
                return https
            try:
                self._session.get(f"{https}/v2/", timeout=(CONNECT_TIMEOUT, CONNECT_TIMEOUT), stream=True,
                                  allow_redirects=False).close()
                self._base = https
            except requests.RequestException:
                self._base = f"http://{self.host}"
            return self._base

    def _request(self, method: str, reference: Reference, path: str, push: bool = False,
                 **kwargs: Any) -> requests.Response:
        return self._send(method, reference, f"{self._root()}/v2/{reference.repository}/{path}", push, **kwargs)

    def _send(self, method: str, reference: Reference, url: str, push: bool = False,
              **kwargs: Any) -> requests.Response:
        """One request, its body not yet read (the caller reads it, bounded, or closes it).
        Credentials go to the registry's own origin only: an upload's Location or a redirect
        elsewhere (a registry's storage on a CDN) is asked without them, and where it wants
        some, refused. A redirect is followed only where it keeps what the registry guarantees
        (base/redirects), and only for a GET or HEAD, which carry no body."""
        scope = f"repository:{reference.repository}:{'pull,push' if push else 'pull'}"
        response = self._once(method, url, scope if self._own(url) else None, kwargs)
        if response.status_code == 401 and self._own(url):
            challenge = response.headers.get("WWW-Authenticate", "")
            response.close()
            self._authorize(reference, scope, challenge)
            if not isinstance(kwargs.get("data"), (bytes, type(None))):
                # A file's body cannot be sent twice; push_blob's POST has authorized its scope before the PUT.
                raise RegistryRefused(f"{reference}: the registry asked for credentials in the middle of an upload",
                                      fix=CREDENTIALS_FIX)
            response = self._once(method, url, scope, kwargs)
        for followed in range(MAX_REDIRECTS + 1):
            if not response.is_redirect or method not in ("GET", "HEAD"):
                break
            if followed == MAX_REDIRECTS:
                response.close()
                raise RegistryUnreachable(f"{reference}: the registry redirected more than {MAX_REDIRECTS} times",
                                          fix="check the registry's configuration")
            target = urljoin(url, response.headers.get("Location", ""))
            response.close()
            refused = refused_redirect(url, target)
            if refused is not None:
                raise RegistryUnreachable(f"{reference}: the registry {refused}",
                                          fix="serve the registry's blobs from its own host, or over https")
            url = target
            response = self._once(method, url, scope if self._own(url) else None, kwargs)
        if response.status_code == 401 and not self._own(url):
            response.close()
            raise RegistryRefused(f"{reference}: {_shown(url)}, where the registry redirected, asked for credentials: "
                                  "not sent (the registry's are for the registry alone)",
                                  fix="have the registry's storage serve its blobs by signed URL, as registries on "
                                      "object stores do, or serve them from the registry's own host")
        if response.status_code in (401, 403):
            response.close()
            raise RegistryRefused(f"{reference}: the registry refused the request (HTTP {response.status_code}): "
                                  "check the credentials", fix=CREDENTIALS_FIX)
        return response

    def _own(self, url: str) -> bool:
        """Whether `url` is on the registry's own origin (scheme, host and port), where its credentials go."""
        here, there = urlsplit(self._root()), urlsplit(url)
        return (there.scheme, there.netloc) == (here.scheme, here.netloc)

    def _once(self, method: str, url: str, scope: Optional[str], kwargs: Mapping[str, Any]) -> requests.Response:
        headers = dict(kwargs.get("headers") or {})
        authorization = self._authorization.get(scope) if scope is not None else None
        if authorization is not None:
            headers["Authorization"] = authorization
        options = {key: value for key, value in kwargs.items() if key != "headers"}
        try:
            # Streamed: every answer is read bounded by its caller (a registry's answer may never end).
            return self._session.request(method, url, headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                                         allow_redirects=False, stream=True, **options)
        except requests.RequestException as exc:
            raise RegistryUnreachable(f"the registry {self.host} did not answer ({_why(exc)})",
                                      fix="check that the registry answers from here, then run the command again") \
                from None

    def _authorize(self, reference: Reference, scope: str, challenge: str) -> None:
        """Answer the registry's challenge: a bearer token from the token service it names
        (anonymous first, where no credentials are kept for it), or basic credentials
        (https://distribution.github.io/distribution/spec/auth/token/)."""
        kind, values = _challenge(challenge)
        secret = self._credentials(reference)
        if kind == "basic":
            if secret is None:
                raise RegistryRefused(f"{reference}: the registry wants credentials, and none are kept for "
                                      f"{self.host}", fix=CREDENTIALS_FIX)
            self._check_clear(f"{self._root()}/v2/")
            user, password = secret
            self._authorization[scope] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            return
        if kind != "bearer" or "realm" not in values:
            raise RegistryRefused(f"{reference}: the registry asked for credentials in a way this client does not "
                                  f"read ({challenge[:60]!a})", fix=CREDENTIALS_FIX)
        realm = values["realm"]
        params = {"service": values.get("service", ""), "scope": scope}
        auth = None
        if secret is not None:
            self._check_clear(realm)
        try:
            if secret is not None and secret[0] == IDENTITY_TOKEN_USER:
                # An identity (refresh) token is exchanged by POST (the token spec's OAuth2 form).
                answer = self._session.post(realm, data={"grant_type": "refresh_token", "refresh_token": secret[1],
                                                         "service": params["service"], "scope": scope,
                                                         "client_id": "jetson-install"},
                                            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), allow_redirects=False,
                                            stream=True)
            else:
                auth = secret
                answer = self._session.get(realm, params=params, auth=auth, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                                           allow_redirects=False, stream=True)
        except requests.RequestException as exc:
            raise RegistryUnreachable(f"{reference}: the registry's token service {_shown(realm)} did not answer "
                                      f"({_why(exc)})", fix="check that it answers from here, then run the command "
                                                            "again") from None
        with answer:
            self._token_answer(reference, scope, realm, secret, answer)

    def _token_answer(self, reference: Reference, scope: str, realm: str, secret: Optional[Secret],
                      answer: requests.Response) -> None:
        if answer.is_redirect:
            # Not followed: the request carried the credentials, for the token service the registry named.
            target = urljoin(realm, answer.headers.get("Location", ""))
            raise RegistryUnreachable(f"{reference}: the registry's token service {_shown(realm)} redirected to "
                                      f"{_shown(target)}, which is not followed",
                                      fix="name the token service's own URL in the registry's configuration")
        if answer.status_code in (401, 403):
            raise RegistryRefused(f"{reference}: the registry's token service refused "
                                  + ("the credentials" if secret else "an anonymous request")
                                  + f" (HTTP {answer.status_code}): check the credentials", fix=CREDENTIALS_FIX)
        if answer.status_code != 200:
            raise RegistryUnreachable(f"{reference}: the registry's token service answered HTTP {answer.status_code}",
                                      fix="check that it answers from here, then run the command again")
        try:
            data = json.loads(_read(answer, reference, "the token", _ANSWER_LIMIT))
            token = data.get("token") or data.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise RegistryUnreachable(f"{reference}: the registry's token service answered without a token",
                                      fix="check the registry's token service")
        self._authorization[scope] = f"Bearer {token}"

    def _credentials(self, reference: Reference) -> Optional[Secret]:
        if not self._secret_read:
            self._secret, self._secret_read = credentials(reference), True
        return self._secret

    def _check_clear(self, url: str) -> None:
        """Credentials go over https, or to loopback: never in clear across a network."""
        parts = urlsplit(url)
        if parts.scheme != "https" and not is_loopback_host(parts.hostname or ""):
            raise RegistryRefused(f"{self.host} asks for credentials over plain http ({_shown(url)}), which would "
                                  "send them in clear: not sent", fix="serve the registry over https")

    def _answered(self, response: requests.Response, reference: Reference, what: str,
                  expected: Tuple[int, ...] = (200,)) -> None:
        if response.status_code not in expected:
            detail = _error_code(response)
            response.close()
            raise RegistryUnreachable(f"{reference}: the registry answered HTTP {response.status_code} for {what}"
                                      + (f" ({detail})" if detail else ""),
                                      fix="check the registry and the reference, then run the command again")


def _shown(url: str) -> str:
    """A URL as it is shown: without its query, which a token service may fill."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def _read(response: requests.Response, reference: Reference, what: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a streamed answer (one more than allowed tells it ran past)."""
    try:
        return bytes(response.raw.read(limit + 1, decode_content=True))
    except (requests.RequestException, OSError, ValueError) as exc:
        raise RegistryUnreachable(f"{reference}: {what} was cut short ({type(exc).__name__})",
                                  fix="check that the registry answers, then run the command again") from None


def _error_code(response: requests.Response) -> str:
    """The distribution spec's error code of a failed request (BLOB_UNKNOWN, DENIED, ...), if it
    gave one: read no further than an error's JSON can be (an answer may never end)."""
    try:
        body = response.raw.read(_ANSWER_LIMIT + 1, decode_content=True)
        if len(body) > _ANSWER_LIMIT:
            return ""
        errors = json.loads(body).get("errors") or []
        return ", ".join(str(error.get("code")) for error in errors if isinstance(error, dict))[:120]
    except (ValueError, AttributeError, TypeError, OSError, requests.RequestException):
        return ""


def _why(exc: Exception) -> str:
    if isinstance(exc, requests.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, requests.ReadTimeout):
        return f"no answer within {READ_TIMEOUT:g} s"
    if isinstance(exc, requests.ConnectionError) and "Connection refused" in str(exc):
        return "connection refused"
    return type(exc).__name__
