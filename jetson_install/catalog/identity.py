"""What a vendor build is, which set of them a source offers, and which files a resolution took.

A build is an identity, not a version: `torch==2.8.0` has no local label, so any torch of
that version satisfies it, a CPU one included. The catalog lists each known build by file
name with its sha256 (or the first 16 hex digits a `+f/<3>/<13>/` URL gives), Python tag
and torch's CUDA version. Values only: resolve.py chooses a set from an index's listings,
record.py keeps what an install put in an environment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from jetson_install.base.errors import JetsonInstallError

if TYPE_CHECKING:
    pass

__all__ = ["VENDOR_PACKAGES", "KnownBuild", "VersionSet", "ChosenFile", "Resolution", "Companion",
           "IdentityMismatch", "NothingInPolicy", "NoBuildForPython"]

#: The names only the vendor source may supply; torch's CUDA build is what the rest depends on.
VENDOR_PACKAGES = ("torch", "torchvision", "torchaudio", "bitsandbytes")


class IdentityMismatch(JetsonInstallError):
    """An index serves another file under a file name the catalog records."""


class NothingInPolicy(JetsonInstallError):
    """No set the source declares is complete on the index."""


class NoBuildForPython(NothingInPolicy):
    """A set is complete on the index, but only for other Pythons than the interpreter's."""

    def __init__(self, message: str, fix: str, python: str, served: Tuple[str, ...]) -> None:
        super().__init__(message, fix=fix)
        self.python = python  # the interpreter's, "3.11"
        self.served = served  # the Pythons a complete set is there for, "3.10"


@dataclass(frozen=True)
class KnownBuild:
    """One vendor wheel as the public record knows it."""

    file: str
    sha256: Optional[str] = None  # all 64 hex digits
    sha256_prefix: Optional[str] = None  # the 16 a `+f/<3>/<13>/` URL shows
    cuda: Optional[str] = None  # torch.version.cuda of a torch build

    @property
    def name(self) -> str:
        return str(parse_wheel_filename(self.file)[0])

    @property
    def python_tag(self) -> str:
        return self.file[: -len(".whl")].split("-")[-3]

    @property
    def digest(self) -> str:
        if self.sha256:
            return f"sha256 {self.sha256}"
        return f"sha256 prefix {self.sha256_prefix}" if self.sha256_prefix else "no recorded sha256"

    def matches(self, sha256: str) -> bool:
        """Whether a served file's sha256 is this build's; a 16-digit prefix is compared as a prefix."""
        served = sha256.lower()
        if self.sha256:
            return served == self.sha256
        if self.sha256_prefix:
            return served.startswith(self.sha256_prefix)
        return True


@dataclass(frozen=True)
class VersionSet:
    """Builds that belong together, each package's version policy a specifier:
    torch with its torchvision and torchaudio (exact), a bitsandbytes range."""

    specifiers: Mapping[str, str]  # package -> specifier, "==2.8.0" or ">=0.48,<0.50"
    numpy: Optional[str] = None
    apt: Tuple[str, ...] = ()
    python: Optional[str] = None  # the Pythons its builds exist for, ">=3.11"; None: the source's every one

    @property
    def name(self) -> str:
        return f"torch{self.specifiers['torch']}"

    @property
    def shown(self) -> str:
        """The set's name, with the Pythons it is for where it is not for every one."""
        return f"{self.name} (Python {self.python})" if self.python else self.name

    def policy(self) -> Dict[str, str]:
        """The set as a plan and a recorded policy give it: its specifiers, and its Pythons where given."""
        return {**self.specifiers, **({"python": self.python} if self.python else {})}

    def for_python(self, python: str) -> bool:
        """Whether the set's builds exist for CPython `python` ("3.10")."""
        return self.python is None or SpecifierSet(self.python).contains(f"{python}.0")

    @property
    def pins(self) -> Dict[str, str]:
        """The exact versions of the set (packages given by a range are left out)."""
        out = {}
        for package, spec in self.specifiers.items():
            if spec.startswith("==") and "," not in spec and "*" not in spec:
                out[package] = spec[2:]
        return out

    def requirement_lines(self) -> List[str]:
        return [f"{package}{spec}" for package, spec in self.specifiers.items()]

    def allows(self, package: str, version: str, prereleases: bool) -> bool:
        try:
            parsed = Version(version)
        except InvalidVersion:
            return False
        spec = SpecifierSet(self.specifiers[package])
        # NVIDIA's builds are pre-releases (2.4.0a0+…); elsewhere an a0 or .dev never counts.
        if parsed.is_prerelease and not prereleases:
            return False
        return spec.contains(parsed, prereleases=True)


