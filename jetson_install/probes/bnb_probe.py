"""Probe bitsandbytes inside the target interpreter: which native library loaded, and do its CUDA kernels run.

Run as ``python bnb_probe.py`` by jetson-install doctor, in a process of its
own, because a failing bitsandbytes kernel prints ``Error ... ops.cu`` to
stderr and calls exit(1) (BNB_CHECK_RETURN in csrc/compat.cuh,
https://github.com/bitsandbytes-foundation/bitsandbytes). Only the standard library, torch and
bitsandbytes may be imported here.

Output: one JSON object per line on stdout; the last line counts. Findings so
far are printed before each kernel test, so when a kernel kills the process
the library facts are still known and the parent names the test that died.
"""

import json
import os
import sys
import traceback

# An NF4 round trip of randn(256, 256) has a mean absolute error of about 0.073 (measured with
# bitsandbytes 0.50.2's CPU backend); the bound leaves twice that.
NF4_MEAN_ABS_ERROR_BOUND = 0.15
# Quantized layers against the same layer in fp16, as mean |error| / mean |reference|.
LAYER_RELATIVE_ERROR_BOUND = 0.05
# LLM.int8() needs compute capability 7.5 or newer (docs/source/installation.mdx, https://github.com/bitsandbytes-foundation/bitsandbytes).
INT8_MIN_CAPABILITY = (7, 5)

report = {"probe": "bitsandbytes", "complete": False}


def emit():
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()


def describe(exc):
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text.splitlines()[-1] if text else "")


def probe_library(torch):
    """Fill report["library"]; return the bitsandbytes module or None when it does not import."""
    try:
        import bitsandbytes
        from bitsandbytes import cextension
    except BaseException as exc:
        report["import_error"] = describe(exc)
        report["traceback"] = traceback.format_exc()
        return None
    report["version"] = str(getattr(bitsandbytes, "__version__", "unknown"))
    # `import bitsandbytes` succeeds even when the CUDA library failed to load: it
    # installs an error mock instead, so the class of `lib` is what tells
    # (ErrorHandlerMockBNBNativeLibrary in bitsandbytes/cextension.py, https://github.com/bitsandbytes-foundation/bitsandbytes).
    lib = cextension.lib
    # Read the instance dict, not attributes: these classes' __getattr__ turns any
    # unknown name into a native-function stub.
    fields = vars(lib)
    path = getattr(fields.get("_lib"), "_name", None)  # lib._lib._name: the loaded .so (cextension.py)
    error = fields.get("error_msg")
    report["backend"] = getattr(cextension, "BNB_BACKEND", None)
    report["library"] = {
        "class": type(lib).__name__,
        "compiled_with_cuda": bool(getattr(type(lib), "compiled_with_cuda", False)),
        "path": path if isinstance(path, str) else None,
        "file": os.path.basename(path) if isinstance(path, str) else None,
        "error": error if isinstance(error, str) else None,
    }
    return bitsandbytes


def native_load_errors():
    """What the loader says about each native library bitsandbytes ships that it cannot open.

    bitsandbytes 0.49 and 0.50 turn a library that cannot load into a message of their own
    ("XPU/CPU can run without native library.") and drop the loader's words, which name the
    missing dependency (libgomp.so.1); opening each file here gets them back.
    """
    import ctypes
    import glob
    import importlib.util

    try:
        spec = importlib.util.find_spec("bitsandbytes")
    except BaseException:
        return {}
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    errors = {}
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "libbitsandbytes_*.so"))):
            try:
                ctypes.CDLL(path)
            except OSError as exc:
                errors[os.path.basename(path)] = str(exc)
    return errors


def relative_error(got, expected):
    return float((got.float() - expected.float()).abs().mean() / expected.float().abs().mean())


