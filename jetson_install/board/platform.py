"""RootFacts -> Platform: which Jetson, L4T, JetPack and CUDA this is, decided from what the
files under the root said (`root_facts.read_facts`) and what the user named in their place.

`decide` is pure: it weighs facts already read, so any root, captured or imagined, can be
decided without a file system; `detect` reads a root and decides.
"""

from __future__ import annotations

import shlex

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from jetson_install.base.errors import BadInput, InvalidReleaseFile, NotAJetson
from jetson_install.base.sourced import Sourced
from jetson_install.board.platform_data import MajorFacts, PlatformData, platform_data
from jetson_install.board.release_files import L4T, parse_l4t
from jetson_install.board.root_facts import (
    APT_SOURCE,
    COMPATIBLE,
    CUDA_JSON,
    CUDA_TXT,
    DEBIAN_VERSION,
    DPKG_STATUS,
    KERNEL,
    KERNEL_ARCH,
    RELEASE_FILE,
    RootFacts,
    read_facts,
    read_root_file,
)

# read_root_file is the reader's, named here too for fleet/container.py, which reads the release file as detect does.
__all__ = ["Platform", "Overrides", "detect", "decide", "read_root_file", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


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
    # The SoC the device tree names, whatever --soc said (None: it names none): `labels` claims
    # the hardware, and refuses a --soc that contradicts it.
    soc_read: Optional[str] = None

    # Where the board's own programs (its CUDA's ptxas) are run from: this machine's root,
    # whatever --root names. A root's files are read, never run: a copied, captured or hostile
    # root's ptxas would run here with this user's rights, and a sample root holds release
    # files only.
    programs_root: str = "/"

    @property
    def board_root(self) -> Optional[str]:
        """Where the board's own programs (its CUDA's ptxas) are; off a Jetson, none."""
        return self.programs_root if self.jetson else None

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


@dataclass(frozen=True)
class Overrides:
    """What the user named in place of the files; each wins over what the files say."""

    # An L4T release given explicitly, for containers whose release file is empty:
    # from "--l4t" or "JETSON_L4T_VERSION".
    l4t: Optional[Sourced[str]] = None
    # A SoC given explicitly ("tegra264"), for containers that cannot read the device tree:
    # unprivileged containers on Jetson commonly cannot (https://github.com/NVIDIA/jetson-gpio/issues/73,
    # https://github.com/ultralytics/ultralytics/issues/18449), and R39 runs on Thor and on Orin.
    # From "--soc", "JETSON_INSTALL_SOC", or the entrypoint's JETSON_INSTALL_HOST_SOC.
    soc: Optional[Sourced[str]] = None


def detect(root: Path, l4t_override: Optional[Sourced[str]] = None, data: Optional[PlatformData] = None,
           soc_override: Optional[Sourced[str]] = None) -> Platform:
    """Detect the platform under `root`.

    Raises NotAJetson when nothing under the root says Jetson, and
    InvalidReleaseFile when the release file cannot be parsed and no other
    source gives the L4T release.
    """
    return decide(read_facts(root), Overrides(l4t_override, soc_override), data or platform_data(),
                  upgrade=_upgrade_command)


def _upgrade_command() -> str:
    # Here, not at the top: only a release newer than the data names the upgrade (a no-op re-run never does).
    from jetson_install.base.upgrade import running_upgrade_command

    return running_upgrade_command()


def decide(facts: RootFacts, overrides: Overrides, data: PlatformData,
           upgrade: Optional[Callable[[], str]] = None) -> Platform:
    """The Platform the facts and overrides make, by the rules of `data`; reads nothing but
    what `upgrade` reads (the running tool's install record) for a warning that names it.

    Raises only the project's errors: BadInput for an override that is not a release or a
    SoC, NotAJetson when no fact says Jetson, InvalidReleaseFile when the release file is
    all there is and it cannot be parsed.
    """
    sources: Dict[str, str] = {}
    warnings: List[str] = []
    soc = _decide_soc(facts, overrides.soc, data, sources, warnings)
    if not _says_jetson(facts, overrides):
        raise NotAJetson(
            f"no Jetson found under {facts.root}: no {RELEASE_FILE}, no nvidia-l4t-core package, "
            f"no nvidia,tegra entry in {COMPATIBLE}",
            fix="run this on a Jetson, or preview with: jetson-install detect --root sample:agx-orin-64gb-jp6.2",
        )
    l4t, exact = _decide_l4t(facts, overrides.l4t, sources, warnings)
    major = data.majors.get(l4t.major) if l4t else None
    jetpack = _jetpack(l4t, exact, major, data, sources, warnings, upgrade)
    cuda = _cuda(facts, l4t, major, sources)
    soc_facts = data.socs.get(soc) if soc else None
    family = soc_facts.family if soc_facts else None
    module = _module(facts.compatible, data)
    kind = _kind(l4t, family, major, warnings)
    ubuntu = _ubuntu(facts, major, sources, warnings)
    python = major.python if major else None
    if major is not None and python:
        sources["python"] = f"default for L4T R{major.major}"
    if facts.kernel:
        sources["kernel"] = KERNEL
    arch = _arch(facts, sources)
    return Platform(
        root=str(facts.root),
        jetson=True,
        l4t=l4t,
        jetpack=jetpack,
        cuda=cuda,
        soc=soc,
        family=family,
        module=module,
        model=facts.model,
        compute_capability=soc_facts.compute_capability if soc_facts else None,
        kind=kind,
        ubuntu=ubuntu,
        python=python,
        kernel=facts.kernel,
        arch=arch,
        sources=sources,
        warnings=(*warnings, *facts.unreadable),
        soc_read=_soc(facts.compatible, data),
    )


def _says_jetson(facts: RootFacts, overrides: Overrides) -> bool:
    """A release file (even an empty one, as containers carry), the L4T package or apt source,
    a Tegra device tree, or a release the user named."""
    return (facts.release_found or facts.dpkg_l4t is not None or facts.apt_l4t is not None
            or any(entry.startswith("nvidia,tegra") for entry in facts.compatible) or overrides.l4t is not None)


def _decide_soc(facts: RootFacts, override: Optional[Sourced[str]], data: PlatformData,
                sources: Dict[str, str], warnings: List[str]) -> Optional[str]:
    soc = _soc(facts.compatible, data)
    if soc is not None:
        sources["soc"] = COMPATIBLE
    if override is None:
        return soc
    given = _given_soc(override, data)
    if soc is not None and soc != given:
        warnings.append(f"{override.source} {given} overrides SoC {soc} found in {COMPATIBLE}")
    sources["soc"] = override.source
    return given


def _decide_l4t(facts: RootFacts, override: Optional[Sourced[str]], sources: Dict[str, str],
                warnings: List[str]) -> Tuple[Optional[L4T], bool]:
    """The L4T release and whether its patch release is known (an apt source names only major.minor)."""
    if override is not None:
        l4t: Optional[L4T] = _given_l4t(facts, override, sources, warnings)
        exact = True
    else:
        l4t, exact = _l4t_from_files(facts, sources, warnings)
    if facts.release_problem is not None and l4t is not None:
        warnings.append(f"{RELEASE_FILE} {facts.release_problem}; L4T taken from {sources['l4t']}")
    if l4t is None:
        warnings.append(f"the L4T release is unknown (no {RELEASE_FILE}, nvidia-l4t-core or apt source); pass --l4t")
    return l4t, exact


def _given_l4t(facts: RootFacts, override: Sourced[str], sources: Dict[str, str], warnings: List[str]) -> L4T:
    try:
        l4t = parse_l4t(override.value)
    except BadInput as exc:
        raise BadInput(f"{override.source} {override.value!r}: {exc.message}",
                       fix=f"give a release such as {override.source}{'=' if '_' in override.source else ' '}36.4.3") from None
    sources["l4t"] = override.source
    if override.value.count(".") == 1:
        warnings.append(f"{override.source} {override.value.strip()} taken as {l4t}: "
                        "give the full release (e.g. 36.4.3) if the patch release is not 0")
    on_disk = facts.dpkg_l4t or facts.release_l4t
    if on_disk is not None and on_disk != l4t:
        warnings.append(f"{override.source} {l4t} overrides L4T {on_disk} found under the root")
    return l4t


def _l4t_from_files(facts: RootFacts, sources: Dict[str, str], warnings: List[str]) -> Tuple[Optional[L4T], bool]:
    if facts.dpkg_l4t is not None:
        sources["l4t"] = DPKG_STATUS
        if facts.release_l4t is not None and facts.release_l4t != facts.dpkg_l4t:
            # apt upgrades move the package while the release file can lag (jtop showed L4T 32.5.1,
            # then 32.5.2 after an apt upgrade: nvidia-jetson-tx2/L4T.md in
            # https://github.com/pokusew/ros-setup): the package wins.
            warnings.append(f"{RELEASE_FILE} says {facts.release_l4t} but nvidia-l4t-core is {facts.dpkg_l4t}; "
                            f"using {facts.dpkg_l4t}")
        return facts.dpkg_l4t, True
    if facts.release_l4t is not None:
        sources["l4t"] = RELEASE_FILE
        return facts.release_l4t, True
    if facts.apt_l4t is not None:
        major, minor = facts.apt_l4t
        sources["l4t"] = APT_SOURCE
        warnings.append(f"only L4T {major}.{minor} is known (from {APT_SOURCE}); the patch release is not")
        return L4T(major, minor, 0), False
    if facts.release_problem is not None:
        raise InvalidReleaseFile(
            f"{facts.root / RELEASE_FILE} {facts.release_problem} and no other file gives the L4T release",
            fix=(f"make it readable (sudo chmod a+r {shlex.quote(str(facts.root / RELEASE_FILE))}) or "
                 if facts.release_problem.startswith("cannot be read") else "")
            + "give the release explicitly: --l4t 36.4.3 (or JETSON_L4T_VERSION=36.4.3)",
        )
    return None, True


def _jetpack(l4t: Optional[L4T], exact: bool, major: Optional[MajorFacts], data: PlatformData,
             sources: Dict[str, str], warnings: List[str], upgrade: Optional[Callable[[], str]]) -> Optional[str]:
    """The release table's JetPack for a known point release, else the major's family ("6.x")."""
    if l4t is None:
        return None
    if major is None:
        # The command is asked for only here: reading the install record is not the decision's.
        how = f"upgrade: {upgrade()}" if upgrade else "upgrade jetson-install"
        warnings.append(f"L4T R{l4t.major} is not known to this jetson-install; JetPack unknown ({how})")
        return None
    if exact and l4t in data.releases:
        sources["jetpack"] = "release table"
        return data.releases[l4t]
    sources["jetpack"] = f"L4T R{l4t.major} family"
    if exact:
        warnings.append(f"L4T {l4t} is not in the release table; JetPack {major.jetpack_family} assumed from R{l4t.major}")
    return major.jetpack_family


def _cuda(facts: RootFacts, l4t: Optional[L4T], major: Optional[MajorFacts], sources: Dict[str, str]) -> Optional[str]:
    """The installed CUDA's version file (version.json since CUDA 11), else the L4T release's default."""
    for file, version in ((CUDA_JSON, facts.cuda_json), (CUDA_TXT, facts.cuda_txt)):
        if version:
            sources["cuda"] = file
            return version
    cuda = major.default_cuda(l4t.minor) if major is not None and l4t is not None else None
    if cuda and l4t is not None:
        sources["cuda"] = f"default for L4T {l4t.major}.{l4t.minor}"
    return cuda


def _ubuntu(facts: RootFacts, major: Optional[MajorFacts], sources: Dict[str, str],
            warnings: List[str]) -> Optional[str]:
    """The Ubuntu release the os-release names, else the one the L4T major ships."""
    if facts.distro_problem is not None:
        warnings.append(f"{facts.os_release_file or 'etc/os-release'} cannot be read ({facts.distro_problem}); "
                        "Ubuntu assumed from L4T")
    elif facts.distro_id == "ubuntu" and facts.distro_version:
        sources["ubuntu"] = facts.os_release_file or DEBIAN_VERSION
        return facts.distro_version
    if major is not None and major.ubuntu:
        sources["ubuntu"] = f"default for L4T R{major.major}"
        return major.ubuntu
    return None


def _arch(facts: RootFacts, sources: Dict[str, str]) -> str:
    """This machine's architecture for the root /; for another root, what its kernel says
    (proc/sys/kernel/arch), else what its release file's EABI or device tree implies."""
    if facts.uname_machine is not None:
        sources["arch"] = "uname"
        return facts.uname_machine
    if facts.kernel_arch:
        sources["arch"] = KERNEL_ARCH
        return facts.kernel_arch
    return facts.eabi or "aarch64"  # only aarch64 Jetsons are in the device tree table


def _soc(compatible: Tuple[str, ...], data: PlatformData) -> Optional[str]:
    for entry in compatible:
        vendor, _, name = entry.partition(",")
        if vendor == "nvidia" and name in data.socs:
            return name
    return None


def _given_soc(override: Sourced[str], data: PlatformData) -> str:
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


def _kind(l4t: Optional[L4T], family: Optional[str], facts: Optional[MajorFacts], warnings: List[str]) -> Optional[str]:
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
