"""The one module that talks to OCI registries: a manifest, blobs by their digest, and the
registry's token flow, on requests (the distribution spec's pull and push,
https://github.com/opencontainers/distribution-spec/blob/main/spec.md).

A registry is a store addressed by sha256, and every file this tool installs is already known
by its sha256 (a lock's entries, the catalog's builds): a blob is asked for by that digest and
its bytes are checked against it as they arrive, so a registry, a tag or a manifest never
decides a hash. A wheelhouse is pushed as one OCI image manifest whose layers are its files,
each named by the `org.opencontainers.image.title` annotation, as `oras push` writes files
(https://oras.land/docs/commands/oras_push), so `oras pull` reads it too.

Credentials are the registry clients' own: ~/.docker/config.json (its credential helpers, or
`auths`) and ~/.netrc, read only when a registry asks for them, sent only to that registry or
the token service it names, over https (or to loopback), and never logged or shown.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import netrc
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urljoin, urlsplit

import requests
import requests.auth

from jetson_install.base.errors import JetsonInstallError
from jetson_install.base.oci_ref import DIGEST, Reference, is_loopback_host
from jetson_install.base.outputs import read_regular_file
from jetson_install.base.redirects import MAX_REDIRECTS, refused_redirect
from jetson_install.catalog.identity import ListedFile

__all__ = ["RegistryError", "RegistryUnreachable", "RegistryRefused", "BlobMismatch", "Layer", "Manifest",
           "Registry", "wheelhouse_manifest", "registry_for", "recorded_listings", "blob_reference", "fetch_by_reference", "CREDENTIALS_FIX",
           "MANIFEST_TYPE", "TITLE"]

#: Seconds to open a connection, and to wait for each read: a registry that is down costs seconds, never a hang.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0  # a blob may be torch (0.5-2 GB), and a registry may assemble an upload before it answers

# The media types of an OCI image manifest and of its unused config, the empty descriptor
# (https://github.com/opencontainers/image-spec/blob/main/manifest.md#guidance-for-an-empty-descriptor).
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
_EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
_EMPTY = b"{}"
# What `oras push` gives a file's layer by default (https://oras.land/docs/commands/oras_push).
_FILE_TYPE = "application/vnd.oci.image.layer.v1.tar"
# An artifact sets artifactType where its config is empty
# (https://github.com/opencontainers/image-spec/blob/main/artifacts-guidance.md).
ARTIFACT_TYPE = "application/vnd.jetson-install.wheelhouse.v1"
# A layer's file name (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
TITLE = "org.opencontainers.image.title"
_CHUNK = 1 << 20
# The most of a manifest read: what registries accept and their clients read (the distribution
# spec: "Registries SHOULD accept manifests of at least 4 megabytes"; containerd reads no more),
# https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pushing-manifests
_MANIFEST_LIMIT = 4 << 20
# The most of any other answer read whole (a token, an error's JSON): each is a few hundred bytes.
_ANSWER_LIMIT = 64 << 10
_CONFIG_LIMIT = 1 << 20  # ~/.docker/config.json
#: Seconds a docker credential helper has to answer (it may ask a keyring that is locked).
_HELPER_TIMEOUT = 30.0
#: What to do when a registry refuses: the two places registries' clients keep credentials, neither a command line.
CREDENTIALS_FIX = ("log in as the registry's clients do: `docker login HOST` (~/.docker/config.json, or the credential "
                   "helper it names), or a line in ~/.netrc (machine HOST login USER password TOKEN); never on a "
                   "command line")


class RegistryError(JetsonInstallError):
    """A registry's request did not succeed."""


class RegistryUnreachable(RegistryError):
    """The registry did not answer, or answered with an error."""


class RegistryRefused(RegistryError):
    """The registry (or its token service) refused the credentials it was given, or wanted some."""


class BlobMismatch(RegistryError):
    """A blob arrived with bytes other than its digest: refused, and nothing of it kept."""


@dataclass(frozen=True)
class Layer:
    """One file of a manifest: its name (the title annotation), digest and size."""

    title: str
    digest: str
    size: int


@dataclass(frozen=True)
class Manifest:
    """A manifest as the registry served it: its digest (of these very bytes) and its layers."""

    digest: str
    layers: Tuple[Layer, ...]
    artifact_type: Optional[str]

    def by_digest(self) -> Dict[str, Layer]:
        return {layer.digest: layer for layer in self.layers}


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def wheelhouse_manifest(layers: List[Layer]) -> bytes:
    """An OCI image manifest of `layers` (the wheelhouse's files, in order), its config the
    empty descriptor and its artifactType the wheelhouse's. Deterministic: the same files give
    the same bytes, so the same digest."""
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": _EMPTY_TYPE, "digest": _sha256(_EMPTY), "size": len(_EMPTY),
                   "data": base64.b64encode(_EMPTY).decode("ascii")},
        "layers": [{"mediaType": _FILE_TYPE, "digest": layer.digest, "size": layer.size,
                    "annotations": {TITLE: layer.title}} for layer in layers],
    }
    return json.dumps(manifest, indent=2, sort_keys=False).encode("utf-8")


