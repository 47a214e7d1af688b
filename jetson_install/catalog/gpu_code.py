"""Whether a shared object's GPU code can run on a board: its fat binary's containers (read by
base/fatbin.py) judged against the board's compute capability, CUDA userspace and driver by
the rules of gpu-code-rules.toml, which says per userspace whether each way code reaches a GPU
holds, with its public sources; where they disagree the verdict says "unproven", and names them.

A file holds one container per object linked into it. A library that picks its kernels by
architecture (cuBLASLt, cuSPARSELt) carries containers built for other GPUs only, by design, so
a file is judged by the containers that hold code for this board, and the number that hold
none is reported beside the verdict, never turned into a failure: the files cannot tell a
dispatched container from a missing one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install.base.fatbin import Container, Entry
from jetson_install.base.toml_file import TomlData

if TYPE_CHECKING:
    from jetson_install.board.platform import Platform

__all__ = ["RULES_FILE", "Status", "Rule", "Rules", "Board", "CodeVerdict", "load_rules", "judge",
           "RUNS", "BY_RULE", "CANNOT_RUN", "NO_GPU_CODE", "NOT_LOADED"]

RULES_FILE = Path(__file__).with_name("gpu-code-rules.toml")
RULES_SCHEMA = Path(__file__).with_name("gpu-code-rules.schema.json")
USERSPACES = ("tegra", "sbsa")
#: The ways code reaches a GPU that the judge tells apart; the file says whether each holds.
RULE_IDS = ("sass-exact", "sass-lower-minor", "ptx-jit")

RUNS = "runs"
BY_RULE = "runs by CUDA's compatibility rule, not yet shown on this board"
CANNOT_RUN = "cannot run here"
NO_GPU_CODE = "no GPU code"
NOT_LOADED = "not loaded here"


@dataclass(frozen=True)
class Status:
    status: str  # holds, unproven, fails
    supporting: Tuple[str, ...]  # "URL: what it says"
    against: Tuple[str, ...]


@dataclass(frozen=True)
class Rule:
    id: str
    says: str
    statuses: Mapping[str, Status]  # userspace -> its status


@dataclass(frozen=True)
class Rules:
    rules: Mapping[str, Rule]
    ptx_isa: Mapping[Tuple[int, int], Tuple[int, int]]  # PTX ISA version -> first CUDA whose driver compiles it

    def status(self, rule: str, userspace: str) -> Status:
        return self.rules[rule].statuses[userspace]


@dataclass(frozen=True)
class Board:
    """What the judge needs of a platform: its GPU's architecture (87 for 8.7), its CUDA
    userspace (tegra, sbsa) and its driver's CUDA release (12.6)."""

    arch: int
    userspace: str
    cuda: Optional[Tuple[int, int]]

    @property
    def name(self) -> str:
        return f"sm_{self.arch}"

    @classmethod
    def for_platform(cls, platform: Optional["Platform"]) -> Optional["Board"]:
        return cls.of(platform.compute_capability, platform.kind, platform.cuda) if platform is not None else None

    @classmethod
    def of(cls, compute_capability: Optional[str], userspace: Optional[str], cuda: Optional[str]) -> Optional["Board"]:
        """The board a platform describes; None where it names no GPU or userspace (not a Jetson)."""
        if not compute_capability or userspace not in USERSPACES:
            return None
        major, _, minor = compute_capability.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            return None
        return cls(int(major) * 10 + int(minor), str(userspace), _version(cuda))


@dataclass(frozen=True)
class CodeVerdict:
    """One file's verdict for a board: `verdict` (RUNS, BY_RULE, CANNOT_RUN, NO_GPU_CODE), the
    code it would run (`sm_80 SASS`), why, the rule's status and sources where one decided, and
    how many of its containers hold no code for the board."""

    verdict: str
    reason: str
    rule: Optional[str] = None
    status: Optional[Status] = None
    uncovered: int = 0
    containers: int = 0

    def to_json(self) -> Dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "rule": self.rule,
                "rule_status": self.status.status if self.status else None,
                "sources_for": list(self.status.supporting) if self.status else [],
                "sources_against": list(self.status.against) if self.status else [],
                "containers": self.containers, "containers_without_code_here": self.uncovered}


