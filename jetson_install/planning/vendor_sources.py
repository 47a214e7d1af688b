"""The vendor set a plan takes, read across a source's indexes: its own (or --vendor-index), then
its mirrors, in order, for the same recorded builds; the same files from the next source when one
fails to deliver them; and, for a source not read live, the preferred set as the catalog records it.
It chooses (catalog/resolve.py) from the listings tools/index.py reads; it talks no HTTP itself.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote

from packaging.utils import parse_wheel_filename

from jetson_install.base.errors import IndexRefused, IndexUnreachable, JetsonInstallError
from jetson_install.base.tags import wheel_tags
from jetson_install.catalog.catalog import VendorSource
from jetson_install.catalog.identity import (
    ChosenFile,
    IdentityMismatch,
    NoBuildForPython,
    NothingInPolicy,
    Resolution,
)
from jetson_install.catalog.resolve import ListedFile, choose_set
from jetson_install.tools.index import recorded_url, source_listings

__all__ = ["ARCH", "resolve", "sources_in_order", "same_files_elsewhere", "no_longer_served", "recorded_only",
           "offline_resolution"]

#: The vendor builds are for Jetson boards, and a preflight runs only on aarch64 (preflight.require_aarch64).
ARCH = "aarch64"


def sources_in_order(source: VendorSource, index: Optional[str]) -> Tuple[str, ...]:
    """Where the vendor set is looked for, in order: `index` (the source's own, or the one
    --vendor-index gave), then the source's mirrors; none for a source not read live."""
    if index is None:
        return ()
    return tuple(dict.fromkeys((index, *(mirror.value for mirror in source.mirrors))))


def resolve(source: VendorSource, index: Optional[str], python: str, glibc: str,
            allow_insecure: bool = False) -> Resolution:
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
        return _choose(source, order[0], source_listings(source, order[0], allow_insecure), python, glibc, first=True)
    passed: List[Tuple[str, str]] = []  # (source, what it answered), for the reason and the error
    fallback: Optional[Resolution] = None  # the policy's choice on the first source that has any set
    failures: List[JetsonInstallError] = []
    for position, where in enumerate(order):
        shown = recorded_url(where)
        try:
            resolution = _choose(source, where, source_listings(source, where, allow_insecure), python, glibc, first=position == 0)
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
                         failed: str, allow_insecure: bool = False) -> Tuple[Optional[Resolution], Tuple[str, ...]]:
    """The files of `resolution` (the same names and sha256) from the next source after the
    one that failed to deliver them (`failed`, a file cut short, an HTTP error), with what
    each source passed over answered; (None, answers) when no later source serves them all."""
    order = [recorded_url(where) for where in sources_in_order(source, index)]
    by_shown = dict(zip(order, sources_in_order(source, index)))
    later = order[order.index(failed) + 1:] if failed in order else []
    answers: List[str] = []
    for shown in later:
        try:
            listings = source_listings(source, by_shown[shown], allow_insecure)
        except (IndexUnreachable, IndexRefused) as exc:
            answers.append(f"{shown}: {_answer(exc)}")
            continue
        files = []
        for chosen in resolution.files:
            listed = _listed(chosen, listings.get(chosen.name, ())) if chosen.sha256 else None
            if listed is None:
                break
            files.append(dataclasses.replace(chosen, url=listed.url))
        else:
            reason = f"{resolution.reason}; the same files (by sha256) from {shown}, as {failed} failed to deliver them"
            return dataclasses.replace(resolution, source=shown, files=tuple(files), reason=reason), tuple(answers)
        answers.append(f"{shown}: does not serve all of {', '.join(c.file for c in resolution.files)}")
    return None, tuple(answers)


def no_longer_served(source: VendorSource, index: Optional[str], resolution: Resolution) -> Tuple[str, ...]:
    """The files of `resolution` the source it was taken from no longer lists under their name
    with their sha256 (a saved plan's set, before it is installed); none where every one is there,
    where the set names no file (a range left to uv), or where that source does not answer (the
    install then asks the sources after it)."""
    by_shown = {recorded_url(where): where for where in sources_in_order(source, index)}
    where = by_shown.get(resolution.source)
    named = [chosen for chosen in resolution.files if chosen.url]
    if where is None or not named:
        return ()
    try:
        listings = source_listings(source, where)
    except (IndexUnreachable, IndexRefused):
        return ()
    return tuple(chosen.file for chosen in named if _listed(chosen, listings.get(chosen.name, ())) is None)


def _listed(chosen: ChosenFile, listed: Sequence[ListedFile]) -> Optional[ListedFile]:
    """The listing of `chosen`'s file: its name, and its sha256 where both give one."""
    return next((item for item in listed if item.filename == chosen.file
                 and (not chosen.sha256 or (item.sha256 or chosen.sha256) == chosen.sha256)), None)


def _choose(source: VendorSource, index: str, listings: Dict[str, List[ListedFile]], python: str, glibc: str,
            first: bool) -> Resolution:
    """The set `index`'s listings give; a mirror (not `first`) counts only the files it serves
    under a recorded name with a sha256 that can be checked: it never brings in another build."""
    if not first:
        listings = recorded_only(source, listings)
    return choose_set(recorded_url(index), source.sets, source.preferred, source.prereleases, source.builds,
                      listings, python, lambda other: wheel_tags(other, ARCH, glibc))


def recorded_only(source: VendorSource, listings: Dict[str, List[ListedFile]]) -> Dict[str, List[ListedFile]]:
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
