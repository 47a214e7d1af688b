"""What the fetch step costs a user: bytes fetched, wall time and disk, in one run.

The fetch step downloads every vendor file itself, checks its sha256 and its own RECORD, keeps
it in the per-user cache of checked wheels, and uv installs it from there. Before it, uv
downloaded the vendor files into its own cache (`uv pip install --no-deps URL#sha256=...`).
Measured here against loopback indexes of the tests' stub wheels, the stub vendor torch
carrying the real CPU torch's native files (bench_disk.py's set, several hundred MB):

  * a cold install (empty caches: a first install on a board): the bytes the indexes served,
    the wall time, and what the caches then hold (uv's, and the checked wheels);
  * a second environment (a changed source: a rebuild, the caches warm): the same;

for the tool, and for a baseline: with --before REV, the tool at that git revision (a checkout
made for the run, run from the same virtual environment), else the same uv commands by hand,
the vendor files downloaded by uv as the vendor step did before the fetch step. Each figure is
the tool's over the baseline's, from the same run.

With --wheel FILE (a real vendor wheel: Thor's torch), what checking one wheel costs instead:
its sha256 and its RECORD against every member (envs/manifest.py's read_wheel), against
`openssl dgst -sha256` of the same file (one hashing pass) and `unzip -qq` of it (the
decompression an install does anyway), in CPU seconds of the process, medians of --repeat.

Run by hand from the repository root:
    .venv/bin/python bench/bench_fetch.py [--before REV] [--torch-wheel FILE] [--repeat N]
    .venv/bin/python bench/bench_fetch.py --wheel FILE [--repeat N]
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
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(TOP / "bench"))

from bench_disk import allocated, find_torch_wheel, with_native_files  # noqa: E402
from support import VENDOR_PINS, find_uv, isolated_env  # noqa: E402
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import build_index_dirs, make_obliteratus_source  # noqa: E402


class Run(NamedTuple):
    seconds: float
    served: int  # bytes the indexes sent: listings, metadata and files
    cached: int  # allocated bytes in uv's cache and the tool's own, each inode once
    steps: Dict[str, float]  # an install's own steps' seconds (none by hand)


def measured(commands: List[List[str]], env: Dict[str, str], indexes: List[LoopbackIndex],
             caches: List[Path]) -> Run:
    for index in indexes:
        index.clear_requests()
    start, steps = time.perf_counter(), {}
    for argv in commands:
        # Outside the checkout: `python -m` puts the folder it runs in first on the path.
        done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
        if done.returncode != 0:
            raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-3000:]}")
        if "jetson_install" in argv:
            steps = {step["id"]: step["seconds"] for step in json.loads(done.stdout)["steps"]}
    seconds = time.perf_counter() - start
    return Run(seconds, sum(index.bytes_sent for index in indexes), allocated([cache for cache in caches if cache.exists()]),
               steps)


def before_checkout(revision: str, work: Path) -> Path:
    """The tool at `revision`, checked out for this run (its catalog included)."""
    folder = work / "before"
    subprocess.run(["git", "-C", str(TOP), "worktree", "add", "--detach", "-q", str(folder), revision], check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", help="a git revision of the tool to compare with (default: uv by hand)")
    parser.add_argument("--torch-wheel", help="the real CPU torch wheel whose native files the stub torch carries")
    parser.add_argument("--wheel", help="a real vendor wheel: what checking it costs, against openssl and unzip")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    if args.wheel:
        try:
            one_wheel(Path(args.wheel), work, args.repeat)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    before = before_checkout(args.before, work) if args.before else None
    try:
        report(work, args.repeat, before, find_torch_wheel(args.torch_wheel))
    finally:
        if before is not None:
            subprocess.run(["git", "-C", str(TOP), "worktree", "remove", "--force", str(before)], check=False)
        shutil.rmtree(work, ignore_errors=True)


def report(work: Path, repeat: int, before: Optional[Path], torch_wheel: Path) -> None:
    dirs = build_index_dirs(work / "indexes")
    with_native_files(next(dirs.vendor.glob("torch-*.whl")), torch_wheel)
    source = make_obliteratus_source(work / "OBLITERATUS")
    changed = work / "OBLITERATUS-changed"
    shutil.copytree(source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 1\n")
    catalog = work / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))
    uv = find_uv()
    pins = [f"{name}=={version}" for name, version in VENDOR_PINS.items()]
    constraints = work / "constraints.txt"
    constraints.write_text("\n".join(sorted(pins) + ["numpy<2"]) + "\n")
    vendor_bytes = sum(path.stat().st_size for path in dirs.vendor.glob("*.whl") if path.name.split("-")[0] in VENDOR_PINS)
    print(f"vendor files: {vendor_bytes / 1e6:.0f} MB (torch with the real CPU torch's native files)")
    rows: Dict[str, Dict[str, List[Run]]] = {"cold": {"tool": [], "base": []}, "rebuild": {"tool": [], "base": []}}
    with LoopbackIndex(dirs.vendor, name="vendor", cache_files=True) as vendor, \
            LoopbackIndex(dirs.public, name="public", cache_files=True) as public:
        urls = {path.name.split("-")[0]: f"{vendor.base_url}/files/{path.name}#sha256={_sha256(path)}"
                for path in dirs.vendor.glob("*.whl")}

        def tool(venv: Path, given: Path) -> List[List[str]]:
            return [[sys.executable, "-m", "jetson_install", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2",
                     "--venv", str(venv), "--python", sys.executable, "--vendor-index", vendor.url,
                     "--default-index", public.url, "--source", str(given), "--no-verify", "--yes", "--json"]]

        def by_hand(venv: Path, given: Path) -> List[List[str]]:
            python = str(venv / "bin" / "python")
            return [[uv, "venv", "--seed", "--python", sys.executable, "--default-index", public.url, str(venv)],
                    [uv, "pip", "install", "--python", python, "--no-deps", "--default-index", vendor.url,
                     *[f"{name} @ {urls[name]}" for name in VENDOR_PINS]],
                    [uv, "pip", "install", "--python", python, "--constraint", str(constraints), "--default-index",
                     public.url, f"obliteratus[quantization] @ {given.as_uri()}", *pins]]

        for number in range(repeat):
            for side in ("tool", "base"):
                place = work / f"{side}-{number}"
                env = isolated_env(place)
                env.update(JETSON_INSTALL_WHEELS_INDEX=str(catalog))
                # The tool's own checkout, or the revision compared with, first on the path.
                program = before if side == "base" and before is not None else TOP
                make: Callable[[Path, Path], List[List[str]]] = by_hand
                if side == "tool" or before is not None:
                    env["PYTHONPATH"] = str(program)
                    make = tool
                caches = [Path(env["UV_CACHE_DIR"]), Path(env["XDG_CACHE_HOME"]) / "jetson-install" / "wheels"]
                first, second = place / "obl", place / "obl-rebuild"
                rows["cold"][side].append(measured(make(first, source), env, [vendor, public], caches))
                # The tool's rebuild is its own re-run with a changed source; by hand, a second venv.
                again = first if make is not by_hand else second
                rows["rebuild"][side].append(measured(make(again, changed), env, [vendor, public], caches))
                shutil.rmtree(place, ignore_errors=True)
    base = "jetson-install at the --before revision" if before is not None else "uv by hand"
    print(f"baseline: {base}; medians of {repeat}; load {os.getloadavg()[0]:.1f}")
    for what, sides in rows.items():
        tool_runs, base_runs = sides["tool"], sides["base"]
        line = [f"{what:8}"]
        for field, unit, scale in (("seconds", "s", 1.0), ("served", "MB", 1e6), ("cached", "MB", 1e6)):
            mine = statistics.median(getattr(run, field) for run in tool_runs) / scale
            theirs = statistics.median(getattr(run, field) for run in base_runs) / scale
            ratio = f"{mine / theirs:.2f}x" if theirs else ("1.00x" if not mine else "n/a")
            line.append(f"{field} {mine:.1f} {unit} vs {theirs:.1f} {unit} ({ratio})")
        print("  ".join(line))
        for side, runs in (("tool", tool_runs), ("baseline", base_runs)):
            named = sorted({name for run in runs for name in run.steps}, key=lambda name: list(runs[0].steps).index(name))
            if named:
                print(f"  {side} steps (s): " + ", ".join(
                    f"{name} {statistics.median(run.steps.get(name, 0.0) for run in runs):.1f}" for name in named))


def one_wheel(wheel: Path, work: Path, repeat: int) -> None:
    """CPU seconds of read_wheel on `wheel` in a process of its own, against openssl's sha256 and
    unzip's full decompression of the same file (the page cache warm for all three)."""
    check = ("import sys; from pathlib import Path; from jetson_install.envs.manifest import read_wheel; "
             "print(len(read_wheel(Path(sys.argv[1]), None, 'a bench').files))")
    cases = {"read_wheel": [sys.executable, "-c", check, str(wheel)],
             "openssl dgst -sha256": ["openssl", "dgst", "-sha256", str(wheel)],
             "unzip -qq": ["unzip", "-qq", "-o", str(wheel), "-d", str(work / "unzipped")]}
    subprocess.run(["cat", str(wheel)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
    cpu: Dict[str, List[float]] = {name: [] for name in cases}
    wall: Dict[str, List[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, argv in cases.items():
            before, start = os.times(), time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
            after = os.times()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(after.children_user + after.children_system - before.children_user - before.children_system)
            shutil.rmtree(work / "unzipped", ignore_errors=True)
    size = wheel.stat().st_size
    print(f"{wheel.name}: {size / 1e6:.0f} MB; medians of {repeat}; load {os.getloadavg()[0]:.1f}")
    floor = statistics.median(cpu["openssl dgst -sha256"])
    for name in cases:
        mine = statistics.median(cpu[name])
        print(f"  {name:22} {mine:6.2f} s CPU ({mine / floor:.2f}x openssl), {statistics.median(wall[name]):6.2f} s wall")


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


if __name__ == "__main__":
    main()
