"""What a wheel, a file, a folder or an environment's distributions carry for the GPU, read from
the files without installing or loading anything: for every ELF shared object its fat binary's
SASS architectures and PTX (base/fatbin.py), its DT_NEEDED and where each resolves, and a
verdict for the board (catalog/gpu_code.py).

A wheel is read as a zip, its members streamed: a deflated member cannot be read at an offset,
so each is read forward (its ELF header, then its section table at the end, then once more
from the start to its string table, fat binary and dynamic section), the headers and the last
stretch kept so that a step back costs nothing. Every read is bounded: a member larger than
MAX_MEMBER, a wheel of more than MAX_MEMBERS entries, a read of more than MAX_READ bytes at once,
a corrupt header, a zip bomb: one line naming the file, never a traceback.
"""

from __future__ import annotations

import csv
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name

from jetson_install.base.elf import MACHINES, Dynamic, Reader, dynamic_from, file_reader, find_section
from jetson_install.base.errors import BadInput, ElfError
from jetson_install.base.fatbin import SECTION, Container, read_fatbin
from jetson_install.catalog.catalog import VendorSource
from jetson_install.catalog.gpu_code import BY_RULE, CANNOT_RUN, NOT_LOADED, Board, CodeVerdict, Rules, judge, load_rules
from jetson_install.envs.sonames import BITSANDBYTES_VARIANT, DRIVER, search_folders

if TYPE_CHECKING:
    from jetson_install.board.platform import Platform
    from jetson_install.catalog.catalog import Channel

__all__ = ["FileReport", "Inspection", "MissingLibrary", "inspect_path", "inspect_distributions", "inspect_added",
           "MAX_MEMBER", "MAX_MEMBERS", "MAX_READ"]

#: The version of `inspect --json`'s shape, as every JSON output of the tool carries one.
SCHEMA_VERSION = 1
_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9]+)*$")
MAX_MEMBER = 8 << 30  # no real library comes near: libtorch_cuda.so of torch 2.13.0 is 430 MB
MAX_MEMBERS = 200_000  # torch 2.13.0's wheel has 13,109
MAX_READ = 256 << 20  # one section table, string table or fat binary header at once
MAX_FILES = 100_000  # shared objects in one folder or environment
_HEAD = 1 << 16  # the start of a member kept: its ELF and program headers
_WINDOW = 4 << 20  # the last stretch read kept: a section table and the names just before it
_CHUNK = 1 << 20
#: torch's own libraries (torch/lib of its wheels): an extension built against torch needs them,
#: and the channel's torch provides them wherever the extension is installed.
TORCH_LIBRARIES = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so",
                   "libtorch_python.so", "libtorch_global_deps.so", "libshm.so")


@dataclass(frozen=True)
class MissingLibrary:
    soname: str
    provider: Optional[str]  # "the channel's companion wheel nvidia-cudss-cu13<1"; None: none recorded

    def describe(self) -> str:
        return f"{self.soname} (provided by {self.provider})" if self.provider else self.soname


