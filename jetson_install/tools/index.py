"""The one module that talks HTTP to a package index: it reads a vendor index's listings
(PEP 691 JSON where served, else PEP 503 HTML), and fetches the files a lock names, for a
wheelhouse (`fetch_file`, `fetch_text`).

What the listings are read for lives with what uses them, and talks no HTTP itself: the vendor
set across a source's indexes in planning/vendor_sources.py, `channels --check` in
cli/commands/channels.py. Only `plan --resolve`, the install (when it has no recorded resolution
to reuse, or with --upgrade) and `channels --check` come here; `plan` stays offline. requests is
imported by the functions that talk HTTP, not with the module: what only reads a local index,
or names an index's error (base/errors.py), pays nothing for it (urllib3, charset_normalizer,
http.client and ssl were a fifth of `plan`'s instructions).
"""

from __future__ import annotations

import html.parser
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.utils import canonicalize_name

from jetson_install.base.errors import IndexRefused, IndexUnreachable, RegistryError, RegistryRefused, StepFailed
from jetson_install.base.oci_ref import is_oci, parse_reference
from jetson_install.base.redact import CREDENTIALS_FIX, credentials, redact
from jetson_install.base.redirects import MAX_REDIRECTS, refused_redirect
from jetson_install.catalog.catalog import VendorSource
from jetson_install.catalog.resolve import ListedFile

if TYPE_CHECKING:
    import requests

__all__ = ["trusted_certificates", "CONNECT_TIMEOUT", "READ_TIMEOUT", "project_files", "source_listings",
           "recorded_url", "fetch_file", "fetch_text", "RUN_AGAIN"]

#: Seconds to open a connection to an index, and to wait for each read from it: an index
#: that is down costs seconds, never a hang.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0
_PEP691 = "application/vnd.pypi.simple.v1+json"

#: An authenticated mirror's answers to missing or wrong credentials: not "did not answer".
_REFUSED = (401, 403)


def project_files(index: str, project: str) -> List[ListedFile]:
    """The files `index` lists for `project`; empty when the index does not carry it (404)."""
    base = index.rstrip("/") + "/"
    url = urljoin(base, f"{project}/")
    if urlsplit(url).scheme == "file":
        return _local_project(url)

    import requests

    try:
        response = _get(url, headers={"Accept": f"{_PEP691}, text/html;q=0.1"}, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                    verify=trusted_certificates())
    except (requests.RequestException, _Redirected) as exc:
        raise _unreachable(index, _why(exc)) from None
    if response.status_code == 404:
        return []
    if response.status_code in _REFUSED:
        raise IndexRefused(f"the vendor index {redact(index)} refused the request (HTTP {response.status_code}): "
                               "check the credentials", fix=CREDENTIALS_FIX)
    if response.status_code != 200:
        raise _unreachable(index, f"HTTP {response.status_code}")
    if response.headers.get("Content-Type", "").split(";")[0].strip() == _PEP691:
        try:
            data = response.json()
        except ValueError:  # a listing cut short: as good as no answer, the next source is asked
            raise _unreachable(index, "a listing that is not whole JSON") from None
        return _from_json(data, response.url)
    return _from_html(response.text, response.url)


def trusted_certificates() -> Union[bool, str]:
    """The certificate authorities the tool's own requests trust: requests' variables
    (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE), else those uv reads (SSL_CERT_FILE, SSL_CERT_DIR:
    https://docs.astral.sh/uv/concepts/authentication/certificates/), so an index that uv reaches
    through a proxy's own authority is reached here too; else requests' own bundle."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        value = os.environ.get(name)
        if value:
            return value
    return True


def _unreachable(index: str, why: str) -> IndexUnreachable:
    return IndexUnreachable(
        f"the vendor index {redact(index)} did not answer ({why})",
        fix="retry later, use the channel's fallback: --vendor-fallback, or another vendor index: --vendor-index URL",
    )


class _Redirected(Exception):
    """A redirect not followed: it would leave what the source guarantees (https, or its own host).
    Caught beside requests' own errors (not one of them: requests is not imported with this module)."""


