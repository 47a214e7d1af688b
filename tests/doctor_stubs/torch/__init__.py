"""Stub torch whose behaviour the scenario file chooses; tensors are constant-filled."""

import atexit
import math
import time

from doctor_stub_scenario import SCENARIO, event

event("import")
atexit.register(event, "exit")

time.sleep(SCENARIO.get("import_seconds", 0))  # a real `import torch` takes seconds on a Jetson
if SCENARIO.get("torch_import_error"):
    raise OSError(SCENARIO["torch_import_error"])

__version__ = SCENARIO["torch_version"]
float16, float32, bfloat16, uint8 = "float16", "float32", "bfloat16", "uint8"


class version:
    cuda = SCENARIO["torch_cuda"]
    hip = None


class Tensor:
    """Every element holds `value`; enough arithmetic (and autograd) for the doctor probes."""

    def __init__(self, shape, value, device="cpu", dtype=float32, parents=()):
        self.shape, self.value, self.device, self.dtype = tuple(shape), float(value), device, dtype
        self.parents, self.requires_grad, self.grad = tuple(parents), False, None

    def numel(self):
        return math.prod(self.shape)

    @property
    def is_cuda(self):
        return self.device == "cuda"

    @property
    def data(self):
        return self

    def _like(self, value, shape=None, dtype=None, parents=None):
        shape = self.shape if shape is None else shape
        return Tensor(shape, value, self.device, dtype or self.dtype, (self,) if parents is None else parents)

    def cuda(self):
        if not cuda.is_available():
            raise RuntimeError("Torch not compiled with CUDA enabled")
        return Tensor(self.shape, self.value, "cuda", self.dtype, (self,))

    def cpu(self):
        return Tensor(self.shape, self.value, "cpu", self.dtype, (self,))

    def detach(self):
        return Tensor(self.shape, self.value, self.device, self.dtype)

    def requires_grad_(self):
        self.requires_grad = True
        return self

    def backward(self):
        """Every tensor that asked for a gradient, and that this one came from, gets one of ones."""
        pending, seen = [self], set()
        while pending:
            tensor = pending.pop()
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            if tensor.requires_grad:
                tensor.grad = Tensor(tensor.shape, 1.0, tensor.device, tensor.dtype)
            pending.extend(tensor.parents)

    def sum(self):
        return self._like(self.value * self.numel(), shape=())

    def reshape(self, *shape):
        return self._like(self.value, shape=shape)

    @property
    def T(self):
        return self.t()

    def float(self):
        return self._like(self.value, dtype=float32)

    def half(self):
        return self._like(self.value, dtype=float16)

    def clone(self):
        return self._like(self.value)

    def t(self):
        return self._like(self.value, shape=self.shape[::-1])

    def abs(self):
        return self._like(abs(self.value))

    def mean(self):
        return self._like(self.value, shape=())

    def max(self):
        return self._like(self.value, shape=())

    def all(self):
        return self._like(self.value, shape=())

    def __matmul__(self, other):
        shape, parents = (self.shape[0], other.shape[-1]), (self, other)
        if self.is_cuda:
            _launch_kernel()
            if SCENARIO.get("matmul_result") == "nan":
                return self._like(float("nan"), shape=shape, parents=parents)
        return self._like(self.value * other.value * self.shape[-1], shape=shape, parents=parents)

    def __sub__(self, other):
        return self._like(self.value - other.value)

    def __truediv__(self, other):
        return self._like(self.value / other.value)

    def __float__(self):
        return self.value

    def __bool__(self):
        return bool(self.value)


def _launch_kernel():
    capability = "sm_%d%d" % tuple(SCENARIO["capability"])
    # sm80_code_runs: the device runs sm_80 cubins, as Orin ran CUDA 13 builds in some reports.
    runs_sm80 = SCENARIO.get("sm80_code_runs") and "sm_80" in SCENARIO["arch_list"]
    if capability not in SCENARIO["arch_list"] and not runs_sm80:
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")


def arange(count, device="cpu", dtype=float32):
    if device == "cuda":
        _launch_kernel()
    return Tensor((count,), (count - 1) / 2, device, dtype)


class Generator:
    def manual_seed(self, seed):
        return self


def manual_seed(seed):
    return None


def randn(*shape, generator=None, device="cpu", dtype=float32):
    return Tensor(shape, 0.5, device, dtype)


def isfinite(tensor):
    return tensor._like(1.0 if math.isfinite(tensor.value) else 0.0)


def allclose(a, b, rtol=1e-5, atol=1e-8):
    return abs(a.value - b.value) <= atol + rtol * abs(b.value)


def compile(function):
    """Compiles as inductor would on the GPU: through the environment's Triton assembler."""

    def compiled(*args):
        error = SCENARIO.get("compile_error") or _triton_assembler_error()
        if error:
            raise RuntimeError(error)
        return function(*args)

    return compiled


def _triton_assembler_error():
    """The stub Triton's assembler for the scenario's device, chosen as Triton 3.7 chooses it
    (its TRITON_*_PATH variable first), run as Triton runs it; its refusal as inductor words it."""
    import importlib.util
    import os
    import subprocess

    spec = importlib.util.find_spec("triton")
    if spec is None:
        return "Cannot find a working triton installation"
    capability = SCENARIO["capability"][0] * 10 + SCENARIO["capability"][1]
    name = "ptxas-blackwell" if capability >= 100 else "ptxas"
    path = os.environ.get("TRITON_%s_PATH" % name.upper().replace("-", "_")) or os.path.join(
        next(iter(spec.submodule_search_locations)), "backends", "nvidia", "bin", name)
    arch = "sm_%d%s" % (capability, "a" if capability >= 90 else "")
    done = subprocess.run([path, "--gpu-name=" + arch, os.devnull, "-o", os.devnull], capture_output=True, text=True)
    if done.returncode:
        return "PTXAS error: Internal Triton PTX codegen error\n`ptxas` stderr:\n" + done.stdout + done.stderr
    return None


from torch import backends, cuda, nn  # noqa: E402,F401  (submodules; they use Tensor)


class autocast:
    """Under it, cuda linear layers compute in `dtype`; the stub's nn.functional reads `active`."""

    active = None

    def __init__(self, device_type, dtype=None, enabled=True):
        self.device_type, self.dtype, self.enabled = device_type, dtype, enabled

    def __enter__(self):
        autocast.active = self if self.enabled else None
        return self

    def __exit__(self, *exc_info):
        autocast.active = None
        return False


class no_grad:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


def _import_device_backends():
    """As torch 2.5 and later do at import: each entry point of the `torch.backends` group is
    loaded and called (torch/__init__.py, _import_device_backends, in
    https://github.com/pytorch/pytorch; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off)."""
    import os
    from importlib import metadata

    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "1":
        return
    found = metadata.entry_points()
    group = found.select(group="torch.backends") if hasattr(found, "select") else found.get("torch.backends", ())
    for entry_point in group:
        entry_point.load()()


_import_device_backends()
