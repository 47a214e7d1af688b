"""platform-data.toml: SoCs, L4T majors, known point releases, module part numbers."""

from __future__ import annotations

import functools
from types import MappingProxyType
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.board.release_files import L4T
from jetson_install.base.toml_file import TomlData

__all__ = ["Soc", "MajorFacts", "PlatformData", "platform_data", "ubuntu_glibc", "major_glibc"]

DATA_FILE = Path(__file__).with_name("platform-data.toml")


@dataclass(frozen=True)
class Soc:
    name: str
    family: str
    compute_capability: str  # "8.7"
    tegra_cuda: bool  # a JetPack gives it L4T's own CUDA (not only JetPack 7's SBSA CUDA)


@dataclass(frozen=True)
class MajorFacts:
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


_TABLES = ("socs", "majors", "glibc", "releases", "modules", "model_labels")
_SOC_KEYS = ("family", "compute_capability", "tegra_cuda")
_MAJOR_KEYS = ("jetpack", "ubuntu", "python", "cuda", "socs")
_MAJOR_MINOR = r"\d+\.\d+"


@functools.lru_cache(maxsize=None)
def platform_data(path: Path = DATA_FILE) -> PlatformData:
    """The file read and checked; a mistake is one CatalogError naming its line."""
    file = TomlData(path, "jetson-install detect")
    raw = file.data
    file.unknown("top level", raw, _TABLES, "a table of platform-data.toml")
    for name in _TABLES:
        if name not in raw:
            raise file.fail("top level", name, f"is required: a [{name}] table")
        file.table("top level", raw[name], name)
    return PlatformData(_socs(file), _majors(file, raw["socs"]), _releases(file), _modules(file), _glibc(file),
                        _model_labels(file))


def _socs(file: TomlData) -> Dict[str, Soc]:
    start = file.header("socs")
    socs = {}
    for name, entry in file.data["socs"].items():
        where, near = f"SoC {name!r}", f"{name} ="
        entry = file.table(where, entry, name, start)
        file.unknown(where, entry, _SOC_KEYS, "a SoC key", start, near)
        family = file.string(where, entry, "family", start, near)
        capability = file.string(where, entry, "compute_capability", start, near, _MAJOR_MINOR, '"MAJOR.MINOR", like "8.7"')
        if not isinstance(entry.get("tegra_cuda"), bool):
            raise file.fail(where, "tegra_cuda", "must be true or false", start, near)
        socs[name] = Soc(name, family, capability, entry["tegra_cuda"])
    return socs


def _majors(file: TomlData, socs: Mapping[str, Any]) -> Dict[int, MajorFacts]:
    majors: Dict[int, MajorFacts] = {}
    for key, entry in file.data["majors"].items():
        start = file.header(f"majors.{key}")
        where = f"L4T major {key}"
        if not key.isdigit():
            raise file.fail("majors", key, "is not an L4T major: tables are [majors.36]", file.header("majors"))
        entry = file.table(where, entry, key, file.header("majors"))
        file.unknown(where, entry, _MAJOR_KEYS, "a key of an L4T major", start)
        jetpack = file.string(where, entry, "jetpack", start)
        ubuntu = file.string(where, entry, "ubuntu", start, pattern=_MAJOR_MINOR, shape='"22.04"') \
            if "ubuntu" in entry else None
        python = file.string(where, entry, "python", start, pattern=_MAJOR_MINOR, shape='"3.10"') \
            if "python" in entry else None
        cuda_table = file.table(where, entry.get("cuda", {}), "cuda", start)
        cuda = []
        for minor, version in cuda_table.items():
            if not minor.isdigit() or not (isinstance(version, str) and re.fullmatch(_MAJOR_MINOR, version)):
                raise file.fail(where, "cuda", f'has {minor} = {version!r}; it is {{ MINOR = "CUDA" }}, '
                                               'like { 0 = "12.2", 4 = "12.6" }', start)
            cuda.append((int(minor), version))
        listed = entry.get("socs", [])
        if not isinstance(listed, list) or not all(isinstance(name, str) and name in socs for name in listed):
            raise file.fail(where, "socs", f"must be a list of the SoCs in [socs] ({', '.join(socs)})", start)
        majors[int(key)] = MajorFacts(int(key), jetpack, ubuntu, python, tuple(sorted(cuda)), tuple(listed))
    return majors


def _releases(file: TomlData) -> Dict[L4T, str]:
    start = file.header("releases")
    releases = {}
    for key, jetpack in file.data["releases"].items():
        if not re.fullmatch(r"\d+\.\d+\.\d+", key):
            raise file.fail("releases", key, 'is not an L4T release: keys are "MAJOR.MINOR.PATCH"', start)
        file.string("releases", file.data["releases"], key, start, shape='the JetPack release, like "6.2"')
        major, minor, patch = (int(part) for part in key.split("."))
        releases[L4T(major, minor, patch)] = jetpack
    return releases


def _modules(file: TomlData) -> Dict[str, str]:
    start = file.header("modules")
    for key in file.data["modules"]:
        if not re.fullmatch(r"p\d{4}-\d{4}", key):
            raise file.fail("modules", key, 'is not a module part number, like "p3701-0005"', start)
        file.string("modules", file.data["modules"], key, start, shape="the module's name")
    return dict(file.data["modules"])


def _model_labels(file: TomlData) -> Dict[str, str]:
    start = file.header("model_labels")
    table = file.data["model_labels"]
    for key in table:
        file.string("model_labels", table, key, start, pattern=r"[a-z0-9][a-z0-9-]*",
                    shape="a runner label: lower case letters, digits and dashes")
    return dict(table)


def _glibc(file: TomlData) -> Dict[str, str]:
    start = file.header("glibc")
    for key in file.data["glibc"]:
        if not re.fullmatch(_MAJOR_MINOR, key):
            raise file.fail("glibc", key, 'is not an Ubuntu release, like "22.04"', start)
        file.string("glibc", file.data["glibc"], key, start, pattern=r"2\.\d+", shape='its glibc, like "2.35"')
    return dict(file.data["glibc"])


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
