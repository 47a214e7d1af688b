"""What a dead first vendor source costs an install that has a mirror, beside today's time to
fail with no mirror, on loopback.

The vendor set is resolved (vendor_sources.resolve, the read an install, `lock` and `plan --resolve`
make) from the stub vendor builds against four first sources, each with and without a mirror
of the same builds behind it:
  * healthy: it serves the builds (the baseline);
  * refused: nothing listens on its port;
  * 503: it answers every request with HTTP 503;
  * silent: it accepts the connection and never answers, so the read timeout decides.
Reported: each case's median seconds, and with a mirror the time lost to the dead first
source (the case minus the baseline); without one, the time to fail.

Run by hand from the repository root: .venv/bin/python bench/bench_mirrors.py [--repeat N]
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import build_index_dirs  # noqa: E402

from jetson_install.base.errors import JetsonInstallError  # noqa: E402
from jetson_install.base.sourced import Sourced  # noqa: E402
from jetson_install.catalog.catalog import VendorSource, load_catalog  # noqa: E402
from jetson_install.planning import vendor_sources  # noqa: E402
from jetson_install.tools import index  # noqa: E402


def dead_port() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/simple"


def raw_server(reply: Optional[bytes]) -> str:
    """A loopback socket answering every request with `reply` then a close; None: never answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: List[socket.socket] = []

    def serve() -> None:
        while True:
            connection, _ = listener.accept()
            connection.recv(65536)
            if reply is None:
                held.append(connection)
                continue
            connection.sendall(reply)
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/simple"


def seconds(action: Callable[[], object], repeat: int) -> "tuple[float, str]":
    samples: List[float] = []
    outcome = ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            resolution = action()
            outcome = f"set from {getattr(resolution, 'source', '?')}"
        except JetsonInstallError as exc:
            outcome = f"failed: {exc.message}"
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="samples per fast case (a silent source: 1)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-mirrors-"))
    dirs = build_index_dirs(work)
    catalog = work / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))
    primary = load_catalog(catalog).channel("jp6-cu126").primary
    assert primary is not None
    healthy = LoopbackIndex(dirs.vendor, name="first").start()
    mirror = LoopbackIndex(dirs.vendor, name="mirror").start()
    firsts = {
        "healthy": healthy.url,
        "refused": dead_port(),
        "503": raw_server(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"),
        "silent": raw_server(None),
    }

    def resolve(first: str, mirrors: "tuple[str, ...]") -> Callable[[], object]:
        source: VendorSource = dataclasses.replace(primary, index=first,
                                                   mirrors=tuple(Sourced(url, "--mirror") for url in mirrors))
        return lambda: vendor_sources.resolve(source, first, "3.10", "2.35")

    print(f"vendor set resolution, loopback, median of {args.repeat} (silent: 1); timeouts: connect "
          f"{index.CONNECT_TIMEOUT:g} s, read {index.READ_TIMEOUT:g} s")
    baseline, _ = seconds(resolve(healthy.url, ()), args.repeat)
    for name, first in firsts.items():
        repeat = 1 if name == "silent" else args.repeat
        with_mirror, outcome = seconds(resolve(first, (mirror.url,)), repeat)
        alone, failed = seconds(resolve(first, ()), repeat)
        print(f"  first source {name:8} with a mirror {with_mirror:7.3f} s (lost {with_mirror - baseline:+7.3f} s; "
              f"{outcome[:60]})")
        print(f"  {'':21} without        {alone:7.3f} s ({failed[:70]})")
    healthy.stop()
    mirror.stop()


if __name__ == "__main__":
    main()
