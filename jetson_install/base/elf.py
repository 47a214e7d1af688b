"""What a shared object is called and what it needs, read from its own bytes: DT_SONAME,
DT_NEEDED and DT_RUNPATH (or DT_RPATH) of a 64-bit little-endian ELF file; and where a named
section lies in it (`.nv_fatbin`, the GPU code base/fatbin.py reads).

Only the ELF header, the program headers, the dynamic segment and its string table are read
(seek and read, standard library only), so a 1 GB libtorch_cuda.so costs a few kilobytes. The
layout is the System V ABI's (https://refspecs.linuxfoundation.org/elf/gabi4+/ch5.dynamic.html);
every Jetson and every manylinux aarch64 wheel is 64-bit little-endian, and anything else is
refused with ElfError, as is a file cut short or pointing outside itself.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Dict, List, Optional, Tuple

from jetson_install.base.errors import ElfError

__all__ = ["Dynamic", "MACHINES", "Reader", "read_dynamic", "dynamic_of", "dynamic_from", "file_reader", "memory_reader", "find_section"]

#: Reads `size` bytes at `offset` of one file, or raises ElfError (cut short, unreadable).
Reader = Callable[[int, int], bytes]

_MAGIC = b"\x7fELF"
_CLASS_64, _DATA_LITTLE = 2, 1
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
_PROGRAM = struct.Struct("<IIQQQQQQ")  # Elf64_Phdr
_DYN = struct.Struct("<qQ")  # Elf64_Dyn
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
#: e_phnum's escape: the real count is in section header 0's sh_info (gABI, "Program Header").
_PN_XNUM = 0xFFFF
_SH_INFO = struct.Struct("<I")
_SH_INFO_OFFSET = 44  # sh_name, sh_type (4 each), sh_flags, sh_addr, sh_offset, sh_size (8 each), sh_link (4)
_SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
#: e_shstrndx's escape: the real index is in section header 0's sh_link; e_shnum 0 with a table:
#: the real count is in its sh_size (gABI, "Sections").
_SHN_XINDEX = 0xFFFF
_SHT_NOBITS = 8  # a section that occupies no bytes of the file (.bss)
#: e_machine of the machines the tool runs on, by `uname -m`'s name (the gABI's registry,
#: https://refspecs.linuxfoundation.org/elf/gabi4+/ch4.eheader.html, and glibc's elf/elf.h).
MACHINES = {"aarch64": 183, "x86_64": 62}


@dataclass(frozen=True)
class Dynamic:
    """A shared object's own name (None: it gives none), the names it needs in the order the
    loader loads them, the directories it asks the loader to search first (`$ORIGIN` kept as
    written), and the machine it is built for (e_machine: MACHINES)."""

    soname: Optional[str]
    needed: Tuple[str, ...]
    runpath: Tuple[str, ...]
    machine: int = 0


def read_dynamic(data: bytes, name: str = "the data") -> Dynamic:
    """The dynamic section of an ELF image held in memory; `name` is how errors call it."""
    return _parse(memory_reader(data, name), name)


def memory_reader(data: bytes, name: str) -> Reader:
    """`at` over an ELF image held in memory."""
    def at(offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > len(data):
            raise ElfError(f"{name}: is cut short or points outside itself (wants bytes {offset}-{offset + size}, "
                           f"has {len(data)})")
        return data[offset:offset + size]

    return at


def dynamic_of(path: Path) -> Dynamic:
    """The dynamic section of the ELF file at `path`, reading only the parts that hold it. Only
    a regular file is read (a link to one is followed, as the loader follows it): opening a
    FIFO would wait for a writer, and a device never ends."""
    try:
        # O_NONBLOCK: the open of a FIFO returns at once, to be refused below; a regular file
        # reads as it always does.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            os.close(descriptor)
            raise ElfError(f"{path}: is not a regular file ({_KINDS.get(stat.S_IFMT(found.st_mode), 'not a file')})")
        with open(descriptor, "rb") as handle:
            return _parse(_file_reader(handle, found.st_size, str(path)), str(path))
    except OSError as exc:
        raise ElfError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def dynamic_from(at: Reader, name: str) -> Dynamic:
    """The dynamic section of an ELF image read through `at` (a wheel's member, read as it streams)."""
    return _parse(at, name)


def file_reader(handle: BinaryIO, size: int, name: str) -> Reader:
    """`at` over an open file of `size` bytes; `name` is how errors call it."""
    return _file_reader(handle, size, name)


def find_section(at: Reader, name: str, section: str) -> Optional[Tuple[int, int]]:
    """(file offset, size) of the section called `section`; None where the file has none, or
    no section headers at all (a stripped-down image: the loader never needs them)."""
    _check_ident(at, name)
    header = _HEADER.unpack(at(0, _HEADER.size))
    shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
    if shoff == 0:
        return None
    if shentsize < _SECTION.size:
        raise ElfError(f"{name}: has section headers of {shentsize} bytes, fewer than a 64-bit one's {_SECTION.size}")
    first = _SECTION.unpack(at(shoff, _SECTION.size))
    if shnum == 0:
        shnum = first[5]
    if shstrndx == _SHN_XINDEX:
        shstrndx = first[6]
    if shstrndx >= shnum:
        raise ElfError(f"{name}: names section {shstrndx} for the section names, past its {shnum} sections")
    table = at(shoff, shnum * shentsize)
    names = _SECTION.unpack_from(table, shstrndx * shentsize)
    strings = at(names[4], names[5])
    wanted = section.encode()
    for number in range(shnum):
        sh_name, sh_type, _, _, sh_offset, sh_size, _, _, _, _ = _SECTION.unpack_from(table, number * shentsize)
        if strings[sh_name:sh_name + len(wanted) + 1] == wanted + b"\0" and sh_type != _SHT_NOBITS:
            return sh_offset, sh_size
    return None


_KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def _file_reader(handle: BinaryIO, size: int, name: str) -> Reader:
    def at(offset: int, length: int) -> bytes:
        # Checked against the file's size first: a corrupt header must not make read() allocate gigabytes.
        if offset < 0 or length < 0 or offset + length > size:
            raise ElfError(f"{name}: is cut short or points outside itself (wants bytes {offset}-{offset + length}, "
                           f"has {size})")
        handle.seek(offset)
        found = handle.read(length)
        if len(found) != length:
            raise ElfError(f"{name}: changed while it was read")
        return found

    return at


def _check_ident(at: Reader, name: str) -> None:
    """Refuse anything but a 64-bit little-endian ELF file, saying what it is."""
    try:
        ident = at(0, 16)
    except ElfError:
        ident = b""
    if ident[:4] != _MAGIC:
        raise ElfError(f"{name}: is not an ELF file")
    if ident[4] != _CLASS_64:
        raise ElfError(f"{name}: is a {'32-bit' if ident[4] == 1 else 'unknown-class'} ELF file; "
                       "only 64-bit little-endian shared objects are read")
    if ident[5] != _DATA_LITTLE:
        raise ElfError(f"{name}: is a {'big-endian' if ident[5] == 2 else 'unknown-order'} ELF file; "
                       "only 64-bit little-endian shared objects are read")


def _segments(at: Reader, name: str) -> Tuple[List[Tuple[int, int, int]], Optional[Tuple[int, int]]]:
    """The loadable segments as (vaddr, filesz, offset), and the dynamic one as (offset, filesz)."""
    header = _HEADER.unpack(at(0, _HEADER.size))
    phoff, shoff, phentsize, phnum = header[5], header[6], header[9], header[10]
    if phnum == _PN_XNUM:
        phnum = _SH_INFO.unpack(at(shoff + _SH_INFO_OFFSET, _SH_INFO.size))[0]
    if phnum and phentsize < _PROGRAM.size:
        raise ElfError(f"{name}: has program headers of {phentsize} bytes, fewer than a 64-bit one's {_PROGRAM.size}")
    table = at(phoff, phnum * phentsize)
    loads: List[Tuple[int, int, int]] = []
    dynamic: Optional[Tuple[int, int]] = None
    for number in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = _PROGRAM.unpack_from(table, number * phentsize)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_filesz, p_offset))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    return loads, dynamic


