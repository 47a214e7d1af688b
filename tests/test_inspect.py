"""`jetson-install inspect`: a wheel's (a file's, a folder's) GPU code and libraries read without
installing, with a verdict for the board the root names; hostile wheels (a truncated library, a
huge member, a zip bomb, a corrupt fat binary) each one line, never a traceback."""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
from support import isolated_env
from support.cli import run_cli
from support.elf_files import Code, fat_binary, shared_object
from support.index_server import LoopbackIndex

from jetson_install.catalog.gpu_code import RUNS, Board, load_rules
from jetson_install.envs import gpu_inspect
from jetson_install.envs.gpu_inspect import inspect_path

ORIN = "sample:agx-orin-64gb-jp6.2"  # sm_87, tegra CUDA 12.6
THOR = "sample:agx-thor-jp7.0"  # sm_110, sbsa CUDA 13.0


def wheel(folder: Path, members: Dict[str, bytes], name: str = "addon-1.0-cp312-cp312-linux_aarch64.whl") -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        archive.writestr("addon-1.0.dist-info/RECORD", "")
    return path


def _addon(folder: Path) -> Path:
    return wheel(folder, {
        "addon/_C.so": shared_object("_C.so", ["libc10.so", "libcudart.so.13", "libaddon_dep.so.1"],
                                     fatbin=fat_binary([Code("sass", 80), Code("sass", 90, compression="zstd")],
                                                       [Code("sass", 110, compression="zstd")])),
        "addon.libs/libaddon_dep.so.1": shared_object("libaddon_dep.so.1"),
        "addon/_cpu.so": shared_object("_cpu.so"),
        "addon/__init__.py": b"",
    })


def test_a_wheel_with_code_for_the_board_runs_and_its_own_libraries_are_found(tmp_path: Path) -> None:
    result = run_cli("inspect", str(_addon(tmp_path)), "--root", THOR, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["board"] == {"arch": "sm_110", "userspace": "sbsa", "cuda": "13.0"}
    assert (data["elf_files"], data["gpu_files"], data["cannot_run"]) == (3, 1, 0)
    report = next(item for item in data["files"] if item["file"] == "addon/_C.so")
    assert report["sass"] == ["sm_80", "sm_90", "sm_110"] and report["ptx"] == [] and report["compressed"] == ["zstd"]
    assert report["verdict"]["verdict"] == RUNS and report["verdict"]["reason"] == "sm_110 SASS"
    assert report["verdict"]["containers_without_code_here"] == 1  # its first container: sm_80 and sm_90 only
    missing = [item["soname"] for item in report["missing_libraries"]]
    assert "libaddon_dep.so.1" not in missing  # in the wheel's own .libs
    assert {"soname": "libc10.so", "provider": "the channel's torch"} in report["missing_libraries"]


def test_a_wheel_without_the_boards_code_cannot_run_and_exits_1_naming_the_file(tmp_path: Path) -> None:
    path = wheel(tmp_path, {"addon/_C.so": shared_object("_C.so", fatbin=fat_binary([Code("sass", 80), Code("sass", 90)]))})
    result = run_cli("inspect", str(path), "--root", THOR)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path} for sm_110 (sbsa CUDA 13.0): 1 shared object, 1 with GPU code"
    assert lines[1] == "  cannot run here addon/_C.so: SASS sm_80 sm_90; PTX none"
    assert lines[2].strip() == ("no sm_110 code and no PTX: CUDA will report 'no kernel image is available for "
                                "execution on the device' at the first kernel")


def test_on_an_orin_sm_80_code_runs_by_the_rule_unproven_with_the_sources_listed_once(tmp_path: Path) -> None:
    result = run_cli("inspect", str(_addon(tmp_path)), "--root", ORIN)
    assert result.returncode == 0, result.stderr
    assert "  by the rule     addon/_C.so: SASS sm_80 sm_90 sm_110; PTX none; compressed (zstd)" in result.stdout
    assert "sm_80 SASS on sm_87, unproven on tegra CUDA: the sources disagree" in result.stdout
    assert result.stdout.count("against: https://github.com/jax-ml/jax/pull/40492") == 1


def test_a_wheel_with_no_gpu_code_says_so_in_one_line(tmp_path: Path) -> None:
    path = wheel(tmp_path, {"plain/_speedups.so": shared_object("_speedups.so"), "plain/x.py": b""})
    result = run_cli("inspect", str(path), "--root", THOR)
    assert result.returncode == 0
    assert result.stdout.splitlines()[1:] == ["  no CUDA kernels in any of them"]
    pure = wheel(tmp_path, {"pure/__init__.py": b""}, "pure-1.0-py3-none-any.whl")
    assert run_cli("inspect", str(pure), "--root", THOR).stdout.splitlines()[1] == \
        "  no shared objects: nothing here runs on the GPU by itself"


