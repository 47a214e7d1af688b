"""Locks and wheelhouses: a board's whole environment as one hashed requirements file,
and every file it names in one folder with a PEP 503 index beside them.

A lock is made on any machine for the board's platform (`make_lock`), installed exactly
(`uv.locked_install_argv`: hashes required, no resolution) and carried to machines
without internet as a wheelhouse (`fill_wheelhouse`). The file format's reader and
writer (`parse_lock`, `render_lock`) and the wheelhouse layout are pure functions.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote, unquote, urlsplit

from packaging.utils import canonicalize_name

from jetson_install import __version__, git, uv
from jetson_install.errors import BadInput, StepFailed
from jetson_install.redact import redact
from jetson_install.tags import python_platform, wheel_rank, wheel_tags
from jetson_install.toml_file import load_toml

if TYPE_CHECKING:
    from packaging.tags import Tag

    from jetson_install.identity import Resolution

__all__ = [
    "LOCK_VERSION", "Locked", "Lock", "render_lock", "parse_lock", "read_lock", "pick_file", "entries_from_pylock", "lock_mismatch", "LockTarget", "make_lock", "WHEELHOUSE_LOCK",
    "relocated", "wheelhouse_pages", "fill_wheelhouse", "LockResult", "LockInUse", "LOCK_FILE", "lock_resolution",
]

LOCK_VERSION = 1
#: The lock a wheelhouse carries, beside its files/ and simple/ (the PEP 503 index).
WHEELHOUSE_LOCK = "lock.txt"
#: The lock an environment was installed from, in its state directory.
LOCK_FILE = "lock.txt"
_FILES = "files"
_SIMPLE = "simple"


@dataclass(frozen=True)
class Locked:
    """One file of the lock: the distribution, where its file is, and its sha256."""

    name: str
    version: str
    url: str
    sha256: str
    origin: str  # vendor | default | built
    sdist: bool = False  # a source archive: the board builds it

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])

    def line(self) -> str:
        return f"{self.name} @ {self.url} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class Lock:
    channel: str
    python: str  # "3.10"
    arch: str  # "aarch64"
    platform: str  # uv's --python-platform, or "native" for a lock made for an interpreter here
    source: str  # the OBLITERATUS requirement it was built from
    source_commit: Optional[str]
    tool: str
    entries: Tuple[Locked, ...]

    @property
    def from_source(self) -> List[str]:
        """The packages the board has to build from a source archive."""
        return [entry.name for entry in self.entries if entry.sdist]

    def to_json(self) -> Dict[str, Any]:
        return {"channel": self.channel, "python": self.python, "arch": self.arch, "platform": self.platform,
                "source": self.source, "source_commit": self.source_commit, "tool": self.tool,
                "packages": {entry.name: entry.version for entry in self.entries},
                "built_from_source_on_the_board": self.from_source}


_HEADER_KEYS = ("channel", "python", "arch", "platform", "source", "source-commit", "tool")


@dataclass(frozen=True)
class LockInUse:
    """The lock an install carries out: where it was read, its digest, and the text to install."""

    lock: Lock
    location: str
    sha256: str
    text: str

    def to_json(self) -> Dict[str, Any]:
        return {"file": self.location, "sha256": self.sha256, "channel": self.lock.channel,
                "python": self.lock.python, "arch": self.lock.arch, "platform": self.lock.platform,
                "source_commit": self.lock.source_commit, "packages": len(self.lock.entries)}


def lock_resolution(lock: LockInUse) -> "Resolution":
    """The vendor set a lock names, as the resolution an install carries out and records."""
    from jetson_install.identity import ChosenFile, Resolution

    files = tuple(ChosenFile(entry.name, entry.version, entry.filename, entry.url, entry.sha256, known=False)
                  for entry in lock.lock.entries if entry.origin == "vendor")
    return Resolution(lock.location, "lock", files, f"the files {lock.location} names")


def render_lock(lock: Lock) -> str:
    """The lock as a hashed requirements file: `pip install --no-deps --require-hashes -r`
    and `uv pip install --no-deps --require-hashes -r` read it as it is."""
    lines = [f"# jetson-install lock {LOCK_VERSION}: install with `jetson-install obliteratus --lock FILE`",
             f"# channel: {lock.channel}", f"# python: {lock.python}", f"# arch: {lock.arch}",
             f"# platform: {lock.platform}", f"# source: {lock.source}",
             f"# source-commit: {lock.source_commit or 'none (a local tree without git)'}", f"# tool: {lock.tool}"]
    for entry in sorted(lock.entries, key=lambda e: e.name):
        lines.append(f"# {entry.name} {entry.version} from the {entry.origin} "
                     + ("index, built on the board from source" if entry.sdist else
                        "build of the source" if entry.origin == "built" else "index"))
        lines.append(entry.line())
    return "\n".join(lines) + "\n"


_HEADER = re.compile(r"^# (?P<key>[a-z-]+): (?P<value>.*)$")
_ENTRY_NOTE = re.compile(r"^# (?P<name>\S+) (?P<version>\S+) from the (?P<origin>vendor|default|built) ")
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+) @ (?P<url>\S+) --hash=sha256:(?P<sha256>[0-9a-f]{64})$")


def parse_lock(text: str, where: str) -> Lock:
    """A lock from its text; one clear error naming `where` for anything else."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(f"# jetson-install lock {LOCK_VERSION}"):
        raise BadInput(f"{where} is not a jetson-install lock (version {LOCK_VERSION})",
                       fix="make one with: jetson-install lock --output FILE")
    header: Dict[str, str] = {}
    entries: List[Locked] = []
    note: Optional[Tuple[str, str, str, bool]] = None
    for number, line in enumerate(lines[1:], start=2):
        found = _ENTRY_NOTE.match(line)
        if found:
            note = (found.group("name"), found.group("version"), found.group("origin"), "from source" in line)
            continue
        found = _HEADER.match(line)
        if found and not entries and note is None:
            header[found.group("key")] = found.group("value")
            continue
        if not line.strip() or line.startswith("#"):
            continue
        found = _LINE.match(line.strip())
        if not found or note is None or note[0] != found.group("name"):
            raise BadInput(f"{where}:{number}: not a line of a jetson-install lock: {line.strip()[:120]}",
                           fix="make the lock again: jetson-install lock --output FILE")
        entries.append(Locked(found.group("name"), note[1], found.group("url"), found.group("sha256"), note[2], note[3]))
        note = None
    missing = [key for key in _HEADER_KEYS if key not in header]
    if missing:
        raise BadInput(f"{where} lacks its {', '.join(missing)} line(s)",
                       fix="make the lock again: jetson-install lock --output FILE")
    commit = header["source-commit"]
    return Lock(header["channel"], header["python"], header["arch"], header["platform"], header["source"],
                None if commit.startswith("none") else commit, header["tool"], tuple(entries))


