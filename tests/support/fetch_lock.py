"""Fetches, into FOLDER, every wheel the pylock.toml files (PEP 751) given after it name, each
checked against the sha256 the lock records, for the lanes that serve such a folder as a
loopback index (tests/setup.d/). A wheel no lock names any more is removed (the index would
offer it); a file already there was checked when it was written. Run by the test venv's Python:
    python tests/support/fetch_lock.py FOLDER LOCK...
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.request
from pathlib import Path
from typing import Dict, List

if sys.version_info >= (3, 11):
    import tomllib
else:  # the tool's own dependency before 3.11
    import tomli as tomllib


def wanted_wheels(locks: List[Path]) -> Dict[str, "tuple[str, str]"]:
    """File name -> (url, sha256) of every wheel the locks name."""
    wanted: Dict[str, "tuple[str, str]"] = {}
    for lock in locks:
        for package in tomllib.loads(lock.read_text(encoding="utf-8"))["packages"]:
            for wheel in package.get("wheels", []):
                wanted[wheel["url"].rsplit("/", 1)[1]] = (wheel["url"], wheel["hashes"]["sha256"])
    return wanted


def fetch(folder: Path, name: str, url: str, sha256: str) -> None:
    digest, partial = hashlib.sha256(), folder / (name + ".download")
    with urllib.request.urlopen(url, timeout=120) as answer, partial.open("wb") as out:
        for block in iter(lambda: answer.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != sha256:
        partial.unlink()
        sys.exit(f"{name}: sha256 {digest.hexdigest()}, the index says {sha256}")
    os.replace(partial, folder / name)
    print(name, sha256)


def main(folder: Path, locks: List[Path]) -> None:
    wanted = wanted_wheels(locks)
    for stale in folder.glob("*.whl"):
        if stale.name not in wanted:
            stale.unlink()
    for name, (url, sha256) in sorted(wanted.items()):
        if not (folder / name).is_file():
            fetch(folder, name, url, sha256)


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