def _version(text: Optional[str]) -> Optional[Tuple[int, int]]:
    found = re.fullmatch(r"(\d+)\.(\d+)", text or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


@functools.lru_cache(maxsize=None)
def load_rules(path: Path = RULES_FILE) -> Rules:
    """gpu-code-rules.toml read and checked (its schema, then what a schema cannot say: each
    status has the sources it needs, each rule is given once); a mistake is one CatalogError
    naming its line."""
    file = TomlData(path, "jetson-install inspect FILE", RULES_SCHEMA)
    rules: Dict[str, Rule] = {}
    for number, entry in enumerate(file.data["rule"]):
        if entry["id"] in rules:
            raise file.refuse(("rule", number, "id"), "is given twice")
        statuses = {userspace: _status(file, number, userspace, entry[userspace]) for userspace in USERSPACES}
        rules[entry["id"]] = Rule(entry["id"], entry["says"], statuses)
    missing = [name for name in RULE_IDS if name not in rules]
    if missing:
        raise file.refuse(("rule",), f"lacks the rules {', '.join(missing)}")
    return Rules(rules, {_isa(key): _isa(value) for key, value in file.data["ptx_isa"].items()})


def _status(file: TomlData, number: int, userspace: str, table: Mapping[str, Any]) -> Status:
    """A status has sources `for` where it holds, both ways where it is unproven (the sources
    disagree), `against` where it fails."""
    supporting, against = tuple(table.get("for", ())), tuple(table.get("against", ()))
    status = table["status"]
    needs = {"holds": (True, False), "unproven": (True, True), "fails": (None, True)}[status]
    for key, given, wanted in (("for", supporting, needs[0]), ("against", against, needs[1])):
        if wanted is not None and bool(given) != wanted:
            raise file.refuse(("rule", number, userspace, key if key in table else "status"),
                              f"{'needs' if wanted else 'must not have'} '{key}' sources where the status is {status!r}")
    return Status(status, supporting, against)


def _isa(text: str) -> Tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


# --------------------------------------------------------------------------- the judge

#: How each way code reaches the GPU ranks: the verdict of a file is its weakest container's.
_RANK = {"sass-exact": 0, "sass-lower-minor": 1, "ptx-jit": 2}


def _reaches(entry: Entry, board: Board, rules: Rules) -> Optional[str]:
    """The rule by which `entry` runs on `board`; None where none applies.

    SASS runs on its own architecture; an architecture-specific build (`sm_90a`) on nothing
    else; SASS of the same major and a lower minor by the binary compatibility rule (a family
    build, `sm_100f`, is that rule's); PTX on its own or a higher architecture of any major, a
    family PTX only within its family, an architecture-specific one on its own
    (https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features/),
    if the board's driver knows its PTX ISA version."""
    if entry.kind == "sass":
        if entry.arch == board.arch:
            return "sass-exact"
        if entry.variant != "a" and entry.major == board.arch // 10 and entry.minor < board.arch % 10:
            return "sass-lower-minor"
        return None
    if entry.variant == "a" and entry.arch != board.arch:
        return None
    if entry.variant == "f" and entry.major != board.arch // 10:
        return None
    if entry.arch > board.arch or not _driver_compiles(entry, board, rules):
        return None
    return "ptx-jit"


def _driver_compiles(entry: Entry, board: Board, rules: Rules) -> bool:
    needed = rules.ptx_isa.get(entry.ptx_version) if entry.ptx_version else None
    return needed is not None and board.cuda is not None and board.cuda >= needed


def judge(containers: Sequence[Container], board: Board, rules: Rules) -> CodeVerdict:
    """The verdict of a file whose fat binary holds `containers`, for `board`."""
    if not any(container.entries for container in containers):
        return CodeVerdict(NO_GPU_CODE, "no CUDA kernels", containers=len(containers))
    best: List[Tuple[str, Entry]] = []
    uncovered = 0
    for container in containers:
        reached = sorted(((rule, entry) for entry in container.entries
                          for rule in [_reaches(entry, board, rules)] if rule is not None),
                         key=lambda pair: _RANK[pair[0]])
        if reached:
            best.append(reached[0])
        elif container.entries:
            uncovered += 1
    total = sum(1 for container in containers if container.entries)
    if not best:
        return CodeVerdict(CANNOT_RUN, _nothing_runs(containers, board, rules), containers=total, uncovered=uncovered)
    rule, entry = max(best, key=lambda pair: _RANK[pair[0]])
    status = rules.status(rule, board.userspace)
    if rule == "sass-exact":
        return CodeVerdict(RUNS, f"{entry.name} SASS", rule, status, uncovered, total)
    if status.status == "fails":
        return CodeVerdict(CANNOT_RUN, f"only {_shown(entry)} for {board.name}, which does not run on "
                                       f"{board.userspace} CUDA", rule, status, uncovered, total)
    said = _shown(entry)
    if rule == "sass-lower-minor":
        said += f" on {board.name}" + (f", unproven on {board.userspace} CUDA: the sources disagree"
                                       if status.status == "unproven" else "")
    return CodeVerdict(BY_RULE, said, rule, status, uncovered, total)


def _shown(entry: Entry) -> str:
    if entry.kind == "sass":
        return f"{entry.name} SASS"
    version = ".".join(str(part) for part in entry.ptx_version) if entry.ptx_version else "?"
    return f"{entry.name} PTX (ISA {version}), compiled by the driver at the first use"


def _nothing_runs(containers: Sequence[Container], board: Board, rules: Rules) -> str:
    """Why no code of the file reaches the board: the 'no kernel image' it will hit, and why its PTX does not help."""
    ptx = sorted({entry for container in containers for entry in container.entries if entry.kind == "ptx"},
                 key=lambda entry: (entry.arch, entry.ptx_version or (0, 0)))
    said = f"no {board.name} code and "
    if not ptx:
        said += "no PTX"
    else:
        usable_arch = [entry for entry in ptx if entry.arch <= board.arch and entry.variant != "a"]
        if not usable_arch:
            said += f"its PTX ({', '.join(sorted({entry.name for entry in ptx}))}) is for newer GPUs only"
        else:
            entry = usable_arch[-1]
            version = ".".join(str(part) for part in entry.ptx_version) if entry.ptx_version else "?"
            needed = rules.ptx_isa.get(entry.ptx_version) if entry.ptx_version else None
            driver = ".".join(str(part) for part in board.cuda) if board.cuda else "unknown"
            if needed is None:
                said += f"its PTX (ISA {version}) is newer than any CUDA release this tool knows"
            else:
                said += f"its PTX (ISA {version}) needs a CUDA {needed[0]}.{needed[1]} driver, this board's is {driver}"
    return said + ": CUDA will report 'no kernel image is available for execution on the device' at the first kernel"
