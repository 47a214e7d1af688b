"""Platform + channel + target + index settings -> Plan: the ordered steps of an install.

Building a plan changes nothing; `plan` prints it and `obliteratus` carries it out.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install import uv
from jetson_install.source_build.bitsandbytes import CUDA_HOME, PlannedBuild, parse_choice, plan_build
from jetson_install.catalog import Catalog, Channel, Target, VendorSource
from jetson_install.constraints import constraint_lines
from jetson_install.container import RESOLUTION, TO_INSTALL, ExistingStack, judge_stack
from jetson_install.errors import BadInput
from jetson_install.identity import Resolution, VersionSet
from jetson_install.platform import Platform
from jetson_install.preflight import Preflight, cpu_torch
from jetson_install.settings import IndexSettings
from jetson_install.versions import satisfies

if TYPE_CHECKING:
    from jetson_install.lock import LockInUse

__all__ = ["Step", "Plan", "make_plan", "resolved_plan", "with_lock", "target_requirement", "SCHEMA_VERSION", "STATE_DIR", "CONSTRAINTS_FILE", "EVIDENCE_FILE"]

SCHEMA_VERSION = 1
#: Inside every environment jetson-install makes: constraints, plan, evidence.
STATE_DIR = "jetson-install"
CONSTRAINTS_FILE = "constraints.txt"
EVIDENCE_FILE = "evidence.json"
COMPANIONS_FILE = "companions.txt"


@dataclass(frozen=True)
class Step:
    id: str
    title: str
    argv: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"id": self.id, "title": self.title, "command": list(self.argv) or None}


@dataclass(frozen=True)
class Plan:
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
    requirement: str
    constraints: Tuple[str, ...]
    steps: Tuple[Step, ...]
    verify: bool
    warnings: Tuple[str, ...] = ()
    pins: Mapping[str, str] = field(default_factory=dict)  # exact vendor versions (a range stays in the set)
    existing: Optional[ExistingStack] = None  # --use-existing-torch: the stack kept as it is
    chosen_set: Optional[VersionSet] = None  # the preferred set, or the one the resolution took
    resolution: Optional[Resolution] = None  # None: not resolved against the index (plain `plan`)
    companions: Tuple[str, ...] = ()  # companion requirements, pinned once the install resolved them
    lock: Optional["LockInUse"] = None  # --lock/--wheelhouse: exactly these files, nothing resolved
    caps: Tuple[Tuple[str, str], ...] = ()  # (constraint, why): releases the channel's torch or Python misses
    bitsandbytes_choice: Optional[str] = None  # --bitsandbytes build[=X]: "" for the default release, else X
    bitsandbytes_build: Optional[PlannedBuild] = None  # what that choice builds, for this plan's torch
    preflight: Optional[Preflight] = None  # --preflight: CPU builds of torch in place of the vendor ones

    @property
    def vendor_requirements(self) -> List[str]:
        """What the vendor step asks for: the resolved files themselves (by URL, with their
        sha256), else the chosen set's version policy."""
        if self.resolution is None:
            if self.vendor is not None and self.vendor.wheels:
                return list(self.vendor.wheels)
            return self.chosen_set.requirement_lines() if self.chosen_set else []
        lines = []
        for chosen in self.resolution.files:
            if chosen.url:
                lines.append(f"{chosen.name} @ {chosen.url}" + (f"#sha256={chosen.sha256}" if chosen.sha256 else ""))
            else:
                lines.append(f"{chosen.name}=={chosen.version}")
        return lines

    @property
    def vendor_location(self) -> Optional[str]:
        return self.vendor.location if self.vendor else None

    @property
    def vendor_label(self) -> str:
        if self.existing is not None:
            return f"kept from {self.existing.python} (--use-existing-torch)"
        if self.preflight is not None:
            return "--cpu-index" if self.preflight.cpu_index else "--preflight (uv's default index)"
        if self.channel is not None and len(self.channel.sources) > 1 and self.vendor is self.channel.sources[1]:
            return "wheels-index.toml fallback (--vendor-fallback)"
        return self.settings.vendor_index.source

    @property
    def fallback_location(self) -> Optional[str]:
        """The channel's documented second source, offered when the first is down."""
        if (self.existing is not None or self.preflight is not None or self.channel is None or len(self.channel.sources) < 2
                or self.vendor is self.channel.sources[1]):
            return None
        return self.channel.sources[1].location

    def fingerprint(self) -> Dict[str, Any]:
        """What must be equal for an existing environment to satisfy this plan."""
        fingerprint = {
            "channel": self.channel.id if self.channel else None,
            "python_abi": self.python_abi,
            "policy": self.vendor.policy() if self.vendor else None,
            "constraints_base": list(self.constraints_base),
            "requirement": self.requirement,
            "vendor": self.vendor_location,
            "default_index": self.settings.default_index.value,
            # A changed image torch (another RECORD) must give a new environment.
            "existing": self.existing.to_json() if self.existing else None,
            # A kept stack has no vendor record (identity.py); its versions are the pins.
            "kept_pins": dict(self.pins) if self.existing else None,
            "bitsandbytes_build": self.bitsandbytes_build.to_json() if self.bitsandbytes_build else None,
            "preflight": self.preflight.to_json() if self.preflight is not None else None,
        }
        if self.lock is not None:
            fingerprint["lock"] = self.lock.sha256
        return fingerprint

    @property
    def constraints_base(self) -> Tuple[str, ...]:
        """The constraints that do not depend on which set the index resolved to."""
        return tuple(line for line in self.constraints if line.startswith("numpy")) + tuple(c for c, _ in self.caps)

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "target": self.target.id,
            "profile": "preflight" if self.preflight is not None else "jetson",
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
            "venv": self.venv,
            "vendor_index": self.vendor_location,
            "vendor_index_source": self.vendor_label,
            "fallback": self.fallback_location,
            "default_index": self.settings.default_index.value,
            "default_index_source": self.settings.default_index.source,
            "pins": dict(self.pins),
            "policy": {"sets": [dict(s.specifiers) for s in self.vendor.sets],
                       "preferred": self.vendor.preferred.name,
                       "prereleases": self.vendor.prereleases} if self.vendor else None,
            "set": self.chosen_set.name if self.chosen_set else None,
            "resolution": self.resolution.to_json() if self.resolution else None,
            "companions": list(self.companions),
            "caps": [{"constraint": c, "why": why} for c, why in self.caps],
            "constraints": list(self.constraints),
            "requirement": self.requirement,
            "apt": list(self.chosen_set.apt) if self.chosen_set else [],
            "containers": [image.to_json() for image in self.channel.containers] if self.channel else [],
            "existing_torch": self.existing.to_json() if self.existing else None,
            "lock": self.lock.to_json() if self.lock else None,
            "bitsandbytes_build": self.bitsandbytes_build.to_json() if self.bitsandbytes_build else None,
            "steps": [step.to_json() for step in self.steps],
            "warnings": list(self.warnings),
        }


