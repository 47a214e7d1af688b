"""root directory -> Platform: which Jetson, L4T, JetPack and CUDA this is.

Reads only files under the root (like distro's root_dir) and never runs a
command, so a root built from captured files answers exactly as the board would.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jetson_install import UPGRADE_COMMAND
from jetson_install.base.errors import BadInput, InvalidReleaseFile, NotAJetson
from jetson_install.base.outputs import read_regular_file
from jetson_install.board.platform_data import PlatformData, platform_data
from jetson_install.board.release_files import (
    L4T,
    parse_apt_source,
    parse_compatible,
    parse_cuda_version_json,
    parse_cuda_version_txt,
    parse_dpkg_status,
    parse_l4t,
    parse_nv_tegra_release,
)

__all__ = ["Platform", "L4TOverride", "SocOverride", "detect", "read_root_file", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

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


@dataclass(frozen=True)
class L4TOverride:
    """An L4T release given explicitly, for containers whose release file is empty."""

    value: str
    source: str  # "--l4t" or "JETSON_L4T_VERSION"


@dataclass(frozen=True)
class SocOverride:
    """A SoC given explicitly ("tegra264"), for containers that cannot read the device tree:
    unprivileged containers on Jetson commonly cannot (https://github.com/NVIDIA/jetson-gpio/issues/73,
    https://github.com/ultralytics/ultralytics/issues/18449), and R39 runs on Thor and on Orin."""

    value: str
    source: str  # "--soc", "JETSON_INSTALL_SOC", or the entrypoint's JETSON_INSTALL_HOST_SOC


@dataclass(frozen=True)
class Platform:
    """Everything detection learned, with the file (or rule) behind each value."""

    root: str
    jetson: bool
    l4t: Optional[L4T]
    jetpack: Optional[str]  # "6.2"; "6.x" for an unknown point release of a known major
    cuda: Optional[str]  # "12.6", major.minor only
    soc: Optional[str]  # "tegra234"
    family: Optional[str]  # "Orin"
    module: Optional[str]
    model: Optional[str]  # proc/device-tree/model: shown, never used for decisions
    compute_capability: Optional[str]  # "8.7"
    kind: Optional[str]  # the CUDA userspace: "tegra" (R36 and older), "sbsa" (JetPack 7, R38 on)
    ubuntu: Optional[str]
    python: Optional[str]  # the JetPack's system Python, "3.10"
    kernel: Optional[str]
    arch: Optional[str]
    sources: Mapping[str, str] = field(default_factory=dict)
    warnings: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "root": self.root,
            "jetson": self.jetson,
            "l4t": str(self.l4t) if self.l4t else None,
            "jetpack": self.jetpack,
            "cuda": self.cuda,
            "soc": self.soc,
            "family": self.family,
            "module": self.module,
            "model": self.model,
            "compute_capability": self.compute_capability,
            "kind": self.kind,
            "ubuntu": self.ubuntu,
            "python": self.python,
            "kernel": self.kernel,
            "arch": self.arch,
            "sources": dict(self.sources),
            "warnings": list(self.warnings),
        }


