"""`--preflight`: the channel's environment with CPU builds of torch in place of the vendor
CUDA builds, on any aarch64 machine (a hosted ARM runner, a Jetson).

It proves early and cheaply that the install, its pins and constraints and OBLITERATUS
itself work on aarch64; it never proves that the Jetson GPU works, and its evidence says so
(profile ``preflight``), so it can never pass as Jetson evidence.
"""

from __future__ import annotations

import dataclasses
import platform as host_platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from packaging.version import InvalidVersion, Version

from jetson_install.catalog.catalog import VendorSource
from jetson_install.base.errors import BadInput, CatalogError
from jetson_install.catalog.identity import Resolution, VersionSet
from jetson_install.planning.plan import DoctorProfile, InterpreterPolicy, Plan
from jetson_install.planning.routes.download import Checked, DownloadRoute, completed, vendor_steps, vendor_source
from jetson_install.base.steps import Step
from jetson_install.base.toml_file import TomlData

__all__ = ["Preflight", "PreflightRoute", "CpuTorch", "cpu_torch", "plan_preflight", "require_aarch64",
           "TORCH_FAMILY"]

DATA_PATH = Path(__file__).with_name("preflight.toml")
SCHEMA_PATH = Path(__file__).with_name("preflight.schema.json")
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
#: What the doctor expects of a preflight's environment: CPU torch, no GPU.
PREFLIGHT_PROFILE = DoctorProfile("preflight", ("--preflight",), gpu=False)


@dataclass(frozen=True)
class Preflight:
    """What a plan made with --preflight carries beyond its CPU vendor set."""

    cpu_index: Optional[str]  # None: uv's default index
    # The channel's bitsandbytes policy: from the default index in the target step, since
    # an index of CPU torch builds need not carry it.
    bitsandbytes: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        return {"cpu_index": self.cpu_index, "bitsandbytes": self.bitsandbytes}


@dataclass(frozen=True)
class PreflightRoute(DownloadRoute):
    """CPU builds of the channel's torch family in place of its vendor builds."""

    preflight: Preflight = Preflight(None, None)

    name = "preflight"
    source_option = "--cpu-index"
    any_aarch64 = True

    @property
    def profile(self) -> DoctorProfile:
        # CPU builds, judged by `doctor --preflight`; never Jetson GPU evidence.
        return PREFLIGHT_PROFILE

    def what(self, plan: Plan) -> str:
        return f"The {plan.target.title} preflight (CPU torch; not Jetson GPU support)"

    def steps(self, plan: Plan) -> Tuple[Step, ...]:
        return vendor_steps(
            plan, self, f"install CPU builds of {', '.join(plan.pins)} from {{location}}, without dependencies "
                        "(preflight: not the Jetson GPU build)",
            interpreter_note=", else python3 (CPU builds exist for it)",
            verify_title="check the CPU environment: imports, the bitsandbytes CPU library, OBLITERATUS choosing "
                         "cpu; keep the evidence (profile preflight)")

    def complete(self, plan: Plan, chosen: Optional[VersionSet], resolution: Optional[Resolution]) -> Plan:
        # No board build can help a preflight: it installs what the Jetson would, CPU aside.
        channel = plan.channel.id if plan.channel else "?"
        no_bnb = (f"channel {channel} has no bitsandbytes: the preflight installs {plan.target.title} without its "
                  f"'{plan.extra}' extra, as on the Jetson" if plan.extra else
                  f"channel {channel} has no bitsandbytes: the preflight makes the stack without it, as on the Jetson")
        # bitsandbytes comes from the default index in the target step, within the channel's range.
        wanted = self.preflight.bitsandbytes
        extra = {"bitsandbytes": wanted} if wanted is not None and chosen is not None else {}
        return completed(plan, self, chosen, resolution, no_bnb, extra)

    def interpreter_policy(self, plan: Plan) -> InterpreterPolicy:
        # CPU builds exist for every current Python: the channel's Python where there is one,
        # else the system's python3 (a hosted runner may lack the channel's).
        return InterpreterPolicy(plan.interpreter, plan.python_abi, python3_fallback=True)

    def vendor_label(self, plan: Plan) -> str:
        return "--cpu-index" if self.preflight.cpu_index else "--preflight (uv's default index)"

    def fallback_location(self, plan: Plan) -> Optional[str]:
        return None

    def set_note(self, plan: Plan) -> str:
        return "CPU builds for the preflight, in place of the channel's vendor set"

    def facts(self) -> Dict[str, Any]:
        return {"preflight": self.preflight.to_json()}

    def lock_conflict(self) -> Optional[Tuple[str, str, str]]:
        return "--preflight", ", the vendor CUDA builds among them", "drop --preflight, or install without the lock"

    def describe(self) -> Dict[str, Any]:
        return {}


