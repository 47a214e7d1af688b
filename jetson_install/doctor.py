"""jetson-install doctor: prove that torch.cuda and bitsandbytes run CUDA kernels in an environment.

Read-only. The facts come from two probe scripts run by the *target*
interpreter (jetson_install/probes/), one for everything torch and one for
bitsandbytes, in separate processes because a bitsandbytes kernel fault calls
exit(1) (shared/reference/obliteratus-and-bitsandbytes.md §3.1). They run
concurrently with ``uv pip check`` so that doctor costs about one
``import torch, bitsandbytes``. Every check becomes one result; a probe that
crashes or hangs turns its checks into failures carrying its last stderr line,
and doctor itself never raises except for input it cannot act on.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.specifiers import InvalidSpecifier
from packaging.version import InvalidVersion, Version

from jetson_install import __version__, runner
from jetson_install.errors import EXIT_FAILED, EXIT_OK, BadInput
from jetson_install.versions import satisfies

if TYPE_CHECKING:
    from jetson_install.catalog import Channel, VendorSource
    from jetson_install.platform import Platform

__all__ = [
    "SCHEMA_VERSION",
    "CHECKS",
    "CheckSpec",
    "CheckResult",
    "DoctorReport",
    "list_checks",
    "run_doctor",
    "render_lines",
    "evidence_schema",
]

SCHEMA_VERSION = 1
OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
STATUS_MARKS = {OK: "✓", WARN: "!", FAIL: "✗", SKIP: "-"}

PROBES_DIR = Path(__file__).parent / "probes"
SCHEMA_PATH = Path(__file__).parent / "evidence.schema.json"

# Compute capabilities that only Jetson iGPUs have: Nano/TX1, TX2, Xavier, Orin
# (platform-detection.md §5.1).
TEGRA_CAPABILITIES = frozenset({(5, 3), (6, 2), (7, 2), (8, 7)})


def uv_command() -> str:
    """uv as a fix should spell it: the binary jetson-install ships (a pipx install keeps it
    off PATH), or plain `uv` where that cannot be found."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return "uv"

