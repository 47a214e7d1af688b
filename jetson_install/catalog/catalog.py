"""wheels-index.toml -> Catalog: the channels (and their vendor sources) and the targets.

The file's shape is its schema's (wheels-index.schema.json, beside this module), checked by
the one reader of data files (base/toml_file.py); what a schema cannot say (ranges that
overlap, a preferred set that is not among the sets, a pre-release a source does not own up
to) is checked here, beside it. A mistake is the file, line and key, and the fix, so a
reviewer can correct the data without reading this code.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from jetson_install.base.schema import Key
from jetson_install.base.sourced import Sourced
from jetson_install.base.toml_file import TomlData
from jetson_install.board.platform import Platform
from jetson_install.board.platform_data import platform_data
from jetson_install.catalog.catalog_file import default_catalog_path
from jetson_install.catalog.identity import VENDOR_PACKAGES, KnownBuild, VersionSet
from jetson_install.catalog.targets import Target, read_targets

__all__ = ["VendorSource", "NeededLibrary", "ContainerImage", "Channel", "GateRule", "Catalog", "ChannelMatch",
           "DEFAULT_INDEX_LABEL", "load_catalog", "default_catalog_path"]

#: How plans name uv's own default index, which this project never spells out.
DEFAULT_INDEX_LABEL = "the default index"
#: Where a mirror the channel's own source lists was named.
CATALOG_MIRROR = "wheels-index.toml"


@dataclass(frozen=True)
class NeededLibrary:
    """A shared library (by soname) a source's builds need but do not carry, and what must
    provide it: a companion wheel, whose requirement holds it to releases that do, or an apt
    package."""

    soname: str
    provider: str  # "companion" | "apt"
    package: str  # the companion's requirement as the catalog writes it ("nvidia-cudss-cu13<1"), or the apt package

    def describe(self) -> str:
        if self.provider == "companion":
            return f"the channel's companion wheel {self.package}"
        return f"the apt package {self.package}"


@dataclass(frozen=True)
class VendorSource:
    """One place the vendor wheels come from (a PEP 503/691 index, uv's default index, or
    direct wheel URLs), the sets of builds it offers, which set is preferred, and the
    builds the public record knows by file name and sha256."""

    index: Optional[str]  # None: direct `wheels`, or uv's default index (`default_index`)
    wheels: Tuple[str, ...]
    sets: Tuple[VersionSet, ...]
    preferred: VersionSet
    prereleases: bool = False  # the source's builds are pre-releases (NVIDIA's 2.4.0a0+…)
    builds: Tuple[KnownBuild, ...] = ()
    companions: Tuple[str, ...] = ()  # undeclared runtime wheels, by name from the default index
    default_index: bool = False
    note: str = ""
    libraries: Tuple[NeededLibrary, ...] = ()  # what each companion and apt package must provide
    # Further indexes tried in order after `index` for the same recorded builds (by sha256),
    # each with where it was named: the catalog's (CATALOG_MIRROR), then the user's (--mirror,
    # the configuration's mirrors and wheelhouse).
    mirrors: Tuple[Sourced[str], ...] = ()

    @classmethod
    def pinned(cls, index: Optional[str], wheels: Sequence[str], pins: Mapping[str, str], numpy: Optional[str] = None,
               apt: Sequence[str] = ()) -> "VendorSource":
        """A source of exactly these versions: what an environment recorded it was made with."""
        version_set = VersionSet({name: f"=={version}" for name, version in pins.items()}, numpy, tuple(apt))
        return cls(index, tuple(wheels), (version_set,), version_set, prereleases=True)

    @property
    def location(self) -> str:
        if self.default_index:
            return DEFAULT_INDEX_LABEL
        # Neither: a stack kept as the interpreter had it (--use-existing-torch).
        return self.index or (self.wheels[0] if self.wheels else "kept as installed")

    @property
    def pins(self) -> Mapping[str, str]:
        return self.preferred.pins

    @property
    def numpy(self) -> Optional[str]:
        return self.preferred.numpy

    @property
    def apt(self) -> Tuple[str, ...]:
        return self.preferred.apt

    def provider_of(self, soname: str) -> Optional[NeededLibrary]:
        return next((library for library in self.libraries if library.soname == soname), None)

    def provides(self, requirement: str) -> Tuple[str, ...]:
        """The sonames the companion `requirement` (as the catalog writes it) must provide."""
        return tuple(library.soname for library in self.libraries
                     if library.provider == "companion" and library.package == requirement)

    def companion_shown(self, requirement: str) -> str:
        """"nvidia-cudss-cu13<1 for libcudss.so.0": the companion, its bound and what it must provide."""
        provides = self.provides(requirement)
        return f"{requirement} for {', '.join(provides)}" if provides else requirement

    def policy(self) -> Dict[str, Any]:
        """What a recorded resolution was made under; a re-run reuses it while this is equal."""
        return {
            "location": self.location,
            "sets": [s.policy() for s in self.sets],
            "preferred": self.preferred.name,
            "prereleases": self.prereleases,
            "companions": list(self.companions),
        }


@dataclass(frozen=True)
class ContainerImage:
    """A container image known to carry a CUDA torch for a channel, and where that is said."""

    image: str
    source: str

    def to_json(self) -> Dict[str, str]:
        return {"image": self.image, "source": self.source}


@dataclass(frozen=True)
class GateRule:
    """Whether a failing check fails the doctor (and the strict gate) on a channel, and why:
    the catalog's word for checks whose meaning differs between channels (`compile`)."""

    required: bool
    reason: str


