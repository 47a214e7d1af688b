"""ruff and mypy on the code, as configured in pyproject.toml, so the test command runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=TOP, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", "--no-fix", "jetson_install", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing_in_the_package_the_tests_and_the_benches() -> None:
    result = _run("mypy")  # what it checks, and the probes' exceptions: [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr
    # Every module was checked, not a subset the configuration happened to name.
    excluded = ("resources", "doctor_stubs")  # stub projects the tests build wheels from
    tests = [path for path in (TOP / "tests").rglob("*.py") if path.relative_to(TOP / "tests").parts[0] not in excluded]
    modules = sum(len(list((TOP / folder).rglob("*.py"))) for folder in ("jetson_install", "bench")) + len(tests)
    assert f"no issues found in {modules} source files" in result.stdout, result.stdout