# A shared library missing at `import torch` -> the apt package that provides it
# (shared/reference/torch-indexes.md §1.4 and §6.14).
MISSING_LIBRARY_PACKAGES = (
    ("libopenblas", "sudo apt-get install libopenblas-dev"),
    # libcusparselt0 comes from NVIDIA's cuda-keyring apt repository (torch-indexes.md §1.4).
    ("libcusparselt", "sudo apt-get install libcusparselt0 libcusparselt-dev"),
    ("libomp", "sudo apt-get install libomp-dev"),
)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: Optional[str]
    required: bool

    def to_json(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "required": self.required,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class DoctorReport:
    python: str
    generated_at: str
    platform: Mapping[str, Optional[str]]
    torch: Mapping[str, Any]
    bitsandbytes: Mapping[str, Any]
    checks: Tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        # Warnings and skips never fail the run (installers-and-uv.md §5, "Conventions" 4).
        return not any(check.required and check.status == FAIL for check in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_FAILED

    def check(self, check_id: str) -> CheckResult:
        for result in self.checks:
            if result.id == check_id:
                return result
        raise KeyError(check_id)

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "generated_at": self.generated_at,
            "tool_version": __version__,
            "platform": dict(self.platform),
            "torch": dict(self.torch),
            "bitsandbytes": dict(self.bitsandbytes),
            "checks": [check.to_json() for check in self.checks],
            "status": "passed" if self.passed else "failed",
        }


def render_lines(report: DoctorReport) -> List[str]:
    """One line per check with its status mark, the fix indented under it, then a summary line."""
    lines = []
    for check in report.checks:
        lines.append(f"{STATUS_MARKS[check.status]} {check.title} [{check.id}]: {check.detail}")
        if check.status != OK and check.fix:
            lines.append(f"    fix: {check.fix}")
    counts = {status: sum(1 for c in report.checks if c.status == status) for status in STATUS_MARKS}
    tally = f"{counts[OK]} ok, {counts[WARN]} warning(s), {counts[FAIL]} failed, {counts[SKIP]} skipped"
    if report.passed:
        lines.append(f"All required checks passed ({tally}).")
    else:
        failed = [c.id for c in report.checks if c.required and c.status == FAIL]
        lines.append(f"Doctor found problems in {len(failed)} required check(s): {', '.join(failed)} ({tally}).")
    return lines


def evidence_schema() -> Dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- probes


@dataclass(frozen=True)
class ProbeOutcome:
    """The last JSON line a probe printed, and how its process ended."""

    name: str
    data: Mapping[str, Any]
    completed: Optional[runner.Completed]  # None: the probe was not needed for the selected checks

    @property
    def finished(self) -> bool:
        return self.completed is not None and self.completed.ok and bool(self.data.get("complete"))

    def section(self, key: str) -> Optional[Mapping[str, Any]]:
        """A section the probe finished writing, or None when it never got there or died in it."""
        value = self.data.get(key)
        if isinstance(value, dict) and value.get("done", True):
            return value
        return None

    def failure(self) -> str:
        """Why the probe's findings are missing, ending with its last stderr line."""
        completed = self.completed
        if completed is None:
            return f"the {self.name} probe did not run"
        last = completed.last_stderr_line() or "no output on stderr"
        if completed.timed_out:
            return f"the {self.name} probe timed out: {last}"
        if completed.returncode != 0:
            return f"the {self.name} probe exited {completed.returncode}: {last}"
        return f"the {self.name} probe printed no findings: {last}"


def _run_probe(python: str, name: str, script: str, timeout: float) -> ProbeOutcome:
    completed = runner.run([python, str(PROBES_DIR / script)], timeout=timeout)
    return ProbeOutcome(name, _last_json_object(completed.stdout, name), completed)


def _last_json_object(stdout: str, probe: str) -> Dict[str, Any]:
    """The probe's last report line; other JSON a library prints on stdout is not it."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and value.get("probe") == probe:
                return value
    return {}


def _run_pip_check(python: str) -> runner.Completed:
    # jetson_install.uv is looked up at call time so that tests can replace it.
    uv = importlib.import_module("jetson_install.uv")
    return uv.pip_check(python)


# --------------------------------------------------------------------------- check context


@dataclass(frozen=True)
class Context:
    python: str
    platform: Optional["Platform"]
    channel: Optional["Channel"]
    vendor: Optional["VendorSource"]  # what the install took; None: the channel's first source
    torch: ProbeOutcome
    bnb: ProbeOutcome
    pip_check: Optional[runner.Completed]

    @property
    def capability(self) -> Optional[Tuple[int, int]]:
        cuda = self.torch.section("cuda") or {}
        value = cuda.get("capability") or self.bnb.data.get("capability")
        return (int(value[0]), int(value[1])) if value else None

    @property
    def capability_digits(self) -> str:
        """"87" for an Orin; what bitsandbytes' source build wants as COMPUTE_CAPABILITY."""
        if self.capability:
            return f"{self.capability[0]}{self.capability[1]}"
        if self.platform is not None and self.platform.compute_capability:
            return self.platform.compute_capability.replace(".", "")
        return "<XY>"

    @property
    def tegra(self) -> bool:
        # These capabilities exist only on Jetson iGPUs (platform-detection.md §5.1), so they
        # count as Tegra even where the platform was not detected (a container, a bare root).
        if self.capability in TEGRA_CAPABILITIES:
            return True
        return self.platform is not None and self.platform.jetson and self.platform.kind != "sbsa"

    @property
    def source(self) -> Optional["VendorSource"]:
        if self.vendor is not None:
            return self.vendor
        return self.channel.primary if self.channel is not None else None

    def vendor_install(self, package: str) -> Optional[str]:
        """The uv command (re)installing the vendor build of package, if the source has one."""
        source = self.source
        if source is None:
            return None
        # --no-deps: the vendor source may supply nothing but the vendor build itself;
        # --reinstall-package: a wrong build of the same version otherwise counts as satisfied.
        flags = " ".join(("--python", self.python, "--no-deps", "--reinstall-package", package))
        pin = source.pins.get(package)
        if source.index and pin:
            return f'{uv_command()} pip install {flags} --default-index {source.index} "{package}=={pin}"'
        # Direct wheel URLs: the file name starts with the distribution name and a dash.
        for url in source.wheels:
            if url.rsplit("/", 1)[-1].startswith(package + "-"):
                return f"{uv_command()} pip install {flags} {url}"
        return None

    def torch_install_fix(self) -> str:
        command = self.vendor_install("torch")
        if command:
            return f"{command} (channel {self.channel.id})"
        if self.platform is not None and self.platform.jetson:
            return "install the JetPack torch wheel for this L4T (a Jetson AI Lab or NVIDIA redist build), not PyPI's"
        return "install a CUDA build of torch that matches this machine's driver, not a CPU-only one"

    def bnb_install_fix(self) -> str:
        if not self.tegra:
            return f"{uv_command()} pip install --python {self.python} --no-deps --reinstall-package bitsandbytes bitsandbytes"
        # PyPI's aarch64 wheels are SBSA builds without sm_87/sm_72; build on the device with
        # the exact capability (obliteratus-and-bitsandbytes.md §3.3, §4.7-4.8).
        build = (
            "build it on the device: git clone https://github.com/bitsandbytes-foundation/bitsandbytes"
            f" && cd bitsandbytes && cmake -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY={self.capability_digits} -S ."
            f" && make -j4 && {uv_command()} pip install --python {self.python} --no-deps ."
        )
        vendor = self.vendor_install("bitsandbytes")
        return f"{vendor}; or {build}" if vendor else build

    def numpy_fix(self) -> str:
        source = self.source
        spec = source.numpy if source is not None and source.numpy else "<2"
        return f'{uv_command()} pip install --python {self.python} "numpy{spec}"'


Verdict = Tuple[str, str, Optional[str]]  # status, detail, fix
Evaluator = Callable[[Context], Verdict]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    required: bool
    probe: str  # "host" | "torch" | "bitsandbytes" | "uv": what must run for the check
    evaluate: Evaluator = field(repr=False, compare=False)
    needs: Tuple[str, ...] = ()  # checks that must be ok (or warn) for this one to mean anything


# --------------------------------------------------------------------------- platform checks


def check_platform(ctx: Context) -> Verdict:
    platform = ctx.platform
    fix = "run doctor on the Jetson itself; detection reads /etc/nv_tegra_release and the device tree"
    if platform is None:
        return WARN, "platform not detected: not a Jetson", fix
    if not platform.jetson:
        return WARN, f"not a Jetson ({platform.arch or 'unknown arch'}); Jetson facts are not checked", fix
    name = platform.module or platform.family or platform.soc or "Jetson"
    found = f"{name}, L4T {platform.l4t}, JetPack {platform.jetpack}, CUDA {platform.cuda}"
    if ctx.channel is not None and not ctx.channel.installable:
        return WARN, f"{found}: channel {ctx.channel.id} is unsupported: {ctx.channel.reason}", ctx.channel.remedy
    return OK, found, None


def check_python_abi(ctx: Context) -> Verdict:
    section = ctx.torch.section("python")
    if section is None:
        return FAIL, ctx.torch.failure(), f"check that {ctx.python} runs: {ctx.python} -c 'import sys'"
    version = section["version"]
    if ctx.channel is None or not ctx.channel.installable:
        return SKIP, f"Python {version}; no supported channel to compare with", None
    major_minor = ".".join(version.split(".")[:2])
    if major_minor == ctx.channel.python:
        return OK, f"Python {version} matches channel {ctx.channel.id} (cp{ctx.channel.python.replace('.', '')})", None
    return (
        FAIL,
        f"Python {version}, but channel {ctx.channel.id} wheels are built for Python {ctx.channel.python}",
        f"make a new environment with the channel's Python: jetson-install obliteratus"
        f" --python /usr/bin/python{ctx.channel.python}",
    )


# --------------------------------------------------------------------------- torch checks


def _missing_library_fix(ctx: Context, error: str) -> str:
    lowered = error.lower()
    for library, fix in MISSING_LIBRARY_PACKAGES:
        if library in lowered:
            return fix
    if "libcudnn" in lowered:
        # JP 6.0 wheels (cuDNN 8) fail on JP 6.1/6.2 (cuDNN 9.3) (torch-indexes.md §1.4).
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
        return FAIL, f"import torch failed: {section['error']}", _missing_library_fix(ctx, section["error"])
    return OK, f"torch {section['version']} imports", None


def check_torch_build(ctx: Context) -> Verdict:
    section = ctx.torch.section("torch") or {}
    raw, cuda = section.get("version", ""), section.get("cuda")
    try:
        version = Version(raw)
    except InvalidVersion:
        return FAIL, f"torch reports an unparseable version {raw!r}", ctx.torch_install_fix()
    if (version.local and "cpu" in version.local) or not cuda:
        return FAIL, f"torch {raw} is a CPU-only build (torch.version.cuda is {cuda})", ctx.torch_install_fix()
    pin = ctx.source.pins.get("torch") if ctx.source is not None else None
    if pin:
        try:
            pinned = satisfies(raw, f"=={pin}")
        except InvalidSpecifier:
            return FAIL, f"the channel's torch pin {pin!r} is not a version", "fix the torch pin in wheels-index.toml"
        if not pinned:
            return FAIL, f"torch {raw} is not the vendor build ({pin})", ctx.torch_install_fix()
    expected_cuda = (ctx.platform.cuda if ctx.platform is not None else None) or (
        ctx.channel.cuda if ctx.channel is not None else None
    )
    if expected_cuda and cuda.split(".")[0] != expected_cuda.split(".")[0]:
        return (
            FAIL,
            f"torch {raw} is built for CUDA {cuda}, the platform has CUDA {expected_cuda}",
            ctx.torch_install_fix(),
        )
    against = f", pin {pin}" if pin else ""
    return OK, f"torch {raw}, CUDA {cuda}{against}", None


def check_cuda_available(ctx: Context) -> Verdict:
    section = ctx.torch.section("cuda")
    if section is None:
        return FAIL, ctx.torch.failure(), ctx.torch_install_fix()
    if section.get("error"):
        return FAIL, f"CUDA query failed: {section['error']}", ctx.torch_install_fix()
    if not section["available"] or section["device_count"] < 1:
        torch_cuda = (ctx.torch.section("torch") or {}).get("cuda")
        if not torch_cuda:
            return FAIL, "torch.cuda.is_available() is False: torch is a CPU-only build", ctx.torch_install_fix()
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
        # PTX JIT targets equal or higher capabilities (obliteratus-and-bitsandbytes.md §3.2);
        # arch-specific PTX (compute_90a) runs on that exact architecture only.
        if kind == "compute" and (number == device or (number < device and not variant)):
            return True, f"{arch} PTX, JIT-compiled for sm_{device}"
        if kind == "sm" and not variant and number // 10 == device // 10 and number < device:
            binary_compatible.append(arch)
    if binary_compatible and not tegra:
        return True, f"{binary_compatible[-1]} cubins run on sm_{device} (same major)"
    # "Binary compatibility is supported only for the desktop. It is not supported for Tegra."
    # (obliteratus-and-bitsandbytes.md §3.3, jax#40492)
    return False, f"no sm_{device} kernels or usable PTX in {' '.join(arch_list) or 'an empty arch list'}"


def check_cuda_arch(ctx: Context) -> Verdict:
    section = ctx.torch.section("cuda") or {}
    supported, detail = arch_support(ctx.capability or (0, 0), section.get("arch_list", []), ctx.tegra)
    if supported:
        return OK, detail, None
    # No PyPI aarch64 torch carries sm_87 (torch-indexes.md §6.7).
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
    # "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.x" (torch-indexes.md §5).
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


def check_obliteratus(ctx: Context) -> Verdict:
    section = ctx.torch.section("obliteratus")
    # Reinstalling through jetson-install keeps the pinned tag and the vendor constraints.
    install = f"jetson-install obliteratus --venv {Path(ctx.python).parent.parent}"
    if section is None:
        return FAIL, ctx.torch.failure(), install
    if not section["imported"]:
        return FAIL, f"OBLITERATUS does not import: {section['error']}", install
    if section.get("error"):
        return FAIL, f"obliteratus.device.get_device('auto') failed: {section['error']}", install
    if section["device"] != "cuda":
        # OBLITERATUS only asks torch.cuda.is_available() (obliteratus-and-bitsandbytes.md §1.5).
        return (
            FAIL,
            f"obliteratus.device.get_device('auto') answers {section['device']!r}, not 'cuda'",
            "make torch see the GPU first (see the cuda-available check)",
        )
    return OK, "OBLITERATUS imports; get_device('auto') answers 'cuda'", None


# --------------------------------------------------------------------------- bitsandbytes checks


def check_bnb_library(ctx: Context) -> Verdict:
    source = ctx.source
    if ctx.channel is not None and source is not None and "bitsandbytes" not in source.pins:
        return SKIP, (f"no Jetson bitsandbytes build for channel {ctx.channel.id}: OBLITERATUS is installed "
                      "without its quantization extra"), None
    data = ctx.bnb.data
    if data.get("import_error"):
        error = data["import_error"]
        if error.startswith("torch:"):
            return FAIL, f"bitsandbytes needs torch, which does not import ({error})", "fix the torch-import check first"
        return FAIL, f"import bitsandbytes failed: {error}", ctx.bnb_install_fix()
    library = data.get("library")
    if not library:
        return FAIL, ctx.bnb.failure(), ctx.bnb_install_fix()
    backend = data.get("backend")
    version = data.get("version")
    if backend != "CUDA":
        # bitsandbytes picks its library from torch (obliteratus-and-bitsandbytes.md §3.1); with
        # a torch that sees no CUDA even a good build loads its CPU library or a mock.
        detail = f"bitsandbytes {version} loaded {library.get('file') or library.get('class')} (backend {backend})"
        return FAIL, detail + ": torch sees no CUDA", "fix the torch checks first (cuda-available)"
    # CudaBNBNativeLibrary means the CUDA library loaded; BNBNativeLibrary is the CPU one and
    # ErrorHandlerMockBNBNativeLibrary a failed load (obliteratus-and-bitsandbytes.md §3.5).
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


def _kernel_fault_fix(ctx: Context, message: str) -> str:
    if "named symbol not found" in message:
        # The PyPI aarch64 wheel is an SBSA build (obliteratus-and-bitsandbytes.md §3.3).
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
            # A kernel fault prints "Error ... ops.cu" and exits 1 (obliteratus-and-bitsandbytes.md §3.1).
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
    return _kernel_verdict(ctx, ("nf4", "linear4bit"))


def check_bnb_int8(ctx: Context) -> Verdict:
    capability = ctx.capability
    # LLM.int8() needs compute capability 7.5+ (obliteratus-and-bitsandbytes.md §3.2, §3.5).
    if capability is not None and capability < (7, 5):
        return SKIP, f"compute capability {capability[0]}.{capability[1]} < 7.5: LLM.int8() is not supported", None
    return _kernel_verdict(ctx, ("int8",))


# --------------------------------------------------------------------------- uv pip check


def check_pip(ctx: Context) -> Verdict:
    completed = ctx.pip_check
    if completed is None:
        return FAIL, "uv pip check did not run", f"uv pip check --python {ctx.python}"
    if completed.ok:
        return OK, "uv pip check: no broken requirements", None
    if completed.timed_out or completed.returncode == 127:
        return FAIL, f"uv pip check could not run: {completed.last_stderr_line()}", "install uv: pip install 'uv>=0.13'"
    problems = [
        line.strip()
        for line in (completed.stdout + "\n" + completed.stderr).splitlines()
        if line.strip() and not line.strip().startswith(("Checked", "Using", "Found"))
    ]
    first = problems[0] if problems else f"exit {completed.returncode}"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        FAIL,
        f"uv pip check: {first}{more}",
        f"run `uv pip check --python {ctx.python}` and install what it names with --no-deps,"
        " keeping the channel's torch (never let a resolver replace it)",
    )


