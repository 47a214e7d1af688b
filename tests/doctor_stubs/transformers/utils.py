"""Stub transformers.utils: like the real import_utils, torch below the floor counts as absent."""

import re

from doctor_stub_scenario import SCENARIO


def _comparable(version):
    # PEP 440 order for the versions the tests use: a pre-release (2.4.0a0+...) sorts below its release.
    match = re.match(r"(\d+(?:\.\d+)*)(.*)", version)
    release = tuple(int(part) for part in match.group(1).split("."))
    release += (0,) * (3 - len(release))
    return release + (0 if re.match(r"(a|b|rc|\.dev)", match.group(2)) else 1,)


def is_torch_available():
    try:
        import torch
    except ImportError:
        return False
    return _comparable(torch.__version__) >= _comparable(SCENARIO["transformers_torch_floor"])
