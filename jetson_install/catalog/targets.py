"""The targets of wheels-index.toml: what `jetson-install NAME` installs on top of the protected
torch stack, and the companion releases a channel's torch or Python does not meet (`caps`).

The file's shape is its schema's (wheels-index.schema.json); `read_targets` builds the values
from a checked file and refuses what the schema cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from jetson_install.base.toml_file import TomlData

__all__ = ["Target", "CompanionFloor", "read_targets"]


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


def read_targets(file: TomlData) -> Dict[str, Target]:
    """The [targets.NAME] tables of a checked wheels-index.toml, each with the file's caps."""
    caps = []
    for number, entry in enumerate(file.data.get("caps", ())):
        if ("torch" in entry) == ("python" in entry):
            raise file.refuse(("caps", number), "has an entry with both torch and python" if "torch" in entry else
                              "has an entry with neither torch nor python: each floor is one of them")
        caps.append(CompanionFloor(entry["package"], entry["first"], entry.get("torch"), entry.get("python")))
    return {name: Target(
        id=name,
        title=entry["title"],
        summary=entry["summary"],
        requires_python=entry["requires_python"],
        smoke=tuple(entry["smoke"]),
        distribution=entry.get("distribution"),
        git=entry.get("git"),
        ref=entry.get("ref"),
        requires_torch=entry.get("requires_torch", ""),
        requires_bitsandbytes=entry.get("requires_bitsandbytes", ""),
        quantization_extra=entry.get("quantization_extra"),
        quantization_extra_since=entry.get("quantization_extra_since"),
        checks=tuple(entry.get("checks", ())),
        caps=tuple(caps),
    ) for name, entry in file.data["targets"].items()}
