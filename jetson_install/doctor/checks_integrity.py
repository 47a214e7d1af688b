"""The proof rests on the files themselves: the vendor builds' files are the ones their wheels
held, and every file that ran in the sealed proof is accounted for.

- `vendor-files`: each vendor build's files against the sha256 its wheel held, read at install
  time (the environment's manifest, vendor-files.json), and nothing else in its folders. Where
  the environment has no manifest (made by an older version, or not by jetson-install) its
  installed RECORD stands in, and says so: a file any package can rewrite, so the strict gate
  fails on it. The strict gate also fails on a build it verified no file of, or fewer than its
  manifest lists. A stack the install kept (--use-existing-torch, the container lane) has no
  wheel of the tool's: its files are held to the hashes measured from them as the environment
  was made (`basis: kept`), which the evidence says.
- `loaded-files`: every module and shared object the sealed probes loaded. Inside the
  environment each must be a file of the distribution that lists it and match it (a vendor
  build's by its wheel's hash; the code they require, such as numpy and typing_extensions, by
  its own RECORD); one that matches nothing fails, named. Outside it is the platform the
  proof ran on (the interpreter, its standard library, the board's libraries, CUDA and the
  driver), listed by path and Debian package, and out of scope (docs/doctor.md).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from jetson_install.doctor.context import Context, uv_command
from jetson_install.doctor.results import FAIL, OK, WARN, Verdict
from jetson_install.envs.record import read_record

#: What a check's detail and the evidence say where the installed RECORD stands in for the wheel.
FROM_RECORD = "expected hashes from the environment's own RECORD, not from the artifact"
#: The bases the strict gate accepts: the wheel's own hashes, or a kept stack's measured at install.
MEASURED = ("artifact", "kept")


@dataclass(frozen=True)
class Hook:
    """One start-up hook as the probe found it: whether it changes what torch reports is the
    `startup-hooks` check's (checks_startup.py), not judged here by its kind or its text."""

    path: str
    kind: str
    sha256: Optional[str]
    distribution: Optional[str]
    vendor: bool  # installed by a vendor distribution (whose files are verified)

    def to_json(self, same: Optional[bool]) -> Dict[str, Any]:
        """`same`: whether the environment as started reports what the sealed proof found (None:
        not compared). A hook is known to be harmless by that, never by its content; a foreign
        one (neither a vendor distribution's nor known) fails the strict gate."""
        known = "changes nothing torch reports" if same and not self.vendor else None
        return {"path": self.path, "kind": self.kind, "sha256": self.sha256, "distribution": self.distribution,
                "known": known, "vendor": self.vendor, "foreign": not self.vendor and known is None}


def _distributions(ctx: Context) -> Mapping[str, Mapping[str, Any]]:
    found = ctx.integrity.data.get("distributions")
    return found if isinstance(found, dict) else {}


def _vendor(ctx: Context) -> List[str]:
    return [name for name in ctx.integrity.data.get("vendor", []) if isinstance(name, str)]


def hooks(ctx: Context) -> List[Hook]:
    """Every start-up hook the probe found."""
    vendor = set(_vendor(ctx))
    return [Hook(str(raw.get("path")), str(raw.get("kind")), raw.get("sha256"), raw.get("distribution"),
                 raw.get("distribution") in vendor)
            for raw in ctx.integrity.data.get("hooks", []) if isinstance(raw, dict)]


# What the probe names of a distribution's files, and how a report says it.
_KINDS = (("changed", "differs from"), ("missing", "is gone from"), ("unlisted", "is not in"),
          ("unhashed", "has no digest in"))


def _held_to(name: str, found: Mapping[str, Any]) -> str:
    return {"artifact": f"{name}'s wheel", "kept": f"{name}'s files as the environment was made"}.get(
        str(found.get("basis")), f"{name}'s RECORD")