_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
# git check-ref-format's rules (https://git-scm.com/docs/git-check-ref-format), plus '@' and
# '#', which split a direct reference's URL, and a leading '-', which git would take as an option.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\@#]")


def check_git_ref(ref: str) -> None:
    """Refuse what is not a git branch, tag or commit name, before anything runs."""
    problem = None
    if not ref:
        problem = "is empty"
    elif _REF_FORBIDDEN.search(ref):
        character = _REF_FORBIDDEN.search(ref).group()  # type: ignore[union-attr]
        problem = f"contains {character!r}, which no git ref name has"
    elif ref.startswith(("-", "/", ".")) or ref.endswith(("/", ".", ".lock")) or ".." in ref or "//" in ref \
            or "/." in ref:
        problem = "is not a valid git ref name"
    if problem:
        raise BadInput(f"--ref {ref!r} {problem}",
                       fix="give a tag, branch or commit, e.g. --ref v0.1.3 (see: git ls-remote --tags REPOSITORY)")


def target_requirement(target: Target, with_quantization: bool, source: Optional[str], ref: Optional[str]) -> str:
    """A direct-reference requirement: the target is never resolved by name from an index,
    where its name is an empty placeholder (obliteratus 0.0.1's METADATA: "Reserved name placeholder.
    No functionality.")."""
    if ref is not None:
        check_git_ref(ref)
    extras = f"[{target.quantization_extra}]" if with_quantization else ""
    name = f"{target.distribution}{extras}"
    if source is None:
        return f"{name} @ git+{target.git}@{ref or target.ref}"
    if "://" in source:
        if source.endswith(_ARCHIVE_SUFFIXES):
            if ref:
                raise BadInput(f"--ref {ref}: a ref needs a git source, and {source} is an archive",
                               fix="drop --ref, or pass the repository URL as --source")
            return f"{name} @ {source}"
        url = source if source.startswith("git+") else f"git+{source}"
        if ref and "@" in url.split("://", 1)[1].split("/", 1)[-1]:
            raise BadInput(f"--source {source} already names a ref, and --ref {ref} names another",
                           fix="give the ref once: either in the URL (…@REF) or with --ref")
        return f"{name} @ {url}@{ref}" if ref else f"{name} @ {url}"
    path = Path(source).resolve()
    if not path.is_dir():
        raise BadInput(f"--source {source}: no such folder",
                       fix="pass the OBLITERATUS checkout: git clone https://github.com/elder-plinius/OBLITERATUS")
    if not (path / "pyproject.toml").is_file() and not (path / "setup.py").is_file():
        raise BadInput(f"--source {source}: no Python project there (no pyproject.toml)",
                       fix="pass the OBLITERATUS checkout: git clone https://github.com/elder-plinius/OBLITERATUS")
    if ref:
        return f"{name} @ git+{path.as_uri()}@{ref}"
    return f"{name} @ {path.as_uri()}"


