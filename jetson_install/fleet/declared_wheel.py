"""A lock target's metadata as its pyproject.toml declares it, made into a wheel of metadata
alone, so that the rest of the lock is resolved while the target itself is built; and the check
that the built wheel says the same, without which that resolution is not taken.

uv resolves the declared wheel as it would the built one: a file, in the same place among the
lock's requirements, read for its name, version, Requires-Python, Requires-Dist, Provides-Extra
and tags. Where all of them agree, the two resolutions are one. Where a field is dynamic, or the
build says otherwise (a backend may add what pyproject.toml does not state, as setuptools adds
setup.py's `install_requires`), the lock is resolved from the built wheel, as boards install it.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from jetson_install.base.errors import JetsonInstallError
from jetson_install.base.toml_file import loads_toml

__all__ = ["Declared", "declared_wheel", "built_as_declared"]

#: The fields a backend may fill only where pyproject.toml lists them in `dynamic`: "a build
#: back-end MUST honour statically-specified metadata"
#: (https://packaging.python.org/en/latest/specifications/pyproject-toml/#dynamic).
_RESOLVED_BY = ("version", "requires-python", "dependencies", "optional-dependencies")
#: A wheel of metadata alone installs nowhere and runs nothing: pure Python, any Python 3.
_TAG = "py3-none-any"


@dataclass(frozen=True)
class Declared:
    """What uv's resolution reads of a wheel, each field as packaging writes it: the name and
    extras canonical, Requires-Dist sorted."""

    name: str
    version: str
    requires_python: Optional[str]
    requires_dist: Tuple[str, ...]
    extras: Tuple[str, ...]


def declared_wheel(source: Path, folder: Path) -> Optional[Tuple[Path, Declared]]:
    """A wheel in `folder` of the metadata `source`'s pyproject.toml states statically, and that
    metadata; None where any field the resolution reads is dynamic, or the file says nothing
    this can read (the build then says what is wrong)."""
    try:
        project = loads_toml((source / "pyproject.toml").read_text(encoding="utf-8")).get("project")
        declared = _from_pyproject(project) if isinstance(project, dict) else None
    except (OSError, UnicodeDecodeError, JetsonInstallError, KeyError, InvalidRequirement, InvalidSpecifier,
            InvalidVersion, TypeError, AttributeError):
        return None  # no name or version, or a field of another type than the specification's
    if declared is None:
        return None
    stem = f"{declared.name.replace('-', '_')}-{declared.version.replace('-', '_')}"
    metadata = ["Metadata-Version: 2.1", f"Name: {declared.name}", f"Version: {declared.version}"]
    metadata += [f"Requires-Python: {declared.requires_python}"] if declared.requires_python else []
    metadata += [f"Requires-Dist: {line}" for line in declared.requires_dist]
    metadata += [f"Provides-Extra: {extra}" for extra in declared.extras]
    files = {f"{stem}.dist-info/METADATA": "\n".join(metadata) + "\n",
             f"{stem}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: jetson-install\nRoot-Is-Purelib: true\nTag: {_TAG}\n"}
    record = [f"{path},sha256={_record_hash(text.encode())},{len(text.encode())}" for path, text in files.items()]
    files[f"{stem}.dist-info/RECORD"] = "\n".join([*record, f"{stem}.dist-info/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{stem}-{_TAG}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel, declared


def built_as_declared(wheel: Path, declared: Declared) -> bool:
    """Whether the built `wheel` says what `declared` does in every field uv's resolution reads,
    its tags included (a platform wheel resolves otherwise than a pure one)."""
    try:
        tags = parse_wheel_filename(wheel.name)[3]
        with zipfile.ZipFile(wheel) as archive:
            found = [name for name in archive.namelist()
                     if name.count("/") == 1 and name.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                return False
            headers = HeaderParser().parsestr(archive.read(found[0]).decode("utf-8"))
        built = Declared(canonicalize_name(headers.get("Name", "")), str(Version(headers.get("Version", ""))),
                         _specifiers(headers.get("Requires-Python")),
                         tuple(sorted(_normal(Requirement(line)) for line in headers.get_all("Requires-Dist", []))),
                         tuple(sorted(canonicalize_name(extra) for extra in headers.get_all("Provides-Extra", []))))
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, KeyError, InvalidWheelFilename, InvalidRequirement,
            InvalidSpecifier, InvalidVersion):
        return False
    return {str(tag) for tag in tags} == {_TAG} and built == declared


def _from_pyproject(project: Dict[str, Any]) -> Optional[Declared]:
    dynamic = project.get("dynamic", [])
    if any(field in dynamic for field in _RESOLVED_BY):
        return None
    name, version, requires_python = project["name"], project["version"], project.get("requires-python")
    if not isinstance(name, str) or not isinstance(version, str) or not isinstance(requires_python, (str, type(None))):
        return None
    # The backend writes an extra's requirements with the extra in their marker (PEP 685 names).
    # https://packaging.python.org/en/latest/specifications/core-metadata/#provides-extra-multiple-use
    lines = [_normal(Requirement(_text(line))) for line in project.get("dependencies", [])]
    extras: List[str] = []
    for extra, requirements in project.get("optional-dependencies", {}).items():
        extras.append(canonicalize_name(extra))
        for line in requirements:
            requirement = Requirement(_text(line))
            marker, requirement.marker = requirement.marker, None
            condition = f'extra == "{extras[-1]}"' if marker is None else f'({marker}) and extra == "{extras[-1]}"'
            lines.append(_normal(Requirement(f"{requirement}; {condition}")))
    return Declared(canonicalize_name(name), str(Version(version)), _specifiers(requires_python),
                    tuple(sorted(lines)), tuple(sorted(extras)))


def _normal(requirement: Requirement) -> str:
    """`requirement` as packaging writes it, its name canonical (uv compares names so)."""
    requirement.name = canonicalize_name(requirement.name)
    return str(requirement)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a requirement: {value!r}")
    return value


def _specifiers(text: Optional[str]) -> Optional[str]:
    return str(SpecifierSet(text)) if text else None


def _record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
