"""Properties of `decide`, the pure rules that weigh what a root's files said (and what the user
named with --l4t or --soc) into a Platform, over any facts the reader can produce: no root on
disk is built, so each rule is held over thousands of combinations no capture has."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Optional, Tuple
from unittest import mock

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from support import reached

from jetson_install.base.errors import BadInput, InvalidReleaseFile, JetsonInstallError, NotAJetson
from jetson_install.board import root_facts as files
from jetson_install.base.sourced import Sourced
from jetson_install.board.platform import Overrides, Platform, decide
from jetson_install.board.platform_data import platform_data
from jetson_install.board.release_files import L4T, parse_l4t
from jetson_install.board.root_facts import RootFacts

DATA = platform_data()
ROOT = Path("/nowhere/root")  # decide reads nothing, so the root need not exist
L4T_SOURCES = ("--l4t", "JETSON_L4T_VERSION")
SOC_SOURCES = ("--soc", "JETSON_INSTALL_SOC", "JETSON_INSTALL_HOST_SOC")
# Sources that are rules, not files: the release table, a major's family or defaults, this machine.
RULE = re.compile(r"release table|L4T R\d+ family|default for L4T .+|uname")

# Drawing the facts (some twenty fields) is the costly part of each example, so a property
# draws a hundred; the totality test draws more.
PROPERTY = settings(max_examples=100, deadline=None)

KNOWN_RELEASES = sorted(DATA.releases)
l4ts = st.one_of(
    st.sampled_from(KNOWN_RELEASES),
    st.builds(L4T, st.sampled_from(sorted(DATA.majors)), st.integers(0, 9), st.integers(0, 9)),
    st.builds(L4T, st.integers(0, 999), st.integers(0, 999), st.integers(0, 999)),
)
versions = st.builds("{}.{}".format, st.integers(0, 99), st.integers(0, 99))
compatible_entries = st.one_of(
    st.sampled_from([f"nvidia,{soc}" for soc in DATA.socs]),
    st.sampled_from([f"nvidia,p3737-0000+{part}" for part in DATA.modules]),
    st.sampled_from(["nvidia,tegra999", "raspberrypi,4-model-b", "brcm,bcm2711", "nvidia,p3768-0000+p3767-0005-super"]),
    st.text(max_size=20),
)


@st.composite
def release_files(draw: st.DrawFn) -> Tuple[bool, Optional[L4T], Optional[str], Optional[str]]:
    """found, l4t, eabi, problem as the reader leaves them: a missing file, a parsed one, or a broken one."""
    kind = draw(st.sampled_from(["missing", "parsed", "broken"]))
    if kind == "missing":
        return False, None, None, None
    if kind == "parsed":
        return True, draw(l4ts), draw(st.sampled_from([None, "aarch64", "armhf"])), None
    problem = draw(st.sampled_from(["is empty", "is not text", "is not an L4T release banner",
                                    "has no 'R<major> (release), REVISION: <minor>.<patch>' in line 1 ('R36')"]))
    return True, None, None, problem


@st.composite
def root_facts(draw: st.DrawFn) -> RootFacts:
    found, release_l4t, eabi, problem = draw(release_files())
    distro_problem = draw(st.sampled_from([None, None, None, "'utf-8' codec can't decode byte 0xff"]))
    return RootFacts(
        root=ROOT,
        release_found=found,
        release_l4t=release_l4t,
        eabi=eabi,
        release_problem=problem,
        dpkg_l4t=draw(st.none() | l4ts),
        apt_l4t=draw(st.none() | st.sampled_from(sorted({(l4t.major, l4t.minor) for l4t in KNOWN_RELEASES}))
                     | st.tuples(st.integers(0, 999), st.integers(0, 999))),
        compatible=tuple(draw(st.lists(compatible_entries, max_size=3))),
        model=draw(st.none() | st.text(min_size=1, max_size=30)),
        cuda_json=draw(st.none() | versions),
        cuda_txt=draw(st.none() | versions),
        os_release_file=draw(st.sampled_from([None, *files.OS_RELEASE])),
        distro_id="" if distro_problem else draw(st.sampled_from(["ubuntu", "debian", ""])),
        distro_version="" if distro_problem else draw(st.sampled_from(["", "20.04", "22.04", "24.04"]) | versions),
        distro_problem=distro_problem,
        kernel=draw(st.none() | st.sampled_from(["5.15.148-tegra", "6.8.12-1021-tegra"])),
        kernel_arch=draw(st.none() | st.sampled_from(["aarch64", "riscv64"])),
        uname_machine=draw(st.none() | st.sampled_from(["aarch64", "x86_64"])),
        unreadable=tuple(draw(st.lists(st.sampled_from([
            f"{files.DPKG_STATUS} cannot be read (Permission denied); treated as missing",
            f"{files.CUDA_JSON} cannot be read (Permission denied); treated as missing",
        ]), max_size=2))),
    )


def l4t_text(l4t: L4T) -> st.SearchStrategy[str]:
    return st.sampled_from([str(l4t), f"R{l4t}", f" {l4t}\n"] + ([f"{l4t.major}.{l4t.minor}"] if l4t.patch == 0 else []))


valid_l4t_overrides = st.builds(
    Sourced[str],
    l4ts.filter(lambda l4t: l4t.major >= 19).flatmap(l4t_text),
    st.sampled_from(L4T_SOURCES),
)
valid_soc_overrides = st.builds(
    Sourced[str],
    st.sampled_from(sorted(DATA.socs)).flatmap(lambda soc: st.sampled_from([soc, soc.upper(), f" {soc}\n"])),
    st.sampled_from(SOC_SOURCES),
)
valid_overrides = st.builds(Overrides, st.none() | valid_l4t_overrides, st.none() | valid_soc_overrides)
any_overrides = st.builds(
    Overrides,
    st.none() | valid_l4t_overrides | st.builds(Sourced[str], st.text(max_size=12), st.sampled_from(L4T_SOURCES)),
    st.none() | valid_soc_overrides | st.builds(Sourced[str], st.text(max_size=12), st.sampled_from(SOC_SOURCES)),
)


def says_jetson(facts: RootFacts) -> bool:
    return (facts.release_found or facts.dpkg_l4t is not None or facts.apt_l4t is not None
            or any(entry.startswith("nvidia,tegra") for entry in facts.compatible))


def jetpack_number(jetpack: str) -> Tuple[int, ...]:
    """"6.1 rev1" -> (6, 1); "5.0 PRE-DP" -> (5, 0)."""
    return tuple(int(part) for part in jetpack.split()[0].split("."))


def cuda_number(cuda: str) -> Tuple[int, int]:
    major, minor = cuda.split(".")
    return int(major), int(minor)


# One shared default (Overrides is immutable): a call in a default argument is evaluated once anyway.
NO_OVERRIDES = Overrides()


def decided(facts: RootFacts, overrides: Overrides = NO_OVERRIDES) -> Platform:
    platform = decide(facts, overrides, DATA)
    reached(f"a platform: jetson {platform.jetson}, l4t from {platform.sources.get('l4t', 'nowhere')}")
    return platform


def decided_or_error(facts: RootFacts, overrides: Overrides = NO_OVERRIDES) -> object:
    try:
        return decided(facts, overrides)
    except JetsonInstallError as error:
        reached(f"refused: {type(error).__name__}")
        return error


def decided_offline(facts: RootFacts, overrides: Overrides) -> Platform:
    """decide, with every way to read a file or ask the machine made to fail the test."""
    forbidden = AssertionError("decide touched the file system or the machine")
    with mock.patch("builtins.open", side_effect=forbidden), mock.patch("os.open", side_effect=forbidden), \
            mock.patch("os.stat", side_effect=forbidden), mock.patch("os.lstat", side_effect=forbidden), \
            mock.patch("os.uname", side_effect=forbidden):
        return decide(facts, overrides, DATA)


@settings(max_examples=300, deadline=None)
@given(root_facts(), any_overrides)
def test_decide_is_total_and_reads_nothing(facts: RootFacts, overrides: Overrides) -> None:
    """Any facts and overrides give a Platform that `detect --json` can print, or one of the
    project's errors, whose message is one line with a fix; decide never touches a file."""
    try:
        platform = decided_offline(facts, overrides)
    except JetsonInstallError as error:
        event(f"refused: {type(error).__name__}")
        # InvalidReleaseFile is a BadInput; an error is one of the outcomes under test, not the only one.
        assert isinstance(error, (BadInput, NotAJetson)), error  # noqa: PT017
        assert "\n" not in error.message and error.fix, error.message  # noqa: PT017
        return
    assert platform.jetson and platform.root == str(ROOT)
    assert json.loads(json.dumps(platform.to_json())) == platform.to_json()
    assert decided(facts, overrides) == platform  # the same facts, the same answer


