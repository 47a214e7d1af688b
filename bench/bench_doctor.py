"""Doctor's total time as a ratio to `python -c "import torch, bitsandbytes"` in the same environment.

    python bench/bench_doctor.py [PYTHON] [--repeat N]

PYTHON is an interpreter with torch and bitsandbytes (e.g. the real CPU torch
venv); without it the bench builds the stub "working" environment from
tests/doctor_stubs. Each repetition times one import and one full doctor run
back to back; the median of the per-repetition ratios is reported (goal: at
most 1.3, issue 5 "Speed").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from jetson_install import doctor  # noqa: E402
from jetson_install.tools import runner  # noqa: E402


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(python: str, repeat: int) -> None:
    import_only = [python, "-c", "import torch, bitsandbytes"]
    ratios = []
    for index in range(repeat):
        import_seconds = timed(lambda: runner.run(import_only, timeout=600))
        doctor_seconds = timed(lambda: doctor.run_doctor(doctor.DoctorRequest(python, None, None)))
        ratios.append(doctor_seconds / import_seconds)
        print(f"run {index + 1}: import {import_seconds:.3f}s, doctor {doctor_seconds:.3f}s, ratio {ratios[-1]:.2f}")
    print(f"median ratio over {repeat} runs: {statistics.median(ratios):.2f} (goal <= 1.3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", nargs="?", help="interpreter with torch and bitsandbytes; default: stub env")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    if options.python:
        measure(options.python, options.repeat)
        return
    from support.doctor_env import make_env  # the same stub environment the tests use

    with tempfile.TemporaryDirectory() as scratch:
        print("stub scenario 'working' (no real torch: process start-up dominates)")
        measure(make_env(Path(scratch) / "env"), options.repeat)


if __name__ == "__main__":
    main()
