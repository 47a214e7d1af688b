"""wheels-index.toml -> Catalog: channels and targets, read by one validating loader.

A mistake in the file is reported with the file, line and key, so a reviewer can
fix the data without reading this code.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from jetson_install.base.toml_file import TomlData
from jetson_install.base.upgrade import running_upgrade_command
from jetson_install.board.platform import Platform
from jetson_install.board.platform_data import platform_data
from jetson_install.catalog.catalog_file import TARGET_NAME, default_catalog_path
from jetson_install.catalog.identity import VENDOR_PACKAGES, KnownBuild, VersionSet

__all__ = ["VendorSource", "NeededLibrary", "CompanionFloor", "ContainerImage", "Channel", "Target", "Catalog", "ChannelMatch", "DEFAULT_INDEX_LABEL",
           "load_catalog", "default_catalog_path"]

#: How plans name uv's own default index, which this project never spells out.
DEFAULT_INDEX_LABEL = "the default index"
STATUSES = ("supported", "experimental", "unsupported")
KINDS = ("tegra", "sbsa")


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
    # Further indexes tried in order after `index` for the same recorded builds (by sha256):
    # the catalog's, then the user's (--mirror, the configuration's mirrors and wheelhouse).
    mirrors: Tuple[str, ...] = ()

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
class Target:
    """What `jetson-install NAME` installs on top of the protected torch stack: a project from
    its pinned source (OBLITERATUS), or nothing of its own (`torch`: the stack and `--with`)."""

    id: str
    title: str
    summary: str  # the command's help line
    requires_python: str
    smoke: Tuple[str, ...]  # must run in the new environment, even where no GPU is visible
    distribution: Optional[str] = None  # None: the stack alone, no project of its own
    git: Optional[str] = None
    ref: Optional[str] = None
    requires_torch: str = ""  # a version specifier; empty: any
    requires_bitsandbytes: str = ""
    quantization_extra: Optional[str] = None  # the extra that asks for bitsandbytes
    quantization_extra_since: Optional[str] = None  # the first release that has it; older refs lack it
    checks: Tuple[str, ...] = ()  # the doctor checks that are this target's own (left out for the others)
    caps: Tuple["CompanionFloor", ...] = ()

    def extra_for(self, ref: Optional[str]) -> Optional[str]:
        """The quantization extra where the source at `ref` has it: a release tag older than
        `quantization_extra_since` has none; a branch or a commit follows the newest."""
        if self.quantization_extra is None or self.quantization_extra_since is None or ref is None:
            return self.quantization_extra
        try:
            older = Version(ref.lstrip("v")) < Version(self.quantization_extra_since)
        except InvalidVersion:
            return self.quantization_extra
        return None if older else self.quantization_extra

    def caps_for(self, torch: Optional[str], python: str, python_of: str = "the channel's") -> List[Tuple[str, str]]:
        """(constraint, why) for each companion whose newer releases the channel's torch or
        `python` (`python_of` says whose: the channel's, or the interpreter's the install
        takes) does not meet: the companion stays below the first such release."""
        caps: Dict[str, Tuple[Version, str]] = {}
        for floor in self.caps:
            if floor.torch is not None:
                # As transformers compares at run time: full PEP 440, so 2.4.0a0+… is below 2.4.0.
                missed = torch is not None and Version(torch) < Version(floor.torch)
                why = f"{floor.package} {floor.first} needs torch {floor.torch}, the channel's is {torch}"
            else:
                missed = Version(python) < Version(str(floor.python))
                why = f"{floor.package} {floor.first} needs Python {floor.python}, {python_of} is {python}"
            first = Version(floor.first)
            if missed and (floor.package not in caps or first < caps[floor.package][0]):
                caps[floor.package] = (first, why)
        return [(f"{package}<{first}", why) for package, (first, why) in sorted(caps.items())]


@dataclass(frozen=True)
class CompanionFloor:
    """From release `first` on, `package` needs torch `torch` (or Python `python`) or newer."""

    package: str
    first: str
    torch: Optional[str] = None
    python: Optional[str] = None


@dataclass(frozen=True)
class ChannelMatch:
    """The channel for a platform, or why there is none."""

    channel: Optional[Channel]
    reason: str = ""
    remedy: str = ""


@dataclass(frozen=True)
class Catalog:
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

    def left_out(self, target_id: str) -> Dict[str, str]:
        """The doctor checks that are other targets' own, each with why it does not apply to an
        environment made for `target_id` (the doctor reports them so, never omits them)."""
        target = self.targets[target_id]
        found: Dict[str, str] = {}
        for other in self.targets.values():
            for check in other.checks:
                if check not in target.checks and check not in found:
                    found[check] = (f"{other.title}'s own check: this environment was made by "
                                    f"`jetson-install {target_id}`, without {other.title}")
        return found

    def match(self, platform: Platform) -> ChannelMatch:
        """Pick the channel covering the platform's L4T release (and SoC family, where
        a release runs on several); never a neighbour's channel."""
        if platform.l4t is None:
            return ChannelMatch(None, "unsupported: the L4T release is unknown", "pass it with --l4t, e.g. --l4t 36.4.3")
        l4t = platform.l4t
        in_range = [c for c in self.channels if c.covers(l4t.major, l4t.minor)]
        if not in_range:
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


