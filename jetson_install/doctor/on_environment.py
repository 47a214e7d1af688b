"""The doctor on one environment, judged against what it was made with, its evidence written
where asked: what `jetson-install doctor` does once it knows the platform, and what an
install's verify step does in its own process with the platform and channel it already has."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence

# At the top, not in the functions: this module is imported only to doctor an environment, and
# an install loads it (and so all the doctor needs) on a thread while uv installs the target.
from jetson_install.catalog.catalog import load_catalog
from jetson_install.doctor.profiles import profile_from_record
from jetson_install.doctor.request import DoctorRequest
from jetson_install.doctor.run import run_doctor
from jetson_install.envs.recorded import (
    recorded_additions, recorded_check_commands, recorded_doctor_inputs, recorded_lock, recorded_plan,
)
from jetson_install.base.outputs import write_output
from jetson_install.base.redact import json_text
from jetson_install.envs.record import installed_package
from jetson_install.envs.source_identity import recorded_commit

if TYPE_CHECKING:
    from jetson_install.catalog.catalog import Channel
    from jetson_install.doctor.report import DoctorReport
    from jetson_install.board.platform import Platform

__all__ = ["DoctorRun", "doctor_environment"]


@dataclass(frozen=True)
class DoctorRun:
    report: "DoctorReport"
    evidence: Dict[str, Any]  # the report as JSON, with the environment's lock named


def doctor_environment(python: str, platform: Optional["Platform"], channel: Optional["Channel"], *,
                       only: Sequence[str], strict: bool, preflight: bool, evidence_file: Optional[str],
                       progress: Callable[[str], None], install_command: Optional[str],
                       platform_options: Sequence[str]) -> DoctorRun:
    """The doctor on the environment of `python` (the checks `only` names, else all);
    `install_command`: the install that is making it, whose fixes then say how to run it
    differently; `platform_options`: the --root/--l4t the fixes' commands keep."""
    environment = Path(python).parent.parent
    channel, vendor = recorded_doctor_inputs(environment, channel)
    recorded = recorded_plan(environment) or {}
    target = recorded_target(recorded, environment)
    report = run_doctor(DoctorRequest(
        python, platform, channel, vendor=vendor, only=tuple(only), strict=strict,
        source_commit=recorded_commit(recorded.get("source")), profile=profile_from_record(recorded, channel, preflight),
        install_command=install_command, platform_options=tuple(platform_options), target=target,
        left_out=load_catalog().left_out(target, made=bool(recorded)), additions=recorded_additions(environment),
        check_commands=recorded_check_commands(environment)), progress)
    evidence = report.to_json()
    lock = recorded_lock(environment)
    if lock is not None:
        evidence["lock"] = lock  # which exact files the proven environment holds
    if evidence_file:
        write_output("--evidence", evidence_file, json_text(evidence))
    return DoctorRun(report, evidence)


def recorded_target(recorded: Mapping[str, Any], environment: Path) -> str:
    """The target an environment was made for (its plan.json); OBLITERATUS for one made before
    there were others. One jetson-install did not make (a uv project's .venv, `export --uv`) is
    judged as the target whose project is installed in it, else as the stack alone."""
    catalog = load_catalog()
    target = recorded.get("target")
    if isinstance(target, str) and target in catalog.targets:
        return target
    if recorded:
        return "obliteratus"
    targets = list(catalog.targets.values())
    installed = [t.id for t in targets if t.distribution and installed_package(environment, t.distribution)]
    return installed[0] if installed else next(t.id for t in targets if t.distribution is None)
