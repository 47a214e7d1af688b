"""Stub numpy: only a version."""

from doctor_stub_scenario import SCENARIO

__version__ = SCENARIO["numpy_version"]
