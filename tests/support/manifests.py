"""What a test checks of an environment's vendor-files.json: a distribution's entry is the wheel's
own RECORD, read here from the archive independently of the tool, and the installed files are
those bytes."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any, Dict

from .wheels import sha256_file

__all__ = ["manifest_of", "record_in_wheel", "assert_measured_from"]


def manifest_of(environment: Path) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((environment / "jetson-install" / "vendor-files.json").read_text())
    assert data["format"] == 1
    return data


def record_in_wheel(wheel: Path) -> Dict[str, str]:
    """Path (as installed, relative to site-packages) -> hex sha256, as the wheel's RECORD lists them."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(name).decode("utf-8"))))
    found = {}
    for path, hashed, _ in (row for row in rows if row):
        if not hashed or path.rsplit("/", 1)[-1] in ("INSTALLER", "REQUESTED", "direct_url.json"):
            continue
        top, _, rest = path.partition("/")
        if top.endswith(".data"):
            scheme, _, inside = rest.partition("/")
            if scheme not in ("purelib", "platlib"):
                continue
            path = inside
        algorithm, _, digest = hashed.partition("=")
        assert algorithm == "sha256", hashed
        found[path] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return found


def assert_measured_from(environment: Path, name: str, wheel: Path) -> None:
    """`name`'s entry is measured from `wheel` (its sha256, its RECORD), and the environment's
    installed files are exactly those bytes."""
    entry = manifest_of(environment)["distributions"][name]
    assert entry["measured"] is True and entry["wheel"] == wheel.name, entry
    assert entry["wheel_sha256"] == sha256_file(wheel)
    assert entry["files"] == record_in_wheel(wheel)
    [site_packages] = (environment / "lib").glob("python*/site-packages")
    for path, digest in entry["files"].items():
        assert hashlib.sha256((site_packages / path).read_bytes()).hexdigest() == digest, path
