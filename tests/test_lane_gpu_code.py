"""The inspect lane: the real aarch64 wheels of jp7-thor-cu130's set (tests/setup.d/25-thor-wheels,
~/.cache/jetson-install-tests/thor-cu130) read by envs/gpu_inspect.py, asserting what their fat
binaries hold: bitsandbytes 0.50.2's CUDA 12 libraries sm_75, sm_80 and sm_90, its CUDA 13 ones
up to sm_121 with sm_110; torch 2.13.0 sm_80 to sm_121 with sm_110; no sm_87 and no PTX in any.

Marked `lane`: where the set is not downloaded it skips with one line (fails under CI=true)."""

from __future__ import annotations

import os
from pathlib import Path
import pytest
from support.lanes import lane_unavailable

from jetson_install.catalog.gpu_code import BY_RULE, CANNOT_RUN, NOT_LOADED, RUNS, Board, load_rules
from jetson_install.envs.gpu_inspect import Inspection, inspect_path

pytestmark = pytest.mark.lane

LANE = "inspect"
THOR = Board(110, "sbsa", (13, 0))
ORIN_JP72 = Board(87, "sbsa", (13, 2))
ORIN_JP6 = Board(87, "tegra", (12, 6))


def _wheel(pattern: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    found = sorted((cache / "jetson-install-tests" / "thor-cu130").glob(pattern))
    if not found:
        lane_unavailable(LANE, f"no {pattern} in the Thor set; run tests/setup (25-thor-wheels)")
    return found[0]


def _read(pattern: str, board: Board) -> Inspection:
    return inspect_path(_wheel(pattern), board, load_rules(), (), Path("/"), "aarch64")



def test_bitsandbytes_0_50_2_carries_no_sm_87_and_sm_110_only_in_its_cuda_13_libraries() -> None:
    inspection = _read("bitsandbytes-0.50.2-*.whl", THOR)
    files = {report.path.rsplit("/", 1)[-1]: report for report in inspection.files}
    cuda12 = ("sm_75", "sm_80", "sm_90")
    for name in ("cuda118", "cuda121", "cuda124", "cuda126"):
        assert files[f"libbitsandbytes_{name}.so"].sass == cuda12, name
    assert files["libbitsandbytes_cuda128.so"].sass == cuda12 + ("sm_100", "sm_120")
    for name in ("cuda130", "cuda132"):
        assert files[f"libbitsandbytes_{name}.so"].sass == cuda12 + ("sm_100", "sm_110", "sm_120", "sm_121"), name
    assert all(not report.ptx and "sm_87" not in report.sass for report in inspection.files)
    # On Thor's CUDA 13.0 bitsandbytes loads libbitsandbytes_cuda130.so only, which runs there.
    verdicts = {name: report.verdict.verdict for name, report in files.items() if report.verdict}
    assert verdicts.pop("libbitsandbytes_cuda130.so") == RUNS
    assert set(verdicts.values()) == {NOT_LOADED}
    # Its CUDA 12 libraries, were they loaded there, have no sm_110 code and no PTX.
    cuda12_on_thor = _read("bitsandbytes-0.50.2-*.whl", Board(110, "sbsa", (12, 6)))
    assert {report.verdict.verdict for report in cuda12_on_thor.files  # type: ignore[union-attr]
            if report.path.endswith("cuda126.so")} == {CANNOT_RUN}
    assert not files["libbitsandbytes_cpu.so"].gpu_code and files["libbitsandbytes_cpu.so"].verdict is None
    # On an Orin only the binary compatibility rule would run it: unproven, named as such.
    orin = {report.path.rsplit("/", 1)[-1]: report for report in _read("bitsandbytes-0.50.2-*.whl", ORIN_JP6).files}
    verdict = orin["libbitsandbytes_cuda126.so"].verdict
    assert verdict is not None and verdict.verdict == BY_RULE and "unproven on tegra CUDA" in verdict.reason


def test_torch_2_13_0_carries_sm_110_and_no_sm_87_and_no_ptx() -> None:
    inspection = _read("torch-2.13.0-*.whl", THOR)
    cuda = next(report for report in inspection.files if report.path == "torch/lib/libtorch_cuda.so")
    assert {"sm_80", "sm_90", "sm_100", "sm_110", "sm_120"} <= set(cuda.sass)
    assert "sm_87" not in cuda.sass and not cuda.ptx
    assert cuda.compressed == ("zstd",)
    assert cuda.verdict is not None and (cuda.verdict.verdict, cuda.verdict.reason) == (RUNS, "sm_110 SASS")
    assert "libcudart.so.13" in cuda.needed or any(name.startswith("libcu") for name in cuda.needed)
    assert inspection.ok and not inspection.cannot_run
    orin = _read("torch-2.13.0-*.whl", ORIN_JP72)
    verdict = next(report for report in orin.files if report.path == "torch/lib/libtorch_cuda.so").verdict
    assert verdict is not None and verdict.verdict == BY_RULE
    assert verdict.reason == "sm_80 SASS on sm_87, unproven on sbsa CUDA: the sources disagree"
