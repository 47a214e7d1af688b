"""What an environment records about itself in its state folder, written by the install and read
back by the doctor, `list`, `add` and a re-run: the plan it was made from, its vendor builds, its
lock, its constraints and requirements, what --with added, the --check-command commands."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.base.outputs import write_own
from jetson_install.base.layout import (
    ADDED_FILE,
    CHECK_COMMANDS_FILE,
    CONSTRAINTS_FILE,
    LOCK_FILE,
    PLAN_FILE,
    REQUIREMENTS_FILE,
    STATE_DIR,
)
from jetson_install.catalog.catalog import DEFAULT_INDEX_LABEL, Channel, VendorSource
from jetson_install.envs.record import read_record

__all__ = ["write_private", "recorded_plan", "recorded_vendor", "recorded_doctor_inputs", "doctor_view", "recorded_lock",
           "write_constraints", "write_requirements", "write_additions", "recorded_additions", "write_check_commands",
           "recorded_check_commands"]


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (never through a link: write_own)."""
    write_own(path, text, private=True)


def recorded_plan(environment: Path) -> Optional[Dict[str, Any]]:
    """The plan fingerprint a complete environment was made from (see mark_complete)."""
    try:
        recorded = json.loads((environment / STATE_DIR / PLAN_FILE).read_text())
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def recorded_vendor(environment: Path) -> Optional[VendorSource]:
    """The vendor builds an environment was made with (its vendor record), so a later doctor
    checks against what was installed, also when that was the fallback source."""
    record = read_record(environment)
    if record is None:
        kept = (recorded_plan(environment) or {}).get("kept_pins")
        return VendorSource.pinned(None, (), kept) if isinstance(kept, dict) else None
    resolution = record.resolution
    numpy = None
    try:
        constraints = (environment / STATE_DIR / CONSTRAINTS_FILE).read_text().splitlines()
        numpy = next((line[len("numpy"):] for line in constraints if line.startswith("numpy")), None)
    except OSError:
        pass
    urls = [chosen.url for chosen in resolution.files if chosen.url.endswith(".whl")]
    if resolution.source == DEFAULT_INDEX_LABEL:  # uv's own default: no URL to name
        return dataclasses.replace(VendorSource.pinned(None, (), resolution.pins, numpy), default_index=True)
    is_wheels = resolution.source.endswith(".whl")
    return VendorSource.pinned(None if is_wheels else resolution.source, urls if is_wheels else (),
                               resolution.pins, numpy)


def recorded_doctor_inputs(environment: Path, channel: Optional[Channel]
                           ) -> Tuple[Optional[Channel], Optional[VendorSource]]:
    """The channel and vendor builds the doctor judges `environment` against: what it was
    made with (plan.json), and for a kept stack (--use-existing-torch) its own Python and versions."""
    vendor = recorded_vendor(environment)
    kept = (recorded_plan(environment) or {}).get("existing")
    if not kept or vendor is None:
        return channel, vendor
    return doctor_view(channel, ".".join(kept["python_version"].split(".")[:2]), vendor.pins)


def doctor_view(channel: Optional[Channel], abi: str, pins: Mapping[str, str]
                ) -> Tuple[Optional[Channel], VendorSource]:
    """The channel and source the doctor judges a kept stack against: the interpreter's own
    Python is the ABI its packages were built for, and their versions are the pins."""
    return (dataclasses.replace(channel, python=abi) if channel is not None else None), \
        VendorSource.pinned(None, (), dict(pins))


def recorded_lock(environment: Path) -> Optional[Dict[str, Any]]:
    """The lock an environment was installed from, as the install's evidence names it: where it
    was read, its sha256, and what it was made for; None when it was not made from a lock."""
    digest = (recorded_plan(environment) or {}).get("lock")
    record = read_record(environment)
    if not isinstance(digest, str) or record is None:
        return None
    # Here, not at the top: only an environment made from a lock has one to read.
    from jetson_install.catalog.lock_file import read_lock

    try:
        lock = read_lock(environment / STATE_DIR / LOCK_FILE, LOCK_FILE, follow=False)
    except BadInput:
        return None
    return {"file": record.resolution.source, "sha256": digest, "channel": lock.channel, "python": lock.python,
            "arch": lock.arch, "platform": lock.platform, "source_commit": lock.source_commit,
            "packages": len(lock.entries)}


def write_constraints(environment: Path, lines: Sequence[str]) -> Path:
    """The environment's own constraints file: what the target installs under, and what
    `protect` keeps in force afterwards."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    path = state / CONSTRAINTS_FILE
    write_own(path, "\n".join(lines) + "\n")
    return path


def write_requirements(environment: Path, lines: Sequence[str]) -> Path:
    """The target's requirements, for a source URL that carries a token: readable by the user only."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    path = state / REQUIREMENTS_FILE
    write_private(path, "\n".join(lines) + "\n")
    return path


def write_additions(environment: Path, lines: Sequence[str]) -> None:
    """What --with put on the stack, for a re-run to keep (readable by the user only: a URL may
    carry a token)."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    write_private(state / ADDED_FILE, "".join(f"{line}\n" for line in lines))


def recorded_additions(environment: Path) -> Tuple[str, ...]:
    """The additions an environment records (none where it records none)."""
    return _recorded_lines(environment / STATE_DIR / ADDED_FILE)


def write_check_commands(environment: Path, commands: Sequence[str]) -> None:
    """--check-command's commands, for the doctor and a re-run to run again (readable by the user
    only, as the additions: a command may name a URL with a token)."""
    state = environment / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    write_private(state / CHECK_COMMANDS_FILE, "".join(f"{command}\n" for command in commands))


def recorded_check_commands(environment: Path) -> Tuple[str, ...]:
    """The check commands an environment records (none where it records none)."""
    return _recorded_lines(environment / STATE_DIR / CHECK_COMMANDS_FILE)


def _recorded_lines(path: Path) -> Tuple[str, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ()
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
