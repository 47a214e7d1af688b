"""Is this the Jetson, and the Python, that the channel is for."""

from __future__ import annotations

import shlex

from jetson_install.doctor.context import Context
from jetson_install.doctor.results import FAIL, OK, SKIP, WARN, Verdict


def check_platform(ctx: Context) -> Verdict:
    platform = ctx.platform
    fix = "run doctor on the Jetson itself; detection reads /etc/nv_tegra_release and the device tree"
    if platform is None:
        return WARN, "platform not detected: not a Jetson", fix
    if not platform.jetson:
        return WARN, f"not a Jetson ({platform.arch or 'unknown arch'}); Jetson facts are not checked", fix
    name = platform.module or platform.family or platform.soc or "Jetson"
    found = f"{name}, L4T {platform.l4t}, JetPack {platform.jetpack}, CUDA {platform.cuda}"
    if ctx.channel is not None and not ctx.channel.installable:
        return WARN, f"{found}: channel {ctx.channel.id} is unsupported: {ctx.channel.reason}", ctx.channel.remedy
    return OK, found, None


def check_python_abi(ctx: Context) -> Verdict:
    section = ctx.torch.section("python")
    if section is None:
        return FAIL, ctx.torch.failure(), f"check that {ctx.python} runs: {shlex.quote(ctx.python)} -c 'import sys'"
    version = section["version"]
    if ctx.channel is None or not ctx.channel.installable:
        return SKIP, f"Python {version}; no supported channel to compare with", None
    major_minor = ".".join(version.split(".")[:2])
    if major_minor == ctx.channel.python:
        return OK, f"Python {version} matches channel {ctx.channel.id} (cp{ctx.channel.python.replace('.', '')})", None
    return (
        FAIL,
        f"Python {version}, but channel {ctx.channel.id} wheels are built for Python {ctx.channel.python}",
        f"make a new environment with the channel's Python: jetson-install obliteratus"
        f" --python /usr/bin/python{ctx.channel.python}",
    )
