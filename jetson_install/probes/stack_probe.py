"""Run by the chosen interpreter (standalone; stdlib only; Python 3.8+): the distributions it
sees on its whole sys.path, which uv does not look through for a venv's parent
(astral-sh/uv#17215, #15162), and the identity of each package of the torch stack: version,
location, the sha256 of its dist-info RECORD, and torch's CUDA version read from
torch/version.py without importing torch (no GPU or CUDA library is needed to read it), and
the tags each distribution's WHEEL file records (`uv pip check` judges those, not the file name).

Prints one JSON line: {"probe": "stack", "python": ..., "machine": ..., "distributions": {...},
"wheel_tags": {...}, "stack": {...}}.
"""

import hashlib
import importlib.util
import json
import platform
import re
import sys

STACK = ("torch", "torchvision", "torchaudio", "bitsandbytes", "numpy")


def normalize(name):
    # PEP 503's rule, as packaging.utils.canonicalize_name spells it for the tool itself: this
    # probe runs on the target's interpreter, which need not have packaging.
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_cuda(distribution):
    path = distribution.locate_file("torch/version.py")
    try:
        spec = importlib.util.spec_from_file_location("_jetson_install_torch_version", str(path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # a torch without version.py, or one that does not run
        return None, "cannot read %s: %s" % (path, exc)
    return getattr(module, "cuda", None), None


def identity(distribution):
    record = distribution.read_text("RECORD")
    found = {
        "version": distribution.version,
        "location": str(distribution.locate_file("")),
        "record_sha256": hashlib.sha256(record.encode("utf-8")).hexdigest() if record is not None else None,
    }
    if normalize(distribution.metadata["Name"]) == "torch":
        found["cuda"], found["cuda_error"] = torch_cuda(distribution)
    return found


def main():
    from importlib import metadata

    visible = {}
    wheel_tags = {}
    stack = {}
    # sys.path order: the first distribution of a name is the one an import gets.
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"]
        if not name or normalize(name) in visible:
            continue
        visible[normalize(name)] = distribution.version
        wheel = distribution.read_text("WHEEL") or ""
        wheel_tags[normalize(name)] = re.findall(r"^Tag:\s*(\S+)\s*$", wheel, re.MULTILINE)
        if normalize(name) in STACK:
            stack[normalize(name)] = identity(distribution)
    print(json.dumps({
        "probe": "stack",
        "python": "%d.%d.%d" % sys.version_info[:3],
        "machine": platform.machine(),
        "distributions": visible,
        "wheel_tags": wheel_tags,
        "stack": stack,
    }))


if __name__ == "__main__":
    main()