def check_vendor_files(ctx: Context) -> Verdict:
    if not ctx.integrity.data:
        return FAIL, ctx.integrity.failure(), probe_fix(ctx)
    distributions = _distributions(ctx)
    checked = {name: distributions[name] for name in _vendor(ctx) if name in distributions}
    if not checked:
        if ctx.strict:  # nothing checked is never "passed"
            return FAIL, "no vendor distribution is installed here: no vendor file was verified", \
                f"make the environment with the channel's vendor builds: {ctx.reinstall_command()}"
        return OK, "no vendor distribution is installed here", None
    problems: List[str] = []
    affected = [name for name, found in checked.items() if found.get("problems")]
    for name, found in checked.items():
        if not found.get("installed", True):
            problems.append(f"{name} is not installed (the environment's record names it)")
            continue
        named = [f"{paths[0]} {words} {_held_to(name, found)}" for key, words in _KINDS
                 for paths in [found.get(key) or []] if paths]
        more = int(found.get("problems", 0)) - len(named)
        problems += named[:-1] + [named[-1] + (f" (and {more} more)" if more > 0 else "")] if named else []
    names = ", ".join(checked)
    if problems:
        return FAIL, f"not the vendor builds' files: {'; '.join(problems)}", _files_fix(ctx, affected)
    from_record = [name for name, found in checked.items() if found.get("basis") not in MEASURED]
    unrecorded = [name for name in from_record if not checked[name].get("record")]
    if unrecorded:
        return ((FAIL if ctx.strict else WARN),
                f"{', '.join(unrecorded)} has no RECORD and no manifest entry: its files cannot be verified",
                f"reinstall it from its wheel: {ctx.reinstall_command()}")
    files = sum(int(found.get("files", 0)) for found in checked.values())
    size = sum(int(found.get("bytes", 0)) for found in checked.values())
    if ctx.strict:
        short = [f"{name} ({found.get('verified', 0)} of {found.get('expected', 0)} files)"
                 for name, found in checked.items()
                 if not found.get("verified") or int(found.get("verified", 0)) < int(found.get("expected", 0))]
        if short:
            return FAIL, f"verified fewer files than the vendor builds hold: {', '.join(short)}", \
                f"make the environment again: {ctx.reinstall_command()}"
        if from_record:
            reasons = [f"{name}: {checked[name]['reason']}" for name in from_record if checked[name].get("reason")]
            return FAIL, (f"{', '.join(from_record)}: {FROM_RECORD}" + (f" ({'; '.join(reasons)})" if reasons else "")), \
                f"make the environment again with this version, which keeps each vendor wheel's hashes: " \
                f"{ctx.reinstall_command()}"
    basis = "" if not from_record else f"; {', '.join(from_record)}: {FROM_RECORD}"
    if ctx.integrity.data.get("hashed"):
        verified = sum(int(found.get("verified", 0)) for found in checked.values())
        expected = sum(int(found.get("expected", 0)) for found in checked.values())
        kept = [name for name, found in checked.items() if found.get("basis") == "kept"]
        held = "their expected hashes" if from_record else "the sha256 their wheels held" if not kept else \
            "the sha256 their wheels held, or measured as the environment was made (kept: " + ", ".join(kept) + ")"
        return OK, f"{verified} of {expected} files of {names} match {held} ({size / 1e6:.0f} MB hashed){basis}", None
    return (OK, f"{files} files of {names} have their expected sizes and nothing unlisted lies beside them "
                f"(doctor --strict compares their digests){basis}", None)


def _files_fix(ctx: Context, names: List[str]) -> str:
    """uv links an environment's files from its cache where it can, so a file edited in place
    may be edited there too: the cache entry goes first, then the environment is made again
    (a re-run alone sees the same sizes and keeps it)."""
    clean = f"{uv_command()} cache clean {' '.join(names)}"
    if ctx.install_command:
        return f"{clean} && {ctx.install_command}"
    made = ctx.made_here()
    if made is None:
        return f"{clean} && {ctx.reinstall_command()}"
    record = read_record(Path(ctx.python).parent.parent)
    again = record.repair if record is not None and record.repair else ctx.reinstall
    return f"{clean} && jetson-install uninstall --venv {shlex.quote(str(made))} --yes && {again}"


def probe_fix(ctx: Context) -> str:
    return f"check that {ctx.python} runs (python -I -S), then run the doctor again; or make the environment again: " \
           f"{ctx.reinstall_command()}"


def _ran(ctx: Context) -> Optional[Mapping[str, Any]]:
    ran = ctx.integrity.data.get("ran")
    return ran if isinstance(ran, dict) else None


def _not_accounted(ctx: Context) -> Optional[str]:
    """Why what ran in the sealed proof is not all known, where a sealed probe ended before
    it said what it loaded."""
    for outcome in (ctx.torch, ctx.bnb):
        if outcome.completed is not None and not outcome.files:
            return f"the sealed {outcome.name} probe ended before it listed what it loaded ({outcome.failure()})"
    return None


