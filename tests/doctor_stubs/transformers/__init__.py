"""Stub transformers: only `utils.is_torch_available`, which matters to the doctor."""

from doctor_stub_scenario import SCENARIO

__version__ = SCENARIO["transformers_version"]