@dataclass(frozen=True)
class FileReport:
    """One ELF file: its GPU code, what it needs and the verdict; `error` where it cannot be read."""

    path: str  # as shown: the member's name in a wheel, relative to site-packages or the folder
    sass: Tuple[str, ...] = ()
    ptx: Tuple[str, ...] = ()  # "compute_80 (PTX ISA 9.0)"
    compressed: Tuple[str, ...] = ()  # "zstd", "lz4"
    needed: Tuple[str, ...] = ()
    missing: Tuple[MissingLibrary, ...] = ()
    verdict: Optional[CodeVerdict] = None  # None: no GPU code, or no board to judge for
    error: Optional[str] = None
    distribution: Optional[str] = None  # where the files came from an environment

    @property
    def gpu_code(self) -> bool:
        return bool(self.sass or self.ptx)

    def describe(self) -> str:
        """"torch/lib/x.so: runs (sm_110 SASS)", or why it cannot be read."""
        if self.error:
            return f"{self.path}: {self.error}"
        said = f"{self.path}: {self.verdict.verdict} ({self.verdict.reason})" if self.verdict else self.path
        if self.verdict and self.verdict.uncovered and self.verdict.verdict != CANNOT_RUN:
            said += (f"; {self.verdict.uncovered} of its {self.verdict.containers} fat binaries hold no code for "
                     "this GPU (kernels for other GPUs, picked by architecture)")
        if self.missing:
            said += f"; needs {', '.join(item.describe() for item in self.missing)}, found nowhere searched"
        return said

    def to_json(self) -> Dict[str, Any]:
        return {"file": self.path, "distribution": self.distribution, "sass": list(self.sass),
                "ptx": list(self.ptx), "compressed": list(self.compressed), "needed": list(self.needed),
                "missing_libraries": [{"soname": item.soname, "provider": item.provider} for item in self.missing],
                "verdict": self.verdict.to_json() if self.verdict else None, "error": self.error}


@dataclass(frozen=True)
class Inspection:
    """Every ELF file of what was inspected, and the board it was judged for (None: not a Jetson)."""

    subject: str
    board: Optional[Board]
    files: Tuple[FileReport, ...]
    elf_files: int = 0
    other_files: int = 0
    notes: Tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpu_files(self) -> Tuple[FileReport, ...]:
        return tuple(report for report in self.files if report.gpu_code)

    @property
    def cannot_run(self) -> Tuple[FileReport, ...]:
        return tuple(report for report in self.files if report.verdict and report.verdict.verdict == CANNOT_RUN)

    @property
    def by_rule(self) -> Tuple[FileReport, ...]:
        return tuple(report for report in self.files if report.verdict and report.verdict.verdict == BY_RULE)

    @property
    def missing(self) -> Tuple[FileReport, ...]:
        return tuple(report for report in self.files if report.missing)

    @property
    def unreadable(self) -> Tuple[FileReport, ...]:
        return tuple(report for report in self.files if report.error)

    @property
    def ok(self) -> bool:
        return not self.cannot_run and not self.unreadable

    def to_json(self) -> Dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "subject": self.subject,
                "board": {"arch": self.board.name, "userspace": self.board.userspace,
                          "cuda": ".".join(map(str, self.board.cuda)) if self.board.cuda else None}
                if self.board else None,
                "ok": self.ok, "elf_files": self.elf_files, "gpu_files": len(self.gpu_files),
                "cannot_run": len(self.cannot_run), "by_rule": len(self.by_rule), "notes": list(self.notes),
                "files": [report.to_json() for report in self.files]}


@dataclass
class _Context:
    board: Optional[Board]
    rules: Rules
    sources: Sequence[VendorSource]
    folders: List[Path]  # searched after the subject's own files: the environment's, then the board's
    machine: Optional[int] = None  # the board's e_machine, where a file built for another is said so


# --------------------------------------------------------------------------- entry points

def inspect_path(path: Path, board: Optional[Board], rules: Rules, sources: Sequence[VendorSource],
                 root: Path, arch: Optional[str], site_dirs: Sequence[Path] = ()) -> Inspection:
    """A wheel (`*.whl`), an ELF file or a folder of them; what they need is looked for in
    themselves, then in `site_dirs` (an environment they would join), then on the board."""
    # A file built for another CPU than a judged board's (an x86_64 wheel for an Orin) is said so:
    # nothing else in it matters there.
    context = _Context(board, rules, sources, search_folders(site_dirs, root, arch),
                       MACHINES.get(arch or "") if board is not None else None)
    if path.is_dir():
        files = sorted(found for found in _walk(path) if _SHARED_OBJECT.search(found.name))
        return _inspect_files([(found, found.relative_to(path).as_posix(), None) for found in files],
                              str(path), context)
    if not path.is_file():
        raise BadInput(f"{path}: no such file or folder", fix="give a wheel (.whl), a shared object or a folder of them")
    if path.suffix == ".whl" or zipfile.is_zipfile(path):
        return _inspect_wheel(path, context)
    return _inspect_files([(path, path.name, None)], str(path), context)