def make_plan(
    platform: Platform,
    catalog: Catalog,
    target_id: str,
    settings: IndexSettings,
    venv: Path,
    interpreter: Optional[str] = None,
    source: Optional[str] = None,
    ref: Optional[str] = None,
    verify: bool = True,
    fallback: bool = False,
    existing: Optional[ExistingStack] = None,
    bitsandbytes: Optional[str] = None,
    preflight: bool = False,
    cpu_index: Optional[str] = None,
) -> Plan:
    """`bitsandbytes` is --bitsandbytes' value (build, build=VERSION or build=PATH), if given;
    `preflight` puts CPU builds of torch (from `cpu_index`, else the default index) in place
    of the vendor builds."""
    target = catalog.targets[target_id]
    choice = None if bitsandbytes is None else (parse_choice(bitsandbytes) or "")
    if choice is not None and existing is not None:
        raise BadInput("--bitsandbytes build and --use-existing-torch were both given",
                       fix="keep the image's stack as it is, or build bitsandbytes for a downloaded torch: use one")
    if preflight and (existing is not None or choice is not None):
        other = "--use-existing-torch" if existing is not None else "--bitsandbytes build"
        raise BadInput(f"--preflight and {other} were both given",
                       fix=f"use one: --preflight installs CPU torch and needs no GPU build; drop {other}")
    if cpu_index is not None and not preflight:
        raise BadInput("--cpu-index is only for --preflight", fix="add --preflight, or drop --cpu-index")
    if preflight and fallback:
        raise BadInput("--preflight and --vendor-fallback were both given: a preflight takes CPU builds, not a "
                       "vendor source", fix="drop --vendor-fallback (an index of CPU builds: --cpu-index URL)")
    if preflight and settings.vendor_index.source == "--vendor-index":
        raise BadInput("--preflight and --vendor-index were both given: a preflight takes CPU builds, not the "
                       "vendor builds", fix="drop --vendor-index (an index of CPU builds: --cpu-index URL)")
    if existing is not None:
        return _existing_torch_plan(platform, catalog, target, settings, venv, existing, source, ref, verify)
    match = catalog.match(platform)
    channel = match.channel
    warnings: List[str] = list(platform.warnings)
    supported = channel is not None and channel.installable
    reason = match.reason if channel is None else ("" if supported else f"unsupported: {channel.reason}")
    remedy = match.remedy if channel is None else ("" if supported else channel.remedy)
    if supported and channel is not None and not _python_fits(target, channel):
        supported, reason = False, (f"unsupported: {target.title} needs Python {target.requires_python}, "
                                    f"and channel {channel.id} wheels are built for Python {channel.python}")
        remedy = "flash JetPack 6.2 (L4T R36.4.3)"
    if preflight and os.uname().machine != "aarch64":
        warnings.append(f"--preflight installs only on aarch64 machines; this plan is a preview on "
                        f"{os.uname().machine}")
    elif supported and Path(platform.root).resolve() == Path("/") and platform.arch != "aarch64":
        supported, reason = False, (f"unsupported: this machine is {platform.arch}, and the JetPack wheels "
                                    "are built for aarch64 (a Jetson)")
        remedy = "run it on the Jetson; to preview here: --root sample:agx-orin-64gb-jp6.2"
    elif supported and platform.arch != os.uname().machine:
        # A root that describes another machine (a preview, a test, a lane): it still installs here.
        warnings.append(f"--root {platform.root} is an {platform.arch} machine; the environment is made for "
                        f"this machine's interpreter ({os.uname().machine})")
    if supported and channel is not None and channel.status == "experimental":
        warnings.append(f"channel {channel.id} is experimental: {channel.reason}")

    vendor = _vendor_source(channel, settings, fallback) if supported else None
    if vendor is not None and choice is not None:
        vendor = _without(vendor, "bitsandbytes")  # built on the board instead
    preflight_choice = Preflight(cpu_index, None) if preflight else None
    if preflight and vendor is not None and channel is not None:
        cpu = cpu_torch(channel.id, vendor, cpu_index)
        warnings.extend(cpu.warnings)
        vendor, preflight_choice = cpu.source, cpu.preflight
    plan = Plan(
        target=target, platform=platform, channel=channel, supported=supported, reason=reason, remedy=remedy,
        python_abi=channel.python if channel else None, interpreter=interpreter, venv=str(venv), vendor=vendor,
        settings=settings, requirement=target_requirement(target, False, source, ref), constraints=(), steps=(),
        verify=verify, warnings=tuple(warnings), bitsandbytes_choice=choice, preflight=preflight_choice,
    )
    return _completed(plan, vendor.preferred if vendor else None, None)


