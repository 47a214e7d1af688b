"""Stub bitsandbytes: importing it never fails, like the real one (the library class tells)."""

from doctor_stub_scenario import SCENARIO

__version__ = SCENARIO["bnb_version"]

from bitsandbytes import cextension, functional, nn  # noqa: F401  (submodules, as in the real package)
