"""bitsandbytes loaded its CUDA library and its kernels run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from jetson_install.doctor.checks_torch import changed_builds
from jetson_install.doctor.context import Context, uv_command
from jetson_install.doctor.missing_libraries import missing_library
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, Verdict
from jetson_install.envs.record import read_record


def check_bnb_library(ctx: Context) -> Verdict:
    moot = ctx.profile.bitsandbytes_moot(ctx)
    if moot is not None:
        return NOT_APPLICABLE, moot, None
    # An environment jetson-install made records the bitsandbytes it installed: a swap is this check's.
    environment = Path(ctx.python).parent.parent
    record = read_record(environment)
    if record is not None and "bitsandbytes" in record.installed:
        changed = changed_builds(record, environment, ["bitsandbytes"])
        if changed is not None:
            return changed
    data = ctx.bnb.data
    if data.get("import_error"):
        error = data["import_error"]
        if error.startswith("torch:"):
            return FAIL, f"bitsandbytes needs torch, which does not import ({error})", "fix the torch-import check first"
        native = _native_missing(ctx, data)
        if native is not None:
            return native
        return FAIL, f"import bitsandbytes failed: {error}", ctx.bnb_install_fix()
    library = data.get("library")
    if not library:
        return FAIL, ctx.bnb.failure(), ctx.bnb_install_fix()
    backend = data.get("backend")
    version = data.get("version")
    error = (library.get("error") or "").strip()
    missing = (missing_library(error, ctx.expected_cuda, ctx.python, uv_command())
               if library.get("class") == "ErrorHandlerMockBNBNativeLibrary" else None)
    if missing is not None and missing.fix:
        # Whatever the backend, a library that cannot load names the package it lacks.
        return FAIL, f"bitsandbytes {version} could not load its native library: {error.splitlines()[0]}", missing.fix
    if not library.get("path"):
        native = _native_missing(ctx, data)
        if native is not None:
            return native
    own = ctx.profile.bitsandbytes_library(ctx, library, version)
    if own is not None:
        return own
    if backend != "CUDA":
        # bitsandbytes picks its library from torch (bitsandbytes/cextension.py, https://github.com/bitsandbytes-foundation/bitsandbytes); with
        # a torch that sees no CUDA even a good build loads its CPU library or a mock.
        detail = f"bitsandbytes {version} loaded {library.get('file') or library.get('class')} (backend {backend})"
        return FAIL, detail + ": torch sees no CUDA", "fix the torch checks first (cuda-available)"
    # CudaBNBNativeLibrary means the CUDA library loaded; BNBNativeLibrary is the CPU one and
    # ErrorHandlerMockBNBNativeLibrary a failed load (bitsandbytes/cextension.py, https://github.com/bitsandbytes-foundation/bitsandbytes).
    if library["class"] == "ErrorHandlerMockBNBNativeLibrary":
        reason = (library.get("error") or "no reason recorded").strip().splitlines()
        return (
            FAIL,
            f"bitsandbytes {version} failed to load its CUDA library (error mock): {reason[0] if reason else ''}",
            ctx.bnb_install_fix(),
        )
    if backend == "CUDA" and library["compiled_with_cuda"] and library["class"] == "CudaBNBNativeLibrary":
        return OK, f"bitsandbytes {version}, backend CUDA, loaded {library['file']}", None
    detail = f"bitsandbytes {version} loaded {library['file'] or library['class']} (backend {backend})"
    return FAIL, detail + ", not its CUDA library", ctx.bnb_install_fix()


def _native_missing(ctx: Context, data: Mapping[str, Any]) -> Optional[Verdict]:
    """No native library loaded, and the loader names a dependency one of them lacks: that
    library and the package that provides it (the backend's own library first)."""
    errors: Mapping[str, str] = data.get("native_errors") or {}
    wanted = "cuda" if data.get("backend") == "CUDA" else "cpu"
    for file in sorted(errors, key=lambda name: wanted not in name):
        missing = missing_library(errors[file], ctx.expected_cuda, ctx.python, uv_command())
        if missing is not None and missing.fix:
            reason = errors[file].strip().splitlines()[0]
            return (FAIL, f"bitsandbytes {data.get('version') or ''} cannot load {file}: it needs {missing.file}, "
                          f"which is not installed ({missing.provided_by}; the loader: {reason})", missing.fix)
    return None


def _kernel_fault_fix(ctx: Context, message: str) -> str:
    if "named symbol not found" in message:
        # The aarch64 wheels are SBSA builds; on JetPack they fail so (https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1930).
        return "this bitsandbytes was built for another CUDA than the device's; " + ctx.bnb_install_fix()
    return ctx.bnb_install_fix()


_KERNEL_TESTS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "nf4": lambda r: f"NF4 round trip mean |error| {r['mean_abs_error']:.3f} < {r['bound']}",
    "linear4bit": lambda r: f"Linear4bit forward on cuda, relative error {r['relative_error']:.2g} < {r['bound']}",
    "int8": lambda r: f"Linear8bitLt forward on cuda, relative error {r['relative_error']:.2g} < {r['bound']}",
}


def _kernel_verdict(ctx: Context, names: Sequence[str]) -> Verdict:
    kernels = ctx.bnb.data.get("kernels") or {}
    details = []
    for name in names:
        result = kernels.get(name)
        if result is None or not result.get("done"):
            # A kernel fault prints "Error ... ops.cu" and exits 1 (BNB_CHECK_RETURN, csrc/compat.cuh, https://github.com/bitsandbytes-foundation/bitsandbytes).
            where = f"the {name} test died: " if result is not None else ""
            failure = ctx.bnb.failure()
            return FAIL, where + failure, _kernel_fault_fix(ctx, failure)
        if result.get("error"):
            return FAIL, f"{name}: {result['error']}", _kernel_fault_fix(ctx, result["error"])
        if not result["ok"]:
            measured = result.get("mean_abs_error", result.get("relative_error"))
            return FAIL, f"{name}: error {measured:.3g} exceeds {result['bound']}", ctx.bnb_install_fix()
        details.append(_KERNEL_TESTS[name](result))
    return OK, "; ".join(details), None


def check_bnb_kernels(ctx: Context) -> Verdict:
    if ctx.profile.gpu_unchecked() is not None:
        return NOT_APPLICABLE, "preflight: the CUDA kernels are checked only by the Jetson profile", None
    return _kernel_verdict(ctx, ("nf4", "linear4bit"))


def check_bnb_int8(ctx: Context) -> Verdict:
    if ctx.profile.gpu_unchecked() is not None:
        return NOT_APPLICABLE, "preflight: the CUDA kernels are checked only by the Jetson profile", None
    capability = ctx.capability
    # LLM.int8() needs compute capability 7.5+ (docs/source/installation.mdx, https://github.com/bitsandbytes-foundation/bitsandbytes).
    if capability is not None and capability < (7, 5):
        return NOT_APPLICABLE, f"compute capability {capability[0]}.{capability[1]} < 7.5: LLM.int8() is not supported", None
    return _kernel_verdict(ctx, ("int8",))
