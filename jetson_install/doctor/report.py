"""The doctor's report: its evidence sections, the evidence JSON and its schema, and the text lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jetson_install import __version__
from jetson_install.catalog.catalog import DEFAULT_INDEX_LABEL
from jetson_install.doctor.checks_kernels import KERNEL_CHECKS, KERNEL_SECTIONS, NOT_RUN, PASSED, kernel_status
from jetson_install.doctor.checks_torch import torch_missing_library
from jetson_install.doctor.context import Context
from jetson_install.doctor.profiles import JETSON, Profile
from jetson_install.doctor.results import (
    FAIL,
    NOT_APPLICABLE,
    OK,
    SKIP,
    STATUS_MARKS,
    WARN,
    CheckResult,
)
from jetson_install.base.errors import EXIT_FAILED, EXIT_OK

# Version 2 adds to version 1 (see the schema's description).
SCHEMA_VERSION = 2
# The status of a passing run of only some of the checks (--check, --no-gpu, an install's
# --no-verify): it proves nothing about the others, so nothing reading only the status takes it
# for the whole proof.
PARTIAL_PASSED = "partial-passed"


@dataclass(frozen=True)
class DoctorReport:
    python: str
    generated_at: str
    platform: Mapping[str, Optional[str]]
    torch: Mapping[str, Any]
    bitsandbytes: Mapping[str, Any]
    environment: Mapping[str, Any]
    runtime: Mapping[str, Any]
    checks: Tuple[CheckResult, ...]
    integrity: Mapping[str, Any]
    strict: bool = False
    headline: Optional[str] = None  # the id of the most fundamental failing check: fix it first
    profile: Profile = JETSON  # the preflight's: CPU builds on any aarch64 machine, never Jetson evidence
    complete: bool = True  # every check of the doctor ran (one that does not apply says so)
    additions: Mapping[str, Any] = field(default_factory=dict)  # what was added to the stack, and its imports

    @property
    def passed(self) -> bool:
        if self.strict:
            return bool(self.checks) and not self.not_passed
        # Warnings and skips never fail the run, as with `brew doctor` and `flutter doctor`.
        return not any(check.required and check.status == FAIL for check in self.checks)

    @property
    def not_passed(self) -> Tuple[CheckResult, ...]:
        """What fails the strict gate: every check that applies must run and pass, as
        upstream's conditional gate counts a skipped test as a failure
        (https://github.com/elder-plinius/OBLITERATUS, scripts/run_conditional_gate.py)."""
        # A check the channel does not require (compile, where the catalog says why) is reported, never gating.
        return tuple(check for check in self.checks if check.required and check.status not in (OK, NOT_APPLICABLE))

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_FAILED

    @property
    def status(self) -> str:
        """A passing preflight, or a passing run of only some checks, says so in its status, so
        that nothing reading only the status (a runtime gate, a support table) takes it for
        Jetson GPU evidence."""
        if not self.passed:
            return "failed"
        if not self.complete and self.profile is JETSON:
            return PARTIAL_PASSED
        return self.profile.passed_status

    def check(self, check_id: str) -> CheckResult:
        for result in self.checks:
            if result.id == check_id:
                return result
        raise KeyError(check_id)

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "generated_at": self.generated_at,
            "tool_version": __version__,
            "platform": dict(self.platform),
            "torch": dict(self.torch),
            "bitsandbytes": dict(self.bitsandbytes),
            "environment": dict(self.environment),
            "runtime": dict(self.runtime),
            "integrity": dict(self.integrity),
            "additions": dict(self.additions),
            "checks": [check.to_json() for check in self.checks],
            "strict": self.strict,
            "profile": self.profile.name,
            "status": self.status,
            "headline": self.headline,
        }


