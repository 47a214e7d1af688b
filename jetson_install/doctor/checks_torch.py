"""torch imports, is the vendor CUDA build, sees the device, has kernels for it, and computes right."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence, Tuple

from packaging.specifiers import InvalidSpecifier
from packaging.version import InvalidVersion, Version

from jetson_install.doctor.checks_kernels import kernels_ran_correctly
from jetson_install.doctor.context import Context, package_index_cpu_build, uv_command
from jetson_install.doctor.missing_libraries import MissingLibrary, missing_library
from jetson_install.doctor.results import FAIL, NOT_APPLICABLE, OK, WARN, Verdict
from jetson_install.envs.record import EnvironmentRecord, read_record
from jetson_install.base.versions import satisfies


# --------------------------------------------------------------------------- results



def torch_missing_library(ctx: Context) -> Optional[MissingLibrary]:
    """The shared library `import torch` could not load, if that is why it failed."""
    section = ctx.torch.section("torch") or {}
    if section.get("imported", True) or not section.get("error"):
        return None
    cuda = (ctx.platform.cuda if ctx.platform is not None else None) or (
        ctx.channel.cuda if ctx.channel is not None else None
    )
    return missing_library(section["error"], cuda, ctx.python, uv_command())


def _missing_library_fix(ctx: Context, error: str) -> str:
    lowered = error.lower()
    missing = torch_missing_library(ctx)
    if missing is not None and missing.fix:
        return missing.fix
    if "libcudnn" in lowered:
        # JP 6.0 wheels (cuDNN 8) fail on JP 6.1/6.2 (cuDNN 9.3)
        # (https://github.com/YeQiao/pytorch-jetson-orin-nano, README).
        return "this torch was built for another cuDNN than JetPack's; install the channel's torch: " + (
            ctx.torch_install_fix()
        )
    if "numpy" in lowered:
        return ctx.numpy_fix()
    return ctx.torch_install_fix()


def check_torch_import(ctx: Context) -> Verdict:
    section = ctx.torch.section("torch")
    if section is None:
        return FAIL, ctx.torch.failure(), ctx.torch_install_fix()
    if not section["imported"]:
        missing = torch_missing_library(ctx)
        provider = ""
        if missing is not None and missing.provided_by:
            installer, package = missing.provided_by.split(": ", 1)
            noun = "packages" if " " in package else "package"
            provider = f"; {missing.file} comes from the {installer} {noun} {package}"
        return FAIL, f"import torch failed: {section['error']}{provider}", _missing_library_fix(ctx, section["error"])
    return OK, f"torch {section['version']} imports", None


def check_torch_build(ctx: Context) -> Verdict:
    section = ctx.torch.section("torch") or {}
    raw, cuda = section.get("version", ""), section.get("cuda")
    try:
        version = Version(raw)
    except InvalidVersion:
        return FAIL, f"torch reports an unparseable version {raw!r}", ctx.torch_install_fix()
    # An environment jetson-install made records what it installed: a same-version swap
    # (pip --force-reinstall, uv --reinstall) shows as another wheel tag or RECORD.
    environment = Path(ctx.python).parent.parent
    record = read_record(environment)
    if record is not None:
        # torch's family; bitsandbytes' build is judged by its own check (bnb-library).
        changed = changed_builds(record, environment, [name for name in record.installed if name != "bitsandbytes"])
        if changed is not None:
            return changed
        if record.torch_cuda and cuda != record.torch_cuda:
            return (FAIL, f"torch {raw} reports CUDA {cuda}, the installed build {record.torch_cuda}",
                    _repair(record))
    own = ctx.profile.torch_build(ctx, raw, cuda)
    if own is not None:
        return own
    if package_index_cpu_build(raw):
        return (FAIL, f"torch {raw} is the package index's CPU-only build (+cpu; torch.version.cuda is {cuda}), not "
                      "a vendor build: a plain pip or uv install took it", ctx.torch_wrong_build_fix(raw))
    if (version.local and "cpu" in version.local) or not cuda:
        return FAIL, f"torch {raw} is a CPU-only build (torch.version.cuda is {cuda})", ctx.torch_wrong_build_fix(raw)
    if section.get("cuda_built") is False:
        return (FAIL, f"torch {raw} names CUDA {cuda} but has no CUDA compiled in "
                      "(torch.backends.cuda.is_built() is False)", ctx.torch_wrong_build_fix(raw))
    pin = ctx.source.pins.get("torch") if ctx.source is not None else None
    if pin:
        try:
            pinned = satisfies(raw, f"=={pin}")
        except InvalidSpecifier:
            return FAIL, f"the channel's torch pin {pin!r} is not a version", "fix the torch pin in wheels-index.toml"
        if not pinned:
            return FAIL, f"torch {raw} is not the vendor build ({pin})", ctx.torch_install_fix()
    expected_cuda = ctx.expected_cuda
    # A recorded build may bring its own CUDA runtime (JetPack 7.2 on Orin: CUDA 12.9 wheels
    # on a CUDA 13.2 system); it was compared with the record above, and the kernels decide.
    if record is None and expected_cuda and cuda.split(".")[0] != expected_cuda.split(".")[0]:
        return (
            FAIL,
            f"torch {raw} is built for CUDA {cuda}, the platform has CUDA {expected_cuda}",
            ctx.torch_wrong_build_fix(raw),
        )
    against = f", pin {pin}" if pin else ""
    if record is not None:
        torch = record.resolution.file("torch")
        against = f", the installed build {torch.file if torch and torch.file else record.resolution.set_name}"
    return OK, f"torch {raw}, CUDA {cuda}{against}", None


def changed_builds(record: EnvironmentRecord, environment: Path, names: Sequence[str]) -> Optional[Verdict]:
    """A failure naming each of the recorded vendor builds `names` the environment no longer
    holds as installed, with the re-run that rebuilds it; None when they are intact."""
    changed = record.differences(environment, names)
    if not changed:
        return None
    return FAIL, f"not the installed vendor build: {'; '.join(changed)}", _repair(record)


def _repair(record: EnvironmentRecord) -> str:
    """A re-run builds a new environment from the recorded builds (the uv cache has them) and switches to it."""
    return f"{record.repair or 'jetson-install obliteratus'} (rebuilds the environment with the recorded vendor builds)"


def check_cuda_available(ctx: Context) -> Verdict:
    unchecked = ctx.profile.gpu_unchecked()
    if unchecked is not None:
        return NOT_APPLICABLE, unchecked, None
    section = ctx.torch.section("cuda")
    if section is None:
        return FAIL, ctx.torch.failure(), ctx.torch_install_fix()
    if section.get("error"):
        return FAIL, f"CUDA query failed: {section['error']}", ctx.torch_install_fix()
    if not section["available"] or section["device_count"] < 1:
        torch_cuda = (ctx.torch.section("torch") or {}).get("cuda")
        if not torch_cuda:
            version = (ctx.torch.section("torch") or {}).get("version", "")
            return (FAIL, "torch.cuda.is_available() is False: torch is a CPU-only build",
                    ctx.torch_wrong_build_fix(version))
        return (
            FAIL,
            f"torch is built for CUDA {torch_cuda} but sees {section['device_count']} device(s)",
            "check that this user can open the GPU (on Jetson: /dev/nvhost-* and membership of the video group;"
            " elsewhere: nvidia-smi) and that CUDA_VISIBLE_DEVICES does not hide it",
        )
    memory_gib = section["total_memory_bytes"] / 2**30
    capability = ".".join(str(part) for part in section["capability"])
    return OK, f"{section['device_name']}, compute capability {capability}, {memory_gib:.1f} GiB", None


_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


def arch_support(capability: Tuple[int, int], arch_list: Sequence[str], tegra: bool) -> Tuple[bool, str]:
    """Whether a torch built for arch_list has code that runs on this device, and how."""
    device = capability[0] * 10 + capability[1]
    binary_compatible = []
    for arch in arch_list:
        match = _ARCH.match(arch)
        if not match:
            continue
        kind, number, variant = match.group(1), int(match.group(2)), match.group(3)
        if kind == "sm" and number == device:
            return True, f"{arch} in the arch list"
        # PTX JIT-compiles for equal or higher capabilities; arch-specific PTX (compute_90a) runs
        # on that exact architecture only (CUDA C++ Programming Guide, "Binary Compatibility" and
        # "PTX Compatibility": https://docs.nvidia.com/cuda/cuda-c-programming-guide/).
        if kind == "compute" and (number == device or (number < device and not variant)):
            return True, f"{arch} PTX, JIT-compiled for sm_{device}"
        if kind == "sm" and not variant and number // 10 == device // 10 and number < device:
            binary_compatible.append(arch)
    if binary_compatible and not tegra:
        return True, f"{binary_compatible[-1]} cubins run on sm_{device} (same major)"
    # "Binary compatibility is supported only for the desktop. It is not supported for Tegra."
    # (CUDA C++ Programming Guide, quoted in https://github.com/jax-ml/jax/pull/40492)
    return False, f"no sm_{device} kernels or usable PTX in {' '.join(arch_list) or 'an empty arch list'}"


def check_cuda_arch(ctx: Context) -> Verdict:
    section = ctx.torch.section("cuda") or {}
    supported, detail = arch_support(ctx.capability or (0, 0), section.get("arch_list", []), ctx.tegra)
    if supported:
        return OK, detail, None
    ran = kernels_ran_correctly(ctx)
    if ran:
        # Reports disagree on whether Orin runs sm_80 cubins (it did for the CUDA 13 builds in
        # https://github.com/nvidia-holoscan/holohub/pull/1687; not in https://github.com/jax-ml/jax/pull/40492),
        # so the kernels decide, and kernels beyond those tried may still lack code.
        device = f"sm_{ctx.capability[0]}{ctx.capability[1]}" if ctx.capability else "the device"
        return (
            WARN,
            f"{detail}, yet {ran} ran correctly on {device} through code built for other devices",
            f"none needed while these kernels pass; other kernels may lack {device} code,"
            " so run `jetson-install doctor` again after any torch change",
        )
    # No official aarch64 torch build carries sm_87: "Ampere(8.0), Hopper(9.0), Blackwell(...)"
    # (RELEASE.md, https://github.com/pytorch/pytorch/pull/182849).
    return FAIL, detail, ctx.torch_install_fix()


def check_cuda_matmul(ctx: Context) -> Verdict:
    section = ctx.torch.section("matmul")
    if section is None:
        return FAIL, ctx.torch.failure(), ctx.torch_install_fix()
    if section.get("error"):
        return FAIL, f"a 128x128 matmul on cuda failed: {section['error']}", ctx.torch_install_fix()
    if not section["finite"]:
        return FAIL, "a 128x128 matmul on cuda gave non-finite numbers", ctx.torch_install_fix()
    error = section["max_abs_error"]
    if not section["allclose"]:
        return FAIL, f"a 128x128 matmul on cuda differs from the CPU by up to {error:.3g}", ctx.torch_install_fix()
    return OK, f"128x128 float32 matmul on cuda matches the CPU (max |error| {error:.2g})", None


def check_numpy(ctx: Context) -> Verdict:
    section = ctx.torch.section("numpy")
    if section is None:
        return FAIL, ctx.torch.failure(), ctx.numpy_fix()
    torch_section = ctx.torch.section("torch") or {}
    # "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.x"
    # (https://github.com/dusty-nv/jetson-containers/issues/1537).
    numpy_trouble = [w for w in torch_section.get("import_warnings", []) if "numpy" in w.lower()]
    if numpy_trouble:
        return FAIL, f"torch warns at import: {numpy_trouble[0]}", ctx.numpy_fix()
    spec = ctx.source.numpy if ctx.source is not None else None
    if section.get("error"):
        if spec:
            return FAIL, f"NumPy does not import: {section['error']}", ctx.numpy_fix()
        return WARN, f"NumPy does not import: {section['error']}", ctx.numpy_fix()
    raw = section["version"]
    if not spec:
        return OK, f"NumPy {raw} (the channel sets no NumPy bound)", None
    try:
        matches = satisfies(raw, spec)
    except (InvalidVersion, InvalidSpecifier):
        return FAIL, f"cannot compare NumPy {raw!r} with {spec!r}", ctx.numpy_fix()
    if not matches:
        return FAIL, f"NumPy {raw}, but the vendor torch needs numpy{spec}", ctx.numpy_fix()
    return OK, f"NumPy {raw} satisfies numpy{spec}", None
