"""Whether the environment's Triton can assemble code for the board's GPU, without a GPU and
without importing torch or Triton (standalone; stdlib only; Python 3.8+).

    python assembler_probe.py --capability 110 [--candidate /usr/local/cuda/bin/ptxas]

torch.compile's GPU code goes through Triton, which hands its PTX to a `ptxas` it ships; one
that does not know the board's architecture fails every compiled kernel there
("ptxas fatal : Value 'sm_110a' is not defined": https://github.com/pytorch/pytorch/issues/170117).
This probe picks the assembler as the installed Triton does and assembles a trivial kernel
for the architecture with it; `--candidate` tries another assembler (the board's CUDA's) the
same way, for the install to point Triton at when Triton's own cannot.

Prints one JSON line: {"probe": "assembler", "triton": {...}, "assembler": {...}, "candidate": {...}}.
"""

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

# How Triton chooses, as triton/backends/nvidia/compiler.py and triton/knobs.py of Triton 3.7
# say (https://github.com/triton-lang/triton, third_party/nvidia/backend/compiler.py): the
# Blackwell assembler from capability 10.0 on, each overridable by its environment variable
# (the default is used where the variable's program does not answer `--version`), and the
# architecture suffix "a" from 9.0 on.
BLACKWELL = 100
TOOLS = {"ptxas": "TRITON_PTXAS_PATH", "ptxas-blackwell": "TRITON_PTXAS_BLACKWELL_PATH"}
RELEASE = re.compile(r".*release (\d+\.\d+).*", re.MULTILINE)
TIMEOUT = 120


def architecture(capability):
    return "sm_%d%s" % (capability, "a" if capability >= 90 else "")


def ptx_version(release):
    """The PTX ISA version Triton writes for an assembler of this CUDA release (its ptx_get_version)."""
    major, minor = (int(part) for part in release.split("."))
    if major >= 13:
        return 90 + (major - 13) * 10 + minor
    if major == 12:
        return 80 + minor - (1 if minor >= 6 else 0)
    if major == 11:
        return 70 + minor
    return 63 + minor


def triton_package():
    """Triton's version and folder, found without running its __init__ (which imports a compiler)."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {"installed": False}
    folder = next(iter(spec.submodule_search_locations))
    version = None
    try:
        from importlib import metadata

        version = metadata.version("triton")
    except Exception:  # a Triton without metadata (a source checkout) still assembles
        pass
    return {"installed": True, "version": version, "folder": folder}


def release_of(path):
    try:
        answer = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    found = RELEASE.search(answer.stdout.decode("utf-8", "replace"))
    return found.group(1) if answer.returncode == 0 and found else None


def chosen_tool(folder, capability):
    """The assembler Triton would run for `capability`: its name, the variable that overrides
    it, and the path and release it takes (None where neither answers)."""
    name = "ptxas-blackwell" if capability >= BLACKWELL else "ptxas"
    default = os.path.join(folder, "backends", "nvidia", "bin", name)
    if name == "ptxas-blackwell" and not os.path.exists(default):
        # Tritons before the Blackwell assembler (3.4 and older) ran their one ptxas for every GPU.
        name = "ptxas"
        default = os.path.join(folder, "backends", "nvidia", "bin", name)
    variable = TOOLS[name]
    override = os.environ.get(variable)
    for path in ([override] if override else []) + [default]:
        release = release_of(path)
        if release is not None:
            return {"name": name, "variable": variable, "override": override, "path": path, "release": release}
    return {"name": name, "variable": variable, "override": override, "path": default, "release": None}


def assemble(path, release, capability):
    """Assemble a kernel that only returns, as Triton would: its PTX version, its --gpu-name."""
    arch = architecture(capability)
    result = {"path": path, "release": release, "arch": arch, "assembled": False, "error": None}
    if release is None:
        result["error"] = "%s does not run or does not answer --version with its CUDA release" % path
        return result
    version = ptx_version(release)
    source = (".version %d.%d\n.target %s\n.address_size 64\n\n.visible .entry jetson_install_probe()\n{\n"
              "\tret;\n}\n") % (version // 10, version % 10, arch)
    folder = tempfile.mkdtemp(prefix="jetson-install-ptx-")
    ptx, cubin = os.path.join(folder, "probe.ptx"), os.path.join(folder, "probe.cubin")
    try:
        with open(ptx, "w") as handle:
            handle.write(source)
        answer = subprocess.run([path, "--gpu-name=%s" % arch, ptx, "-o", cubin], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=TIMEOUT)
        lines = [line.strip() for line in answer.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
        if answer.returncode == 0 and os.path.isfile(cubin):
            result["assembled"] = True
        else:
            result["error"] = lines[-1] if lines else "exit %d" % answer.returncode
    except (OSError, subprocess.SubprocessError) as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        for leftover in (ptx, cubin):
            if os.path.exists(leftover):
                os.remove(leftover)
        os.rmdir(folder)
    return result


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--capability", type=int, required=True, help="the GPU's compute capability: 87, 110")
    parser.add_argument("--candidate", help="another assembler to try for the same architecture")
    options = parser.parse_args(argv)
    report = {"probe": "assembler", "capability": options.capability, "triton": triton_package()}
    if report["triton"]["installed"]:
        tool = chosen_tool(report["triton"]["folder"], options.capability)
        report["assembler"] = dict(assemble(tool["path"], tool["release"], options.capability),
                                   name=tool["name"], variable=tool["variable"], override=tool["override"])
        if options.candidate:
            report["candidate"] = (assemble(options.candidate, release_of(options.candidate), options.capability)
                                   if os.path.exists(options.candidate)
                                   else {"path": options.candidate, "assembled": False, "error": "not found"})
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
