"""Distribution names are compared as PEP 503 normalizes them, by packaging's canonicalize_name."""

from __future__ import annotations

import re
from pathlib import Path

from jetson_install.planning.routes.existing_torch import resolved_requirements
from jetson_install.envs.record import installed_package

PACKAGE = Path(__file__).resolve().parent.parent / "jetson_install"


def test_a_dist_info_is_found_under_any_spelling_of_its_name(tmp_path: Path) -> None:
    dist_info = tmp_path / "lib" / "python3.10" / "site-packages" / "typing_extensions-4.12.2.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-any\n")
    (dist_info / "RECORD").write_text("typing_extensions.py,,\n")
    found = installed_package(tmp_path, "Typing.Extensions")
    assert found is not None and found.version == "4.12.2" and found.tags == ("py3-none-any",)


def test_the_kept_stack_is_left_out_whatever_uv_calls_it() -> None:
    compiled = "Torch==2.8.0\n# via x\ntorch-vision==0.23.0\ntransformers==5.0.0\n"
    assert resolved_requirements(compiled, ["torch", "torch-vision"]) == ["transformers==5.0.0"]


def test_only_the_stdlib_probes_write_the_rule_by_hand() -> None:
    # They run in the target's interpreter, which need not have packaging.
    by_hand = re.compile(r're\.sub\(r"\[-_\.\]\+"')
    found = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if by_hand.search(path.read_text()))
    assert found == ["probes/additions_probe.py", "probes/dist_records.py", "probes/stack_probe.py"]