@PROPERTY
@given(root_facts())
def test_nothing_jetson_under_the_root_and_no_release_named_is_not_a_jetson(facts: RootFacts) -> None:
    if says_jetson(facts):
        with_files = decided_or_error(facts)
        assert not isinstance(with_files, NotAJetson)
    else:
        with pytest.raises(NotAJetson, match=f"no Jetson found under {ROOT}"):
            decided(facts)
        assert decided(facts, Overrides(Sourced("36.4.3", "--l4t"))).l4t == L4T(36, 4, 3)


@PROPERTY
@given(root_facts(), valid_l4t_overrides, st.none() | valid_soc_overrides)
def test_valid_overrides_always_answer_and_win_over_every_file(
        facts: RootFacts, l4t: Sourced[str], soc: Optional[Sourced[str]]) -> None:
    platform = decided(facts, Overrides(l4t, soc))  # no error: a named release needs no file
    assert platform.l4t == parse_l4t(l4t.value) and platform.sources["l4t"] == l4t.source
    on_disk = facts.dpkg_l4t or facts.release_l4t
    overridden = any("overrides L4T" in warning for warning in platform.warnings)
    assert overridden == (on_disk is not None and on_disk != platform.l4t)
    if soc is not None:
        assert platform.soc == soc.value.strip().lower() and platform.sources["soc"] == soc.source
        assert platform.family == DATA.socs[platform.soc].family
        assert platform.compute_capability == DATA.socs[platform.soc].compute_capability