def inspect_distributions(site_dirs: Sequence[Path], names: Sequence[str], board: Optional[Board], rules: Rules,
                          sources: Sequence[VendorSource], root: Path, arch: Optional[str]) -> Inspection:
    """The shared objects an environment's distributions `names` installed (by their RECORD),
    what they need looked for in the environment and on the board."""
    context = _Context(board, rules, sources, search_folders(site_dirs, root, arch))
    wanted = {canonicalize_name(name) for name in names}
    files: List[Tuple[Path, str, Optional[str]]] = []
    for site in site_dirs:
        for dist_info in sorted(site.glob("*.dist-info")):
            # NAME-VERSION.dist-info: the version holds no dash (the binary distribution format's escaping).
            name = canonicalize_name(dist_info.name[: -len(".dist-info")].rpartition("-")[0])
            if name not in wanted:
                continue
            for relative in _recorded(dist_info):
                files.append((site / relative, relative, str(name)))
    return _inspect_files(files[:MAX_FILES], ", ".join(sorted(wanted)), context)


def inspect_added(site_dirs: Sequence[Path], names: Sequence[str], platform: Optional["Platform"],
                  channel: Optional["Channel"]) -> Inspection:
    """inspect_distributions for what --with or `add` put in an environment, judged for the
    platform's board with its channel's recorded providers."""
    return inspect_distributions(site_dirs, names, Board.for_platform(platform), load_rules(),
                                 channel.sources if channel is not None else (),
                                 Path(platform.root) if platform is not None else Path("/"),
                                 platform.arch if platform is not None else None)


def _recorded(dist_info: Path) -> List[str]:
    try:
        lines = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [row[0] for row in csv.reader(lines)
            if row and _SHARED_OBJECT.search(row[0]) and not row[0].startswith(("/", ".."))]


def _walk(folder: Path) -> Iterator[Path]:
    count = 0
    for top, _, names in os.walk(folder):
        for name in names:
            count += 1
            if count > MAX_FILES:
                raise BadInput(f"{folder}: holds more than {MAX_FILES} files", fix="inspect the folder of the library itself")
            yield Path(top) / name


# --------------------------------------------------------------------------- files on disk

def _inspect_files(files: Sequence[Tuple[Path, str, Optional[str]]], subject: str, context: _Context) -> Inspection:
    own = {path.name for path, _, _ in files}
    reports: List[FileReport] = []
    elf = other = 0
    for path, shown, distribution in files:
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                at = file_reader(handle, size, shown)
                if size < 4 or at(0, 4) != b"\x7fELF":
                    other += 1
                    continue
                elf += 1
                dynamic, containers = _read_elf(at, shown)
        except OSError as exc:
            reports.append(FileReport(shown, error=f"cannot be read ({exc.strerror or exc})", distribution=distribution))
            continue
        except ElfError as exc:  # counted above: it began as an ELF file
            reports.append(FileReport(shown, error=exc.message.split(": ", 1)[-1], distribution=distribution))
            continue
        origin = [path.parent / entry[len("$ORIGIN"):].lstrip("/") for entry in dynamic.runpath
                  if entry.startswith("$ORIGIN")] + [path.parent]
        reports.append(_report(shown, dynamic, containers, context, lambda soname, dirs=origin: any(
            (folder / soname).exists() for folder in dirs) or soname in own, distribution))
    return Inspection(subject, context.board, tuple(reports), elf, other)


