"""wheels-index.toml -> Catalog: channels and targets, through one validating loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

__all__ = ["Channel", "Target", "Catalog"]


@dataclass(frozen=True)
class Channel:
    id: str  # "jp6-cu126"
    jetpack: str  # "6.1-6.2.x"
    cuda: str  # "12.6"
    python: str  # "3.10": the Python ABI the vendor wheels are built for
    kind: str  # "tegra" | "sbsa"
    status: str  # "supported" | "experimental" | "unsupported"
    reason: str
    remedy: str  # what would make it work, for unsupported ones
    vendor_indexes: Tuple[str, ...] = ()
    pins: Mapping[str, str] = field(default_factory=dict)  # torch, torchvision, torchaudio, bitsandbytes
    numpy: Optional[str] = None  # a specifier such as "<2" when the wheels were built against NumPy 1.x
    apt: Tuple[str, ...] = ()
    containers: Tuple[str, ...] = ()