def _parse(at: Reader, name: str) -> Dynamic:
    _check_ident(at, name)
    machine = _HEADER.unpack(at(0, _HEADER.size))[2]
    loads, dynamic = _segments(at, name)
    if dynamic is None:
        return Dynamic(None, (), (), machine)  # linked statically: it needs nothing
    entries = at(dynamic[0], dynamic[1] - dynamic[1] % _DYN.size)
    found: Dict[int, List[int]] = {}
    for offset in range(0, len(entries), _DYN.size):
        tag, value = _DYN.unpack_from(entries, offset)
        if tag == _DT_NULL:
            break
        found.setdefault(tag, []).append(value)
    if not any(tag in found for tag in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH)):
        return Dynamic(None, (), (), machine)
    if _DT_STRTAB not in found or _DT_STRSZ not in found:
        raise ElfError(f"{name}: names libraries but has no string table (DT_STRTAB, DT_STRSZ)")
    strings = at(_file_offset(found[_DT_STRTAB][0], loads, name), found[_DT_STRSZ][0])

    def text(index: int) -> str:
        if index >= len(strings):
            raise ElfError(f"{name}: names a string at {index}, past its string table's {len(strings)} bytes")
        end = strings.find(b"\0", index)
        if end < 0:
            raise ElfError(f"{name}: has a string at {index} that its string table does not end")
        return strings[index:end].decode("utf-8", errors="replace")

    # DT_RUNPATH replaces DT_RPATH where both are given (ld.so(8), "Shared object search order").
    paths = found.get(_DT_RUNPATH) or found.get(_DT_RPATH) or []
    return Dynamic(
        soname=text(found[_DT_SONAME][0]) if _DT_SONAME in found else None,
        needed=tuple(text(index) for index in found.get(_DT_NEEDED, [])),
        runpath=tuple(part for index in paths for part in text(index).split(":") if part),
        machine=machine,
    )


def _file_offset(address: int, loads: List[Tuple[int, int, int]], name: str) -> int:
    """Where in the file a virtual address of a loaded segment lies (DT_STRTAB is an address)."""
    for vaddr, filesz, offset in loads:
        if vaddr <= address < vaddr + filesz:
            return address - vaddr + offset
    raise ElfError(f"{name}: its string table's address {address:#x} is in no loaded segment")
