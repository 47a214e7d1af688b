"""Standalone probe scripts run by the target interpreter; they never import jetson_install.

This module is the tool's side only: how a probe is started (the doctor starts its two, the
verify step's plan lists the same command lines, and the stack probe reads an interpreter's
packages without importing torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Tuple

__all__ = ["SCRIPTS", "probe_command"]

#: Each probe by name, and its script beside this file.
SCRIPTS = {"torch": "torch_probe.py", "bitsandbytes": "bnb_probe.py", "stack": "stack_probe.py"}


def probe_command(python: str, probe: str) -> Tuple[str, str]:
    """The command line that runs `probe` in the environment of `python`."""
    return (python, str(Path(__file__).parent / SCRIPTS[probe]))
