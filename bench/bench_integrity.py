"""What the doctor's proof costs: the integrity probe's hashing against `openssl dgst -sha256` over
the same files, the sealed torch probe against the one today's doctor ran, and the whole doctor
against the doctor of another checkout (the code before the sealed proof).

    python bench/bench_integrity.py PYTHON [--repeat N] [--before CHECKOUT]

PYTHON is an environment's interpreter with torch (e.g. the real CPU torch venv); it is only
read. Each repetition runs every case once, interleaved; each reports its median wall and CPU
seconds (user + system of every process it started) and a ratio to its baseline:

- `python -I -S -c pass`, the probes' own start; the integrity probe by size (every doctor but
  the strict one) and with --hash (doctor --strict); `openssl dgst -sha256` over the files the
  --hash run compares (torch's and bitsandbytes' RECORD-listed files), the hashing's baseline;
- the torch probe as today's doctor ran it (`PYTHON torch_probe.py`, reading the environment's
  cached bytecode), the baseline of: the sealed run (`-I -S -X pycache_prefix=` a fresh folder,
  through launch.py: every module compiled from its source, every file that ran listed), and
  the run as the environment starts (through launch.py) that the doctor compares with it;
- with --before: `jetson-install doctor --json` and `doctor --strict --json` on the Orin sample
  root, from CHECKOUT (the baseline) and from this one.

The files are read from the page cache after the first run: a first doctor after a reboot
reads them from disk as well.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
PROBES = REPO / "jetson_install" / "probes"
SAMPLE = "sample:agx-orin-64gb-jp6.2"


def timed(argv: Sequence[str], input_text: Optional[str] = None, env: Optional[Dict[str, str]] = None,
          check: bool = True) -> Tuple[float, float, str]:
    """Wall and CPU seconds of one process and what it waited for, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=check, input=input_text, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def hashed_files(python: str) -> List[str]:
    """What the integrity probe --hash compares: torch's and bitsandbytes' RECORD-listed files
    (their caches and the RECORD itself aside), as the probe lists them."""
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    files = []
    for record in sorted(Path(site).glob("*.dist-info/RECORD")):
        if record.parent.name.split("-")[0].lower() not in ("torch", "bitsandbytes"):
            continue
        for line in record.read_text().splitlines():
            path = line.rsplit(",", 2)[0]
            full = os.path.normpath(os.path.join(site, path))
            if "__pycache__/" not in path and not path.endswith(".dist-info/RECORD") and os.path.isfile(full):
                files.append(full)
    return files


class Case:
    """One measured command line, run anew for each sample (`fresh`: a new empty folder each time)."""

    def __init__(self, name: str, argv: Sequence[str], baseline: Optional[str] = None, fresh: bool = False,
                 input_text: Optional[str] = None, env: Optional[Dict[str, str]] = None, check: bool = True) -> None:
        self.name, self.argv, self.baseline, self.fresh = name, list(argv), baseline, fresh
        self.input_text, self.env, self.check = input_text, env, check
        self.walls: List[float] = []
        self.cpus: List[float] = []

    def run(self) -> None:
        folder = tempfile.mkdtemp(prefix="bench-proof-") if self.fresh else ""
        try:
            argv = [word.replace("{fresh}", folder) for word in self.argv]
            wall, cpu, _ = timed(argv, self.input_text, self.env, self.check)
        finally:
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
        self.walls.append(wall)
        self.cpus.append(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="an environment's interpreter with torch (only read)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", metavar="CHECKOUT", help="a checkout of jetson-install to time the doctor of")
    options = parser.parse_args()
    python = options.python
    files = hashed_files(python)
    size = sum(os.path.getsize(path) for path in files)
    probe = str(PROBES / "torch_probe.py")
    launch = str(PROBES / "launch.py")
    sealed_env = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
    cases = [
        Case("python -I -S -c pass", [python, "-I", "-S", "-c", "pass"]),
        Case("integrity probe, sizes (any doctor)", [python, "-I", "-S", str(PROBES / "integrity_probe.py")],
             "python -I -S -c pass"),
        Case("openssl dgst -sha256, the same files", ["xargs", "-0", "-n", "1000", "openssl", "dgst", "-sha256"],
             input_text="\0".join(files)),
        Case("integrity probe, --hash (doctor --strict)",
             [python, "-I", "-S", str(PROBES / "integrity_probe.py"), "--hash"], "openssl dgst -sha256, the same files"),
        Case("torch probe as today's doctor ran it", [python, probe]),
        Case("torch probe sealed, fresh pycache", [python, "-I", "-S", "-X", "pycache_prefix={fresh}", launch, "--sealed",
                                                   probe], "torch probe as today's doctor ran it", fresh=True,
             env=sealed_env),
        Case("torch probe as started, through launch.py", [python, launch, probe],
             "torch probe as today's doctor ran it"),
    ]
    if options.before:
        for strict in ((), ("--strict",)):
            label = "doctor" + (" --strict" if strict else "")
            for tree, name in ((options.before, f"{label} (before)"), (str(REPO), f"{label} (this checkout)")):
                env = dict(os.environ, PYTHONPATH=tree)
                cases.append(Case(name, [sys.executable, "-m", "jetson_install", "doctor", "--root", SAMPLE, "--python",
                                         python, "--json", *strict], None if tree == options.before
                                  else f"{label} (before)", env=env, check=False))
    for _ in range(options.repeat):
        for case in cases:
            case.run()
    by_name = {case.name: case for case in cases}
    print(f"{len(files)} files, {size / 1e6:.0f} MB hashed; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"medians of {options.repeat}")
    for case in cases:
        wall, cpu = statistics.median(case.walls), statistics.median(case.cpus)
        line = f"{case.name}: {wall:.3f} s wall, {cpu:.3f} s CPU"
        if "openssl" in case.name or "--hash" in case.name:
            line += f", {size / 1e6 / wall:.0f} MB/s"
        if case.baseline is not None:
            base = by_name[case.baseline]
            line += (f"; {wall / statistics.median(base.walls):.2f}x wall, "
                     f"{cpu / statistics.median(base.cpus):.2f}x CPU of {case.baseline}")
        print(line)


if __name__ == "__main__":
    main()
