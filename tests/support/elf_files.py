"""Small ELF shared objects for the tests: built by gcc (or nvcc, with GPU code) where it is
there (real files), or written byte by byte (a minimal 64-bit little-endian image with a
dynamic segment: its DT_SONAME, DT_NEEDED and DT_RUNPATH; and, where asked, section headers
and a `.nv_fatbin` of the fat binaries `fat_binary` writes), which the stub wheels carry as
their vendor libraries."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from jetson_install.base.elf import MACHINES

from .lanes import in_ci

import pytest

__all__ = ["shared_object", "gcc_shared_object", "nvcc_shared_object", "Code", "fat_binary"]

_BASE = 0x10000  # the loaded segment's address: DT_STRTAB is an address, not a file offset


@dataclass(frozen=True)
class Code:
    """One entry of a fat binary as nvcc writes it: SASS or PTX for `arch` (87), `variant` "a"
    or "f", a PTX ISA version, a payload compressed (flag only: the reader never opens it)."""

    kind: str  # "sass", "ptx"
    arch: int
    variant: str = ""
    ptx_version: Tuple[int, int] = (9, 0)
    compression: Optional[str] = None  # "lz4", "zstd"
    payload: bytes = b"\x7fELF payload"


def fat_binary(*containers: Sequence[Code], padding: int = 40) -> bytes:
    """A `.nv_fatbin` section: each container a 16-byte header and its entries (a 64-byte
    header and the payload, 8-byte aligned), `padding` zeros between containers, as the linker
    leaves them (the layout of base/fatbin.py's sources)."""
    section = bytearray()
    for number, entries in enumerate(containers):
        if number:
            section.extend(bytes(padding))
        body = bytearray()
        for code in entries:
            payload = code.payload + bytes(-len(code.payload) % 8)
            flags = 0x11 | {"lz4": 0x2000, "zstd": 0x8000, None: 0}[code.compression]
            flags |= {"a": 0x100000, "f": 0x200000, "": 0}[code.variant]
            major, minor = code.ptx_version if code.kind == "ptx" else (1, 8)
            body += struct.pack("<HHIQIIHHIIIQQQ", 1 if code.kind == "ptx" else 2, 0x101, 64, len(payload),
                                len(code.payload) if code.compression else 0, 0, minor, major, code.arch, 0, 0,
                                flags, 0, len(code.payload) * 3 if code.compression else 0)
            body += payload
        section += struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
    return bytes(section)


def shared_object(soname: Optional[str], needed: Sequence[str] = (), runpath: Sequence[str] = (),
                  fatbin: Optional[bytes] = None, machine: str = "aarch64") -> bytes:
    """An ELF64 little-endian ET_DYN image for `machine` (a Jetson's, unless told) whose dynamic
    segment names `soname`, `needed` and `runpath` (joined by ':'), through one PT_LOAD covering
    the file and one PT_DYNAMIC; with `fatbin`, section headers too (.dynstr, .dynamic,
    .nv_fatbin, .shstrtab), the fat binary after the dynamic section and the section table at the
    end, where linkers put them."""
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
    header = struct.pack("<16sHHIQQQIHHHHHH", ident, 3, MACHINES[machine], 1, 0, header_size, 0, 0, header_size,
                         program_size, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, _BASE, _BASE, size, size, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic, _BASE + dynamic, _BASE + dynamic, len(dynamic_bytes),
                      len(dynamic_bytes), 8)
    image = bytearray(header + load + dyn + strings)
    image.extend(bytes(dynamic - len(image)))
    image.extend(dynamic_bytes)
    if fatbin is None:
        return bytes(image)
    return _with_sections(image, strtab, len(strings), dynamic, len(dynamic_bytes), fatbin)


def _with_sections(image: bytearray, strtab: int, strsz: int, dynamic: int, dynsz: int, fatbin: bytes) -> bytes:
    image.extend(bytes(-len(image) % 8))
    fat_at = len(image)
    image.extend(fatbin)
    names = b"\0.dynstr\0.dynamic\0.nv_fatbin\0.shstrtab\0"
    names_at = len(image)
    image.extend(names)
    image.extend(bytes(-len(image) % 8))
    shoff = len(image)

    def section(name: bytes, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", names.index(b"\0" + name + b"\0") + 1, kind, 2, _BASE + offset, offset,
                           size, 0, 0, 8, 0)

    image.extend(bytes(64))  # section 0, SHT_NULL
    image.extend(section(b".dynstr", 3, strtab, strsz))
    image.extend(section(b".dynamic", 6, dynamic, dynsz))
    image.extend(section(b".nv_fatbin", 1, fat_at, len(fatbin)))
    image.extend(section(b".shstrtab", 3, names_at, len(names)))
    struct.pack_into("<Q", image, 40, shoff)  # e_shoff
    struct.pack_into("<HHH", image, 58, 64, 5, 4)  # e_shentsize, e_shnum, e_shstrndx
    struct.pack_into("<QQ", image, 64 + 32, len(image), len(image))  # the PT_LOAD covers the file
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


def nvcc_shared_object(folder: Path, file: str, gencode: Sequence[str], extra: Sequence[str] = ()) -> Path:
    """A real shared object with GPU code, built by nvcc for each `-gencode` given ("arch=compute_80,code=sm_80").
    Skips the test with one line where nvcc is missing, and fails under CI."""
    nvcc = shutil.which("nvcc") or next((str(path) for path in [Path("/usr/local/cuda/bin/nvcc")] if path.is_file()), None)
    if nvcc is None:
        message = "nvcc is not installed: the fat binary tests build real CUDA libraries with it (the CUDA toolkit)"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    source = folder / f"{file}.cu"
    source.write_text("__global__ void add(float *x, float y) { x[threadIdx.x] += y; }\n"
                      "extern \"C\" void launch(float *x) { add<<<1, 32>>>(x, 1.0f); }\n")
    argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", str(folder / file), str(source), *extra]
    for code in gencode:
        argv += ["-gencode", code]
    subprocess.run(argv, check=True, capture_output=True)
    return folder / file
