"""Runner labels for a Jetson: upstream's base labels, then what a workflow may select on.

Upstream's Jetson gate runs on ``self-hosted, linux, ARM64, jetson``; ``cuda`` labels its x64
CUDA gate (https://github.com/elder-plinius/OBLITERATUS, docs on the conditional tests). Here
``cuda`` is added only where fresh passing doctor evidence proves CUDA works, so a job asking
for it never lands on a runner whose torch cannot use the GPU.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jetson_install.fleet.evidence import Verdict, proven_here
from jetson_install.board.platform import Platform
from jetson_install.board.platform_data import platform_data

__all__ = ["BASE_LABELS", "RunnerLabels", "runner_labels", "memory_class"]

BASE_LABELS = ("self-hosted", "linux", "ARM64", "jetson")
_MEMTOTAL = re.compile(r"^MemTotal:\s+(\d+)\s*kB", re.MULTILINE)


@dataclass(frozen=True)
class RunnerLabels:
    labels: Tuple[str, ...]
    cuda_reason: str  # why `cuda` is there, or is not
    warnings: Tuple[str, ...] = ()  # the platform's, as `detect` gives them (on stderr, not in the JSON)

    def to_json(self) -> Dict[str, Any]:
        return {"labels": list(self.labels), "cuda": "cuda" in self.labels, "cuda_reason": self.cuda_reason}


def memory_class(total_bytes: int) -> str:
    """The module's memory rounded to its nominal size: a 64 GB AGX Orin shows ~61 GiB to the
    kernel (firmware carve-outs), an 8 GB Orin Nano ~7.4 GiB; the nearest power of two is it."""
    gib = total_bytes / 2**30
    return f"mem{2 ** max(0, round(math.log2(gib)))}g" if gib > 0 else ""


def _memory_bytes(platform: Platform, evidence: Optional[Mapping[str, Any]]) -> Optional[int]:
    # On a Jetson the GPU's memory is the unified system memory, so torch's figure is the module's.
    if evidence is not None and evidence["torch"].get("total_memory_bytes"):
        return int(evidence["torch"]["total_memory_bytes"])
    try:
        with open(Path(platform.root) / "proc" / "meminfo", "rb") as handle:
            text = handle.read(64 * 1024).decode("ascii", "replace")
    except OSError:
        return None
    match = _MEMTOTAL.search(text)
    return int(match.group(1)) * 1024 if match else None


def runner_labels(platform: Platform, verdict: Optional[Verdict]) -> RunnerLabels:
    """Labels for ``platform``; ``verdict`` judges the evidence that may grant ``cuda``, which
    it does only when it proves CUDA on this board (evidence.proven_here)."""
    labels: List[str] = list(BASE_LABELS)
    if platform.family:
        labels.append(platform.family.lower())
    if platform.jetpack:
        labels.append(f"jp{platform.jetpack}")  # jp6.2, or jp6.x for an unknown point release
    if platform.l4t is not None:
        labels.append(f"l4t-{platform.l4t.major}.{platform.l4t.minor}")
    labels += [label for words, label in platform_data().model_labels.items() if words in (platform.model or "")]
    if verdict is None:
        unproven: Optional[str] = "no evidence: run jetson-install doctor --strict --evidence FILE first"
    elif not verdict.ok:
        unproven = f"{verdict.path}: {verdict.reason}"
    else:
        # Evidence copied from another board, or from before a re-flash, proves nothing here.
        refusal = proven_here(verdict.evidence, platform)
        unproven = f"{verdict.path}: {refusal}" if refusal is not None else None
    evidence = verdict.evidence if verdict is not None and unproven is None else None
    if platform.compute_capability:
        labels.append("sm" + platform.compute_capability.replace(".", ""))
    memory = _memory_bytes(platform, evidence)
    if memory:
        labels.append(memory_class(memory))
    if unproven is None:
        assert verdict is not None
        labels.append("cuda")
        return RunnerLabels(tuple(labels), f"{verdict.path}: {verdict.reason}", platform.warnings)
    return RunnerLabels(tuple(labels), unproven, platform.warnings)
