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
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from packaging.version import InvalidVersion, Version

from jetson_install.base import schema
from jetson_install.base.errors import BadInput
from jetson_install.base.outputs import read_regular_file
from jetson_install.base.redact import redact_data
from jetson_install.doctor import CHECKS, arch_support
from jetson_install.doctor.checks_kernels import KERNEL_CHECKS

if TYPE_CHECKING:
    from jetson_install.board.platform import Platform

__all__ = [
    "DEFAULT_MAX_AGE_DAYS",
    "GATE_ID",
    "Verdict",
    "not_proven",
    "NotEvidence",
    "load",
    "contradiction",
    "proven_here",
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
_TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Verdict:
    """One evidence file judged: ok, or the first reason it is not."""

    path: str
    ok: bool
    reason: str
    evidence: Mapping[str, Any]

    def line(self) -> str:
        return f"{self.path}: {'ok' if self.ok else 'FAIL'}: {self.reason}"


# Evidence is a few kilobytes; a file far larger, or nested far deeper than the schema's
# few levels, is not evidence, and must not cost the memory or the stack to find that out.
MAX_EVIDENCE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
_FROM_DOCTOR = "pass an evidence file written by jetson-install doctor --evidence FILE"


def _too_deep(data: Any) -> bool:
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            return True
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        pending.extend((child, depth + 1) for child in children)
    return False


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _one_value_a_key(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object whose keys are each given once: `"status": "failed", ..., "status":
    "passed"` is the last for Python's json and the first for some other readers (RFC 8259,
    section 4: names "SHOULD be unique"), so evidence that says both says nothing."""
    data: Dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


class NotEvidence(BadInput):
    """A file that was read but holds no evidence (not a regular file, far too large, not JSON,
    not an object, nested too deep): a folder's stray file, which a table lists apart."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}", fix=_FROM_DOCTOR)
        self.problem = problem


def load(path: str) -> Dict[str, Any]:
    """The evidence in ``path``; BadInput when it cannot be read (missing, unreadable),
    NotEvidence when it is not a regular file, over MAX_EVIDENCE_BYTES or not a JSON object
    of sane depth."""
    try:
        raw = read_regular_file(path, MAX_EVIDENCE_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror})", fix=_FROM_DOCTOR) from None
    if raw is None:
        raise NotEvidence(path, "not a regular file")
    if len(raw) > MAX_EVIDENCE_BYTES:
        raise NotEvidence(path, f"over {MAX_EVIDENCE_BYTES // 2**20} MiB, far larger than evidence is")
    too_deep = NotEvidence(path, f"nested more than {MAX_DEPTH} levels deep, which evidence never is")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_one_value_a_key)
    except _DuplicateKey as exc:
        raise NotEvidence(path, f"the key {exc.key!r} is given twice in one object, and JSON readers differ on "
                                "which one counts") from None
    except RecursionError:
        # Where the parser gives up depends on the Python (3.13's reads 3000 levels that 3.11's
        # cannot): the same words for too deep, whichever refused it.
        raise too_deep from None
    except ValueError as exc:
        raise NotEvidence(path, f"not JSON ({exc})") from None
    if _too_deep(data):
        raise too_deep
    if not isinstance(data, dict):
        raise NotEvidence(path, "not an evidence object")
    return data


def schema_errors(evidence: Any) -> List[str]:
    """Where ``evidence`` breaks evidence.schema.json, as 'path: problem' strings."""
    return schema.errors(evidence, schema.evidence_schema())


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


# The passing statuses of each profile (doctor/report.py): a run of some checks is partial-passed.
_PASSING = {"jetson": ("passed", "partial-passed"), "preflight": ("preflight-passed",)}
# The checks that prove torch runs CUDA kernels on this GPU: the `cuda` label needs each of
# them ok; "not applicable" never stands in for one of them.
CUDA_CHECKS = ("torch-build", "cuda-available", "cuda-arch", "cuda-matmul", "cuda-conv2d")


