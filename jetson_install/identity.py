"""What a vendor build is, which set of them a source offers, and what an environment recorded.

A build is an identity, not a version: `torch==2.8.0` has no local label, so any torch of
that version satisfies it, a CPU one included. The catalog lists each known build by file
name with its sha256 (or the first 16 hex digits a `+f/<3>/<13>/` URL gives), Python tag
and torch's CUDA version; the install records in the environment what it installed, so a
later swap of the same version is seen by the doctor and repaired by a re-run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from jetson_install.errors import JetsonInstallError
from jetson_install.layout import RECORD_FILE, STATE_DIR

if TYPE_CHECKING:
    from packaging.tags import Tag

__all__ = [
    "VENDOR_PACKAGES",
    "KnownBuild",
    "VersionSet",
    "ListedFile",
    "ChosenFile",
    "Resolution",
    "Companion",
    "InstalledPackage",
    "EnvironmentRecord",
    "IdentityMismatch",
    "NothingInPolicy",
    "choose_set",
    "installed_package",
    "read_record",
    "record_built",
    "write_record",
    "record_path",
    "installed_versions",
]

#: The names only the vendor source may supply; torch's CUDA build is what the rest depends on.
VENDOR_PACKAGES = ("torch", "torchvision", "torchaudio", "bitsandbytes")


class IdentityMismatch(JetsonInstallError):
    """An index serves another file under a file name the catalog records."""


class NothingInPolicy(JetsonInstallError):
    """No set the source declares is complete on the index."""


@dataclass(frozen=True)
class KnownBuild:
    """One vendor wheel as the public record knows it."""

    file: str
    sha256: Optional[str] = None  # all 64 hex digits
    sha256_prefix: Optional[str] = None  # the 16 a `+f/<3>/<13>/` URL shows
    cuda: Optional[str] = None  # torch.version.cuda of a torch build

    @property
    def name(self) -> str:
        from packaging.utils import parse_wheel_filename

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

    @property
    def name(self) -> str:
        return f"torch{self.specifiers['torch']}"

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
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

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
class ListedFile:
    """A file an index lists for a project."""

    filename: str
    url: str
    sha256: Optional[str]
    yanked: bool = False


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
        """How the vendor step asks for it: by URL with its sha256, by version, or by range."""
        if self.url:
            return f"{self.name} @ {self.url}" + (f"#sha256={self.sha256}" if self.sha256 else "")
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

    def with_installed(self, versions: Mapping[str, str]) -> "Resolution":
        """The resolution with the versions uv took for its ranges, once they are installed."""
        files = tuple(dataclasses.replace(chosen, version=versions[chosen.name])
                      if not chosen.version and chosen.name in versions else chosen for chosen in self.files)
        return dataclasses.replace(self, files=files)

    def file(self, name: str) -> Optional[ChosenFile]:
        return next((chosen for chosen in self.files if chosen.name == name), None)

    def to_json(self) -> Dict[str, Any]:
        return {"source": self.source, "set": self.set_name, "reason": self.reason,
                "files": [chosen.to_json() for chosen in self.files], "warnings": list(self.warnings)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Resolution":
        return cls(str(data["source"]), str(data["set"]), tuple(ChosenFile.from_json(f) for f in data["files"]),
                   str(data.get("reason", "")), tuple(data.get("warnings", ())))


def choose_set(
    source: str,
    sets: Sequence[VersionSet],
    preferred: VersionSet,
    prereleases: bool,
    builds: Sequence[KnownBuild],
    listings: Mapping[str, Sequence[ListedFile]],
    tags: Sequence["Tag"],
) -> Resolution:
    """The preferred set when the index lists all of it, else the newest complete set.

    Raises IdentityMismatch when a listed file carries a recorded file name with another
    sha256, and NothingInPolicy (naming what the index does have) when no set is complete.
    """
    from packaging.version import Version

    known = {build.file: build for build in builds}
    complete: List[Tuple[VersionSet, List[ChosenFile]]] = []
    for version_set in sets:
        chosen = _complete(source, version_set, prereleases, known, listings, tags)
        if chosen is not None:
            complete.append((version_set, chosen))
    if not complete:
        have = "; ".join(f"{name}: {', '.join(_versions(files)) or 'nothing'}" for name, files in sorted(listings.items()))
        raise NothingInPolicy(
            f"{source} lists no complete set within policy ({', '.join(s.name for s in sets)}); it has {have}",
            fix="use a mirror of the recorded builds: --vendor-index URL, or the channel's fallback: --vendor-fallback",
        )
    warnings: List[str] = []
    for version_set, chosen in complete:
        if version_set is preferred:
            reason = f"the preferred set {preferred.name} is listed"
            break
    else:
        version_set, chosen = max(complete, key=lambda item: Version(item[1][0].version))
        reason = (f"the preferred set {preferred.name} is not complete on the index; "
                  f"{version_set.name} is the newest complete set within policy")
        warnings.append(f"{source}: {reason}")
    for picked in chosen:
        if not picked.known:
            warnings.append(f"{picked.file} from {source} is not a build wheels-index.toml lists "
                            f"(sha256 {picked.sha256 or 'not served'}); accepted within policy and recorded")
    return Resolution(source, version_set.name, tuple(chosen), reason, tuple(warnings))


def _versions(files: Sequence[ListedFile]) -> List[str]:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    found = []
    for listed in files:
        try:
            version = str(parse_wheel_filename(listed.filename)[1])
        except InvalidWheelFilename:
            continue
        if version not in found:
            found.append(version)
    return found


def _complete(source: str, version_set: VersionSet, prereleases: bool, known: Mapping[str, KnownBuild],
              listings: Mapping[str, Sequence[ListedFile]], tags: Sequence["Tag"]) -> Optional[List[ChosenFile]]:
    from packaging.utils import parse_wheel_filename
    from packaging.version import Version

    from jetson_install.tags import wheel_rank

    chosen: List[ChosenFile] = []
    for package in version_set.specifiers:
        candidates = []
        for listed in listings.get(package, ()):
            if listed.yanked or not listed.filename.endswith(".whl"):
                continue
            rank = wheel_rank(listed.filename, tags)
            version = str(parse_wheel_filename(listed.filename)[1])
            if rank is None or not version_set.allows(package, version, prereleases):
                continue
            candidates.append((Version(version), -rank, listed))
        if not candidates:
            return None
        _, _, best = max(candidates, key=lambda item: (item[0], item[1]))
        build = known.get(best.filename)
        if build is not None and best.sha256 and not build.matches(best.sha256):
            raise IdentityMismatch(
                f"{source} serves {best.filename} with sha256 {best.sha256}, but wheels-index.toml records "
                f"{build.digest} for that file: refusing a different build under a recorded name",
                fix="use a mirror of the recorded builds: --vendor-index URL; if the vendor re-published it, "
                    "update the build in wheels-index.toml after checking it (jetson-install channels --check)",
            )
        sha256 = best.sha256 or (build.sha256 if build else None)
        # The version as the file spells it (NVIDIA's nv24.08, which PEP 440 normalizes to nv24.8).
        chosen.append(ChosenFile(package, best.filename.split("-")[1], best.filename, best.url,
                                 sha256, build is not None, build.cuda if build else None))
    return chosen


# --------------------------------------------------------------------------- the environment's record


@dataclass(frozen=True)
class Companion:
    """A runtime wheel a vendor build needs but does not declare, from the default index."""

    name: str
    version: str
    hashes: Tuple[str, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "version": self.version, "hashes": list(self.hashes)}


@dataclass(frozen=True)
class InstalledPackage:
    """A distribution as it sits in site-packages: its wheel tag and its RECORD's digest."""

    name: str
    version: str
    tags: Tuple[str, ...]
    record_digest: str

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "tags": list(self.tags), "record_sha256": self.record_digest}


