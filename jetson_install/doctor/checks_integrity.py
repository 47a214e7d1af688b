"""The proof rests on the files themselves: the vendor distributions' files are those their
RECORDs list, and no code from outside them runs when the interpreter starts.

A `.pth` file that runs code, or a `sitecustomize`, can patch torch before any probe imports
it, so that a CUDA check passes on a stack whose CUDA is unavailable: the strict gate fails on
one that neither a vendor distribution installed nor is known to be harmless by its content.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jetson_install.doctor.context import Context, uv_command
from jetson_install.doctor.results import FAIL, OK, WARN, Verdict
from jetson_install.envs.record import read_record


@dataclass(frozen=True)
class KnownHook:
    """A start-up hook known to be harmless by the sha256 of its content, and the modules it
    imports: each judged by its distribution's RECORD (None), or by the sha256 of its content."""

    name: str
    kind: str
    modules: Mapping[str, Optional[Tuple[str, ...]]]


_DISTUTILS_HACK = {"_distutils_hack": None}
KNOWN_HOOKS: Mapping[str, KnownHook] = {
    # setuptools' distutils-precedence.pth since 60.0 ('local' by default), from install_with_pth
    # in https://github.com/pypa/setuptools/blob/v60.0.0/setup.py; its _distutils_hack is
    # setuptools' own, held to setuptools' RECORD.
    "2638ce9e2500e572a5e0de7faed6661eb569d1b696fcba07b0dd223da5f5d224":
        KnownHook("setuptools' distutils-precedence.pth", "pth", _DISTUTILS_HACK),
    # The same from setuptools 49.1-59.x ('stdlib' by default), as Ubuntu 22.04's python3-setuptools
    # 59.6 ships it: https://github.com/pypa/setuptools/blob/v59.6.0/setup.py.
    "7ea7ffef3fe2a117ee12c68ed6553617f0d7fd2f0590257c25c484959a3b7373":
        KnownHook("setuptools' distutils-precedence.pth", "pth", _DISTUTILS_HACK),
    # `import _virtualenv`, which `uv venv` writes for Python < 3.10 (JetPack 5's 3.8), with the
    # _virtualenv.py of uv 0.13.0-0.13.9 (crates/uv-virtualenv/src/_virtualenv.py in
    # https://github.com/astral-sh/uv; dropped for 3.10+ by astral-sh/uv#20222).
    "69ac3d8f27e679c81b94ab30b3b56e9cd138219b1ba94a1fa3606d5a76a1433d":
        KnownHook("uv's _virtualenv.pth", "pth",
                  {"_virtualenv": ("cfb3db86aaa53bb62b5ff764970bec2d71c9228590a0ebec57f6ec926cc0bf1a",)}),
    # Ubuntu's /usr/lib/python3.X/sitecustomize.py (-> /etc/python3.X/sitecustomize.py): apport's
    # exception handler, from the OS's python3-apport where it is installed
    # (debian/sitecustomize.py.in, https://git.launchpad.net/ubuntu/+source/python3.10).
    "43d81125d92376b1a69d53a71126a041cc9a18d8080e92dea0a2ae23be138b1e":
        KnownHook("Ubuntu's sitecustomize (apport's exception handler)", "sitecustomize", {}),
}


@dataclass(frozen=True)
class Hook:
    """One start-up hook as the probe found it, judged."""

    path: str
    kind: str
    sha256: Optional[str]
    distribution: Optional[str]
    known: Optional[str]  # the name of the known hook it is, or None
    vendor: bool  # installed by a vendor distribution (whose files are verified)

    @property
    def foreign(self) -> bool:
        return not self.vendor and self.known is None

    def describe(self) -> str:
        by = f"installed by {self.distribution}" if self.distribution else "installed by no distribution"
        return f"{self.path} ({self.kind}, {by})"

    def to_json(self) -> Dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "sha256": self.sha256, "distribution": self.distribution,
                "known": self.known, "vendor": self.vendor, "foreign": self.foreign}


def _distributions(ctx: Context) -> Mapping[str, Mapping[str, Any]]:
    found = ctx.integrity.data.get("distributions")
    return found if isinstance(found, dict) else {}


def _vendor(ctx: Context) -> List[str]:
    return [name for name in ctx.integrity.data.get("vendor", []) if isinstance(name, str)]


def _intact(ctx: Context, name: Optional[str]) -> bool:
    checked = _distributions(ctx).get(name or "") or {}
    return bool(checked.get("record")) and checked.get("problems") == 0


def hooks(ctx: Context) -> List[Hook]:
    """Every start-up hook the probe found, judged: a vendor distribution's, a known one (with
    the modules it imports intact), or foreign."""
    vendor = set(_vendor(ctx))
    judged = []
    for raw in ctx.integrity.data.get("hooks", []):
        if not isinstance(raw, dict):
            continue
        known = KNOWN_HOOKS.get(raw.get("sha256") or "")
        if known is not None and known.kind == raw.get("kind"):
            modules = {module.get("name"): module for module in raw.get("modules", []) if isinstance(module, dict)}
            for name, sha256s in known.modules.items():
                module = modules.get(name)
                if module is not None and module.get("path") is not None and not (
                        _intact(ctx, module.get("distribution")) if sha256s is None
                        else module.get("sha256") in sha256s):
                    known = None  # the module it runs is not the one known to be harmless
                    break
        distribution = raw.get("distribution")
        judged.append(Hook(str(raw.get("path")), str(raw.get("kind")), raw.get("sha256"), distribution,
                           known.name if known is not None else None, distribution in vendor))
    return judged