def contradiction(evidence: Mapping[str, Any]) -> Optional[str]:
    """Why a schema-valid evidence's passing ``status`` cannot be true of its own checks, kernel
    and integrity sections (a status edited by hand, or written by something else), else None."""
    status, checks = evidence["status"], evidence["checks"]
    if status == "failed":
        return None  # a failure claims nothing
    profile = evidence.get("profile", "jetson")
    if status not in _PASSING.get(profile, ()):
        return f"status {status} contradicts its profile {profile}"
    if not checks:
        return f"status {status} with no checks"
    if evidence["strict"] and status == "partial-passed":
        return f"strict status {status}: a strict run is a run of every check, which passes as 'passed'"
    failed = [check["id"] for check in checks if check["required"] and check["status"] == "fail"]
    if failed:
        return f"status {status} contradicts its checks: {', '.join(failed)} failed"
    if evidence["strict"]:
        short = [f"{check['id']} ({check['status']})" for check in checks
                 if check["required"] and check["status"] not in ("ok", "not_applicable")]
        if short:
            return f"strict status {status} contradicts its checks: {', '.join(short)}"
    by_id = {check["id"]: check["status"] for check in checks}
    for kernel, result in evidence["torch"]["kernels"].items():
        check = by_id.get(KERNEL_CHECKS.get(kernel, ""))
        if result == "failed" or (check == "ok" and result != "passed"):
            return f"status {status} contradicts torch.kernels.{kernel}: {result}" + (
                f" while {KERNEL_CHECKS[kernel]} is ok" if check == "ok" else "")
    bnb = evidence["bitsandbytes"]["kernel_test"]
    if bnb == "failed" or (by_id.get("bnb-kernels") == "ok" and bnb != "passed"):
        return f"status {status} contradicts bitsandbytes.kernel_test: {bnb}"
    said = _section_contradiction(evidence, {check_id for check_id, result in by_id.items() if result == "ok"})
    if said is not None:
        return f"status {status} contradicts {said}"
    return _integrity_contradiction(status, evidence["strict"], evidence.get("integrity") or {})


def _integrity_contradiction(status: str, strict: bool, integrity: Mapping[str, Any]) -> Optional[str]:
    """Why a passing status cannot be true of the evidence's integrity section, else None."""
    if integrity.get("result") == "failed":
        return f"status {status} contradicts integrity.result: failed"
    if strict and _foreign_hooks(integrity):
        return f"strict status {status} contradicts integrity.hooks: {_foreign_hooks(integrity)[0]} is foreign"
    started, ran = integrity.get("as_started"), integrity.get("ran")
    if isinstance(started, dict) and started.get("same") is False:
        return f"status {status} contradicts integrity.as_started: the environment as started reports otherwise"
    if strict and isinstance(ran, dict) and (ran.get("unaccounted_count") or ran.get("accounted") is False):
        return f"strict status {status} contradicts integrity.ran: not every file that ran is accounted for"
    return None


# What each ok check says its section holds (doctor/checks_*.py), for a Jetson run: a value
# edited after the doctor wrote the evidence (or written by something else) shows here.
_OK_NEEDS = {
    "torch-build": (("torch", "version"), ("torch", "cuda")),
    "cuda-available": (("torch", "cuda"), ("torch", "device_name"), ("torch", "capability"),
                       ("torch", "total_memory_bytes")),
    "bnb-library": (("bitsandbytes", "version"),),
}