@functools.lru_cache(maxsize=None)
def _load_catalog(path: Path) -> Catalog:
    return _Loader(path).catalog()


_CHANNEL_KEYS = {
    "id", "title", "l4t", "families", "jetpack", "cuda", "python", "kind", "status", "reason", "remedy",
    "containers", "sources", "compile",
}
_SOURCE_KEYS = {"index", "wheels", "sets", "preferred", "prereleases", "builds", "companions", "numpy", "apt", "note",
                "apt_provides", "mirrors"}
_COMPANION_SHAPE = ("is { requirement = \"NAME<BOUND\", provides = [\"libNAME.so.N\"] }: the sonames the companion "
                    "must provide, and a requirement that holds it to releases that provide them")
#: A shared object's file name as DT_NEEDED gives it: "libcudss.so.0".
_SONAME = re.compile(r"[A-Za-z0-9_.+\-]+\.so(?:\.[0-9]+)*")
_TARGET_KEYS = {
    "title", "summary", "distribution", "git", "ref", "requires_python", "quantization_extra",
    "quantization_extra_since", "requires_bitsandbytes", "requires_torch", "smoke", "checks",
}
#: Given together or not at all: a target with a project of its own names where it comes from.
_SOURCE_TARGET_KEYS = ("distribution", "git", "ref")