def registry_for(reference: Reference, plain_http_allowed: bool) -> "Registry":
    """The one Registry of this run for the reference's host: its scheme found once, its
    connections and tokens kept for every blob and repository the run asks of it."""
    return _registry(reference.host, plain_http_allowed)


@functools.lru_cache(maxsize=None)  # thread-safe: at worst two threads each make one, and one is kept
def _registry(host: str, plain_http_allowed: bool) -> "Registry":
    return Registry(Reference(host, "_"), plain_http_allowed)


def blob_reference(reference: Reference, sha256: str) -> str:
    """How a listing names a blob of the repository: its reference by digest (a tag never moves it)."""
    return str(Reference(reference.host, reference.repository, None, f"sha256:{sha256}"))


def recorded_listings(reference: Reference, builds: Mapping[str, List[Tuple[str, str]]],
                      plain_http_allowed: bool) -> Dict[str, List[ListedFile]]:
    """What a registry serves of the recorded builds, as a listing: for each project, each
    build (file name, sha256) whose blob the repository holds, named by its digest. With a tag
    or digest, its manifest says which it holds (one request); without, each blob is asked for
    (HEAD). Nothing here trusts a name: a blob is the build only by its digest."""
    registry = registry_for(reference, plain_http_allowed)
    manifest = registry.manifest(reference) if reference.manifest_reference else None
    held = manifest.by_digest() if manifest is not None else None
    # A manifest that titles a recorded file with another digest serves another build under
    # its name: listed with the digest it has, so that the reader refuses it as changed, as it
    # refuses an index's (catalog/resolve.complete_set), instead of counting it missing.
    titled = {layer.title: layer.digest for layer in manifest.layers} if manifest is not None else {}

    def served(file: str, sha256: str) -> Optional[str]:
        if held is not None:
            return sha256 if f"sha256:{sha256}" in held else _hex(titled.get(file))
        return sha256 if registry.blob_size(reference, f"sha256:{sha256}") is not None else None

    listings: Dict[str, List[ListedFile]] = {}
    for project, files in builds.items():
        found = [(file, served(file, sha256)) for file, sha256 in files]
        listings[project] = [ListedFile(file, blob_reference(reference, digest), digest) for file, digest in found
                             if digest is not None]
    return listings


def _hex(digest: Optional[str]) -> Optional[str]:
    """A layer's `sha256:HEX` digest as the hex a listing carries; None for none, or another algorithm."""
    return digest[len("sha256:"):] if digest is not None and digest.startswith("sha256:") else None


def fetch_by_reference(blob: str, destination: Path, plain_http_allowed: bool) -> int:
    """The blob `blob` (an `oci://HOST/REPOSITORY@sha256:...` a listing gave) into `destination`, checked."""
    from jetson_install.base.oci_ref import parse_reference

    reference = parse_reference(blob, "a blob")
    assert reference.digest is not None
    return registry_for(reference, plain_http_allowed).fetch_blob(reference, reference.digest, destination)


# -- credentials ---------------------------------------------------------------------------------

_Secret = Tuple[str, str]  # (user, password); user "<token>" with an identity token, as docker's helpers give it
_IDENTITY_TOKEN_USER = "<token>"


def _docker_config() -> Dict[str, Any]:
    """~/.docker/config.json (or $DOCKER_CONFIG/config.json), as docker reads it; {} where there is none."""
    folder = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    try:
        # Bounded, and a FIFO or device in its place is passed over rather than waited on.
        text = read_regular_file(Path(folder) / "config.json", _CONFIG_LIMIT)
        data = json.loads(text.decode("utf-8")) if text is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _hostname_of(key: str) -> str:
    """An `auths` key as docker matches it: "https://host/v1/" and "host" both name host."""
    if "://" in key:
        key = key.split("://", 1)[1]
    return key.split("/", 1)[0]


