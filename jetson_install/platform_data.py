"""platform-data.toml: SoCs, L4T majors, known point releases, module part numbers."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from jetson_install.release_files import L4T
from jetson_install.toml_file import load_toml

__all__ = ["Soc", "MajorFacts", "PlatformData", "platform_data"]

DATA_FILE = Path(__file__).with_name("platform-data.toml")


@dataclass(frozen=True)
class Soc:
    name: str
    family: str
    compute_capability: str


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


@functools.lru_cache(maxsize=None)
def platform_data(path: Path = DATA_FILE) -> PlatformData:
    raw = load_toml(path)
    socs = {name: Soc(name, entry["family"], entry["compute_capability"]) for name, entry in raw["socs"].items()}
    majors: Dict[int, MajorFacts] = {}
    for key, entry in raw["majors"].items():
        cuda = tuple(sorted((int(minor), version) for minor, version in entry.get("cuda", {}).items()))
        majors[int(key)] = MajorFacts(
            int(key), entry["jetpack"], entry.get("ubuntu"), entry.get("python"), cuda, tuple(entry.get("socs", ()))
        )
    releases = {}
    for key, jetpack in raw["releases"].items():
        major, minor, patch = (int(part) for part in key.split("."))
        releases[L4T(major, minor, patch)] = jetpack
    return PlatformData(socs, majors, releases, dict(raw["modules"]))