def _get(url: str, **options: Any) -> "requests.Response":
    """requests.get, following a redirect only where it keeps what the source guarantees: an
    https source's to https, a plain-http source's (loopback, or allowed insecure) to its own
    host. One off it is not followed and says where it led: followed, a loopback index could
    send the install to any host, an https one to plain http, and a dead target read as the
    source's "connection refused". A URL's credentials go with a redirect on its own host only."""
    import requests

    secret = credentials(url)
    for _ in range(MAX_REDIRECTS + 1):
        response = requests.get(url, allow_redirects=False, **options)
        if not response.is_redirect:
            return response
        target = urljoin(url, response.headers.get("Location", ""))
        response.close()
        refused = refused_redirect(url, target)
        if refused is not None:
            raise _Redirected(f"it {refused}")
        here, there = urlsplit(url), urlsplit(target)
        same_host = (there.scheme, there.hostname, there.port) == (here.scheme, here.hostname, here.port)
        if same_host and secret is not None and credentials(target) is None:
            userinfo = here.netloc.rpartition("@")[0]
            target = target.replace(f"{there.scheme}://", f"{there.scheme}://{userinfo}@", 1)
        url = target
    raise _Redirected(f"more than {MAX_REDIRECTS} redirects")


def _why(exc: Exception, read_timeout: Optional[float] = None) -> str:
    """What went wrong reaching an index (or fetching a file, whose reads wait `read_timeout`),
    as it happened: a wait is named only when there was one."""
    import requests

    if isinstance(exc, _Redirected):
        return str(exc)
    if isinstance(exc, requests.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, requests.ReadTimeout) or (isinstance(exc, requests.ConnectionError)
                                                 and "Read timed out" in str(exc)):
        return f"no answer within {read_timeout or READ_TIMEOUT:g} s"
    text = str(exc)
    if isinstance(exc, requests.ConnectionError) and any(
            sign in text for sign in ("NameResolutionError", "Name or service not known", "nodename nor servname",
                                      "Temporary failure in name resolution", "No address associated")):
        return "its host name does not resolve (DNS)"
    if isinstance(exc, requests.ConnectionError) and "Connection refused" in text:
        return "connection refused"
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return "its answer was cut short"
    return type(exc).__name__


def recorded_url(url: str) -> str:
    """A file URL as recorded and shown: a mirror's user name and token stay in the settings."""
    secret = credentials(url)
    return secret.url if secret else url


def _local_project(url: str) -> List[ListedFile]:
    page = Path(unquote(urlsplit(url).path)) / "index.html"
    if not page.is_file():
        return []
    return _from_html(page.read_text(encoding="utf-8", errors="replace"), url)


def _from_json(data: Any, page_url: str) -> List[ListedFile]:
    files = []
    for item in data.get("files", []) if isinstance(data, dict) else []:
        if not isinstance(item, dict) or "filename" not in item or "url" not in item:
            continue
        hashes = item.get("hashes") or {}
        yanked = item.get("yanked", False)
        files.append(ListedFile(str(item["filename"]), recorded_url(urljoin(page_url, str(item["url"]))),
                                hashes.get("sha256") if isinstance(hashes, dict) else None, bool(yanked)))
    return files


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: List[Tuple[Dict[str, Optional[str]], str]] = []
        self._open: Optional[Dict[str, Optional[str]]] = None
        self._text: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.links.append((self._open, "".join(self._text).strip()))
            self._open = None


def _from_html(text: str, page_url: str) -> List[ListedFile]:
    parser = _Links()
    parser.feed(text)
    files = []
    for attrs, label in parser.links:
        href = attrs.get("href")
        if not href:
            continue
        url, fragment = urldefrag(urljoin(page_url, href))
        filename = label or unquote(url.rsplit("/", 1)[-1])
        sha256 = fragment[len("sha256="):].lower() if fragment.startswith("sha256=") else None
        files.append(ListedFile(filename, recorded_url(url), sha256, "data-yanked" in attrs))
    return files


def source_listings(source: VendorSource, index: str, allow_insecure: bool = False) -> Dict[str, List[ListedFile]]:
    """What `index` lists for each project `source`'s sets name; an OCI registry (oci://) lists
    the recorded builds it holds, by their digests (plain http there only on loopback or with
    `allow_insecure`, as for an index)."""
    names: List[str] = []
    for version_set in source.sets:
        names.extend(name for name in version_set.specifiers if name not in names)
    if is_oci(index):
        return _registry_listings(source, index, names, allow_insecure)
    return {name: project_files(index, name) for name in names}