def test_nf4(torch, functional):
    x = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    quantized, state = functional.quantize_4bit(x, blocksize=64, quant_type="nf4")
    restored = functional.dequantize_4bit(quantized, state)
    torch.cuda.synchronize()
    error = float((x.float() - restored.float()).abs().mean())
    packed = quantized.dtype == torch.uint8 and quantized.numel() == x.numel() // 2
    return {
        "ok": bool(packed and error < NF4_MEAN_ABS_ERROR_BOUND),
        "mean_abs_error": error,
        "bound": NF4_MEAN_ABS_ERROR_BOUND,
    }


def test_linear4bit(torch, bitsandbytes):
    reference = torch.nn.Linear(256, 128, bias=False).half()
    layer = bitsandbytes.nn.Linear4bit(256, 128, bias=False, compute_dtype=torch.float16, quant_type="nf4")
    layer.weight = bitsandbytes.nn.Params4bit(reference.weight.data.clone(), requires_grad=False, quant_type="nf4")
    layer = layer.cuda()  # quantizes the weight on the device
    reference = reference.cuda()
    x = torch.randn(1, 256, device="cuda", dtype=torch.float16)  # batch 1 takes the gemv_4bit kernel
    with torch.no_grad():
        got = layer(x)
        expected = torch.nn.functional.linear(
            x, bitsandbytes.functional.dequantize_4bit(layer.weight.data, layer.weight.quant_state)
        )
    return layer_result(torch, got, expected)


def layer_result(torch, got, expected):
    torch.cuda.synchronize()
    error = relative_error(got, expected)
    finite = bool(torch.isfinite(got).all())
    return {
        "ok": bool(got.is_cuda and finite and error < LAYER_RELATIVE_ERROR_BOUND),
        "finite": finite,
        "relative_error": error,
        "bound": LAYER_RELATIVE_ERROR_BOUND,
    }


def test_int8(torch, bitsandbytes):
    reference = torch.nn.Linear(256, 128, bias=False).half()
    layer = bitsandbytes.nn.Linear8bitLt(256, 128, bias=False, has_fp16_weights=False, threshold=0.0)
    layer.weight = bitsandbytes.nn.Int8Params(reference.weight.data.clone(), requires_grad=False, has_fp16_weights=False)
    layer = layer.cuda()  # quantizes the weight to int8 on the device
    reference = reference.cuda()
    x = torch.randn(4, 256, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        got = layer(x)
        expected = reference(x)
    return layer_result(torch, got, expected)


def run_kernel_test(name, test, *args):
    # Marked "done": false first: if its kernel calls exit(1), this line is the last word.
    report["kernels"][name] = {"ok": False, "done": False}
    emit()
    try:
        result = test(*args)
    except Exception as exc:
        result = {"ok": False, "error": describe(exc)}
    result["done"] = True
    report["kernels"][name] = result


def main():
    report["python"] = "%d.%d.%d" % sys.version_info[:3]
    try:
        import torch
    except BaseException as exc:
        report["import_error"] = "torch: " + describe(exc)
        report["complete"] = True
        emit()
        return
    cuda_ready = bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    capability = tuple(torch.cuda.get_device_capability(0)) if cuda_ready else None
    report["capability"] = list(capability) if capability else None
    bitsandbytes = probe_library(torch)
    library = report.get("library") or {}
    if bitsandbytes is None or not library.get("path"):
        # No native library loaded: the loader's own words say why.
        report["native_errors"] = native_load_errors()
    report["kernels"] = {}
    emit()
    if bitsandbytes is not None and cuda_ready and report["library"]["compiled_with_cuda"]:
        import bitsandbytes.functional as functional

        torch.manual_seed(0)
        run_kernel_test("nf4", test_nf4, torch, functional)
        run_kernel_test("linear4bit", test_linear4bit, torch, bitsandbytes)
        if capability >= INT8_MIN_CAPABILITY:
            run_kernel_test("int8", test_int8, torch, bitsandbytes)
    report["complete"] = True
    emit()


if __name__ == "__main__":
    main()
