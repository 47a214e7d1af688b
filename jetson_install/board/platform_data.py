"""platform-data.toml: SoCs, L4T majors, known point releases, module part numbers."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import FrozenSet, Mapping, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.board.release_files import L4T
from jetson_install.base.toml_file import TomlData

__all__ = ["Soc", "MajorFacts", "PlatformData", "platform_data", "ubuntu_glibc", "major_glibc"]

DATA_FILE = Path(__file__).with_name("platform-data.toml")


@dataclass(frozen=True)
class Soc:
    """One system on a chip as platform-data.toml describes it."""

    name: str
    family: str
    compute_capability: str  # "8.7"
    tegra_cuda: bool  # a JetPack gives it L4T's own CUDA (not only JetPack 7's SBSA CUDA)


@dataclass(frozen=True)
class MajorFacts:
    """What one L4T major release ships: its JetPack family, Ubuntu, Python, CUDA by minor, SoCs."""

    major: int
    jetpack_family: str
    ubuntu: Optional[str]
    python: Optional[str]
    cuda_from_minor: Tuple[Tuple[int, str], ...]
    socs: Tuple[str, ...]

    def default_cuda(self, minor: int) -> Optional[str]:
        found = None
        for from_minor, cuda in self.cuda_from_minor:
            if minor >= from_minor:
                found = cuda
        return found


@dataclass(frozen=True)
class PlatformData:
    """platform-data.toml, read and checked: the facts detection weighs the board's files against."""

    socs: Mapping[str, Soc]
    majors: Mapping[int, MajorFacts]
    releases: Mapping[L4T, str]
    modules: Mapping[str, str]
    glibc: Mapping[str, str]  # Ubuntu release -> its glibc, "22.04" -> "2.35"
    model_labels: Mapping[str, str]  # words of a device-tree model -> the runner label users look for

    def __post_init__(self) -> None:
        # platform_data() hands every caller the same cached value: none may change it for the others.
        for name in ("socs", "majors", "releases", "modules", "glibc", "model_labels"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def tegra_capabilities(self) -> FrozenSet[Tuple[int, int]]:
        """The compute capabilities of the GPUs with L4T's own CUDA: no other GPU has them."""
        found = set()
        for soc in self.socs.values():
            if soc.tegra_cuda:
                major, minor = soc.compute_capability.split(".")
                found.add((int(major), int(minor)))
        return frozenset(found)


#: The file's shape, checked as it is read; what the schema cannot say is checked here.
SCHEMA_FILE = Path(__file__).with_name("platform-data.schema.json")


@functools.lru_cache(maxsize=None)
def platform_data(path: Path = DATA_FILE) -> PlatformData:
    """The file read and checked; a mistake is one CatalogError naming its line."""
    file = TomlData(path, "jetson-install detect", SCHEMA_FILE)
    raw = file.data
    socs = {name: Soc(name, entry["family"], entry["compute_capability"], entry["tegra_cuda"])
            for name, entry in raw["socs"].items()}
    majors = {}
    for key, entry in raw["majors"].items():
        for number, soc in enumerate(entry.get("socs", [])):
            if soc not in socs:
                raise file.refuse(("majors", key, "socs", number), f"names {soc!r}, which is not in [socs] "
                                                                   f"({', '.join(socs)})")
        cuda = tuple(sorted((int(minor), version) for minor, version in entry.get("cuda", {}).items()))
        majors[int(key)] = MajorFacts(int(key), entry["jetpack"], entry.get("ubuntu"), entry.get("python"), cuda,
                                      tuple(entry.get("socs", [])))
    releases = {L4T(*(int(part) for part in key.split("."))): jetpack for key, jetpack in raw["releases"].items()}
    return PlatformData(socs, majors, releases, dict(raw["modules"]), dict(raw["glibc"]), dict(raw["model_labels"]))


def ubuntu_glibc(ubuntu: Optional[str]) -> str:
    """The glibc of a board's Ubuntu, which is the newest manylinux level its wheels may use."""
    glibc = platform_data().glibc.get(ubuntu or "")
    if glibc is None:
        raise BadInput(f"no manylinux level known for Ubuntu {ubuntu or '(unknown)'}",
                       fix="give a root whose etc/os-release names its Ubuntu, or --l4t with a JetPack 6/7 release")
    return glibc


def major_glibc(major: int) -> str:
    """The glibc of the Ubuntu an L4T major ships (what a channel is built for, where no board is read)."""
    facts = platform_data().majors.get(major)
    return ubuntu_glibc(facts.ubuntu if facts is not None else None)
