"""root directory -> RootFacts: what each file under the root says, read bounded and parsed,
with no file weighed against another (that is `platform.decide`'s job).

Like distro's root_dir, only files under the root are read and no command is run, so a root
built from captured files says exactly what the board would. The split follows distro
(https://github.com/python-distro/distro): read the files first, decide from what they said.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import distro

from jetson_install.base.errors import InvalidReleaseFile
from jetson_install.base.outputs import read_regular_file
from jetson_install.base.work_folders import make_work_folder
from jetson_install.board.release_files import (
    L4T,
    parse_apt_source,
    parse_compatible,
    parse_cuda_version_json,
    parse_cuda_version_txt,
    parse_dpkg_status,
    parse_nv_tegra_release,
)

__all__ = ["RootFacts", "read_facts", "read_root_file"]

# The dpkg database is the largest file read; everything else is a few lines.
MAX_FILE_BYTES = 64 * 1024 * 1024
SMALL_FILE_BYTES = 64 * 1024

RELEASE_FILE = "etc/nv_tegra_release"
DPKG_STATUS = "var/lib/dpkg/status"
APT_SOURCE = "etc/apt/sources.list.d/nvidia-l4t-apt-source.list"
COMPATIBLE = "proc/device-tree/compatible"
MODEL = "proc/device-tree/model"
CUDA_JSON = "usr/local/cuda/version.json"
CUDA_TXT = "usr/local/cuda/version.txt"
KERNEL = "proc/sys/kernel/osrelease"
KERNEL_ARCH = "proc/sys/kernel/arch"  # Linux 6.1 and later
OS_RELEASE = ("etc/os-release", "usr/lib/os-release")  # the order distro (and systemd) reads them in
DEBIAN_VERSION = "etc/debian_version"
# The folder in the temporary folder that distro reads the copies from, as its root_dir (distro
# reads debian_version there, by path): held while it is read, so a killed run's is removed by
# the next run's (base/work_folders.py), never left to pile up.
RELEASE_STAGING = "jetson-install-release-"


@dataclass(frozen=True)
class RootFacts:
    """What each file under `root` said; None (or empty) where the file is missing, unreadable
    or says nothing. Each field is one file's, so the field names the file it came from."""

    root: Path
    release_found: bool  # RELEASE_FILE exists, even empty (a container's) or garbage
    release_l4t: Optional[L4T]
    eabi: Optional[str]  # RELEASE_FILE's EABI: the architecture it was built for
    release_problem: Optional[str]  # why RELEASE_FILE gives no release ("is empty")
    dpkg_l4t: Optional[L4T]  # DPKG_STATUS: the installed nvidia-l4t-core
    apt_l4t: Optional[Tuple[int, int]]  # APT_SOURCE: major.minor only
    compatible: Tuple[str, ...]  # COMPATIBLE's entries
    model: Optional[str]  # MODEL
    cuda_json: Optional[str]  # CUDA_JSON's major.minor
    cuda_txt: Optional[str]  # CUDA_TXT's major.minor
    os_release_file: Optional[str]  # which of OS_RELEASE was read, if any
    distro_id: str  # distro's reading of the os-release (and DEBIAN_VERSION): "ubuntu"
    distro_version: str  # "22.04"; "" when it names none
    distro_problem: Optional[str]  # why distro could not read them
    kernel: Optional[str]  # KERNEL
    kernel_arch: Optional[str]  # KERNEL_ARCH
    uname_machine: Optional[str]  # this machine's architecture, when the root is /
    unreadable: Tuple[str, ...] = ()  # a warning for each file that exists but cannot be read