# --------------------------------------------------------------------------- registry and runner

CHECKS: Tuple[CheckSpec, ...] = (
    CheckSpec("platform", "Jetson platform detected", True, "host", check_platform),
    CheckSpec("python-abi", "Python ABI matches the channel", True, "torch", check_python_abi),
    CheckSpec("torch-import", "torch imports", True, "torch", check_torch_import),
    CheckSpec("torch-build", "torch is the vendor CUDA build", True, "torch", check_torch_build, ("torch-import",)),
    CheckSpec("cuda-available", "torch sees a CUDA device", True, "torch", check_cuda_available, ("torch-import",)),
    CheckSpec("cuda-arch", "torch has kernels for the device", True, "torch", check_cuda_arch, ("cuda-available",)),
    CheckSpec("cuda-matmul", "a CUDA matmul is correct", True, "torch", check_cuda_matmul, ("cuda-available",)),
    CheckSpec("numpy", "NumPy version suits torch", True, "torch", check_numpy),
    CheckSpec("bnb-library", "bitsandbytes loaded its CUDA library", True, "bitsandbytes", check_bnb_library),
    CheckSpec(
        "bnb-kernels", "bitsandbytes NF4 kernels run", True, "bitsandbytes", check_bnb_kernels, ("bnb-library",)
    ),
    CheckSpec("bnb-int8", "bitsandbytes 8-bit matmul runs", True, "bitsandbytes", check_bnb_int8, ("bnb-library",)),
    CheckSpec("obliteratus", "OBLITERATUS uses cuda", True, "torch", check_obliteratus, ("torch-import",)),
    CheckSpec("pip-check", "uv pip check is clean", True, "uv", check_pip),
)
_BY_ID = {spec.id: spec for spec in CHECKS}


