"""Probe torch, CUDA kernels, NumPy, transformers and OBLITERATUS inside the target interpreter.

Run as ``python torch_probe.py [--no-target]`` by jetson-install doctor.
Only the standard library, torch, numpy, transformers and obliteratus may be imported here:
this file runs in an environment where jetson_install is not installed.

``--no-target``: OBLITERATUS and transformers are left out (no check the doctor runs reads
them).

Output: one JSON object per line on stdout; the last line counts. Before each
step the probe prints its findings so far with that step's section marked
``"done": false``, and at the end everything with ``"complete": true``, so a
probe that dies or hangs mid-way still reports what it learned and which step
it was in.
"""

import json
import os
import platform
import re
import sys
import traceback
import warnings

report = {"probe": "torch", "complete": False}


def emit():
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()


def describe(exc):
    """One line naming the exception type and message, e.g. 'OSError: libopenblas.so.0: ...'."""
    return "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")


def step(name, probe, *args):
    """Run one probe step; its section says "done": false until it returns, so a crash or hang names the step."""
    report[name] = {"done": False}
    emit()
    section = probe(*args)
    section["done"] = True
    report[name] = section
    emit()


def probe_interpreter():
    return {
        "version": "%d.%d.%d" % sys.version_info[:3],
        "executable": sys.executable,
        "machine": platform.machine(),
        "tag": "cp%d%d" % sys.version_info[:2],
        # Where this interpreter imports packages from, in its order: the doctor reads the vendor
        # builds' libraries there, also for a torch outside a venv (an image's dist-packages).
        "site_packages": [path for path in sys.path
                          if os.path.basename(path) in ("site-packages", "dist-packages") and os.path.isdir(path)],
    }


def probe_wheels():
    """The tags in the WHEEL file of each compiled package that must match this interpreter.
    Read before `import torch`, so a wheel for another Python is named even when it cannot import."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 has no importlib.metadata
        return {"tags": {}}
    tags = {}
    for name in ("torch", "torchvision", "torchaudio", "bitsandbytes"):
        try:
            text = metadata.distribution(name).read_text("WHEEL") or ""
        except Exception:
            continue
        tags[name] = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    return {"tags": tags}


def probe_numpy():
    try:
        import numpy
    except Exception as exc:
        return {"version": None, "error": describe(exc)}
    return {"version": str(numpy.__version__), "error": None}


def probe_torch_import(loaded):
    # NumPy 1.x/2.x ABI trouble shows up as a warning during `import torch`, not an error:
    # "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.x"
    # (https://github.com/dusty-nv/jetson-containers/issues/1537).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
        except BaseException as exc:  # a broken wheel can raise anything from its C extension
            return {"imported": False, "error": describe(exc), "traceback": traceback.format_exc()}
    loaded.append(torch)
    # torch.version.cuda is a string baked in at build time; is_built() says whether CUDA is
    # compiled in (https://pytorch.org/docs/stable/backends.html#torch.backends.cuda.is_built).
    try:
        cuda_built = bool(torch.backends.cuda.is_built())
    except Exception:
        cuda_built = None
    return {
        "imported": True,
        "error": None,
        "version": str(torch.__version__),
        "cuda": getattr(torch.version, "cuda", None),
        "cuda_built": cuda_built,
        "hip": getattr(torch.version, "hip", None),
        "import_warnings": [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()],
    }


def probe_cuda(torch):
    cuda = {"available": False, "device_count": 0, "arch_list": [], "error": None}
    try:
        cuda["available"] = bool(torch.cuda.is_available())
        cuda["device_count"] = int(torch.cuda.device_count())
        cuda["arch_list"] = [str(arch) for arch in torch.cuda.get_arch_list()]
        if cuda["available"] and cuda["device_count"] > 0:
            cuda["device_name"] = str(torch.cuda.get_device_name(0))
            cuda["capability"] = [int(part) for part in torch.cuda.get_device_capability(0)]
            cuda["total_memory_bytes"] = int(torch.cuda.get_device_properties(0).total_memory)
    except Exception as exc:
        cuda["error"] = describe(exc)
    return cuda


def compared(result, torch, got, expected):
    """A kernel's output against its reference (the CPU's, or eager's for a compiled one): it ran, finite, close."""
    result["ran"] = True
    result["finite"] = bool(torch.isfinite(got).all())
    result["max_abs_error"] = float((got - expected).abs().max())
    result["allclose"] = bool(torch.allclose(got, expected, rtol=1e-3, atol=1e-3))


