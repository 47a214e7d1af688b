"""Stub bitsandbytes.functional: NF4 with the round-trip error the real kernels show (about 0.073)."""

import os
import sys

import torch
from doctor_stub_scenario import SCENARIO

NF4_ERROR = 0.073


def _kernel(name):
    if SCENARIO.get("bnb_fault") == name:
        # What BNB_CHECK_RETURN does after a failed launch: print and exit(1) from C.
        sys.stderr.write("Error named symbol not found at line 75 in file /src/csrc/ops.cu\n")
        sys.stderr.flush()
        os._exit(1)


class QuantState:
    def __init__(self, shape, value):
        self.shape, self.value = shape, value


def quantize_4bit(x, blocksize=64, quant_type="nf4"):
    _kernel("nf4")
    packed = torch.Tensor((x.numel() // 2,), 0, x.device, torch.uint8)
    return packed, QuantState(x.shape, x.value)


def dequantize_4bit(packed, state):
    _kernel("nf4")
    return torch.Tensor(state.shape, state.value + NF4_ERROR, packed.device, torch.float16)