def check_startup_hooks(ctx: Context) -> Verdict:
    if not ctx.integrity.data:
        return FAIL, ctx.integrity.failure(), _probe_fix(ctx)
    found = hooks(ctx)
    foreign = [hook for hook in found if hook.foreign]
    if foreign:
        first = foreign[0]
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        detail = (f"code from outside the vendor builds runs at interpreter start-up: {first.describe()}{more}; "
                  "it can change what torch reports, so the other checks prove nothing while it is there")
        return (FAIL if ctx.strict else WARN), detail, _hook_fix(ctx, first)
    if not found:
        return OK, "no .pth file runs code, and there is no sitecustomize or usercustomize", None
    named = sorted({hook.known or f"{hook.distribution}'s {Path(hook.path).name}" for hook in found})
    return OK, f"{len(found)} start-up hook(s), each a vendor build's or known to be harmless: {', '.join(named)}", None


def _hook_fix(ctx: Context, hook: Hook) -> str:
    if hook.distribution:
        return (f"{uv_command()} pip uninstall --python {shlex.quote(ctx.python)} {hook.distribution} "
                f"(it installed {Path(hook.path).name})")
    return f"rm -- {shlex.quote(hook.path)} (no distribution installed it)"


# What the probe names of a distribution's files, and how a report says it.
_KINDS = (("changed", "differs from"), ("missing", "is gone from"), ("unlisted", "is not in"),
          ("unhashed", "has no digest in"))


def check_vendor_files(ctx: Context) -> Verdict:
    if not ctx.integrity.data:
        return FAIL, ctx.integrity.failure(), _probe_fix(ctx)
    distributions = _distributions(ctx)
    checked = {name: distributions[name] for name in _vendor(ctx) if name in distributions}
    if not checked:
        return OK, "no vendor distribution is installed here", None
    problems: List[str] = []
    affected = [name for name, found in checked.items() if found.get("problems")]
    for name, found in checked.items():
        if not found.get("installed", True):
            problems.append(f"{name} is not installed (the environment's record names it)")
            continue
        named = [f"{paths[0]} {words} {name}'s RECORD" for key, words in _KINDS
                 for paths in [found.get(key) or []] if paths]
        more = int(found.get("problems", 0)) - len(named)
        problems += named[:-1] + [named[-1] + (f" (and {more} more)" if more > 0 else "")] if named else []
    unrecorded = [name for name, found in checked.items() if found.get("installed", True) and not found.get("record")]
    names = ", ".join(checked)
    if problems:
        return FAIL, f"not the vendor builds' files: {'; '.join(problems)}", _files_fix(ctx, affected)
    if unrecorded:
        return ((FAIL if ctx.strict else WARN),
                f"{', '.join(unrecorded)} has no RECORD: its files cannot be verified",
                f"reinstall it from its wheel: {ctx.reinstall_command()}")
    files = sum(int(found.get("files", 0)) for found in checked.values())
    size = sum(int(found.get("bytes", 0)) for found in checked.values())
    if ctx.integrity.data.get("hashed"):
        return OK, f"{files} files of {names} match their RECORDs' digests ({size / 1e6:.0f} MB hashed)", None
    return (OK, f"{files} files of {names} have their RECORDs' sizes and nothing unlisted lies beside them "
                "(doctor --strict compares their digests)", None)


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


def _probe_fix(ctx: Context) -> str:
    return f"check that {ctx.python} runs (python -I -S), then run the doctor again; or make the environment again: " \
           f"{ctx.reinstall_command()}"


def integrity_evidence(ctx: Context) -> Dict[str, Any]:
    """The evidence's `integrity` section: how the vendor files were compared and with what
    result, each vendor distribution, and every start-up hook with its verdict."""
    data = ctx.integrity.data
    if not data:
        return {"files": "not_run", "result": "not_run", "distributions": {}, "hooks": []}
    distributions = _distributions(ctx)
    vendor = [name for name in _vendor(ctx) if name in distributions]
    failed = any(not distributions[name].get("record") or distributions[name].get("problems") for name in vendor)
    record = read_record(Path(ctx.python).parent.parent)

    def served_by(name: str) -> Optional[str]:
        """Where the install took the build: with mirrors, not always the channel's index."""
        chosen = record.resolution.file(name) if record is not None else None
        return record.resolution.source if record is not None and chosen is not None and chosen.url else None

    return {
        "files": "hashed" if data.get("hashed") else "sizes",
        "result": "failed" if failed else "passed",
        "distributions": {name: {**{key: distributions[name].get(key) for key in (
            "version", "record", "files", "bytes", "changed", "missing", "unlisted", "unhashed", "problems")},
            "served_by": served_by(name)} for name in vendor},
        "hooks": [hook.to_json() for hook in hooks(ctx)],
    }