def list_checks() -> List[Tuple[str, str, bool]]:
    return [(spec.id, spec.title, spec.required) for spec in CHECKS]


def _with_prerequisites(only: Sequence[str]) -> List[CheckSpec]:
    unknown = [check_id for check_id in only if check_id not in _BY_ID]
    if unknown:
        raise BadInput(
            f"unknown doctor check {', '.join(unknown)}; known: {', '.join(_BY_ID)}",
            fix="jetson-install doctor --list-checks",
        )
    if not only:
        return list(CHECKS)
    # A check whose prerequisite failed is skipped; its prerequisite runs too, so the
    # failure that explains the skip is always in the report.
    wanted = set()
    pending = list(only)
    while pending:
        check_id = pending.pop()
        if check_id not in wanted:
            wanted.add(check_id)
            pending.extend(_BY_ID[check_id].needs)
    return [spec for spec in CHECKS if spec.id in wanted]


def _resolve_interpreter(python: str) -> str:
    # Absolute, so that fixes stay right after a `cd` (the bitsandbytes source build has one).
    found = os.path.abspath(python) if os.sep in python else shutil.which(python)
    if not found or not Path(found).is_file() or not os.access(found, os.X_OK):
        raise BadInput(
            f"no Python interpreter at {python}",
            fix="pass --python with the path of the environment's python, or --venv with an existing environment",
        )
    if not runner.run([found, "-c", "import sys"], timeout=60).ok:
        raise BadInput(f"{python} is not a working Python interpreter",
                       fix="pass --python with the path of the environment's python, or --venv with an existing environment")
    return found


