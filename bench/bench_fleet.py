"""A fleet from one wheelhouse against each runner resolving from upstream, on loopback.

Three simulated runners (each its own home and uv cache, as separate machines have) install
OBLITERATUS on stub wheels, in one run:
  * wheelhouse: one `jetson-install lock` + `wheelhouse` (the first runner's cost), served over
    http; every runner then runs `obliteratus --wheelhouse URL` with both indexes pointed at a
    dead port;
  * baseline: every runner runs `obliteratus` resolving from the "upstream" indexes.
Reported: the bytes of files fetched from upstream after the first runner (goal 0), and each
install's time, the wheelhouse times as ratios to the same run's baseline.

Run by hand from the repository root: .venv/bin/python bench/bench_fleet.py
"""

from __future__ import annotations

import functools
import http.server
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Sequence

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))

from support import isolated_env  # noqa: E402
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


def run(argv: List[str], env: Dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:5])} failed:\n{result.stderr}")
    return time.perf_counter() - start


def serve(directory: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


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
        made = run(tool + ["lock", *common, "--vendor-index", vendor.url, "--default-index", public.url,
                           "--source", str(source), "--output", str(lock)], builder)
        house = work / "wheelhouse"
        made += run(tool + ["wheelhouse", str(house), "--lock", str(lock)], builder)
        first = upstream_bytes(upstream, directories)
        for index in upstream:
            index.clear_requests()
        server = serve(house)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        dead = dead_url()
        from_house = [run(tool + ["obliteratus", *common, "--venv", str(work / f"house-{n}" / "env"),
                                  "--wheelhouse", url, "--vendor-index", dead, "--default-index", dead,
                                  "--no-verify", "--yes"], runner_env(f"house-{n}")) for n in range(RUNNERS)]
        house_upstream = upstream_bytes(upstream, directories)
        server.shutdown()
        for index in upstream:
            index.clear_requests()
        resolving, per_runner = [], []
        for n in range(RUNNERS):
            resolving.append(run(tool + ["obliteratus", *common, "--venv", str(work / f"live-{n}" / "env"),
                                         "--vendor-index", vendor.url, "--default-index", public.url,
                                         "--source", str(source), "--no-verify", "--yes"], runner_env(f"live-{n}")))
            per_runner.append(upstream_bytes(upstream, directories) - sum(per_runner))
    print(f"lock + wheelhouse, once: {made:.1f} s, {first} bytes from upstream")
    print(f"bytes from upstream after the first runner: wheelhouse {house_upstream} (goal 0), "
          f"each resolving {sum(per_runner[1:])} (runners 2-{RUNNERS}: {per_runner[1:]})")
    print("runner  wheelhouse  resolving  ratio")
    for n, (a, b) in enumerate(zip(from_house, resolving), start=1):
        print(f"{n:>6}  {a:>8.1f} s  {b:>7.1f} s  {a / b:.2f}x")


if __name__ == "__main__":
    main()