def resolved_plan(plan: Plan, resolution: Resolution, companions: Sequence[str] = ()) -> Plan:
    """The plan with the set the index resolved to (and the companions pinned)."""
    assert plan.vendor is not None
    chosen = next((s for s in plan.vendor.sets if s.name == resolution.set_name), plan.vendor.preferred)
    warnings = tuple(w for w in resolution.warnings if w not in plan.warnings)
    plan = dataclasses.replace(plan, warnings=plan.warnings + warnings, companions=tuple(companions))
    return _completed(plan, chosen, resolution)


def _completed(plan: Plan, chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> Plan:
    """Fill in what follows from the chosen set: pins, constraints, the requirement, the steps."""
    target, vendor = plan.target, plan.vendor
    supported, reason, remedy = plan.supported, plan.reason, plan.remedy
    warnings = list(plan.warnings)
    pins: Dict[str, str] = dict(resolution.pins if resolution else (chosen.pins if chosen else {}))
    torch = pins.get("torch")
    if vendor is not None and torch is not None and not satisfies(torch, target.requires_torch):
        supported, reason = False, (f"unsupported: the channel's torch {torch} is older than "
                                    f"{target.title} needs (torch {target.requires_torch})")
        channel = plan.channel
        remedy = channel.remedy if channel and channel.remedy else "flash JetPack 6.2 (L4T R36.4.3)"
        vendor, chosen, pins = None, None, {}
    build = None
    if supported and plan.bitsandbytes_choice is not None:
        build = plan_build(plan.bitsandbytes_choice or None, pins.get("torch"), plan.platform.compute_capability)
    preflight_bitsandbytes = plan.preflight.bitsandbytes if plan.preflight is not None and chosen is not None else None
    with_quantization = build is not None or preflight_bitsandbytes is not None or (
        chosen is not None and "bitsandbytes" in chosen.specifiers)
    capability = (plan.platform.compute_capability or "").replace(".", "")
    no_bnb = (f"no Jetson bitsandbytes {target.requires_bitsandbytes} build from this vendor source: "
              f"installing without the '{target.quantization_extra}' extra; --bitsandbytes build builds it on "
              f"this board for sm_{capability or '<XY>'} (about 6 minutes on an Orin Nano Super)")
    if plan.preflight is not None:
        # No board build can help a preflight: it installs what the Jetson would, CPU aside.
        no_bnb = (f"channel {plan.channel.id if plan.channel else '?'} has no bitsandbytes: the preflight installs "
                  f"{target.title} without its '{target.quantization_extra}' extra, as on the Jetson")
    if supported and not with_quantization and no_bnb not in warnings:
        warnings.append(no_bnb)
    if chosen is None:
        lines: List[str] = []
    elif resolution is None:
        lines = chosen.requirement_lines()
    else:
        lines = [f"{name}=={version}" for name, version in pins.items()]
    if build is not None:
        lines.append(f"bitsandbytes=={build.version}")
        pins["bitsandbytes"] = build.version
    if preflight_bitsandbytes is not None:
        lines.append(f"bitsandbytes{preflight_bitsandbytes}")
    caps = tuple(target.caps_for(pins.get("torch"), plan.python_abi or "3")) if chosen is not None else ()
    constraints = tuple(constraint_lines(lines + list(plan.companions) + [c for c, _ in caps],
                                         chosen.numpy if chosen else None))
    requirement = _with_extra(plan.requirement, target, with_quantization)
    plan = dataclasses.replace(
        plan, supported=supported, reason=reason, remedy=remedy, vendor=vendor, requirement=requirement,
        constraints=constraints, warnings=tuple(warnings), pins=pins, chosen_set=chosen, resolution=resolution,
        caps=caps, bitsandbytes_build=build,
    )
    steps = _steps(plan) if supported else ()
    return dataclasses.replace(plan, steps=steps)


def _with_extra(requirement: str, target: Target, with_quantization: bool) -> str:
    name, _, rest = requirement.partition(" @ ")
    base = name.split("[", 1)[0]
    return f"{base}[{target.quantization_extra}] @ {rest}" if with_quantization else f"{base} @ {rest}"


def with_lock(plan: Plan, lock: "LockInUse") -> Plan:
    """`plan` carrying out a lock: its vendor and target steps become one install of exactly
    the lock's files, by hash, with no index (the lock was resolved when it was made)."""
    from dataclasses import replace

    if plan.bitsandbytes_build is not None:
        raise BadInput(f"--bitsandbytes build and a lock ({lock.location}) were both given: a lock installs "
                       "exactly its own files", fix="drop --bitsandbytes build, or install without the lock")
    if plan.preflight is not None:
        raise BadInput(f"--preflight and a lock ({lock.location}) were both given: a lock installs exactly its own "
                       "files, the vendor CUDA builds among them", fix="drop --preflight, or install without the lock")

    python = f"{plan.venv}.d/<new>/bin/python"
    locked = Step("lock", f"install exactly the {len(lock.lock.entries)} files of {lock.location}, each by its "
                          "sha256, without an index",
                  tuple(uv.locked_install_argv(python, f"{plan.venv}.d/<new>/{STATE_DIR}/lock.txt")))
    steps: List[Step] = []
    for step in plan.steps:
        if step.id == "environment":
            # The lock carries pip itself: the new environment asks no index for it.
            steps.append(replace(step, argv=tuple(uv.venv_argv(plan.interpreter or f"python{plan.python_abi}",
                                                               f"{plan.venv}.d/<new>", None, seed=False))))
        elif step.id == "vendor":
            steps.append(locked)
        elif step.id not in ("companions", "target"):
            steps.append(step)
    # The target is the wheel the lock names, fixed by its hash: its source is never asked again.
    built = [entry for entry in lock.lock.entries if entry.origin == "built"]
    requirement = f"{built[0].name} @ {built[0].url}" if built else plan.requirement
    return replace(plan, lock=lock, steps=tuple(steps), requirement=requirement)


def _existing_torch_plan(platform: Platform, catalog: Catalog, target: Target, settings: IndexSettings, venv: Path,
                         existing: ExistingStack, source: Optional[str], ref: Optional[str], verify: bool) -> Plan:
    """The plan that keeps the interpreter's torch stack: no vendor step; the target's other
    dependencies are resolved around the kept packages and installed without dependencies."""
    match = catalog.match(platform)
    channel = match.channel
    warnings: List[str] = list(platform.warnings)
    if channel is None:
        reason, remedy = match.reason, match.remedy
    else:
        reason, remedy, found = judge_stack(existing, channel.cuda, target.requires_python, target.requires_torch)
        warnings += found
    supported = not reason
    pins = existing.pins
    bnb = pins.get("bitsandbytes")
    with_quantization = bnb is not None and satisfies(bnb, target.requires_bitsandbytes)
    if supported and not with_quantization:
        warnings.append(f"{existing.python} has no bitsandbytes {target.requires_bitsandbytes}: "
                        f"installing without the '{target.quantization_extra}' extra")
    requirement = target_requirement(target, with_quantization, source, ref)
    constraints = tuple(constraint_lines([f"{name}=={version}" for name, version in pins.items()], None))
    steps = _existing_torch_steps(target, existing, venv, settings, verify) if supported else ()
    return Plan(
        target=target, platform=platform, channel=channel, supported=supported, reason=reason, remedy=remedy,
        python_abi=existing.abi, interpreter=existing.python, venv=str(venv), vendor=None, settings=settings,
        requirement=requirement, constraints=constraints, steps=steps, verify=verify,
        warnings=tuple(warnings), pins=pins, existing=existing,
    )


def _existing_torch_steps(target: Target, existing: ExistingStack, venv: Path, settings: IndexSettings,
                          verify: bool) -> Tuple[Step, ...]:
    staging = f"{venv}.d/<new>"
    python = f"{staging}/bin/python"
    state = f"{staging}/{STATE_DIR}"
    default_index = settings.default_index.value
    torch = existing.torch
    assert torch is not None
    kept = ", ".join(f"{name} {version}" for name, version in existing.pins.items())
    steps = [
        Step("interpreter", f"use {existing.python}: keep torch {torch.version} (CUDA {torch.cuda}) "
                            f"from {torch.location}"),
        Step("environment", f"create a new environment beside {venv} that sees {existing.python}'s packages",
             tuple(uv.venv_argv(existing.python, staging, default_index, system_site_packages=True))),
        Step("resolve", f"resolve {target.title}'s dependencies with {kept} given as they are",
             tuple(uv.compile_argv(python, f"{state}/requirements.txt", f"{state}/{CONSTRAINTS_FILE}",
                                   default_index, f"{state}/{RESOLUTION}"))),
        Step("target", f"install {target.title} and the rest of the resolution without dependencies",
             tuple(uv.no_deps_install_argv(python, f"{state}/{TO_INSTALL}", default_index))),
        Step("protect", "keep the stack in force after jetson-install exits: pip.conf, and UV_CONSTRAINT and "
                        "UV_EXCLUDE in the activate scripts"),
        Step("check", "check the installed dependencies, the kept stack included", tuple(uv.pip_check_argv(python))),
    ]
    if verify:
        steps.append(Step("verify", "prove torch.cuda and bitsandbytes run CUDA kernels; keep the evidence",
                          ("jetson-install", "doctor", "--python", python, "--evidence", f"{state}/{EVIDENCE_FILE}")))
    steps.append(Step("switch", f"switch {venv} to the new environment in one atomic rename"))
    return tuple(steps)


def _without(vendor: VendorSource, package: str) -> VendorSource:
    """The source with `package` left out of every set: neither resolved nor downloaded."""
    def strip(version_set: VersionSet) -> VersionSet:
        kept = {name: spec for name, spec in version_set.specifiers.items() if name != package}
        return dataclasses.replace(version_set, specifiers=kept)

    return dataclasses.replace(vendor, sets=tuple(strip(s) for s in vendor.sets), preferred=strip(vendor.preferred))


def _python_fits(target: Target, channel: Channel) -> bool:
    return satisfies(f"{channel.python}.0", target.requires_python)


def _vendor_source(channel: Optional[Channel], settings: IndexSettings, fallback: bool) -> Optional[VendorSource]:
    if channel is None or channel.primary is None:
        return None
    if fallback:
        if settings.vendor_index.value is not None:
            raise BadInput(f"--vendor-fallback and a vendor index ({settings.vendor_index.source}) were both given",
                           fix="use one: the mirror with --vendor-index, or the channel's fallback with --vendor-fallback")
        if len(channel.sources) < 2:
            raise BadInput(f"--vendor-fallback: channel {channel.id} has no fallback vendor source",
                           fix="drop --vendor-fallback, or use a mirror with --vendor-index URL")
        return channel.sources[1]
    primary = channel.primary
    if settings.vendor_index.value is None:
        return primary
    # A mirror carries the same builds as the channel's first source: same sets, same identities.
    return dataclasses.replace(primary, index=settings.vendor_index.value, wheels=(), default_index=False)


def _steps(plan: Plan) -> Tuple[Step, ...]:
    vendor, settings, target = plan.vendor, plan.settings, plan.target
    assert vendor is not None
    venv, interpreter, abi = plan.venv, plan.interpreter, plan.python_abi
    staging = f"{venv}.d/<new>"
    python = f"{staging}/bin/python"
    constraints_file = f"{staging}/{STATE_DIR}/{CONSTRAINTS_FILE}"
    default_index = settings.default_index.value
    vendor_index = settings.default_index.value if vendor.default_index else vendor.index
    requirements = [plan.requirement] + [f"{name}=={version}" for name, version in plan.pins.items()]
    steps = [
        Step("interpreter", f"use {interpreter}" if interpreter else f"find a system Python {abi}"
                            + (", else python3 (CPU builds exist for it)" if plan.preflight is not None else "")),
        Step("environment", f"create a new environment beside {venv} (the current one stays in use)",
             tuple(uv.venv_argv(interpreter or f"python{abi}", staging, default_index))),
        Step("vendor", f"install CPU builds of {', '.join(plan.pins)} from {vendor.location}, without dependencies "
                       "(preflight: not the Jetson GPU build)" if plan.preflight is not None
             else f"install the vendor builds from {vendor.location} only, without dependencies",
             tuple(uv.vendor_install_argv(python, vendor_index, bool(vendor.wheels), plan.vendor_requirements))),
    ]
    if vendor.companions:
        steps.append(Step("companions", f"install the runtime wheels the vendor builds need ({', '.join(vendor.companions)}) "
                                        "from the default index, by name, recording their hashes",
                          tuple(uv.companions_compile_argv(python, f"{staging}/{STATE_DIR}/{COMPANIONS_FILE}",
                                                           default_index))))
    build = plan.bitsandbytes_build
    if build is not None:
        origin = f"release {build.version}" if not build.source.is_local else f"the checkout {build.source.location}"
        steps.append(Step("bitsandbytes", f"build bitsandbytes from {origin} for sm_{build.capability} with "
                                          f"{CUDA_HOME}/bin/nvcc into a wheel (or take it from the build cache), "
                                          "and install it without dependencies"))
    steps += [
        Step("target", f"install {target.title} from its source under the vendor constraints",
             tuple(uv.target_install_argv(python, requirements, constraints_file, default_index))),
        Step("protect", "keep the constraints in force after jetson-install exits: pip.conf and UV_CONSTRAINT "
                        "in the activate scripts"),
        Step("check", "check the installed dependencies", tuple(uv.pip_check_argv(python))),
    ]
    doctor = ("jetson-install", "doctor", "--python", python, "--evidence", f"{staging}/{STATE_DIR}/{EVIDENCE_FILE}")
    if plan.preflight is not None:
        doctor += ("--preflight",)
    if plan.verify and plan.preflight is not None:
        steps.append(Step("verify", "check the CPU environment: imports, the bitsandbytes CPU library, OBLITERATUS "
                                    "choosing cpu; keep the evidence (profile preflight)", doctor))
    elif plan.verify:
        with_bitsandbytes = f"[{target.quantization_extra}]" in plan.requirement.split(" @ ", 1)[0]
        proves = ("torch.cuda and bitsandbytes run CUDA kernels" if with_bitsandbytes
                  else "torch.cuda runs CUDA kernels (this route installs no bitsandbytes)")
        steps.append(Step("verify", f"prove {proves}; keep the evidence", doctor))
    else:
        # --no-verify skips only what needs the GPU: a CPU-only torch must still never be switched in.
        from jetson_install.doctor import GPU_FREE_CHECKS

        only = tuple(part for check in GPU_FREE_CHECKS for part in ("--check", check))
        steps.append(Step("verify", "check that torch imports and is the vendor CUDA build for this Python "
                                    "(no GPU needed; --no-verify skips the GPU checks)", doctor + only))
    steps.append(Step("switch", f"switch {venv} to the new environment in one atomic rename"))
    return tuple(steps)
