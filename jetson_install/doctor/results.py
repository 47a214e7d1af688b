"""What one check concludes: a status, one line of detail, the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
# A check the channel has no use for (no bitsandbytes build; 8-bit below capability 7.5):
# not a skip, so the strict gate does not fail on it.
NOT_APPLICABLE = "not_applicable"
STATUS_MARKS = {OK: "✓", WARN: "!", FAIL: "✗", SKIP: "-", NOT_APPLICABLE: "·"}

Verdict = Tuple[str, str, Optional[str]]  # status, detail, fix


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    status: str  # ok | warn | fail | skip | not_applicable
    detail: str
    fix: Optional[str]
    required: bool

    def to_json(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "required": self.required,
            "detail": self.detail,
            "fix": self.fix,
        }
