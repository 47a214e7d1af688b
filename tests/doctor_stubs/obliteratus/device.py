"""Stub obliteratus.device: the real one asks torch.cuda.is_available() and nothing else."""

import torch


def get_device(preference="auto"):
    if preference != "auto":
        return preference
    return "cuda" if torch.cuda.is_available() else "cpu"


def is_cuda():
    return get_device("auto") == "cuda"
