"""Stub torch.version: read by path, as the existing-torch probe reads a real torch's version.py."""

from doctor_stub_scenario import SCENARIO

__version__ = SCENARIO["torch_version"]
cuda = SCENARIO["torch_cuda"]
hip = None
