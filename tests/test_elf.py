"""base/elf.py: a shared object's DT_SONAME, DT_NEEDED and DT_RUNPATH, read from its own bytes,
checked on real files (built by gcc, and the system's own libraries against readelf) and on
every cut and corruption of one (a result or ElfError, never another exception)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, List, Optional

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support.elf_files import gcc_shared_object, shared_object

from jetson_install.base.elf import MACHINES, Dynamic, dynamic_of, read_dynamic
from jetson_install.base.errors import ElfError, JetsonInstallError


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libmain.so, soname libmain.so.1, linked to libdep.so.3 with RUNPATH $ORIGIN/../dep."""
    folder = tmp_path_factory.mktemp("elf")
    dependency = gcc_shared_object(folder, "libdep.so.3", "libdep.so.3")
    return gcc_shared_object(folder, "libmain.so", "libmain.so.1", [dependency], runpath=["$ORIGIN/../dep", "/opt/x"])


def test_a_gcc_built_library_says_its_soname_what_it_needs_and_where_it_looks(built: Path) -> None:
    found = dynamic_of(built)
    assert found.soname == "libmain.so.1"
    assert found.needed[0] == "libdep.so.3"  # by the soname it was linked against, first as linked
    assert found.runpath == ("$ORIGIN/../dep", "/opt/x")
    assert read_dynamic(built.read_bytes()) == found


def test_a_library_without_a_soname_says_none(tmp_path: Path) -> None:
    assert dynamic_of(gcc_shared_object(tmp_path, "plain.so", None)).soname is None


def _system_libraries() -> List[Path]:
    machine = os.uname().machine
    found = [Path(f"/lib/{machine}-linux-gnu/{name}") for name in ("libc.so.6", "libm.so.6", "libstdc++.so.6")]
    return [path for path in found if path.is_file()]


@pytest.mark.parametrize("library", _system_libraries(), ids=lambda path: path.name)
def test_the_systems_own_libraries_read_as_readelf_reads_them(library: Path) -> None:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not installed (binutils): nothing to compare with")
    shown = subprocess.run([readelf, "-dW", str(library)], capture_output=True, text=True, check=True).stdout
    found = dynamic_of(library)
    assert found.needed == tuple(re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", shown))
    assert [found.soname] == re.findall(r"\(SONAME\)\s+Library soname: \[(.*)\]", shown)


@pytest.mark.parametrize(("change", "said"), [
    (lambda data: b"#!/bin/sh\necho not a library\n", "is not an ELF file"),
    (lambda data: b"", "is not an ELF file"),
    (lambda data: data[:4] + bytes([1]) + data[5:], "is a 32-bit ELF file; only 64-bit little-endian"),
    (lambda data: data[:5] + bytes([2]) + data[6:], "is a big-endian ELF file; only 64-bit little-endian"),
    (lambda data: data[:40], "is cut short or points outside itself"),
])
def test_what_is_not_a_64_bit_little_endian_shared_object_is_refused_by_name(built: Path, tmp_path: Path, change: Callable[[bytes], bytes],
                                                                             said: str) -> None:
    path = tmp_path / "libbroken.so.1"
    path.write_bytes(change(built.read_bytes()))
    with pytest.raises(ElfError) as caught:
        dynamic_of(path)
    assert str(caught.value).startswith(f"{path}: {said}")
    assert isinstance(caught.value, JetsonInstallError)  # the project's own: reported in a line, never a traceback


def test_a_file_that_cannot_be_opened_is_an_elf_error(tmp_path: Path) -> None:
    with pytest.raises(ElfError, match="cannot be read"):
        dynamic_of(tmp_path / "absent.so")


def test_an_object_with_no_dynamic_segment_needs_nothing() -> None:
    image = bytearray(shared_object("libx.so.1", ["liby.so.2"]))
    image[56:58] = (1).to_bytes(2, "little")  # e_phnum: only the PT_LOAD, no PT_DYNAMIC
    assert read_dynamic(bytes(image)) == Dynamic(None, (), (), MACHINES["aarch64"])


_NAME = st.from_regex(r"lib[a-z0-9_+\-]{1,12}\.so(\.[0-9]{1,2}){0,2}", fullmatch=True)
_DIRECTORY = st.from_regex(r"(\$ORIGIN|/[a-z0-9]{1,8})(/[a-z0-9.]{1,8}){0,3}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(soname=st.none() | _NAME, needed=st.lists(_NAME, max_size=8), runpath=st.lists(_DIRECTORY, max_size=4))
def test_what_is_written_is_what_is_read(soname: Optional[str], needed: List[str], runpath: List[str]) -> None:
    event(f"dynamic entries: soname {soname is not None}, needed {min(len(needed), 3)}+, runpath {len(runpath) > 0}")
    assert read_dynamic(shared_object(soname, needed, runpath)) == Dynamic(soname, tuple(needed), tuple(runpath),
                                                                      MACHINES["aarch64"])


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_cut_or_corruption_of_a_real_library_is_a_result_or_an_elf_error(built: Path, data: st.DataObject) -> None:
    image = bytearray(built.read_bytes())
    cut = data.draw(st.integers(0, len(image)), label="length")
    for _ in range(data.draw(st.integers(0, 8), label="changes")):
        # Mostly where the headers and the dynamic section are: the first kilobytes and the tail.
        at = data.draw(st.integers(0, min(len(image), 4096) - 1) | st.integers(0, len(image) - 1), label="at")
        image[at] = data.draw(st.integers(0, 255), label="byte")
    try:
        found = read_dynamic(bytes(image[:cut]))
    except ElfError:
        event("refused: an ELF error")
        return
    assert all(isinstance(name, str) for name in found.needed)
