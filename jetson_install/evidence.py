"""The doctor's evidence as an input: is it valid, passed, fresh and about the right
platform; the support table built from it; and the strict gate's record in upstream's shape.

Upstream's conditional gates count evidence older than ``maximum_evidence_age_days`` (30) as
stale and write a gate record ``{schema_version, gate, status, generated_at, git_sha,
exit_code, counts}`` (https://github.com/elder-plinius/OBLITERATUS, scripts/run_conditional_gate.py
and scripts/check_conditional_policy.py); this module follows both.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install import schema
from jetson_install.errors import BadInput

__all__ = [
    "DEFAULT_MAX_AGE_DAYS",
    "GATE_ID",
    "Verdict",
    "load",
    "schema_errors",
    "judge",
    "parse_requirement",
    "support_table",
    "gate_record",
    "gate_record_text",
]

DEFAULT_MAX_AGE_DAYS = 30
# Upstream's gate id for the Jetson runtime gate (its plan's prose says jetson-cuda-runtime).
GATE_ID = "jetson-runtime"
SCHEMA_PATH = Path(__file__).parent / "evidence.schema.json"
_TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Verdict:
    """One evidence file judged: ok, or the first reason it is not."""

    path: str
    ok: bool
    reason: str
    evidence: Mapping[str, Any]
    age_days: Optional[float] = None

    def line(self) -> str:
        return f"{self.path}: {'ok' if self.ok else 'FAIL'}: {self.reason}"


def load(path: str) -> Dict[str, Any]:
    """The evidence in ``path``; BadInput when it cannot be read or is not a JSON object."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror})",
                       fix="pass an evidence file written by jetson-install doctor --evidence FILE") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path}: not JSON ({exc})",
                       fix="pass an evidence file written by jetson-install doctor --evidence FILE") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: not an evidence object",
                       fix="pass an evidence file written by jetson-install doctor --evidence FILE")
    return data


def schema_errors(evidence: Any) -> List[str]:
    """Where ``evidence`` breaks evidence.schema.json, as 'path: problem' strings."""
    return schema.errors(evidence, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def parse_requirement(text: str) -> Tuple[str, str]:
    """``platform.channel=jp6-cu126`` -> ("platform.channel", "jp6-cu126")."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise BadInput(f"--require {text}: expected KEY=VALUE with KEY a dotted path, e.g. platform.channel=jp6-cu126",
                       fix="jetson-install evidence check FILE --require platform.channel=jp6-cu126")
    return key.strip(), value.strip()


def _lookup(evidence: Mapping[str, Any], dotted: str) -> Tuple[bool, Any]:
    value: Any = evidence
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _as_text(value: Any) -> str:
    # JSON's spelling, so that strict=true and kernel_test=passed both read naturally.
    return value if isinstance(value, str) else json.dumps(value)


def generated_at(evidence: Mapping[str, Any]) -> Optional[datetime.datetime]:
    try:
        return datetime.datetime.strptime(str(evidence.get("generated_at")), _TIMESTAMP).replace(
            tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def judge(path: str, evidence: Mapping[str, Any], *, max_age_days: float = DEFAULT_MAX_AGE_DAYS,
          requirements: Sequence[Tuple[str, str]] = (), now: Optional[datetime.datetime] = None) -> Verdict:
    """Schema-valid, passed, fresh and matching ``requirements``; the first reason it is not."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    errors = schema_errors(evidence)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return Verdict(path, False, f"not valid evidence (schema {evidence.get('schema_version')}): "
                                    f"{errors[0]}{more}", evidence)
    when = generated_at(evidence)
    assert when is not None  # the schema's pattern, and strptime, agree on the format
    age = (now - when).total_seconds() / 86400
    if evidence["status"] != "passed":
        failed = [check["id"] for check in evidence["checks"] if check["status"] == "fail"]
        return Verdict(path, False, f"status {evidence['status']}" + (f" ({', '.join(failed)})" if failed else ""),
                       evidence, age)
    if age < -1:
        return Verdict(path, False, f"generated_at {evidence['generated_at']} is in the future (check the clock)",
                       evidence, age)
    if age > max_age_days:
        return Verdict(path, False, f"stale: generated {evidence['generated_at'][:10]}, {int(age)} days ago "
                                    f"(maximum {max_age_days:g})", evidence, age)
    for key, wanted in requirements:
        found, value = _lookup(evidence, key)
        if not found:
            return Verdict(path, False, f"{key} is not in the evidence", evidence, age)
        if _as_text(value) != wanted:
            return Verdict(path, False, f"{key} is {_as_text(value)}, required {wanted}", evidence, age)
    platform = evidence["platform"]
    about = ", ".join(part for part in (platform.get("channel"), _release(platform)) if part)
    return Verdict(path, True, f"passed{' strict' if evidence['strict'] else ''}, {age:.0f} days old"
                               + (f" ({about})" if about else ""), evidence, age)


