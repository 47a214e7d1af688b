"""Packages bitsandbytes/ (with the library CMake built into it) into a wheel, as upstream's
setup.py does under BNB_SKIP_CMAKE=1; without it upstream would run CMake again, so this
stand-in refuses."""

import base64
import hashlib
import os
import sys
import sysconfig
import zipfile
from pathlib import Path

NAME, VERSION = "bitsandbytes", "0.49.2"


def _tag():
    python = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    return f"{python}-{python}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if os.environ.get("BNB_SKIP_CMAKE") != "1":
        raise SystemExit("BNB_SKIP_CMAKE is not set: this would run CMake a second time")
    files = sorted(p for p in Path(NAME).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    if not any(p.name.startswith("libbitsandbytes_cuda") for p in files):
        raise SystemExit("no libbitsandbytes_cuda*.so in bitsandbytes/: run CMake first")
    dist_info = f"{NAME}-{VERSION}.dist-info"
    entries = [(str(p), p.read_bytes()) for p in files]
    entries.append((f"{dist_info}/METADATA", f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode()))
    entries.append((f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {_tag()}\n".encode()))
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for name, data in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = f"{NAME}-{VERSION}-{_tag()}.whl"
    with zipfile.ZipFile(Path(wheel_directory) / filename, "w") as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []
