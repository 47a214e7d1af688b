"""Small ELF shared objects for the tests: built by gcc where it is there (real files), or
written byte by byte (a minimal 64-bit little-endian image with a dynamic segment: its
DT_SONAME, DT_NEEDED and DT_RUNPATH), which the stub wheels carry as their vendor libraries."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Optional, Sequence

from .lanes import in_ci

import pytest

__all__ = ["shared_object", "gcc_shared_object"]

_AARCH64 = 183  # e_machine of the gABI's registry; the reader does not look at it
_BASE = 0x10000  # the loaded segment's address: DT_STRTAB is an address, not a file offset


def shared_object(soname: Optional[str], needed: Sequence[str] = (), runpath: Sequence[str] = ()) -> bytes:
    """An ELF64 little-endian ET_DYN image whose dynamic segment names `soname`, `needed` and
    `runpath` (joined by ':'), through one PT_LOAD covering the file and one PT_DYNAMIC."""
    strings = bytearray(b"\0")

    def add(text: str) -> int:
        at = len(strings)
        strings.extend(text.encode() + b"\0")
        return at

    entries = [(1, add(name)) for name in needed]  # DT_NEEDED
    if soname is not None:
        entries.append((14, add(soname)))  # DT_SONAME
    if runpath:
        entries.append((29, add(":".join(runpath))))  # DT_RUNPATH
    header_size, program_size = 64, 56
    strtab = header_size + 2 * program_size
    dynamic = strtab + len(strings) + (-(strtab + len(strings)) % 8)
    entries += [(5, _BASE + strtab), (10, len(strings)), (0, 0)]  # DT_STRTAB, DT_STRSZ, DT_NULL
    dynamic_bytes = b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)
    size = dynamic + len(dynamic_bytes)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = struct.pack("<16sHHIQQQIHHHHHH", ident, 3, _AARCH64, 1, 0, header_size, 0, 0, header_size,
                         program_size, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, _BASE, _BASE, size, size, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic, _BASE + dynamic, _BASE + dynamic, len(dynamic_bytes),
                      len(dynamic_bytes), 8)
    image = bytearray(header + load + dyn + strings)
    image.extend(bytes(dynamic - len(image)))
    image.extend(dynamic_bytes)
    return bytes(image)


def gcc_shared_object(folder: Path, file: str, soname: Optional[str], needed: Sequence[Path] = (),
                      runpath: Sequence[str] = ()) -> Path:
    """A real shared object built by `gcc -shared`, linked to each of `needed` (so DT_NEEDED names
    their sonames). Skips the test with one line where gcc is missing, and fails under CI."""
    gcc = shutil.which("gcc")
    if gcc is None:
        message = "gcc is not installed: the ELF tests build real shared objects with it (apt-get install gcc)"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    source = folder / f"{file}.c"
    source.write_text(f"int {file.split('.')[0].replace('-', '_')}_value(void) {{ return 1; }}\n")
    argv = [gcc, "-shared", "-fPIC", "-o", str(folder / file), str(source)]
    if soname is not None:
        argv.append(f"-Wl,-soname,{soname}")
    if runpath:
        argv.append(f"-Wl,--enable-new-dtags,-rpath,{':'.join(runpath)}")
    # --no-as-needed: a library none of whose symbols are used is still named (Ubuntu's gcc drops it).
    argv.append("-Wl,--no-as-needed")
    for library in needed:
        argv += [f"-L{library.parent}", f"-l:{library.name}"]
    subprocess.run(argv, check=True, capture_output=True)
    return folder / file
