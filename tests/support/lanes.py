"""Marked lanes (aarch64 under qemu, image builds, the package registries) that need what a
tests/setup.d/ script prepared. In CI (CI=true) a lane that cannot run fails; elsewhere it
skips with one line saying why and what would make it run."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def lane_unavailable(lane: str, reason: str) -> NoReturn:
    message = f"{lane} lane cannot run: {reason}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
