"""A lock's files fetched by 1, 8 and 32 concurrent runners from each engine that can serve a
wheelhouse, on loopback, in one run: nginx (the baseline, with docs/fleets.md's server block),
`jetson-install wheelhouse DIR --serve`, an OCI registry (Debian's docker-registry, the wheelhouse
pushed with `wheelhouse --push`), and a site cache (a second registry in proxy mode in front of
the first), cold and then warm.

Each runner is a process of its own that fetches every file of the lock, eight at once, each
streamed and its sha256 checked as it arrives: the registry's blobs with the fetch step's own
client (`tools/oci.py`), the served wheelhouse's files with the same loop on one requests
session per thread (a runner's uv keeps its connections too). Reported,
for each number of runners: the time until the last runner has every file, as a ratio to nginx's
in the same run; and the bytes the first registry served, straight to the runners and through
the site cache (read from its own log).

The files: a stand-in for a torch wheel and small ones beside it, random bytes under wheel names
(the servers and the fetch never open them), `--megabytes` in all (default 64).

Run by hand from the repository root, as root or a user who can run nginx and docker-registry
(tests/setup.d/35-fleet-engines installs them): .venv/bin/python bench/bench_fleet_engines.py
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))

from support.engines import Nginx, Registry, free_port  # noqa: E402

from jetson_install.base.oci_ref import parse_reference  # noqa: E402
from jetson_install.catalog.lock_file import Lock, Locked, render_lock  # noqa: E402
from jetson_install.fleet.oci_wheelhouse import push_wheelhouse  # noqa: E402

RUNNERS = (1, 8, 32)
PARALLEL = 8  # files a runner fetches at once: the fetch step's _PARALLEL_BLOBS


def make_wheelhouse(folder: Path, megabytes: int) -> Path:
    """A wheelhouse of a big file (three quarters of the bytes) and 16 small ones, with its lock."""
    files = folder / "files"
    files.mkdir(parents=True)
    sizes = {"torch-2.5.0-cp311-cp311-linux_x86_64.whl": megabytes * 3 // 4 * 2**20}
    small = (megabytes * 2**20 - sizes["torch-2.5.0-cp311-cp311-linux_x86_64.whl"]) // 16
    sizes.update({f"dep{number}-1.0-py3-none-any.whl": small for number in range(16)})
    entries = []
    for name, size in sizes.items():
        data = os.urandom(size)
        (files / name).write_bytes(data)
        distribution, version = name.split("-")[:2]
        entries.append(Locked(distribution, version, f"https://index.example/files/{name}",
                              hashlib.sha256(data).hexdigest(), "default"))
    (folder / "lock.txt").write_text(render_lock(Lock("jp6-cu126", "3.11", "x86_64", "native", "none (the stack alone)",
                                                      None, "0", tuple(entries), (), "torch")))
    (folder / "simple").mkdir()
    return folder


RUNNER = r'''
import hashlib, sys, tempfile, threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import requests
from jetson_install.catalog.lock_file import parse_lock
kind, where, lock = sys.argv[1], sys.argv[2], Path(sys.argv[3])
entries = parse_lock(lock.read_text(), "lock").entries
out = Path(tempfile.mkdtemp(dir=sys.argv[5]))

if kind == "http":
    # As the registry's client does: one session (connections kept), each file streamed and hashed as it arrives.
    local = threading.local()
    def one(entry):
        session = getattr(local, "session", None) or requests.Session()
        local.session = session
        digest = hashlib.sha256()
        with session.get(f"{where}files/{entry.filename}", stream=True, timeout=(5, 60)) as answer:
            answer.raise_for_status()
            with (out / entry.filename).open("wb") as stream:
                for chunk in answer.iter_content(chunk_size=1 << 20):
                    digest.update(chunk)
                    stream.write(chunk)
        assert digest.hexdigest() == entry.sha256
else:
    from jetson_install.base.oci_ref import parse_reference
    from jetson_install.tools.oci import Registry
    reference = parse_reference(where, "bench")
    registry = Registry(reference, False)
    def one(entry):
        registry.fetch_blob(reference, "sha256:" + entry.sha256, out / entry.filename)

with ThreadPoolExecutor(int(sys.argv[4])) as pool:
    list(pool.map(one, entries))
'''


FAILED: Dict[str, List[str]] = {}  # engine and runners -> why runners failed


def fetch_all(kind: str, where: str, lock: Path, runners: int, name: str) -> float:
    """Seconds until the last of `runners` concurrent runner processes has every file (a
    runner that failed is counted in FAILED, with its last line). What they fetched is removed."""
    env = dict(os.environ, PYTHONPATH=str(TOP), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    fetched = Path(tempfile.mkdtemp(prefix="fetched-", dir=lock.parent.parent))
    try:
        started = time.perf_counter()
        processes = [subprocess.Popen([sys.executable, "-c", RUNNER, kind, where, str(lock), str(PARALLEL),
                                       str(fetched)], env=env, stderr=subprocess.PIPE) for _ in range(runners)]
        for process in processes:
            _, stderr = process.communicate()
            if process.returncode != 0:
                FAILED.setdefault(f"{name}, {runners} runners", []).append(stderr.decode().strip().splitlines()[-1])
        return time.perf_counter() - started
    finally:
        shutil.rmtree(fetched, ignore_errors=True)


def settled(registry: Registry) -> int:
    """The bytes the registry served, once its log stops growing (a proxy stores what it fetched after answering)."""
    last, since = -1, time.monotonic()
    while time.monotonic() - since < 3:
        now = served_bytes(registry)
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.2)
    return last


def serve_wheelhouse(house: Path) -> "tuple[subprocess.Popen[bytes], str]":
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "jetson_install", "wheelhouse", str(house), "--serve", "--bind",
                               "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import socket

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"http://127.0.0.1:{port}/"
        except OSError:
            time.sleep(0.05)
    raise SystemExit("wheelhouse --serve did not listen")


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process and its live children (nginx's workers), from /proc."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:  # fields[1]: the parent's pid
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    return total


def served_bytes(registry: Registry) -> int:
    return sum(sum(sent) for sent in registry.blob_bytes_served().values())


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=64, help="the lock's files, in all")
    parser.add_argument("--runners", type=int, nargs="*", default=list(RUNNERS))
    options = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-engines-"))
    house = make_wheelhouse(work / "house", options.megabytes)
    lock = house / "lock.txt"
    total = sum(path.stat().st_size for path in (house / "files").iterdir())
    print(f"{len(list((house / 'files').iterdir()))} files, {total / 2**20:.0f} MiB; load {os.getloadavg()}")

    nginx = Nginx(house, work / "nginx", lane="bench")
    served, served_url = serve_wheelhouse(house)
    origin = Registry(work / "registry", lane="bench")
    reference = origin.reference("bench/jp6", "v1")
    push_wheelhouse(house, parse_reference(reference, "--push"), False, lambda line: None)
    results: Dict[int, Dict[str, float]] = {}
    asked: Dict[int, Dict[str, int]] = {}
    cpus: Dict[int, Dict[str, float]] = {}  # the servers' CPU seconds per GB the runners received
    try:
        for runners in options.runners:
            row: Dict[str, float] = {}
            cpu: Dict[str, float] = {}

            def timed(name: str, kind: str, where: str, servers: Sequence[int],
                      row: Dict[str, float] = row, cpu: Dict[str, float] = cpu, runners: int = runners) -> None:
                before = sum(cpu_seconds(pid) for pid in servers)
                row[name] = fetch_all(kind, where, lock, runners, name)
                cpu[name] = sum(cpu_seconds(pid) for pid in servers) - before

            timed("nginx", "http", nginx.url, [nginx.process.pid])
            timed("--serve", "http", served_url, [served.pid])
            before = settled(origin)
            timed("registry", "oci", reference, [origin.process.pid])
            direct = settled(origin) - before
            cache = Registry(work / f"site-cache-{runners}", proxy=origin.url, lane="bench")
            try:
                before = settled(origin)
                timed("site cache, cold", "oci", cache.reference("bench/jp6", "v1"), [cache.process.pid, origin.process.pid])
                cold = settled(origin) - before
                timed("site cache, warm", "oci", cache.reference("bench/jp6", "v1"), [cache.process.pid, origin.process.pid])
                warm = settled(origin) - before - cold
            finally:
                cache.stop()
                shutil.rmtree(work / f"site-cache-{runners}", ignore_errors=True)
            gigabytes = runners * total / 2**30
            cpus[runners] = {name: seconds / gigabytes for name, seconds in cpu.items()}
            results[runners] = row
            asked[runners] = {"direct": direct, "cache cold": cold, "cache warm": warm}
            print(f"{runners} runners: " + ", ".join(f"{name} {seconds:.2f} s ({seconds / row['nginx']:.2f}x)"
                                                     for name, seconds in row.items())
                  + "; server CPU s/GB: " + ", ".join(f"{name} {value:.2f}" for name, value in cpus[runners].items())
                  + f"; the registry served {direct / total:.2f}x the files straight, {cold / total:.2f}x through the "
                    f"cold cache, {warm / total:.2f}x through the warm one; load {os.getloadavg()[0]:.1f}")
    finally:
        nginx.stop()
        served.terminate()
        served.wait()
        origin.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\n| runners | --serve | registry | site cache, cold | site cache, warm | first registry's bytes: straight / "
          "through the cache (cold, warm), in lock sizes |")
    print("|---|---|---|---|---|---|")
    for runners, row in results.items():
        ratio = {name: row[name] / row["nginx"] for name in row}
        print(f"| {runners} | {ratio['--serve']:.2f}x | {ratio['registry']:.2f}x | {ratio['site cache, cold']:.2f}x | "
              f"{ratio['site cache, warm']:.2f}x | {asked[runners]['direct'] / total:.2f} / "
              f"{asked[runners]['cache cold'] / total:.2f}, {asked[runners]['cache warm'] / total:.2f} |")
    print("\nthe servers' CPU seconds per GB the runners received (the site cache's: both registries')")
    for runners, row in cpus.items():
        # /proc counts in clock ticks (10 ms): nginx's sendfile may cost less than one for a small run.
        print(f"  {runners} runners: " + ", ".join(
            f"{name} {value:.2f}" + (f" ({value / row['nginx']:.1f}x)" if row["nginx"] else "") for name, value in row.items()))
    for where, why in FAILED.items():
        print(f"failed: {where}: {len(why)} runners ({why[0]})")


if __name__ == "__main__":
    main(sys.argv[1:])
