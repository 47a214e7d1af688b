"""Stub bitsandbytes.cextension with the three library classes of the real one."""

import torch
from doctor_stub_scenario import SCENARIO


class _CDLL:
    def __init__(self, name):
        self._name = name


class BNBNativeLibrary:
    compiled_with_cuda = False

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name):
        # The real class turns any unknown name into a stub that raises when called.
        def throw_on_call(*args, **kwargs):
            raise RuntimeError(f"Method '{name}' not available in CPU-only version of bitsandbytes.")

        return throw_on_call


class CudaBNBNativeLibrary(BNBNativeLibrary):
    compiled_with_cuda = True


class ErrorHandlerMockBNBNativeLibrary(BNBNativeLibrary):
    def __init__(self, error_msg):
        self.error_msg = error_msg


BNB_BACKEND = "CUDA" if torch.cuda.is_available() else "CPU"
_DIR = "/env/site-packages/bitsandbytes/"
# Like the real one: without CUDA in torch it loads the CPU library whatever else is installed.
if SCENARIO.get("bnb_load_error"):
    # The real loader turns a library that cannot load (a missing libgomp.so.1) into the mock.
    lib = ErrorHandlerMockBNBNativeLibrary(SCENARIO["bnb_load_error"])
elif BNB_BACKEND == "CPU":
    lib = BNBNativeLibrary(_CDLL(_DIR + "libbitsandbytes_cpu.so"))
elif SCENARIO["bnb_library"] == "cuda":
    lib = CudaBNBNativeLibrary(_CDLL(_DIR + "libbitsandbytes_cuda%s.so" % torch.version.cuda.replace(".", "")))
elif SCENARIO["bnb_library"] == "mock":
    lib = ErrorHandlerMockBNBNativeLibrary(
        "Configured CUDA binary not found at " + _DIR + "libbitsandbytes_cuda126.so"
    )
else:
    lib = BNBNativeLibrary(_CDLL(_DIR + "libbitsandbytes_cpu.so"))
