"""The plan for a target's options, shared by `plan TARGET`, the install and `lock`: the board's
platform, the index settings, the kept stack and additions; and the set the vendor index
resolves to."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional, Tuple

from jetson_install.base.errors import BadInput, NotAJetson
from jetson_install.catalog.catalog import load_catalog
from jetson_install.catalog.settings import check_index_url, load_index_settings
from jetson_install.cli.commands.given import InstallOptions, venv_path
from jetson_install.cli.commands.lifecycle import default_venv
from jetson_install.cli.commands.platform import detect_platform
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.recorded import recorded_additions, recorded_check_commands
from jetson_install.planning.rerun import Rerun
from jetson_install.planning.options import PlanOptions
from jetson_install.planning.plan import Plan, for_python, resolved_plan
from jetson_install.planning.planner import make_plan

__all__ = ["make_install_plan", "kept_additions", "kept_check_commands", "resolve_plan"]


def make_install_plan(options: InstallOptions, keep_added: bool = True) -> Plan:
    """The plan for the options: the board's platform (with --preflight, the --l4t release on
    any aarch64 machine), the index settings and the kept stack, if any; `keep_added`: with
    what the environment at --venv was given before (a lock is made for --with's alone)."""
    if options.preflight:
        try:
            platform = detect_platform(options.platform)
        except NotAJetson as exc:
            # A preflight runs on aarch64 machines that are mostly not Jetsons: there the channel
            # comes from --l4t, and the fix for a missing one says so.
            raise NotAJetson(exc.message, fix="name the Jetson release to preflight for: --l4t 36.4.3 "
                                              "(JetPack 6.2; see `jetson-install channels`)") from None
    else:
        platform = detect_platform(options.platform)
    settings = load_index_settings(options.vendor_index.value, options.vendor_index.source,
                                   options.default_index.value, options.default_index.source,
                                   options.allow_insecure_index, options.mirrors)
    catalog = load_catalog()
    if options.target not in catalog.targets:
        raise BadInput(f"no target {options.target!r} in {catalog.path}",
                       fix=f"use one of: {', '.join(sorted(catalog.targets))}")
    venv = venv_path(options.venv) if options.venv is not None else default_venv(options.target)
    existing = None
    if options.use_existing_torch:
        from jetson_install.envs.interpreters import inspect_stack  # runs the interpreter: only for a kept stack

        existing = inspect_stack(options.python or _python3())
    if options.cpu_index:
        check_index_url(options.cpu_index, "--cpu-index", options.allow_insecure_index)
    return make_plan(platform, catalog, PlanOptions(
        options.target, settings, venv.absolute(), interpreter=options.python, source=options.source, ref=options.ref,
        verify=options.verify, fallback=options.fallback, existing=existing, bitsandbytes=options.bitsandbytes,
        preflight=options.preflight, cpu_index=options.cpu_index,
        added=(kept_additions(venv.absolute()) if keep_added else ()) + tuple(options.added),
        check_commands=(kept_check_commands(venv.absolute()) if keep_added else ()) + tuple(options.check_commands)))


def kept_additions(venv: Path) -> Tuple[str, ...]:
    """What the environment at `venv` was given with --with (or `add`): a re-run keeps it."""
    current = EnvironmentHome(venv).current()
    return recorded_additions(current) if current is not None else ()


def kept_check_commands(venv: Path) -> Tuple[str, ...]:
    """What the environment at `venv` was given with --check-command: a re-run (and `add`) keeps it."""
    current = EnvironmentHome(venv).current()
    return recorded_check_commands(current) if current is not None else ()


def _python3() -> str:
    """The interpreter an image or a system install carries torch in: python3 on PATH."""
    found = shutil.which("python3")
    if found is None:
        raise BadInput("--use-existing-torch: no python3 on PATH", fix="pass the interpreter that has torch: --python PATH")
    return found


def resolve_plan(plan: Plan, rerun: Rerun, python: Optional[str] = None) -> Plan:
    """`plan` with the set the vendor index resolves to, for the Python an install would take
    (or `python`: a lock's board), read as the install reads it (prepared.py: the same choice of
    interpreter, the same read of the index and its fixes, which give the whole commands that go
    around an index that does not answer: the fallback source, another vendor index, a mirror)."""
    # Here, not with the module: a plain `plan` reads no index and runs no interpreter.
    from jetson_install.running.prepared import interpreter_for, read_vendor_set

    if not plan.supported or plan.vendor is None or not plan.route.resolves():
        return plan
    if python is None:
        # The Python an install would take decides the files; with none here, the channel's.
        found, _ = interpreter_for(plan)
        python = found.abi if found is not None else (plan.python_abi or "3")
    if python != plan.python_abi and "." in python:
        plan = for_python(plan, python)  # and the caps keyed on Python follow that Python too
    return resolved_plan(plan, read_vendor_set(plan, python, rerun))
