"""The saved plan's file format (`plan TARGET --out FILE`, applied by `jetson-install TARGET
--plan FILE`), as terraform's `plan -out` and `apply PLANFILE`
(https://developer.hashicorp.com/terraform/cli/commands/plan#out-filename): what the plan was
made from and what it will do, so the apply can run exactly it or say why it cannot.

One JSON object: its format and version, the jetson-install and catalog revision that made it,
the command it stands for, the platform and environment it was made for, its sources'
identities, whether it would change the environment, the plan itself (steps, vendor set and
hashes) and a sha256 of all that, so an edited or cut file is refused, naming the file and why.
It carries no secret: the command that made it is refused where a URL in it carries
credentials (cli/commands/apply.py), and every string is redacted all the same.
Pure: reads and writes the file, decides nothing about the plan.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.base.outputs import read_regular_file, replace_file
from jetson_install.base.redact import redact_data
from jetson_install.planning.rerun import Rerun

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_BYTES", "PlanFile", "write_plan_file", "read_plan_file"]

#: What the file says it is, so another JSON file given as a plan is told apart.
FORMAT = "jetson-install plan"
FORMAT_VERSION = 1
#: Larger than any plan: its steps and files are counted in tens (the largest, a Thor set's
#: 35 files, is a few dozen kilobytes).
MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class PlanFile:
    """A saved plan, as written and read back."""

    tool_version: str  # the jetson-install that made it
    catalog_sha256: str  # the wheels-index.toml it was made with
    made_at: str  # when, ISO 8601 in UTC
    plan_command: Tuple[str, ...]  # the `plan ... --out FILE` that made it: run again, it makes a new one
    command: Tuple[str, ...]  # what it stands for: the target (or `add`) and its options, paths absolute
    platform: Mapping[str, Any]  # Platform.to_json() of the board it was made on
    environment: Optional[str]  # the environment DIR pointed at then (None: none yet)
    sources: Mapping[str, Any]  # the identities of the source and the additions (source_identity.Sources.record)
    would_change: bool
    would_change_reason: str
    plan: Mapping[str, Any]  # Plan.to_json(): the steps, the vendor set and its hashes, the pins

    @property
    def target(self) -> str:
        return str(self.plan.get("target", ""))

    def content(self) -> Dict[str, Any]:
        """Everything the file holds but its sha256, redacted as it is written."""
        content: Dict[str, Any] = redact_data({
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "tool_version": self.tool_version,
            "catalog_sha256": self.catalog_sha256,
            "made_at": self.made_at,
            "plan_command": list(self.plan_command),
            "command": list(self.command),
            "platform": dict(self.platform),
            "environment": self.environment,
            "sources": dict(self.sources),
            "would_change": self.would_change,
            "would_change_reason": self.would_change_reason,
            "plan": dict(self.plan),
        })
        return content


def _digest(content: Mapping[str, Any]) -> str:
    """The sha256 of `content` in one canonical form, whatever its keys' order and spacing."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_plan_file(path: Path, saved: PlanFile) -> None:
    """Write `saved` to `path` whole or not at all, readable by the user alone (it names the
    user's folders and sources); a path that cannot be written is bad input."""
    content = saved.content()
    text = json.dumps({**content, "sha256": _digest(content)}, indent=2) + "\n"
    if path.is_dir():
        raise BadInput(f"--out {path}: is a directory", fix="pass a file name, e.g. --out obliteratus.plan")
    try:
        replace_file(path, text, mode=0o600)
    except OSError as exc:
        raise BadInput(f"--out {path}: cannot write it ({exc.strerror})",
                       fix="pass a file in an existing, writable directory") from None


#: Each key of the file and the type its value must have.
_SHAPE: Dict[str, Tuple[type, ...]] = {
    "format": (str,), "format_version": (int,), "tool_version": (str,), "catalog_sha256": (str,),
    "made_at": (str,), "plan_command": (list,), "command": (list,), "platform": (dict,),
    "environment": (str, type(None)), "sources": (dict,), "would_change": (bool,), "would_change_reason": (str,),
    "plan": (dict,), "sha256": (str,),
}


def read_plan_file(path: Path) -> PlanFile:
    """The plan saved at `path`, or BadInput naming the file and what is wrong with it: not a
    regular file, too large, not whole, not a plan, a format this version cannot read, or
    changed since it was written."""
    fix = "make the plan again: jetson-install plan TARGET ... --out FILE (`jetson-install plan --help`)"
    try:
        data = read_regular_file(path, MAX_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"--plan {path}: cannot read it ({exc.strerror})", fix=fix) from None
    if data is None:
        raise BadInput(f"--plan {path}: is not a regular file", fix=fix)
    if len(data) > MAX_BYTES:
        raise BadInput(f"--plan {path}: is larger than any plan ({MAX_BYTES // (1024 * 1024)} MiB)", fix=fix)
    try:
        saved = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"--plan {path}: is not a plan file (not UTF-8 text)", fix=fix) from None
    except ValueError as exc:
        raise BadInput(f"--plan {path}: is not a whole plan file (cut short or edited: {exc})", fix=fix) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise BadInput(f"--plan {path}: is not a jetson-install plan file (made by `jetson-install plan TARGET "
                       "--out FILE`)", fix=fix)
    version = saved.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise BadInput(f"--plan {path}: is in plan format {version}, newer than this jetson-install reads "
                       f"({FORMAT_VERSION})", fix=f"apply it with the jetson-install that made it, or {fix}")
    for key, types in _SHAPE.items():
        value = saved.get(key)
        if key not in saved or not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise BadInput(f"--plan {path}: its {key!r} is missing or not what a plan file holds", fix=fix)
    content = {key: value for key, value in saved.items() if key != "sha256"}
    if _digest(content) != saved["sha256"]:
        raise BadInput(f"--plan {path}: was changed after it was written (its content does not match its sha256)",
                       fix=fix)
    made_by = saved["plan_command"]
    if made_by and all(isinstance(word, str) for word in made_by):
        fix = f"make the plan again: {Rerun(tuple(made_by))}"  # its own words, now that they are its own
    if not all(isinstance(word, str) for word in (*saved["command"], *made_by)) or not saved["command"]:
        raise BadInput(f"--plan {path}: its command is not what a plan file holds", fix=fix)
    return PlanFile(saved["tool_version"], saved["catalog_sha256"], saved["made_at"], tuple(made_by),
                    tuple(saved["command"]), saved["platform"], saved["environment"], saved["sources"],
                    saved["would_change"], saved["would_change_reason"], saved["plan"])