def run_doctor(
    python: str,
    *,
    platform: Optional["Platform"],
    channel: Optional["Channel"],
    vendor: Optional["VendorSource"] = None,
    only: Sequence[str] = (),
    timeout: float = 300,
) -> DoctorReport:
    """Run the selected checks (all by default) against the environment of ``python``.

    Raises BadInput only when the interpreter does not exist or a check id is unknown.
    """
    interpreter = _resolve_interpreter(python)
    selected = _with_prerequisites(only)
    probes_needed = {spec.probe for spec in selected}
    with ThreadPoolExecutor(max_workers=3) as pool:
        torch_future = (
            pool.submit(_run_probe, interpreter, "torch", "torch_probe.py", timeout)
            if "torch" in probes_needed
            else None
        )
        bnb_future = (
            pool.submit(_run_probe, interpreter, "bitsandbytes", "bnb_probe.py", timeout)
            if "bitsandbytes" in probes_needed
            else None
        )
        pip_future = pool.submit(_safe_pip_check, interpreter) if "uv" in probes_needed else None
        ctx = Context(
            python=interpreter,
            platform=platform,
            channel=channel,
            vendor=vendor,
            torch=torch_future.result() if torch_future else ProbeOutcome("torch", {}, None),
            bnb=bnb_future.result() if bnb_future else ProbeOutcome("bitsandbytes", {}, None),
            pip_check=pip_future.result() if pip_future else None,
        )
    results: Dict[str, CheckResult] = {}
    for spec in selected:
        results[spec.id] = _evaluate(spec, ctx, results)
    return DoctorReport(
        python=interpreter,
        generated_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        platform=_guarded(_platform_evidence, ctx, ("l4t", "jetpack", "arch", "python", "kind")),
        torch=_guarded(_torch_evidence, ctx,
                       ("version", "cuda", "device_name", "total_memory_bytes", "capability", "arch_list")),
        bitsandbytes=_guarded(lambda c: _bnb_evidence(c, results), ctx, ("version", "backend", "library", "kernel_test")),
        checks=tuple(results.values()),
    )