def _section_contradiction(evidence: Mapping[str, Any], ok: Set[str]) -> Optional[str]:
    """Where the sections say what an ok check could not have passed on: a null it needs, an
    arch list without code for the device, OBLITERATUS on another device, a torch or
    bitsandbytes other than the build the environment recorded; else None."""
    if evidence.get("profile", "jetson") != "jetson":
        return None  # the preflight's CPU run: no CUDA is claimed
    for check_id, needed in _OK_NEEDS.items():
        for section, key in needed:
            if check_id in ok and (evidence.get(section) or {}).get(key) is None:
                return f"{section}.{key}: null while {check_id} is ok"
    torch, runtime = evidence.get("torch") or {}, evidence.get("runtime") or {}
    if "cuda-arch" in ok:
        capability = str(torch.get("capability") or "0.0").split(".")
        supported, detail = arch_support((int(capability[0]), int(capability[1])), torch.get("arch_list") or [],
                                         (evidence.get("platform") or {}).get("kind") == "tegra")
        if not supported:
            return f"torch.arch_list: {detail} while cuda-arch is ok"
    for check_id in ("obliteratus", "jetson-contract"):
        if check_id in ok and runtime.get("obliteratus_device") != "cuda":
            return f"runtime.obliteratus_device: {runtime.get('obliteratus_device')!r} while {check_id} is ok"
    if "jetson-contract" in ok and runtime.get("jetson_contract") != "passed":
        return f"runtime.jetson_contract: {runtime.get('jetson_contract')} while jetson-contract is ok"
    recorded = (evidence.get("environment") or {}).get("vendor_builds") or {}
    for package in ("torch", "bitsandbytes"):
        version = (evidence.get(package) or {}).get("version")
        if package in recorded and version is not None and not _same_version(version, recorded[package]):
            return (f"{package}.version: {version}, while the environment recorded the vendor build "
                    f"{package} {recorded[package]}")
    return None


def _same_version(one: str, other: str) -> bool:
    try:
        return Version(one) == Version(other)
    except InvalidVersion:
        return one == other


def _foreign_hooks(integrity: Mapping[str, Any]) -> List[str]:
    return [str(hook.get("path")) + (f" (installed by {hook['distribution']})" if hook.get("distribution") else "")
            for hook in integrity.get("hooks", []) if isinstance(hook, dict) and hook.get("foreign")]


def not_proven(evidence: Mapping[str, Any]) -> Optional[str]:
    """Why passing, fresh evidence does not prove that CUDA worked on the board it names, else
    None: it must come from the strict doctor's full run (every check of the doctor ran; one
    left out only as not applicable, with its reason, and never one that proves CUDA), its
    proof run sealed with every file that ran accounted for, its vendor files hashed against
    the hashes their wheels held, and the environment as started reporting the same. The one rule for the `cuda` label, for a "passed" in the support table and for an
    ok from `evidence check`."""
    if evidence.get("profile", "jetson") != "jetson":
        return f"a {evidence['profile']} run, not Jetson GPU evidence"
    by_id = {check["id"]: check for check in evidence["checks"]}
    missing = [spec.id for spec in CHECKS if spec.id not in by_id]
    if missing:
        return (f"incomplete: {', '.join(missing)} did not run (a --check or --no-gpu run, or the install's "
                f"--no-verify checks); make it with jetson-install doctor --strict --evidence FILE")
    if evidence["status"] != "passed":
        return (f"status {evidence['status']}: only the doctor's full run passes as 'passed'; make it with "
                "jetson-install doctor --strict --evidence FILE")
    unproven = [check_id for check_id in CUDA_CHECKS if by_id[check_id]["status"] != "ok"]
    kernels = evidence["torch"]["kernels"]
    unproven += [f"torch.kernels.{kernel}" for kernel in ("matmul", "conv2d") if kernels.get(kernel) != "passed"]
    if unproven:
        return f"CUDA is not proven: {', '.join(unproven)} not ok"
    integrity = evidence.get("integrity") or {}
    foreign = _foreign_hooks(integrity)
    if foreign:
        return (f"code from outside the vendor builds runs at interpreter start-up ({foreign[0]}), which can "
                "change what torch reports")
    if integrity.get("result") != "passed":
        return f"integrity.result is {integrity.get('result')}: the vendor files are not shown to match their RECORDs"
    if evidence["strict"] is not True:
        return "not strict: make it with jetson-install doctor --strict --evidence FILE"
    if integrity.get("files") != "hashed":
        return "the vendor files were not hashed: make it with jetson-install doctor --strict --evidence FILE"
    return _unsealed(integrity)


