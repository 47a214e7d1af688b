"""Probe torch, CUDA, NumPy and OBLITERATUS inside the target interpreter.

Run as ``python torch_probe.py`` by jetson-install doctor. Only the standard
library, torch, numpy and obliteratus may be imported here: this file runs in
an environment where jetson_install is not installed.

Output: one JSON object per line on stdout; the last line counts. Before each
step the probe prints its findings so far with that step's section marked
``"done": false``, and at the end everything with ``"complete": true``, so a
probe that dies or hangs mid-way still reports what it learned and which step
it was in.
"""

import json
import platform
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
    }


def probe_numpy():
    try:
        import numpy
    except Exception as exc:
        return {"version": None, "error": describe(exc)}
    return {"version": str(numpy.__version__), "error": None}


def probe_torch_import(loaded):
    # NumPy 1.x/2.x ABI trouble shows up as a warning during `import torch`, not an
    # error (shared/reference/torch-indexes.md §5, "NumPy 2 ABI").
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
        except BaseException as exc:  # a broken wheel can raise anything from its C extension
            return {"imported": False, "error": describe(exc), "traceback": traceback.format_exc()}
    loaded.append(torch)
    return {
        "imported": True,
        "error": None,
        "version": str(torch.__version__),
        "cuda": getattr(torch.version, "cuda", None),
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


def probe_matmul(torch):
    # is_available() is true even for wheels without kernels for this device, so
    # only a real kernel proves anything (shared/reference/torch-indexes.md §5, last row).
    matmul = {"ran": False, "error": None}
    try:
        torch.backends.cuda.matmul.allow_tf32 = False  # TF32 would make the CPU comparison fail on Ampere+
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(128, 128, generator=generator)
        b = torch.randn(128, 128, generator=generator)
        expected = a @ b
        got = (a.cuda() @ b.cuda()).cpu()
        torch.cuda.synchronize()
        matmul["ran"] = True
        matmul["finite"] = bool(torch.isfinite(got).all())
        matmul["max_abs_error"] = float((got - expected).abs().max())
        matmul["allclose"] = bool(torch.allclose(got, expected, rtol=1e-3, atol=1e-3))
    except Exception as exc:
        matmul["error"] = describe(exc)
    return matmul


def probe_obliteratus():
    result = {"imported": False, "device": None, "error": None}
    try:
        # The smoke command OBLITERATUS itself suggests (shared/reference/obliteratus-and-bitsandbytes.md §4.11).
        from obliteratus import device
    except Exception as exc:
        result["error"] = describe(exc)
        return result
    result["imported"] = True
    try:
        result["device"] = str(device.get_device("auto"))
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


def main():
    step("python", probe_interpreter)
    step("numpy", probe_numpy)
    loaded = []
    step("torch", probe_torch_import, loaded)
    if loaded:
        torch = loaded[0]
        step("cuda", probe_cuda, torch)
        if report["cuda"]["available"] and report["cuda"]["device_count"] > 0:
            step("matmul", probe_matmul, torch)
        step("obliteratus", probe_obliteratus)
    report["complete"] = True
    emit()


if __name__ == "__main__":
    main()
