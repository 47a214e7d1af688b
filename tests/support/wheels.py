"""Write tiny, valid ``py3-none-any`` wheels for the loopback test indexes.

Wheels are built in memory with fixed zip timestamps, so the same inputs give
byte-identical files (and identical sha256 links); a session cache can then
reuse a built index directory across tests without any hash drift.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "build_wheel",
    "normalize_name",
    "wheel_filename",
    "default_import_name",
    "sha256_file",
    "parse_wheel_filename",
    "wheel_from_installed",
    "altered_wheel",
]

# 1980-01-01 is the earliest date a zip entry can carry; using it keeps output reproducible.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def normalize_name(name: str) -> str:
    """PEP 503 normalized project name (what appears in /simple/<name>/ URLs)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _escape_component(text: str) -> str:
    # Binary distribution format: '-' separates filename fields, so runs of
    # '-', '_' and '.' inside a name become a single '_'.
    return re.sub(r"[-_.]+", "_", text)


def _escape_version(version: str) -> str:
    # A version never legally contains '-' once normalized, but a caller may
    # pass a post-release spelled '1.0-1'; escape it so the filename still parses.
    # '+' and '.' of a local version such as 2.5.0a0+872d972e41.nv24.08 stay as they are.
    return version.replace("-", "_")


def wheel_filename(name: str, version: str, tag: str = "py3-none-any") -> str:
    """``torch-2.5.0a0+872d972e41.nv24.08-py3-none-any.whl`` style file name."""
    return "{}-{}-{}.whl".format(_escape_component(name), _escape_version(version), tag)


def parse_wheel_filename(filename: str) -> Tuple[str, str]:
    """Return (normalized project name, version string) of a wheel file name."""
    stem = filename[: -len(".whl")] if filename.endswith(".whl") else filename
    parts = stem.split("-")
    if len(parts) < 5:
        raise ValueError("not a wheel file name: {!r}".format(filename))
    return normalize_name(parts[0]), parts[1]


def default_import_name(name: str) -> str:
    """Import package name used when the caller gives none (``typing-extensions`` -> ``typing_extensions``)."""
    return re.sub(r"[-.]+", "_", name).lower()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(str(path), "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _metadata_text(
    name: str,
    version: str,
    requires: Sequence[str],
    extras: Mapping[str, Sequence[str]],
    requires_python: Optional[str],
    summary: str,
) -> str:
    lines = [
        "Metadata-Version: 2.1",
        "Name: {}".format(name),
        "Version: {}".format(version),
        "Summary: {}".format(summary),
    ]
    if requires_python:
        lines.append("Requires-Python: {}".format(requires_python))
    lines.extend("Requires-Dist: {}".format(req) for req in requires)
    for extra in sorted(extras):
        lines.append("Provides-Extra: {}".format(extra))
        for req in extras[extra]:
            lines.append("Requires-Dist: {}".format(_with_extra_marker(req, extra)))
    return "\n".join(lines) + "\n"


def _with_extra_marker(requirement: str, extra: str) -> str:
    # An existing marker must be kept and ANDed with the extra marker.
    if ";" in requirement:
        req, marker = requirement.split(";", 1)
        return '{}; ({}) and extra == "{}"'.format(req.strip(), marker.strip(), extra)
    return '{}; extra == "{}"'.format(requirement.strip(), extra)


def _default_init(version: str, source_index: str, init_body: str) -> str:
    text = '__version__ = "{}"\n__source_index__ = "{}"\n'.format(version, source_index)
    if init_body:
        text += "\n" + init_body.rstrip("\n") + "\n"
    return text


def _entry_points_text(console_scripts: Mapping[str, str]) -> str:
    lines = ["[console_scripts]"]
    lines.extend("{} = {}".format(k, v) for k, v in sorted(console_scripts.items()))
    return "\n".join(lines) + "\n"


