"""A step of a plan: what it is for, and the exact command lines it runs.

A plan's steps are the program the install carries out: the executor runs each step's
commands as they are written here, with the new environment's path put in for the
placeholder (DIR.d/<new>) and each program name (uv, jetson-install, cmake) replaced by the
binary found at run time. A step whose work is the tool's own (the verify step's doctor)
runs in the install's process, starting only the commands it lists, and names the command
a user can run later for the same result (`equivalent`); one that downloads files itself (the
fetch step) lists each, with the sha256 it must have (`downloads`). `plan` and `--dry-run` print the
same steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

__all__ = ["Step", "StepResult", "KINDS", "Command", "Download"]

Command = Tuple[str, ...]

#: What the executor does around a step's commands, by kind (running/handlers.py's, and a route's own):
KINDS = (
    "interpreter",  # check the interpreter the install found; no command
    "venv",  # make the new environment
    # download the vendor files (uv resolves those only it can list; a lock's from a registry: all its files, each
    # blob by its sha256), check each against its sha256 and its own RECORD, keep their files' hashes
    "fetch",
    "vendor",  # install the checked vendor files (and companions), then record what was installed
    "source-build",  # build a package on this machine (or take it from the build cache), install it
    "libraries",  # the vendor builds' .so files find what the catalog records a provider for; no command
    "target",  # install the target under the environment's constraints
    "resolve-kept",  # resolve the target around a kept torch stack (--use-existing-torch)
    "lock",  # install exactly a lock's files
    "protect",  # keep the constraints in force after jetson-install exits; no command
    "check",  # uv pip check and the target's smoke command, side by side
    "doctor",  # the doctor on the new environment, in process (its probes are the commands), keeping its evidence
    "switch",  # point DIR at the new environment; no command
)


@dataclass(frozen=True)
class Download:
    """A file a step downloads in the tool's own process, and the sha256 it must have (None:
    none is known before it is read; it is recorded as measured)."""

    url: str
    sha256: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        return {"url": self.url, "sha256": self.sha256}


@dataclass(frozen=True)
class Step:
    """One step of a plan: the commands the executor runs, as `plan` prints them."""

    id: str
    kind: str
    title: str
    commands: Tuple[Command, ...] = ()
    #: The command that does this step's work where the executor does it in process: what a
    #: user runs later for the same result.
    equivalent: Command = ()
    #: What the step downloads itself, in order, beside its commands (the fetch step).
    downloads: Tuple[Download, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown step kind {self.kind!r}")

    @property
    def argv(self) -> Command:
        """The step's first command (the only one, for most steps)."""
        return self.commands[0] if self.commands else ()

    def bound(self, placeholder: str, staging: str) -> "Step":
        """The step as it runs: the new environment's path in place of the placeholder."""
        commands = tuple(tuple(part.replace(placeholder, staging) for part in command) for command in self.commands)
        return Step(self.id, self.kind, self.title, commands, self.equivalent, self.downloads)

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "title": self.title, "command": list(self.argv) or None,
                "commands": [list(command) for command in self.commands], "equivalent": list(self.equivalent) or None,
                "downloads": [download.to_json() for download in self.downloads]}


@dataclass(frozen=True)
class StepResult:
    """How one step of a run went."""

    id: str
    status: str  # ok | failed | interrupted
    seconds: float
    detail: str = ""
    downloaded_bytes: int = 0  # the sizes uv announced for the files it downloaded; 0 for cache hits

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "status": self.status, "seconds": round(self.seconds, 3),
                "downloaded_bytes": self.downloaded_bytes, "detail": self.detail or None}