def _guarded(build: Callable[[Context], Dict[str, Any]], ctx: Context, keys: Sequence[str]) -> Dict[str, Any]:
    """Evidence from probe output of an unexpected shape is left empty, never a crash; the
    checks over the same output already say what is wrong."""
    try:
        return build(ctx)
    except (AttributeError, KeyError, TypeError, ValueError):
        empty: Dict[str, Any] = dict.fromkeys(keys)
        if "arch_list" in empty:
            empty["arch_list"] = []
        if "kernel_test" in empty:
            empty["kernel_test"] = "not_run"
        return empty


def _safe_pip_check(python: str) -> runner.Completed:
    try:
        return _run_pip_check(python)
    except Exception as exc:  # a missing uv module or binary is a failed check, not a crash
        return runner.Completed(("uv", "pip", "check"), 127, "", f"{type(exc).__name__}: {exc}")


def _evaluate(spec: CheckSpec, ctx: Context, earlier: Mapping[str, CheckResult]) -> CheckResult:
    blockers = [earlier[need] for need in spec.needs if earlier[need].status in (FAIL, SKIP)]
    if blockers:
        status, detail, fix = SKIP, f"needs {blockers[0].id}, which did not pass", None
    else:
        try:
            status, detail, fix = spec.evaluate(ctx)
        except Exception as exc:  # a surprise in probe output must not take the other checks down
            status = FAIL
            detail = f"doctor could not evaluate this check: {type(exc).__name__}: {exc}"
            fix = "report this as a jetson-install bug, with `jetson-install doctor --json` attached"
    return CheckResult(spec.id, spec.title, status, detail, fix if status != OK else None, spec.required)