def _unsealed(integrity: Mapping[str, Any]) -> Optional[str]:
    """Why the evidence's integrity section does not show the sealed proof, every file that ran
    in it held to the vendor wheels' hashes, and the environment as started agreeing, else None."""
    again = "make it with jetson-install doctor --strict --evidence FILE"
    ran, started = integrity.get("ran"), integrity.get("as_started")
    if not isinstance(ran, dict) or not isinstance(started, dict):
        return f"evidence from before the sealed proof (no integrity.ran or integrity.as_started): {again}"
    if integrity.get("hashes_from") not in ("artifact", "kept"):
        return ("the vendor files were compared with the environment's own RECORDs, not with the hashes their wheels "
                "held: make the environment again with this version, then jetson-install doctor --strict")
    short = [name for name, found in (integrity.get("distributions") or {}).items() if isinstance(found, dict)
             and (not found.get("verified") or found.get("verified", 0) < found.get("expected", 0))]
    if short:
        return f"integrity.distributions: fewer files verified than {short[0]}'s wheel holds"
    if ran.get("sealed") is not True or ran.get("accounted") is not True:
        return f"integrity.ran: not every file that ran in the sealed proof is accounted for: {again}"
    if started.get("same") is not True:
        return "integrity.as_started: the environment as started does not report what the sealed proof found"
    return None


def proven_here(evidence: Mapping[str, Any], platform: "Platform") -> Optional[str]:
    """Why passing, fresh evidence does not prove that CUDA works on ``platform``, the board as
    read now, else None: it must prove CUDA (not_proven) and name this board's L4T, SoC,
    module and compute capability."""
    unproven = not_proven(evidence)
    if unproven is not None:
        return unproven
    recorded, torch = evidence["platform"], evidence["torch"]
    here = {
        "L4T": (recorded.get("l4t"), str(platform.l4t) if platform.l4t is not None else None),
        "SoC": (recorded.get("soc"), platform.soc),
        "module": (recorded.get("module"), platform.module),
        "compute capability": (recorded.get("compute_capability"), platform.compute_capability),
    }
    if platform.compute_capability is not None:
        # The capability torch measured on the device, beside the device tree's.
        here["measured compute capability"] = (torch.get("capability"), platform.compute_capability)
    for what, (theirs, ours) in here.items():
        if theirs != ours:
            return f"evidence is for {what} {theirs or 'unknown'}, this is {what} {ours or 'unknown'}"
    return None


