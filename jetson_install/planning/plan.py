"""The plan of an install: its route and the exact steps it runs.

A `Plan` is a frozen value: what the platform, the channel and the options decided
(planner.py makes it), and the ordered steps with every command line the install will run
(install.py runs them, as they are). The `Route` says what differs between the ways an
install can go (download, preflight, existing torch, lock); each route lives in its own
module under routes/, and everything else asks the route instead of testing for a mode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from jetson_install.base.layout import staging_placeholder
from jetson_install.base.requirements import TargetRequirement
from jetson_install.base.steps import Step
from jetson_install.board import apt
from jetson_install.board.platform import Platform
from jetson_install.board.samples import root_shown
from jetson_install.catalog.catalog import Channel, VendorSource
from jetson_install.catalog.targets import Target
from jetson_install.catalog.identity import Resolution, VersionSet
from jetson_install.catalog.settings import IndexSettings

if TYPE_CHECKING:
    from pathlib import Path

    from jetson_install.base.process import Completed
    from jetson_install.planning.bitsandbytes_source import PlannedBuild
    from jetson_install.planning.rerun import Rerun
    from jetson_install.tools.progress import StepProgress

__all__ = ["SCHEMA_VERSION", "InterpreterPolicy", "DoctorProfile", "JETSON_PROFILE", "Route", "Plan", "with_interpreter", "for_python", "resolved_plan", "Execution",
           "Handler"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class InterpreterPolicy:
    """Which Python an install takes: `explicit` (--python, or the interpreter a kept stack is
    in), else a system Python of `abi`, else (when `python3_fallback`) the system's python3."""

    explicit: Optional[str]
    abi: Optional[str]
    python3_fallback: bool = False
    # Warn when the interpreter is not of the channel's ABI (its vendor wheels are built for one).
    warn_other_abi: bool = True


@dataclass(frozen=True)
class DoctorProfile:
    """What the doctor expects of the environment a route makes, carried by the route so that
    nothing after planning tells the routes apart by a name: `name` as the plan and the evidence
    say it; `options`: what asks `jetson-install doctor` to judge an environment so; `gpu`:
    whether it runs on the board's GPU (Triton's assembler and the kernels are checked there).
    The doctor's checks take their profile from what the environment recorded (its plan.json,
    which the route's `facts` write: doctor/profiles.py), so a later doctor judges it alike."""

    name: str
    options: Tuple[str, ...] = ()
    gpu: bool = True


#: The vendor CUDA builds on the board.
JETSON_PROFILE = DoctorProfile("jetson")


class Execution(Protocol):
    """What a step's handler may use while the install runs it (running/execution.py's Run)."""

    @property
    def plan(self) -> "Plan": ...

    @property
    def staging(self) -> "Path": ...

    @property
    def python(self) -> str:
        """The new environment's interpreter."""

    @property
    def rerun(self) -> "Rerun":
        """The user's command, to run again."""

    @property
    def current(self) -> Optional["StepProgress"]:
        """The running step, which uv reports its downloads to."""

    def run(self, command: Sequence[str], fix: str) -> "Completed":
        """Run one of the step's commands; a failure raises StepFailed with the cause and `fix`."""

    def progress(self, line: str) -> None: ...


#: A route's own work around the commands of a step kind only it has; returns the step's detail.
Handler = Callable[[Step, Execution], str]