def test_off_a_jetson_the_code_is_listed_not_judged(tmp_path: Path) -> None:
    result = run_cli("inspect", str(_addon(tmp_path)), "--root", str(tmp_path), "--json")
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["board"] is None
    assert data["notes"][0].startswith("this root is not a Jetson with a known GPU: the code is listed, not judged")


def test_a_shared_object_and_a_folder_are_read_too(tmp_path: Path) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "libk.so").write_bytes(shared_object("libk.so", fatbin=fat_binary([Code("ptx", 80, ptx_version=(9, 0))])))
    (folder / "README").write_text("not a library")
    single = run_cli("inspect", str(folder / "libk.so"), "--root", ORIN)
    assert single.returncode == 1  # its PTX is ISA 9.0, which JetPack 6's CUDA 12.6 driver cannot compile
    assert "its PTX (ISA 9.0) needs a CUDA 13.0 driver, this board's is 12.6" in single.stdout
    whole = run_cli("inspect", str(folder), "--root", THOR)
    assert whole.returncode == 0 and "  by the rule     libk.so: SASS none; PTX compute_80 (PTX ISA 9.0)" in whole.stdout


@pytest.mark.parametrize(("members", "said"), [
    ({"a/_C.so": shared_object("_C.so", fatbin=fat_binary([Code("sass", 110)]))[:300]}, "is cut short or points outside itself"),
    ({"a/_C.so": shared_object("_C.so", fatbin=b"\x02" * 64)}, "its .nv_fatbin holds no fat binary at byte 0"),
])
def test_a_broken_library_in_a_wheel_is_one_line_and_exit_1(tmp_path: Path, members: Dict[str, bytes], said: str) -> None:
    result = run_cli("inspect", str(wheel(tmp_path, members)), "--root", THOR)
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert f"  unreadable      a/_C.so: {said}" in result.stdout.splitlines()[1]


def test_a_zip_bomb_and_an_oversized_member_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A library whose section table sits past 64 MB of zeros that compress to almost nothing: the
    # member is read forward once to its end, within the bound on its declared size.
    image = bytearray(shared_object("libbomb.so"))
    bomb = bytes(image) + bytes(64 << 20)
    path = wheel(tmp_path, {"b/libbomb.so": bomb, "b/libhuge.so": b"\x7fELF" + bytes(1 << 20)})
    assert path.stat().st_size < 1 << 20
    monkeypatch.setattr(gpu_inspect, "MAX_MEMBER", 32 << 20)
    inspection = inspect_path(path, Board(110, "sbsa", (13, 0)), load_rules(), (), Path("/"), "aarch64")
    errors = {report.path: report.error for report in inspection.files}
    assert errors["b/libbomb.so"] == f"is {len(bomb)} bytes, more than any library ({32 << 20}): not read"
    assert errors["b/libhuge.so"] is not None and "is a 32-bit" not in errors["b/libhuge.so"]
    assert not inspection.ok


def test_a_path_that_is_no_file_and_no_requirement_is_one_line_with_the_fix(tmp_path: Path) -> None:
    result = run_cli("inspect", str(tmp_path / "absent.whl"), "--root", THOR)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == f"error: {tmp_path / 'absent.whl'}: no such wheel, file or folder, nor a requirement"
    off_board = run_cli("inspect", "flash-attn==2.8.3", "--root", str(tmp_path))
    assert off_board.returncode == 2
    assert "a requirement is downloaded for a board's channel, which this root has none of" in off_board.stderr