@PROPERTY
@given(root_facts(), st.text(max_size=12), st.sampled_from(SOC_SOURCES))
def test_a_soc_override_that_is_no_soc_is_refused_before_anything_else(facts: RootFacts, value: str, source: str) -> None:
    assume(value.strip().lower() not in DATA.socs)
    with pytest.raises(BadInput) as caught:
        decided(facts, Overrides(Sourced("36.4.3", "--l4t"), Sourced(value, source)))
    assert caught.value.message.startswith(f"{source} {value!r} is not a Jetson SoC")


# Which file each file source names, and what that file said.
def said_by(facts: RootFacts, source: str) -> object:
    return {
        files.RELEASE_FILE: facts.release_l4t,
        files.DPKG_STATUS: facts.dpkg_l4t,
        files.APT_SOURCE: facts.apt_l4t and L4T(*facts.apt_l4t, 0),
        files.CUDA_JSON: facts.cuda_json,
        files.CUDA_TXT: facts.cuda_txt,
        files.KERNEL: facts.kernel,
        files.KERNEL_ARCH: facts.kernel_arch,
        files.DEBIAN_VERSION: (facts.os_release_file is None and facts.distro_version) or None,
        **{name: (facts.os_release_file == name and facts.distro_version) or None for name in files.OS_RELEASE},
    }.get(source)


@PROPERTY
@given(root_facts(), valid_overrides)
def test_each_value_from_a_file_is_what_that_file_said(facts: RootFacts, overrides: Overrides) -> None:
    """The source of each value is an override the user gave, a rule, or a file that was read
    and said exactly that value."""
    platform = decided_or_error(facts, overrides)
    assume(isinstance(platform, Platform))
    assert isinstance(platform, Platform)
    given_sources = {o.source for o in (overrides.l4t, overrides.soc) if o is not None}
    for key, source in platform.sources.items():
        value = getattr(platform, key)
        if source in given_sources or RULE.fullmatch(source):
            continue
        if source == files.COMPATIBLE:
            assert f"nvidia,{value}" in facts.compatible, (key, value)
        else:
            assert said_by(facts, source) == value and value is not None, (key, source, value)