def render_lines(report: DoctorReport) -> List[str]:
    """One line per check with its status mark, the fix indented under it, then a summary line."""
    lines = []
    for check in report.checks:
        lines.append(f"{STATUS_MARKS[check.status]} {check.title} [{check.id}]: {check.detail}")
        if check.status != OK and check.fix:
            lines.append(f"    fix: {check.fix}")
    counts = {status: sum(1 for c in report.checks if c.status == status) for status in STATUS_MARKS}
    tally = f"{counts[OK]} ok, {counts[WARN]} warning(s), {counts[FAIL]} failed, {counts[SKIP]} skipped"
    if counts[NOT_APPLICABLE]:
        tally += f", {counts[NOT_APPLICABLE]} not applicable"
    if report.strict:
        if report.passed:
            lines.append(f"Strict gate passed: every applicable check ran and passed ({tally}).")
        else:
            failed = ", ".join(f"{c.id} ({c.status})" for c in report.not_passed) or "no check ran"
            lines.append(f"Strict gate failed: {failed} ({tally}).")
        return lines
    own = report.profile.passed_line(tally) if report.passed else None
    if own is not None:
        lines.append(own)
    elif report.passed and not report.complete:
        lines.append(f"The checks run passed ({tally}); the doctor's other checks did not run, so this proves "
                     "nothing about them.")
    elif report.passed:
        lines.append(f"All required checks passed ({tally}).")
    else:
        required = [c.id for c in report.checks if c.required and c.status == FAIL]
        lines.append(f"Doctor found problems in {len(required)} required check(s): {', '.join(required)} ({tally}).")
        if report.headline:
            lines.append(f"Start with {report.headline}: the others may follow from it.")
    return lines





def _platform_evidence(ctx: Context) -> Dict[str, Optional[str]]:
    platform = ctx.platform
    python = ctx.torch.section("python") or {}
    return {
        "l4t": str(platform.l4t) if platform is not None and platform.l4t is not None else None,
        "jetpack": platform.jetpack if platform is not None else None,
        "arch": (platform.arch if platform is not None else None) or python.get("machine"),
        "python": python.get("version") or (platform.python if platform is not None else None),
        "kind": platform.kind if platform is not None else None,
        "channel": ctx.channel.id if ctx.channel is not None else None,
        "board": platform.model if platform is not None else None,
        "module": platform.module if platform is not None else None,
        "family": platform.family if platform is not None else None,
        # What `labels` compares with the board it runs on (evidence is proof for one board).
        "soc": platform.soc if platform is not None else None,
        "compute_capability": platform.compute_capability if platform is not None else None,
    }


def _ran(results: Mapping[str, CheckResult], check_id: str) -> bool:
    """Whether a check was evaluated; a probe may have gone further than the checks asked of it."""
    result = results.get(check_id)
    return result is not None and result.status in (OK, WARN, FAIL)


def _kernel_evidence(ctx: Context, results: Mapping[str, CheckResult], kernel: str) -> str:
    """A kernel whose check did not run (--no-gpu, --check, a failed prerequisite) is not_run,
    whatever the probe did: the evidence records what the checks judged."""
    status = kernel_status(ctx, kernel)
    return status if status == NOT_APPLICABLE or _ran(results, KERNEL_CHECKS[kernel]) else NOT_RUN


def _torch_evidence(ctx: Context, results: Mapping[str, CheckResult]) -> Dict[str, Any]:
    torch = ctx.torch.section("torch") or {}
    cuda = ctx.torch.section("cuda") or {}
    capability = cuda.get("capability")
    arch_list = list(cuda.get("arch_list", []))
    missing = torch_missing_library(ctx)
    return {
        "version": torch.get("version"),
        "cuda": torch.get("cuda"),
        "device_name": cuda.get("device_name"),
        "total_memory_bytes": cuda.get("total_memory_bytes"),
        "capability": ".".join(str(part) for part in capability) if capability else None,
        "arch_list": arch_list,
        "device_sm_in_arch_list": "sm_%d%d" % tuple(capability) in arch_list if capability else None,
        "kernels": {kernel: _kernel_evidence(ctx, results, kernel) for kernel in KERNEL_SECTIONS},
        "missing_library": {"file": missing.file, "provided_by": missing.provided_by} if missing else None,
        "compile": _compile_evidence(ctx),
    }


