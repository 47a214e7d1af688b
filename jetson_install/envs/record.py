"""What an install put in an environment, kept in its state folder (vendor.json), and how
the environment's packages are read back (their dist-info folders: no interpreter started).

The record names each vendor file, its sha256, wheel tags and RECORD digest, torch's CUDA
version and the companions, so a later swap of the same version is seen by the doctor and
repaired by a re-run.
"""

from __future__ import annotations

import bisect
import csv
import dataclasses
import hashlib
import heapq
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name

from jetson_install.base.errors import JetsonInstallError
from jetson_install.base.layout import RECORD_FILE, STATE_DIR
from jetson_install.base.outputs import write_own
from jetson_install.base.redact import redact
from jetson_install.catalog.identity import Companion, Resolution
from jetson_install.probes.dist_records import INSTALLER_FILES

__all__ = ["InstalledPackage", "EnvironmentRecord", "installed_package", "installed_versions", "installed_torch_cuda",
           "read_record", "write_record", "record_path", "record_built", "record_installed"]


@dataclass(frozen=True)
class InstalledPackage:
    """A distribution as it sits in site-packages: its wheel tag, its RECORD's digest, and the
    digest of the wheel's own files as its RECORD lists them (`files_digest`: None in a record
    an older jetson-install wrote)."""

    name: str
    version: str
    tags: Tuple[str, ...]
    record_digest: str
    files_digest: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "tags": list(self.tags), "record_sha256": self.record_digest,
                "files_sha256": self.files_digest}


def _dist_infos(environment: Path) -> Iterable[Path]:
    return environment.glob("lib/python*/site-packages/*.dist-info")


def _dist_info(environment: Path, name: str) -> Optional[Path]:
    wanted = canonicalize_name(name)
    for dist_info in _dist_infos(environment):
        if canonicalize_name(dist_info.name[: -len(".dist-info")].partition("-")[0]) == wanted:
            return dist_info
    return None


def installed_package(environment: Path, name: str) -> Optional[InstalledPackage]:
    """Read `name`'s dist-info in the environment (a file read: the tool never imports torch)."""
    dist_info = _dist_info(environment, name)
    return None if dist_info is None else _read_package(dist_info, name, files=True)[0]


