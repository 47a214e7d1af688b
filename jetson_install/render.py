"""Human-readable text for the structured results; nothing here decides anything."""

from __future__ import annotations

from typing import List

from jetson_install.platform import Platform

__all__ = ["platform_summary"]


def platform_summary(platform: Platform) -> str:
    name = platform.module or platform.model or "Jetson (module unknown)"
    soc = platform.soc or "SoC unknown"
    if platform.family and platform.compute_capability:
        soc += f" ({platform.family}, compute capability {platform.compute_capability})"
    lines: List[str] = [
        f"{name}: {soc}",
        f"  L4T      {platform.l4t or 'unknown'}   ({platform.sources.get('l4t', '-')})",
        f"  JetPack  {platform.jetpack or 'unknown'}",
        f"  CUDA     {platform.cuda or 'unknown'}   ({platform.sources.get('cuda', '-')})",
        f"  kind     {platform.kind or 'unknown'}",
        f"  Ubuntu   {platform.ubuntu or 'unknown'}   Python {platform.python or 'unknown'}",
    ]
    if platform.model and platform.module:
        lines.append(f"  model    {platform.model}")
    if platform.kernel:
        lines.append(f"  kernel   {platform.kernel}")
    lines.extend(f"warning: {warning}" for warning in platform.warnings)
    return "\n".join(lines)
