"""JetPack 5 hosts run Python 3.8: the package must stay 3.8-compatible (checked statically)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# vermin reads every module of the package, bench and the tests.
pytestmark = pytest.mark.slow

TOP = Path(__file__).resolve().parent.parent


def test_code_runs_on_python_3_8() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "vermin"), "--target=3.8-", "--violations", "--eval-annotations", "--no-tips",
         "jetson_install", "bench", "tests"],
        cwd=TOP, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