def read_lock(path: Path) -> Lock:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--lock {path}: {exc.strerror or exc}", fix="pass the file `jetson-install lock` wrote") from None
    return parse_lock(text, str(path))


def lock_mismatch(lock: Lock, channel: Optional[str], python: str, arch: str) -> Optional[str]:
    """Why `lock` cannot be installed for this channel, Python and architecture, or None."""
    for what, made_for, here in (("architecture", lock.arch, arch), ("Python", lock.python, python),
                                 ("channel", lock.channel, channel or "none")):
        if made_for != here:
            return f"the lock was made for {what} {made_for}, and this install is for {here}"
    return None


def pick_file(package: Mapping[str, Any], accepted: Optional[Sequence["Tag"]]) -> Optional[Tuple[str, str, bool]]:
    """(url, sha256, is_sdist) of the file a pylock.toml package entry installs from: the
    wheel whose tag ranks best in `accepted` (None: the only wheel uv listed), else its sdist."""
    best: Optional[Tuple[int, str, str]] = None
    for wheel in package.get("wheels", []):
        name = unquote(urlsplit(wheel["url"]).path.rsplit("/", 1)[-1])
        rank = wheel_rank(name, accepted) if accepted is not None else 0
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, wheel["url"], wheel["hashes"]["sha256"])
    if best is not None:
        return best[1], best[2], False
    sdist = package.get("sdist")
    if sdist:
        return sdist["url"], sdist["hashes"]["sha256"], True
    return None


def entries_from_pylock(path: Path, origin: str, accepted: Optional[Sequence["Tag"]],
                        skip: Sequence[str] = ()) -> List[Locked]:
    """The lock entries of a resolution uv wrote as pylock.toml (PEP 751)."""
    entries = []
    for package in load_toml(path).get("packages", []):
        name = canonicalize_name(package["name"])
        if name in skip:
            continue
        picked = pick_file(package, accepted)
        if picked is None:
            raise StepFailed("resolve", f"no file of {name} {package.get('version')} installs on the board's platform",
                             "check that the index carries a wheel for the board (aarch64) or a source archive")
        entries.append(Locked(name, package["version"], picked[0], picked[1], origin, picked[2]))
    return entries


@dataclass(frozen=True)
class LockTarget:
    """What a lock is made for: a board's platform (its Python, architecture and glibc), or
    (with --python) an interpreter here."""

    python: str
    arch: str
    glibc: Optional[str]  # "2.35"; None for an interpreter here
    interpreter: Optional[str] = None

    @property
    def platform(self) -> str:
        """uv's --python-platform, or "native" for an interpreter here."""
        if self.interpreter or self.glibc is None:
            return "native"
        return python_platform(self.arch, self.glibc)

    @property
    def accepted(self) -> Optional[List["Tag"]]:
        if self.interpreter or self.glibc is None:
            return None
        return wheel_tags(self.python, self.arch, self.glibc)


