"""The README's commands are the ones CI and new users really run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parent.parent


def fenced_block_after(heading: str) -> str:
    text = (TOP / "README.md").read_text()
    match = re.search(r"^## " + re.escape(heading) + r"\n.*?```[a-z]*\n(.*?)\n```", text, re.S | re.M)
    assert match, f"README has no command under '## {heading}'"
    return match.group(1).strip()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci_lines = [line for line in (TOP / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci_lines == [fenced_block_after("Run the tests")]


def test_the_fast_tier_leaves_out_markers_that_pytest_declares_and_the_tests_use(pytestconfig: pytest.Config) -> None:
    # pytest does not check the names in -m: a marker renamed in pyproject.toml or in the tests
    # would put its tests back in the fast tier without a word.
    from support.doc_blocks import block

    expression = shlex.split(block("README.md", "Run the tests", 1).text)[-1]
    named = set(expression.split()) - {"not", "and", "or"}
    declared = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert named == {"lane", "slow", "property"} and named <= declared, expression
    # conftest.py marks every hypothesis test `property`.
    used = "\n".join(path.read_text() for path in [*(TOP / "tests").glob("test_*.py"), TOP / "tests" / "conftest.py"])
    assert all(f"pytest.mark.{name}" in used for name in named)


def test_try_it_command_runs_the_tool_on_a_sample_root() -> None:
    from support.cli import run_cli

    command = fenced_block_after("Try it without a Jetson")
    tool_part = command.split("&&")[-1].split()
    assert tool_part[0].endswith("jetson-install") and "sample:agx-orin-64gb-jp6.2" in tool_part
    result = run_cli(*tool_part[1:])
    assert result.returncode == 0, result.stderr
    assert "jp6-cu126" in result.stdout


def test_support_table_is_generated_from_the_catalog() -> None:
    from jetson_install.catalog.catalog import load_catalog
    from jetson_install.cli.render import channels_markdown

    text = (TOP / "README.md").read_text()
    table = text.split("<!-- channels:start -->\n", 1)[1].split("\n<!-- channels:end -->", 1)[0]
    assert table == channels_markdown(load_catalog()), "regenerate: jetson-install channels --markdown"


def test_every_setup_script_has_its_row_in_the_readme() -> None:
    text = (TOP / "README.md").read_text()
    table = text.split("<!-- setup:start -->\n", 1)[1].split("\n<!-- setup:end -->", 1)[0]
    rows = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    scripts = {path.name for path in (TOP / "tests" / "setup.d").iterdir() if path.is_file()}
    assert rows == scripts, "add (or remove) a row in README's 'What the first run builds' table"


def test_install_gives_the_published_route_first_and_the_checkout_route_for_now() -> None:
    from support.doc_blocks import block

    text = (TOP / "README.md").read_text()
    section = text.split("## Install\n", 1)[1].split("\n## ", 1)[0]
    assert "not published yet" in section  # until it is (tests/test_package.py: no project URLs either)
    published = [line.split("#")[0].strip() for line in block("README.md", "Install").text.splitlines()]
    # What tests/test_index_route.py runs from a loopback index, as written.
    assert published == ["pipx run jetson-install obliteratus", "pipx install jetson-install"]
    assert block("README.md", "Install", 1).text.startswith("pipx install ./")
