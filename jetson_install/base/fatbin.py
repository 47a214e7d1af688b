"""The GPU code a shared object carries: the fat binary of its `.nv_fatbin` section, read as
its containers and each container's entries (SASS for one architecture, or PTX for a virtual
one with its PTX ISA version), from their headers alone.

NVIDIA publishes no specification of the format; the layout here is the one public
reimplementations agree on, checked against cuobjdump on files nvcc 13.0 built
(tests/test_fatbin.py):
- a container is a 16-byte header (magic 0xBA55ED50, version 1, header size, size of what
  follows) and its entries back to back; a section holds one container per object linked in,
  each aligned, zeros between them (https://github.com/n-eiling/cuda-fatbin-decompression,
  fatbin-decompress.h; https://github.com/jiegec/fatbinary, src/lib.rs;
  https://github.com/GrigoryEvko/nvopen-tools, fatbin/FORMAT_SPECIFICATION.md);
- an entry is a header of at least 64 bytes (kind 1 PTX or 2 ELF, its header size, its
  payload's size, the version, the architecture, flags) and its payload; flag 0x2000 says the
  payload is LZ4-compressed (cuda-fatbin-decompression's FATBIN_FLAG_COMPRESS), 0x8000 that
  it is zstd-compressed (nvopen-tools; nvcc 13's default, whose payloads open with zstd's
  magic), 0x100000 an architecture-specific build (`sm_90a`), 0x200000 a family-specific one
  (`sm_100f`), as nvcc 13.0 writes them and cuobjdump names them.

Payloads are never decompressed: the architecture, the kind and the PTX ISA version are in
each entry's own header, which compression leaves as it is, so neither LZ4 nor zstd (which the
standard library lacks before Python 3.14) is needed to say what a file can run.

Only `.nv_fatbin` is read: it is what the CUDA runtime loads. The `__nv_relfatbin` section of a
relocatable device-code build (magic 0x466243B1) is input to a later device link, never
loaded by itself. Every offset is checked against the section, and a file with more entries
than any real library has is refused, so a hostile file costs bounded reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import List, Optional, Tuple

from jetson_install.base.elf import Reader
from jetson_install.base.errors import ElfError

__all__ = ["Entry", "Container", "SECTION", "read_fatbin"]

SECTION = ".nv_fatbin"
_MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
# kind, (unknown), header size, payload size, compressed size, options offset, minor, major, arch, ...flags
_ENTRY = struct.Struct("<HHIQIIHHIIIQ")
_KIND_PTX, _KIND_ELF = 1, 2
_LZ4, _ZSTD = 0x2000, 0x8000
_ARCH_SPECIFIC, _FAMILY_SPECIFIC = 0x100000, 0x200000
#: The most entries one file may hold: libcublasLt.so.13 (CUDA 13.1) has 5,424 in 2,782 containers.
MAX_ENTRIES = 200_000
#: How far past a container its zeros (the next object's alignment) are looked through at once.
_PADDING_READ = 512


@dataclass(frozen=True)
class Entry:
    """One code object: `sass` for a real architecture (`sm_87`), or `ptx` for a virtual one,
    which the driver compiles at first use; `variant` "a" (this architecture only) or "f"
    (its family), "" for neither."""

    kind: str  # "sass" or "ptx"
    arch: int  # 87 for 8.7, 110 for 11.0
    variant: str
    ptx_version: Optional[Tuple[int, int]]  # the PTX ISA version of a PTX entry, (9, 0)
    compression: Optional[str]  # "lz4", "zstd", None

    @property
    def name(self) -> str:
        """As cuobjdump names it: `sm_90a` for SASS (a family build shows as the plain one),
        `compute_120f` for PTX."""
        if self.kind == "sass":
            return f"sm_{self.arch}{'a' if self.variant == 'a' else ''}"
        return f"compute_{self.arch}{self.variant}"

    @property
    def major(self) -> int:
        return self.arch // 10

    @property
    def minor(self) -> int:
        return self.arch % 10


@dataclass(frozen=True)
class Container:
    """The code of one object linked into the file (a translation unit, or a device link's)."""

    offset: int  # in the file
    entries: Tuple[Entry, ...]


def read_fatbin(at: Reader, offset: int, size: int, name: str) -> Tuple[Container, ...]:
    """The containers of the fat binary section at `offset` (its `size` bytes) of the file
    `at` reads; ElfError names what is wrong, and where."""
    end = offset + size
    containers: List[Container] = []
    count = 0
    position = offset
    while position + _HEADER.size <= end:
        position = _skip_padding(at, position, end)
        if position + _HEADER.size > end:
            break
        magic, _, header_size, body = _HEADER.unpack(at(position, _HEADER.size))
        if magic != _MAGIC:
            raise ElfError(f"{name}: its {SECTION} holds no fat binary at byte {position - offset} "
                           f"(magic {magic:#010x}, not {_MAGIC:#010x})")
        start, stop = position + header_size, position + header_size + body
        if header_size < _HEADER.size or stop > end:
            raise ElfError(f"{name}: a fat binary at byte {position - offset} of its {SECTION} runs past the section")
        entries: List[Entry] = []
        cursor = start
        while cursor < stop:
            count += 1
            if count > MAX_ENTRIES:
                raise ElfError(f"{name}: its {SECTION} has more than {MAX_ENTRIES} code objects; no real library has")
            entry, cursor = _entry(at, cursor, stop, offset, name)
            if entry is not None:
                entries.append(entry)
        containers.append(Container(position, tuple(entries)))
        position = stop
    return tuple(containers)


def _entry(at: Reader, cursor: int, stop: int, offset: int, name: str) -> Tuple[Optional[Entry], int]:
    if cursor + _ENTRY.size > stop:
        raise ElfError(f"{name}: a code object at byte {cursor - offset} of its {SECTION} is cut short")
    (kind, _, header_size, payload, _, _, minor, major, arch, _, _, flags) = _ENTRY.unpack(at(cursor, _ENTRY.size))
    following = cursor + header_size + payload
    if header_size < _ENTRY.size or following > stop:
        raise ElfError(f"{name}: a code object at byte {cursor - offset} of its {SECTION} runs past its fat binary")
    if kind not in (_KIND_PTX, _KIND_ELF):
        return None, following  # neither code the driver runs nor code it compiles (LTO IR, an index)
    variant = "a" if flags & _ARCH_SPECIFIC else "f" if flags & _FAMILY_SPECIFIC else ""
    compression = "zstd" if flags & _ZSTD else "lz4" if flags & _LZ4 else None
    entry = Entry("ptx" if kind == _KIND_PTX else "sass", arch, variant,
                  (major, minor) if kind == _KIND_PTX else None, compression)
    return entry, following


def _skip_padding(at: Reader, position: int, end: int) -> int:
    """The first byte at or after `position` that is not the zeros between two containers
    (containers are 8-byte aligned, so whole 8-byte words of zeros)."""
    while position < end:
        block = at(position, min(_PADDING_READ, end - position))
        stripped = len(block) - len(block.lstrip(b"\0"))
        if stripped == len(block):
            position += len(block)
            continue
        return position + stripped - stripped % 8
    return position
