"""The vendor files' expected hashes, read from the wheels themselves (vendor-files.json in the
environment's state folder, beside vendor.json, outside site-packages).

An installed RECORD is a file any later package or script can rewrite, so it cannot say what a
vendor file should be. The install reads each vendor wheel it downloaded and checked by sha256
(against the catalog, a lock, or what uv resolved): the RECORD inside the archive, every
entry's digest checked against the member's own bytes as it is read. A wheel whose RECORD
disagrees with its members is refused, naming the file. Where no wheel could be read (a torch
the interpreter already had), the manifest says so: `measured: false` and the reason.

A kept distribution (--use-existing-torch, the container lane: the interpreter's own torch
stack, which no wheel of the tool's brought) is measured from its installed files as the
environment is made (`kept_from`: that interpreter), each checked against its RECORD, whose
sha256 the plan read: from then on the doctor holds them to these hashes, kept outside
site-packages, not to a RECORD any later package can rewrite. Where that RECORD changed since
the plan, is gone, or disagrees with a file, the entry is unmeasured, saying which.

The format, which the doctor reads:
    {"format": 1, "distributions": {NAME: {"version", "wheel", "wheel_sha256", "measured",
     "reason" (only where not measured), "kept_from" (only for a kept one measured),
     "files": {PATH: SHA256}}}}
NAME is the canonical (PEP 503) name; PATH is relative to the environment's site-packages, as
the RECORD names the file once installed; digests are lowercase hex sha256.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from jetson_install.base.errors import JetsonInstallError
from jetson_install.base.layout import FETCHED_FILE, MANIFEST_FILE, state_of
from jetson_install.base.outputs import replace_file
from jetson_install.probes.dist_records import INSTALLER_FILES

if TYPE_CHECKING:
    import zipfile

__all__ = ["FORMAT", "DistributionFiles", "WheelRefused", "read_wheel", "read_kept", "unmeasured", "write_manifest",
           "read_manifest", "manifest_path", "file_sha256", "write_fetched", "read_fetched", "remember", "remembered"]

FORMAT = 1
# A wheel's RECORD (every file but itself, with its digest and size) and its .data folders:
# https://packaging.python.org/en/latest/specifications/binary-distribution-format/
#: A RECORD's digests may be sha256 or stronger; the spec refuses md5 and sha1.
_ALGORITHMS = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")
#: Signatures of the RECORD, which the spec lets it leave out of itself.
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")
_CHUNK = 1 << 20


class WheelRefused(JetsonInstallError):
    """A wheel that is not what it says: another sha256, or a RECORD its members contradict."""


@dataclass(frozen=True)
class DistributionFiles:
    """One distribution's expected files, as its wheel gave them (or why none could be read)."""

    name: str
    version: str
    wheel: Optional[str]
    wheel_sha256: Optional[str]
    measured: bool
    files: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""
    kept_from: Optional[str] = None  # measured from the installed files of this interpreter's stack

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {"version": self.version, "wheel": self.wheel, "wheel_sha256": self.wheel_sha256,
                                "measured": self.measured, "files": dict(sorted(self.files.items()))}
        if not self.measured:
            data["reason"] = self.reason
        elif self.kept_from is not None:
            data["kept_from"] = self.kept_from
        return data


def unmeasured(name: str, version: str, reason: str) -> DistributionFiles:
    """A distribution whose files no wheel vouches for, and the one line that says why."""
    return DistributionFiles(canonicalize_name(name), version, None, None, False, {}, reason)


