"""Stub torch.nn: a bias-free Linear whose weight is a constant-filled Tensor."""

import torch
from doctor_stub_scenario import SCENARIO


class Linear:
    def __init__(self, in_features, out_features, bias=True):
        self.weight = torch.Tensor((out_features, in_features), 0.01)

    def half(self):
        self.weight = self.weight.half()
        return self

    def cuda(self):
        self.weight = self.weight.cuda()
        return self

    def __call__(self, x):
        return functional.linear(x, self.weight)


class functional:
    @staticmethod
    def linear(x, weight):
        output = x @ weight.t()
        if x.is_cuda and torch.autocast.active is not None:
            output.dtype = torch.autocast.active.dtype
            if SCENARIO.get("bf16_result") == "nan":
                output.value = float("nan")
        return output

    @staticmethod
    def conv2d(images, weight, padding=0):
        if images.is_cuda:
            torch._launch_kernel()
        batch, channels, height, width = images.shape
        value = images.value * weight.value * channels * weight.shape[2] * weight.shape[3]
        if images.is_cuda and SCENARIO.get("conv2d_result") == "wrong":
            value += 1.0
        return images._like(value, shape=(batch, weight.shape[0], height, width), parents=(images, weight))
