"""The fast tier on every Python the boards have, as well as on the development one: the tool
runs on the board's system Python (JetPack 5's 3.8, JetPack 6's 3.10, JetPack 7's 3.12, 3.13
on newer distributions, and Debian's own /usr/bin/python3 with its patched site.py), so a
failure here is a bug in the tool on that board. tests/setup.d/06-pythons makes a venv per
interpreter under .venv-pythons/; each runs the README's fast tier, less what checks the
source's text rather than run it (docs/contributing.md, "Tests", says what and why)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import List

import pytest
from support.doc_blocks import block
from support.lanes import lane_unavailable

pytestmark = pytest.mark.lane

TOP = Path(__file__).resolve().parent.parent
VENVS = TOP / ".venv-pythons"
#: The venvs 06-pythons makes: each minor by its number, Debian's interpreter as "system".
PYTHONS = ("3.8", "3.10", "3.12", "3.13", "system")
#: ruff and mypy read the source's text, whatever runs them (and mypy's verdicts differ between
#: its releases, which differ per Python): they run once, on the development interpreter.
LEFT_OUT = ("tests/test_static_checks.py",)


def fast_tier() -> List[str]:
    """The README's fast tier after its interpreter (`-m pytest ...`): what a contributor runs
    while working."""
    argv = shlex.split(block("README.md", "Run the tests", 1).text)
    assert argv[:3] == [".venv/bin/python", "-m", "pytest"], argv
    return argv[1:]


def interpreter_said(python: Path) -> str:
    code = "import sys, site; print('%d.%d' % sys.version_info[:2], sys.base_prefix, *site.getsitepackages())"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.parametrize("name", PYTHONS)
def test_the_fast_tier_passes_on(name: str) -> None:
    python = VENVS / name / "bin" / "python"
    if not (VENVS / name / "stamp").is_file():
        lane_unavailable("pythons", f"no venv for Python {name} in {VENVS}: run tests/setup (06-pythons says what is missing)")
    said = interpreter_said(python).split()
    if name == "system":
        # Debian's interpreter: its own prefix, and a venv whose site.py also names dist-packages.
        assert said[1] == "/usr" and any(folder.endswith("dist-packages") for folder in said[2:]), said
    else:
        assert said[0] == name, said
    # The child is a pytest of its own: none of this run's worker variables, nor its -m.
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    result = subprocess.run(
        [str(python), *fast_tier(), "-p", "no:cacheprovider", *(f"--ignore={path}" for path in LEFT_OUT)],
        cwd=TOP, env=env, capture_output=True, text=True, timeout=3600)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-2000:]
    assert result.returncode == 0, f"Python {name}: {summary}\n{result.stdout[-12000:]}{result.stderr[-2000:]}"
    assert re.match(r"\d+ passed", summary) and not re.search(r"failed|error", summary), summary