def _compile_evidence(ctx: Context) -> Optional[Dict[str, Any]]:
    triton = ctx.assembler.data.get("triton")
    section = ctx.torch.data.get("compile")
    if not isinstance(section, dict) and not (isinstance(triton, dict) and triton.get("installed")):
        return None
    assembler = ctx.assembler.data.get("assembler")
    assembler = assembler if isinstance(assembler, dict) else {}
    if not isinstance(section, dict) or not section.get("ran"):
        function = "failed" if isinstance(section, dict) else NOT_RUN
    else:
        function = PASSED if section.get("finite") and section.get("allclose") else "failed"
    return {
        "triton": triton.get("version") if isinstance(triton, dict) else None,
        "assembler": assembler.get("path"),
        "assembler_release": assembler.get("release"),
        "arch": assembler.get("arch"),
        "assembled": assembler.get("assembled"),
        "function": function,
    }


def _runtime_evidence(ctx: Context, results: Mapping[str, CheckResult]) -> Dict[str, Any]:
    obliteratus = ctx.target_probe.section("obliteratus") or {}
    transformers = ctx.target_probe.section("transformers") or {}
    contract = ctx.torch.data.get("jetson_contract")
    if not isinstance(contract, dict) or not _ran(results, "jetson-contract"):
        jetson_contract = "not_run"
    elif contract.get("done", True) and contract.get("on_cuda") and contract.get("finite") and (
        obliteratus.get("device") == "cuda" and obliteratus.get("is_cuda") is not False
    ):
        jetson_contract = PASSED
    else:
        jetson_contract = "failed"
    return {
        "obliteratus_device": obliteratus.get("device"),
        "jetson_contract": jetson_contract,
        "transformers": {
            "version": transformers.get("version"),
            "torch_floor": transformers.get("torch_floor"),
            "sees_torch": transformers.get("sees_torch"),
        },
    }


def _bnb_evidence(ctx: Context, results: Mapping[str, CheckResult]) -> Dict[str, Any]:
    data = ctx.bnb.data
    library = data.get("library") or {}
    kernel_checks = [results[check_id] for check_id in ("bnb-kernels", "bnb-int8") if check_id in results]
    ran = [check for check in kernel_checks if check.status in (OK, FAIL)]
    if kernel_checks and all(check.status == NOT_APPLICABLE for check in kernel_checks):
        kernel_test = "not_applicable"
    elif not ran:
        kernel_test = "not_run"
    else:
        kernel_test = "passed" if all(check.status == OK for check in ran) else "failed"
    return {
        "version": data.get("version"),
        "backend": data.get("backend"),
        "library": library.get("file"),
        "kernel_test": kernel_test,
        "build": ctx.recorded_build("bitsandbytes"),
    }


def _environment_evidence(ctx: Context) -> Dict[str, Any]:
    """What the environment recorded it was built from: the vendor builds (None when it
    recorded nothing, e.g. an environment jetson-install did not make) and OBLITERATUS' source."""
    obliteratus = (ctx.target_probe.section("obliteratus") or {}).get("source") or {}
    vendor = ctx.vendor
    return {
        # A kept torch (--use-existing-torch) has neither an index nor a wheel to name.
        "vendor_source": (vendor.index or next(iter(vendor.wheels), None)
                          or (DEFAULT_INDEX_LABEL if vendor.default_index else None))
        if vendor is not None else None,
        "vendor_builds": dict(vendor.pins) if vendor is not None else None,
        "obliteratus": {
            "version": obliteratus.get("version"),
            "source": obliteratus.get("url"),
            # PEP 610 names no commit for a local checkout (--source .); the install recorded it.
            "commit": obliteratus.get("commit") or ctx.source_commit,
        },
    }