def _registry_listings(source: VendorSource, index: str, names: List[str],
                       allow_insecure: bool) -> Dict[str, List[ListedFile]]:
    """A registry read as a mirror: its failures become an index's, so a dead or refusing
    registry is passed over as a dead or refusing index is."""
    from jetson_install.tools import oci_mirror

    builds = {name: [(build.file, build.sha256) for build in source.builds
                     if build.sha256 and canonicalize_name(build.name) == canonicalize_name(name)] for name in names}
    try:
        return oci_mirror.recorded_listings(parse_reference(index, "a mirror"), builds, allow_insecure)
    except RegistryRefused as exc:
        raise IndexRefused(f"the registry {index} refused the request: {exc.message.split(': ', 1)[-1]}",
                           fix=exc.fix) from None
    except RegistryError as exc:
        text = exc.message.split(": ", 1)[1] if exc.message.startswith(f"{index}: ") else exc.message
        cause = re.fullmatch(r"the registry \S+ did not answer \((.*)\)", text)
        raise IndexUnreachable(f"the vendor index {index} did not answer ({cause.group(1) if cause else text})",
                               fix="retry later, use the channel's fallback: --vendor-fallback, or another vendor index: "
                                   "--vendor-index URL") from None


#: How a download's fix ends; a command that knows the user's own line says it instead.
RUN_AGAIN = "run the command again"

# A lock's file may be torch (0.5-2 GB): each read may wait longer than a listing's.
_FILE_READ_TIMEOUT = 60.0


def fetch_file(url: str, destination: Path, watch: Optional[Callable[[int, int], None]] = None) -> None:
    """Write the file at `url` to `destination`, streamed (torch is 0.5-2 GB); `watch` hears
    (bytes so far, the size the answer announced or 0) once it starts and after each piece."""
    if urlsplit(url).scheme == "file":
        try:
            shutil.copyfile(unquote(urlsplit(url).path), destination)
        except OSError as exc:
            raise _failed(url, exc.strerror or str(exc)) from None
        return

    import requests

    try:
        with _get(url, stream=True, timeout=(CONNECT_TIMEOUT, _FILE_READ_TIMEOUT),
                  verify=trusted_certificates()) as response:
            if response.status_code != 200:
                raise _failed(url, f"HTTP {response.status_code}")
            size = response.headers.get("Content-Length", "")
            total, received = int(size) if size.isdigit() else 0, 0
            if watch is not None:
                watch(0, total)
            with destination.open("wb") as stream:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    stream.write(chunk)
                    received += len(chunk)
                    if watch is not None:
                        watch(received, total)
    except (requests.RequestException, _Redirected) as exc:
        raise _failed(url, _why(exc, _FILE_READ_TIMEOUT)) from None


def fetch_text(url: str) -> str:
    """A small text file (a wheelhouse's lock) from `url`."""
    if urlsplit(url).scheme in ("", "file"):
        path = Path(unquote(urlsplit(url).path))
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise _failed(url, exc.strerror or str(exc)) from None

    import requests

    try:
        response = _get(url, timeout=(CONNECT_TIMEOUT, _FILE_READ_TIMEOUT), verify=trusted_certificates())
    except (requests.RequestException, _Redirected) as exc:
        raise _failed(url, _why(exc, _FILE_READ_TIMEOUT)) from None
    if response.status_code != 200:
        raise _failed(url, f"HTTP {response.status_code}")
    return response.text


class Stalled(StepFailed):
    """A file's source stopped answering (no connection, or no byte within the read timeout):
    one that stalls for one file is passed over for the rest of the run."""


def _failed(url: str, why: str) -> StepFailed:
    if why in (f"HTTP {code}" for code in _REFUSED):
        # The file's URL comes from a lock (or a wheelhouse the lock names): there is no URL
        # of the user's to carry credentials, so ~/.netrc, which requests reads, is the way.
        host = urlsplit(url).hostname or "HOST"
        return StepFailed("download", f"{redact(url)} was refused ({why}): check the credentials",
                          f"give {host}'s user and token in ~/.netrc (machine {host} login USER password TOKEN; "
                          f"never written elsewhere or shown), then {RUN_AGAIN}")
    kind = Stalled if why.startswith(("no answer within", "no connection within")) else StepFailed
    return kind("download", f"could not fetch {redact(url)} ({why})",
                f"check that the index or wheelhouse answers, then {RUN_AGAIN}")
