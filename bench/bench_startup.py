"""How long `jetson-install --help` takes, as a ratio to `python -c pass` in the same run.

Goal (issue 2): at most 5x. Run by hand: python bench/bench_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Sequence


def median_seconds(argv: Sequence[str], repeat: int) -> float:
    samples: List[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    # An installed wheel carries compiled bytecode; an editable checkout under
    # PYTHONDONTWRITEBYTECODE would recompile every module on every run instead.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parent.parent / "jetson_install")],
                   check=True)
    cases = {
        "import click (reference)": [sys.executable, "-c", "import click"],
        "--help": [sys.executable, "-m", "jetson_install", "--help"],
        "--version": [sys.executable, "-m", "jetson_install", "--version"],
        "detect (sample root)": [sys.executable, "-m", "jetson_install", "detect", "--root", "sample:agx-orin-64gb-jp6.2"],
    }
    # Interleave warm-up so disk caches favour no case.
    median_seconds([sys.executable, "-c", "pass"], 3)
    baseline = median_seconds([sys.executable, "-c", "pass"], args.repeat)
    print(f"baseline python -c pass: {baseline * 1000:.1f} ms (median of {args.repeat})")
    for name, argv in cases.items():
        seconds = median_seconds(argv, args.repeat)
        print(f"{name:24} {seconds * 1000:7.1f} ms  {seconds / baseline:5.2f}x")


if __name__ == "__main__":
    main()