def _read_elf(at: Reader, name: str, keep: Optional[Callable[[int, int], None]] = None,
              ) -> Tuple[Dynamic, Tuple[Container, ...]]:
    """Its dynamic section and fat binary, read in the order of a member streamed: the section
    table at the end first, then (`keep`) the dynamic string table, which lies before the fat
    binary while the dynamic section that points to it lies after."""
    section = find_section(at, name, SECTION)
    strings = find_section(at, name, ".dynstr")
    if strings is not None and keep is not None:
        keep(*strings)
    containers = read_fatbin(at, section[0], section[1], name) if section else ()
    return dynamic_from(at, name), containers


def _report(shown: str, dynamic: Dynamic, containers: Sequence[Container], context: _Context, own: Any,
            distribution: Optional[str] = None) -> FileReport:
    if context.machine is not None and dynamic.machine not in (0, context.machine):
        built = next((name for name, number in MACHINES.items() if number == dynamic.machine), f"e_machine {dynamic.machine}")
        board = next(name for name, number in MACHINES.items() if number == context.machine)
        return FileReport(shown, error=f"is built for {built}, not the board's {board}: it cannot load there",
                          distribution=distribution)
    entries = {entry for container in containers for entry in container.entries}
    sass = tuple(sorted({entry.name for entry in entries if entry.kind == "sass"}, key=_arch_order))
    ptx = tuple(sorted({f"{entry.name} (PTX ISA {'.'.join(map(str, entry.ptx_version or ()))})"
                        for entry in entries if entry.kind == "ptx"}, key=_arch_order))
    compressed = tuple(sorted({entry.compression for entry in entries if entry.compression}))
    verdict = judge(containers, context.board, context.rules) if context.board and entries else None
    if verdict is not None and context.board is not None and not _loaded(shown, context.board):
        verdict = CodeVerdict(NOT_LOADED, f"bitsandbytes loads only its library for the board's CUDA "
                                          f"(libbitsandbytes_cuda{''.join(map(str, context.board.cuda or ()))}.so)")
    loaded = verdict is None or verdict.verdict != NOT_LOADED
    missing = tuple(_missing(soname, context) for soname in dynamic.needed if loaded
                    if soname not in DRIVER and not soname.startswith("ld-linux")
                    and not own(soname) and not _on(soname, context.folders))
    return FileReport(shown, sass, ptx, compressed, dynamic.needed, missing, verdict, distribution=distribution)


def _loaded(shown: str, board: Board) -> bool:
    """False for a bitsandbytes library for another CUDA release than the board's: bitsandbytes
    never loads it there."""
    variant = BITSANDBYTES_VARIANT.search(shown)
    return variant is None or variant.group(1) != "cuda" or board.cuda is None \
        or variant.group(2) == "".join(map(str, board.cuda))


def _arch_order(name: str) -> Tuple[int, str]:
    found = re.search(r"_(\d+)", name)
    return (int(found.group(1)) if found else 0, name)


def _on(soname: str, folders: Sequence[Path]) -> bool:
    return any((folder / soname).exists() for folder in folders)


def _missing(soname: str, context: _Context) -> MissingLibrary:
    provider = next((hit.describe() for source in context.sources for hit in [source.provider_of(soname)] if hit), None)
    if provider is None and soname in TORCH_LIBRARIES:
        provider = "the channel's torch"
    return MissingLibrary(soname, provider)


# --------------------------------------------------------------------------- wheels

