"""Libraries by soname (envs/sonames.py, the doctor's `libraries` check): every library the
vendor builds' own .so files link (their DT_NEEDED, read from the files) resolves in torch's
lib folder, the environment's wheels or the board's library path, or is named with the file
that needs it and what the channel records as its provider."""

from __future__ import annotations

import base64
import json
import dataclasses
import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import pytest
from support import present
from support.doctor_env import ORIN, make_env, run
from support.elf_files import shared_object
from support.stub_projects import IndexDirs
from support.index_server import LoopbackIndex

from jetson_install.board import apt
from jetson_install.catalog.catalog import VendorSource, load_catalog
from jetson_install.doctor.context import uv_command
from jetson_install.envs.sonames import LibraryReport, vendor_libraries

THOR = load_catalog().channel("jp7-thor-cu130")
THOR_FALLBACK = THOR.sources[1]  # Jetson AI Lab's sbsa/cu130: its torch links libcudss.so.0
JP6 = load_catalog().channel("jp6-cu126")


def distribution(site: Path, name: str, version: str, files: Dict[str, bytes]) -> None:
    """`files` (relative to site-packages) written, with a dist-info whose RECORD lists them."""
    rows = []
    for relative, data in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{relative},sha256={digest},{len(data)}")
    dist_info = site / f"{name}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist_info / "RECORD").write_text("\n".join(rows + [f"{dist_info.name}/RECORD,,"]) + "\n")


def torch(site: Path, needs: Sequence[str], cuda: Optional[str] = "13.0") -> None:
    distribution(site, "torch", "2.11.0", {
        "torch/__init__.py": b"",
        "torch/version.py": f"cuda: Optional[str] = {cuda!r}\n".encode(),
        "torch/lib/libtorch_cuda.so": shared_object("libtorch_cuda.so", ["libc10.so", *needs], ["$ORIGIN"]),
        "torch/lib/libc10.so": shared_object("libc10.so"),
    })


def board(root: Path, conf: Dict[str, str], libraries: Dict[str, str]) -> Path:
    """A board root: /etc files as given, and a library (an aarch64 ELF called by its name) in each folder."""
    for path, text in conf.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for folder, name in libraries.items():
        (root / folder.lstrip("/")).mkdir(parents=True, exist_ok=True)
        (root / folder.lstrip("/") / name).write_bytes(shared_object(name))
    return root


def bare(root: Path) -> Path:
    """A board root whose library path is one empty folder: nothing of this machine's is searched."""
    return board(root, {"etc/ld.so.conf": "/opt/nothing\n"}, {"/opt/nothing": ".keep"})


def read(site: Path, root: Path, sources: Sequence[VendorSource] = ()) -> LibraryReport:
    return vendor_libraries([site], root, "aarch64", list(sources))


