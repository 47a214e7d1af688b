"""A fleet from one wheelhouse against each runner resolving from upstream, on loopback.

Three simulated runners (each its own home and uv cache, as separate machines have) install
OBLITERATUS on stub wheels, in one run:
  * wheelhouse: one `jetson-install lock` + `wheelhouse` (the first runner's cost); every runner
    then runs `obliteratus --wheelhouse` with both indexes pointed at a dead port, three ways:
    served by `python3 -m http.server`, served by `jetson-install wheelhouse DIR --serve`, and
    read from the folder itself;
  * baseline: every runner runs `obliteratus` resolving from the "upstream" indexes.
Reported: the bytes of files fetched from upstream per runner (goal 0 from a wheelhouse), each
install's time as a ratio to the same runner's resolving install (goal, issue 24: at most
0.8x), and each step's seconds (the install's --json result) for every kind.

Run by hand from the repository root: .venv/bin/python bench/bench_fleet.py
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))

from support import board_of_this_machine, isolated_env  # noqa: E402
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import build_index_dirs, make_obliteratus_source  # noqa: E402

RUNNERS = 3


def upstream_bytes(indexes: Sequence[LoopbackIndex], directories: Sequence[Path]) -> int:
    """Bytes of the files the indexes served in full since their last clear_requests()."""
    total = 0
    for index, directory in zip(indexes, directories):
        for name in index.downloaded_files():
            from urllib.parse import unquote

            total += (directory / unquote(name)).stat().st_size
    return total


def run(argv: List[str], env: Dict[str, str]) -> Tuple[float, Dict[str, float]]:
    """The command's wall seconds and, for an install (--json), each step's seconds as its
    result reports them, with "outside steps" for the rest (start-up, checks, the no-op test)."""
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:5])} failed:\n{result.stderr}")
    steps: Dict[str, float] = {}
    if "--json" in argv and "obliteratus" in argv:
        steps = {step["id"]: step["seconds"] for step in json.loads(result.stdout)["steps"]}
        steps["outside steps"] = seconds - sum(steps.values())
    return seconds, steps


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(argv: List[str], port: int) -> "subprocess.Popen[bytes]":
    """A server started as a user starts it, once it answers on `port`."""
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{' '.join(argv)} did not start")


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/simple/"


def main() -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(TOP / "jetson_install")], check=True)
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    dirs = build_index_dirs(work / "indexes")
    source = make_obliteratus_source(work / "OBLITERATUS")
    catalog = work / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))

    def runner_env(name: str) -> Dict[str, str]:
        env = isolated_env(work / name)  # its own home and uv cache: another machine
        env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
        return env

    tool = [sys.executable, "-m", "jetson_install"]
    common = ["--root", "sample:agx-orin-64gb-jp6.2", "--python", sys.executable]
    with LoopbackIndex(dirs.vendor, name="vendor") as vendor, LoopbackIndex(dirs.public, name="public") as public:
        upstream, directories = (vendor, public), (dirs.vendor, dirs.public)
        builder = runner_env("builder")
        lock = work / "fleet.lock"
        # A lock for this machine's interpreter is made on a board of its architecture.
        board = ["--root", str(board_of_this_machine(work)), "--python", sys.executable]
        made = run(tool + ["lock", *board, "--vendor-index", vendor.url, "--default-index", public.url,
                           "--source", str(source), "--output", str(lock)], builder)[0]
        house = work / "wheelhouse"
        made += run(tool + ["wheelhouse", str(house), "--lock", str(lock)], builder)[0]
        first = upstream_bytes(upstream, directories)
        plain_port, own_port = free_port(), free_port()
        servers = [serve([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(house),
                          str(plain_port)], plain_port),
                   serve(tool + ["wheelhouse", str(house), "--serve", "--bind", "127.0.0.1", "--port", str(own_port)],
                         own_port)]
        dead = dead_url()
        wheelhouses = {"http.server": f"http://127.0.0.1:{plain_port}/", "--serve": f"http://127.0.0.1:{own_port}/",
                       "folder": str(house)}
        installs = {kind: ["--wheelhouse", where, "--vendor-index", dead, "--default-index", dead]
                    for kind, where in wheelhouses.items()}
        installs["resolving"] = ["--vendor-index", vendor.url, "--default-index", public.url, "--source", str(source)]
        seconds: Dict[str, List[float]] = {kind: [] for kind in installs}
        steps: Dict[str, List[Dict[str, float]]] = {kind: [] for kind in installs}
        fetched: Dict[str, List[int]] = {kind: [] for kind in installs}
        # Interleaved, runner by runner, so a busy moment on a shared machine hits every kind alike.
        for n in range(RUNNERS):
            for kind, options in installs.items():
                for index in upstream:
                    index.clear_requests()
                wall, step_seconds = run(tool + ["obliteratus", *common, "--venv", str(work / f"{kind}-{n}" / "env"),
                                                 *options, "--no-verify", "--yes", "--json"],
                                         runner_env(f"{kind}-{n}"))
                seconds[kind].append(wall)
                steps[kind].append(step_seconds)
                fetched[kind].append(upstream_bytes(upstream, directories))
        for server in servers:
            server.terminate()
            server.wait()
    print(f"lock + wheelhouse, once: {made:.1f} s, {first} bytes from upstream")
    print("bytes from upstream per runner: " + ", ".join(f"{kind} {fetched[kind]}" for kind in installs)
          + " (goal for a wheelhouse: 0)")
    print("runner  " + "".join(f"{kind:>22}" for kind in installs))
    for n in range(RUNNERS):
        base = seconds["resolving"][n]
        print(f"{n + 1:>6}  " + "".join(f"{seconds[kind][n]:>9.2f} s ({seconds[kind][n] / base:4.2f}x)"
                                        for kind in installs))
    print("each step's seconds (median of the runners)")
    names = list(dict.fromkeys(name for kind in installs for result in steps[kind] for name in result))
    print(f"{'step':>14}  " + "".join(f"{kind:>12}" for kind in installs))
    for name in names:
        cells = []
        for kind in installs:
            values = [result[name] for result in steps[kind] if name in result]
            cells.append(f"{statistics.median(values):>12.2f}" if values else f"{'-':>12}")
        print(f"{name:>14}  " + "".join(cells))


if __name__ == "__main__":
    main()
