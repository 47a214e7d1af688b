"""Choosing a vendor set from an index's listings: pure, the listings (`ListedFile`, a file as an
index lists it) read by index.py or oci_mirror.py; only a run that reads an index needs either.

The preferred set when the index lists all of it, else the newest complete set within the
source's policy; a listed file with a recorded name and another sha256 is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from jetson_install.base.tags import wheel_rank
from jetson_install.catalog.identity import (
    ChosenFile,
    IdentityMismatch,
    KnownBuild,
    NoBuildForPython,
    NothingInPolicy,
    Resolution,
    VersionSet,
)

if TYPE_CHECKING:
    from packaging.tags import Tag

__all__ = ["ListedFile", "choose_set", "complete_set", "served_pythons"]


@dataclass(frozen=True)
class ListedFile:
    """A file an index lists for a project."""

    filename: str
    url: str
    sha256: Optional[str]
    yanked: bool = False


def choose_set(
    source: str,
    sets: Sequence[VersionSet],
    preferred: VersionSet,
    prereleases: bool,
    builds: Sequence[KnownBuild],
    listings: Mapping[str, Sequence[ListedFile]],
    python: str,
    tags_for: Callable[[str], Sequence["Tag"]],
) -> Resolution:
    """The preferred set when the index lists all of it, else the newest complete set, in
    files whose tags the interpreter's Python `python` ("3.11") installs (`tags_for(python)`).

    Raises IdentityMismatch when a listed file carries a recorded file name with another
    sha256; NoBuildForPython when sets are complete only for other Pythons (naming the tags
    wanted and the Pythons served); NothingInPolicy (naming what the index does have) when
    no set is complete at all.
    """
    known = {build.file: build for build in builds}
    complete = _complete_sets(source, sets, prereleases, known, listings, tags_for(python), python)
    if not complete:
        others = [other for other in served_pythons(listings) if other != python
                  and _complete_sets(source, sets, prereleases, known, listings, tags_for(other), other)]
        if others:
            served = ", ".join(f"cp{other.replace('.', '')}" for other in others)
            wanted = f"cp{python.replace('.', '')}"
            raise NoBuildForPython(
                f"{source} has no complete set within policy for Python {python}: it wanted wheels tagged "
                f"{wanted}-{wanted}, {wanted}-abi3 or py3-none for aarch64, and serves the sets only as "
                f"{served} builds (Python {', '.join(others)})",
                fix=f"use Python {others[-1]}: --python /usr/bin/python{others[-1]}, or a vendor index with {wanted} "
                    "builds: --vendor-index URL",
                python=python, served=tuple(others))
        have = "; ".join(f"{name}: {', '.join(_versions(files)) or 'nothing'}" for name, files in sorted(listings.items()))
        raise NothingInPolicy(
            f"{source} lists no complete set within policy ({', '.join(s.name for s in sets)}); it has {have}",
            fix="use a vendor index with the recorded builds: --vendor-index URL, or the channel's fallback: "
                "--vendor-fallback",
        )
    warnings: List[str] = []
    for version_set, chosen in complete:  # noqa: B007 (the set found is used after the loop)
        if version_set is preferred:
            reason = f"the preferred set {preferred.name} is listed"
            break
    else:
        version_set, chosen = max(complete, key=lambda item: Version(item[1][0].version))
        reason = (f"the preferred set {preferred.name} is not complete on the index; "
                  f"{version_set.name} is the newest complete set within policy")
        warnings.append(f"{source}: {reason}")
    for picked in chosen:
        if not picked.known:
            warnings.append(f"{picked.file} from {source} is not a build wheels-index.toml lists "
                            f"(sha256 {picked.sha256 or 'not served'}); accepted within policy and recorded")
    return Resolution(source, version_set.name, tuple(chosen), reason, tuple(warnings))


def _complete_sets(source: str, sets: Sequence[VersionSet], prereleases: bool, known: Mapping[str, KnownBuild],
                   listings: Mapping[str, Sequence[ListedFile]], tags: Sequence["Tag"],
                   python: str) -> List[Tuple[VersionSet, List[ChosenFile]]]:
    complete = []
    for version_set in sets:
        # A set recorded for newer Pythons is left out for an older one, whatever an index lists
        # (torch 2.15.0 has no cp310 build); the tags then decide among the rest.
        if not version_set.for_python(python):
            continue
        chosen = complete_set(source, version_set, prereleases, known, listings, tags)
        if chosen is not None:
            complete.append((version_set, chosen))
    return complete


def served_pythons(listings: Mapping[str, Sequence[ListedFile]]) -> List[str]:
    """The CPython minors ("3.10") the listed wheels' `cpXY` tags name, oldest first."""
    found = set()
    for files in listings.values():
        for listed in files:
            try:
                file_tags = parse_wheel_filename(listed.filename)[3]
            except InvalidWheelFilename:
                continue
            for tag in file_tags:
                digits = tag.interpreter[2:]
                if tag.interpreter.startswith("cp") and digits.isdigit() and len(digits) >= 2:
                    found.add((int(digits[0]), int(digits[1:])))
    return [f"{major}.{minor}" for major, minor in sorted(found)]


def _versions(files: Sequence[ListedFile]) -> List[str]:
    found = []
    for listed in files:
        try:
            version = str(parse_wheel_filename(listed.filename)[1])
        except InvalidWheelFilename:
            continue
        if version not in found:
            found.append(version)
    return found


def complete_set(source: str, version_set: VersionSet, prereleases: bool, known: Mapping[str, KnownBuild],
              listings: Mapping[str, Sequence[ListedFile]], tags: Sequence["Tag"]) -> Optional[List[ChosenFile]]:
    chosen: List[ChosenFile] = []
    for package in version_set.specifiers:
        candidates = []
        for listed in listings.get(package, ()):
            if listed.yanked or not listed.filename.endswith(".whl"):
                continue
            rank = wheel_rank(listed.filename, tags)
            version = str(parse_wheel_filename(listed.filename)[1])
            if rank is None or not version_set.allows(package, version, prereleases):
                continue
            candidates.append((Version(version), -rank, listed))
        if not candidates:
            return None
        # The file name last: two files may match as well (2.6 and 2.6.0, or the same build with
        # a compressed tag set), and which is taken must not hang on the order the index lists them.
        _, _, best = max(candidates, key=lambda item: (item[0], item[1], item[2].filename))
        build = known.get(best.filename)
        if build is not None and best.sha256 and not build.matches(best.sha256):
            raise IdentityMismatch(
                f"{source} serves {best.filename} with sha256 {best.sha256}, but wheels-index.toml records "
                f"{build.digest} for that file: refusing a different build under a recorded name",
                fix="use a vendor index with the recorded builds: --vendor-index URL; if the vendor re-published it, "
                    "update the build in wheels-index.toml after checking it (jetson-install channels --check)",
            )
        sha256 = best.sha256 or (build.sha256 if build else None)
        # The version as the file spells it (NVIDIA's nv24.08, which PEP 440 normalizes to nv24.8).
        chosen.append(ChosenFile(package, best.filename.split("-")[1], best.filename, best.url,
                                 sha256, build is not None, build.cuda if build else None))
    return chosen