def judge(path: str, evidence: Mapping[str, Any], *, max_age_days: float = DEFAULT_MAX_AGE_DAYS,
          requirements: Sequence[Tuple[str, str]] = (), now: Optional[datetime.datetime] = None,
          partial: bool = False) -> Verdict:
    """Schema-valid, passed, fresh, matching ``requirements`` and proving CUDA (not_proven); the
    first reason it is not. ``partial``: evidence that passed without proving CUDA (some checks,
    not strict) is ok too, and says what it lacks."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    errors = schema_errors(evidence)
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return Verdict(path, False, f"not valid evidence (schema {evidence.get('schema_version')}): "
                                    f"{errors[0]}{more}", evidence)
    contradicted = contradiction(evidence)
    if contradicted is not None:
        return Verdict(path, False, contradicted, evidence)
    when = generated_at(evidence)
    assert when is not None  # the schema's pattern, and strptime, agree on the format
    age = (now - when).total_seconds() / 86400
    if evidence["status"] not in _PASSING["jetson"]:
        failed = [check["id"] for check in evidence["checks"] if check["status"] == "fail"]
        return Verdict(path, False, f"status {evidence['status']}" + (f" ({', '.join(failed)})" if failed else ""),
                       evidence)
    if age < -1:
        return Verdict(path, False, f"generated_at {evidence['generated_at']} is in the future (check the clock)",
                       evidence)
    # Whole days, as the message counts them, for a whole-day maximum: `--max-age 0` means
    # generated today, which a file of some hours still is.
    if (int(age) if float(max_age_days).is_integer() else age) > max_age_days:
        return Verdict(path, False, f"stale: generated {evidence['generated_at'][:10]}, {int(age)} days ago "
                                    f"(maximum {max_age_days:g})", evidence)
    for key, wanted in requirements:
        found, value = _lookup(evidence, key)
        if not found:
            return Verdict(path, False, f"{key} is not in the evidence", evidence)
        if _as_text(value) != wanted:
            return Verdict(path, False, f"{key} is {_as_text(value)}, required {wanted}", evidence)
    unproven = not_proven(evidence)
    if unproven is not None and not partial:
        return Verdict(path, False, unproven, evidence)
    platform = evidence["platform"]
    about = ", ".join(part for part in (platform.get("channel"), _release(platform)) if part)
    lacks = f"; does not prove CUDA: {unproven}" if unproven is not None else ""
    return Verdict(path, True, f"{evidence['status']}{' strict' if evidence['strict'] else ''}, {age:.0f} days old"
                               + (f" ({about})" if about else "") + lacks, evidence)


def _release(platform: Mapping[str, Any]) -> str:
    jetpack, l4t = platform.get("jetpack"), platform.get("l4t")
    if jetpack and l4t:
        return f"JetPack {jetpack} / L4T {l4t}"
    return f"L4T {l4t}" if l4t else ""


def _cell(value: Any) -> str:
    """A table cell that stays one cell: one line, no Markdown table syntax, no HTML."""
    if value in (None, ""):
        return "-"
    text = " ".join(str(value).split())  # newlines and tabs would end the row
    for char, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "\\`")):
        text = text.replace(char, escaped)
    return text[:200]


def support_table(verdicts: Sequence[Verdict]) -> str:
    """The Markdown support table from fresh, passing, strict and complete evidence only (what
    grants the `cuda` label); the rest listed apart with the reason, so that support wording
    names only combinations with fresh green evidence of the whole gate."""
    header = ["| board | JetPack / L4T | channel | torch | bitsandbytes | date | result |",
              "|---|---|---|---|---|---|---|"]
    rows = []
    left_out: List[Tuple[str, str]] = []
    for verdict in verdicts:
        reason = verdict.reason if not verdict.ok else not_proven(verdict.evidence)
        if reason is not None:
            left_out.append((verdict.path, reason))
            continue
        evidence = verdict.evidence
        platform, torch, bnb = evidence["platform"], evidence["torch"], evidence["bitsandbytes"]
        bnb_cell = f"{bnb['version']} (kernels {bnb['kernel_test']})" if bnb.get("version") else bnb["kernel_test"]
        rows.append("| " + " | ".join(_cell(value) for value in (
            platform.get("board") or platform.get("module") or platform.get("family"),
            _release(platform), platform.get("channel"), torch.get("version"), bnb_cell,
            evidence["generated_at"][:10], "passed (strict)",
        )) + " |")
    lines = header + sorted(set(rows))
    if not rows:
        lines.append("| - | - | - | - | - | - | no fresh passing evidence |")
    if left_out:
        lines += ["", "Not counted (stale, failed, not strict, incomplete or invalid):", ""]
        lines += [f"- `{path}`: {reason}" for path, reason in left_out]
    return "\n".join(lines)


def gate_record(report: Mapping[str, Any], exit_code: int, git_sha: str) -> Dict[str, Any]:
    """Upstream's gate record for the strict doctor's evidence: each applicable check the
    channel requires counts as one test; a skip counts as skipped (and fails the gate), a
    warning as a failure."""
    checks = [check for check in report["checks"] if check["status"] != "not_applicable" and check["required"]]
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
    record = gate_record(report, exit_code, environ.get("GITHUB_SHA") or "local")
    return json.dumps(redact_data(record), indent=2, sort_keys=True) + "\n"