def _dist_infos(environment: Path) -> Iterable[Path]:
    return environment.glob("lib/python*/site-packages/*.dist-info")


def installed_package(environment: Path, name: str) -> Optional[InstalledPackage]:
    """Read `name`'s dist-info in the environment (a file read: the tool never imports torch)."""
    from packaging.utils import canonicalize_name

    wanted = canonicalize_name(name)
    for dist_info in _dist_infos(environment):
        dist_name, _, version = dist_info.name[: -len(".dist-info")].partition("-")
        if canonicalize_name(dist_name) != wanted:
            continue
        try:
            wheel = (dist_info / "WHEEL").read_text(encoding="utf-8", errors="replace")
            record = (dist_info / "RECORD").read_bytes()
        except OSError:
            return InstalledPackage(name, version, (), "missing")
        tags = tuple(line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:"))
        return InstalledPackage(name, version, tags, hashlib.sha256(record).hexdigest())
    return None


def installed_versions(environment: Path) -> Dict[str, str]:
    """Normalized distribution name -> version of what the environment's site-packages holds,
    read from its dist-info folders (no interpreter started)."""
    import importlib.metadata

    from packaging.utils import canonicalize_name

    folders = [str(path) for path in environment.glob("lib/python*/site-packages")]
    found: Dict[str, str] = {}
    for distribution in importlib.metadata.distributions(path=folders):
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), distribution.version)
    return found


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
    # Packages built on this machine (jetson_install/source_build/): what was built, from what, for which GPU.
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

    def differences(self, environment: Path) -> List[str]:
        """How the environment's vendor packages differ from what was installed; empty when intact."""
        problems = []
        for name, recorded in self.installed.items():
            now = installed_package(environment, name)
            file = self.resolution.file(name)
            label = file.file if file else name
            if now is None:
                problems.append(f"{name} is gone (installed: {label})")
            elif now.version != recorded.version or now.tags != recorded.tags:
                problems.append(f"{name} {now.version} ({', '.join(now.tags) or 'no tag'}) replaced {label}")
            elif now.record_digest != recorded.record_digest:
                problems.append(f"{name} {now.version} has another RECORD than the installed {label} "
                                "(reinstalled from another file)")
        return problems


def record_path(environment: Path) -> Path:
    return environment / STATE_DIR / RECORD_FILE


def write_record(environment: Path, record: EnvironmentRecord) -> Path:
    path = record_path(environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=2) + "\n")
    return path


def read_record(environment: Path) -> Optional[EnvironmentRecord]:
    """The record an install left in `environment`, or None (not made by jetson-install, or unreadable)."""
    try:
        data = json.loads(record_path(environment).read_text())
        installed = {
            name: InstalledPackage(name, str(item["version"]), tuple(item["tags"]), str(item["record_sha256"]))
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
    record = EnvironmentRecord(resolution, installed, cuda, repair, tuple(companions))
    write_record(environment, record)
    return record