@dataclass(frozen=True)
class Route:
    """The way an install goes. This base is the download of the channel's vendor builds;
    routes/ holds every route, each one module with all that differs about it."""

    name = "download"
    #: The option a fix names to take the vendor builds from another index.
    source_option = "--vendor-index"
    #: Runs on any aarch64 machine, not only on the board itself.
    any_aarch64 = False

    @property
    def profile(self) -> DoctorProfile:
        """What the doctor expects of what this route makes (the evidence's profile)."""
        return JETSON_PROFILE

    def what(self, plan: "Plan") -> str:
        """What the install makes, in the words of its last line."""
        return plan.target.title

    def steps(self, plan: "Plan") -> Tuple[Step, ...]:
        raise NotImplementedError

    def complete(self, plan: "Plan", chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> "Plan":
        """The plan with what follows from the chosen set filled in: pins, constraints, steps."""
        raise NotImplementedError

    def interpreter_policy(self, plan: "Plan") -> InterpreterPolicy:
        return InterpreterPolicy(plan.interpreter, plan.python_abi)

    def fixed_resolution(self) -> Optional[Resolution]:
        """The vendor files when the route names them itself (a lock), so no index is read."""
        return None

    def resolves(self) -> bool:
        """Whether the install resolves a vendor set at all (a kept stack needs none)."""
        return True

    def vendor_label(self, plan: "Plan") -> str:
        channel = plan.channel
        if channel is not None and len(channel.sources) > 1 and plan.vendor is channel.sources[1]:
            return "wheels-index.toml fallback (--vendor-fallback)"
        return plan.settings.vendor_index.source

    def fallback_location(self, plan: "Plan") -> Optional[str]:
        """The channel's documented second source, offered when the first is down."""
        channel = plan.channel
        if channel is None or len(channel.sources) < 2 or plan.vendor is channel.sources[1]:
            return None
        return channel.sources[1].location

    def set_note(self, plan: "Plan") -> str:
        """How the plan's set was chosen, for the plan text."""
        if plan.resolution is None:
            return "preferred; `plan --resolve` reads the index"
        return plan.resolution.reason

    def kept(self) -> Mapping[str, str]:
        """Packages the environment takes from its parent interpreter, not installs."""
        return {}

    def facts(self) -> Dict[str, Any]:
        """The route's own entries in the plan's fingerprint: what a re-run compares."""
        return {}

    def describe(self) -> Dict[str, Any]:
        """The route's own entries in the plan's JSON."""
        return {}

    def handlers(self) -> Mapping[str, Handler]:
        """The handlers of the step kinds only this route has."""
        return {}

    def lock_conflict(self) -> Optional[Tuple[str, str, str]]:
        """(option, why, fix) when the route cannot carry out a lock instead, else None."""
        return None

    def planned_build(self) -> Optional["PlannedBuild"]:
        """What the route builds on this machine (--bitsandbytes build), if anything."""
        return None

    def file_sources(self) -> Tuple[str, ...]:
        """URLs, with their credentials, that the route's vendor files are served beside (a
        served wheelhouse's): the fetch step gives a file on the same host their credentials."""
        return ()

    def unreachable_fix(self, plan: "Plan", rerun: "Rerun", file: str) -> str:
        """The fix when a vendor file did not come (a file cut short, an HTTP error)."""
        return (f"check that {plan.vendor_location} is reachable and carries {file}; or use another: "
                f"{rerun.with_option(self.source_option, 'URL')}")


@dataclass(frozen=True)
class Plan:
    """The program for one install: its route and exact steps, what `plan` and `--dry-run` print."""

    route: Route
    target: Target
    platform: Platform
    channel: Optional[Channel]
    supported: bool
    reason: str
    remedy: str
    python_abi: Optional[str]
    interpreter: Optional[str]  # an explicit --python, else found at install time
    venv: str
    vendor: Optional[VendorSource]  # what the vendor step installs, with --vendor-index applied
    settings: IndexSettings
    requirement: Optional[TargetRequirement]  # the target's own project (None: the stack alone)
    constraints: Tuple[str, ...]
    steps: Tuple[Step, ...]
    verify: bool
    warnings: Tuple[str, ...] = ()
    pins: Mapping[str, str] = field(default_factory=dict)  # exact vendor versions (a range stays in the set)
    chosen_set: Optional[VersionSet] = None  # the preferred set, or the one the resolution took
    resolution: Optional[Resolution] = None  # None: not resolved against the index (plain `plan`)
    companions: Tuple[str, ...] = ()  # companion requirements, pinned once the install resolved them
    caps: Tuple[Tuple[str, str], ...] = ()  # (constraint, why): releases the channel's torch or Python misses
    extra: Optional[str] = None  # the target's quantization extra, where its source at this ref has one
    extra_from: Optional[str] = None  # where that was read: the source's pyproject.toml, or the catalog's rule
    additions: Tuple[str, ...] = ()  # --with: requirements put on the stack beside the target
    check_commands: Tuple[str, ...] = ()  # --check-command: run in the environment by the check step and the doctor
    interpreter_python: Optional[str] = None  # the Python ("3.11") of the interpreter the install takes, once known

    @property
    def source_url(self) -> Optional[str]:
        """The target requirement's URL: its source."""
        return self.requirement.url if self.requirement else None

    @property
    def staging(self) -> str:
        """How the steps name the environment they make."""
        return staging_placeholder(self.venv)

    @property
    def vendor_index(self) -> Optional[str]:
        """The index the vendor step asks (None: uv's default index, or direct files)."""
        if self.vendor is None:
            return None
        return self.settings.default_index.value if self.vendor.default_index else self.vendor.index

    @property
    def vendor_location(self) -> Optional[str]:
        return self.vendor.location if self.vendor else None

    def vendor_mirrors(self) -> List[Tuple[str, str]]:
        """(URL, where it was named) of each source tried after the vendor index, in order."""
        if self.vendor is None or self.vendor_index is None:
            return []
        return [(mirror.value, mirror.source) for mirror in self.vendor.mirrors if mirror.value != self.vendor_index]

    @property
    def indexes(self) -> Tuple[str, ...]:
        """Every index URL the steps may name, with its credentials (given to uv apart from its argv)."""
        found = [self.settings.default_index.value, self.settings.vendor_index.value, self.vendor_index,
                 *(mirror.value for mirror in (self.vendor.mirrors if self.vendor else ()))]
        return tuple(dict.fromkeys(url for url in found if url))

    @property
    def sources(self) -> Tuple[str, ...]:
        """The target's requirement and --with's, with their credentials: uv gets their git URLs
        without them (shared.target_lines) and its git the credentials apart (runner.run_uv)."""
        return ((str(self.requirement),) if self.requirement else ()) + self.additions

    @property
    def doctor_platform_args(self) -> Tuple[str, ...]:
        """How the doctor reads the same platform this plan was made for."""
        args: Tuple[str, ...] = ("--root", root_shown(self.platform.root))
        if self.platform.l4t is not None and self.platform.sources.get("l4t") in ("--l4t", "JETSON_L4T_VERSION"):
            args += ("--l4t", str(self.platform.l4t))
        if self.platform.soc is not None and self.platform.sources.get("soc") in ("--soc", "JETSON_INSTALL_SOC"):
            args += ("--soc", self.platform.soc)
        return args

    @property
    def constraints_base(self) -> Tuple[str, ...]:
        """The constraints that do not depend on which set the index resolved to."""
        return tuple(line for line in self.constraints if line.startswith("numpy")) + tuple(c for c, _ in self.caps)

    def fingerprint(self) -> Dict[str, Any]:
        """What must be equal for an existing environment to satisfy this plan."""
        fingerprint: Dict[str, Any] = {
            "channel": self.channel.id if self.channel else None,
            "python_abi": self.python_abi,
            "policy": self.vendor.policy() if self.vendor else None,
            "constraints_base": list(self.constraints_base),
            "requirement": str(self.requirement) if self.requirement else None,
            "vendor": self.vendor_location,
            "default_index": self.settings.default_index.value,
            "existing": None,
            "kept_pins": None,
            "bitsandbytes_build": None,
            "preflight": None,
        }
        if self.additions:
            # Only when there are any: an environment made before --with existed stays a no-op.
            fingerprint["additions"] = list(self.additions)
        if self.check_commands:
            fingerprint["check_commands"] = list(self.check_commands)
        fingerprint.update(self.route.facts())
        return fingerprint

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "target": self.target.id,
            "route": self.route.name,
            "profile": self.route.profile.name,
            "supported": self.supported,
            "status": self.channel.status if self.channel else "unsupported",
            "reason": self.reason or None,
            "remedy": self.remedy or None,
            "channel": self.channel.id if self.channel else None,
            "platform": {"l4t": str(self.platform.l4t) if self.platform.l4t else None,
                         "jetpack": self.platform.jetpack, "kind": self.platform.kind,
                         "soc": self.platform.soc, "cuda": self.platform.cuda},
            "python": self.python_abi,
            "interpreter": self.interpreter,
            "interpreter_python": self.interpreter_python,
            "venv": self.venv,
            "vendor_index": self.vendor_location,
            "vendor_index_source": self.route.vendor_label(self),
            # Tried in order after vendor_index for the same recorded builds.
            "vendor_mirrors": [{"url": url, "source": source} for url, source in self.vendor_mirrors()],
            "fallback": self.route.fallback_location(self),
            "default_index": self.settings.default_index.value,
            "default_index_source": self.settings.default_index.source,
            "pins": dict(self.pins),
            "policy": {"sets": [s.policy() for s in self.vendor.sets],
                       "preferred": self.vendor.preferred.name,
                       "prereleases": self.vendor.prereleases,
                       # The sonames each companion (with its bound) and apt package must provide.
                       "libraries": [dataclasses.asdict(library) for library in self.vendor.libraries]}
            if self.vendor else None,
            "set": self.chosen_set.name if self.chosen_set else None,
            "resolution": self.resolution.to_json() if self.resolution else None,
            "companions": list(self.companions),
            "caps": [{"constraint": c, "why": why} for c, why in self.caps],
            "constraints": list(self.constraints),
            "requirement": str(self.requirement) if self.requirement else None,
            "extra": self.extra,
            "extra_from": self.extra_from,
            "additions": list(self.additions),
            "check_commands": list(self.check_commands),
            "apt": list(self.chosen_set.apt) if self.chosen_set else [],
            # The whole command, NVIDIA's CUDA repository added first where a package is only there.
            "apt_command": apt.install_command(self.chosen_set.apt, assume_yes=True)
            if self.chosen_set and self.chosen_set.apt else None,
            "containers": [image.to_json() for image in self.channel.containers] if self.channel else [],
            "existing_torch": None,
            "lock": None,
            "bitsandbytes_build": None,
            "steps": [step.to_json() for step in self.steps],
            "warnings": list(self.warnings),
        }
        data.update(self.route.describe())
        return data