class _Loader(TomlData):
    """`fail`'s `start` is the header line of the table being read (TomlData); `near`, the text
    of the offending entry inside an array (a file name, a set's torch), so the line is the
    entry's own, not the array's first."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "jetson-install channels")
        self.headers = [self.header("channels", n) for n in range(self.count("channels"))]
        self.source_headers = [self.header("channels.sources", n) for n in range(self.count("channels.sources"))]

    # -- structure -------------------------------------------------------
    def catalog(self) -> Catalog:
        raw = self.data
        if raw.get("schema_version") != 2:
            raise self.fail("top level", "schema_version", "must be 2 (sets, preferred and builds per source)")
        channels_raw = raw.get("channels")
        if not isinstance(channels_raw, list) or not channels_raw:
            raise self.fail("top level", "channels", "must be a non-empty array of tables ([[channels]])")
        channels: List[Channel] = []
        source_counter = 0
        for number, entry in enumerate(channels_raw):
            start = self.headers[number] if number < len(self.headers) else -1
            channel, used = self.channel(entry, start, source_counter)
            source_counter += used
            channels.append(channel)
        self.check_unique_and_disjoint(channels)
        targets_raw = raw.get("targets")
        if not isinstance(targets_raw, dict) or not targets_raw:
            raise self.fail("top level", "targets", "must hold at least one [targets.NAME] table")
        caps = tuple(self.floor("top level", item, -1) for item in self.tables("top level", raw, "caps", -1))
        targets = {name: self.target(name, entry, caps) for name, entry in targets_raw.items()}
        return Catalog(str(self.path), tuple(channels), targets)

    def channel(self, entry: Any, start: int, source_counter: int) -> Tuple[Channel, int]:
        where = f"channel {entry.get('id', '?')!r}" if isinstance(entry, dict) else "channel"
        if not isinstance(entry, dict):
            raise self.fail("channels", "channels", "must hold tables", start)
        unknown = sorted(set(entry) - _CHANNEL_KEYS)
        if unknown:
            raise self.fail(where, unknown[0], "is not a channel key", start)
        for key in ("id", "title", "jetpack", "cuda", "python", "kind", "status", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise self.fail(where, key, "is required and must be a non-empty string", start)
        if entry["kind"] not in KINDS:
            raise self.fail(where, "kind", f"must be one of {', '.join(KINDS)}", start)
        if entry["status"] not in STATUSES:
            raise self.fail(where, "status", f"must be one of {', '.join(STATUSES)}", start)
        if not re.fullmatch(r"\d+\.\d+", entry["python"]):
            raise self.fail(where, "python", "must be major.minor, like \"3.10\"", start)
        l4t = entry.get("l4t")
        if not isinstance(l4t, dict) or set(l4t) != {"from", "below"}:
            raise self.fail(where, "l4t", "must be { from = \"MAJOR.MINOR\", below = \"MAJOR.MINOR\" }", start)
        l4t_from, l4t_below = self.major_minor(where, l4t["from"], start), self.major_minor(where, l4t["below"], start)
        if not l4t_from < l4t_below:
            raise self.fail(where, "l4t", "'from' must be below 'below'", start)
        sources_raw = entry.get("sources", [])
        if not isinstance(sources_raw, list):
            raise self.fail(where, "sources", "must be an array of tables ([[channels.sources]])", start)
        sources = []
        for offset, source in enumerate(sources_raw):
            header = source_counter + offset
            source_start = self.source_headers[header] if header < len(self.source_headers) else start
            sources.append(self.source(where, source, source_start))
        if entry["status"] != "unsupported" and not sources:
            raise self.fail(where, "sources", "must give a vendor source for a channel that is not unsupported", start)
        if entry["status"] == "unsupported" and not entry.get("remedy"):
            raise self.fail(where, "remedy", "must say what would make an unsupported channel work", start)
        channel = Channel(
            id=entry["id"],
            title=entry["title"],
            l4t_from=l4t_from,
            l4t_below=l4t_below,
            families=tuple(self.strings(where, entry, "families", start)),
            jetpack=entry["jetpack"],
            cuda=entry["cuda"],
            python=entry["python"],
            kind=entry["kind"],
            status=entry["status"],
            reason=entry["reason"],
            remedy=entry.get("remedy", ""),
            sources=tuple(sources),
            containers=self.containers(where, entry, start),
            compile=self.gate_rule(where, entry, "compile", start),
        )
        return channel, len(sources_raw)

    def gate_rule(self, where: str, entry: Dict[str, Any], key: str, start: int) -> Optional[GateRule]:
        value = entry.get(key)
        if value is None:
            return None
        if (not isinstance(value, dict) or set(value) != {"required", "reason"}
                or not isinstance(value["required"], bool) or not isinstance(value["reason"], str)
                or not value["reason"].strip()):
            raise self.fail(where, key, "must be { required = true|false, reason = \"why, for this channel\" }", start)
        return GateRule(value["required"], value["reason"])

    def direct_set(self, where: str, wheels: Sequence[str], numpy: Optional[str], apt: Tuple[str, ...],
                   prereleases: bool, start: int) -> VersionSet:
        """The one set a source of direct wheel URLs is: each file pinned as NVIDIA spells its version."""
        specifiers = {}
        for url in wheels:
            if not url.startswith("https://"):
                raise self.fail(where, "wheels", f"has {url!r}; wheel URLs must use https://", start)
            file = url.rsplit("/", 1)[-1]
            try:
                name = parse_wheel_filename(file)[0]
            except InvalidWheelFilename:
                raise self.fail(where, "wheels", f"has {url!r}, which does not end in a wheel file name", start) from None
            specifiers[str(name)] = f"=={file.split('-')[1]}"  # as NVIDIA spells it (nv24.08, not nv24.8)
        return self.version_set(where, specifiers, numpy, apt, prereleases, start)

    def listed_sets(self, where: str, entry: Dict[str, Any], numpy: Optional[str], apt: Tuple[str, ...],
                    prereleases: bool, start: int) -> Tuple[Tuple[VersionSet, ...], VersionSet]:
        """An index source's sets and the one `preferred` names."""
        sets = tuple(self.version_set(where, item, numpy, apt, prereleases, start)
                     for item in self.tables(where, entry, "sets", start))
        if not sets:
            raise self.fail(where, "sets", "must list at least one set of builds that belong together", start)
        wanted = entry.get("preferred")
        preferred_sets = [s for s in sets if s.specifiers["torch"] == f"=={wanted}"]
        if len(preferred_sets) != 1:
            raise self.fail(where, "preferred", "must name the torch version of exactly one of the sets", start)
        return sets, preferred_sets[0]

    def source(self, where: str, entry: Any, start: int) -> VendorSource:
        where = f"{where} source"
        if not isinstance(entry, dict):
            raise self.fail(where, "sources", "must hold tables", start)
        unknown = sorted(set(entry) - _SOURCE_KEYS)
        if unknown:
            raise self.fail(where, unknown[0], "is not a source key", start)
        if ("index" in entry) == ("wheels" in entry):
            raise self.fail(where, "index", "or 'wheels' must be given, not both", start)
        index = entry.get("index")
        if index is not None and index != "default" and not (isinstance(index, str) and index.startswith("https://")):
            raise self.fail(where, "index", "must be an https:// URL, or \"default\" for uv's default index", start)
        prereleases = entry.get("prereleases", False)
        if not isinstance(prereleases, bool):
            raise self.fail(where, "prereleases", "must be true or false", start)
        numpy = self.specifier(where, "numpy", entry.get("numpy"), start)
        apt = tuple(self.strings(where, entry, "apt", start))
        builds = tuple(self.build(where, item, start) for item in self.tables(where, entry, "builds", start))
        wheels = tuple(self.strings(where, entry, "wheels", start))
        if wheels:
            if "sets" in entry or "preferred" in entry:
                raise self.fail(where, "sets", "cannot be given for direct wheel URLs: their files are the set", start)
            sets: Tuple[VersionSet, ...] = (self.direct_set(where, wheels, numpy, apt, prereleases, start),)
            preferred = sets[0]
        else:
            sets, preferred = self.listed_sets(where, entry, numpy, apt, prereleases, start)
        libraries: List[NeededLibrary] = []
        companions = []
        raw_companions = entry.get("companions", [])
        if not isinstance(raw_companions, list) or not all(isinstance(item, dict) for item in raw_companions):
            raise self.fail(where, "companions", f"must be an array of inline tables; each {_COMPANION_SHAPE}", start)
        for item in raw_companions:
            requirement, provides = self.companion(where, item, start)
            companions.append(requirement)
            libraries += [NeededLibrary(soname, "companion", requirement) for soname in provides]
        libraries += self.apt_provides(where, entry, sets, start)
        note = entry.get("note", "")
        if not isinstance(note, str):
            raise self.fail(where, "note", "must be a string", start)
        mirrors = tuple(self.strings(where, entry, "mirrors", start))
        if mirrors and (index is None or index == "default"):
            raise self.fail(where, "mirrors", "go with an index URL: they serve the same files as that index", start)
        bad = next((url for url in mirrors if not url.startswith("https://")), None)
        if bad is not None:
            raise self.fail(where, "mirrors", f"must hold https:// URLs ({bad!r} is not one)", start)
        return VendorSource(
            index=None if index in (None, "default") else index,
            wheels=wheels,
            sets=sets,
            preferred=preferred,
            prereleases=prereleases,
            builds=builds,
            companions=tuple(companions),
            default_index=index == "default",
            note=note,
            libraries=tuple(libraries),
            mirrors=mirrors,
        )

    def version_set(self, where: str, entry: Dict[str, Any], numpy: Optional[str], apt: Tuple[str, ...],
                    prereleases: bool, start: int) -> VersionSet:
        unknown = sorted(set(entry) - set(VENDOR_PACKAGES) - {"numpy", "apt", "python"})
        if unknown:
            raise self.fail(where, "sets", f"names {unknown[0]!r}; only {', '.join(VENDOR_PACKAGES)}, numpy, apt and "
                                           "python belong in a set", start)
        if "torch" not in entry:
            raise self.fail(where, "sets", "must give torch in every set", start)
        specifiers: Dict[str, str] = {}
        near = str(entry["torch"])
        for package in VENDOR_PACKAGES:
            if package not in entry:
                continue
            value = entry[package]
            spec = value if isinstance(value, str) and value[:1] in "<>=!~" else f"=={value}"
            self.specifier(where, "sets", spec, start, near)
            if not prereleases and any(_pre_release(s.version) for s in SpecifierSet(spec) if s.operator == "=="):
                raise self.fail(where, "sets", f"pins the pre-release {package}{spec}; a source whose builds are "
                                               "pre-releases says so with prereleases = true", start, near)
            specifiers[package] = spec
        return VersionSet(
            specifiers=specifiers,
            numpy=self.specifier(where, "sets", entry["numpy"], start) if "numpy" in entry else numpy,
            apt=tuple(self.strings(where, entry, "apt", start)) if "apt" in entry else apt,
            python=self.specifier(where, "sets", entry.get("python"), start, near),
        )

    def build(self, where: str, entry: Dict[str, Any], start: int) -> KnownBuild:
        unknown = sorted(set(entry) - {"file", "sha256", "sha256_prefix", "cuda"})
        if unknown:
            raise self.fail(where, "builds", f"has the key {unknown[0]!r}; a build has file, sha256 or "
                                             "sha256_prefix, and cuda (torch only)", start, str(entry.get("file", "")))
        file = entry.get("file")
        near = str(file)
        try:
            name = parse_wheel_filename(file)[0] if isinstance(file, str) else None
        except InvalidWheelFilename:
            name = None
        if name is None or not isinstance(file, str):
            raise self.fail(where, "builds", f"has file {file!r}, which is not a wheel file name", start, near)
        sha256, prefix = entry.get("sha256"), entry.get("sha256_prefix")
        if sha256 is not None and not (isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256)):
            raise self.fail(where, "builds", f"has {file}: sha256 must be 64 lowercase hex digits", start, near)
        if prefix is not None and not (isinstance(prefix, str) and re.fullmatch(r"[0-9a-f]{16}", prefix)):
            raise self.fail(where, "builds", f"has {file}: sha256_prefix must be the 16 hex digits of a "
                                             "+f/<3>/<13>/ URL", start, near)
        if sha256 is not None and prefix is not None:
            raise self.fail(where, "builds", f"has {file}: give sha256 or sha256_prefix, not both", start, near)
        cuda = entry.get("cuda")
        if (cuda is not None) != (name == "torch") or (cuda is not None and not re.fullmatch(r"\d+\.\d+", str(cuda))):
            raise self.fail(where, "builds", f"has {file}: a torch build gives cuda = \"MAJOR.MINOR\"; "
                                             "other builds give none", start, near)
        return KnownBuild(file, sha256, prefix, cuda)

    def companion(self, where: str, entry: Dict[str, Any], start: int) -> Tuple[str, Tuple[str, ...]]:
        """(requirement, the sonames it must provide) of one `{ requirement, provides }` table."""
        requirement = entry.get("requirement")
        near = str(requirement or "")
        if set(entry) != {"requirement", "provides"} or not isinstance(requirement, str):
            raise self.fail(where, "companions", f"has {entry!r}; each {_COMPANION_SHAPE}", start, near)
        try:
            name = Requirement(requirement).name
        except InvalidRequirement:
            raise self.fail(where, "companions", f"has {requirement!r}, which is not a requirement", start, near) from None
        if name.lower() in VENDOR_PACKAGES:
            raise self.fail(where, "companions", f"names the vendor package {name}; vendor packages come only "
                                                 "from the vendor source", start, near)
        return requirement, self.sonames(where, "companions", entry["provides"], start, near)

    def apt_provides(self, where: str, entry: Dict[str, Any], sets: Sequence[VersionSet],
                     start: int) -> List[NeededLibrary]:
        """`apt_provides = { PACKAGE = ["libNAME.so.N"] }`: what an apt package the source's sets
        name must provide."""
        value = entry.get("apt_provides", {})
        if not isinstance(value, dict):
            raise self.fail(where, "apt_provides", "must be a table: { PACKAGE = [\"libNAME.so.N\", ...] }", start)
        named = {package for version_set in sets for package in version_set.apt}
        found = []
        for package, sonames in value.items():
            if package not in named:
                raise self.fail(where, "apt_provides", f"names {package!r}, which no set of this source installs "
                                                       "(apt)", start, package)
            found += [NeededLibrary(soname, "apt", package)
                      for soname in self.sonames(where, "apt_provides", sonames, start, package)]
        return found

    def sonames(self, where: str, key: str, value: Any, start: int, near: str) -> Tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(
                isinstance(item, str) and _SONAME.fullmatch(item) for item in value):
            raise self.fail(where, key, f"has provides {value!r}; give the sonames as DT_NEEDED names them, "
                                        "like [\"libcudss.so.0\"]", start, near)
        return tuple(value)

    def specifier(self, where: str, key: str, value: Any, start: int, near: str = "") -> Optional[str]:
        if value is None:
            return None
        try:
            SpecifierSet(value)
        except (InvalidSpecifier, TypeError):
            raise self.fail(where, key, f"has {value!r}, not a version specifier like \"<2\"", start, near) from None
        return str(value)

    def tables(self, where: str, entry: Dict[str, Any], key: str, start: int) -> List[Dict[str, Any]]:
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.fail(where, key, "must be an array of inline tables, [{ ... }, ...]", start)
        return value

    def target(self, name: str, entry: Any, caps: Tuple[CompanionFloor, ...]) -> Target:
        start = self.header(f"targets.{name}")
        where = f"target {name!r}"
        if not isinstance(entry, dict):
            raise self.fail(where, name, "must be a table", start)
        if not TARGET_NAME.fullmatch(name):
            raise self.fail(where, name, "must be a command name: lowercase letters, digits and '-'", start)
        unknown = sorted(set(entry) - _TARGET_KEYS)
        if unknown:
            raise self.fail(where, unknown[0], "is not a target key", start)
        for key in _TARGET_KEYS - {"smoke", "checks"}:
            if key in entry and (not isinstance(entry[key], str) or not entry[key]):
                raise self.fail(where, key, "must be a non-empty string", start)
        for key in ("title", "summary", "requires_python"):
            if key not in entry:
                raise self.fail(where, key, "is required and must be a non-empty string", start)
        given = [key for key in _SOURCE_TARGET_KEYS if key in entry]
        if given and len(given) != len(_SOURCE_TARGET_KEYS):
            missing = next(key for key in _SOURCE_TARGET_KEYS if key not in entry)
            raise self.fail(where, missing, f"is required with {given[0]}: a target's source is "
                                            "distribution, git and ref together", start)
        if "git" in entry and not entry["git"].startswith("https://"):
            raise self.fail(where, "git", "must be an https:// URL", start)
        if "quantization_extra_since" in entry:
            if "quantization_extra" not in entry:
                raise self.fail(where, "quantization_extra_since", "needs quantization_extra", start)
            try:
                Version(entry["quantization_extra_since"])
            except InvalidVersion:
                raise self.fail(where, "quantization_extra_since", "must be a release version, like \"0.1.3\"",
                                start) from None
        for key in ("requires_python", "requires_torch", "requires_bitsandbytes"):
            self.specifier(where, key, entry.get(key), start)
        smoke = tuple(self.strings(where, entry, "smoke", start))
        if not smoke:
            raise self.fail(where, "smoke", "must give the command that proves the target imports", start)
        return Target(
            id=name,
            title=entry["title"],
            summary=entry["summary"],
            requires_python=entry["requires_python"],
            smoke=smoke,
            distribution=entry.get("distribution"),
            git=entry.get("git"),
            ref=entry.get("ref"),
            requires_torch=entry.get("requires_torch", ""),
            requires_bitsandbytes=entry.get("requires_bitsandbytes", ""),
            quantization_extra=entry.get("quantization_extra"),
            quantization_extra_since=entry.get("quantization_extra_since"),
            checks=tuple(self.strings(where, entry, "checks", start)),
            caps=caps,
        )

    def floor(self, where: str, entry: Dict[str, Any], start: int) -> CompanionFloor:
        shape = ("must be { package = NAME, first = VERSION, torch = VERSION } or "
                 "{ package = NAME, first = VERSION, python = \"3.11\" }")
        if set(entry) not in ({"package", "first", "torch"}, {"package", "first", "python"}):
            raise self.fail(where, "caps", shape, start, str(entry.get("first", "")))
        try:
            for key in ("first", "torch", "python"):
                if key in entry:
                    Version(entry[key])
        except (InvalidVersion, TypeError):
            raise self.fail(where, "caps", shape, start, str(entry.get("first", ""))) from None
        return CompanionFloor(str(entry["package"]), entry["first"], entry.get("torch"), entry.get("python"))

    def containers(self, where: str, entry: Dict[str, Any], start: int) -> Tuple[ContainerImage, ...]:
        value = entry.get("containers", [])
        shape = "must be an array of { image = \"REGISTRY/NAME:TAG\", source = \"https://...\" } tables"
        if not isinstance(value, list):
            raise self.fail(where, "containers", shape, start)
        images = []
        for item in value:
            if not isinstance(item, dict) or set(item) != {"image", "source"} or not all(
                    isinstance(item[key], str) and item[key] for key in ("image", "source")):
                raise self.fail(where, "containers", shape, start)
            if not item["source"].startswith("https://"):
                raise self.fail(where, "containers", f"has source {item['source']!r}; sources are https:// URLs", start)
            images.append(ContainerImage(item["image"], item["source"]))
        return tuple(images)

    # -- small value checks ----------------------------------------------
    def strings(self, where: str, entry: Dict[str, Any], key: str, start: int) -> List[str]:
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise self.fail(where, key, "must be an array of strings", start)
        return list(value)

    def major_minor(self, where: str, value: Any, start: int) -> Tuple[int, int]:
        if not isinstance(value, str) or not re.fullmatch(r"\d+\.\d+", value):
            raise self.fail(where, "l4t", f"has {value!r}; L4T bounds are \"MAJOR.MINOR\" strings", start)
        major, minor = value.split(".")
        return int(major), int(minor)

    def check_unique_and_disjoint(self, channels: List[Channel]) -> None:
        seen: Dict[str, int] = {}
        for index, channel in enumerate(channels):
            start = self.headers[index] if index < len(self.headers) else -1
            if channel.id in seen:
                raise self.fail(f"channel {channel.id!r}", "id", "is used by two channels", start)
            seen[channel.id] = index
            for other in channels[:index]:
                overlap = channel.l4t_from < other.l4t_below and other.l4t_from < channel.l4t_below
                shared = not channel.families or not other.families or set(channel.families) & set(other.families)
                if overlap and shared:
                    raise self.fail(
                        f"channel {channel.id!r}", "l4t", f"overlaps channel {other.id!r} for the same SoC family", start
                    )
