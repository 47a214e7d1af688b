"""The one module that talks HTTP to a package index: it reads a vendor index's listings
(PEP 691 JSON where served, else PEP 503 HTML) and resolves a source's sets against them,
trying the source's mirrors in order for the same recorded builds.

It also fetches the files a lock names, for a wheelhouse (`fetch_file`, `fetch_text`).
Only `plan --resolve`, the install (when it has no recorded resolution to reuse, or with
--upgrade) and `channels --check` come here; `plan` stays offline.
"""

from __future__ import annotations

import dataclasses
import html.parser
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import requests
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from jetson_install.base.errors import (
    EXIT_CHECK_UNLISTED,
    EXIT_CHECK_UNREACHABLE,
    EXIT_FAILED,
    EXIT_OK,
    JetsonInstallError,
    StepFailed,
)
from jetson_install.base.redact import CREDENTIALS_FIX, credentials, redact
from jetson_install.base.tags import wheel_tags
from jetson_install.catalog.catalog import VendorSource
from jetson_install.catalog.identity import (
    ChosenFile,
    IdentityMismatch,
    ListedFile,
    NoBuildForPython,
    NothingInPolicy,
    Resolution,
)
from jetson_install.catalog.resolve import choose_set, complete_set, served_pythons

__all__ = ["CONNECT_TIMEOUT", "READ_TIMEOUT", "IndexUnreachable", "IndexRefused", "project_files", "resolve",
           "sources_in_order", "same_files_elsewhere", "SetReport", "check_source",
           "CHECK_STATUSES", "check_exit_code",
           "fetch_file", "fetch_text", "RUN_AGAIN"]

#: Seconds to open a connection to an index, and to wait for each read from it: an index
#: that is down costs seconds, never a hang.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0
_PEP691 = "application/vnd.pypi.simple.v1+json"
#: The vendor builds are for Jetson boards, and a preflight runs only on aarch64 (preflight.require_aarch64).
_ARCH = "aarch64"


#: An authenticated mirror's answers to missing or wrong credentials: not "did not answer".
_REFUSED = (401, 403)


class IndexUnreachable(JetsonInstallError):
    """The index did not answer (or answered with an error)."""


class IndexRefused(JetsonInstallError):
    """The index answered, refusing the credentials (401, 403): its fix is the credentials', not a
    network's, so callers that replace an unreachable index's fix leave this one."""


