"""The README's commands are the ones CI and new users really run."""

from __future__ import annotations

import re
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent


def fenced_block_after(heading: str) -> str:
    text = (TOP / "README.md").read_text()
    match = re.search(r"^## " + re.escape(heading) + r"\n.*?```\n(.*?)\n```", text, re.S | re.M)
    assert match, f"README has no command under '## {heading}'"
    return match.group(1).strip()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci_lines = [line for line in (TOP / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci_lines == [fenced_block_after("Run the tests")]