@dataclass(frozen=True)
class ChosenFile:
    """A vendor file a resolution takes; for a source that is not read live, a package may
    be left to uv within its range (`specifier`), its version known once it is installed."""

    name: str
    version: str  # "" while a range is not resolved yet
    file: str
    url: str
    sha256: Optional[str]
    known: bool  # listed in wheels-index.toml
    cuda: Optional[str] = None
    specifier: Optional[str] = None  # the set's range, for a package uv resolves in the vendor step

    def requirement(self) -> str:
        """How uv is asked for a file it resolves itself (one with no URL yet): by version, or by range."""
        if self.version:
            return f"{self.name}=={self.version}"
        return f"{self.name}{self.specifier or ''}"

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "version": self.version, "file": self.file, "url": self.url,
                "sha256": self.sha256, "known": self.known, "cuda": self.cuda, "specifier": self.specifier}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ChosenFile":
        specifier = data.get("specifier")
        return cls(str(data["name"]), str(data["version"]), str(data["file"]), str(data["url"]),
                   data.get("sha256"), bool(data.get("known")), data.get("cuda"),
                   specifier if isinstance(specifier, str) else None)


@dataclass(frozen=True)
class Resolution:
    """The set a source resolved to, file by file, and why."""

    source: str
    set_name: str
    files: Tuple[ChosenFile, ...]
    reason: str
    warnings: Tuple[str, ...] = ()

    @property
    def pins(self) -> Dict[str, str]:
        """The exact versions: a range uv has yet to resolve has none."""
        return {chosen.name: chosen.version for chosen in self.files if chosen.version}

    def with_resolved(self, resolved: Sequence[ChosenFile], builds: Sequence[KnownBuild], where: str) -> "Resolution":
        """The resolution once uv has resolved the packages it was left (no URL yet: a source
        the tool does not list, uv's default index): each one's version, file, URL and the
        sha256 uv gives for it. A file `builds` lists must be that build (IdentityMismatch
        naming both digests otherwise) and is recorded as known, with its CUDA; one it does not
        list is recorded as unknown, with the sha256 the download is checked against."""
        by_name = {canonicalize_name(chosen.name): chosen for chosen in resolved}
        listed = {build.file: build for build in builds}
        files = []
        for chosen in self.files:
            found = by_name.get(canonicalize_name(chosen.name))
            if chosen.url or found is None:
                files.append(chosen)
                continue
            build = listed.get(found.file)
            if build is not None and not (found.sha256 and build.matches(found.sha256)):
                raise IdentityMismatch(
                    f"{where} gives {found.file} with sha256 {found.sha256}, but wheels-index.toml records "
                    f"{build.digest} for that file: refusing a different build under a recorded name",
                    fix="report it: the index serves another file under the recorded name; until it is resolved, "
                        "install from the channel's fallback source (--vendor-fallback)")
            files.append(dataclasses.replace(found, name=chosen.name, known=build is not None,
                                             cuda=build.cuda if build is not None else None,
                                             specifier=chosen.specifier))
        return dataclasses.replace(self, files=tuple(files))

    def file(self, name: str) -> Optional[ChosenFile]:
        return next((chosen for chosen in self.files if chosen.name == name), None)

    def to_json(self) -> Dict[str, Any]:
        return {"source": self.source, "set": self.set_name, "reason": self.reason,
                "files": [chosen.to_json() for chosen in self.files], "warnings": list(self.warnings)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Resolution":
        return cls(str(data["source"]), str(data["set"]), tuple(ChosenFile.from_json(f) for f in data["files"]),
                   str(data.get("reason", "")), tuple(data.get("warnings", ())))


@dataclass(frozen=True)
class Companion:
    """A runtime wheel a vendor build needs but does not declare, from the default index."""

    name: str
    version: str
    hashes: Tuple[str, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "version": self.version, "hashes": list(self.hashes)}