def project_files(index: str, project: str) -> List[ListedFile]:
    """The files `index` lists for `project`; empty when the index does not carry it (404)."""
    base = index.rstrip("/") + "/"
    url = urljoin(base, f"{project}/")
    if urlsplit(url).scheme == "file":
        return _local_project(url)

    try:
        response = requests.get(url, headers={"Accept": f"{_PEP691}, text/html;q=0.1"},
                                timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    except requests.RequestException as exc:
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


def _unreachable(index: str, why: str) -> IndexUnreachable:
    return IndexUnreachable(
        f"the vendor index {redact(index)} did not answer ({why})",
        fix="retry later, use the channel's fallback: --vendor-fallback, or a mirror: --vendor-index URL",
    )


def _why(exc: Exception) -> str:
    """What went wrong reaching an index, as it happened: a wait is named only when there was one."""
    if isinstance(exc, requests.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, requests.ReadTimeout):
        return f"no answer within {READ_TIMEOUT:g} s"
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


def _without_credentials(url: str) -> str:
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
        files.append(ListedFile(str(item["filename"]), _without_credentials(urljoin(page_url, str(item["url"]))),
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
        files.append(ListedFile(filename, _without_credentials(url), sha256, "data-yanked" in attrs))
    return files


def _listings(source: VendorSource, index: str) -> Dict[str, List[ListedFile]]:
    names: List[str] = []
    for version_set in source.sets:
        names.extend(name for name in version_set.specifiers if name not in names)
    return {name: project_files(index, name) for name in names}


def sources_in_order(source: VendorSource, index: Optional[str]) -> Tuple[str, ...]:
    """Where the vendor set is looked for, in order: `index` (the source's own, or the one
    --vendor-index gave), then the source's mirrors; none for a source not read live."""
    if index is None:
        return ()
    return tuple(dict.fromkeys((index, *source.mirrors)))


def resolve(source: VendorSource, index: Optional[str], python: str, glibc: str) -> Resolution:
    """Resolve `source`'s sets against `index` (its own, or a mirror) and then its mirrors, for
    the interpreter's CPython `python` ("3.11": the files must install there, whatever the
    channel's own Python) on a board with `glibc` ("2.35": its Ubuntu's, platform_data.ubuntu_glibc).

    The preferred set comes from the first source that serves it (a source that is down, or
    that serves another file under a recorded name, is passed over and named); only when no
    source has it does the choice move within policy. A mirror is trusted for recorded builds
    alone: a build wheels-index.toml does not list is taken only from the first source.

    A source of direct wheel URLs, or the default index when no URL for it was given
    (uv's own default is not read here), resolves to its preferred set without a request.
    """
    order = sources_in_order(source, index)
    if not order:
        return offline_resolution(source)
    if len(order) == 1:
        return _choose(source, order[0], _listings(source, order[0]), python, glibc, first=True)
    passed: List[Tuple[str, str]] = []  # (source, what it answered), for the reason and the error
    fallback: Optional[Resolution] = None  # the policy's choice on the first source that has any set
    failures: List[JetsonInstallError] = []
    for position, where in enumerate(order):
        shown = _without_credentials(where)
        try:
            resolution = _choose(source, where, _listings(source, where), python, glibc, first=position == 0)
        except (IndexUnreachable, IndexRefused) as exc:
            passed.append((shown, _answer(exc)))
            failures.append(exc)
            continue
        except (IdentityMismatch, NothingInPolicy) as exc:
            passed.append((shown, _answer(exc)))
            failures.append(exc)
            continue
        if resolution.set_name == source.preferred.name:
            return _noting(resolution, passed)
        fallback = fallback or _noting(resolution, list(passed))
        passed.append((shown, f"no preferred set {source.preferred.name} (it has {resolution.set_name})"))
    if fallback is not None:
        where = "; ".join(f"{name}: {answer}" for name, answer in passed)
        return dataclasses.replace(
            fallback, reason=f"the preferred set {source.preferred.name} is on none of the {len(order)} sources "
                             f"({where}); {fallback.set_name} is the newest complete set within policy on {fallback.source}")
    raise _none_served(order, passed, failures)


def same_files_elsewhere(source: VendorSource, index: Optional[str], resolution: Resolution,
                         failed: str) -> Tuple[Optional[Resolution], Tuple[str, ...]]:
    """The files of `resolution` (the same names and sha256) from the next source after the
    one that failed to deliver them (`failed`, a file cut short, an HTTP error), with what
    each source passed over answered; (None, answers) when no later source serves them all."""
    order = [_without_credentials(where) for where in sources_in_order(source, index)]
    by_shown = dict(zip(order, sources_in_order(source, index)))
    later = order[order.index(failed) + 1:] if failed in order else []
    answers: List[str] = []
    for shown in later:
        try:
            listings = _listings(source, by_shown[shown])
        except (IndexUnreachable, IndexRefused) as exc:
            answers.append(f"{shown}: {_answer(exc)}")
            continue
        files = []
        for chosen in resolution.files:
            listed = next((item for item in listings.get(chosen.name, ()) if item.filename == chosen.file
                           and chosen.sha256 and (item.sha256 or chosen.sha256) == chosen.sha256), None)
            if listed is None:
                break
            files.append(dataclasses.replace(chosen, url=listed.url))
        else:
            reason = f"{resolution.reason}; the same files (by sha256) from {shown}, as {failed} failed to deliver them"
            return dataclasses.replace(resolution, source=shown, files=tuple(files), reason=reason), tuple(answers)
        answers.append(f"{shown}: does not serve all of {', '.join(c.file for c in resolution.files)}")
    return None, tuple(answers)


def _choose(source: VendorSource, index: str, listings: Dict[str, List[ListedFile]], python: str, glibc: str,
            first: bool) -> Resolution:
    """The set `index`'s listings give; a mirror (not `first`) counts only the files it serves
    under a recorded name with a sha256 that can be checked: it never brings in another build."""
    if not first:
        listings = _recorded_only(source, listings)
    return choose_set(_without_credentials(index), source.sets, source.preferred, source.prereleases, source.builds,
                      listings, python, lambda other: wheel_tags(other, _ARCH, glibc))


def _recorded_only(source: VendorSource, listings: Dict[str, List[ListedFile]]) -> Dict[str, List[ListedFile]]:
    """What a mirror may give: files under a recorded name whose sha256 can be checked (the
    one served is compared with the record; else uv checks the recorded one on download)."""
    known = {build.file: build for build in source.builds}
    return {name: [listed for listed in files if listed.filename in known
                   and (listed.sha256 or known[listed.filename].sha256)] for name, files in listings.items()}


def _answer(exc: JetsonInstallError) -> str:
    """What a passed-over source answered, in a few words for a list of sources."""
    if isinstance(exc, IndexUnreachable):
        return "did not answer " + exc.message.rsplit(" did not answer ", 1)[-1]
    if isinstance(exc, IndexRefused):
        return "refused the credentials"
    if isinstance(exc, IdentityMismatch):
        # "URL serves F with sha256 X, but wheels-index.toml records Y ...: refusing ..."
        served = exc.message.split(": refusing", 1)[0].split(" serves ", 1)[-1]
        return f"refused, it serves {served}"
    return "no complete set within policy of the recorded builds"


def _noting(resolution: Resolution, passed: Sequence[Tuple[str, str]]) -> Resolution:
    """The resolution saying which sources before the one that served it were passed over, and why."""
    if not passed:
        return resolution
    notes = tuple(f"vendor source {name} passed over: {answer}; the set came from {resolution.source}"
                  for name, answer in passed)
    return dataclasses.replace(resolution, reason=f"{resolution.reason} on {resolution.source} "
                                                  f"(passed over: {', '.join(name for name, _ in passed)})",
                               warnings=notes + resolution.warnings)


def _none_served(order: Sequence[str], passed: Sequence[Tuple[str, str]],
                 failures: Sequence[JetsonInstallError]) -> JetsonInstallError:
    """One error naming every source and what it answered: unreachable when none answered, a
    refusal when one served another build under a recorded name, else nothing in policy."""
    answers = "; ".join(f"{name}: {answer}" for name, answer in passed)
    if not any(isinstance(exc, (IdentityMismatch, NothingInPolicy)) for exc in failures):
        refused = next((exc for exc in failures if isinstance(exc, IndexRefused)), None)
        if refused is not None:  # the credentials' fix, not a network's
            return IndexRefused(f"none of the {len(order)} vendor sources gave its listing ({answers})",
                                fix=refused.fix)
        return IndexUnreachable(f"none of the {len(order)} vendor sources answered ({answers})",
                                fix=failures[0].fix)
    mismatch = next((exc for exc in failures if isinstance(exc, IdentityMismatch)), None)
    if mismatch is not None:
        return IdentityMismatch(f"no vendor source serves the recorded builds ({answers})", fix=mismatch.fix)
    missing = next(exc for exc in failures if isinstance(exc, NothingInPolicy))
    if isinstance(missing, NoBuildForPython):
        return NoBuildForPython(f"no vendor source serves a set for Python {missing.python} ({answers})",
                                fix=missing.fix or "", python=missing.python, served=missing.served)
    return NothingInPolicy(f"no vendor source serves a complete set within policy ({answers})", fix=missing.fix)


def offline_resolution(source: VendorSource) -> Resolution:
    """The preferred set as the catalog knows it, for sources that are not read live: direct
    files, or uv's default index, whose files the tool never lists itself. There a package the
    set gives by a range (Thor's bitsandbytes) is left to uv in the vendor step, and its
    version is recorded once it is installed."""
    files = []
    for url in source.wheels:
        name = unquote(url.rsplit("/", 1)[-1])
        build = next((b for b in source.builds if b.file == name), None)
        package = str(parse_wheel_filename(name)[0])
        files.append(ChosenFile(package, name.split("-")[1], name, url, build.sha256 if build else None,
                                build is not None, build.cuda if build else None))
    if not files:
        known = {build.name: build for build in source.builds}
        pins = source.preferred.pins
        for package, specifier in source.preferred.specifiers.items():
            version = pins.get(package, "")
            found = known.get(package)
            build = found if found is not None and version and version in found.file else None
            files.append(ChosenFile(package, version, build.file if build else "", "", build.sha256 if build else None,
                                    build is not None, build.cuda if build else None,
                                    None if version else specifier))
    reason = "the preferred set, as wheels-index.toml records it (this source is not read live)"
    return Resolution(source.location, source.preferred.name, tuple(files), reason)


#: `channels --check` statuses, and the exit code each gives (the README's table).
CHECK_STATUSES = {"ok": EXIT_OK, "not-read": EXIT_OK, "missing": EXIT_FAILED, "changed": EXIT_FAILED,
                  "unreachable": EXIT_CHECK_UNREACHABLE, "unlisted": EXIT_CHECK_UNLISTED}


@dataclass(frozen=True)
class SetReport:
    """`channels --check` for one source: the preferred set present and unchanged, newer sets.

    `status`: ok; not-read (a source with no index to list); missing (the index lacks part of
    the preferred set); changed (a recorded file name served with another sha256);
    unreachable; unlisted (the preferred set is there, but none of its files is one
    wheels-index.toml records: another build of the same versions, not proven the vendor's).
    """

    channel: str
    index: str
    status: str
    lines: Tuple[str, ...]
    mirror_of: Optional[str] = None  # a mirror's report: the source whose recorded builds it serves

    @property
    def ok(self) -> bool:
        return CHECK_STATUSES[self.status] == 0


def check_exit_code(reports: Sequence[SetReport]) -> int:
    """The worst finding decides: a missing or changed build (1) over an index that did not
    answer (4) over an unlisted set (5)."""
    codes = {CHECK_STATUSES[report.status] for report in reports} - {EXIT_OK}
    for code in (EXIT_FAILED, EXIT_CHECK_UNREACHABLE, EXIT_CHECK_UNLISTED):
        if code in codes:
            return code
    return 0


def check_source(channel_id: str, source: VendorSource, index: Optional[str], python: str, glibc: str,
                 mirror_of: Optional[str] = None, not_read: str = "the source has no index URL to list") -> SetReport:
    """`channels --check` of `source` on `index`; `mirror_of`: `index` is a mirror of that
    source, which counts only the recorded builds (ok, missing, changed or unreachable)."""
    where = _without_credentials(index) if index else source.location
    if index is None:
        return SetReport(channel_id, where, "not-read", (f"not read: {not_read}",))
    try:
        listings = _listings(source, index)
    except (IndexUnreachable, IndexRefused) as exc:  # not read, the message says why
        return SetReport(channel_id, where, "unreachable", (exc.message,), mirror_of)
    if mirror_of is not None:
        listings = _recorded_only(source, listings)
    known = {build.file: build for build in source.builds}
    lines: List[str] = []
    try:
        preferred = complete_set(where, source.preferred, source.prereleases, known, listings,
                                 wheel_tags(python, _ARCH, glibc))
    except IdentityMismatch as exc:
        return SetReport(channel_id, where, "changed", (f"preferred set {source.preferred.name}: {exc.message}",),
                         mirror_of)
    status = "ok"
    if preferred is None:
        status = "missing"
        line = f"preferred set {source.preferred.name}: missing for Python {python} (the index does not list all of it)"
        others = [other for other in served_pythons(listings) if other != python and complete_set(
            where, source.preferred, source.prereleases, known, listings, wheel_tags(other, _ARCH, glibc))]
        if others:
            line += (f"; it has the set for Python {', '.join(others)}, which an install with that interpreter "
                     "takes (--python)")
        lines.append(line)
    else:
        unknown = [chosen.file for chosen in preferred if not chosen.known]
        if unknown and len(unknown) == len(preferred):
            status = "unlisted"
            lines.append(f"preferred set {source.preferred.name}: present, but none of its files is a build "
                         f"wheels-index.toml lists: {', '.join(unknown)}")
        else:
            lines.append(f"preferred set {source.preferred.name}: present"
                         + (f"; not in wheels-index.toml: {', '.join(unknown)}" if unknown else ", hashes unchanged"))

    floor = Version(preferred[0].version) if preferred else None
    tags = wheel_tags(python, _ARCH, glibc)
    for version_set in source.sets:
        if version_set is source.preferred:
            continue
        try:
            found = complete_set(where, version_set, source.prereleases, known, listings, tags)
        except (IdentityMismatch, NothingInPolicy) as exc:
            lines.append(f"set {version_set.name}: {exc.message}")
            continue
        if found and (floor is None or Version(found[0].version) > floor):
            lines.append(f"newer set within policy: {version_set.name} ({', '.join(c.file for c in found)})")
    return SetReport(channel_id, where, status, tuple(lines), mirror_of)


#: How a download's fix ends; a command that knows the user's own line says it instead.
RUN_AGAIN = "run the command again"

# A lock's file may be torch (0.5-2 GB): each read may wait longer than a listing's.
_FILE_READ_TIMEOUT = 60.0


def fetch_file(url: str, destination: Path) -> None:
    """Write the file at `url` to `destination`, streamed (torch is 0.5-2 GB)."""
    if urlsplit(url).scheme == "file":
        try:
            shutil.copyfile(unquote(urlsplit(url).path), destination)
        except OSError as exc:
            raise _failed(url, exc.strerror or str(exc)) from None
        return

    try:
        with requests.get(url, stream=True, timeout=(CONNECT_TIMEOUT, _FILE_READ_TIMEOUT)) as response:
            if response.status_code != 200:
                raise _failed(url, f"HTTP {response.status_code}")
            with destination.open("wb") as stream:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    stream.write(chunk)
    except requests.RequestException as exc:
        raise _failed(url, type(exc).__name__) from None


def fetch_text(url: str) -> str:
    """A small text file (a wheelhouse's lock) from `url`."""
    if urlsplit(url).scheme in ("", "file"):
        path = Path(unquote(urlsplit(url).path))
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise _failed(url, exc.strerror or str(exc)) from None

    try:
        response = requests.get(url, timeout=(CONNECT_TIMEOUT, _FILE_READ_TIMEOUT))
    except requests.RequestException as exc:
        raise _failed(url, type(exc).__name__) from None
    if response.status_code != 200:
        raise _failed(url, f"HTTP {response.status_code}")
    return response.text


def _failed(url: str, why: str) -> StepFailed:
    if why in (f"HTTP {code}" for code in _REFUSED):
        # The file's URL comes from a lock (or a wheelhouse the lock names): there is no URL
        # of the user's to carry credentials, so ~/.netrc, which requests reads, is the way.
        host = urlsplit(url).hostname or "HOST"
        return StepFailed("download", f"{redact(url)} was refused ({why}): check the credentials",
                          f"give {host}'s user and token in ~/.netrc (machine {host} login USER password TOKEN; "
                          f"never written elsewhere or shown), then {RUN_AGAIN}")
    return StepFailed("download", f"could not fetch {redact(url)} ({why})",
                      f"check that the index or wheelhouse answers, then {RUN_AGAIN}")
