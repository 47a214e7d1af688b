"""What one check concludes: a status, one line of detail, the fix; and what each check needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

if TYPE_CHECKING:
    from jetson_install.doctor.context import Context

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
# A check the channel has no use for (no bitsandbytes build; 8-bit below capability 7.5):
# not a skip, so the strict gate does not fail on it.
NOT_APPLICABLE = "not_applicable"
STATUS_MARKS = {OK: "✓", WARN: "!", FAIL: "✗", SKIP: "-", NOT_APPLICABLE: "·"}

Verdict = Tuple[str, str, Optional[str]]  # status, detail, fix
Evaluator = Callable[["Context"], Verdict]


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


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    required: bool
    probe: str  # "host" | "torch" | "bitsandbytes" | "uv": what must run for the check
    evaluate: Evaluator = field(repr=False, compare=False)
    needs: Tuple[str, ...] = ()  # checks that must be ok (or warn) for this one to mean anything
    # Checks whose failure also makes this one fail (a CPU-only torch sees no CUDA): when both
    # fail, theirs is the problem to name first.
    explained_by: Tuple[str, ...] = ()