def test_each_soname_resolves_in_torch_lib_the_wheels_or_the_boards_library_path(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    torch(site, ["libcudart.so.13", "libcudss.so.0", "libcuda.so.1"])
    (site / "nvidia/cu13/lib").mkdir(parents=True)
    (site / "nvidia/cu13/lib/libcudart.so.13").write_bytes(shared_object("libcudart.so.13"))
    # JetPack 6's cudss puts its library where only an ld.so.conf.d entry makes the loader look.
    root = board(tmp_path / "root", {
        "etc/ld.so.conf": "# the usual first line\ninclude /etc/ld.so.conf.d/*.conf\n",
        "etc/ld.so.conf.d/cudss.conf": "/usr/lib/aarch64-linux-gnu/libcudss/12  # from the cudss package\n",
    }, {"/usr/lib/aarch64-linux-gnu/libcudss/12": "libcudss.so.0"})
    report = read(site, root)
    assert report.ok and report.files == ("torch/lib/libtorch_cuda.so", "torch/lib/libc10.so")
    assert report.found == {"libc10.so": "torch/lib", "libcudart.so.13": "nvidia/cu13/lib",
                            "libcudss.so.0": str(root / "usr/lib/aarch64-linux-gnu/libcudss/12")}
    # The driver's own library is the board's (mounted at run time in a container): never "missing".
    assert report.driver == ("libcuda.so.1",) and report.missing == ()


def test_torchs_own_lib_folder_is_searched_before_every_other_packages(tmp_path: Path) -> None:
    # torchvision's _C.so names libc10.so without a run path to it: the loader takes the one
    # `import torch` loaded from torch/lib, never another package's copy in a folder that sorts
    # before torch's (or that torch's loader would only reach later).
    site = tmp_path / "site-packages"
    distribution(site, "torch", "2.11.0", {"torch/__init__.py": b"", "torch/version.py": b"cuda = '13.0'\n",
                                          "torch/lib/libc10.so": shared_object("libc10.so")})
    distribution(site, "torchvision", "0.26.0", {"torchvision/_C.so": shared_object("_C.so", ["libc10.so"])})
    (site / "apex/lib").mkdir(parents=True)
    (site / "apex/lib/libc10.so").write_bytes(b"")
    report = read(site, bare(tmp_path / "root"))
    assert report.files == ("torch/lib/libc10.so", "torchvision/_C.so")
    assert report.found == {"libc10.so": "torch/lib"}


def test_the_real_root_names_its_folders_as_the_loader_does(tmp_path: Path) -> None:
    # The root / however it is given (here through a link to it): its library folders are named
    # as the board's loader names them, /usr/lib/..., not as a path through the link.
    site = tmp_path / "site-packages"
    torch(site, ["libc.so.6"], cuda=None)
    link = tmp_path / "slash"
    link.symlink_to("/")
    for root in (Path("/"), link):
        where = vendor_libraries([site], root, os.uname().machine, []).found["libc.so.6"]
        assert where.startswith("/") and not where.startswith(str(tmp_path)), where
        assert (Path(where) / "libc.so.6").exists(), where


def test_the_stand_in_companion_whose_new_major_drops_the_soname_is_named_with_its_bound(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    torch(site, ["libcudss.so.0"])
    # What nvidia-cudss-cu13 1.0.0.35 installs: only libcudss.so.1.
    distribution(site, "nvidia_cudss_cu13", "1.0.0.35", {"nvidia/cu13/lib/libcudss.so.1": shared_object("libcudss.so.1")})
    report = read(site, bare(tmp_path / "root"), [THOR_FALLBACK])
    assert not report.ok
    (missing,) = report.missing
    assert missing.describe() == ("libcudss.so.0 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader "
                                  "searches; the channel's companion wheel nvidia-cudss-cu13<1 must provide it, and "
                                  "the installed nvidia-cudss-cu13 1.0.0.35 does not")
    # 0.8.0.10, within the bound, ships it: found where the wheel put it.
    (site / "nvidia/cu13/lib/libcudss.so.0").write_bytes(shared_object("libcudss.so.0"))
    assert read(site, bare(tmp_path / "root"), [THOR_FALLBACK]).found["libcudss.so.0"] == "nvidia/cu13/lib"


def test_an_apt_package_the_channel_names_is_given_as_the_provider(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    torch(site, ["libcudss.so.0"], cuda="12.6")
    root = bare(tmp_path / "root")
    (missing,) = read(site, root, JP6.sources).missing
    assert missing.describe().endswith("; the apt package cudss must provide it")
    # A soname the channel records nothing for is named without a provider.
    torch(tmp_path / "other", ["libnotrecorded.so.7"])
    (unknown,) = read(tmp_path / "other", root, JP6.sources).missing
    assert unknown.provider is None and unknown.describe().endswith("is in no folder the loader searches")


def test_bitsandbytes_is_read_for_the_one_library_it_loads_for_torchs_cuda(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    torch(site, [], cuda="13.0")
    distribution(site, "bitsandbytes", "0.50.2", {
        "bitsandbytes/libbitsandbytes_cpu.so": shared_object(None, ["libgomp.so.1"]),
        # A CUDA 12 library a CUDA 13 board never loads (the aarch64 wheel carries cuda118 to cuda132).
        "bitsandbytes/libbitsandbytes_cuda126.so": shared_object(None, ["libcudart.so.12"]),
        "bitsandbytes/libbitsandbytes_cuda130.so": shared_object(None, ["libcudart.so.13"]),
    })
    root = bare(tmp_path / "root")
    read_files = read(site, root).files
    assert "bitsandbytes/libbitsandbytes_cuda130.so" in read_files and "bitsandbytes/libbitsandbytes_cpu.so" in read_files
    assert "bitsandbytes/libbitsandbytes_cuda126.so" not in read_files
    assert [missing.soname for missing in read(site, root).missing] == ["libcudart.so.13", "libgomp.so.1"]


def test_torchaudios_optional_ffmpeg_and_sox_backends_are_not_required(tmp_path: Path) -> None:
    # torchaudio 2.8's aarch64 wheel, as read from its files: its own library needs torch's, and
    # the FFmpeg 4-6 and sox backends need libraries a board may not have; torchaudio imports
    # without them (seen in the arm64 lane: 16 such sonames failed the first cut of this check).
    site = tmp_path / "site-packages"
    torch(site, [])
    distribution(site, "torchaudio", "2.8.0", {
        "torchaudio/lib/libtorchaudio.so": shared_object(None, ["libc10.so", "libtorchaudio_missing.so.1"]),
        "torchaudio/lib/libtorchaudio_sox.so": shared_object(None, ["libsox.so"]),
        "torchaudio/lib/_torchaudio_sox.so": shared_object(None, ["libtorchaudio_sox.so", "libsox.so"]),
        "torio/lib/libtorio_ffmpeg6.so": shared_object(None, ["libavcodec.so.60"]),
        "torio/lib/_torio_ffmpeg4.so": shared_object(None, ["libavcodec.so.58", "libavdevice.so.58"]),
    })
    report = read(site, bare(tmp_path / "root"))
    assert "torchaudio/lib/libtorchaudio.so" in report.files
    assert not any("ffmpeg" in path or "sox" in path for path in report.files), report.files
    assert [missing.soname for missing in report.missing] == ["libtorchaudio_missing.so.1"]


def test_the_loaders_configuration_is_read_as_ldconfig_reads_it(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    torch(site, ["libone.so.1", "libtwo.so.2", "libthree.so.3", "libgone.so.4"])
    root = board(tmp_path / "root", {
        # hwcap lines and comments are not folders; an include may be relative, and may loop.
        "etc/ld.so.conf": "hwcap 0 nosegneg\ninclude ld.so.conf.d/*.conf\n/opt/one # trailing comment\n",
        "etc/ld.so.conf.d/a.conf": "/opt/two:/opt/three\ninclude /etc/ld.so.conf\n",
    }, {"/opt/one": "libone.so.1", "/opt/two": "libtwo.so.2", "/opt/three": "libthree.so.3"})
    (root / "opt/one/libgone.so.4").symlink_to("/nonexistent/libgone.so.4")  # a removed alternative
    report = read(site, root)
    assert set(report.found) >= {"libone.so.1", "libtwo.so.2", "libthree.so.3"}
    assert [missing.soname for missing in report.missing] == ["libgone.so.4"]


def test_a_sample_root_describes_the_board_while_the_libraries_load_on_this_machine(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    torch(site, ["libc.so.6"])
    sample = Path(load_catalog().path).parent / "jetson_install/board/samples/agx-thor-jp7.0"
    assert (sample / "etc/nv_tegra_release").is_file()  # release files only, no library path
    where = read(site, sample).found["libc.so.6"]
    assert (Path(where) / "libc.so.6").is_file() and not where.startswith(str(sample))


def test_found_means_a_library_of_the_boards_machine_called_what_is_needed_and_a_path_is_a_path(
        tmp_path: Path) -> None:
    import struct

    site = tmp_path / "site-packages"
    wrong = {"libempty.so.1": b"", "lib32.so.1": shared_object("lib32.so.1")[:4] + b"\x01" + shared_object("lib32.so.1")[5:],
             "libother.so.1": shared_object("libother.so.2"), "libx86.so.1": shared_object("libx86.so.1", machine="x86_64")}
    torch(site, [*wrong, "libfolder.so.1", "../../../../etc/hostname", "/opt/lib/libabsolute.so.1", "libz.75f4ef3d.so.1",
                 "libnoname.so.1"])
    lib = site / "torch" / "lib"
    for name, data in wrong.items():
        (lib / name).write_bytes(data)
    (lib / "libfolder.so.1").mkdir()
    # What the loader takes: a copy a wheel renamed with a hash tag, keeping its own DT_SONAME (torchvision
    # 0.28's libz.75f4ef3d.so.1 is libz.so.1), and a library that names itself nothing (torch 2.13's
    # libarm_compute.so).
    (lib / "libz.75f4ef3d.so.1").write_bytes(shared_object("libz.so.1"))
    (lib / "libnoname.so.1").write_bytes(shared_object(None))
    root = bare(tmp_path / "root")
    (root / "opt/lib").mkdir(parents=True)
    (root / "opt/lib/libabsolute.so.1").write_bytes(shared_object("libabsolute.so.1"))
    assert struct.unpack_from("<H", wrong["libx86.so.1"], 18)[0] == 62  # e_machine: x86_64
    report = read(site, root)
    assert set(report.found) == {"libc10.so", "libz.75f4ef3d.so.1", "libnoname.so.1", "/opt/lib/libabsolute.so.1"}
    said = {missing.soname: missing.describe() for missing in report.missing}
    assert said == {
        "libempty.so.1": "libempty.so.1 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches "
                         "(passed over: torch/lib/libempty.so.1: is not an ELF file)",
        "lib32.so.1": "lib32.so.1 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches (passed "
                      "over: torch/lib/lib32.so.1: is a 32-bit ELF file; only 64-bit little-endian shared objects are read)",
        "libother.so.1": "libother.so.1 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches "
                         "(passed over: torch/lib/libother.so.1: is libother.so.2 (its DT_SONAME))",
        "libx86.so.1": "libx86.so.1 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches (passed "
                       "over: torch/lib/libx86.so.1: is built for x86_64, not aarch64)",
        "libfolder.so.1": "libfolder.so.1 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches "
                          "(passed over: torch/lib/libfolder.so.1: is not a regular file (a folder))",
        "../../../../etc/hostname": "../../../../etc/hostname (needed by torch/lib/libtorch_cuda.so) is a path, which "
                                    "the loader opens from the folder the program runs in",
    }
    assert not report.ok


def test_a_vendor_file_that_is_not_a_readable_library_is_reported(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    distribution(site, "torch", "2.11.0", {"torch/lib/libtorch.so": b"INPUT(-ltorch_cpu)\n"})
    report = read(site, bare(tmp_path / "root"))
    assert report.unreadable == ("torch/lib/libtorch.so: is not an ELF file",) and not report.ok


# --------------------------------------------------------------------------- the doctor's check

def _with_library(python: str, needs: Sequence[str]) -> Path:
    """The stub torch of a doctor environment, given a libtorch_cuda.so its RECORD lists."""
    (site,) = Path(python).parent.parent.glob("lib/python*/site-packages")
    library = shared_object("libtorch_cuda.so", list(needs))
    (site / "torch" / "lib").mkdir()
    (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(library)
    (dist_info,) = site.glob("torch-*.dist-info")
    (dist_info / "RECORD").write_text(f"torch/lib/libtorch_cuda.so,,{len(library)}\n{dist_info.name}/RECORD,,\n")
    return site


def test_the_doctor_names_the_soname_the_file_and_the_companion_with_its_bound(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env", torch_version="2.11.0", torch_cuda="13.0")
    _with_library(python, ["libcudss.so.0"])
    thor = dataclasses.replace(ORIN, root=str(bare(tmp_path / "root")))
    report = run(python, platform=thor, channel=THOR, vendor=THOR_FALLBACK, only=["libraries"])
    check = report.check("libraries")
    assert check.status == "fail" and check.title == "every library the vendor builds link is found"
    assert check.detail == ("libcudss.so.0 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches; "
                            "the channel's companion wheel nvidia-cudss-cu13<1 must provide it")
    # A new environment takes the companion within its bound again.
    assert present(check.fix).startswith(f"jetson-install obliteratus --venv {tmp_path / 'env'}-jetson-install")
    assert report.headline == "libraries"


def test_on_jetpack_6_the_fix_is_the_apt_package_from_nvidias_cuda_repository(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    _with_library(python, ["libcudss.so.0"])
    orin = dataclasses.replace(ORIN, root=str(bare(tmp_path / "root")))
    check = run(python, platform=orin, channel=JP6, only=["libraries"]).check("libraries")
    assert check.status == "fail" and check.detail.endswith("; the apt package cudss must provide it")
    assert check.fix == apt.install_command(["cudss"]) and "cuda-keyring" in check.fix


def test_the_doctor_counts_where_each_library_was_found(tmp_path: Path) -> None:
    python = make_env(tmp_path / "env")
    site = _with_library(python, ["libc10.so", "libcuda.so.1"])
    (site / "torch/lib/libc10.so").write_bytes(shared_object("libc10.so"))
    orin = dataclasses.replace(ORIN, root=str(bare(tmp_path / "root")))
    check = run(python, platform=orin, channel=JP6, only=["libraries"]).check("libraries")
    assert check.status == "ok"
    assert check.detail == ("all 1 libraries the 1 vendor shared objects need are found (1 in torch/lib); "
                            "libcuda.so.1 is the driver's, judged by cuda-available")


def test_a_stub_torch_without_libraries_has_nothing_to_resolve(tmp_path: Path) -> None:
    check = run(make_env(tmp_path / "env"), platform=ORIN, channel=JP6, only=["libraries"]).check("libraries")
    assert (check.status, check.detail) == ("ok", "the vendor packages hold no shared objects: nothing to resolve")


# --------------------------------------------------------------------------- an install

@pytest.mark.slow
def test_a_companion_whose_new_major_drops_the_soname_fails_the_install_before_the_switch(
        tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], obliteratus_source: Path) -> None:
    """The stand-in: a vendor torch whose libtorch_cuda.so links libcudss.so.0, and a companion
    whose 0.8.0.10 ships libcudss.so.0 while its newer 1.0.0.35 ships only libcudss.so.1."""
    import os

    from support import isolated_env
    from support.catalogs import stub_catalog_text
    from support.installer import Installer
    from support.planned import assert_ran_as_planned
    from support.stub_projects import VENDOR_TORCH, _TORCH_INIT_BODY, _TORCH_REQUIRES, _torch_modules
    from support.wheels import build_wheel

    for wheel in private_index_dirs.vendor.glob("torch-*.whl"):
        wheel.unlink()
    modules: Dict[str, Union[str, bytes]] = {**_torch_modules(True, "12.6"),
               "torch/lib/libtorch_cuda.so": shared_object("libtorch_cuda.so", ["libcudss.so.0"])}
    build_wheel(private_index_dirs.vendor, "torch", VENDOR_TORCH, requires=_TORCH_REQUIRES, requires_python=">=3.8",
                modules=modules, init_body=_TORCH_INIT_BODY, source_index="vendor")
    for version, soname in (("0.8.0.10", "libcudss.so.0"), ("1.0.0.35", "libcudss.so.1")):
        build_wheel(private_index_dirs.public, "nvidia-cudss-cu13", version, source_index="public",
                    modules={f"nvidia/cu13/lib/{soname}": shared_object(soname)})
    real = (Path(load_catalog().path)).read_text()
    env = isolated_env(tmp_path, fast_fail=True)
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(private_index_dirs.public)
    installer = Installer(tmp_path / "obl", env, vendor.url, public.url, obliteratus_source)

    def install(companion: str) -> Tuple[int, Dict[str, Any], str]:
        catalog = tmp_path / f"index-{len(list(tmp_path.glob('index-*')))}.toml"
        catalog.write_text(stub_catalog_text(real, private_index_dirs.vendor, companions=((companion, ("libcudss.so.0",)),)))
        env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
        return installer.run()

    code, data, stderr = install("nvidia-cudss-cu13<1")
    assert code == 0, stderr
    assert_ran_as_planned(data)
    steps = [step["id"] for step in data["steps"]]
    assert steps.index("fetch") < steps.index("vendor") < steps.index("libraries") < steps.index("target")
    libraries_step = next(step for step in data["steps"] if step["id"] == "libraries")
    assert libraries_step["detail"].startswith("found libcudss.so.0 in nvidia/cu13/lib")
    assert installer.python("import nvidia_cudss_cu13 as m; print(m.__version__)") == "0.8.0.10"
    evidence = json.loads((installer.venv / "jetson-install" / "evidence.json").read_text())
    libraries = next(check for check in evidence["checks"] if check["id"] == "libraries")
    assert libraries["status"] == "ok" and "in the environment's wheels" in libraries["detail"]
    before = os.readlink(installer.venv)

    # Asked by name alone, the companion resolves to the release that dropped the soname: the
    # install stops after the vendor step installed it, before the target is installed or anything switched.
    code, data, stderr = install("nvidia-cudss-cu13")
    assert code == 1 and "Traceback" not in stderr
    assert data["status"] == "failed" and data["error"]["step"] == "libraries", data["error"]
    assert data["error"]["message"].startswith(
        "step 'libraries' failed: libcudss.so.0 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader "
        "searches; the channel's companion wheel nvidia-cudss-cu13 must provide it, and the installed "
        "nvidia-cudss-cu13 1.0.0.35 does not")
    assert data["error"]["fix"].startswith("upgrade jetson-install (")
    assert "target" not in [step["id"] for step in data["steps"]]
    assert os.readlink(installer.venv) == before  # nothing switched: the working environment stays


def test_a_named_pipe_listed_as_a_vendor_library_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    python = make_env(tmp_path / "env")
    site = _with_library(python, ["libc10.so"])
    (site / "torch/lib/libc10.so").write_bytes(shared_object("libc10.so"))
    os.mkfifo(site / "torch/lib/libfifo.so")
    (dist_info,) = site.glob("torch-*.dist-info")
    with open(dist_info / "RECORD", "a") as record:
        record.write("torch/lib/libfifo.so,,\n")
    # A process of its own: before, its open() of the pipe waited for a writer that never came.
    result = subprocess.run([sys.executable, "-m", "jetson_install", "doctor", "--python", python, "--check",
                             "libraries", "--root", "sample:agx-orin-64gb-jp6.2"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("✗ every library the vendor builds link is found [libraries]: "
                                    "torch/lib/libfifo.so: is not a regular file (a named pipe)\n"), result.stdout


# --------------------------------------------------------------------------- a removed library's fix

def _thor_env(tmp_path: Path, needs: Sequence[str]) -> "Tuple[str, Path]":
    python = make_env(tmp_path / "env", torch_version="2.13.0", torch_cuda="13.0")
    return python, _with_library(python, needs)


@pytest.mark.parametrize(("soname", "name", "version", "path"), [
    # What torch 2.13.0's own requirements put in the environment (its aarch64 wheel's METADATA),
    # as their wheels lay the files out.
    ("libcusparseLt.so.0", "nvidia_cusparselt_cu13", "0.8.1", "nvidia/cusparselt/lib/libcusparseLt.so.0"),
    ("libcudnn.so.9", "nvidia_cudnn_cu13", "9.20.0.48", "nvidia/cudnn/lib/libcudnn.so.9"),
])
def test_a_library_its_distribution_lists_but_lost_is_named_with_it_and_a_reinstall_of_it(
        tmp_path: Path, soname: str, name: str, version: str, path: str) -> None:
    python, site = _thor_env(tmp_path, [soname])
    distribution(site, name, version, {path: shared_object(soname)})
    (site / path).unlink()
    thor = dataclasses.replace(ORIN, root=str(bare(tmp_path / "root")))
    check = run(python, platform=thor, channel=THOR, only=["libraries"]).check("libraries")
    dashed = name.replace("_", "-")
    assert check.status == "fail"
    assert check.detail == (f"{soname} (needed by torch/lib/libtorch_cuda.so) is missing: the installed {dashed} "
                            f"{version} lists {path} in its RECORD, and it is not there")
    assert check.fix == (f"reinstall {dashed} {version} to put it back (under the environment's constraints): "
                         f"{uv_command()} pip install --python {python} --no-deps --reinstall-package {dashed} "
                         f"{dashed}=={version}")


def test_a_missing_cuda_runtime_library_is_named_with_its_package_at_the_version_the_environment_requires(
        tmp_path: Path) -> None:
    python, site = _thor_env(tmp_path, ["libcudart.so.13"])
    # torch 2.13.0 requires cuda-toolkit[cudart,...]==13.0.3, whose cudart extra pins the runtime wheel.
    toolkit = site / "cuda_toolkit-13.0.3.dist-info"
    toolkit.mkdir()
    (toolkit / "METADATA").write_text("Metadata-Version: 2.1\nName: cuda-toolkit\nVersion: 13.0.3\n"
                                      'Requires-Dist: nvidia-cuda-runtime==13.0.96; extra == "cudart"\n')
    (toolkit / "RECORD").write_text(f"{toolkit.name}/METADATA,,\n")
    thor = dataclasses.replace(ORIN, root=str(bare(tmp_path / "root")), cuda="13.0", family="Thor", kind="sbsa")
    check = run(python, platform=thor, channel=THOR, only=["libraries"]).check("libraries")
    assert check.status == "fail"
    assert check.detail == ("libcudart.so.13 (needed by torch/lib/libtorch_cuda.so) is in no folder the loader searches "
                            "(libcudart.so.13 is in pip: nvidia-cuda-runtime)")
    assert check.fix == (f"install nvidia-cuda-runtime into the environment: {uv_command()} pip install --python "
                         f"{python} nvidia-cuda-runtime==13.0.96")


@pytest.mark.slow
def test_the_fix_for_a_removed_library_of_the_environment_puts_it_back_as_printed(
        tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex],
        obliteratus_source: Path) -> None:
    """A vendor torch whose libtorch_cuda.so links libcusparseLt.so.0, which a wheel it requires
    provides (as torch 2.13.0's nvidia-cusparselt-cu13 does); the file removed, the doctor's fix
    runs as printed and the check passes again."""
    import shlex
    import subprocess

    from support import isolated_env
    from support.catalogs import stub_catalog_text
    from support.installer import Installer
    from support.stub_projects import VENDOR_TORCH, _TORCH_INIT_BODY, _TORCH_REQUIRES, _torch_modules
    from support.wheels import build_wheel

    for wheel in private_index_dirs.vendor.glob("torch-*.whl"):
        wheel.unlink()
    modules: Dict[str, Union[str, bytes]] = {**_torch_modules(True, "12.6"),
               "torch/lib/libtorch_cuda.so": shared_object("libtorch_cuda.so", ["libcusparseLt.so.0"])}
    build_wheel(private_index_dirs.vendor, "torch", VENDOR_TORCH, requires=[*_TORCH_REQUIRES, "nvidia-cusparselt-cu13"],
                requires_python=">=3.8", modules=modules, init_body=_TORCH_INIT_BODY, source_index="vendor")
    build_wheel(private_index_dirs.public, "nvidia-cusparselt-cu13", "0.8.1", source_index="public",
                modules={"nvidia/cusparselt/lib/libcusparseLt.so.0": shared_object("libcusparseLt.so.0")})
    env = isolated_env(tmp_path, fast_fail=True)
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text(Path(load_catalog().path).read_text(), private_index_dirs.vendor))
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(private_index_dirs.public)
    installer = Installer(tmp_path / "obl", env, vendor.url, public.url, obliteratus_source)
    code, _, stderr = installer.run()
    assert code == 0, stderr
    (library,) = installer.venv.glob("lib/python*/site-packages/nvidia/cusparselt/lib/libcusparseLt.so.0")
    library.unlink()

    def doctor() -> Dict[str, Any]:
        result = subprocess.run([sys.executable, "-m", "jetson_install", "doctor", "--venv", str(installer.venv),
                                 "--root", "sample:agx-orin-64gb-jp6.2", "--check", "libraries", "--json"],
                                capture_output=True, text=True, env=env, timeout=300)
        checks: List[Dict[str, Any]] = json.loads(result.stdout)["checks"]
        [check] = [check for check in checks if check["id"] == "libraries"]
        return check

    check = doctor()
    assert check["status"] == "fail" and "the installed nvidia-cusparselt-cu13 0.8.1 lists " \
                                         "nvidia/cusparselt/lib/libcusparseLt.so.0 in its RECORD" in check["detail"]
    command = check["fix"].split(": ", 1)[1]
    assert command.startswith(f"{uv_command()} pip install --python ") and f"--default-index {public.url}" in command
    fixed = subprocess.run(shlex.split(command), capture_output=True, text=True, env=env, timeout=300)
    assert fixed.returncode == 0, fixed.stderr
    assert library.is_file() and doctor()["status"] == "ok"
    assert installer.torch() == f"{VENDOR_TORCH} vendor"  # under the constraints: the vendor torch stays
