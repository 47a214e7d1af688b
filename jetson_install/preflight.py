"""`--preflight`: the channel's environment with CPU builds of torch in place of the vendor
CUDA builds, on any aarch64 machine (a hosted ARM runner, a Jetson).

It proves early and cheaply that the install, its pins and constraints and OBLITERATUS
itself work on aarch64; it never proves that the Jetson GPU works, and its evidence says so
(profile ``preflight``), so it can never pass as Jetson evidence.
"""

from __future__ import annotations

import platform as host_platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from packaging.version import InvalidVersion, Version

from jetson_install.catalog import Channel, VendorSource
from jetson_install.errors import BadInput, CatalogError
from jetson_install.identity import VersionSet
from jetson_install.toml_file import TomlData

__all__ = ["Preflight", "CpuTorch", "cpu_torch", "require_aarch64", "TORCH_FAMILY"]

DATA_PATH = Path(__file__).with_name("preflight.toml")
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


@dataclass(frozen=True)
class Preflight:
    """What a plan made with --preflight carries beyond its CPU vendor set."""

    cpu_index: Optional[str]  # None: uv's default index
    # The channel's bitsandbytes policy: from the default index in the target step, since
    # an index of CPU torch builds need not carry it.
    bitsandbytes: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        return {"cpu_index": self.cpu_index, "bitsandbytes": self.bitsandbytes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Preflight":
        """What an environment recorded (its plan.json) it was made with."""
        cpu_index, bitsandbytes = data.get("cpu_index"), data.get("bitsandbytes")
        return cls(cpu_index if isinstance(cpu_index, str) else None,
                   bitsandbytes if isinstance(bitsandbytes, str) else None)

    @classmethod
    def for_channel(cls, channel: Optional[Channel]) -> "Preflight":
        """`doctor --preflight` on an environment not made with it: the channel's policy."""
        primary = channel.primary if channel is not None else None
        return cls(None, _bitsandbytes_policy(primary) if primary is not None else None)


@dataclass(frozen=True)
class CpuTorch:
    """What replaces the channel's vendor source in a preflight plan."""

    source: VendorSource  # CPU builds of the torch family, from the default index or --cpu-index
    preflight: Preflight
    warnings: Tuple[str, ...]


def _newest_default_index_cpu() -> Dict[str, str]:
    file = TomlData(DATA_PATH, "jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 --preflight")
    table_name = "newest_default_index_cpu"
    file.unknown("top level", file.data, (table_name,), "a table of preflight.toml")
    start = file.header(table_name)
    where = f"[{table_name}]"
    table = file.table("top level", file.data.get(table_name), table_name)
    file.unknown(where, table, TORCH_FAMILY, "a package of the torch family", start)
    versions = {}
    for name in TORCH_FAMILY:
        versions[name] = file.string(where, table, name, start, shape='a release, like "2.10.0"')
        try:
            Version(versions[name])
        except InvalidVersion:
            raise file.fail(where, name, f"has {versions[name]!r}, which is not a version", start) from None
    return versions


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