def _from_helper(helper: str, host: str) -> Optional[_Secret]:
    """A docker credential helper's answer for `host`: `docker-credential-NAME get`, the server
    on its stdin, JSON {Username, Secret} on its stdout, which is never logged
    (https://github.com/docker/docker-credential-helpers#development)."""
    from jetson_install.tools import runner

    if not re.fullmatch(r"[A-Za-z0-9_.-]+", helper):
        return None
    program = f"docker-credential-{helper}"
    fix = f"check it by hand: echo {host} | {program} get"
    done = runner.run([program, "get"], input_text=host, timeout=_HELPER_TIMEOUT, secret_stdout=True)
    if done.timed_out:
        raise RegistryRefused(f"the credential helper {program} gave no answer for {host} within "
                              f"{_HELPER_TIMEOUT:g} s", fix=fix)
    if done.returncode != 0:
        return None  # "credentials not found": anonymous, or ~/.netrc
    try:
        answer = json.loads(done.stdout)
        user, secret = str(answer["Username"]), str(answer["Secret"])
    except (ValueError, KeyError, TypeError):
        # Its output is never shown: it may hold the secret itself.
        raise RegistryRefused(f"the credential helper {program} answered for {host} with something other than "
                              "its JSON", fix=fix) from None
    return (user, secret) if secret else None


def _from_auths(entry: Mapping[str, Any]) -> Optional[_Secret]:
    token = entry.get("identitytoken")
    if isinstance(token, str) and token:
        return _IDENTITY_TOKEN_USER, token
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            user, _, password = base64.b64decode(auth).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return (user, password) if password else None
    name, secret = entry.get("username"), entry.get("password")
    return (name, secret) if isinstance(name, str) and isinstance(secret, str) and secret else None


def _from_netrc(hostname: str) -> Optional[_Secret]:
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # a FIFO or device in its place is passed over rather than waited on
        found = netrc.netrc(path).authenticators(hostname)
    except (OSError, netrc.NetrcParseError):
        return None
    if found is None or not found[2]:
        return None
    return found[0] or "", found[2]


def _credentials(reference: Reference) -> Optional[_Secret]:
    """The user and secret for the registry, where docker reads them (a credential helper
    named for the host, else the default store, else `auths`), else ~/.netrc's line for its
    host (https://docs.docker.com/reference/cli/docker/login/#credential-stores)."""
    config = _docker_config()
    helpers = config.get("credHelpers")
    if isinstance(helpers, dict) and isinstance(helpers.get(reference.host), str):
        found = _from_helper(helpers[reference.host], reference.host)
        if found:
            return found
    store = config.get("credsStore")
    if isinstance(store, str) and store:
        found = _from_helper(store, reference.host)
        if found:
            return found
    auths = config.get("auths")
    if isinstance(auths, dict):
        for key, entry in auths.items():
            if isinstance(entry, dict) and _hostname_of(str(key)) == reference.host:
                found = _from_auths(entry)
                if found:
                    return found
    return _from_netrc(reference.hostname)


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
        self._secret: Optional[_Secret] = None
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
        digest = _sha256(body)
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
        too_long = BlobMismatch(f"{reference}: the blob {digest} runs past its {size} bytes: refused",
                                fix="the registry's store is damaged or altered: push the wheelhouse again, or use "
                                    "another registry")
        response = self._request("GET", reference, f"blobs/{digest}")
        with response:
            if response.status_code == 404:
                raise RegistryUnreachable(f"{reference}: the registry has no blob {digest} (HTTP 404)",
                                          fix=f"push the wheelhouse there again: jetson-install wheelhouse DIR --push "
                                              f"{reference}")
            self._answered(response, reference, f"the blob {digest}")
            announced = response.headers.get("Content-Length", "")
            if size is not None and announced.isdigit() and int(announced) > size:
                raise too_long
            hasher = hashlib.sha256()
            got_size = 0
            try:
                with destination.open("wb") as stream:
                    for chunk in response.iter_content(chunk_size=_CHUNK):
                        got_size += len(chunk)
                        if size is not None and got_size > size:
                            raise too_long
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
        if len(data) > limit or _sha256(data) != digest:
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
        return _sha256(body)

    def push_empty_config(self, reference: Reference) -> None:
        self.push_blob(reference, _sha256(_EMPTY), len(_EMPTY), _EMPTY)

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
        for _ in range(MAX_REDIRECTS + 1):
            if not response.is_redirect or method not in ("GET", "HEAD"):
                break
            target = urljoin(url, response.headers.get("Location", ""))
            response.close()
            refused = refused_redirect(url, target)
            if refused is not None:
                raise RegistryUnreachable(f"{reference}: the registry {refused}",
                                          fix="serve the registry's blobs from its own host, or over https")
            url = target
            response = self._once(method, url, scope if self._own(url) else None, kwargs)
        else:
            response.close()
            raise RegistryUnreachable(f"{reference}: the registry redirected more than {MAX_REDIRECTS} times",
                                      fix="check the registry's configuration")
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
            if secret is not None and secret[0] == _IDENTITY_TOKEN_USER:
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

    def _token_answer(self, reference: Reference, scope: str, realm: str, secret: Optional[_Secret],
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

    def _credentials(self, reference: Reference) -> Optional[_Secret]:
        if not self._secret_read:
            self._secret, self._secret_read = _credentials(reference), True
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
