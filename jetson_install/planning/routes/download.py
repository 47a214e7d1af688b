"""The download route: the channel's vendor builds from their index (or a mirror, or the
channel's fallback source), installed first and on their own, then the target under the
constraints that keep them; with --bitsandbytes build, bitsandbytes built on the board.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.base.layout import FETCHED_FILE
from jetson_install.base.requirements import TargetRequirement
from jetson_install.base.sourced import Sourced
from jetson_install.base.steps import Step
from jetson_install.base.versions import satisfies
from jetson_install.board.platform import Platform
from jetson_install.board.samples import root_shown
from jetson_install.catalog.catalog import Channel, VendorSource
from jetson_install.catalog.targets import Target
from jetson_install.catalog.constraints import constraint_lines
from jetson_install.catalog.identity import Resolution, VersionSet
from jetson_install.catalog.settings import IndexSettings
from jetson_install.planning.plan import Plan, Route
from jetson_install.planning.routes import shared
from jetson_install.tools import uv

if TYPE_CHECKING:
    from jetson_install.planning.bitsandbytes_source import PlannedBuild


__all__ = ["DownloadRoute", "Checked", "check_channel", "vendor_source", "plan_download", "with_extra"]


@dataclass(frozen=True)
class DownloadRoute(Route):
    """The vendor builds from the channel's source; `build` (--bitsandbytes build) puts a
    bitsandbytes built on the board in place of the vendor's."""

    choice: Optional[str] = None  # --bitsandbytes build[=X]: "" for the default release, else X
    build: Optional[PlannedBuild] = None  # what that choice builds, for the plan's torch

    def steps(self, plan: Plan) -> Tuple[Step, ...]:
        return vendor_steps(plan, self, "install the vendor builds from {location}, without dependencies")

    def complete(self, plan: Plan, chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> Plan:
        return completed(plan, self, chosen, resolution, no_bitsandbytes_warning(plan))

    def with_torch(self, plan: Plan, torch: Optional[str]) -> "DownloadRoute":
        """The route once the set's torch is known: the build it needs is planned for it."""
        if self.choice is None:
            return self
        # Here, not at the top: only --bitsandbytes build needs the build's modules (git, the releases).
        from jetson_install.planning.bitsandbytes_source import plan_build

        return dataclasses.replace(self, build=plan_build(self.choice or None, torch, plan.platform.compute_capability))

    def extra_pins(self) -> Dict[str, str]:
        return {"bitsandbytes": self.build.version} if self.build is not None else {}

    def facts(self) -> Dict[str, Any]:
        return {"bitsandbytes_build": self.build.to_json() if self.build else None}

    def describe(self) -> Dict[str, Any]:
        return {"bitsandbytes_build": self.build.to_json() if self.build else None}

    def planned_build(self) -> Optional[PlannedBuild]:
        return self.build

    def lock_conflict(self) -> Optional[Tuple[str, str, str]]:
        if self.choice is None:
            return None
        return "--bitsandbytes build", "", "drop --bitsandbytes build, or install without the lock"


@dataclass(frozen=True)
class Checked:
    """What the channel and the platform allow, before any source is chosen."""

    channel: Optional[Channel]
    supported: bool
    reason: str
    remedy: str
    warnings: Tuple[str, ...]


def check_channel(platform: Platform, channel: Optional[Channel], reason: str, remedy: str, target: Target,
                  preview: bool = False) -> Checked:
    """Whether the target installs on the channel from here; `preview`: a preflight off
    aarch64, which still shows what it would do."""
    warnings: List[str] = list(platform.warnings)
    supported = channel is not None and channel.installable
    if channel is not None:
        reason, remedy = ("", "") if supported else (f"unsupported: {channel.reason}", channel.remedy)
    if supported and channel is not None and not satisfies(f"{channel.python}.0", target.requires_python):
        supported, reason = False, (f"unsupported: {target.title} needs Python {target.requires_python}, "
                                    f"and channel {channel.id} wheels are built for Python {channel.python}")
        remedy = "flash JetPack 6.2 (L4T R36.4.3)"
    here = os.uname().machine
    if preview:
        warnings.append(f"--preflight installs only on aarch64 machines; this plan is a preview on {here}")
    elif supported and Path(platform.root).resolve() == Path("/") and platform.arch != "aarch64":
        supported, reason = False, (f"unsupported: this machine is {platform.arch}, and the JetPack wheels "
                                    "are built for aarch64 (a Jetson)")
        remedy = "run it on the Jetson; to preview here: --root sample:agx-orin-64gb-jp6.2"
    elif supported and platform.arch != here:
        # A root that describes another machine (a preview, a test, a lane): it still installs here.
        warnings.append(f"--root {root_shown(platform.root)} is an {platform.arch} machine; the environment is made for "
                        f"this machine's interpreter ({here})")
    if supported and channel is not None and channel.status == "experimental":
        warnings.append(f"channel {channel.id} is experimental: {channel.reason}")
    return Checked(channel, supported, reason, remedy, tuple(warnings))


def vendor_source(channel: Optional[Channel], settings: IndexSettings, fallback: bool) -> Optional[VendorSource]:
    if channel is None or channel.primary is None:
        return None
    if fallback:
        if settings.vendor_index.value is not None:
            raise BadInput(f"--vendor-fallback and a vendor index ({settings.vendor_index.source}) were both given",
                           fix="use one: another vendor index with --vendor-index, or the channel's fallback with "
                               "--vendor-fallback")
        if len(channel.sources) < 2:
            raise BadInput(f"--vendor-fallback: channel {channel.id} has no fallback vendor source",
                           fix="drop --vendor-fallback, or name another vendor index with --vendor-index URL")
        return channel.sources[1]
    primary = channel.primary
    # The user's mirrors follow the catalog's: every one is trusted only for the recorded builds.
    # Each keeps where it was named; one named twice is tried once, where it was named first.
    named: Dict[str, Sourced[str]] = {}
    for mirror in (*primary.mirrors, *settings.mirrors):
        named.setdefault(mirror.value, mirror)
    mirrors = tuple(named.values())
    if settings.vendor_index.value is None:
        if primary.index is None:
            return primary  # direct files, or uv's default index: nothing is listed to mirror
        return dataclasses.replace(primary, mirrors=mirrors)
    # A mirror carries the same builds as the channel's first source: same sets, same identities.
    return dataclasses.replace(primary, index=settings.vendor_index.value, wheels=(), default_index=False,
                               mirrors=mirrors)


def _without(vendor: VendorSource, package: str) -> VendorSource:
    """The source with `package` left out of every set: neither resolved nor downloaded."""
    def strip(version_set: VersionSet) -> VersionSet:
        kept = {name: spec for name, spec in version_set.specifiers.items() if name != package}
        return dataclasses.replace(version_set, specifiers=kept)

    return dataclasses.replace(vendor, sets=tuple(strip(s) for s in vendor.sets), preferred=strip(vendor.preferred))


def plan_download(base: Plan, checked: Checked, fallback: bool, choice: Optional[str]) -> Plan:
    """The download route's plan: `base` carries what every route shares (target, settings, venv)."""
    vendor = vendor_source(checked.channel, base.settings, fallback) if checked.supported else None
    warnings = checked.warnings
    unused = [mirror.value for mirror in base.settings.mirrors if vendor is not None and mirror not in vendor.mirrors]
    if unused and vendor is not None:
        # Said, never silently: a mirror stands in only for an index whose files are listed.
        warnings += (f"the mirrors {', '.join(unused)} are not read: the vendor source here ({vendor.location}) "
                     "is not an index of the recorded builds they could stand in for",)
    if vendor is not None and choice is not None:
        vendor_build = vendor.preferred.specifiers.get("bitsandbytes")
        if vendor_build is not None:
            # Said, never silently: the channel's own Jetson build is what a plain install takes.
            warnings += (f"--bitsandbytes build: builds bitsandbytes on this board instead of the vendor's Jetson "
                         f"build (bitsandbytes{vendor_build} in set {vendor.preferred.name}); to use that one, drop "
                         "--bitsandbytes",)
        vendor = _without(vendor, "bitsandbytes")  # built on the board instead
    plan = dataclasses.replace(
        base, route=DownloadRoute(choice=choice), channel=checked.channel, supported=checked.supported,
        reason=checked.reason, remedy=checked.remedy, python_abi=checked.channel.python if checked.channel else None,
        vendor=vendor, warnings=warnings)
    return plan.route.complete(plan, vendor.preferred if vendor else None, None)


def no_bitsandbytes_warning(plan: Plan) -> str:
    target = plan.target
    capability = (plan.platform.compute_capability or "").replace(".", "")
    build = (f"--bitsandbytes build builds it on this board for sm_{capability or '<XY>'} (about 6 minutes on an "
             "Orin Nano Super)")
    if target.quantization_extra is None:
        return f"no Jetson bitsandbytes build from this vendor source: the stack is made without bitsandbytes; {build}"
    wanted = f"bitsandbytes {target.requires_bitsandbytes}" if target.requires_bitsandbytes else "bitsandbytes"
    if plan.extra is None:
        # A release from before the extra asks for bitsandbytes itself: uv takes the default index's.
        return (f"no Jetson {wanted} build from this vendor source, and {target.title} at this ref has no "
                f"'{target.quantization_extra}' extra: it asks for bitsandbytes itself, which uv takes from the "
                f"default index (not a Jetson build; the doctor judges it); {build}")
    return f"no Jetson {wanted} build from this vendor source: installing without the '{plan.extra}' extra; {build}"


def completed(plan: Plan, route: "DownloadRoute", chosen: Optional[VersionSet], resolution: Optional[Resolution],
              no_bnb: str, extra: Mapping[str, str] = {}) -> Plan:
    """Fill in what follows from the chosen set: pins, constraints, the requirement, the steps.
    `extra` are constraints a route adds beyond the set (the preflight's bitsandbytes range)."""
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
    if supported:
        route = route.with_torch(plan, pins.get("torch"))
    with_quantization = bool(route.extra_pins()) or bool(extra) or (
        chosen is not None and "bitsandbytes" in chosen.specifiers)
    if supported and not with_quantization and no_bnb not in warnings:
        warnings.append(no_bnb)
    if chosen is None:
        lines: List[str] = []
    elif resolution is None:
        lines = chosen.requirement_lines()
    else:
        # Exact pins; a range uv resolves in the vendor step keeps its range until it is installed.
        lines = [f"{file.name}=={file.version}" if file.version else f"{file.name}{file.specifier or ''}"
                 for file in resolution.files]
    for name, version in route.extra_pins().items():
        lines.append(f"{name}=={version}")
        pins[name] = version
    lines += [f"{name}{spec}" for name, spec in extra.items()]
    # A cap keyed on Python follows the interpreter the install takes, once it is known (a 3.11
    # environment on a 3.10 channel takes what 3.11 can), else the channel's.
    python, python_of = ((plan.interpreter_python, "the interpreter's") if plan.interpreter_python
                         else (plan.python_abi or "3", "the channel's"))
    caps = tuple(target.caps_for(pins.get("torch"), python, python_of)) if chosen is not None else ()
    constraints = tuple(constraint_lines(lines + list(plan.companions) + [c for c, _ in caps],
                                         chosen.numpy if chosen else None))
    plan = dataclasses.replace(
        plan, route=route, supported=supported, reason=reason, remedy=remedy, vendor=vendor,
        requirement=with_extra(plan.requirement, plan.extra if with_quantization else None), constraints=constraints,
        warnings=tuple(warnings), pins=pins, chosen_set=chosen, resolution=resolution, caps=caps,
    )
    return dataclasses.replace(plan, steps=route.steps(plan) if supported else ())


def with_extra(requirement: Optional[TargetRequirement], extra: Optional[str]) -> Optional[TargetRequirement]:
    """The target's requirement asking for `extra` (None: for none)."""
    if requirement is None:
        return None
    return dataclasses.replace(requirement, extras=(extra,) if extra else ())


def vendor_steps(plan: Plan, route: "DownloadRoute", vendor_title: str, interpreter_note: str = "",
                 verify_title: Optional[str] = None) -> Tuple[Step, ...]:
    """The download route's steps; a preflight differs only in its words and its doctor."""
    vendor = plan.vendor
    assert vendor is not None
    python = shared.python_of(plan)
    abi, interpreter = plan.python_abi, plan.interpreter
    steps = [
        Step("interpreter", "interpreter", (f"use {interpreter}" if interpreter else f"find a system Python {abi}")
             + interpreter_note),
        shared.environment_step(plan, interpreter or f"python{abi}",
                                f"create a new environment beside {plan.venv} (the current one stays in use)"),
        shared.fetch_step(plan),
        # The source the set came from: a mirror or registry the vendor index was passed over for
        # is where the files are, and the step names it (the passed-over one is in the warnings).
        Step("vendor", "vendor", vendor_title.format(location=plan.resolution.source if plan.resolution is not None
                                                     else vendor.location)
             + (" and the runtime wheels they need" if vendor.companions else "")
             + ": the files the fetch step checked, by their sha256, with no index",
             (tuple(uv.locked_install_argv(python, f"{shared.state_of(plan)}/{FETCHED_FILE}")),)),
    ]
    if route.build is not None:
        from jetson_install.planning.bitsandbytes_source import build_step

        steps.append(build_step(route.build, python, plan.settings.default_index.value))
    if vendor.libraries:
        steps.append(shared.libraries_step(plan))
    steps += [
        shared.target_step(plan),
        shared.protect_step(plan, "keep the constraints in force after jetson-install exits: pip.conf and UV_CONSTRAINT "
                            "in the activate scripts"),
        shared.check_step(plan, "check the installed dependencies"),
        shared.verify_step(plan, verify_title or _verify_title(plan)),
        shared.switch_step(plan),
    ]
    return tuple(steps)


def _verify_title(plan: Plan) -> str:
    if not plan.verify:
        return ("check that torch imports and is the vendor CUDA build for this Python "
                "(no GPU needed; --no-verify skips the GPU checks)")
    with_bitsandbytes = "bitsandbytes" in plan.pins or (
        plan.chosen_set is not None and "bitsandbytes" in plan.chosen_set.specifiers)
    proves = ("torch.cuda and bitsandbytes run CUDA kernels" if with_bitsandbytes
              else "torch.cuda runs CUDA kernels (this route installs no bitsandbytes)")
    return f"prove {proves}; keep the evidence"
