"""base/fatbin.py and catalog/gpu_code.py: a shared object's GPU code read from its `.nv_fatbin`
(SASS and PTX entries, compressed ones, several containers in one section), cross-checked
against cuobjdump on libraries nvcc builds, and judged for a board by the rule table."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support.elf_files import Code, fat_binary, nvcc_shared_object, shared_object

from jetson_install.base.elf import find_section, memory_reader
from jetson_install.base.errors import CatalogError, ElfError
from jetson_install.base.fatbin import Container, Entry, read_fatbin
from jetson_install.catalog.gpu_code import (BY_RULE, CANNOT_RUN, NO_GPU_CODE, RULES_FILE, RUNS, Board, judge,
                                             load_rules)

ORIN_JP6 = Board(87, "tegra", (12, 6))
ORIN_JP72 = Board(87, "sbsa", (13, 2))
THOR = Board(110, "sbsa", (13, 0))


def containers_of(image: bytes) -> Tuple[Container, ...]:
    at = memory_reader(image, "libx.so")
    section = find_section(at, "libx.so", ".nv_fatbin")
    assert section is not None
    return read_fatbin(at, section[0], section[1], "libx.so")


def listed(containers: Sequence[Container]) -> List[List[str]]:
    return [[entry.name for entry in container.entries] for container in containers]


# --------------------------------------------------------------------------- written files

def test_sass_and_ptx_entries_of_several_containers_are_read_with_their_compression() -> None:
    image = shared_object("libx.so.1", ["libcudart.so.13"], fatbin=fat_binary(
        [Code("sass", 80), Code("sass", 90, "a", compression="zstd"), Code("ptx", 80, ptx_version=(8, 5))],
        [Code("sass", 110, compression="lz4"), Code("ptx", 120, "f", ptx_version=(9, 0), compression="zstd")],
        [Code("sass", 100, "f")]))
    found = containers_of(image)
    assert listed(found) == [["sm_80", "sm_90a", "compute_80"], ["sm_110", "compute_120f"], ["sm_100"]]
    assert found[0].entries[2] == Entry("ptx", 80, "", (8, 5), None)
    assert [entry.compression for entry in found[1].entries] == ["lz4", "zstd"]
    assert found[2].entries[0].variant == "f"  # a family build: named as cuobjdump names it, judged as SASS


def test_a_file_without_a_fat_binary_has_no_section() -> None:
    assert find_section(memory_reader(shared_object("liby.so"), "liby.so"), "liby.so", ".nv_fatbin") is None


_CODE = st.builds(Code, kind=st.sampled_from(["sass", "ptx"]), arch=st.sampled_from([53, 75, 80, 87, 90, 100, 110, 121]),
                  variant=st.sampled_from(["", "a", "f"]), ptx_version=st.tuples(st.integers(7, 9), st.integers(0, 9)),
                  compression=st.sampled_from([None, "lz4", "zstd"]), payload=st.binary(max_size=40))


@settings(max_examples=60, deadline=None)
@given(containers=st.lists(st.lists(_CODE, max_size=5), min_size=1, max_size=4), padding=st.sampled_from([0, 8, 40, 200]))
def test_what_is_written_is_what_is_read(containers: List[List[Code]], padding: int) -> None:
    event(f"containers: {len(containers)}; compressed entries: {any(code.compression for container in containers for code in container)}")
    found = containers_of(shared_object("libx.so", fatbin=fat_binary(*containers, padding=padding)))
    assert [[(entry.kind, entry.arch, entry.variant, entry.compression, entry.ptx_version) for entry in container.entries]
            for container in found] == \
           [[(code.kind, code.arch, code.variant, code.compression, code.ptx_version if code.kind == "ptx" else None)
             for code in container] for container in containers]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_cut_or_corruption_is_a_result_or_an_elf_error(data: st.DataObject) -> None:
    image = bytearray(shared_object("libx.so", fatbin=fat_binary([Code("sass", 87), Code("ptx", 80)], [Code("sass", 110)])))
    cut = data.draw(st.integers(0, len(image)), label="length")
    for _ in range(data.draw(st.integers(0, 8), label="changes")):
        image[data.draw(st.integers(0, len(image) - 1), label="at")] = data.draw(st.integers(0, 255), label="byte")
    try:
        containers_of(bytes(image[:cut]))
    except (ElfError, AssertionError):
        event("refused")
        return


def test_a_section_that_holds_no_fat_binary_is_refused_by_name() -> None:
    image = shared_object("libx.so", fatbin=b"\x01" * 64)
    with pytest.raises(ElfError, match=r"libx.so: its .nv_fatbin holds no fat binary at byte 0 \(magic 0x01010101"):
        containers_of(image)


def test_an_entry_running_past_its_container_is_refused() -> None:
    section = bytearray(fat_binary([Code("sass", 87)]))
    section[16 + 8:16 + 16] = (1 << 40).to_bytes(8, "little")  # the entry's payload size
    with pytest.raises(ElfError, match=r"a code object at byte 16 of its \.nv_fatbin runs past its fat binary"):
        containers_of(shared_object("libx.so", fatbin=bytes(section)))


# --------------------------------------------------------------------------- the verdict

def one(*codes: Code) -> Tuple[Container, ...]:
    return containers_of(shared_object("libx.so", fatbin=fat_binary(list(codes))))


def test_sass_for_the_boards_own_architecture_runs() -> None:
    verdict = judge(one(Code("sass", 80), Code("sass", 110)), THOR, load_rules())
    assert (verdict.verdict, verdict.reason) == (RUNS, "sm_110 SASS")
    assert judge(one(Code("sass", 87, "a")), ORIN_JP6, load_rules()).verdict == RUNS


def test_sass_of_a_lower_minor_is_the_rule_and_unproven_on_both_userspaces_with_its_sources() -> None:
    for board in (ORIN_JP6, ORIN_JP72):
        verdict = judge(one(Code("sass", 80), Code("sass", 90)), board, load_rules())
        assert verdict.verdict == BY_RULE
        assert verdict.reason == f"sm_80 SASS on sm_87, unproven on {board.userspace} CUDA: the sources disagree"
        assert verdict.status is not None and verdict.status.status == "unproven"
        assert any("jax-ml/jax/pull/40492" in source for source in verdict.status.against)
        assert verdict.status.supporting


def test_no_code_for_the_board_and_no_ptx_cannot_run_and_says_what_cuda_will_report() -> None:
    verdict = judge(one(Code("sass", 80), Code("sass", 90), Code("sass", 100), Code("sass", 120)), THOR, load_rules())
    assert verdict.verdict == CANNOT_RUN
    assert verdict.reason == ("no sm_110 code and no PTX: CUDA will report 'no kernel image is available for "
                              "execution on the device' at the first kernel")
    # An architecture-specific build runs on its own architecture only.
    assert judge(one(Code("sass", 80, "a")), ORIN_JP6, load_rules()).verdict == CANNOT_RUN


def test_ptx_runs_by_the_rule_where_the_driver_compiles_its_isa_and_not_otherwise() -> None:
    ptx = one(Code("ptx", 80, ptx_version=(9, 0)))
    verdict = judge(ptx, THOR, load_rules())
    assert (verdict.verdict, verdict.reason) == (BY_RULE, "compute_80 PTX (ISA 9.0), compiled by the driver at the first use")
    refused = judge(ptx, ORIN_JP6, load_rules())
    assert refused.verdict == CANNOT_RUN
    assert refused.reason.startswith("no sm_87 code and its PTX (ISA 9.0) needs a CUDA 13.0 driver, this board's is 12.6")
    newer = judge(one(Code("ptx", 90, ptx_version=(8, 0))), ORIN_JP6, load_rules())
    assert newer.reason.startswith("no sm_87 code and its PTX (compute_90) is for newer GPUs only")
    assert judge(one(Code("ptx", 100, "f", ptx_version=(9, 0))), THOR, load_rules()).verdict == CANNOT_RUN


def test_a_file_is_judged_by_its_containers_with_code_for_the_board_and_counts_the_others() -> None:
    # cuBLASLt's way: containers of kernels for other GPUs only, picked by architecture at run time.
    containers = containers_of(shared_object("libx.so", fatbin=fat_binary(
        [Code("sass", 110), Code("sass", 100)], [Code("sass", 90, "a")], [Code("sass", 120, "f")], [Code("sass", 110)])))
    verdict = judge(containers, THOR, load_rules())
    assert (verdict.verdict, verdict.containers, verdict.uncovered) == (RUNS, 4, 2)
    # The weakest container with code decides: one relying on the rule makes the file's verdict the rule's.
    mixed = containers_of(shared_object("libx.so", fatbin=fat_binary([Code("sass", 87)], [Code("sass", 80)])))
    assert judge(mixed, ORIN_JP6, load_rules()).verdict == BY_RULE
    assert judge((), THOR, load_rules()).verdict == NO_GPU_CODE


def test_a_board_is_read_from_a_platforms_values() -> None:
    assert Board.of("8.7", "tegra", "12.6") == ORIN_JP6
    assert Board.of("11.0", "sbsa", "13.0") == THOR
    assert Board.of(None, "tegra", "12.6") is None and Board.of("8.7", None, "12.6") is None


# --------------------------------------------------------------------------- the rule table

@pytest.mark.parametrize(("old", "new", "line_of", "said"), [
    ('status = "unproven"', 'status = "maybe"', 'status = "maybe"',
     "rule sass-lower-minor: key 'tegra' has status = \"maybe\": it must be one of \"holds\", \"unproven\", \"fails\""),
    ('status = "unproven"', 'status = "holds"', "against = [",
     "rule sass-lower-minor: key 'tegra' must not have 'against' sources where the status is 'holds'"),
    ('"https://github.com/bitsandbytes-foundation', '"see the bitsandbytes thread https://github.com/bitsandbytes-foundation',
     "see the bitsandbytes thread", "rule sass-lower-minor: key 'tegra' has \"see the bitsandbytes thread "),
    ('id = "ptx-jit"', 'id = "ptx-anywhere"', 'id = "ptx-anywhere"',
     "rule ptx-anywhere: key 'id' has \"ptx-anywhere\": it must be one of \"sass-exact\", \"sass-lower-minor\", \"ptx-jit\""),
    ('"9.0" = "13.0"', '"9.0" = "thirteen"', '"9.0" = "thirteen"',
     "top level: key 'ptx_isa' has \"9.0\" = \"thirteen\": it must be the first CUDA release whose driver compiles it"),
])
def test_a_mistake_in_the_rule_table_names_its_file_and_line(tmp_path: Path, old: str, new: str, line_of: str,
                                                             said: str) -> None:
    path = tmp_path / "gpu-code-rules.toml"
    text = RULES_FILE.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(CatalogError) as caught:
        load_rules(path)
    lines = path.read_text().splitlines()
    line = next(number for number, text in enumerate(lines, 1) if line_of in text)
    assert str(caught.value).startswith(f"{path}:"), str(caught.value)
    assert str(caught.value) == f"{path}:{line}: {said}" or str(caught.value).startswith(f"{path}:{line}: {said}")
    assert caught.value.fix == f"edit {path} line {line}, then check it: jetson-install inspect FILE"


def test_every_rule_names_public_sources_for_each_userspace() -> None:
    rules = load_rules()
    for rule in rules.rules.values():
        for userspace, status in rule.statuses.items():
            assert all(source.startswith("https://") and ": " in source for source in status.supporting + status.against), \
                (rule.id, userspace)


# --------------------------------------------------------------------------- real files, against cuobjdump

def _cuobjdump() -> Optional[str]:
    """cuobjdump: on PATH, in the CUDA toolkit, or the nvidia-cuda-cuobjdump wheel of the test extras."""
    found = shutil.which("cuobjdump")
    for candidate in [Path("/usr/local/cuda/bin/cuobjdump"),
                      Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "cuobjdump"]:
        if found is None and candidate.is_file():
            found = str(candidate)
    return found


def _cuobjdump_lists(path: Path) -> Tuple[List[str], List[str]]:
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump): nothing to compare with")
    shown = subprocess.run([tool, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"ELF file\s+\d+: .*\.(sm_\w+)\.cubin", shown), re.findall(r"PTX file\s+\d+: .*\.(sm_\w+)\.ptx", shown)


GENCODES = ["arch=compute_80,code=sm_80", "arch=compute_90a,code=sm_90a", "arch=compute_100f,code=sm_100f",
            "arch=compute_110a,code=sm_110a", "arch=compute_110,code=sm_110", "arch=compute_87,code=compute_87",
            "arch=compute_120f,code=compute_120f"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["default", "speed", "none"])
def test_nvcc_built_libraries_read_as_cuobjdump_lists_them(tmp_path: Path, mode: str) -> None:
    # nvcc 13 compresses with zstd by default and with LZ4 for --compress-mode=speed.
    built = nvcc_shared_object(tmp_path, f"lib{mode}.so", GENCODES,
                               ["-Xfatbin", "-compress-all", "-Xfatbin", f"--compress-mode={mode}"])
    found = containers_of(built.read_bytes())
    entries = [entry for container in found for entry in container.entries]
    elf, ptx = _cuobjdump_lists(built)
    assert [entry.name for entry in entries if entry.kind == "sass"] == elf
    assert [entry.name.replace("compute_", "sm_") for entry in entries if entry.kind == "ptx"] == ptx
    assert {entry.compression for entry in entries} == {"default": {"zstd"}, "speed": {"lz4"}, "none": {None}}[mode]
    assert {entry.ptx_version for entry in entries if entry.kind == "ptx"} == {(9, 0)}  # nvcc 13.0's PTX ISA
    assert judge(found, THOR, load_rules()).verdict == RUNS
    # Orin under JetPack 6: the compute_87 PTX is ISA 9.0, which a CUDA 12.6 driver cannot compile.
    assert judge(found, ORIN_JP6, load_rules()).reason.startswith("sm_80 SASS on sm_87")


def test_the_system_python_reads_the_package_too() -> None:
    # The reader is standard library only (struct): nothing to import beyond the package.
    code = "import jetson_install.base.fatbin, jetson_install.catalog.gpu_code as g; print(len(g.load_rules().rules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=str(Path(__file__).resolve().parent.parent))
    assert result.stdout.strip() == "3", result.stderr
