"""What two environments of one DIR cost on disk, against one, and against uv's cache.

A re-run with a changed source builds a second environment beside the first, which stays
as the rollback (`DIR.d/env-*`, `previous`). Whether that doubles the disk depends on how uv
puts files from its cache into an environment: hardlinks or reflinks on one filesystem cost
(almost) nothing, a copy costs everything again. Measured here, in one run:

  * same filesystem, uv's default link mode; and with UV_LINK_MODE=copy;
  * uv's cache on another filesystem (a tmpfs under /dev/shm, where there is one);
  * an index whose files may not be kept (Cache-Control: no-store), on one filesystem.

The wheels are the stub set of the tests with the stub vendor torch carrying the real CPU
torch's native files (torch/lib, torch/include, torch/share of the wheel the tests' setup
keeps on disk, found with --torch-wheel or PIP_FIND_LINKS): about 700 MB installed, 9,000+
files. Sizes are allocated bytes, every inode counted once (`du` counts hardlinks once too).
Goal (issue 24): the second environment costs at most 10% of the first on one filesystem.

Run by hand from the repository root: .venv/bin/python bench/bench_disk.py [--torch-wheel FILE]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests"))

from support import isolated_env  # noqa: E402
from support.catalogs import stub_catalog_text  # noqa: E402
from support.index_server import LoopbackIndex  # noqa: E402
from support.stub_projects import build_index_dirs, make_obliteratus_source  # noqa: E402

NATIVE = ("torch/lib/", "torch/include/", "torch/share/")


def find_torch_wheel(given: Optional[str]) -> Path:
    if given:
        return Path(given)
    for folder in os.environ.get("PIP_FIND_LINKS", "").split():
        found = sorted(Path(folder).glob("torch-*.whl"))
        if found:
            return found[-1]
    raise SystemExit("no real torch wheel: pass --torch-wheel FILE (tests/setup.d/10-real-torch-env uses one)")


def with_native_files(stub: Path, real: Path) -> None:
    """The stub wheel, rewritten in place with the real wheel's native files added (RECORD too)."""
    bigger = stub.with_suffix(".big")
    with zipfile.ZipFile(stub) as small, zipfile.ZipFile(real) as source, \
            zipfile.ZipFile(bigger, "w", zipfile.ZIP_DEFLATED) as out:
        record_name = next(name for name in small.namelist() if name.endswith(".dist-info/RECORD"))
        record = small.read(record_name).decode()
        for item in small.infolist():
            if item.filename != record_name:
                out.writestr(item, small.read(item))
        added = []
        for item in source.infolist():
            if item.filename.startswith(NATIVE) and not item.is_dir():
                data = source.read(item)
                out.writestr(item.filename, data)
                # Every file of a wheel but its RECORD is listed with its digest, or the install refuses it.
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                added.append(f"{item.filename},sha256={digest},{len(data)}\n")
        out.writestr(record_name, record + "".join(added))
    bigger.replace(stub)


def allocated(paths: Iterable[Path], seen: Optional[Set[Tuple[int, int]]] = None) -> int:
    """Allocated bytes under `paths`, each inode once (across all of them, and `seen` before)."""
    seen = set() if seen is None else seen
    total = 0
    for top in paths:
        for folder, directories, files in os.walk(top):
            for name in directories + files:
                info = os.lstat(os.path.join(folder, name))
                key = (info.st_dev, info.st_ino)
                if key not in seen:
                    seen.add(key)
                    total += info.st_blocks * 512
    return total


def mb(size: int) -> str:
    return f"{size / 1e6:8.1f} MB"


