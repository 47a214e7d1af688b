"""What reading GPU code costs: `inspect` of the real Thor torch wheel against listing its zip
directory, the same of its largest library on disk, and `add` with and without the check step's
reading of the added project's libraries.

    .venv/bin/python bench/bench_inspect.py [--repeat N] [--wheels DIR]

DIR is the Thor set tests/setup.d/25-thor-wheels downloads (default
~/.cache/jetson-install-tests/thor-cu130): its torch 2.13.0 wheel is read, and its bitsandbytes
0.50.2 CUDA 13.0 library is the added project's extension module in the `add` case, which runs on
the tests' loopback indexes of stub wheels (a sample Orin root, --no-verify) and is compared,
interleaved, with the same `add` whose check step skips the reading. Each case reports its
median wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(TOP))

from support import isolated_env  # noqa: E402
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import build_index_dirs  # noqa: E402
from support.wheels import build_wheel  # noqa: E402

from jetson_install.catalog.gpu_code import Board, load_rules  # noqa: E402
from jetson_install.envs.gpu_inspect import inspect_path  # noqa: E402

ORIN = "sample:agx-orin-64gb-jp6.2"
#: The check step without the reading: what `add` did before it.
WITHOUT = ("import jetson_install.running.handlers as handlers; handlers._check_gpu_code = lambda run, imports: []; "
           "from jetson_install.cli.main import main; main()")


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(action: Callable[[], object]) -> Tuple[float, float]:
    start, cpu = time.perf_counter(), _cpu()
    action()
    return time.perf_counter() - start, _cpu() - cpu


def line(name: str, samples: List[Tuple[float, float]]) -> Tuple[str, float]:
    wall = statistics.median(sample[0] for sample in samples)
    cpu = statistics.median(sample[1] for sample in samples)
    return f"{name:48} {wall:8.3f}s wall {cpu:8.3f}s CPU", wall


def run(argv: Sequence[str], env: Dict[str, str]) -> None:
    done = subprocess.run(list(argv), env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wheels", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                        / "jetson-install-tests" / "thor-cu130")
    options = parser.parse_args()
    torch = next(options.wheels.glob("torch-2.13.0-*.whl"), None)
    bnb = next(options.wheels.glob("bitsandbytes-0.50.2-*.whl"), None)
    if torch is None or bnb is None:
        raise SystemExit(f"no torch 2.13.0 or bitsandbytes 0.50.2 wheel in {options.wheels}: run tests/setup (25-thor-wheels)")
    thor, rules = Board(110, "sbsa", (13, 0)), load_rules()
    work = Path(tempfile.mkdtemp(prefix="bench-inspect-"))
    library = work / "libtorch_cuda.so"
    with zipfile.ZipFile(torch) as archive, archive.open("torch/lib/libtorch_cuda.so") as member, library.open("wb") as out:
        while True:
            chunk = member.read(1 << 20)
            if not chunk:
                break
            out.write(chunk)

    results: Dict[str, List[Tuple[float, float]]] = {name: [] for name in (
        "list the torch wheel's zip directory", "inspect the torch wheel",
        "stat libtorch_cuda.so (430 MB) on disk", "inspect libtorch_cuda.so on disk")}
    for _ in range(options.repeat):
        results["list the torch wheel's zip directory"].append(timed(lambda: zipfile.ZipFile(torch).infolist()))
        results["inspect the torch wheel"].append(timed(lambda: inspect_path(torch, thor, rules, (), Path("/"), "aarch64")))
        results["stat libtorch_cuda.so (430 MB) on disk"].append(timed(lambda: library.stat()))
        results["inspect libtorch_cuda.so on disk"].append(timed(lambda: inspect_path(library, thor, rules, (), Path("/"),
                                                                                       "aarch64")))
    library.unlink()

    # add, with and without the check step's reading, on loopback indexes.
    dirs = build_index_dirs(work / "indexes")
    with zipfile.ZipFile(bnb) as archive:
        extension = archive.read("bitsandbytes/libbitsandbytes_cuda130.so")
    build_wheel(dirs.public, "gpu-addon", "1.0", requires=("torch>=1.8.0",), source_index="public",
                modules={"gpu_addon/_C.so": extension})
    catalog = work / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))
    env = isolated_env(work)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    venv = work / "stack"
    with LoopbackIndex(dirs.vendor, name="vendor", cache_files=True) as vendor, \
            LoopbackIndex(dirs.public, name="public", cache_files=True) as public:
        tool = [sys.executable, "-m", "jetson_install"]
        run(tool + ["torch", "--root", ORIN, "--venv", str(venv), "--python", sys.executable, "--vendor-index",
                    vendor.url, "--default-index", public.url, "--no-verify", "--yes"], env)
        add = ["add", "--venv", str(venv), "gpu-addon", "--yes"]
        cases = {"add, the check step reading the addition": tool + add,
                 "add, without the reading": [sys.executable, "-c", WITHOUT] + add}
        for name in cases:
            results[name] = []
        run(cases["add, without the reading"], env)  # uv's cache warm: each case then installs from it
        run(tool + ["rollback", "--venv", str(venv)], env)
        for _ in range(options.repeat):
            for name, argv in cases.items():
                results[name].append(timed(lambda argv=argv: run(argv, env)))  # type: ignore[misc]
                run(tool + ["rollback", "--venv", str(venv)], env)
    walls = {}
    for name, samples in results.items():
        text, walls[name] = line(name, samples)
        print(text)
    listing = walls["list the torch wheel's zip directory"]
    print(f"inspect of the torch wheel / listing its directory: {walls['inspect the torch wheel'] / listing:.0f}x")
    print(f"add with the reading / without: {walls['add, the check step reading the addition'] / walls['add, without the reading']:.3f}x")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