def plan_preflight(base: Plan, checked: Checked, cpu_index: Optional[str]) -> Plan:
    """The preflight's plan: the channel's download plan with CPU builds of its torch family."""
    warnings = list(checked.warnings)
    vendor = vendor_source(checked.channel, base.settings, False) if checked.supported else None
    preflight = Preflight(cpu_index, None)
    if vendor is not None and checked.channel is not None:
        cpu = cpu_torch(checked.channel.id, vendor, cpu_index)
        warnings.extend(cpu.warnings)
        vendor, preflight = cpu.source, cpu.preflight
    plan = dataclasses.replace(
        base, route=PreflightRoute(preflight=preflight), channel=checked.channel, supported=checked.supported,
        reason=checked.reason, remedy=checked.remedy, python_abi=checked.channel.python if checked.channel else None,
        vendor=vendor, warnings=tuple(warnings))
    return plan.route.complete(plan, vendor.preferred if vendor else None, None)


@dataclass(frozen=True)
class CpuTorch:
    """What replaces the channel's vendor source in a preflight plan."""

    source: VendorSource  # CPU builds of the torch family, from the default index or --cpu-index
    preflight: Preflight
    warnings: Tuple[str, ...]


def _newest_default_index_cpu() -> Dict[str, str]:
    file = TomlData(DATA_PATH, "jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 --preflight",
                    SCHEMA_PATH)
    newest: Dict[str, str] = file.data["newest_default_index_cpu"]
    return newest


def _release(version: str) -> str:
    """The public release a vendor build is of: 2.4.0a0+3bcc3cddb5.nv24.07 -> 2.4.0."""
    try:
        return Version(version).base_version
    except InvalidVersion:
        raise CatalogError(f"the channel pin {version!r} is not a version",
                           fix="correct the pin in wheels-index.toml") from None


def cpu_torch(channel_id: str, vendor: VendorSource, cpu_index: Optional[str]) -> CpuTorch:
    """CPU builds of the channel's preferred torch family where the default index has them,
    else of the newest release it has, with a warning; `cpu_index` has them all."""
    preferred = vendor.preferred
    family = {name: _release(version) for name, version in preferred.pins.items() if name in TORCH_FAMILY}
    warnings = []
    if cpu_index is None and "torch" in family:
        newest = _newest_default_index_cpu()
        if Version(family["torch"]) > Version(newest["torch"]):
            warnings.append(
                f"preflight: the default index has no aarch64 CPU build of torch {family['torch']} (channel "
                f"{channel_id}; from 2.11 its aarch64 torch is a CUDA build), using torch {newest['torch']}; "
                "name an index with CPU builds of it with --cpu-index URL"
            )
            family = {name: newest[name] for name in family}
    cpu_set = VersionSet({name: f"=={version}" for name, version in family.items()}, preferred.numpy)
    source = VendorSource(cpu_index, (), (cpu_set,), cpu_set, default_index=cpu_index is None,
                          note="CPU builds of the torch family for --preflight")
    return CpuTorch(source, Preflight(cpu_index, _bitsandbytes_policy(vendor)), tuple(warnings))


def _bitsandbytes_policy(vendor: VendorSource) -> Optional[str]:
    """The channel's bitsandbytes range, which the preflight takes from the default index."""
    return vendor.preferred.specifiers.get("bitsandbytes")


def require_aarch64() -> None:
    machine = host_platform.machine().lower()
    if machine not in ("aarch64", "arm64"):
        raise BadInput(f"--preflight installs aarch64 CPU builds of torch, and this machine is {machine}",
                       fix="run it on an aarch64 machine (a hosted ARM runner, or the Jetson itself)")
