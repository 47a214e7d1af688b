"""Stub bitsandbytes.nn: quantized layers that compute what their fp16 reference would."""

import torch
from bitsandbytes import functional


class Params4bit:
    def __init__(self, data, requires_grad=False, quant_type="nf4"):
        self.data = data
        self.quant_state = None


class Int8Params:
    def __init__(self, data, requires_grad=False, has_fp16_weights=False):
        self.data = data


class _Layer:
    def __init__(self, in_features, out_features, bias=True, **options):
        self.weight = None

    def __call__(self, x):
        return torch.nn.functional.linear(x, self._effective_weight())


class Linear4bit(_Layer):
    def cuda(self):
        weight = self.weight.data.cuda()
        self.weight.data, self.weight.quant_state = functional.quantize_4bit(weight)
        return self

    def _effective_weight(self):
        functional._kernel("linear4bit")
        return functional.dequantize_4bit(self.weight.data, self.weight.quant_state)


class Linear8bitLt(_Layer):
    def cuda(self):
        self.weight.data = self.weight.data.cuda()
        return self

    def _effective_weight(self):
        functional._kernel("int8")
        return self.weight.data
