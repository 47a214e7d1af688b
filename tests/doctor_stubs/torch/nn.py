"""Stub torch.nn: a bias-free Linear whose weight is a constant-filled Tensor."""

import torch


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
        return x @ weight.t()
