"""What OBLITERATUS meets at run time: its own Jetson runtime contract, and transformers seeing torch."""

from __future__ import annotations


from jetson_install.doctor.context import Context
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, Verdict


def check_jetson_contract(ctx: Context) -> Verdict:
    # OBLITERATUS' tests/test_jetson_cuda.py, test_jetson_cuda_runtime_contract
    # (https://github.com/elder-plinius/OBLITERATUS): get_device('auto') == 'cuda', and
    # torch.arange(16, device='cuda', dtype=float32).reshape(4, 4) @ its .T stays on cuda, finite.
    raw = ctx.torch.data.get("jetson_contract")
    what = "a 4x4 float32 arange matmul t @ t.T on cuda"
    if not isinstance(raw, dict):
        return FAIL, ctx.torch.failure(), ctx.torch_install_fix()
    if not raw.get("done", True):
        return FAIL, f"{what} died: {ctx.torch.failure()}", ctx.torch_install_fix()
    if raw.get("error"):
        return FAIL, f"{what} failed: {raw['error']}", ctx.torch_install_fix()
    if not raw["on_cuda"] or not raw["finite"]:
        problem = "left cuda" if not raw["on_cuda"] else "gave non-finite numbers"
        return FAIL, f"{what} {problem}", ctx.torch_install_fix()
    obliteratus = ctx.target_probe.section("obliteratus") or {}
    if obliteratus.get("is_cuda") is False:
        return FAIL, "obliteratus.device.is_cuda() is False", "make torch see the GPU first (see the cuda-available check)"
    return OK, f"get_device('auto') == 'cuda'; {what} is finite", None


def check_transformers_torch(ctx: Context) -> Verdict:
    section = ctx.target_probe.section("transformers")
    if section is None:
        return FAIL, ctx.torch.failure(), ctx.reinstall
    if not section["installed"]:
        # Nothing to judge: OBLITERATUS needs transformers, and its own check fails without it.
        return NOT_APPLICABLE, "transformers is not installed", None
    version, floor = section["version"], section["torch_floor"]
    if section.get("error"):
        return FAIL, f"transformers {version} does not import: {section['error']}", ctx.reinstall
    torch_version = (ctx.torch.section("torch") or {}).get("version")
    needs = f"torch>={floor}" if floor else "a newer torch"
    if not section["sees_torch"]:
        # Below its floor transformers logs "Disabling PyTorch because PyTorch >= 2.6 is required"
        # and runs as if torch were absent (transformers/utils/import_utils.py,
        # https://github.com/huggingface/transformers). Under PEP 440 2.4.0a0 is below 2.4.
        return (
            FAIL,
            f"transformers {version} disables torch {torch_version}: it needs {needs}",
            f"install a transformers release whose torch floor {torch_version} meets; {ctx.reinstall}"
            " caps transformers to the channel's torch",
        )
    floor_note = f" (it needs {needs})" if floor else ""
    return OK, f"transformers {version} sees torch {torch_version}{floor_note}", None