def with_interpreter(plan: Plan, path: str, python: Optional[str] = None) -> Plan:
    """The plan once the install has found its interpreter: the steps name it, and its Python
    (`python`, "3.11") decides the caps keyed on Python (for_python)."""
    plan = dataclasses.replace(plan, interpreter=path)
    if python is not None:
        plan = for_python(plan, python)
    return dataclasses.replace(plan, steps=plan.route.steps(plan)) if plan.supported else plan


def for_python(plan: Plan, python: str) -> Plan:
    """The plan for an interpreter of Python `python`: the caps keyed on Python (transformers'
    Requires-Python) are computed for it, not for the channel's Python, with the constraints
    and steps that follow."""
    if plan.interpreter_python == python:
        return plan
    plan = dataclasses.replace(plan, interpreter_python=python)
    return plan.route.complete(plan, plan.chosen_set, plan.resolution) if plan.chosen_set is not None else plan


def resolved_plan(plan: Plan, resolution: Resolution, companions: Sequence[str] = ()) -> Plan:
    """The plan with the set the index resolved to (and the companions pinned)."""
    assert plan.vendor is not None
    chosen = next((s for s in plan.vendor.sets if s.name == resolution.set_name), plan.vendor.preferred)
    warnings = tuple(w for w in resolution.warnings if w not in plan.warnings)
    plan = dataclasses.replace(plan, warnings=plan.warnings + warnings, companions=tuple(companions))
    return plan.route.complete(plan, chosen, resolution)