@PROPERTY
@given(root_facts())
def test_the_l4t_source_is_the_first_file_that_gives_one(facts: RootFacts) -> None:
    """nvidia-l4t-core, then the release file, then the apt source (major.minor only)."""
    platform = decided_or_error(facts)
    order = [(files.DPKG_STATUS, facts.dpkg_l4t), (files.RELEASE_FILE, facts.release_l4t),
             (files.APT_SOURCE, facts.apt_l4t and L4T(*facts.apt_l4t, 0))]
    first = next(((source, l4t) for source, l4t in order if l4t is not None), None)
    if first is None:
        if facts.release_problem is not None:
            assert isinstance(platform, InvalidReleaseFile)
            assert str(ROOT / files.RELEASE_FILE) in platform.message and "--l4t 36.4.3" in (platform.fix or "")
        else:
            assert isinstance(platform, NotAJetson) or (isinstance(platform, Platform) and platform.l4t is None)
        return
    assert isinstance(platform, Platform)
    assert (platform.sources["l4t"], platform.l4t) == first
    if facts.release_problem is not None:  # the broken file is still named, with where the release came from
        assert f"{files.RELEASE_FILE} {facts.release_problem}; L4T taken from {first[0]}" in platform.warnings


@PROPERTY
@given(root_facts(), st.none() | valid_l4t_overrides)
def test_the_jetpack_is_the_release_tables_else_the_majors_family(facts: RootFacts, l4t: Optional[Sourced[str]]) -> None:
    platform = decided_or_error(facts, Overrides(l4t))
    assume(isinstance(platform, Platform) and platform.l4t is not None)
    assert isinstance(platform, Platform) and platform.l4t is not None
    major = DATA.majors.get(platform.l4t.major)
    exact = platform.sources["l4t"] != files.APT_SOURCE
    if major is None:
        assert platform.jetpack is None
        assert any(f"L4T R{platform.l4t.major} is not known" in warning for warning in platform.warnings)
    elif exact and platform.l4t in DATA.releases:
        assert platform.jetpack == DATA.releases[platform.l4t] and platform.sources["jetpack"] == "release table"
    else:
        assert platform.jetpack == major.jetpack_family
        assert platform.sources["jetpack"] == f"L4T R{platform.l4t.major} family"


# A root where no file says anything (decide calls it not a Jetson).
NOTHING = RootFacts(root=ROOT, release_found=False, release_l4t=None, eabi=None, release_problem=None, dpkg_l4t=None,
                    apt_l4t=None, compatible=(), model=None, cuda_json=None, cuda_txt=None, os_release_file=None,
                    distro_id="", distro_version="", distro_problem=None, kernel=None, kernel_arch=None,
                    uname_machine=None)


def on_release(l4t: L4T) -> RootFacts:
    """A root whose release file names `l4t`, and no other file says anything."""
    return dataclasses.replace(NOTHING, release_found=True, release_l4t=l4t)


def test_a_later_release_never_gets_an_earlier_jetpack() -> None:
    """Over the whole release table, in L4T order."""
    releases = KNOWN_RELEASES
    jetpacks = [decided(on_release(l4t)).jetpack for l4t in releases]
    for (older, old), (newer, new) in zip(zip(releases, jetpacks), zip(releases[1:], jetpacks[1:])):
        assert old is not None and new is not None
        assert jetpack_number(old) <= jetpack_number(new), (older, old, newer, new)


def test_a_point_release_keeps_its_majors_jetpack_major() -> None:
    """A point release in the table and its major's family ("6.x", what an unlisted one gets)
    name the same JetPack major."""
    for l4t in [*KNOWN_RELEASES, *(L4T(major, 99, 0) for major in DATA.majors)]:
        jetpack = decided(on_release(l4t)).jetpack
        assert jetpack is not None and jetpack.split(".")[0] == DATA.majors[l4t.major].jetpack_family.split(".")[0], l4t


