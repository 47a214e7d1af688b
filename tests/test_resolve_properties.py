"""Properties of `choose_set`, the rule that picks a vendor source's set from what its index
lists: over any listing (files missing, yanked, for other Pythons, re-published with another
sha256, listed in any order), the preferred set is taken whenever it is complete, the chosen
set is always one the policy allows, and no file is taken whose sha256 differs from the build
the catalog records under its name."""

from __future__ import annotations

import random
from typing import Dict, List, Tuple, Union

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from support import present

from jetson_install.catalog.identity import (
    IdentityMismatch,
    KnownBuild,
    NoBuildForPython,
    NothingInPolicy,
    Resolution,
    VersionSet,
)
from jetson_install.catalog.resolve import ListedFile, choose_set

# Each example resolves up to four sets (and again for the other Pythons when none is complete):
# fifty keep the file within the fast tier.
PROPERTY = settings(max_examples=50, deadline=None)
SOURCE = "https://mirror.example/jp6/cu126"
PYTHONS = ("3.10", "3.10", "3.11", "3.12", "3.8")  # JetPack 6's Python the most, and JetPack 5's
# NVIDIA's builds are pre-releases (2.4.0a0+...); a version may be spelled two ways (2.6, 2.6.0).
PACKAGES = {"torch": ("2.5.0", "2.5.0a0+872d972e41.nv24.08", "2.6.0", "2.6", "2.7.0a0", "2.8.0"),
            "torchvision": ("0.20.0", "0.21.0", "0.22.0", "0.22", "0.22.1a0", "0.23.0")}
# One file may carry several tags (PEP 425's compressed tag sets), ranking as well as another.
FILE_TAGS = ("cp310-cp310-linux_aarch64", "cp311-cp311-linux_aarch64", "cp312-cp312-linux_aarch64", "py3-none-any", "py3-none-any",
             "cp310-cp310-linux_x86_64", "cp310-cp310-linux_aarch64.manylinux_2_35_aarch64", "cp310.cp311-abi3-linux_aarch64",
             "cp38-cp38-linux_aarch64")
DIGESTS = tuple(character * 64 for character in "abcd")


def tags_for(python: str) -> List[Tag]:
    """The tags an aarch64 CPython `python` installs, best first (a stand-in for packaging's)."""
    cp = "cp" + python.replace(".", "")
    return [Tag(cp, cp, "linux_aarch64"), Tag(cp, "abi3", "linux_aarch64"), Tag("py3", "none", "any")]


def version_sets(listed: Dict[str, List[ListedFile]]) -> st.SearchStrategy[VersionSet]:
    """A set the source declares: mostly of versions the index lists, now and then of others."""
    def versions(package: str) -> st.SearchStrategy[str]:
        there = sorted({str(parse_wheel_filename(file.filename)[1]) for file in listed[package]})
        return (st.sampled_from(there) if there else st.nothing()) | st.sampled_from(PACKAGES[package])
    return st.builds(
        lambda torch, vision, python: VersionSet({"torch": f"=={torch}", "torchvision": vision}, python=python),
        versions("torch"), versions("torchvision").map("=={}".format) | st.just(">=0.21,<0.23"),
        st.sampled_from([None, None, ">=3.11"]))


@st.composite
def listings(draw: st.DrawFn) -> Dict[str, List[ListedFile]]:
    """What an index lists for each package: each file once, with or without its sha256, some yanked."""
    found: Dict[str, List[ListedFile]] = {}
    for package, versions in PACKAGES.items():
        names = draw(st.lists(st.tuples(st.sampled_from(versions), st.sampled_from(FILE_TAGS)), unique=True, min_size=1, max_size=8))
        if draw(st.booleans()):  # a file's twin, as good a match: the same build with a compressed tag set
            names += [(version, f"{tag}.manylinux_2_35_aarch64") for version, tag in names
                      if tag.endswith("-linux_aarch64") and (version, f"{tag}.manylinux_2_35_aarch64") not in names]
        found[package] = [ListedFile(f"{package}-{version}-{tag}.whl", f"{SOURCE}/{package}-{version}-{tag}.whl",
                                     draw(st.none() | st.sampled_from(DIGESTS)), draw(st.booleans().map(lambda b: b and draw(st.booleans()))))
                          for version, tag in names]
    return found