def check_loaded_files(ctx: Context) -> Verdict:
    ran = _ran(ctx)
    if not ctx.integrity.data or ran is None:
        return FAIL, ctx.integrity.failure() if not ctx.integrity.data else \
            "the integrity probe did not judge what ran in the sealed proof", probe_fix(ctx)
    unaccounted = [entry for entry in ran.get("unaccounted", []) if isinstance(entry, dict)]
    count = int(ran.get("unaccounted_count") or len(unaccounted))
    if unaccounted:
        first = unaccounted[0]
        more = f" (and {count - 1} more)" if count > 1 else ""
        return (FAIL, f"a file that ran in the sealed proof is not accounted for: {first.get('path')}: "
                      f"{first.get('why')}{more}", _files_fix(ctx, _owners(ctx, unaccounted)))
    lost = _not_accounted(ctx)
    if lost is not None:
        return (FAIL if ctx.strict else WARN), lost, probe_fix(ctx)
    distributions = {name: found for name, found in (ran.get("distributions") or {}).items() if isinstance(found, dict)}
    foreign = sorted(name for name, found in distributions.items() if not found.get("vendor") and not found.get("required"))
    if foreign:
        detail = (f"code of {', '.join(foreign)} ran in the sealed proof, and the vendor builds do not require it: "
                  "it can change what torch reports")
        return (FAIL if ctx.strict else WARN), detail, \
            f"{uv_command()} pip uninstall --python {shlex.quote(ctx.python)} {' '.join(foreign)}"
    from_record = sorted(name for name, found in distributions.items() if found.get("vendor")
                         and found.get("basis") not in MEASURED)
    if from_record and ctx.strict:
        return FAIL, f"{', '.join(from_record)} ran in the sealed proof with {FROM_RECORD}", \
            f"make the environment again with this version, which keeps each vendor wheel's hashes: " \
            f"{ctx.reinstall_command()}"
    bases = {"artifact": "its wheel", "kept": "as kept"}
    held = ", ".join(f"{name} {found.get('files')} ({bases.get(str(found.get('basis')), 'its RECORD')})"
                     for name, found in sorted(distributions.items()))
    platform = [entry for entry in ran.get("platform", []) if isinstance(entry, dict)]
    outside = sum(int(entry.get("files") or 0) for entry in platform)
    how = "hash" if ctx.integrity.data.get("hashed") else "size (doctor --strict compares digests)"
    return (OK, f"{int(ran.get('environment') or 0)} files in the environment ran in the sealed proof, each matching "
                f"its distribution's {how}: {held or 'none'}; {outside} files of the platform outside it", None)


def _owners(ctx: Context, unaccounted: Sequence[Mapping[str, Any]]) -> List[str]:
    """The vendor distributions to take from uv's cache again before remaking the environment."""
    vendor = _vendor(ctx)
    named = [name for name in vendor if any(f"{name}'s" in str(entry.get("why")) for entry in unaccounted)]
    return named or [name for name in vendor if name in _distributions(ctx)] or ["torch"]


def integrity_evidence(ctx: Context, same: Optional[bool]) -> Dict[str, Any]:
    """The evidence's `integrity` section: how the vendor files were compared, against what and
    with what result, each vendor distribution, every start-up hook and what ran in the sealed
    proof; `same`: whether the environment as started agrees with it (run.py adds how)."""
    data = ctx.integrity.data
    if not data:
        return {"files": "not_run", "result": "not_run", "distributions": {}, "hooks": [], "hashes_from": None,
                "ran": None}
    distributions = _distributions(ctx)
    vendor = [name for name in _vendor(ctx) if name in distributions]
    failed = any(not (distributions[name].get("record") or distributions[name].get("basis") in MEASURED)
                 or distributions[name].get("problems") for name in vendor)
    record = read_record(Path(ctx.python).parent.parent)

    def served_by(name: str) -> Optional[str]:
        """Where the install took the build: with mirrors, not always the channel's index."""
        chosen = record.resolution.file(name) if record is not None else None
        return record.resolution.source if record is not None and chosen is not None and chosen.url else None

    ran = _ran(ctx)
    return {
        "files": "hashed" if data.get("hashed") else "sizes",
        "result": "failed" if failed else "passed",
        "hashes_from": _hashes_from([distributions[name].get("basis") for name in vendor]),
        "distributions": {name: {**{key: distributions[name].get(key) for key in (
            "version", "record", "files", "bytes", "changed", "missing", "unlisted", "unhashed", "problems", "basis",
            "reason", "expected", "verified")}, "served_by": served_by(name)} for name in vendor},
        "hooks": [hook.to_json(same) for hook in hooks(ctx)],
        "ran": {**ran, "sealed": bool(ctx.torch.files.get("sealed")), "accounted": _accounted(ctx, ran)}
        if ran is not None else None,
    }


def _accounted(ctx: Context, ran: Mapping[str, Any]) -> bool:
    """Whether every file that ran in the environment is its distribution's, held to the
    wheel's hash where it is a vendor build's: what the strict gate asks of `ran`."""
    distributions = [found for found in (ran.get("distributions") or {}).values() if isinstance(found, dict)]
    return (not ran.get("unaccounted_count") and _not_accounted(ctx) is None
            and all(found.get("vendor") or found.get("required") for found in distributions)
            and all(found.get("basis") in MEASURED for found in distributions if found.get("vendor")))


def _hashes_from(bases: Sequence[Any]) -> str:
    """artifact: every vendor build held to its wheel's hashes; kept: some to a kept stack's,
    measured as the environment was made, the rest to their wheels'; record: any other."""
    if not bases or any(basis not in MEASURED for basis in bases):
        return "record"
    return "kept" if "kept" in bases else "artifact"