def test_without_a_cuda_file_a_later_release_never_gets_an_older_cuda() -> None:
    releases = sorted(L4T(major, minor, 0) for major in DATA.majors for minor in range(12))
    cudas = [decided(on_release(l4t)).cuda for l4t in releases]
    for (older, old), (newer, new) in zip(zip(releases, cudas), zip(releases[1:], cudas[1:])):
        assert old is not None and new is not None
        assert cuda_number(old) <= cuda_number(new), (older, old, newer, new)
    assert decided(on_release(L4T(36, 4, 3))).sources["cuda"] == "default for L4T 36.4"


def test_an_apt_source_alone_gives_the_majors_family_never_a_point_release() -> None:
    """r36.4 in the apt source may be 36.4.0 or 36.4.7: the JetPack is the family's, with a warning."""
    for major, minor in sorted({(l4t.major, l4t.minor) for l4t in KNOWN_RELEASES}):
        platform = decided(dataclasses.replace(NOTHING, apt_l4t=(major, minor)))
        assert (platform.l4t, platform.sources["l4t"]) == (L4T(major, minor, 0), files.APT_SOURCE)
        assert platform.jetpack == DATA.majors[major].jetpack_family, (major, minor)
        assert any(f"only L4T {major}.{minor} is known" in warning for warning in platform.warnings)


def test_a_device_tree_alone_gives_the_family_and_its_cuda_kind() -> None:
    """No release anywhere: Thor's CUDA is sbsa on every release it has, any other family's tegra,
    and an unknown Tegra SoC's unknown; the warning asks for --l4t."""
    for soc, kind in [*((soc, "sbsa" if facts.family == "Thor" else "tegra") for soc, facts in DATA.socs.items()),
                      ("tegra999", None)]:
        platform = decided(dataclasses.replace(NOTHING, compatible=(f"nvidia,{soc}",)))
        assert (platform.l4t, platform.kind) == (None, kind), soc
        assert any("the L4T release is unknown" in warning and "pass --l4t" in warning for warning in platform.warnings)


@PROPERTY
@given(root_facts())
def test_the_installed_cuda_wins_over_the_releases_default(facts: RootFacts) -> None:
    platform = decided_or_error(facts)
    assume(isinstance(platform, Platform))
    assert isinstance(platform, Platform)
    if facts.cuda_json or facts.cuda_txt:
        assert platform.cuda == (facts.cuda_json or facts.cuda_txt)


@PROPERTY
@given(root_facts(), st.none() | valid_soc_overrides)
def test_the_cuda_kind_follows_the_l4t_major_then_the_family(facts: RootFacts, soc: Optional[Sourced[str]]) -> None:
    """L4T's own CUDA ("tegra") up to R36, the Arm-server CUDA ("sbsa") from R38 on; with no
    release known, Thor is sbsa and any other family tegra."""
    platform = decided_or_error(facts, Overrides(soc=soc))
    assume(isinstance(platform, Platform))
    assert isinstance(platform, Platform)
    if platform.l4t is not None:
        assert platform.kind == ("tegra" if platform.l4t.major < 38 else "sbsa")
    elif platform.family is not None:
        assert platform.kind == ("sbsa" if platform.family == "Thor" else "tegra")
    else:
        assert platform.kind is None


@PROPERTY
@given(root_facts(), valid_overrides)
def test_unreadable_files_are_named_last_in_the_order_read(facts: RootFacts, overrides: Overrides) -> None:
    platform = decided_or_error(facts, overrides)
    assume(isinstance(platform, Platform))
    assert isinstance(platform, Platform)
    assert platform.warnings[len(platform.warnings) - len(facts.unreadable):] == facts.unreadable


@PROPERTY
@given(root_facts())
def test_the_named_ubuntu_wins_over_the_majors_default(facts: RootFacts) -> None:
    platform = decided_or_error(facts)
    assume(isinstance(platform, Platform))
    assert isinstance(platform, Platform)
    if facts.distro_id == "ubuntu" and facts.distro_version:
        assert platform.ubuntu == facts.distro_version
    else:
        major = DATA.majors.get(platform.l4t.major) if platform.l4t else None
        assert platform.ubuntu == (major.ubuntu if major else None)
    if facts.distro_problem is not None:
        assert any("Ubuntu assumed from L4T" in warning for warning in platform.warnings)