Case = Tuple[List[VersionSet], int, bool, List[KnownBuild], Dict[str, List[ListedFile]], str]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A source's sets, the index of its preferred one, whether pre-releases count, the builds
    the catalog records (a listed file's name, each with a digest that may differ from the
    index's), what the index lists, and the interpreter's Python."""
    listed = draw(listings())
    sets = draw(st.lists(version_sets(listed), min_size=1, max_size=4))
    served = {listed_file.filename: listed_file.sha256 for files in listed.values() for listed_file in files}
    recorded = draw(st.lists(st.sampled_from(sorted(served)), unique=True)) if served else []
    # Mostly the build the index serves; now and then one re-published under its name.
    builds = [KnownBuild(name, sha256=draw(st.sampled_from(DIGESTS)) if draw(st.integers(0, 4)) == 0 or not served[name]
                         else served[name]) for name in recorded]
    return sets, draw(st.integers(0, len(sets) - 1)), draw(st.booleans()), builds, listed, draw(st.sampled_from(PYTHONS))


def choose(case: Case) -> Union[Resolution, Exception]:
    """choose_set's answer, or its refusal; the branch it took recorded (hypothesis.event)."""
    sets, preferred, prereleases, builds, listed, python = case
    try:
        chosen = choose_set(SOURCE, sets, sets[preferred], prereleases, builds, listed, python, tags_for)
    except (NothingInPolicy, IdentityMismatch) as refused:  # NoBuildForPython is a NothingInPolicy
        event(f"refused: {type(refused).__name__}")
        return refused
    taken = "the preferred set" if chosen.set_name == sets[preferred].name else "a fallback set"
    event(f"{taken}; files not recorded: {sum(not file.known for file in chosen.files)}")
    return chosen


def named_pythons(listed: Dict[str, List[ListedFile]]) -> List[str]:
    """The CPython minors the listed files' cpXY tags name, oldest first."""
    found = {tag.interpreter[2:] for files in listed.values() for file in files
             for tag in parse_wheel_filename(file.filename)[3] if tag.interpreter.startswith("cp")}
    return sorted((f"{digits[0]}.{digits[1:]}" for digits in found), key=Version)


def rank(filename: str, python: str) -> int:
    """How good a match the file's best tag is for `python`: 0 the best."""
    return min(tags_for(python).index(tag) for tag in parse_wheel_filename(filename)[3] if tag in tags_for(python))


def installable(listed: ListedFile, version_set: VersionSet, package: str, python: str, prereleases: bool) -> bool:
    """Whether the set may take the file for `python`: listed, not yanked, its tags install there,
    its version within the set's specifier (a pre-release only where the source allows them)."""
    _, version, _, file_tags = parse_wheel_filename(listed.filename)
    return (not listed.yanked and any(tag in tags_for(python) for tag in file_tags)
            and (prereleases or not version.is_prerelease)
            and SpecifierSet(version_set.specifiers[package]).contains(version, prereleases=True))


def complete(version_set: VersionSet, listed: Dict[str, List[ListedFile]], python: str, prereleases: bool) -> bool:
    return version_set.for_python(python) and all(
        any(installable(file, version_set, package, python, prereleases) for file in listed.get(package, ()))
        for package in version_set.specifiers)


@PROPERTY
@given(cases())
def test_the_preferred_set_is_taken_whenever_it_is_complete(case: Case) -> None:
    sets, preferred, prereleases, _, listed, python = case
    chosen = choose(case)
    if complete(sets[preferred], listed, python, prereleases):
        # Unless a file of some set is a recorded build under another sha256: then nothing is taken.
        assert isinstance(chosen, IdentityMismatch) or (isinstance(chosen, Resolution) and (
            chosen.set_name == sets[preferred].name and chosen.reason == f"the preferred set {chosen.set_name} is listed")), chosen
    elif isinstance(chosen, Resolution):
        # Else the newest complete set within policy.
        newest = max(Version(version_set.specifiers["torch"][2:]) for version_set in sets
                     if complete(version_set, listed, python, prereleases))
        assert Version(chosen.pins["torch"]) == newest


@PROPERTY
@given(cases())
def test_the_chosen_set_is_always_a_complete_set_the_policy_allows(case: Case) -> None:
    sets, _, prereleases, _, listed, python = case
    chosen = choose(case)
    if isinstance(chosen, NothingInPolicy):
        assert not any(complete(version_set, listed, python, prereleases) for version_set in sets)
        # Complete for other Pythons the files name: said so, newest last, and the newest offered.
        others = [other for other in named_pythons(listed) if other != python
                  and any(complete(version_set, listed, other, prereleases) for version_set in sets)]
        assert isinstance(chosen, NoBuildForPython) == bool(others), chosen
        if isinstance(chosen, NoBuildForPython):
            assert chosen.python == python and list(chosen.served) == others
            assert present(chosen.fix).startswith(f"use Python {others[-1]}: --python /usr/bin/python{others[-1]}")
        return
    assert isinstance(chosen, (Resolution, IdentityMismatch))
    if isinstance(chosen, IdentityMismatch):
        return
    candidates = [version_set for version_set in sets if version_set.name == chosen.set_name
                  and complete(version_set, listed, python, prereleases)]
    assert candidates, chosen
    assert any({file.name for file in chosen.files} == set(version_set.specifiers) and all(
        any(listed_file.filename == file.file and installable(listed_file, version_set, file.name, python, prereleases)
            for listed_file in listed[file.name]) for file in chosen.files) for version_set in candidates)


@PROPERTY
@given(cases())
def test_no_file_is_taken_whose_sha256_differs_from_its_recorded_build(case: Case) -> None:
    _, _, _, builds, listed, _ = case
    recorded = {build.file: build for build in builds}
    chosen = choose(case)
    if isinstance(chosen, IdentityMismatch):
        # Refused only for a real difference: a listed file under a recorded name with another sha256.
        assert any(file.filename in recorded and file.sha256 and not recorded[file.filename].matches(file.sha256)
                   for files in listed.values() for file in files)
        return
    if isinstance(chosen, Resolution):
        for file in chosen.files:
            build = recorded.get(file.file)
            assert file.known == (build is not None)
            if build is not None:
                assert file.sha256 is not None and build.matches(file.sha256)
            # The index's sha256, else the recorded build's: what the fetch step checks the file by.
            served = next(listed_file.sha256 for listed_file in listed[file.name] if listed_file.filename == file.file)
            assert file.sha256 == (served or (build.sha256 if build is not None else None))
        # A warning names each file that is not a recorded build, and no other.
        unrecorded = [warning.split(" from ", 1)[0] for warning in chosen.warnings
                      if "is not a build wheels-index.toml lists" in warning]
        assert sorted(unrecorded) == sorted(file.file for file in chosen.files if not file.known), chosen.warnings


@PROPERTY
@given(cases(), st.randoms(use_true_random=False))
def test_the_choice_does_not_depend_on_the_order_the_index_lists_files_in(case: Case, shuffle: random.Random) -> None:
    sets, preferred, prereleases, builds, listed, python = case
    reordered = {package: shuffle.sample(files, len(files)) for package, files in reversed(list(listed.items()))}
    first, again = choose(case), choose((sets, preferred, prereleases, builds, reordered, python))
    if isinstance(first, Exception):
        assert type(again) is type(first)
    else:
        assert again == first


@PROPERTY
@given(cases())
def test_each_package_takes_its_newest_allowed_version_in_the_best_tags_listed(case: Case) -> None:
    # Of the files a set may take for a package, the newest version, and of that version the
    # file whose tags suit the interpreter best (cp310 before abi3 before py3-none-any).
    sets, _, prereleases, _, listed, python = case
    chosen = choose(case)
    if not isinstance(chosen, Resolution):
        return
    version_set = next(version_set for version_set in sets if version_set.name == chosen.set_name
                       and complete(version_set, listed, python, prereleases))
    for file in chosen.files:
        allowed = [listed_file for listed_file in listed[file.name]
                   if installable(listed_file, version_set, file.name, python, prereleases)]
        best = max((parse_wheel_filename(listed_file.filename)[1], -rank(listed_file.filename, python))
                   for listed_file in allowed)
        assert (parse_wheel_filename(file.file)[1], -rank(file.file, python)) == best, (file, allowed)
        # The version as the file spells it (NVIDIA's nv24.08, which PEP 440 would make nv24.8).
        assert file.version == file.file.split("-")[1] and chosen.pins[file.name] == file.version
        event(f"{file.name}: files allowed {min(len(allowed), 3)}+")


@st.composite
def fallbacks(draw: st.DrawFn) -> Case:
    """Sets of which several are complete and the preferred one is not (its torch is not
    listed), in any order: a fallback is taken among them."""
    versions = draw(st.lists(st.sampled_from(["2.5.0", "2.6.0", "2.7.0", "2.8.0"]), min_size=2, max_size=4, unique=True))
    vision = draw(st.sampled_from(["0.20.0", "0.21.0"]))
    listed = {"torch": [ListedFile(f"torch-{version}-cp310-cp310-linux_aarch64.whl", f"{SOURCE}/torch-{version}.whl", None)
                        for version in versions],
              "torchvision": [ListedFile(f"torchvision-{vision}-py3-none-any.whl", f"{SOURCE}/torchvision.whl", None)]}
    preferred = VersionSet({"torch": "==2.9.0", "torchvision": f"=={vision}"})
    sets = draw(st.permutations([VersionSet({"torch": f"=={version}", "torchvision": f"=={vision}"})
                                 for version in versions] + [preferred]))
    return sets, sets.index(preferred), False, [], listed, "3.10"


@PROPERTY
@given(fallbacks())
def test_without_the_preferred_set_the_newest_complete_set_is_taken_and_said(case: Case) -> None:
    sets, preferred, _, _, listed, _ = case
    chosen = choose(case)
    assert isinstance(chosen, Resolution), chosen
    newest = max(Version(file.filename.split("-")[1]) for file in listed["torch"])
    event(f"complete sets: {len(listed['torch'])}")
    assert Version(chosen.pins["torch"]) == newest
    assert chosen.reason == (f"the preferred set {sets[preferred].name} is not complete on the index; "
                             f"{chosen.set_name} is the newest complete set within policy")
    assert f"{SOURCE}: {chosen.reason}" in chosen.warnings


def test_of_two_files_as_good_the_same_is_taken_in_either_order() -> None:
    # Found by the property above: a build listed also with a compressed tag set ranks the same.
    plain = ListedFile("torch-2.6.0-cp310-cp310-linux_aarch64.whl", f"{SOURCE}/a.whl", None)
    compressed = ListedFile("torch-2.6.0-cp310-cp310-linux_aarch64.manylinux_2_35_aarch64.whl", f"{SOURCE}/b.whl", None)
    vision = ListedFile("torchvision-0.21.0-py3-none-any.whl", f"{SOURCE}/c.whl", None)
    sets = [VersionSet({"torch": "==2.6.0", "torchvision": "==0.21.0"})]
    taken = {str(choose_set(SOURCE, sets, sets[0], False, [], {"torch": files, "torchvision": [vision]}, "3.10", tags_for)
                 .files[0].file) for files in ([plain, compressed], [compressed, plain])}
    assert len(taken) == 1


# Cases the fixed budget above rarely draws, each of which a hand mutant of resolve.py survived.
def wheel(name: str) -> ListedFile:
    return ListedFile(name, f"{SOURCE}/{name}", None)


VISION = wheel("torchvision-0.21.0-py3-none-any.whl")


def test_a_python_without_builds_is_offered_the_newest_python_served() -> None:
    listed = {"torch": [wheel("torch-2.6.0-cp311-cp311-linux_aarch64.whl"), wheel("torch-2.6.0-cp312-cp312-linux_aarch64.whl")],
              "torchvision": [VISION]}
    only = VersionSet({"torch": "==2.6.0", "torchvision": "==0.21.0"})
    with pytest.raises(NoBuildForPython) as refused:
        choose_set(SOURCE, [only], only, False, [], listed, "3.10", tags_for)
    assert refused.value.served == ("3.11", "3.12")
    assert present(refused.value.fix).startswith("use Python 3.12: --python /usr/bin/python3.12, ")


def test_the_newest_version_wins_over_a_better_tag_and_of_one_version_the_best_tag() -> None:
    listed = {"torch": [wheel("torch-2.5.0-cp310-cp310-linux_aarch64.whl"), wheel("torch-2.6.0-py3-none-any.whl"),
                        wheel("torch-2.6.0-cp310-abi3-linux_aarch64.whl")],
              "torchvision": [VISION]}
    allowed = VersionSet({"torch": ">=2.5,<2.7", "torchvision": "==0.21.0"})
    chosen = choose_set(SOURCE, [allowed], allowed, False, [], listed, "3.10", tags_for)
    assert [file.file for file in chosen.files] == ["torch-2.6.0-cp310-abi3-linux_aarch64.whl", VISION.filename]


def test_nvidias_version_is_kept_as_its_file_spells_it() -> None:
    name = "torch-2.5.0a0+872d972e41.nv24.08-cp310-cp310-linux_aarch64.whl"
    nvidia = VersionSet({"torch": "==2.5.0a0+872d972e41.nv24.08", "torchvision": "==0.21.0"})
    chosen = choose_set(SOURCE, [nvidia], nvidia, True, [], {"torch": [wheel(name)], "torchvision": [VISION]}, "3.10",
                        tags_for)
    assert chosen.pins["torch"] == "2.5.0a0+872d972e41.nv24.08" and chosen.files[0].version == chosen.pins["torch"]
