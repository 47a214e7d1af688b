"""`jetson-install lock` against `uv pip compile --generate-hashes` for the same packages, in one run.

`lock` makes a board's whole environment into one hashed lock on any machine: it reads the vendor
set from the vendor index, builds the target from its git source once into a wheel, and resolves
the rest with uv for the board's platform, every file with its sha256. By hand, the same
resolution is one `uv pip compile --generate-hashes` for the board's platform: the target from
the same git source and ref, the vendor files of the set by URL, the plan's constraints. Both run
with one warm uv cache, interleaved, so the figures compare what each does, not the downloads.

With --real-deps the public packages come from uv's default index: OBLITERATUS' real dependency
tree (transformers, datasets, pandas, scikit-learn, matplotlib and the rest), with the stub vendor
builds standing in for the Jetson torch.

With --before REV the tool at that git revision (a checkout of it, with its own catalog) locks
the same inputs in each round too, so that a change's effect is seen in one run.

Both sides find the interpreter uv builds with on the same PATH, less any `shims` folder: pyenv's
shims (this machine's) are bash scripts that run pyenv, some 150 processes each time uv looks
for a Python, which a board's PATH of system Pythons does not have; they added the same second
or so to both sides and hid the tool's own share.

Goal (issue 45): `lock` at most 1.3x `uv pip compile --generate-hashes`, in wall seconds. The
bench exits 1 where the goal is missed.

Run by hand from the repository root: .venv/bin/python bench/bench_lock.py [--repeat N] [--real-deps] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(TOP / "bench"))

from bench_install import Sample, before_checkout, bench_env, compared, timed  # noqa: E402
from support import find_uv  # noqa: E402
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import OBLITERATUS_TAG, build_index_dirs, make_obliteratus_git_repo  # noqa: E402

from jetson_install.base.tags import python_platform  # noqa: E402

#: The goal: `lock` at most this many times `uv pip compile --generate-hashes` by hand.
GOAL = 1.3
SAMPLE = "sample:agx-orin-64gb-jp6.2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--real-deps", action="store_true",
                        help="the public packages from uv's default index: OBLITERATUS' real dependency tree")
    parser.add_argument("--before", metavar="REV", help="a git revision of the tool to lock beside it in each round")
    args = parser.parse_args()
    # As an installed wheel would be: compiled, not recompiled on every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(TOP / "jetson_install")], check=True)
    work = Path(tempfile.mkdtemp(prefix="bench-lock-"))
    dirs = build_index_dirs(work / "indexes")
    repository = make_obliteratus_git_repo(work / "git" / "OBLITERATUS")
    env = bench_env(work, args.real_deps)
    env["PATH"] = os.pathsep.join(folder for folder in env["PATH"].split(os.pathsep) if Path(folder).name != "shims")
    catalog = work / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))
    env.update(JETSON_INSTALL_WHEELS_INDEX=str(catalog))
    # The tool at --before, run from its checkout (`python -m` puts that folder first on the path).
    before: Optional[Path] = None
    if args.before:
        before, before_catalog = before_checkout(args.before, work, dirs.vendor)
        before_env = dict(env, JETSON_INSTALL_WHEELS_INDEX=str(before_catalog))
    uv = find_uv()
    with LoopbackIndex(dirs.vendor, name="vendor", cache_files=True) as vendor, \
            LoopbackIndex(dirs.public, name="public", cache_files=True) as public:
        default_index = [] if args.real_deps else ["--default-index", public.url]
        options = ["obliteratus", "--root", SAMPLE, "--vendor-index", vendor.url, *default_index,
                   "--source", repository.as_uri(), "--ref", OBLITERATUS_TAG]

        def tool(output: Path) -> List[str]:
            return [sys.executable, "-m", "jetson_install", "lock", *options, "--output", str(output)]

        # The same inputs by hand: the plan `lock` resolves (its vendor files and constraints).
        planned = subprocess.run([sys.executable, "-m", "jetson_install", "plan", *options, "--resolve", "--json"],
                                 env=env, capture_output=True, text=True)
        if planned.returncode != 0:
            raise SystemExit(f"plan --resolve failed: {planned.stderr}")
        plan = json.loads(planned.stdout)
        requirements = work / "by-hand.in"
        requirements.write_text("\n".join(
            [plan["requirement"],
             *(f"{chosen['name']} @ {chosen['url']}" for chosen in plan["resolution"]["files"] if chosen["url"]),
             *plan["companions"], "pip"]) + "\n")
        constraints = work / "by-hand-constraints.txt"
        constraints.write_text("\n".join(plan["constraints"]) + "\n")
        # The board's platform, as `lock` names it to uv: its architecture and its Ubuntu's glibc.
        board = json.loads(subprocess.run([sys.executable, "-m", "jetson_install", "detect", "--root", SAMPLE, "--json"],
                                          env=env, capture_output=True, text=True, check=True).stdout)
        glibc = {"22.04": "2.35", "24.04": "2.39"}[board["ubuntu"]]

        def by_hand(output: Path) -> List[List[str]]:
            return [[uv, "pip", "compile", "--no-config", "--python-version", plan["python"], "--python-platform",
                     python_platform("aarch64", glibc), "--constraint", str(constraints), *default_index,
                     "--generate-hashes", "--no-header", "--output-file", str(output), str(requirements)]]

        timed([tool(work / "warm-up.lock")], env)  # fills the uv cache
        timed(by_hand(work / "warm-up.txt"), env)
        if before is not None:
            timed([tool(work / "warm-up-before.lock")], before_env, cwd=before)
        samples: Dict[str, List[Sample]] = {"tool": [], "hand": [], "before": []}
        # Interleaved, so a slow moment on a busy machine hits each alike.
        for n in range(args.repeat):
            samples["tool"].append(timed([tool(work / f"tool-{n}.lock")], env))
            samples["hand"].append(timed(by_hand(work / f"hand-{n}.txt"), env))
            if before is not None:
                samples["before"].append(timed([tool(work / f"before-{n}.lock")], before_env, cwd=before))
        locked = sum(1 for line in (work / "tool-0.lock").read_text().splitlines()
                     if line and not line.startswith(("#", " ")) and "--hash" in line)
        compiled = sum(1 for line in (work / "hand-0.txt").read_text().splitlines()
                       if line and not line.startswith(("#", " ")))

    print(f"load average {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs); medians of {args.repeat}; "
          f"{locked} files in the lock, {compiled} packages in uv's output")
    print(compared("lock:", samples["tool"], samples["hand"], "uv pip compile"))
    if before is not None:
        print(compared(f"lock at {args.before}:", samples["before"], samples["hand"], "uv pip compile"))
        print(compared("lock vs before:", samples["tool"], samples["before"], args.before))
        identical = (work / "tool-0.lock").read_bytes() == (work / "before-0.lock").read_bytes()
        print(f"the lock's text: {'the same' if identical else 'DIFFERENT'} at {args.before}")
        subprocess.run(["git", "-C", str(TOP), "worktree", "remove", "--force", str(before)], check=False)
    ratio = statistics.median(a.wall / b.wall for a, b in zip(samples["tool"], samples["hand"]))
    shutil.rmtree(work, ignore_errors=True)
    verdict = "met" if ratio <= GOAL else f"missed by {ratio - GOAL:.2f}x"
    print(f"goal: lock at most {GOAL}x uv pip compile --generate-hashes: {ratio:.2f}x, {verdict}")
    sys.exit(0 if ratio <= GOAL else 1)


if __name__ == "__main__":
    main()