def build_wheel(
    dest_dir: Path,
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    extras: Mapping[str, Sequence[str]] = {},
    modules: Mapping[str, Union[str, bytes]] = {},
    tag: str = "py3-none-any",
    requires_python: Optional[str] = None,
    import_name: Optional[str] = None,
    source_index: str = "",
    init_body: str = "",
    console_scripts: Mapping[str, str] = {},
    summary: str = "Stub wheel for jetson-install tests",
) -> Path:
    """Write a valid wheel into ``dest_dir`` and return its path.

    ``modules`` maps archive paths (``"torch/cuda.py"``) to file text (or bytes: a shared
    object, ``"torch/lib/libtorch_cuda.so"``). Unless it
    already holds ``<import_name>/__init__.py``, one is generated that sets
    ``__version__`` and ``__source_index__`` (so a test can tell, after
    install, which index a package came from), followed by ``init_body``.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    pkg = import_name or default_import_name(name)
    files: Dict[str, bytes] = {}
    init_path = "{}/__init__.py".format(pkg)
    if init_path not in modules:
        files[init_path] = _default_init(version, source_index, init_body).encode("utf-8")
    for path, content in modules.items():
        files[path] = content if isinstance(content, bytes) else content.encode("utf-8")

    dist_info = "{}-{}.dist-info".format(_escape_component(name), _escape_version(version))
    files[dist_info + "/METADATA"] = _metadata_text(
        name, version, requires, extras, requires_python, summary
    ).encode("utf-8")
    files[dist_info + "/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: jetson-install-tests\nRoot-Is-Purelib: true\nTag: {}\n".format(tag)
    ).encode("utf-8")
    if console_scripts:
        files[dist_info + "/entry_points.txt"] = _entry_points_text(console_scripts).encode("utf-8")
    files[dist_info + "/top_level.txt"] = (pkg + "\n").encode("utf-8")

    record_path = dist_info + "/RECORD"
    record_lines: List[str] = [
        "{},{},{}".format(path, _record_hash(data), len(data)) for path, data in files.items()
    ]
    record_lines.append("{},,".format(record_path))
    files[record_path] = ("\n".join(record_lines) + "\n").encode("utf-8")

    target = dest_dir / wheel_filename(name, version, tag)
    target.write_bytes(_zip_bytes(files))
    return target


def _zip_bytes(files: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def wheel_from_installed(dest_dir: Path, dist_name: str) -> Path:
    """Repackage an installed pure-Python distribution (e.g. ``packaging``) as a wheel.

    Used where a stub would be harmful: the target venv's own tools (pip's
    build backends, a doctor) import ``packaging`` for real. Only the package
    files listed in its RECORD are taken; scripts and bytecode are skipped.
    """
    from importlib import metadata

    dist = metadata.distribution(dist_name)
    name = dist.metadata["Name"]
    version = dist.version
    modules: Dict[str, str] = {}
    for entry in dist.files or ():
        path = str(entry).replace("\\", "/")
        if ".dist-info/" in path or path.startswith("..") or not path.endswith(".py"):
            continue
        modules[path] = Path(str(entry.locate())).read_text(encoding="utf-8")
    requires = list(dist.requires or ())
    top = sorted({p.split("/", 1)[0] for p in modules})
    if not top:
        raise ValueError("{} has no importable files to repackage".format(dist_name))
    return build_wheel(
        dest_dir, name, version, requires=requires, modules=modules, import_name=top[0],
        requires_python=(dist.metadata.get_all("Requires-Python") or [None])[0], summary="Repackaged from the test interpreter",
    )


def altered_wheel(wheel: Path, dest_dir: Path, *, members: Mapping[str, bytes] = {},
                  record: Optional[Callable[[str], str]] = None) -> Path:
    """A copy of ``wheel`` in ``dest_dir`` under the same name, with ``members`` put in (replaced
    or added) and its RECORD text passed through ``record`` (default: kept as it was, so a
    replaced member is one the RECORD lies about)."""
    with zipfile.ZipFile(str(wheel)) as archive:
        files = {info.filename: archive.read(info) for info in archive.infolist()}
    files.update(members)
    record_name = next(name for name in files if name.endswith(".dist-info/RECORD"))
    if record is not None:
        files[record_name] = record(files[record_name].decode("utf-8")).encode("utf-8")
    Path(dest_dir).mkdir(parents=True, exist_ok=True)
    target = Path(dest_dir) / Path(wheel).name
    target.write_bytes(_zip_bytes(files))
    return target
