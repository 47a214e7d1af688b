"""Every library the vendor builds link is found: the DT_NEEDED of their own .so files, read
from the files in the tool's process (envs/sonames.py), resolved in the environment's wheels,
torch's lib folder or the board's library path. It needs no GPU and imports nothing: a torch
that cannot load is named by the soname it lacks, the file that needs it and what provides it."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional

from jetson_install.base.layout import CONSTRAINTS_FILE, STATE_DIR
from jetson_install.base.redact import credentials
from jetson_install.board.apt import install_command
from jetson_install.catalog.catalog import VendorSource
from jetson_install.doctor.context import Context, uv_command
from jetson_install.doctor.missing_libraries import MissingLibrary, missing_library
from jetson_install.doctor.results import FAIL, OK, Verdict
from jetson_install.envs.recorded import recorded_plan
from jetson_install.envs.sonames import LibraryReport, Missing, declared_requirement, vendor_libraries

__all__ = ["check_libraries", "library_report"]


def library_report(ctx: Context) -> LibraryReport:
    root = Path(ctx.platform.root) if ctx.platform is not None else Path("/")
    arch = ctx.platform.arch if ctx.platform is not None else None
    # What the environment was made from first, then every source of its channel.
    sources: List[VendorSource] = [ctx.vendor] if ctx.vendor is not None else []
    sources += [source for source in (ctx.channel.sources if ctx.channel is not None else ()) if source not in sources]
    return vendor_libraries(ctx.site_packages, root, arch, sources)


def check_libraries(ctx: Context) -> Verdict:
    report = library_report(ctx)
    problems = [_said(ctx, missing) for missing in report.missing] + list(report.unreadable)
    if problems:
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        return FAIL, "; ".join(problems[:3]) + more, _fix(ctx, report)
    if not report.files:
        return OK, "the vendor packages hold no shared objects: nothing to resolve", None
    places = {"torch/lib": 0, "wheels": 0, "board": 0}
    for where in report.found.values():
        places["torch/lib" if where == "torch/lib" else "board" if where.startswith("/") else "wheels"] += 1
    counted = ", ".join(f"{count} {label}" for label, count in (
        ("in torch/lib", places["torch/lib"]), ("in the environment's wheels", places["wheels"]),
        ("on the board's library path", places["board"])) if count)
    detail = (f"all {len(report.found)} libraries the {len(report.files)} vendor shared objects need are found "
              f"({counted})")
    if report.driver:
        detail += f"; {', '.join(report.driver)} is the driver's, judged by cuda-available"
    return OK, detail, None


def _said(ctx: Context, missing: Missing) -> str:
    """The missing library as `describe` says it, with the package a library the channel
    records nothing for comes in, where it is a known one (the CUDA runtime's, cuSPARSELt's)."""
    known = _known(ctx, missing) if missing.listed is None and missing.provider is None else None
    said = missing.describe()
    return said + (f" ({missing.soname} is in {known.provided_by})" if known is not None and known.provided_by else "")


def _known(ctx: Context, missing: Missing) -> Optional[MissingLibrary]:
    return missing_library(f"{missing.soname}: cannot open shared object file", ctx.expected_cuda, ctx.python,
                           uv_command())


def _fix(ctx: Context, report: LibraryReport) -> str:
    if not report.missing:
        return ctx.torch_install_fix()  # a vendor file that is not a readable library: its build again
    listed = next((missing.listed for missing in report.missing if missing.listed is not None), None)
    if listed is not None:
        return (f"reinstall {listed.distribution} {listed.version} to put it back (under the environment's constraints): "
                + _uv_install(ctx, ["--no-deps", "--reinstall-package", listed.distribution],
                              [f"{listed.distribution}=={listed.version}"]))
    first = next((missing for missing in report.missing if missing.provider is not None), report.missing[0])
    return _provider_fix(ctx, first) or ctx.torch_install_fix()


def _provider_fix(ctx: Context, missing: Missing) -> Optional[str]:
    provider = missing.provider
    if provider is not None and provider.provider == "companion":
        # A new environment resolves the companion within the catalog's bound again.
        return ctx.reinstall_command()
    if provider is not None:
        return install_command([provider.package])
    known = _known(ctx, missing)
    if known is None or not known.provided_by:
        return None
    kind, _, packages = known.provided_by.partition(": ")
    if kind != "pip":
        return known.fix
    # The version the environment's own packages require of it (torch's cuda-toolkit pins its
    # runtime wheels): the one the install had, found where the check looks (nvidia/*/lib).
    wanted = [declared_requirement(ctx.site_packages, package) or package for package in packages.split()]
    return f"install {' '.join(packages.split())} into the environment: " + _uv_install(ctx, [], wanted)


def _uv_install(ctx: Context, options: List[str], requirements: List[str]) -> str:
    """uv pip install into the environment of `ctx.python`, under its recorded constraints (the
    vendor pins stay) and from the default index it was made from."""
    environment = Path(ctx.python).parent.parent
    words = [uv_command(), "pip", "install", "--python", shlex.quote(ctx.python)]
    constraints = environment / STATE_DIR / CONSTRAINTS_FILE
    if constraints.is_file():
        words += ["--constraint", shlex.quote(str(constraints))]
    index = (recorded_plan(environment) or {}).get("default_index")
    if isinstance(index, str) and index:
        # Recorded redacted: the bare URL, whose credentials uv takes from ~/.netrc as it did then.
        secret = credentials(index)
        words += ["--default-index", shlex.quote(secret.url if secret is not None else index)]
    return " ".join(words + [shlex.quote(word) for word in options + requirements])
