"""How long `jetson-install --help`, `--version`, `detect` and `plan` take, as ratios to
`python -c pass` in the same run.

Goal (issue 24): at most 4x each. The commands run as a user runs them, through the
`jetson-install` script installed beside this interpreter (`python -m jetson_install` where
there is none, which adds runpy). Run by hand: python bench/bench_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple


def seconds(argv: Sequence[str]) -> Tuple[float, float]:
    """Wall seconds, and the CPU seconds the process used (user + system): on a machine shared
    with other work the CPU time moves far less than the wall time does."""
    start, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime


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
    baseline = [sys.executable, "-c", "pass"]
    for argv in [baseline, *cases.values()]:
        seconds(argv)  # warm-up: disk caches favour no case
    # Interleaved, one sample of each case a round: a busy moment on a shared machine hits all alike.
    samples: Dict[str, List[Tuple[float, float]]] = {name: [] for name in ["python -c pass", *cases]}
    for _ in range(args.repeat):
        for name, argv in [("python -c pass", baseline), *cases.items()]:
            samples[name].append(seconds(argv))
    wall, cpu = ({name: statistics.median(sample[n] for sample in taken) for name, taken in samples.items()}
                 for n in (0, 1))
    print(f"baseline python -c pass: {wall['python -c pass'] * 1000:.1f} ms wall, {cpu['python -c pass'] * 1000:.1f} ms "
          f"CPU (medians of {args.repeat}, interleaved); load average {os.getloadavg()[0]:.1f}")
    # click is a dependency every command parses with: what the tool adds is what lies above it.
    for name in cases:
        print(f"{name:24} {wall[name] * 1000:7.1f} ms  {wall[name] / wall['python -c pass']:5.2f}x wall  "
              f"{cpu[name] / cpu['python -c pass']:5.2f}x CPU  "
              f"{(wall[name] - wall['import click (reference)']) * 1000:+6.1f} ms over import click")


if __name__ == "__main__":
    main()
