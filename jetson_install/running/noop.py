"""Whether an install would change the user's environment, and why: one decision, which an
install makes before its first step and `--dry-run --json` reports (`would_change`, the check
mode fleets use), both on the install prepared.py prepares.

An environment satisfies a plan while what it was made from (plan.json: the plan's fingerprint
and its sources' identities) equals what the plan would make it from, it holds its vendor files'
expected hashes (vendor-files.json), its vendor packages are the recorded files and intact, the plan's pins are installed, and its dependencies are
consistent (`uv pip check`, not started again while checked.txt says nothing changed since it
passed). The decision stops at the first difference and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from packaging.version import Version

from jetson_install.base.layout import CHECKED_FILE, MANIFEST_FILE, state_of
from jetson_install.base.redact import redact_data
from jetson_install.envs.recorded import recorded_plan
from jetson_install.envs.interpreters import Interpreter, pip_check, sees_parent_environment
from jetson_install.envs.manifest import read_manifest
from jetson_install.envs.record import EnvironmentRecord, distributions_state, installed_versions, read_record
from jetson_install.envs.source_identity import Sources
from jetson_install.planning.plan import Plan, resolved_plan

__all__ = ["Current", "Decision", "KnownSet", "decide", "known_set", "plan_fingerprint", "sources_of"]


@dataclass(frozen=True)
class Current:
    """The user's environment and what it recorded when it was made, read once."""

    path: Path
    record: Optional[EnvironmentRecord]  # vendor.json: the vendor files and companions installed
    fingerprint: Mapping[str, Any]  # plan.json's fingerprint, redacted as record_plan keeps it; {} when none
    sources: Mapping[str, Any]  # plan.json's identities of the target's source and the additions'

    @classmethod
    def read(cls, path: Path) -> "Current":
        made_from = dict(recorded_plan(path) or {})
        # What made it (for the doctor), how it was asked for and where (`add` runs that again):
        # recorded beside the fingerprint, never compared; the requirement compares the target.
        for kept_aside in ("target", "command", "cwd"):
            made_from.pop(kept_aside, None)
        sources = {"source": made_from.pop("source", None), "additions_source": made_from.pop("additions_source", None)}
        return cls(path, read_record(path), made_from, sources)


@dataclass(frozen=True)
class KnownSet:
    """The plan with its vendor set, where no index is read for it; `note` says so when the set
    is the one the environment recorded."""

    plan: Plan
    note: str = ""


@dataclass(frozen=True)
class Decision:
    """Whether an install changes the environment, and why."""

    changes: bool
    reason: str
    installed: Mapping[str, str] = field(default_factory=dict)  # what it holds, when it changes nothing
    damaged: Tuple[str, ...] = ()  # how its vendor packages changed since they were installed, when that is why


def known_set(plan: Plan, current: Optional[Current], upgrade: bool) -> Optional[KnownSet]:
    """The plan with the vendor set no index is read for: the route's own files (a lock), the
    set the plan carries already (a saved plan's, `--plan FILE`), none at all (a kept stack),
    or the set `current` recorded while the vendor policy is unchanged and no `upgrade` is asked
    for. None: the index decides."""
    fixed = plan.route.fixed_resolution()
    if fixed is not None:
        return KnownSet(resolved_plan(plan, fixed))
    if plan.resolution is not None:
        return KnownSet(plan)
    if not plan.route.resolves() or plan.vendor is None:
        return KnownSet(plan)
    # The record keeps the policy redacted (record_plan), as the index URL in it may carry credentials.
    if upgrade or current is None or current.record is None \
            or current.fingerprint.get("policy") != redact_data(plan.vendor.policy()):
        return None
    record = current.record
    return KnownSet(resolved_plan(plan, record.resolution, [f"{c.name}=={c.version}" for c in record.companions]),
                    f"vendor set: {record.resolution.set_name}, as recorded in {current.path} (no index read; "
                    "--upgrade reads it again)")


def decide(plan: Plan, current: Current, interpreter: Interpreter, sources: Sources) -> Decision:
    """Whether installing `plan` (its vendor set known) with `interpreter` would change
    `current`. `sources` is the run's own, which the install records: each identity is computed
    once (a branch's is a `git ls-remote`)."""
    where = current.path
    if current.fingerprint != redact_data(plan_fingerprint(plan, interpreter)):
        return Decision(True, f"{where} was made from a different plan (channel, pins, source, indexes or interpreter)")
    if not sources.unchanged_since(current.sources):
        return Decision(True, f"the source changed since {where} was made")
    if read_manifest(where) is None:
        # What the doctor's proof compares the vendor files with: made by the fetch step since (an
        # environment from before has none), and the same again from the files a new one takes.
        return Decision(True, f"{where} has no record of its vendor files' expected hashes ({MANIFEST_FILE}: made by "
                              "an older jetson-install); a new environment measures them from the wheels")
    not_held = Decision(True, f"{where} no longer holds the pinned vendor builds, or uv pip check fails there")
    if plan.resolution is not None:
        if current.record is None or current.record.resolution.files != plan.resolution.files:
            return not_held
        damaged = current.record.differences(where)
        if damaged:
            return Decision(True, f"{where}: {'; '.join(damaged)}", damaged=tuple(damaged))
    installed = installed_versions(where)
    kept = plan.route.kept()  # a kept stack is not in the environment itself; its identities are in the fingerprint
    for name, version in plan.pins.items():
        if name not in kept and (name not in installed or Version(installed[name]) != Version(version)):
            return not_held
    if not _still_checked(where) and not pip_check(str(where / "bin" / "python")).ok:
        return not_held
    return Decision(False, f"{plan.venv} already satisfies the plan", {**kept, **installed})


def plan_fingerprint(plan: Plan, interpreter: Interpreter) -> Dict[str, Any]:
    """What an environment records it was made from (plan.json), and a re-run compares."""
    fingerprint = plan.fingerprint()
    fingerprint["verify"] = plan.verify
    fingerprint["interpreter"] = interpreter.path
    return fingerprint


def sources_of(plan: Plan) -> Sources:
    # No project of its own (the stack alone): only the additions' content can move under the same name.
    return Sources(plan.source_url or "", plan.additions)


def _still_checked(environment: Path) -> bool:
    """Whether the check step's `uv pip check` passed on exactly the distributions the
    environment holds now. uv judges only their metadata (requirements, wheel tags) against each
    other and the interpreter, so with each dist-info and the interpreter as they were
    (distributions_state), its answer cannot differ: a no-op re-run need not start that process
    again. Any install, removal or reinstall since runs it; so does a venv that sees its parent's
    packages, which the state does not cover."""
    try:
        checked = (state_of(environment) / CHECKED_FILE).read_text().strip()
    except OSError:
        return False  # made before the check step kept its state, or without one
    return (checked == distributions_state(environment)
            and not sees_parent_environment(str(environment / "bin" / "python")))
