"""torch.compile decides: Triton's assembler for the board's GPU, then a compiled function on it.

torch.compile's GPU code is Triton's, and Triton assembles it with a `ptxas` it ships: one that
does not know the board's architecture fails every compiled kernel there ("ptxas fatal : Value
'sm_110a' is not defined": https://github.com/pytorch/pytorch/issues/170117). That half needs
no GPU (the assembler probe), so a preflight or a machine without the board's GPU finds it; the
other half runs a compiled function on the GPU against eager (the torch probe's `compile`).
Triton reads TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH to use another assembler
(https://github.com/pytorch/pytorch/pull/192653; triton/knobs.py), which is the fix the install
applies in the environment's activate scripts where the board's CUDA has one that can.
"""

from __future__ import annotations

import shlex
from typing import Any, Mapping, Optional

from jetson_install.doctor.context import Context
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, SKIP, Verdict

# A command that shows inductor's whole error where the probe's one line is not enough.
_SHOW = ("import torch; f = torch.compile(lambda x: (x @ x).abs() - x); "
         "print(f(torch.ones(8, 8, device='cuda')))")


def _assembler(ctx: Context) -> Optional[Mapping[str, Any]]:
    found = ctx.assembler.data.get("assembler")
    return found if isinstance(found, dict) else None


def _board_assembler(ctx: Context) -> Optional[str]:
    """The board's own assembler, where it assembles for the device."""
    candidate = ctx.assembler.data.get("candidate")
    return str(candidate["path"]) if isinstance(candidate, dict) and candidate.get("assembled") else None


def assembler_fix(ctx: Context, assembler: Mapping[str, Any]) -> str:
    variable, arch = assembler.get("variable") or "TRITON_PTXAS_PATH", assembler.get("arch")
    board = _board_assembler(ctx)
    if board is not None:
        return (f"make the environment again, which points Triton at {board} in its activate scripts: "
                f"{ctx.reinstall}; or, in this shell: export {variable}={shlex.quote(board)}")
    return (f"point Triton at a CUDA ptxas that knows {arch} (JetPack's CUDA has one): export {variable}=PATH; "
            "or install a Triton whose own assembler knows it (Triton 3.7.1's ptxas-blackwell 13.1 assembles sm_110a)")


def _assembled(assembler: Mapping[str, Any], triton: Mapping[str, Any]) -> str:
    how = f" (from {assembler['variable']})" if assembler.get("override") == assembler.get("path") \
        and assembler.get("override") else ""
    return (f"Triton {triton.get('version') or '?'}'s {assembler.get('name')}{how}, CUDA {assembler.get('release')}, "
            f"assembles {assembler.get('arch')}")


def check_compile(ctx: Context) -> Verdict:
    probed = ctx.assembler
    triton = probed.data.get("triton")
    if isinstance(triton, dict) and triton.get("installed") is False:
        return NOT_APPLICABLE, "no Triton in the environment: torch.compile has no GPU backend to prove here", None
    assembler = _assembler(ctx)
    said = ""
    if probed.completed is not None:
        if assembler is None:
            return FAIL, probed.failure(), f"run the probe by hand to see why: {shlex.join(probed.completed.argv)}"
        if not assembler.get("assembled"):
            return (FAIL, f"Triton {triton.get('version') if isinstance(triton, dict) else '?'}'s "
                          f"{assembler.get('name')} ({assembler.get('path')}, CUDA {assembler.get('release')}) cannot "
                          f"assemble {assembler.get('arch')}: {assembler.get('error')}; every torch.compile'd kernel "
                          "fails on this GPU", assembler_fix(ctx, assembler))
        said = _assembled(assembler, triton if isinstance(triton, dict) else {})
    unchecked = ctx.profile.gpu_unchecked()
    if unchecked is not None:
        return OK, f"{said}; the compiled function is not run ({unchecked})", None
    section = ctx.torch.data.get("compile")
    cuda = ctx.torch.section("cuda") or {}
    if not cuda.get("available") or not cuda.get("device_count"):
        what = said or "Triton's assembler was not tried (the board's compute capability is unknown)"
        return SKIP, f"{what}; the compiled function needs a CUDA device (cuda-available)", None
    show = f"see the whole error: {shlex.quote(ctx.python)} -c {shlex.quote(_SHOW)}"
    if not isinstance(section, dict):
        if probed.completed is None and ctx.torch.data.get("complete"):
            # The board's capability is unknown, so only the torch probe looked, and it found no Triton.
            return NOT_APPLICABLE, "no Triton in the environment: torch.compile has no GPU backend to prove here", None
        return FAIL, ctx.torch.failure(), show
    prefix = f"{said}; " if said else ""
    if not section.get("done", True):
        return FAIL, f"{prefix}the torch.compile test died: {ctx.torch.failure()}", show
    if section.get("error"):
        refused = section.get("assembler_error")
        if refused and assembler is not None:
            return FAIL, f"{prefix}but torch.compile on cuda failed in the assembler: {refused}", \
                assembler_fix(ctx, assembler)
        return FAIL, f"{prefix}torch.compile on cuda failed: {section['error']}", show
    if not section.get("finite") or not section.get("allclose"):
        return (FAIL, f"{prefix}a torch.compile'd function on cuda differs from eager by up to "
                      f"{section.get('max_abs_error')}", show)
    return OK, (f"{prefix}a torch.compile'd matmul with a fused pointwise tail on cuda matches eager "
                f"(max |error| {section['max_abs_error']:.2g})"), None
