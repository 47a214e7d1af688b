"""Is this the Jetson, and the Python, that the channel is for."""

from __future__ import annotations

import shlex

from typing import Dict, Set

from jetson_install.doctor.context import Context
from jetson_install.envs.interpreters import find_interpreter
from jetson_install.doctor.results import FAIL, OK, WARN, Verdict


def check_platform(ctx: Context) -> Verdict:
    platform = ctx.platform
    fix = ctx.profile.platform_fix()
    if platform is None:
        return WARN, "platform not detected: not a Jetson", fix
    if not platform.jetson:
        return WARN, f"not a Jetson ({platform.arch or 'unknown arch'}); Jetson facts are not checked", fix
    name = platform.module or platform.family or platform.soc or "Jetson"
    found = f"{name}, L4T {platform.l4t}, JetPack {platform.jetpack}, CUDA {platform.cuda}"
    if ctx.channel is not None and not ctx.channel.installable:
        return WARN, f"{found}: channel {ctx.channel.id} is unsupported: {ctx.channel.reason}", ctx.channel.remedy
    return OK, found, None


def _wheel_python_tags(ctx: Context) -> Dict[str, Set[str]]:
    """Package -> the CPython tags (cp310, ...) its installed wheel was built for; packages
    built for any Python (py3-none-...) are left out."""
    wheels = ctx.torch.section("wheels") or {}
    found = {}
    for package, tags in (wheels.get("tags") or {}).items():
        pythons = {tag.split("-")[0] for tag in tags if tag.startswith("cp")}
        if pythons:
            found[package] = pythons
    return found


def check_python_abi(ctx: Context) -> Verdict:
    section = ctx.torch.section("python")
    if section is None:
        return FAIL, ctx.torch.failure(), f"check that {ctx.python} runs: {shlex.quote(ctx.python)} -c 'import sys'"
    version, tag = section["version"], section.get("tag") or "cp" + "".join(section["version"].split(".")[:2])
    # Judged against the wheels actually installed: a mirror may carry builds for another
    # Python than the channel's own index.
    built_for = _wheel_python_tags(ctx)
    wrong = {package: sorted(pythons) for package, pythons in built_for.items() if tag not in pythons}
    if not built_for:
        # Nothing installed is built for one Python version, so nothing can mismatch it.
        return OK, f"Python {version}; no installed torch or bitsandbytes wheel is specific to a Python version", None
    if not wrong:
        names = ", ".join(sorted(built_for))
        return OK, f"Python {version} ({tag}) matches the installed wheels ({names})", None
    package, pythons = sorted(wrong.items())[0]
    wanted = f"{pythons[0][2]}.{pythons[0][3:]}"
    detail = f"the installed {package} wheel is built for {'/'.join(pythons)}, but this interpreter is Python {version} ({tag})"
    found = find_interpreter(wanted)
    if found is not None:
        return FAIL, detail, f"{ctx.reinstall} --python {found.path}"
    return (
        FAIL,
        detail,
        f"no Python {wanted} here: sudo apt-get install python{wanted} python{wanted}-venv, then run "
        f"{ctx.reinstall} --python /usr/bin/python{wanted}; or install {tag} builds: {ctx.reinstall} --vendor-index URL",
    )
