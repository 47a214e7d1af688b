"""How long `jetson-install --help`, `--version`, `detect` and `plan` take, as ratios to
`python -c pass` in the same run.

Goal (issue 24): at most 4x each. The commands run as a user runs them, through the
`jetson-install` script installed beside this interpreter (`python -m jetson_install` where
there is none, which adds runpy). Run by hand: python bench/bench_startup.py [--repeat N]
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
    script = Path(sys.executable).parent / "jetson-install"
    tool = [str(script)] if script.exists() else [sys.executable, "-m", "jetson_install"]
    sample = ["--root", "sample:agx-orin-64gb-jp6.2"]
    cases = {
        "import click (reference)": [sys.executable, "-c", "import click"],
        "--help": tool + ["--help"],
        "--version": tool + ["--version"],
        "detect (sample root)": tool + ["detect"] + sample,
        "plan (sample root)": tool + ["plan", "obliteratus"] + sample,
    }
    # Interleave warm-up so disk caches favour no case.
    median_seconds([sys.executable, "-c", "pass"], 3)
    baseline = median_seconds([sys.executable, "-c", "pass"], args.repeat)
    print(f"baseline python -c pass: {baseline * 1000:.1f} ms (median of {args.repeat})")
    # click is a dependency every command parses with: what the tool adds is what lies above it.
    click_seconds = 0.0
    for name, argv in cases.items():
        seconds = median_seconds(argv, args.repeat)
        click_seconds = click_seconds or seconds
        print(f"{name:24} {seconds * 1000:7.1f} ms  {seconds / baseline:5.2f}x  "
              f"{(seconds - click_seconds) * 1000:+6.1f} ms over import click")


if __name__ == "__main__":
    main()