class _Root:
    """Reads files below one directory; a missing or unreadable file is None (why an unreadable
    one could not be read is kept in `errors`, in the order they were read, and what one that is
    no file is in `not_files`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.errors: Dict[str, str] = {}  # why each file that exists could not be read
        self.not_files: Dict[str, str] = {}  # what is there instead of a file: "a directory"

    def resolve(self, relative: str) -> Optional[Path]:
        """The file's path with symbolic links followed inside the root: an absolute link
        (usr/local/cuda -> /usr/local/cuda-12.6 on every Jetson) means root/usr/local/cuda-12.6,
        never the host's file. None for a loop or a path that leaves the root."""
        parts = list(Path(relative).parts)
        resolved: List[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = self.root.joinpath(*resolved, part)
            if candidate.is_symlink():
                hops += 1
                if hops > 40:
                    return None
                target = Path(os.readlink(candidate))
                if target.is_absolute():
                    resolved = []
                parts = list(target.parts[1:] if target.is_absolute() else target.parts) + parts
                continue
            resolved.append(part)
        return self.root.joinpath(*resolved)

    def read_bytes(self, relative: str, limit: int = MAX_FILE_BYTES) -> Optional[bytes]:
        """A regular file's bytes (at most `limit`), read in small pieces; None when missing,
        not a regular file (a FIFO would block, a device never ends), or unreadable."""
        try:
            path = self.resolve(relative)
            if path is None:
                self.not_files[relative] = "a loop of symbolic links"
                return None
            data = read_regular_file(path, limit, follow=False)
            if data is None:
                self.not_files[relative] = _kind(os.stat(path).st_mode)
            return data
        except OSError as exc:
            self._unreadable(relative, exc)
            return None

    def read_text(self, relative: str, limit: int = MAX_FILE_BYTES) -> Optional[str]:
        data = self.read_bytes(relative, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def _unreadable(self, relative: str, error: OSError) -> None:
        if error.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            self.errors[relative] = error.strerror or str(error)

    def unreadable(self, *said_elsewhere: str) -> Tuple[str, ...]:
        """A warning for each file that exists but could not be read, but those whose problem a
        warning of their own states (the release file's: `platform._decide_l4t`)."""
        return tuple([f"{relative} cannot be read ({why}); treated as missing"
                      for relative, why in self.errors.items() if relative not in said_elsewhere]
                     + [f"{relative} is {kind} (not a regular file); treated as missing"
                        for relative, kind in self.not_files.items() if relative not in said_elsewhere])


def _kind(mode: int) -> str:
    """What a path that is no regular file is, as a message names it."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "of another kind")


def read_root_file(root: Path, relative: str, limit: int = SMALL_FILE_BYTES) -> Optional[bytes]:
    """One file under `root`, read as detect reads it: bounded, links kept inside the root,
    None for a FIFO, a device, a missing or an unreadable file."""
    return _Root(root).read_bytes(relative, limit)


@dataclass(frozen=True)
class _Release:
    """RELEASE_FILE's reading: the release and EABI it names, or why it names none."""

    found: bool
    l4t: Optional[L4T] = None
    eabi: Optional[str] = None
    problem: Optional[str] = None


@dataclass(frozen=True)
class _Distro:
    """distro's reading of the os-release, or why it could not read one."""

    file: Optional[str]
    id: str
    version: str
    problem: Optional[str]


def read_facts(root: Path) -> RootFacts:
    """Every file detection uses, read once under `root` in the same order each time (so the
    warnings for unreadable files come in a stable order)."""
    files = _Root(root)
    release = _read_release(files)
    dpkg_text = files.read_text(DPKG_STATUS)
    apt_text = files.read_text(APT_SOURCE)
    compatible = parse_compatible(files.read_bytes(COMPATIBLE) or b"")
    model = _stripped(files.read_text(MODEL), "\x00 \n")
    cuda_json = files.read_text(CUDA_JSON)
    cuda_txt = files.read_text(CUDA_TXT)
    os_release = _read_distro(files)
    kernel = _stripped(files.read_text(KERNEL, SMALL_FILE_BYTES))
    kernel_arch = _stripped(files.read_text(KERNEL_ARCH, SMALL_FILE_BYTES))
    return RootFacts(
        root=root,
        release_found=release.found,
        release_l4t=release.l4t,
        eabi=release.eabi,
        release_problem=release.problem,
        dpkg_l4t=parse_dpkg_status(dpkg_text) if dpkg_text else None,
        apt_l4t=parse_apt_source(apt_text) if apt_text else None,
        compatible=compatible,
        model=model,
        cuda_json=parse_cuda_version_json(cuda_json) if cuda_json else None,
        cuda_txt=parse_cuda_version_txt(cuda_txt) if cuda_txt else None,
        os_release_file=os_release.file,
        distro_id=os_release.id,
        distro_version=os_release.version,
        distro_problem=os_release.problem,
        kernel=kernel,
        kernel_arch=kernel_arch,
        uname_machine=os.uname().machine if root.resolve() == Path("/") else None,
        unreadable=files.unreadable(RELEASE_FILE),
    )


def _stripped(text: Optional[str], chars: Optional[str] = None) -> Optional[str]:
    return (text or "").strip(chars) or None


def _read_release(files: _Root) -> _Release:
    data = files.read_bytes(RELEASE_FILE)
    if data is None and RELEASE_FILE in files.errors:
        # There, but unreadable (mode 000): not the same as a root without one.
        return _Release(found=True, problem=f"cannot be read ({files.errors[RELEASE_FILE]})")
    if data is None and RELEASE_FILE in files.not_files:
        return _Release(found=True, problem=f"is {files.not_files[RELEASE_FILE]} (not a regular file)")
    if data is None:
        return _Release(found=False)
    try:
        l4t, eabi = parse_nv_tegra_release(data)
    except InvalidReleaseFile as exc:
        return _Release(found=True, problem=exc.message)
    return _Release(found=True, l4t=l4t, eabi=eabi)


def _read_distro(files: _Root) -> _Distro:
    """distro's reading of the os-release, from bounded copies of the files under the root:
    distro opens what it is given, so it never sees the root itself (a FIFO, a link out of the
    root or to /dev/zero, a huge file)."""
    where, os_release = next(((name, text) for name in OS_RELEASE
                              for text in [files.read_text(name, SMALL_FILE_BYTES)] if text is not None), (None, None))
    debian_version = files.read_text(DEBIAN_VERSION, SMALL_FILE_BYTES)
    with make_work_folder(RELEASE_STAGING) as staged:
        etc = staged / "etc"
        etc.mkdir()
        if os_release is not None:
            (etc / "os-release").write_text(os_release, encoding="utf-8")
        if debian_version is not None:
            (etc / "debian_version").write_text(debian_version.encode("ascii", "replace").decode(), encoding="ascii")
        release = distro.LinuxDistribution(include_lsb=False, include_uname=False, include_oslevel=False,
                                           root_dir=str(staged))
        try:
            return _Distro(where, release.id(), release.version(), None)
        except (OSError, UnicodeDecodeError) as exc:
            return _Distro(where, "", "", str(exc))