def probe_matmul(torch):
    # is_available() is true even for wheels without kernels for this device ("no kernel image
    # is available", https://github.com/wendylabsinc/WendyOS/issues/1370), so only a kernel proves anything.
    matmul = {"ran": False, "error": None}
    try:
        torch.backends.cuda.matmul.allow_tf32 = False  # TF32 would make the CPU comparison fail on Ampere+
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(128, 128, generator=generator)
        b = torch.randn(128, 128, generator=generator)
        expected = a @ b
        got = (a.cuda() @ b.cuda()).cpu()
        torch.cuda.synchronize()
        compared(matmul, torch, got, expected)
    except Exception as exc:
        matmul["error"] = describe(exc)
    return matmul


def probe_obliteratus():
    result = {"imported": False, "device": None, "error": None}
    try:
        # What OBLITERATUS' own tests/test_jetson_cuda.py asserts (test_jetson_cuda_runtime_contract,
        # https://github.com/elder-plinius/OBLITERATUS).
        from obliteratus import device
    except Exception as exc:
        result["error"] = describe(exc)
        return result
    result["imported"] = True
    try:
        result["device"] = str(device.get_device("auto"))
        # device.is_cuda() arrived with that test (v0.1.3); older releases lack it.
        result["is_cuda"] = bool(device.is_cuda()) if hasattr(device, "is_cuda") else None
    except Exception as exc:
        result["error"] = describe(exc)
    result["source"] = obliteratus_source()
    return result


def obliteratus_source():
    """Where the installed OBLITERATUS came from: PEP 610's direct_url.json names the URL
    and, for a git source, the commit it resolved to
    (https://packaging.python.org/en/latest/specifications/direct-url-data-structure/)."""
    source = {"version": None, "url": None, "commit": None}
    try:
        import importlib.metadata as metadata

        distribution = metadata.distribution("obliteratus")
        source["version"] = distribution.version
        direct_url = json.loads(distribution.read_text("direct_url.json") or "{}")
    except Exception:
        return source
    source["url"] = direct_url.get("url")
    source["commit"] = (direct_url.get("vcs_info") or {}).get("commit_id")
    return source


def probe_conv2d(torch):
    result = {"ran": False, "error": None}
    try:
        torch.backends.cudnn.allow_tf32 = False  # TF32 would make the CPU comparison fail on Ampere+
        generator = torch.Generator().manual_seed(0)
        images = torch.randn(2, 3, 16, 16, generator=generator)
        weight = torch.randn(8, 3, 3, 3, generator=generator)
        expected = torch.nn.functional.conv2d(images, weight, padding=1)
        got = torch.nn.functional.conv2d(images.cuda(), weight.cuda(), padding=1).cpu()
        torch.cuda.synchronize()
        compared(result, torch, got, expected)
    except Exception as exc:
        result["error"] = describe(exc)
    return result


def linear_with_grads(torch, inputs, weight, autocast):
    """A linear layer forward (under bf16 autocast or not) and backward: the output and both gradients."""
    inputs = inputs.clone().requires_grad_()
    weight = weight.clone().requires_grad_()
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast):
        output = torch.nn.functional.linear(inputs, weight)
    output.float().sum().backward()
    return output.detach(), inputs.grad, weight.grad


def probe_bf16_backward(torch):
    # Gate on executed kernels, bf16 autocast and a backward pass among them: with CUDA 13
    # builds on Orin neither is_available() nor the arch list tells whether they run
    # (https://github.com/nvidia-holoscan/holohub/pull/1687).
    result = {"ran": False, "error": None}
    try:
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(16, 64, generator=generator)
        weight = torch.randn(32, 64, generator=generator)
        expected = linear_with_grads(torch, inputs, weight, False)
        got = linear_with_grads(torch, inputs.cuda(), weight.cuda(), True)
        torch.cuda.synchronize()
        result["ran"] = True
        result["dtype"] = str(got[0].dtype)
        results = [value.float().cpu() for value in got]
        result["finite"] = all(bool(torch.isfinite(value).all()) for value in results)
        # Largest error relative to the largest value, over the output and both gradients;
        # bf16 rounds to about 3 significant digits, so 64-term sums stay well within 2%.
        result["relative_error"] = max(
            float((value - reference).abs().max() / reference.abs().max())
            for value, reference in zip(results, expected)
        )
        result["bound"] = 0.02
        result["allclose"] = result["relative_error"] < result["bound"]
    except Exception as exc:
        result["error"] = describe(exc)
    return result