@dataclass(frozen=True)
class Channel:
    """One source of vendor builds in wheels-index.toml: the releases and SoCs it serves, its sets."""

    id: str
    title: str
    l4t_from: Tuple[int, int]
    l4t_below: Tuple[int, int]
    families: Tuple[str, ...]  # empty: any SoC family
    jetpack: str
    cuda: str
    python: str  # the Python ABI the vendor wheels are built for, "3.10"
    kind: str
    status: str
    reason: str
    remedy: str
    sources: Tuple[VendorSource, ...] = ()
    containers: Tuple[ContainerImage, ...] = ()
    # The torch.compile check's place in the gate; None: required, like every other check.
    compile: Optional[GateRule] = None

    @property
    def installable(self) -> bool:
        return self.status != "unsupported" and bool(self.sources)

    def gate(self, check_id: str) -> Optional[GateRule]:
        """The channel's word on whether check_id counts, where it gives one."""
        return self.compile if check_id == "compile" else None

    @property
    def primary(self) -> Optional[VendorSource]:
        return self.sources[0] if self.sources else None

    @property
    def pins(self) -> Mapping[str, str]:
        return self.primary.pins if self.primary else {}

    @property
    def numpy(self) -> Optional[str]:
        return self.primary.numpy if self.primary else None

    @property
    def apt(self) -> Tuple[str, ...]:
        return self.primary.apt if self.primary else ()

    def covers(self, major: int, minor: int) -> bool:
        return self.l4t_from <= (major, minor) < self.l4t_below


@dataclass(frozen=True)
class ChannelMatch:
    """The channel for a platform, or why there is none."""

    channel: Optional[Channel]
    reason: str = ""
    remedy: str = ""


@dataclass(frozen=True)
class Catalog:
    """wheels-index.toml, read and checked: its channels and the targets they install."""

    path: str
    channels: Tuple[Channel, ...]
    targets: Mapping[str, Target] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # load_catalog hands every caller the same cached value: a caller that changed its
        # targets would change them for all later ones.
        object.__setattr__(self, "targets", MappingProxyType(dict(self.targets)))

    def channel(self, channel_id: str) -> Channel:
        for channel in self.channels:
            if channel.id == channel_id:
                return channel
        raise KeyError(channel_id)

    def left_out(self, target_id: str, made: bool = True) -> Dict[str, str]:
        """The doctor checks that are other targets' own, each with why it does not apply to an
        environment made for `target_id` (the doctor reports them so, never omits them);
        `made`: jetson-install made it (else it holds `target_id`'s project, or only the stack)."""
        target = self.targets[target_id]
        found: Dict[str, str] = {}
        for other in self.targets.values():
            for check in other.checks:
                if check not in target.checks and check not in found:
                    found[check] = (f"{other.title}'s own check: this environment was made by "
                                    f"`jetson-install {target_id}`, without {other.title}" if made else
                                    f"{other.title}'s own check: {other.title} is not installed in this environment, "
                                    "which jetson-install did not make")
        return found

    def match(self, platform: Platform) -> ChannelMatch:
        """Pick the channel covering the platform's L4T release (and SoC family, where
        a release runs on several); never a neighbour's channel."""
        if platform.l4t is None:
            return ChannelMatch(None, "unsupported: the L4T release is unknown", "pass it with --l4t, e.g. --l4t 36.4.3")
        l4t = platform.l4t
        in_range = [c for c in self.channels if c.covers(l4t.major, l4t.minor)]
        if not in_range:
            # Here, not at the top: only a release no channel covers names the upgrade.
            from jetson_install.base.upgrade import running_upgrade_command

            return ChannelMatch(
                None,
                f"unsupported: unknown L4T release {l4t} (no channel in wheels-index.toml covers it)",
                f"upgrade jetson-install ({running_upgrade_command()}), or flash JetPack 6.2 (L4T R36.4.3)",
            )
        if platform.family is not None:
            fitting = [c for c in in_range if not c.families or platform.family in c.families]
            if not fitting:
                return ChannelMatch(
                    None,
                    f"unsupported: no channel for {platform.family} on L4T {l4t}",
                    "flash a JetPack release made for this board; see `jetson-install channels`",
                )
            return ChannelMatch(fitting[0])
        if len(in_range) == 1:
            return ChannelMatch(in_range[0])
        return ChannelMatch(
            None,
            f"unsupported: L4T {l4t} runs on several SoC families ({', '.join(f for c in in_range for f in c.families)}) "
            "and the device tree does not say which this is",
            "name the SoC (a container cannot read the device tree): "
            + ", ".join(f"--soc {soc} for {family}" for family, soc in _socs_of(c.families for c in in_range))
            + "; or run on the board itself",
        )


