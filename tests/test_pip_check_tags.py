"""uv pip check on Thor's real stack: NVIDIA's aarch64 nvidia-cusparselt-cu13 0.8.x records
`py3-none-manylinux2014_sbsa` in its WHEEL file (the file is named ..._aarch64.whl), so uv calls
it "built for a different platform". On an aarch64 interpreter that line alone is NVIDIA's
mislabel, accepted and said; anything else uv names still fails the check. The real wheel runs
through this in the aarch64 lane (tests/test_lane_thor.py)."""

from __future__ import annotations

from typing import Dict, List

import pytest
from jetson_install.tools import uv
from jetson_install.doctor.checks_environment import check_pip
from jetson_install.base.process import Completed

SBSA_LINE = "The package `nvidia-cusparselt-cu13` was built for a different platform"
CONFLICT = "The package `a` requires `b<2`, but `2.0` is installed"
SBSA_TAGS = {"nvidia-cusparselt-cu13": ["py3-none-manylinux2014_sbsa"]}


def _check(*lines: str) -> Completed:
    found = f"Found {len(lines)} incompatibilit{'y' if len(lines) == 1 else 'ies'}"
    return Completed(("uv", "pip", "check"), 1, "", "\n".join(["Checked 37 packages in 71ms", found, *lines]) + "\n")


def test_an_sbsa_labelled_wheel_on_aarch64_passes_with_its_reason_said() -> None:
    judged = uv.judge_sbsa_tags(_check(SBSA_LINE), SBSA_TAGS, "aarch64")
    assert judged.ok
    assert uv.accepted_note(judged) == ("accepted as aarch64: nvidia-cusparselt-cu13 "
                                        "(its WHEEL file says py3-none-manylinux2014_sbsa)")


@pytest.mark.parametrize(("lines", "tags", "machine", "left"), [
    # Another machine: an SBSA wheel there is what uv says it is.
    ([SBSA_LINE], SBSA_TAGS, "x86_64", [SBSA_LINE]),
    # A wheel really built for another platform, or one whose tags were not read.
    ([SBSA_LINE], {"nvidia-cusparselt-cu13": ["py3-none-manylinux2014_x86_64"]}, "aarch64", [SBSA_LINE]),
    ([SBSA_LINE], {}, "aarch64", [SBSA_LINE]),
    # One SBSA tag among others is no mislabel.
    ([SBSA_LINE], {"nvidia-cusparselt-cu13": ["py3-none-manylinux2014_sbsa", "py3-none-win_amd64"]}, "aarch64",
     [SBSA_LINE]),
    # The mislabel is accepted; a real conflict beside it still fails.
    ([SBSA_LINE, CONFLICT], SBSA_TAGS, "aarch64", [CONFLICT]),
])
def test_everything_else_uv_names_still_fails(lines: List[str], tags: Dict[str, List[str]], machine: str,
                                               left: List[str]) -> None:
    judged = uv.judge_sbsa_tags(_check(*lines), tags, machine)
    assert not judged.ok
    assert [line for line in (judged.stdout + judged.stderr).splitlines() if line.startswith("The package")] == left


def test_the_doctor_says_what_it_accepted() -> None:
    class Context:
        python = "/opt/env/bin/python"
        pip_check = uv.judge_sbsa_tags(_check(SBSA_LINE), SBSA_TAGS, "aarch64")

    status, detail, fix = check_pip(Context())  # type: ignore[arg-type]
    assert (status, fix) == ("ok", None)
    assert detail == ("uv pip check: no broken requirements (accepted as aarch64: nvidia-cusparselt-cu13 "
                      "(its WHEEL file says py3-none-manylinux2014_sbsa))")
