"""CUDA kernels decide: a conv2d, and bf16 autocast with a backward pass, computed right on the device.

Whether torch has code for a device cannot be read off `is_available()` or the arch list
alone: CUDA 13 builds without sm_87 ran on Orin in some reports and failed in others, and
the practical rule is to gate on executed kernels: matmul, conv2d, bf16 autocast, backward
(https://github.com/nvidia-holoscan/holohub/pull/1687, https://github.com/wendylabsinc/WendyOS/issues/1370).
"""

from __future__ import annotations

from typing import Optional

from jetson_install.doctor.context import Context
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, Verdict

PASSED, FAILED, NOT_RUN = "passed", "failed", "not_run"

# The torch probe's section for each kernel, and how a report names it.
KERNEL_SECTIONS = {"matmul": "matmul", "conv2d": "conv2d", "bf16_autocast_backward": "bf16_backward"}
# The check that judges each kernel.
KERNEL_CHECKS = {"matmul": "cuda-matmul", "conv2d": "cuda-conv2d", "bf16_autocast_backward": "cuda-bf16"}
_NAMES = {"matmul": "matmul", "conv2d": "conv2d", "bf16_autocast_backward": "bf16 autocast with backward"}
BF16_CAPABILITY = (8, 0)  # bf16 arrived with Ampere


def kernel_status(ctx: Context, kernel: str) -> str:
    """passed, failed (an error, wrong numbers, or the probe died in it), not_run, or (bf16 on a
    device without it) not_applicable."""
    if kernel == "bf16_autocast_backward" and not _has_bf16(ctx):
        return NOT_APPLICABLE
    raw = ctx.torch.data.get(KERNEL_SECTIONS[kernel])
    if not isinstance(raw, dict):
        return NOT_RUN
    if not raw.get("done", True) or raw.get("error"):
        return FAILED
    return PASSED if raw.get("ran") and raw.get("finite") and raw.get("allclose") else FAILED


def kernels_ran_correctly(ctx: Context) -> Optional[str]:
    """The kernels that ran and matched the CPU, as words, when all that apply did; else None."""
    wanted = ["matmul", "conv2d"]
    if ctx.capability is not None and _has_bf16(ctx):
        wanted.append("bf16_autocast_backward")
    if any(kernel_status(ctx, kernel) != PASSED for kernel in wanted):
        return None
    names = [_NAMES[kernel] for kernel in wanted]
    return ", ".join(names[:-1]) + " and " + names[-1]


def _has_bf16(ctx: Context) -> bool:
    return ctx.capability is None or ctx.capability >= BF16_CAPABILITY


def _kernel_verdict(ctx: Context, section_name: str, what: str) -> Optional[Verdict]:
    """A failure verdict for a kernel test that did not run cleanly, or None when its numbers are in."""
    raw = ctx.torch.data.get(section_name)
    if not isinstance(raw, dict):
        return FAIL, ctx.torch.failure(), ctx.torch_install_fix()
    if not raw.get("done", True):
        return FAIL, f"the {what} test died: {ctx.torch.failure()}", ctx.torch_install_fix()
    if raw.get("error"):
        return FAIL, f"{what} on cuda failed: {raw['error']}", ctx.torch_install_fix()
    if not raw["finite"]:
        return FAIL, f"{what} on cuda gave non-finite numbers", ctx.torch_install_fix()
    return None


def check_cuda_conv2d(ctx: Context) -> Verdict:
    what = "a 3x3 float32 conv2d"
    failed = _kernel_verdict(ctx, "conv2d", what)
    if failed:
        return failed
    section = ctx.torch.data["conv2d"]
    error = section["max_abs_error"]
    if not section["allclose"]:
        return FAIL, f"{what} on cuda differs from the CPU by up to {error:.3g}", ctx.torch_install_fix()
    return OK, f"{what} on cuda matches the CPU (max |error| {error:.2g})", None


def check_cuda_bf16(ctx: Context) -> Verdict:
    capability = ctx.capability
    if capability is not None and not _has_bf16(ctx):
        # Not a skip: the strict gate needs only the checks that apply to the device.
        return NOT_APPLICABLE, f"compute capability {capability[0]}.{capability[1]} < 8.0: the device has no bf16", None
    what = "a bf16 autocast linear forward and backward"
    failed = _kernel_verdict(ctx, "bf16_backward", what)
    if failed:
        return failed
    section = ctx.torch.data["bf16_backward"]
    error, bound = section["relative_error"], section["bound"]
    if not section["allclose"]:
        return (
            FAIL,
            f"{what} on cuda is off the float32 CPU result by {error:.3g} (relative), more than {bound}",
            ctx.torch_install_fix(),
        )
    return OK, f"{what} on cuda is within {error:.2g} of float32 on the CPU (relative, bound {bound})", None