def _socs_of(families: Iterable[Tuple[str, ...]]) -> List[Tuple[str, str]]:
    """(family, the first SoC platform-data.toml lists for it) for each family named."""
    wanted = [family for named in families for family in named]
    first: Dict[str, str] = {}
    for soc in platform_data().socs.values():
        first.setdefault(soc.family, soc.name)
    return [(family, first[family]) for family in dict.fromkeys(wanted) if family in first]


def _pre_release(version: str) -> bool:
    try:
        return Version(version).is_prerelease
    except InvalidVersion:
        return False


def load_catalog(path: Optional[Path] = None) -> Catalog:
    # Cached per file, not per call: the default follows JETSON_INSTALL_WHEELS_INDEX.
    return _load_catalog(path or default_catalog_path())


#: The file's shape, checked as it is read; what a schema cannot say is checked below, beside it.
SCHEMA_FILE = Path(__file__).with_name("wheels-index.schema.json")


@functools.lru_cache(maxsize=None)
def _load_catalog(path: Path) -> Catalog:
    file = TomlData(path, "jetson-install channels", SCHEMA_FILE)
    channels = tuple(_channel(file, ("channels", number), entry) for number, entry in enumerate(file.data["channels"]))
    _check_apart(file, channels)
    return Catalog(str(path), channels, read_targets(file))


def _major_minor(text: str) -> Tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _channel(file: TomlData, at: Tuple[Key, ...], entry: Dict[str, Any]) -> Channel:
    l4t_from, l4t_below = _major_minor(entry["l4t"]["from"]), _major_minor(entry["l4t"]["below"])
    if not l4t_from < l4t_below:
        raise file.refuse(at + ("l4t",), "covers no release: 'from' must be below 'below'")
    compile_rule = entry.get("compile")
    return Channel(
        id=entry["id"],
        title=entry["title"],
        l4t_from=l4t_from,
        l4t_below=l4t_below,
        families=tuple(entry.get("families", ())),
        jetpack=entry["jetpack"],
        cuda=entry["cuda"],
        python=entry["python"],
        kind=entry["kind"],
        status=entry["status"],
        reason=entry["reason"],
        remedy=entry.get("remedy", ""),
        sources=tuple(_source(file, at + ("sources", number), source)
                      for number, source in enumerate(entry.get("sources", ()))),
        containers=tuple(ContainerImage(item["image"], item["source"]) for item in entry.get("containers", ())),
        compile=GateRule(compile_rule["required"], compile_rule["reason"]) if compile_rule is not None else None,
    )


def _check_apart(file: TomlData, channels: Sequence[Channel]) -> None:
    """Each channel's id its own, and no two channels for the same SoC family cover one release."""
    for number, channel in enumerate(channels):
        at = ("channels", number)
        for other in channels[:number]:
            if other.id == channel.id:
                raise file.refuse(at + ("id",), f"names {channel.id!r}, which another channel has")
            overlap = channel.l4t_from < other.l4t_below and other.l4t_from < channel.l4t_below
            shared = not channel.families or not other.families or set(channel.families) & set(other.families)
            if overlap and shared:
                raise file.refuse(at + ("l4t",), f"overlaps channel {other.id!r} for the same SoC family")


