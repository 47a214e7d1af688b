"""jetson-install under emulation: `--help` and `detect` in the arm64 root (qemu-user), as
ratios to `python -c pass` in the same root in the same run, and the aarch64 lane's time per
step from its last run (ROOT/lane/timings.json, written by tests/test_lane_arm64.py).

Reported, no target. Needs what the lane needs: `tests/setup`, then one lane run (it installs
the tool into the root). Run by hand, as root: python bench/bench_arm64.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.arm64_root import SAMPLE, TOOL, arm64_root, chroot_environment


def median_seconds(root: Path, argv: Sequence[str], repeat: int) -> float:
    samples: List[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        # detect on the Debian root itself exits 3 (no Jetson); the time is what counts.
        subprocess.run(["chroot", str(root), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=chroot_environment())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = arm64_root()
    tool = root / TOOL.lstrip("/") / "bin" / "jetson-install"
    if not tool.exists():
        sys.exit(f"no jetson-install in {root}{TOOL}: run tests/setup, then the lane: pytest -m lane tests/test_lane_arm64.py")
    python = f"{TOOL}/bin/python"
    # The tool's own modules compiled once, as an installed wheel has them.
    subprocess.run(["chroot", str(root), python, "-m", "compileall", "-q", f"{TOOL}/lib"], env=chroot_environment())
    median_seconds(root, [python, "-c", "pass"], 1)
    baseline = median_seconds(root, [python, "-c", "pass"], args.repeat)
    print(f"under qemu-user, median of {args.repeat}:")
    print(f"  python -c pass           {baseline:6.2f} s  1.00x")
    for name, argv in (("jetson-install --help", [f"{TOOL}/bin/jetson-install", "--help"]),
                       ("detect (Debian root)", [f"{TOOL}/bin/jetson-install", "detect"]),
                       ("detect (sample root)", [f"{TOOL}/bin/jetson-install", "detect", "--root", SAMPLE])):
        seconds = median_seconds(root, argv, args.repeat)
        print(f"  {name:24} {seconds:6.2f} s  {seconds / baseline:5.2f}x")
    timings = root / "lane" / "timings.json"
    if timings.is_file():
        data = json.loads(timings.read_text())
        print(f"aarch64 lane, last run ({data['finished_at']}):")
        for step, seconds in data["seconds"].items():
            print(f"  {step:24} {seconds:6.1f} s")
        print(f"  {'total':24} {sum(data['seconds'].values()):6.1f} s")


if __name__ == "__main__":
    main()