def read_kept(name: str, version: str, location: str, record_sha256: Optional[str], python: str) -> DistributionFiles:
    """A kept distribution's files as installed in `location` (by `python`, not by the tool),
    each hashed now and checked against its RECORD, whose sha256 (`record_sha256`, as the plan
    read it) must still be the same; unmeasured, saying why, where any of that fails."""
    # Here and in read_wheel, not at the top: a no-op re-run reads only the manifest, never a wheel's files.
    from concurrent.futures import ThreadPoolExecutor

    kept = f"kept from {python}"
    folder = Path(location)
    found = [path for path in folder.glob("*.dist-info") if path.is_dir()
             and canonicalize_name(path.name[: -len(".dist-info")].rsplit("-", 1)[0]) == canonicalize_name(name)]
    record = found[0] / "RECORD" if len(found) == 1 else None
    try:
        text = record.read_text(encoding="utf-8") if record is not None else None
    except (OSError, UnicodeDecodeError):
        text = None
    if text is None:
        return unmeasured(name, version, f"{kept}: {name} has no readable RECORD in {location}")
    if record_sha256 is None or hashlib.sha256(text.encode("utf-8")).hexdigest() != record_sha256:
        return unmeasured(name, version, f"{kept}: {record} changed after the plan read it")
    rows: Dict[str, Tuple[str, str]] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) != 3:
            continue
        member, hashed, _ = row
        parts = PurePosixPath(member).parts
        if not parts or member.startswith("/") or ".." in parts or "__pycache__" in parts or \
                (parts[0] == found[0].name and member[len(parts[0]) + 1:] in (*INSTALLER_FILES, *_SIGNATURES)):
            continue  # scripts and data outside site-packages, Python's own caches, the installer's files
        algorithm, sep, encoded = hashed.partition("=")
        if not sep or algorithm not in _ALGORITHMS:
            return unmeasured(name, version, f"{kept}: its RECORD lists {member} without a sha256 (or stronger) hash")
        rows[member] = (algorithm, encoded.rstrip("="))
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        digests = list(pool.map(lambda member: _file_digests(folder / member, rows[member][0]), rows))
    files: Dict[str, str] = {}
    for (member, (_, expected)), (sha256, other, problem) in zip(rows.items(), digests):
        if sha256 is None:
            return unmeasured(name, version, f"{kept}: {member}, which its RECORD lists, {problem}")
        if _b64(bytes.fromhex(other or sha256)) != expected:
            return unmeasured(name, version, f"{kept}: {member} differs from its RECORD")
        files[member] = sha256
    return DistributionFiles(str(canonicalize_name(name)), version, None, None, True, files, kept_from=python)