def _source(file: TomlData, at: Tuple[Key, ...], entry: Dict[str, Any]) -> VendorSource:
    if ("index" in entry) == ("wheels" in entry):
        raise file.refuse(at + ("index",), "or 'wheels' must be given, not both")
    index = entry.get("index")
    prereleases = entry.get("prereleases", False)
    numpy, apt = entry.get("numpy"), tuple(entry.get("apt", ()))
    if "wheels" in entry:
        given = next((key for key in ("sets", "preferred") if key in entry), None)
        if given is not None:
            raise file.refuse(at + (given,), "cannot be given for direct wheel URLs: their files are the set")
        # Each file pinned as NVIDIA spells its version (nv24.08, not nv24.8).
        files = [url.rsplit("/", 1)[-1] for url in entry["wheels"]]
        pins = {str(parse_wheel_filename(name)[0]): name.split("-")[1] for name in files}
        sets: Tuple[VersionSet, ...] = (_version_set(file, at + ("wheels",), pins, numpy, apt, prereleases),)
        preferred = sets[0]
    else:
        sets = tuple(_version_set(file, at + ("sets", number), item, numpy, apt, prereleases)
                     for number, item in enumerate(entry["sets"]))
        chosen = [version_set for version_set in sets if version_set.specifiers["torch"] == f"=={entry['preferred']}"]
        if len(chosen) != 1:
            raise file.refuse(at + ("preferred",), "must name the torch version of exactly one of the sets")
        preferred = chosen[0]
    mirrors = tuple(Sourced(url, CATALOG_MIRROR) for url in entry.get("mirrors", ()))
    if mirrors and index in (None, "default"):
        raise file.refuse(at + ("mirrors",), "go with an index URL: they serve the same files as that index")
    companions, libraries = _companions(file, at, entry, sets)
    return VendorSource(
        index=None if index in (None, "default") else index,
        wheels=tuple(entry.get("wheels", ())),
        sets=sets,
        preferred=preferred,
        prereleases=prereleases,
        builds=tuple(_build(file, at + ("builds", number), item) for number, item in enumerate(entry.get("builds", ()))),
        companions=companions,
        default_index=index == "default",
        note=entry.get("note", ""),
        libraries=libraries,
        mirrors=mirrors,
    )


def _version_set(file: TomlData, at: Tuple[Key, ...], entry: Mapping[str, Any], numpy: Optional[str],
                 apt: Tuple[str, ...], prereleases: bool) -> VersionSet:
    specifiers: Dict[str, str] = {}
    for package in VENDOR_PACKAGES:
        if package in entry:
            value = entry[package]
            ranged = value[:1] in "<>=!~"
            spec = value if ranged else f"=={value}"
            pinned = [s.version for s in SpecifierSet(spec) if s.operator == "=="] if ranged else [value]
            if not prereleases and any(_pre_release(version) for version in pinned):
                raise file.refuse(at, f"pins the pre-release {package}{spec}; a source whose builds are "
                                      "pre-releases says so with prereleases = true")
            specifiers[package] = spec
    return VersionSet(specifiers=specifiers, numpy=entry.get("numpy", numpy),
                      apt=tuple(entry["apt"]) if "apt" in entry else apt, python=entry.get("python"))


def _build(file: TomlData, at: Tuple[Key, ...], entry: Dict[str, Any]) -> KnownBuild:
    name = entry["file"]
    sha256, prefix, cuda = entry.get("sha256"), entry.get("sha256_prefix"), entry.get("cuda")
    if sha256 is not None and prefix is not None:
        raise file.refuse(at, f"has {name}: give sha256 or sha256_prefix, not both")
    # The file name's first part is the distribution's (the schema checked it is a wheel's).
    if (cuda is not None) != (canonicalize_name(name.split("-", 1)[0]) == "torch"):
        raise file.refuse(at, f"has {name}: a torch build gives cuda = \"MAJOR.MINOR\"; other builds give none")
    return KnownBuild(name, sha256, prefix, cuda)


def _companions(file: TomlData, at: Tuple[Key, ...], entry: Dict[str, Any],
                sets: Sequence[VersionSet]) -> Tuple[Tuple[str, ...], Tuple[NeededLibrary, ...]]:
    """The source's companions, and what each companion and apt package must provide."""
    companions, libraries = [], []
    for number, item in enumerate(entry.get("companions", ())):
        # A requirement begins with its name (the schema checked it is one), up to the first
        # character a name cannot have (https://peps.python.org/pep-0508/#names).
        name = canonicalize_name(re.split(r"[^A-Za-z0-9._-]", item["requirement"].strip(), maxsplit=1)[0])
        if name in VENDOR_PACKAGES:
            raise file.refuse(at + ("companions", number), f"names the vendor package {name}; vendor packages "
                                                           "come only from the vendor source")
        companions.append(item["requirement"])
        libraries += [NeededLibrary(soname, "companion", item["requirement"]) for soname in item["provides"]]
    named = {package for version_set in sets for package in version_set.apt}
    for package, sonames in entry.get("apt_provides", {}).items():
        if package not in named:
            raise file.refuse(at + ("apt_provides", package), f"names {package!r}, which no set of this source "
                                                              "installs (apt)")
        libraries += [NeededLibrary(soname, "apt", package) for soname in sonames]
    return tuple(companions), tuple(libraries)