def _release(platform: Mapping[str, Any]) -> str:
    jetpack, l4t = platform.get("jetpack"), platform.get("l4t")
    if jetpack and l4t:
        return f"JetPack {jetpack} / L4T {l4t}"
    return f"L4T {l4t}" if l4t else ""


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|") if value not in (None, "") else "-"


def support_table(verdicts: Sequence[Verdict]) -> str:
    """The Markdown support table from fresh passing evidence only; the rest listed apart,
    so that support wording names only combinations with fresh green evidence."""
    header = ["| board | JetPack / L4T | channel | torch | bitsandbytes | date | result |",
              "|---|---|---|---|---|---|---|"]
    rows = []
    for verdict in verdicts:
        if not verdict.ok:
            continue
        evidence = verdict.evidence
        platform, torch, bnb = evidence["platform"], evidence["torch"], evidence["bitsandbytes"]
        bnb_cell = f"{bnb['version']} (kernels {bnb['kernel_test']})" if bnb.get("version") else bnb["kernel_test"]
        rows.append("| " + " | ".join(_cell(value) for value in (
            platform.get("board") or platform.get("module") or platform.get("family"),
            _release(platform), platform.get("channel"), torch.get("version"), bnb_cell,
            evidence["generated_at"][:10], "passed (strict)" if evidence["strict"] else "passed",
        )) + " |")
    lines = header + sorted(set(rows))
    if not rows:
        lines.append("| - | - | - | - | - | - | no fresh passing evidence |")
    left_out = [verdict for verdict in verdicts if not verdict.ok]
    if left_out:
        lines += ["", "Not counted (stale, failed or invalid):", ""]
        lines += [f"- `{verdict.path}`: {verdict.reason}" for verdict in left_out]
    return "\n".join(lines)


def gate_record(report: Mapping[str, Any], exit_code: int, git_sha: str) -> Dict[str, Any]:
    """Upstream's gate record for the strict doctor's evidence: each applicable check counts
    as one test; a skip counts as skipped (and fails the gate), a warning as a failure."""
    checks = [check for check in report["checks"] if check["status"] != "not_applicable"]
    counts = {
        "tests": len(checks),
        "failures": sum(1 for check in checks if check["status"] in ("fail", "warn")),
        "errors": 0,
        "skipped": sum(1 for check in checks if check["status"] == "skip"),
    }
    passed = (report["status"] == "passed" and report.get("strict") is True and exit_code == 0
              and counts["tests"] > 0 and counts["failures"] == counts["skipped"] == 0)
    return {
        "schema_version": 1,
        "gate": GATE_ID,
        "status": "passed" if passed else "failed",
        "generated_at": report["generated_at"],
        "git_sha": git_sha,
        "exit_code": exit_code,
        "counts": counts,
    }


def gate_record_text(report: Mapping[str, Any], exit_code: int, environ: Mapping[str, str]) -> str:
    """The gate record as upstream writes it: GITHUB_SHA, or "local" outside Actions, sorted
    and indented, with URL credentials masked."""
    from jetson_install.redact import redact_data

    record = gate_record(report, exit_code, environ.get("GITHUB_SHA") or "local")
    return json.dumps(redact_data(record), indent=2, sort_keys=True) + "\n"