# --------------------------------------------------------------------------- evidence


def _platform_evidence(ctx: Context) -> Dict[str, Optional[str]]:
    platform = ctx.platform
    python = ctx.torch.section("python") or {}
    return {
        "l4t": str(platform.l4t) if platform is not None and platform.l4t is not None else None,
        "jetpack": platform.jetpack if platform is not None else None,
        "arch": (platform.arch if platform is not None else None) or python.get("machine"),
        "python": python.get("version") or (platform.python if platform is not None else None),
        "kind": platform.kind if platform is not None else None,
    }


def _torch_evidence(ctx: Context) -> Dict[str, Any]:
    torch = ctx.torch.section("torch") or {}
    cuda = ctx.torch.section("cuda") or {}
    capability = cuda.get("capability")
    return {
        "version": torch.get("version"),
        "cuda": torch.get("cuda"),
        "device_name": cuda.get("device_name"),
        "total_memory_bytes": cuda.get("total_memory_bytes"),
        "capability": ".".join(str(part) for part in capability) if capability else None,
        "arch_list": list(cuda.get("arch_list", [])),
    }


def _bnb_evidence(ctx: Context, results: Mapping[str, CheckResult]) -> Dict[str, Any]:
    data = ctx.bnb.data
    library = data.get("library") or {}
    kernel_checks = [results[check_id] for check_id in ("bnb-kernels", "bnb-int8") if check_id in results]
    ran = [check for check in kernel_checks if check.status in (OK, FAIL)]
    if not ran:
        kernel_test = "not_run"
    else:
        kernel_test = "passed" if all(check.status == OK for check in ran) else "failed"
    return {
        "version": data.get("version"),
        "backend": data.get("backend"),
        "library": library.get("file"),
        "kernel_test": kernel_test,
    }