def _read_package(dist_info: Path, name: str, files: bool) -> Tuple[InstalledPackage, Optional[bytes]]:
    """The package a dist-info holds, and its RECORD's bytes (None where it cannot be read);
    `files`: with the digest of the wheel's own files (else None: a caller that finds the
    RECORD unchanged needs none)."""
    version = dist_info.name[: -len(".dist-info")].partition("-")[2]
    try:
        wheel = (dist_info / "WHEEL").read_text(encoding="utf-8", errors="replace")
        record = (dist_info / "RECORD").read_bytes()
    except OSError:
        return InstalledPackage(name, version, (), "missing"), None
    tags = tuple(line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:"))
    return InstalledPackage(name, version, tags, hashlib.sha256(record).hexdigest(),
                            _files_digest(dist_info.name, record) if files else None), record


def _files_digest(dist_info: str, record: bytes) -> str:
    """The digest of the wheel's own files as the RECORD lists them (its rows, in sorted
    order: pip sorts them, uv keeps the wheel's), without what the installer wrote or generated:
    INSTALLER_FILES, compiled __pycache__ files, and what lies outside the site folder (console
    scripts, and a wheel's scripts whose shebang it rewrites). So the same wheel installed
    again, by uv or by pip, gives the same digest, and any other file of the wheel does not."""
    rows = sorted(record.splitlines())
    # Sorted, each prefix's rows lie together: cut them out without a pass over torch's 15 000.
    for prefix in (b"../", b'"../', *(f"{dist_info}/{name},".encode() for name in INSTALLER_FILES)):
        first = last = bisect.bisect_left(rows, prefix)
        while last < len(rows) and rows[last].startswith(prefix):
            last += 1
        del rows[first:last]
    if b"__pycache__" in record:
        rows = [row for row in rows if b"__pycache__/" not in row]
    return hashlib.sha256(b"\n".join(rows)).hexdigest()


#: How many of a distribution's files beyond its top-level __init__.py files are looked at:
#: the largest (torch's CUDA libraries) and some spread over the RECORD.
_LARGEST, _SPREAD = 4, 12


def _missing_files(dist_info: Path, record: bytes) -> List[str]:
    """Files the dist-info's RECORD (`record`, its bytes) lists that are gone or of another size,
    from a spot-check: every top-level package's __init__.py, the largest files and a spread of
    the rest, by stat alone (a deleted `torch/` is seen without hashing gigabytes)."""
    lines = record.decode("utf-8", errors="replace").splitlines()
    entries: List[Tuple[str, Optional[int]]] = []
    for line in lines:
        # path,hash,size; csv only for a quoted path (one with a comma), since torch's RECORD has 15 000 lines.
        row = next(csv.reader([line])) if line.startswith('"') else line.rsplit(",", 2)
        if len(row) == 3 and "__pycache__" not in row[0] and not row[0].endswith(".dist-info/RECORD"):
            entries.append((row[0], int(row[2]) if row[2].isdigit() else None))
    # In the RECORD's own order: a spread over the files, whatever order an installer wrote.
    chosen = {entry for entry in entries if entry[0].endswith("/__init__.py") and entry[0].count("/") == 1}
    chosen.update(heapq.nlargest(_LARGEST, entries, key=lambda entry: entry[1] or 0))
    chosen.update(entries[index * len(entries) // _SPREAD] for index in range(min(_SPREAD, len(entries))))
    site_packages = dist_info.parent
    problems = []
    for path, size in sorted(chosen):
        try:
            found = (site_packages / path).stat().st_size
        except OSError:
            problems.append(f"{path} is gone")
            continue
        if size is not None and found != size:
            problems.append(f"{path} has {found} bytes, not {size}")
    return problems


def installed_versions(environment: Path) -> Dict[str, str]:
    """Normalized distribution name -> version of what the environment's site-packages holds,
    read from the header of each dist-info's METADATA: no interpreter started, and the
    environment's own files, not the tool's interpreter's view of them."""
    found: Dict[str, str] = {}
    for folder in sorted(environment.glob("lib/python*/site-packages")):
        for metadata in sorted([*folder.glob("*.dist-info/METADATA"), *folder.glob("*.egg-info/PKG-INFO")]):
            name, version = _name_and_version(metadata)
            if name and version:
                found.setdefault(canonicalize_name(name), version)
    return found


def distributions_state(environment: Path) -> str:
    """A digest of what `uv pip check` judges in the environment, by stat alone: each
    dist-info (and egg-info) folder's name with its metadata file's inode, size and time, and
    the interpreter's binary (its version and platform decide markers). Installing, removing
    or reinstalling any distribution, with pip or uv, changes it; a reinstall linked from the
    same cache file keeps it, and with it the very metadata uv read."""
    digest = hashlib.sha256()
    for folder in sorted(environment.glob("lib/python*/site-packages")):
        with os.scandir(folder) as entries:
            names = sorted(entry.name for entry in entries if entry.name.endswith((".dist-info", ".egg-info")))
        for name in names:
            metadata = folder / name / ("METADATA" if name.endswith(".dist-info") else "PKG-INFO")
            digest.update(f"{folder.name}/{name} {_stat_key(metadata if metadata.exists() else folder / name)}\n"
                          .encode())
    digest.update(f"python {_stat_key(environment / 'bin' / 'python')}\n".encode())
    return digest.hexdigest()


def _stat_key(path: Path) -> str:
    try:
        found = path.stat()
    except OSError:
        return "gone"
    return f"{found.st_ino} {found.st_size} {found.st_mtime_ns}"


def _name_and_version(metadata: Path) -> Tuple[str, str]:
    """The Name and Version fields of a core metadata file's header (it ends at the first blank line)."""
    fields: Dict[str, str] = {}
    try:
        with metadata.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip():
                    break
                key, colon, value = line.partition(":")
                if colon and key in ("Name", "Version"):
                    fields.setdefault(key, value.strip())
    except OSError:
        pass
    return fields.get("Name", ""), fields.get("Version", "")


def installed_torch_cuda(environment: Path) -> Optional[str]:
    """torch.version.cuda as torch/version.py spells it, read without importing torch."""
    for path in environment.glob("lib/python*/site-packages/torch/version.py"):
        match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", path.read_text(errors="replace"), re.M)
        return match.group(1) if match else None
    return None


@dataclass(frozen=True)
class EnvironmentRecord:
    """What the install put in an environment: the resolution, each vendor package as
    installed, torch's CUDA version, the companions, and the command that repairs it."""

    resolution: Resolution
    installed: Mapping[str, InstalledPackage]
    torch_cuda: Optional[str]
    repair: str
    companions: Tuple[Companion, ...] = ()
    schema_version: int = field(default=1)
    # Packages built on this machine (planning/bitsandbytes_source.py, running/bitsandbytes_build.py): what was built, from what, for which GPU.
    built: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "resolution": self.resolution.to_json(),
            "installed": {name: package.to_json() for name, package in self.installed.items()},
            "torch_cuda": self.torch_cuda,
            "companions": [companion.to_json() for companion in self.companions],
            "repair": self.repair,
            "built": {name: dict(build) for name, build in self.built.items()},
        }

    def differences(self, environment: Path, names: Optional[Iterable[str]] = None) -> List[str]:
        """How the environment's vendor packages (those of `names`, else all) differ from what
        was installed; empty when intact."""
        problems = []
        wanted = None if names is None else set(names)
        for name, recorded in self.installed.items():
            if wanted is not None and name not in wanted:
                continue
            # Each dist-info found and its RECORD read once: torch's lists some 15 000 files.
            dist_info = _dist_info(environment, name)
            now, record = _read_package(dist_info, name, files=False) if dist_info is not None else (None, None)
            file = self.resolution.file(name)
            label = file.file if file else name
            if now is None or dist_info is None:
                problems.append(f"{name} is gone (installed: {label})")
            elif now.version != recorded.version or now.tags != recorded.tags:
                problems.append(f"{name} {now.version} ({', '.join(now.tags) or 'no tag'}) replaced {label}")
            # The same RECORD holds the same files; another may too (an installer's own rows):
            # its wheel's files decide, where the record has their digest (an older one has not).
            elif now.record_digest != recorded.record_digest and (
                    recorded.files_digest is None or record is None
                    or _files_digest(dist_info.name, record) != recorded.files_digest):
                problems.append(f"{name} {now.version} has other files than the installed {label} (their RECORD "
                                "hashes differ: reinstalled from another file)")
            else:
                gone = _missing_files(dist_info, record) if record is not None else []
                if gone:
                    more = f" (and {len(gone) - 1} more of the files checked)" if len(gone) > 1 else ""
                    problems.append(f"{name} {now.version} lost files its RECORD lists: {gone[0]}{more}")
        return problems


def record_path(environment: Path) -> Path:
    return environment / STATE_DIR / RECORD_FILE


def write_record(environment: Path, record: EnvironmentRecord) -> Path:
    path = record_path(environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_own(path, json.dumps(record.to_json(), indent=2) + "\n")
    return path


def read_record(environment: Path) -> Optional[EnvironmentRecord]:
    """The record an install left in `environment`, or None (not made by jetson-install, or unreadable)."""
    try:
        data = json.loads(record_path(environment).read_text())
        installed = {
            name: InstalledPackage(name, str(item["version"]), tuple(item["tags"]), str(item["record_sha256"]),
                                   str(item["files_sha256"]) if item.get("files_sha256") else None)
            for name, item in data["installed"].items()
        }
        companions = tuple(Companion(str(c["name"]), str(c["version"]), tuple(c["hashes"])) for c in data["companions"])
        return EnvironmentRecord(Resolution.from_json(data["resolution"]), installed, data.get("torch_cuda"),
                                 str(data.get("repair", "")), companions, built=dict(data.get("built", {})))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def record_built(environment: Path, name: str, build: Mapping[str, Any]) -> None:
    """Add a package built on this machine to the environment's record, like a vendor build:
    its wheel tag and RECORD digest (so a swap is seen), and what it was built from."""
    record = read_record(environment)
    package = installed_package(environment, name)
    if record is None or package is None:
        raise JetsonInstallError(f"{name} was built but is not recorded in {environment}",
                                 fix="report this as a jetson-install bug")
    write_record(environment, dataclasses.replace(record, installed={**record.installed, name: package},
                                                  built={**record.built, name: dict(build)}))


def record_installed(environment: Path, resolution: Resolution, companions: Sequence[Companion],
                     repair: str) -> EnvironmentRecord:
    """Read back what the vendor step installed and keep it beside the environment's constraints."""
    installed = {}
    for chosen in resolution.files:
        package = installed_package(environment, chosen.name)
        if package is not None:
            installed[chosen.name] = package
    torch = resolution.file("torch")
    cuda = (torch.cuda if torch else None) or installed_torch_cuda(environment)
    # The command as typed may carry an index's credentials: the record keeps them masked.
    record = EnvironmentRecord(resolution, installed, cuda, redact(repair), tuple(companions))
    write_record(environment, record)
    return record
