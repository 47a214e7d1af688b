"""What the doctor's integrity probe costs: the strict doctor's digest of every vendor file
against the size comparison every other doctor run (and an install's verify step) makes.

    python bench/bench_integrity.py PYTHON [--repeat N]

PYTHON is an environment's interpreter with torch (e.g. the real CPU torch venv); it is only
read. Each repetition runs, interleaved, `PYTHON -I -S -c pass` (the baseline: the probe's own
start), the probe by size, and the probe with --hash; each case reports its median wall and
CPU seconds (user + system of the probe's process) and, for --hash, the bytes it hashed and
their rate. The files are read from the page cache after the first run: a first doctor after a
reboot reads them from disk as well.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "jetson_install" / "probes" / "integrity_probe.py"


def timed(argv: Sequence[str]) -> Tuple[float, float, str]:
    """Wall and CPU seconds of one process, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="an environment's interpreter with torch (only read)")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    cases = {
        "python -I -S -c pass": [options.python, "-I", "-S", "-c", "pass"],
        "probe, sizes (any doctor)": [options.python, "-I", "-S", str(PROBE)],
        "probe, --hash (doctor --strict)": [options.python, "-I", "-S", str(PROBE), "--hash"],
    }
    walls: Dict[str, List[float]] = {name: [] for name in cases}
    cpus: Dict[str, List[float]] = {name: [] for name in cases}
    report: Dict[str, object] = {}
    for _ in range(options.repeat):
        for name, argv in cases.items():
            wall, cpu, out = timed(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
            if out:
                report = json.loads(out)
    distributions = report.get("distributions", {})
    assert isinstance(distributions, dict)
    files = sum(found["files"] for found in distributions.values())
    size = sum(found["bytes"] for found in distributions.values())
    print(f"{files} files, {size / 1e6:.0f} MB in {', '.join(sorted(distributions))}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; medians of {options.repeat}")
    for name in cases:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        rate = f", {size / 1e6 / wall:.0f} MB/s" if "--hash" in name else ""
        print(f"{name}: {wall:.3f} s wall, {cpu:.3f} s CPU{rate}")


if __name__ == "__main__":
    main()