def probe_jetson_contract(torch):
    """The tensor half of OBLITERATUS' test_jetson_cuda_runtime_contract, verbatim."""
    result = {"ran": False, "error": None}
    try:
        tensor = torch.arange(16, device="cuda", dtype=torch.float32).reshape(4, 4)
        product = tensor @ tensor.T
        torch.cuda.synchronize()
        result["ran"] = True
        result["on_cuda"] = bool(product.is_cuda)
        result["finite"] = bool(torch.isfinite(product).all())
    except Exception as exc:
        result["error"] = describe(exc)
    return result


# transformers' `torch>=X` requirement; its import_utils disables torch below the same floor.
TORCH_FLOOR = re.compile(r"^torch\s*>=\s*([0-9][^,;\s]*)")


def probe_transformers():
    result = {"installed": False, "version": None, "torch_floor": None, "sees_torch": None, "error": None}
    try:
        from importlib import metadata
    except ImportError:  # Python 3.7 and older
        return result
    try:
        result["version"] = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return result
    result["installed"] = True
    for requirement in metadata.requires("transformers") or ():
        match = TORCH_FLOOR.match(requirement.strip())
        if match:
            result["torch_floor"] = match.group(1)
            break
    try:
        from transformers.utils import is_torch_available

        result["sees_torch"] = bool(is_torch_available())
    except Exception as exc:
        result["error"] = describe(exc)
    return result


def compiled_function(x):
    # A matmul (cuBLAS) and a pointwise tail, which inductor fuses into a Triton kernel: that
    # kernel is what passes through Triton's assembler.
    return (x @ x).abs() - x


def probe_compile(torch):
    """torch.compile's default backend (inductor, whose GPU kernels are Triton's) against eager."""
    result = {"ran": False, "error": None}
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(64, 64, generator=generator).cuda()
        expected = compiled_function(x)
        got = torch.compile(compiled_function)(x)
        torch.cuda.synchronize()
        compared(result, torch, got, expected)
    except Exception as exc:
        result["error"] = describe(exc)
        # Inductor wraps Triton's failure; the assembler's own line says what it refused.
        said = [line.strip() for line in str(exc).splitlines() if "ptxas" in line and "fatal" in line]
        if said:
            result["assembler_error"] = said[0]
    return result


def has_triton():
    try:
        import importlib.util

        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def main():
    # Each run compiles anew: a kernel cached by an earlier run would not pass through the
    # assembler (torch/_inductor/config.py force_disable_caches; triton/knobs.py always_compile).
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    step("python", probe_interpreter)
    step("wheels", probe_wheels)
    step("numpy", probe_numpy)
    loaded = []
    step("torch", probe_torch_import, loaded)
    # The target's own checks as the user's python starts it: sealed (-S), the proof of CUDA
    # needs none of its code, and an editable install is on the path only through a .pth.
    target = not sys.flags.no_site and "--no-target" not in sys.argv[1:]
    if loaded:
        torch = loaded[0]
        step("cuda", probe_cuda, torch)
        device = report["cuda"]["available"] and report["cuda"]["device_count"] > 0
        if device:
            step("matmul", probe_matmul, torch)
        if target:
            step("obliteratus", probe_obliteratus)
            step("transformers", probe_transformers)
        # The kernels most likely to crash the process come last, after the facts above are out.
        if device:
            step("jetson_contract", probe_jetson_contract, torch)
            step("conv2d", probe_conv2d, torch)
            # bf16 needs compute capability 8.0 (Ampere) or newer.
            if tuple(report["cuda"].get("capability", (0, 0))) >= (8, 0):
                step("bf16_backward", probe_bf16_backward, torch)
            # Compiling takes longest and runs a kernel torch did not ship: last of all.
            if has_triton():
                step("compile", probe_compile, torch)
    report["complete"] = True
    emit()


if __name__ == "__main__":
    main()