class _Root:
    """Reads files below one directory; a missing or unreadable file is None (an unreadable
    one is also named in `warnings`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.warnings: List[str] = []

    def path(self, relative: str) -> Path:
        return self.root / relative

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
            return None if path is None else read_regular_file(path, limit, follow=False)
        except OSError as exc:
            self._unreadable(relative, exc)
            return None

    def read_text(self, relative: str, limit: int = MAX_FILE_BYTES) -> Optional[str]:
        data = self.read_bytes(relative, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def _unreadable(self, relative: str, error: OSError) -> None:
        if error.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            self.warnings.append(f"{relative} cannot be read ({error.strerror}); treated as missing")


def read_root_file(root: Path, relative: str, limit: int = SMALL_FILE_BYTES) -> Optional[bytes]:
    """One file under `root`, read as detect reads it: bounded, links kept inside the root,
    None for a FIFO, a device, a missing or an unreadable file."""
    return _Root(root).read_bytes(relative, limit)


def detect(root: Path, l4t_override: Optional[L4TOverride] = None, data: Optional[PlatformData] = None,
           soc_override: Optional[SocOverride] = None) -> Platform:
    """Detect the platform under `root`.

    Raises NotAJetson when nothing under the root says Jetson, and
    InvalidReleaseFile when the release file cannot be parsed and no other
    source gives the L4T release.
    """
    data = data or platform_data()
    files = _Root(root)
    sources: Dict[str, str] = {}
    warnings: List[str] = []

    release_bytes = files.read_bytes(RELEASE_FILE)
    release_l4t: Optional[L4T] = None
    eabi: Optional[str] = None
    release_error: Optional[InvalidReleaseFile] = None
    if release_bytes is not None:
        try:
            release_l4t, eabi = parse_nv_tegra_release(release_bytes)
        except InvalidReleaseFile as exc:
            release_error = exc

    dpkg_text = files.read_text(DPKG_STATUS)
    dpkg_l4t = parse_dpkg_status(dpkg_text) if dpkg_text else None
    apt_text = files.read_text(APT_SOURCE)
    apt_l4t = parse_apt_source(apt_text) if apt_text else None
    compatible = parse_compatible(files.read_bytes(COMPATIBLE) or b"")
    model = (files.read_text(MODEL) or "").strip("\x00 \n") or None

    soc = _soc(compatible, data)
    if soc is not None:
        sources["soc"] = COMPATIBLE
    if soc_override is not None:
        given = _given_soc(soc_override, data)
        if soc is not None and soc != given:
            warnings.append(f"{soc_override.source} {given} overrides SoC {soc} found in {COMPATIBLE}")
        soc = given
        sources["soc"] = soc_override.source
    tegra_in_device_tree = any(entry.startswith("nvidia,tegra") for entry in compatible)
    evidence = (
        release_bytes is not None or dpkg_l4t or apt_l4t or tegra_in_device_tree or l4t_override is not None
    )
    if not evidence:
        raise NotAJetson(
            f"no Jetson found under {root}: no {RELEASE_FILE}, no nvidia-l4t-core package, "
            f"no nvidia,tegra entry in {COMPATIBLE}",
            fix="run this on a Jetson, or preview with: jetson-install detect --root sample:agx-orin-64gb-jp6.2",
        )

    l4t: Optional[L4T] = None
    jetpack_exact = True
    if l4t_override is not None:
        try:
            l4t = parse_l4t(l4t_override.value)
        except BadInput as exc:
            raise BadInput(f"{l4t_override.source} {l4t_override.value!r}: {exc.message}",
                           fix=f"give a release such as {l4t_override.source}{'=' if '_' in l4t_override.source else ' '}36.4.3") from None
        sources["l4t"] = l4t_override.source
        if l4t_override.value.count(".") == 1:
            warnings.append(f"{l4t_override.source} {l4t_override.value.strip()} taken as {l4t}: "
                            "give the full release (e.g. 36.4.3) if the patch release is not 0")
        on_disk = dpkg_l4t or release_l4t
        if on_disk is not None and on_disk != l4t:
            warnings.append(f"{l4t_override.source} {l4t} overrides L4T {on_disk} found under the root")
    elif dpkg_l4t is not None:
        l4t = dpkg_l4t
        sources["l4t"] = DPKG_STATUS
        if release_l4t is not None and release_l4t != dpkg_l4t:
            # apt upgrades move the package while the release file can lag (jtop showed L4T 32.5.1,
            # then 32.5.2 after an apt upgrade: nvidia-jetson-tx2/L4T.md in
            # https://github.com/pokusew/ros-setup): the package wins.
            warnings.append(
                f"{RELEASE_FILE} says {release_l4t} but nvidia-l4t-core is {dpkg_l4t}; using {dpkg_l4t}"
            )
    elif release_l4t is not None:
        l4t = release_l4t
        sources["l4t"] = RELEASE_FILE
    elif apt_l4t is not None:
        l4t = L4T(apt_l4t[0], apt_l4t[1], 0)
        jetpack_exact = False
        sources["l4t"] = APT_SOURCE
        warnings.append(f"only L4T {apt_l4t[0]}.{apt_l4t[1]} is known (from {APT_SOURCE}); the patch release is not")
    elif release_error is not None:
        raise InvalidReleaseFile(
            f"{files.path(RELEASE_FILE)} {release_error.message} and no other file gives the L4T release",
            fix="give the release explicitly: --l4t 36.4.3 (or JETSON_L4T_VERSION=36.4.3)",
        )
    if release_error is not None and l4t is not None and sources["l4t"] != RELEASE_FILE:
        warnings.append(f"{RELEASE_FILE} {release_error.message}; L4T taken from {sources['l4t']}")
    if l4t is None:
        warnings.append(f"the L4T release is unknown (no {RELEASE_FILE}, nvidia-l4t-core or apt source); pass --l4t")

    facts = data.majors.get(l4t.major) if l4t else None
    jetpack: Optional[str] = None
    if l4t is not None:
        if facts is None:
            warnings.append(
                f"L4T R{l4t.major} is not known to this jetson-install; JetPack unknown "
                f"(upgrade: {UPGRADE_COMMAND})"
            )
        elif jetpack_exact and l4t in data.releases:
            jetpack = data.releases[l4t]
            sources["jetpack"] = "release table"
        else:
            jetpack = facts.jetpack_family
            sources["jetpack"] = f"L4T R{l4t.major} family"
            if jetpack_exact:
                warnings.append(f"L4T {l4t} is not in the release table; JetPack {jetpack} assumed from R{l4t.major}")

    cuda = _cuda(files, sources)
    if cuda is None and facts is not None and l4t is not None:
        cuda = facts.default_cuda(l4t.minor)
        if cuda:
            sources["cuda"] = f"default for L4T {l4t.major}.{l4t.minor}"

    soc_facts = data.socs.get(soc) if soc else None
    module = _module(compatible, data)
    kind = _kind(l4t, soc_facts.family if soc_facts else None, facts, warnings)

    ubuntu = _ubuntu(files, sources, warnings)
    if ubuntu is None and facts is not None and facts.ubuntu:
        ubuntu = facts.ubuntu
        sources["ubuntu"] = f"default for L4T R{facts.major}"
    python = facts.python if facts else None
    if facts is not None and python:
        sources["python"] = f"default for L4T R{facts.major}"
    kernel = (files.read_text(KERNEL, SMALL_FILE_BYTES) or "").strip() or None
    if kernel:
        sources["kernel"] = KERNEL
    arch = _arch(root, files, eabi, sources)
    warnings.extend(files.warnings)

    return Platform(
        root=str(root),
        jetson=True,
        l4t=l4t,
        jetpack=jetpack,
        cuda=cuda,
        soc=soc,
        family=soc_facts.family if soc_facts else None,
        module=module,
        model=model,
        compute_capability=soc_facts.compute_capability if soc_facts else None,
        kind=kind,
        ubuntu=ubuntu,
        python=python,
        kernel=kernel,
        arch=arch,
        sources=sources,
        warnings=tuple(warnings),
    )


def _soc(compatible: Tuple[str, ...], data: PlatformData) -> Optional[str]:
    for entry in compatible:
        vendor, _, name = entry.partition(",")
        if vendor == "nvidia" and name in data.socs:
            return name
    return None


def _given_soc(override: SocOverride, data: PlatformData) -> str:
    name = override.value.strip().lower()
    if name in data.socs:
        return name
    first_of_family: Dict[str, str] = {}
    for soc, facts in data.socs.items():
        first_of_family.setdefault(facts.family, soc)
    known = ", ".join(f"{soc} ({family})" for family, soc in first_of_family.items())
    flag = f"{override.source}=" if "_" in override.source else f"{override.source} "
    raise BadInput(f"{override.source} {override.value!r} is not a Jetson SoC; known: {known}",
                   fix=f"give the SoC as the device tree names it, e.g. {flag}tegra264 (Thor) or {flag}tegra234 (Orin)")


def _module(compatible: Tuple[str, ...], data: PlatformData) -> Optional[str]:
    for entry in compatible:
        vendor, _, name = entry.partition(",")
        # "nvidia,p3737-0000+p3701-0005" is carrier+module; the module comes last.
        part = name.split("+")[-1].replace("-super", "")
        if vendor == "nvidia" and part in data.modules:
            return data.modules[part]
    return None


def _kind(l4t: Optional[L4T], family: Optional[str], facts: Any, warnings: List[str]) -> Optional[str]:
    """The CUDA userspace flavour, which picks the index family: "tegra" (JetPack's L4T CUDA,
    R36 and older) or "sbsa" (the Arm-server CUDA of JetPack 7: Thor on R38/R39, and Orin on
    R39, "Jetson Orin now receives ARM SBSA CUDA in CUDA 13.2",
    https://github.com/dusty-nv/jetson-containers/blob/master/README.md). Binary compatibility
    is the hardware's (family, compute capability), not this."""
    if l4t is None:
        return "sbsa" if family == "Thor" else ("tegra" if family else None)
    if l4t.major < 38:
        return "tegra"
    if family is not None and family not in ("Thor", "Orin") and facts is not None and facts.socs:
        warnings.append(f"L4T R{l4t.major} is not released for {family}")
    if family is None and not (facts is not None and facts.socs == ("tegra264",)):
        warnings.append(f"cannot tell Thor from Orin on L4T R{l4t.major}: no SoC in the device tree "
                        "(name it: --soc tegra264 for Thor, --soc tegra234 for Orin)")
    return "sbsa"


def _cuda(files: _Root, sources: Dict[str, str]) -> Optional[str]:
    text = files.read_text(CUDA_JSON)
    found = parse_cuda_version_json(text) if text else None
    if found:
        sources["cuda"] = CUDA_JSON
        return found
    text = files.read_text(CUDA_TXT)
    found = parse_cuda_version_txt(text) if text else None
    if found:
        sources["cuda"] = CUDA_TXT
    return found


def _arch(root: Path, files: _Root, eabi: Optional[str], sources: Dict[str, str]) -> str:
    """This machine's architecture for the root /; for another root, what its kernel says
    (proc/sys/kernel/arch), else what its release file's EABI or device tree implies."""
    if root.resolve() == Path("/"):
        sources["arch"] = "uname"
        return os.uname().machine
    arch = (files.read_text(KERNEL_ARCH, SMALL_FILE_BYTES) or "").strip()
    if arch:
        sources["arch"] = KERNEL_ARCH
        return arch
    return eabi or "aarch64"  # only aarch64 Jetsons are in the device tree table


def _ubuntu(files: _Root, sources: Dict[str, str], warnings: List[str]) -> Optional[str]:
    """The Ubuntu version, by distro, from bounded copies of the files read under the root:
    distro opens what it is given, so it never sees the root itself (a FIFO, a link out of the
    root or to /dev/zero, a huge file)."""
    import tempfile

    import distro

    where, os_release = next(((name, text) for name in OS_RELEASE
                              for text in [files.read_text(name, SMALL_FILE_BYTES)] if text is not None), (None, None))
    debian_version = files.read_text(DEBIAN_VERSION, SMALL_FILE_BYTES)
    with tempfile.TemporaryDirectory(prefix="jetson-install-release-") as staged:
        etc = Path(staged) / "etc"
        etc.mkdir()
        if os_release is not None:
            (etc / "os-release").write_text(os_release, encoding="utf-8")
        if debian_version is not None:
            (etc / "debian_version").write_text(debian_version.encode("ascii", "replace").decode(), encoding="ascii")
        release = distro.LinuxDistribution(include_lsb=False, include_uname=False, include_oslevel=False,
                                           root_dir=staged)
        try:
            distribution, version = release.id(), release.version()
        except (OSError, UnicodeDecodeError) as exc:
            warnings.append(f"{where or 'etc/os-release'} cannot be read ({exc}); Ubuntu assumed from L4T")
            return None
    if distribution != "ubuntu":
        return None
    if version:
        sources["ubuntu"] = where or DEBIAN_VERSION
    return version or None