def scenario(name: str, work: Path, cache: Path, extra: Dict[str, str], tool: List[str], source: Path) -> str:
    place = Path(tempfile.mkdtemp(prefix="case-", dir=work))
    env = isolated_env(place)
    env.update(UV_CACHE_DIR=str(cache), **extra)
    venv = place / "env"
    home = Path(str(venv) + ".d")
    start = time.perf_counter()
    first = subprocess.run(tool + ["--venv", str(venv)], env=env, capture_output=True, text=True)
    if first.returncode:
        raise SystemExit(f"{name}: the first install failed:\n{first.stderr}")
    seconds = time.perf_counter() - start
    one = allocated([home])
    (source / "obliteratus" / "changed.py").write_text(f"# {name}\n")  # the source changed: a new environment
    second = subprocess.run(tool + ["--venv", str(venv)], env=env, capture_output=True, text=True)
    if second.returncode:
        raise SystemExit(f"{name}: the second install failed:\n{second.stderr}")
    environments = sorted(home.glob("env-*"))
    both = allocated([home])
    with_cache = allocated([home, cache])
    cache_alone = allocated([cache])
    warnings = [line for line in first.stderr.splitlines() + second.stderr.splitlines() if "hardlink" in line.lower()]
    lines = [f"{name}: {len(environments)} environments in {home.name} (first install {seconds:.1f} s)",
             f"  one environment {mb(one)}; both {mb(both)}: the second costs {mb(both - one)} "
             f"= {(both - one) / one:6.1%} of the first",
             f"  uv cache {mb(cache_alone)}; DIR.d and the cache together {mb(with_cache)} "
             f"(shared with the cache: {mb(both + cache_alone - with_cache)})"]
    lines += [f"  uv said: {line.strip()}" for line in warnings[:1]]
    shutil.rmtree(place, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch-wheel", help="a real torch wheel whose native files the stub torch carries")
    args = parser.parse_args()
    real = find_torch_wheel(args.torch_wheel)
    work = Path(tempfile.mkdtemp(prefix="bench-disk-", dir=os.environ.get("BENCH_DIR")))
    dirs = build_index_dirs(work / "indexes")
    stub = next(dirs.vendor.glob("torch-*.whl"))
    with_native_files(stub, real)
    source = make_obliteratus_source(work / "OBLITERATUS")
    catalog = work / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), dirs.vendor))
    print(f"vendor torch: {stub.name}, {mb(stub.stat().st_size).strip()} (native files from {real.name})")
    other_filesystem = Path("/dev/shm")

    def tool(vendor: LoopbackIndex, public: LoopbackIndex) -> List[str]:
        return [sys.executable, "-m", "jetson_install", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2",
                "--python", sys.executable, "--vendor-index", vendor.url, "--default-index", public.url,
                "--source", str(source), "--no-verify", "--yes"]

    extra = {"JETSON_INSTALL_WHEELS_INDEX": str(catalog)}
    # Files a real index serves may be kept (PyPI's are immutable), so uv reuses its cache entry.
    with LoopbackIndex(dirs.vendor, name="vendor", cache_files=True) as vendor, \
            LoopbackIndex(dirs.public, name="public", cache_files=True) as public:
        argv = tool(vendor, public)
        print(scenario("same filesystem, uv's default link mode", work, work / "cache-a", extra, argv, source))
        print(scenario("same filesystem, UV_LINK_MODE=copy", work, work / "cache-b", {**extra, "UV_LINK_MODE": "copy"},
                       argv, source))
        if other_filesystem.is_dir() and os.stat(other_filesystem).st_dev != os.stat(work).st_dev:
            cache = Path(tempfile.mkdtemp(prefix="bench-disk-cache-", dir=other_filesystem))
            print(scenario(f"uv's cache on another filesystem ({other_filesystem})", work, cache, extra, argv, source))
        else:
            print(f"(no second filesystem at {other_filesystem}: the cross-filesystem case was not measured)")
    # An index that forbids keeping its files (Cache-Control: no-store): uv fetches and unpacks again.
    with LoopbackIndex(dirs.vendor, name="vendor") as vendor, LoopbackIndex(dirs.public, name="public") as public:
        print(scenario("same filesystem, an index that says no-store", work, work / "cache-c", extra,
                       tool(vendor, public), source))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