def _inspect_wheel(path: Path, context: _Context) -> Inspection:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        # As a library that cannot be read: one line, exit 1 (docs/inspect.md).
        return Inspection(str(path), context.board, (FileReport(path.name, error=f"is not a readable wheel ({exc}): "
                                                                           "download it again"),))
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise BadInput(f"{path}: holds {len(members)} files, more than any wheel this tool reads ({MAX_MEMBERS})",
                           fix="inspect the library files themselves")
        names = {PurePosixPath(member.filename).name for member in members}
        reports: List[FileReport] = []
        elf = other = 0
        for member in members:
            if member.is_dir() or not _SHARED_OBJECT.search(member.filename):
                continue
            shown = member.filename
            if member.file_size > MAX_MEMBER:
                elf += 1
                reports.append(FileReport(shown, error=f"is {member.file_size} bytes, more than any library "
                                                       f"({MAX_MEMBER}): not read"))
                continue
            reader = _Member(archive, member)
            try:
                if member.file_size < 4 or reader.at(0, 4) != b"\x7fELF":
                    other += 1
                    continue
                elf += 1
                dynamic, containers = _read_elf(reader.at, shown, reader.keep)
            except ElfError as exc:
                reports.append(FileReport(shown, error=exc.message.split(": ", 1)[-1]))
                continue
            except (OSError, zipfile.BadZipFile, EOFError, ValueError, RuntimeError) as exc:  # zlib's error is a ValueError's kin
                reports.append(FileReport(shown, error=f"cannot be read from the wheel ({exc})"))
                continue
            finally:
                reader.close()
            reports.append(_report(shown, dynamic, containers, context, lambda soname: soname in names))
    return Inspection(str(path), context.board, tuple(reports), elf, other)


class _Member:
    """`at` over one member of a zip, read forward and read again from the start for a step
    back, keeping its first bytes, the last stretch read and the ranges asked to be kept."""

    def __init__(self, archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> None:
        self.archive, self.member, self.size = archive, member, member.file_size
        self.stream: Optional[IO[bytes]] = None
        self.position = 0
        self.head = b""
        self.window: List[Tuple[int, bytes]] = []  # the last chunks read (offset, bytes), ending at `position`
        self.window_size = 0
        self.kept: List[Tuple[int, bytes]] = []
        self.passes = 0

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None

    def keep(self, offset: int, size: int) -> None:
        """Read the range now and keep it (a string table needed after what follows it)."""
        if size <= MAX_READ:
            self.kept.append((offset, self.at(offset, size)))

    def at(self, offset: int, size: int) -> bytes:
        name = self.member.filename
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfError(f"{name}: is cut short or points outside itself (wants bytes {offset}-{offset + size}, "
                           f"has {self.size})")
        if size > MAX_READ:
            raise ElfError(f"{name}: asks for {size} bytes at once, more than any real library's headers")
        if offset + size <= len(self.head):
            return self.head[offset:offset + size]
        for start, data in self.kept:
            if start <= offset and offset + size <= start + len(data):
                return data[offset - start:offset - start + size]
        if self.position - self.window_size <= offset and offset + size <= self.position:
            parts = [(start, data) for start, data in self.window
                     if start < offset + size and offset < start + len(data)]
            first = parts[0][0]
            joined = parts[0][1] if len(parts) == 1 else b"".join(data for _, data in parts)
            return joined[offset - first:offset - first + size]
        if offset < self.position or self.stream is None:
            self._restart()
        self._skip(offset - self.position)
        found = self._read(size)
        if len(found) != size:
            raise ElfError(f"{name}: ends before its size in the wheel's directory says")
        return found

    def _restart(self) -> None:
        self.close()
        self.passes += 1
        self.stream = self.archive.open(self.member)
        self.position, self.window, self.window_size = 0, [], 0

    def _read(self, size: int) -> bytes:
        assert self.stream is not None
        parts = []
        wanted = size
        while wanted > 0:
            chunk = self.stream.read(min(wanted, _CHUNK))
            if not chunk:
                break
            parts.append(chunk)
            wanted -= len(chunk)
        data = b"".join(parts)
        if self.position < _HEAD:
            self.head = (self.head + data)[:_HEAD] if self.position == len(self.head) else self.head
        if data:
            self.window.append((self.position, data))
            self.window_size += len(data)
        self.position += len(data)
        while self.window and self.window_size - len(self.window[0][1]) >= _WINDOW:
            self.window_size -= len(self.window.pop(0)[1])
        return data

    def _skip(self, count: int) -> None:
        while count > 0:
            data = self._read(min(count, _CHUNK))
            if not data:
                return
            count -= len(data)