@dataclass(frozen=True)
class LockResult:
    lock: Lock
    path: str
    wheel: str  # the built OBLITERATUS wheel, beside the lock

    def to_json(self) -> Dict[str, Any]:
        return {"schema_version": 1, "command": "lock", "lock": self.path, "wheel": self.wheel, **self.lock.to_json()}


def make_lock(channel: str, target: LockTarget, resolution: "Resolution", vendor_index: Optional[str],
              companions: Sequence[str], constraints: Sequence[str], requirement: str, default_index: Optional[str],
              output: Path) -> LockResult:
    """The vendor set as the vendor index resolved it (`resolution`: files, URLs, sha256), the
    rest resolved from the default index alone (one resolution over both indexes would take each
    package from the first that has it), OBLITERATUS built into a wheel beside `output`."""
    output = output.absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jetson-install-lock-") as scratch:
        work = Path(scratch)
        vendor = _vendor_entries(work, resolution, vendor_index, target)
        wheel, commit = _build_target(requirement, default_index, output.parent, work)
        wheel_sha = _sha256(wheel)
        extras = requirement.split(" @ ", 1)[0][len(_distribution(requirement)):]
        # The vendor files as direct references: their dependencies come from the default index,
        # and the vendor index is asked for nothing else.
        rest_requirements = [f"{_distribution(requirement)}{extras} @ {wheel.as_uri()}"]
        rest_requirements += [f"{entry.name} @ {entry.url}" for entry in vendor]
        rest_requirements += list(companions)
        # pip in the environment, as `uv venv --seed` puts it there, so later plain `pip install`s work.
        rest_requirements.append("pip")
        rest = _resolve(work, "default", rest_requirements, constraints, default_index, target, no_deps=False,
                        skip=[entry.name for entry in vendor] + [_distribution(requirement)])
    built = Locked(_distribution(requirement), _wheel_version(wheel.name), wheel.as_uri(), wheel_sha, "built")
    lock = Lock(channel, target.python, target.arch, target.platform, requirement, commit, __version__,
                tuple(vendor + [built] + rest))
    output.write_text(render_lock(lock), encoding="utf-8")
    return LockResult(lock, str(output), str(wheel))


def _vendor_entries(work: Path, resolution: "Resolution", vendor_index: Optional[str],
                    target: LockTarget) -> List[Locked]:
    """The resolved vendor files; a file the index listed without its sha256 is hashed here,
    and a set known only by versions (a source not read live) is resolved by uv, --no-deps,
    from the vendor index alone."""
    from jetson_install.index import fetch_file

    entries: List[Locked] = []
    by_version: List[str] = []
    for chosen in resolution.files:
        if not chosen.url:
            by_version.append(f"{chosen.name}=={chosen.version}")
            continue
        sha256 = chosen.sha256
        if not sha256:
            copy = work / chosen.file
            fetch_file(chosen.url, copy)
            sha256 = _sha256(copy)
            copy.unlink()
        entries.append(Locked(canonicalize_name(chosen.name), chosen.version, chosen.url.split("#", 1)[0], sha256, "vendor"))
    if by_version:
        entries += _resolve(work, "vendor", by_version, None, vendor_index, target, no_deps=True)
    return entries


def _distribution(requirement: str) -> str:
    return re.split(r"[\[ @]", requirement, 1)[0]


def _wheel_version(filename: str) -> str:
    from packaging.utils import parse_wheel_filename

    return str(parse_wheel_filename(filename)[1])


def _resolve(work: Path, origin: str, requirements: Sequence[str], constraints: Optional[Sequence[str]],
             index: Optional[str], target: LockTarget, no_deps: bool, skip: Sequence[str] = ()) -> List[Locked]:
    inputs = work / f"{origin}.in"
    inputs.write_text("\n".join(requirements) + "\n", encoding="utf-8")
    constraints_file = None
    if constraints:
        constraints_file = work / f"{origin}-constraints.txt"
        constraints_file.write_text("\n".join(constraints) + "\n", encoding="utf-8")
    output = work / f"pylock.{origin}.toml"
    argv = uv.lock_compile_argv(str(inputs), str(constraints_file) if constraints_file else None, index, str(output),
                                target.python, target.platform if not target.interpreter else None,
                                target.interpreter, no_deps)
    result = uv.pip_compile(argv, index)
    if not result.ok:
        where = index or "uv's default index"
        raise StepFailed(f"resolve ({origin})", f"resolving from the {origin} index ({where}) failed: "
                                                f"{uv.summarize_failure(result)}",
                         f"check that {where} answers and carries what the message names, then run the lock again")
    return entries_from_pylock(output, origin, target.accepted, skip)