def _file_digests(path: Path, algorithm: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """An installed file's sha256 and its digest in a RECORD's other algorithm, or what keeps it
    from being read: only a regular file is (a FIFO's read would wait for a writer, a device's never end)."""
    sha256 = hashlib.sha256()
    other = hashlib.new(algorithm) if algorithm != "sha256" else None
    try:
        # O_NONBLOCK: the open of a FIFO returns at once, to be refused below.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None, "is gone"
    except OSError as exc:
        return None, None, f"cannot be read ({exc.strerror or exc})"
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None, None, "is not a regular file"
        try:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                sha256.update(chunk)
                if other is not None:
                    other.update(chunk)
        except OSError as exc:
            return None, None, f"cannot be read ({exc.strerror or exc})"
    return sha256.hexdigest(), other.hexdigest() if other is not None else None, None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_wheel(path: Path, sha256: Optional[str], where: str) -> DistributionFiles:
    """The files the wheel at `path` installs, each with its sha256, once the wheel's own
    RECORD has been checked against every member's bytes; `sha256` (None: nothing to check
    against) is what the file must hash to, as `where` (the catalog, a lock, uv's resolution)
    gives it. Raises WheelRefused naming the file that disagrees."""
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        raise _refused(path, "its name is not a wheel's") from None
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        # The whole file's digest is read beside the members': two reads of one file, side by side.
        whole = pool.submit(file_sha256, path)
        try:
            files = _verified_members(path, str(name))
        finally:
            measured = whole.result()
    if sha256 is not None and measured != sha256.lower():
        raise _refused(path, f"its sha256 is {measured}, and {where} gives {sha256.lower()}")
    return DistributionFiles(str(canonicalize_name(name)), str(version), path.name, measured, True, files)


def _verified_members(path: Path, name: str) -> Dict[str, str]:
    import zipfile

    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise _refused(path, f"it is not a readable zip archive ({exc})") from None
    with archive:
        members: Dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            if info.filename.endswith("/"):
                continue
            if info.filename in members:
                # Two members of one name: installers differ on which one they take.
                raise _refused(path, f"it holds {info.filename} twice")
            _check_member_path(path, info.filename)
            members[info.filename] = info
        record_name = _record_name(path, members, name)
        dist_info = record_name.rsplit("/", 1)[0]
        rows = _record_rows(path, archive.read(record_name), record_name)
        files: Dict[str, str] = {}
        for member, (algorithm, expected, size) in rows.items():
            listed = members.get(member)
            if listed is None:
                raise _refused(path, f"its RECORD lists {member}, which the wheel does not hold")
            sha256, other = _digests(archive, listed, algorithm)
            if (other or sha256) != expected:
                raise _refused(path, f"{member}: its bytes hash to {algorithm}={_b64(bytes.fromhex(other or sha256))}, "
                                     f"and its RECORD says {algorithm}={_b64(bytes.fromhex(expected))}")
            if size is not None and size != listed.file_size:
                raise _refused(path, f"{member}: it has {listed.file_size} bytes, and its RECORD says {size}")
            installed = _installed_path(member, dist_info)
            if installed is not None:
                files[installed] = sha256
        unlisted = sorted(member for member in members if member not in rows and member != record_name
                          and member not in (f"{dist_info}/{signature}" for signature in _SIGNATURES))
        if unlisted:
            more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
            raise _refused(path, f"it holds {unlisted[0]}{more}, which its RECORD does not list")
    return files


def _check_member_path(path: Path, member: str) -> None:
    parts = PurePosixPath(member).parts
    if member.startswith("/") or "\\" in member or ".." in parts or not parts:
        raise _refused(path, f"it holds {member!r}, a path outside the folder it installs into")


def _record_name(path: Path, members: Mapping[str, zipfile.ZipInfo], name: str) -> str:
    found = [member for member in members if re.fullmatch(r"[^/]+\.dist-info/RECORD", member)]
    if len(found) != 1:
        raise _refused(path, "it has no .dist-info/RECORD" if not found
                       else f"it has {len(found)} .dist-info/RECORD files ({', '.join(sorted(found))})")
    folder = found[0].split("/", 1)[0][: -len(".dist-info")]
    if canonicalize_name(folder.rsplit("-", 1)[0]) != canonicalize_name(name):
        raise _refused(path, f"its metadata folder {folder}.dist-info is not {name}'s")
    return found[0]


def _record_rows(path: Path, data: bytes, record_name: str) -> Dict[str, Tuple[str, str, Optional[int]]]:
    """member -> (algorithm, expected hex digest, size or None), for every row but the RECORD's own."""
    # Here and in _b64, not at the top: only a RECORD read or checked needs base64, and a no-op
    # re-run, which reads the manifest alone, reads none.
    import base64

    rows: Dict[str, Tuple[str, str, Optional[int]]] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refused(path, f"{record_name} is not UTF-8 text") from None
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row:
            continue
        if len(row) != 3:
            raise _refused(path, f"{record_name} line {number} is not PATH,HASH,SIZE")
        member, hashed, size = row
        if member == record_name or (not hashed and member.rsplit("/", 1)[-1] in _SIGNATURES):
            continue
        algorithm, sep, encoded = hashed.partition("=")
        if not sep or algorithm not in _ALGORITHMS:
            raise _refused(path, f"{record_name} lists {member} without a sha256 (or stronger) hash")
        try:
            expected = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()
        except (ValueError, TypeError):
            raise _refused(path, f"{record_name} lists {member} with a hash that is not base64") from None
        if member in rows:
            raise _refused(path, f"{record_name} lists {member} twice")
        rows[member] = (algorithm, expected, int(size) if size.isdigit() else None)
    return rows


def _digests(archive: zipfile.ZipFile, info: zipfile.ZipInfo, algorithm: str) -> Tuple[str, Optional[str]]:
    """The member's sha256, and its digest in the RECORD's algorithm where that is another."""
    sha256 = hashlib.sha256()
    other = hashlib.new(algorithm) if algorithm != "sha256" else None
    handle: IO[bytes]
    with archive.open(info) as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            sha256.update(chunk)
            if other is not None:
                other.update(chunk)
    return sha256.hexdigest(), other.hexdigest() if other is not None else None


def _installed_path(member: str, dist_info: str) -> Optional[str]:
    """Where an installer puts a member, relative to site-packages (a venv's lib/pythonX.Y/
    site-packages); None for what it rewrites (the dist-info's installer files, scripts, whose
    first line it may change) or puts where no import reads it (headers)."""
    if member.startswith(f"{dist_info}/") and member[len(dist_info) + 1:] in (*INSTALLER_FILES, *_SIGNATURES):
        return None
    top, _, rest = member.partition("/")
    if top.endswith(".data") and rest:
        scheme, _, inside = rest.partition("/")
        if scheme in ("purelib", "platlib"):
            return inside
        if scheme == "data":
            return f"../../../{inside}"  # the venv's prefix, three folders above site-packages
        return None
    return member


def _b64(digest: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _refused(path: Path, why: str) -> WheelRefused:
    return WheelRefused(f"refusing {path.name}: {why}",
                        fix="the file is not the vendor's build: remove it and run the install again; if it "
                            "comes again, the index serves a damaged or altered file: report it")


#: Beside a wheel in the cache of checked wheels: what reading it gave, by its sha256.
_REMEMBERED = ".files.json"


def remember(wheel: Path, files: DistributionFiles) -> None:
    """Keep what reading `wheel` gave beside it: a later install that finds the same bytes there
    (its sha256, measured again) takes its files from here instead of reading every member again."""
    replace_file(wheel.with_name(wheel.name + _REMEMBERED), json.dumps({"name": files.name, **files.to_json()}) + "\n")


def remembered(wheel: Path, sha256: str) -> Optional[DistributionFiles]:
    """What reading `wheel` gave when its sha256 was `sha256` (the one just measured), or None."""
    try:
        data = json.loads(wheel.with_name(wheel.name + _REMEMBERED).read_text(encoding="utf-8"))
        files = data["files"]
        if (data["wheel_sha256"] != sha256 or data["wheel"] != wheel.name or not data["measured"]
                or not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values())):
            return None
        return DistributionFiles(str(data["name"]), str(data["version"]), wheel.name, sha256, True, dict(files))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def manifest_path(environment: Path) -> Path:
    return state_of(environment) / MANIFEST_FILE


def write_manifest(environment: Path, distributions: Iterable[DistributionFiles]) -> Path:
    """Add `distributions` to the environment's manifest (each replaces one of its name), written
    whole, readable by the user alone."""
    path = manifest_path(environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = read_manifest(environment) or {}
    merged = {**kept, **{entry.name: entry for entry in distributions}}
    data = {"format": FORMAT, "distributions": {name: merged[name].to_json() for name in sorted(merged)}}
    replace_file(path, json.dumps(data, indent=1) + "\n", mode=0o600)
    return path


def read_manifest(environment: Path) -> Optional[Dict[str, DistributionFiles]]:
    """The manifest an install wrote in `environment`, by distribution; None where there is
    none, or it is not one this version reads."""
    try:
        data = json.loads(manifest_path(environment).read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            return None
        found: Dict[str, DistributionFiles] = {}
        for name, entry in data["distributions"].items():
            files = entry["files"]
            if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
                return None
            kept_from = entry.get("kept_from")
            found[name] = DistributionFiles(name, str(entry["version"]), entry["wheel"], entry["wheel_sha256"],
                                            bool(entry["measured"]), dict(files), str(entry.get("reason", "")),
                                            kept_from if isinstance(kept_from, str) else None)
        return found
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_fetched(environment: Path, fetched: Iterable[Tuple[str, Path, str]]) -> None:
    """What the fetch step checked, as the next step installs it: (name, local path, sha256),
    one `NAME @ FILE-URL --hash=sha256:HEX` line each."""
    replace_file(state_of(environment) / FETCHED_FILE,
                 "".join(f"{name} @ {path.as_uri()} --hash=sha256:{sha256}\n" for name, path, sha256 in fetched))


def read_fetched(environment: Path) -> List[Tuple[str, str, str]]:
    """(name, file URL, sha256) of each file the fetch step checked."""
    found = []
    for line in (state_of(environment) / FETCHED_FILE).read_text(encoding="utf-8").splitlines():
        requirement, _, sha256 = line.partition(" --hash=sha256:")
        name, _, url = requirement.partition(" @ ")
        found.append((name, url, sha256))
    return found
