"""What the user put on the stack, proven: each --with / `add` project's top-level modules
import (the additions probe) and each --check-command passes. The install's check step and
the doctor's `additions` check read the same findings; a failure names the shared library the
loader missed and the package that provides it (missing_libraries.py)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from jetson_install.base.process import Completed
from jetson_install.doctor.context import Context, ProbeOutcome, _last_json_object, uv_command
from jetson_install.doctor.missing_libraries import MissingLibrary, missing_library
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, Verdict
from jetson_install.envs.gpu_inspect import Inspection, inspect_added

__all__ = ["AdditionImport", "additions_imports", "check_additions", "additions_evidence"]


@dataclass(frozen=True)
class AdditionImport:
    """One addition as the probe found it: the distribution, its top-level modules, and the
    first that failed to import (`error`: its exception's last line)."""

    requirement: str
    distribution: Optional[str]
    version: Optional[str]
    modules: Tuple[str, ...]
    module: Optional[str]
    error: Optional[str]

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.requirement}: import {self.module} failed: {self.error}" if self.module \
                else f"{self.requirement}: {self.error}"
        if self.distribution is None:
            return f"{self.requirement}: its installed project was not found by its URL, so not imported"
        if not self.modules:
            return f"{self.distribution} {self.version} installs no module to import"
        return f"{self.distribution} {self.version} imports ({', '.join(self.modules)})"

    def missing_library(self, cuda: Optional[str], python: str, uv: str) -> Optional[MissingLibrary]:
        return missing_library(self.error, cuda, python, uv) if self.error else None


def _from_probe(entry: Mapping[str, Any]) -> AdditionImport:
    def text(key: str) -> Optional[str]:
        value = entry.get(key)
        return value if isinstance(value, str) else None

    modules = entry.get("modules")
    return AdditionImport(str(entry.get("requirement", "?")), text("distribution"), text("version"),
                          tuple(str(module) for module in modules) if isinstance(modules, list) else (),
                          text("module"), text("error"))


def additions_imports(done: Union[Completed, ProbeOutcome]) -> Union[List[AdditionImport], str]:
    """The probe's findings, or why there are none (its last stderr line)."""
    outcome = done if isinstance(done, ProbeOutcome) else _outcome(done)
    entries = outcome.data.get("additions")
    if not isinstance(entries, list):
        return outcome.failure()
    return [_from_probe(entry) for entry in entries if isinstance(entry, dict)]


def _outcome(completed: Completed) -> ProbeOutcome:
    return ProbeOutcome("additions", _last_json_object(completed.stdout, "additions"), completed)


def check_additions(ctx: Context) -> Verdict:
    """Every addition imports and every --check-command passes; the first failure, with the
    package that provides a library the loader missed."""
    if not ctx.additions_requested and not ctx.check_commands:
        return NOT_APPLICABLE, "nothing was added to the stack (--with, add) and no --check-command given", None
    found: List[str] = []
    imports: Union[List[AdditionImport], str] = []
    if ctx.additions_requested:
        imports = additions_imports(ctx.additions)
        if isinstance(imports, str):
            return FAIL, imports, ctx.reinstall
        for entry in imports:
            if entry.error is not None:
                return _failed(ctx, entry.describe(), entry.error)
            found.append(entry.describe())
    gpu = _gpu_code(ctx, imports) if ctx.additions_requested and not isinstance(imports, str) else None
    if gpu is not None and (gpu.cannot_run or gpu.unreadable):
        return FAIL, (gpu.cannot_run + gpu.unreadable)[0].describe(), \
            f"add a build with code for this GPU, or leave it out, then run: {_again(ctx)}"
    if gpu is not None and gpu.gpu_files:
        found.append(f"GPU code: {len(gpu.gpu_files)} files read, {len(gpu.by_rule)} by CUDA's compatibility rule only"
                     + "".join(f" ({report.describe()})" for report in gpu.by_rule[:1]))
    for shown, done in ctx.check_commands:
        if not done.ok:
            return _failed(ctx, f"--check-command {shown} -> {done.last_stderr_line() or f'exit {done.returncode}'}",
                           done.stderr)
        found.append(f"`{shown}` passed")
    return OK, "; ".join(found), None


def _again(ctx: Context) -> str:
    # An install verifying its new environment runs again; a made one is checked again.
    return ctx.install_command or f"jetson-install doctor --venv {shlex.quote(str(ctx.made_here() or ctx.environment))}"


def _gpu_code(ctx: Context, imports: List[AdditionImport]) -> Optional[Inspection]:
    """What the added projects' shared objects carry for this GPU (envs/gpu_inspect.py)."""
    names = sorted({entry.distribution for entry in imports if entry.distribution})
    if not names or ctx.platform is None:
        return None
    return inspect_added(list(ctx.site_packages), names, ctx.platform, ctx.channel)


def _failed(ctx: Context, detail: str, error: str) -> Verdict:
    cuda = ctx.platform.cuda if ctx.platform is not None else None
    missing = missing_library(error, cuda, ctx.python, uv_command())
    again = _again(ctx)
    if missing is None:
        return FAIL, detail, f"fix the cause above, then run: {again}"
    provider = f" ({missing.file} is in {missing.provided_by})" if missing.provided_by else ""
    fix = missing.fix or f"install the package that provides {missing.file}"
    return FAIL, detail + provider, f"{fix}, then run: {again}"


def additions_evidence(ctx: Context) -> Dict[str, Any]:
    """What the evidence keeps: each addition with its import result, each check command's."""
    imports = additions_imports(ctx.additions) if ctx.additions_requested else []
    cuda = ctx.platform.cuda if ctx.platform is not None else None
    projects: List[Dict[str, Any]] = []
    for entry in imports if not isinstance(imports, str) else []:
        missing = entry.missing_library(cuda, ctx.python, uv_command())
        projects.append({"requirement": entry.requirement, "distribution": entry.distribution,
                         "version": entry.version, "modules": list(entry.modules),
                         "imported": entry.error is None and entry.distribution is not None,
                         "failed_module": entry.module, "error": entry.error,
                         "missing_library": {"file": missing.file, "provided_by": missing.provided_by}
                         if missing else None})
    commands = [{"command": shown, "exit_code": done.returncode, "passed": done.ok,
                 "last_line": None if done.ok else (done.last_stderr_line() or None)}
                for shown, done in ctx.check_commands]
    gpu = _gpu_code(ctx, imports) if not isinstance(imports, str) else None
    return {"projects": projects, "check_commands": commands,
            "gpu_code": [report.to_json() for report in gpu.files if report.gpu_code or report.error or report.missing]
            if gpu is not None else []}