def test_a_requirement_with_a_url_is_refused_before_any_process_or_network_with_the_command_that_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect reads files by path, or a requirement by name from the default index: a URL
    (a project folder, a git repository, an archive) is refused in one line before uv builds,
    git clones or anything is fetched, saying the command that reads what it names."""
    started: List[object] = []

    def no_process(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise AssertionError("a process started")

    def no_connection(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise AssertionError("the network was used")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setattr(socket.socket, "connect", no_connection)
    project = tmp_path / "addon project"
    project.mkdir()
    built = tmp_path / "backend-ran"
    (project / "pyproject.toml").write_text('[project]\nname = "addon"\ndynamic = ["version"]\n[build-system]\n'
                                            'requires = []\nbuild-backend = "addon_backend"\nbackend-path = ["."]\n')
    (project / "addon_backend.py").write_text(f"open({str(built)!r}, 'w').close()\n")
    token = "s3cr3t-t0ken"
    cases = {
        f"addon @ {project.as_uri()}": [
            f"error: addon @ {project.as_uri()}: a project folder holds source, not the built code inspect reads",
            f"  fix: build its wheel (uv build --wheel '{project}' --out-dir DIR), then: jetson-install inspect DIR "
            f"--root {ORIN}"],
        f"addon @ git+https://ci-bot:{token}@127.0.0.1:9/team/addon.git": [
            "error: addon @ git+https://ci-bot:****@127.0.0.1:9/team/addon.git: a git repository holds source, not "
            "the built code inspect reads",
            "  fix: build its wheel from a checkout of it (uv build --wheel CHECKOUT --out-dir DIR), then: "
            f"jetson-install inspect DIR --root {ORIN}"],
        f"addon @ https://{token}@127.0.0.1:9/files/addon-0.1-py3-none-any.whl": [
            "error: addon @ https://****@127.0.0.1:9/files/addon-0.1-py3-none-any.whl: inspect downloads a "
            "requirement by name from the default index, not from a URL",
            f"  fix: download that file, then: jetson-install inspect FILE --root {ORIN}"],
        f"addon @ {(tmp_path / 'absent.whl').as_uri()}": [
            f"error: addon @ {(tmp_path / 'absent.whl').as_uri()}: a file:// URL names {tmp_path / 'absent.whl'}, "
            "which does not exist",
            "  fix: give the path of a wheel (.whl), a shared object or a folder of them: jetson-install inspect FILE "
            f"--root {ORIN}"],
    }
    for subject, lines in cases.items():
        result = run_cli("inspect", subject, "--root", ORIN)
        assert (result.returncode, result.stderr.splitlines()) == (2, lines), subject
        assert token not in result.stdout + result.stderr
    assert not built.exists() and not started
    # A wheel named by a file:// URL: the fix, run as printed, reads it.
    path = wheel(tmp_path, {"plain/_speedups.so": shared_object("_speedups.so")}, "plain-1.0-py3-none-any.whl")
    result = run_cli("inspect", "--json", f"plain @ {path.as_uri()}", "--root", ORIN)
    assert result.returncode == 2
    fix = json.loads(result.stdout)["error"]["fix"]
    assert fix == f"read it by its path: jetson-install inspect --json {path} --root {ORIN}"
    monkeypatch.undo()
    words = shlex.split(fix.split(": ", 1)[1])
    assert words[0] == "jetson-install"
    read = run_cli(*words[1:])
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["elf_files"] == 1


def test_when_the_default_index_fails_the_fix_runs_inspect_again_not_a_lock(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('default_index = "http://127.0.0.1:9/simple/"\n')  # nothing listens on the discard port
    env = isolated_env(tmp_path, {"JETSON_INSTALL_CONFIG": str(config)}, fast_fail=True)
    result = run_cli("inspect", "flash-attn==2.8.3", "--root", ORIN, env=env)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: resolving from the default index (http://127.0.0.1:9/simple/) failed: ")
    assert lines[1:] == ["  fix: check that http://127.0.0.1:9/simple/ answers and carries what the message names, "
                         f"then run it again: jetson-install inspect flash-attn==2.8.3 --root {ORIN}"]


def _source_archive(folder: Path, ran: Path) -> Path:
    """sdonly 1.0's source archive, whose setup.py leaves `ran` behind if anything runs it."""
    tree = folder / "sdonly-1.0"
    tree.mkdir(parents=True)
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: sdonly\nVersion: 1.0\n")
    (tree / "setup.py").write_text(f"open({str(ran)!r}, 'w').close()\nfrom setuptools import setup\nsetup()\n")
    archive = folder / "sdonly-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="sdonly-1.0")
    return archive