def _build_target(requirement: str, default_index: Optional[str], out_dir: Path, work: Path) -> Tuple[Path, Optional[str]]:
    """Build the target once into a wheel in `out_dir`; return it and the source commit."""
    url = requirement.split(" @ ", 1)[1]
    if url.startswith("git+"):
        repository, _, ref = url[len("git+"):].rpartition("@") if "@" in url.split("://", 1)[1] else (url[4:], "", "")
        checkout = work / "source"
        clone = git.clone(repository, checkout, timeout=600)
        if not clone.ok:
            raise StepFailed("build", f"git clone {redact(repository)} failed: {clone.last_stderr_line()}",
                             "check the --source URL and the network, then run the lock again")
        if ref:
            switched = git.checkout(checkout, ref)
            if not switched.ok:
                raise StepFailed("build", f"{redact(repository)} has no ref {ref}: {switched.last_stderr_line()}",
                                 "pass a tag, branch or commit the repository has: --ref REF")
        source = checkout
    elif url.startswith("file://"):
        source = Path(unquote(urlsplit(url).path))
    else:
        raise BadInput(f"a lock builds the source once from git or a checkout, and {url} is an archive",
                       fix="pass the repository URL or a checkout as --source")
    commit = git.head_commit(source) if (source / ".git").exists() else None
    built = work / "wheel"
    result = uv.build_wheel(sys.executable, str(source), str(built), default_index, isolation=True)
    wheels = sorted(built.glob("*.whl"))
    if not result.ok or not wheels:
        raise StepFailed("build", f"building {source} into a wheel failed: {uv.summarize_failure(result)}",
                         "fix the build error above, then run the lock again")
    wheel = out_dir / wheels[0].name
    shutil.copyfile(wheels[0], wheel)
    return wheel, commit


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- wheelhouse -------------------------------------------------------------------------------


def relocated(lock: Lock, wheelhouse: str) -> Lock:
    """`lock` with every file taken from a wheelhouse (a folder's file: URL, or where it is
    served over http) instead of the indexes the lock was made from."""
    base = wheelhouse.rstrip("/")
    return replace(lock, entries=tuple(replace(entry, url=f"{base}/{_FILES}/{quote(entry.filename)}")
                                       for entry in lock.entries))


def wheelhouse_pages(lock: Lock) -> Dict[str, str]:
    """The PEP 503 pages of a wheelhouse (path under simple/ -> html), with sha256 fragments."""
    projects: Dict[str, List[Locked]] = {}
    for entry in lock.entries:
        projects.setdefault(canonicalize_name(entry.name), []).append(entry)
    pages = {"index.html": _page("Simple index", [(f"{name}/", name) for name in sorted(projects)])}
    for name, entries in projects.items():
        pages[f"{name}/index.html"] = _page(
            f"Links for {name}",
            [(f"../../{_FILES}/{quote(entry.filename)}#sha256={entry.sha256}", entry.filename) for entry in entries])
    return pages


def _page(title: str, links: Sequence[Tuple[str, str]]) -> str:
    import html

    body = "\n".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a><br/>' for href, text in links)
    return f"<!DOCTYPE html>\n<html><head><title>{html.escape(title)}</title></head><body>\n{body}\n</body></html>\n"


def fill_wheelhouse(lock: Lock, directory: Path) -> Dict[str, Any]:
    """Download every file of `lock` into `directory`/files (checking each sha256), write the
    PEP 503 index under simple/ and the wheelhouse's own lock.txt. Files already there are kept."""
    from jetson_install.index import fetch_file

    files = directory / _FILES
    files.mkdir(parents=True, exist_ok=True)
    fetched = 0
    for entry in lock.entries:
        path = files / entry.filename
        if path.is_file() and _sha256(path) == entry.sha256:
            continue
        partial = path.with_name(path.name + ".part")
        fetch_file(entry.url, partial)
        if _sha256(partial) != entry.sha256:
            partial.unlink()
            raise StepFailed("download", f"{entry.url} does not have the sha256 the lock names ({entry.sha256})",
                             "the index changed the file since the lock was made: make the lock again")
        partial.replace(path)
        fetched += path.stat().st_size
    for relative, text in wheelhouse_pages(lock).items():
        page = directory / _SIMPLE / relative
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
    (directory / WHEELHOUSE_LOCK).write_text(render_lock(lock), encoding="utf-8")
    return {"schema_version": 1, "command": "wheelhouse", "directory": str(directory), "files": len(lock.entries),
            "downloaded_bytes": fetched, "index": (directory / _SIMPLE).as_uri(),
            "lock": str(directory / WHEELHOUSE_LOCK)}
