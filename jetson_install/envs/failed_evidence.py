"""What is kept of an environment an install discards: its doctor evidence, beside DIR.d's
environments (`failed-env-<id>-evidence.json`), the last few only, with its fixes still
pointing at something that exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

from jetson_install.base.layout import EVIDENCE_FILE, FAILED_EVIDENCE, STATE_DIR
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.recorded import write_private

__all__ = ["KEPT_FAILED_EVIDENCE", "discard", "kept_evidence", "fix_after_discard"]

KEPT_FAILED_EVIDENCE = 5


def discard(home: EnvironmentHome, staging: Path, rerun: str) -> Optional[str]:
    """Remove a half-built environment, keeping its evidence (if the doctor ran) beside it,
    and the last few of those only; `rerun` is the user's command. Returns where the evidence
    was kept."""
    evidence = staging / STATE_DIR / EVIDENCE_FILE
    kept: Optional[Path] = None
    if evidence.is_file():
        kept = kept_evidence(staging)
        try:
            data = json.loads(evidence.read_text())
        except ValueError:
            data = None
        if isinstance(data, dict):
            write_private(kept, json.dumps(_without_staging_fixes(data, staging, rerun), indent=2) + "\n")
            _rotate(staging.parent)
        else:
            kept = None
    home.remove(staging)
    return str(kept) if kept is not None else None


def kept_evidence(staging: Path) -> Path:
    """Where a discarded environment's doctor evidence is kept, beside DIR.d's environments."""
    return staging.parent / FAILED_EVIDENCE.format(name=staging.name)


def _without_staging_fixes(evidence: Dict[str, Any], staging: Path, rerun: str) -> Dict[str, Any]:
    """A fix that acts on the environment being discarded would point at nothing: say to
    fix the cause and run the install again instead."""
    for check in evidence.get("checks", []):
        fix = check.get("fix")
        if isinstance(fix, str):
            check["fix"] = fix_after_discard(fix, staging, rerun)
    return evidence


def fix_after_discard(fix: str, staging: Path, rerun: str) -> str:
    """`fix` as it reads once `staging` is gone: one that acts on it would point at nothing,
    so it says to fix the cause and run the install again instead."""
    if str(staging) in fix:
        return f"fix the cause in the detail, then run the install again: {rerun}"
    return fix


def _rotate(directory: Path) -> None:
    kept = sorted(directory.glob(FAILED_EVIDENCE.format(name="*")), key=lambda path: path.stat().st_mtime,
                  reverse=True)
    for old in kept[KEPT_FAILED_EVIDENCE:]:
        old.unlink()