def test_a_requirement_the_index_has_only_a_source_archive_of_is_not_judged_and_the_archive_is_not_fetched(
        tmp_path: Path) -> None:
    """flash-attn, say, on an index with no wheel of it for the board: its source holds no built
    code, so inspect says it cannot read it (exit 1) rather than "nothing here runs on the GPU";
    the archive is neither downloaded nor built."""
    files, ran = tmp_path / "index", tmp_path / "setup-ran"
    files.mkdir()
    archive = _source_archive(files, ran)
    shutil.rmtree(files / "sdonly-1.0")
    with LoopbackIndex(files, name="default") as index:
        config = tmp_path / "config.toml"
        config.write_text(f'default_index = "{index.url}"\n')
        env = isolated_env(tmp_path, {"JETSON_INSTALL_CONFIG": str(config)})
        result = run_cli("inspect", "sdonly==1.0", "--root", ORIN, env=env)
        fetched = index.downloaded_files()
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"error: sdonly==1.0: {index.url} has no wheel of sdonly 1.0 for Python 3.10 on aarch64-manylinux_2_35, only "
        f"its source archive {archive.name}, which holds source, not the built code inspect reads (an install builds "
        "it on the board)",
        f"  fix: on the board, download {index.base_url}/files/{archive.name} and build its wheel (uv build --wheel "
        f"{archive.name} --out-dir DIR), then: jetson-install inspect DIR --root {ORIN}"]
    assert fetched == [] and not ran.exists()


def test_a_source_archive_by_its_path_is_refused_with_the_command_that_reads_its_built_code(tmp_path: Path) -> None:
    ran = tmp_path / "setup-ran"
    archive = _source_archive(tmp_path / "my files", ran)
    result = run_cli("inspect", str(archive), "--root", ORIN)
    assert (result.returncode, result.stderr.splitlines()) == (2, [
        f"error: {archive}: a source archive holds source, not the built code inspect reads",
        f"  fix: build its wheel (uv build --wheel '{archive}' --out-dir DIR), then: jetson-install inspect DIR "
        f"--root {ORIN}"])
    assert not ran.exists()


def test_a_requirement_that_needs_a_newer_python_than_the_boards_is_named_so(tmp_path: Path) -> None:
    """Its Requires-Python, unmet by the channel's Python: the fix names that, not the index."""
    files = tmp_path / "index"
    files.mkdir()
    wheel(files, {"needs311/__init__.py": b"",
                  "needs311-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: needs311\nVersion: 1.0\n"
                                                     b"Requires-Python: >=3.11\n"}, "needs311-1.0-py3-none-any.whl")
    with LoopbackIndex(files, name="default") as index:
        config = tmp_path / "config.toml"
        config.write_text(f'default_index = "{index.url}"\n')
        result = run_cli("inspect", "needs311", "--root", ORIN, env=isolated_env(tmp_path, {"JETSON_INSTALL_CONFIG": str(config)}))
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "  fix: what it resolves needs Python>=3.11, and this resolution is for Python 3.10: name a release that "
        "supports Python 3.10, or name a board whose channel has a Python that satisfies it (--root, --l4t), "
        f"then run it again: jetson-install inspect needs311 --root {ORIN}")


def test_a_library_built_for_another_cpu_than_the_boards_cannot_load_there(tmp_path: Path) -> None:
    """An x86_64 wheel inspected for an Orin said "no CUDA kernels in any of them", exit 0."""
    path = wheel(tmp_path, {"foo/_x.so": shared_object("_x.so", machine="x86_64"),
                            "foo/_a.so": shared_object("_a.so")}, "foo-1.0-cp310-cp310-linux_x86_64.whl")
    result = run_cli("inspect", str(path), "--root", ORIN)
    assert result.returncode == 1, result.stderr
    assert "  unreadable      foo/_x.so: is built for x86_64, not the board's aarch64: it cannot load there" \
        in result.stdout.splitlines()
    off_a_jetson = run_cli("inspect", str(path), "--root", str(tmp_path))  # listed, not judged
    assert off_a_jetson.returncode == 0, off_a_jetson.stdout


def test_a_cut_short_library_and_wheel_are_one_line_each_exit_1_and_counted_once(tmp_path: Path) -> None:
    cut = tmp_path / "cut.so"
    cut.write_bytes(shared_object("cut.so", fatbin=fat_binary([Code("sass", 87)]))[:300])
    result = run_cli("inspect", "--json", str(cut), "--root", ORIN)
    data = json.loads(result.stdout)
    assert (result.returncode, data["schema_version"], data["elf_files"], len(data["files"])) == (1, 1, 1, 1)
    broken = tmp_path / "broken-1.0-py3-none-any.whl"
    broken.write_bytes(b"PK\x03\x04 cut short")
    result = run_cli("inspect", str(broken), "--root", ORIN)
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[1].startswith(f"  unreadable      {broken.name}: is not a readable wheel (")
    assert result.stdout.splitlines()[1].endswith("): download it again")
