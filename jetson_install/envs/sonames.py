"""Every shared library the vendor builds' own .so files need (their DT_NEEDED, read from the
files), and where each resolves: torch's own lib folder, the environment's wheels (each
`lib` folder of a package, `*.libs`, a needing file's DT_RUNPATH), or the board's library path
(the root's ld.so.conf and its includes, the multiarch folders, JetPack's CUDA; LD_LIBRARY_PATH
is the shell's, not the board's, and is not read). One that
resolves nowhere is named with the files that need it and what the channel records as its
provider (a companion wheel with its bound, or an apt package).

The loader also finds a library by the soname of one already loaded, and torch loads its own
lib folder and the CUDA wheels' libraries (`nvidia/*/lib`) first; so a soname found in any of
those folders counts as found, as it does when `import torch` runs. Found means the artifact,
not its name: a regular ELF file (a link to one is followed, as the loader follows it) of the
board's class and machine, called what is needed (its DT_SONAME, see `_is_called`). A needed
name with a `/` is a path, which the loader opens as it is, searching no folder. Files only, no
process: the tool never imports torch.
"""

from __future__ import annotations

import csv
import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jetson_install.base.elf import MACHINES, dynamic_of
from jetson_install.base.errors import ElfError
from jetson_install.catalog.catalog import NeededLibrary, VendorSource
from jetson_install.catalog.identity import VENDOR_PACKAGES

__all__ = ["Listed", "Missing", "LibraryReport", "declared_requirement", "vendor_libraries", "environment_libraries", "site_packages_of", "search_folders",
           "BITSANDBYTES_VARIANT"]

_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9]+)*$")
#: bitsandbytes ships one library per CUDA release and loads only the one for torch's CUDA,
#: libbitsandbytes_cuda<major><minor> (get_cuda_bnb_library_path in
#: https://github.com/bitsandbytes-foundation/bitsandbytes/blob/main/bitsandbytes/cextension.py);
#: its 0.50.2 aarch64 wheel carries cuda118 to cuda132, whose CUDA 12 ones a CUDA 13 board cannot load.
_BNB_VARIANT = re.compile(r"(?:^|/)libbitsandbytes_([a-z]+)(\d*)\.so$")
#: torchaudio's optional backends, loaded only where the board has the library they bind (FFmpeg
#: 4 to 6 through torio, libsox): torchaudio imports without them and says so when one is asked
#: for (the lazy `_init_ffmpeg` and `_init_sox` of src/torchaudio/_extension/, https://github.com/pytorch/audio).
_OPTIONAL_BACKEND = re.compile(r"(?:^|/)(?:lib|_)(?:torio_ffmpeg\d+|torchaudio_sox)\.so$")
#: torch/version.py: `cuda: Optional[str] = '13.0'` (older: `cuda = '12.6'`), None for a CPU build.
_TORCH_CUDA = re.compile(r"""^cuda\s*(?::[^=\n]*)?=\s*(?:'([^']*)'|"([^"]*)"|None)""", re.M)
#: The driver's own library: the board has it, and the NVIDIA container runtime mounts it at run
#: time (an image build sees an empty placeholder: https://github.com/dusty-nv/jetson-containers/issues/235).
#: The cuda-available check judges it; here it is never a missing library.
DRIVER = ("libcuda.so.1",)


@dataclass(frozen=True)
class Listed:
    """An installed distribution (its name as its metadata gives it) and the file of its RECORD."""

    distribution: str
    version: str
    path: str  # relative to site-packages


@dataclass(frozen=True)
class Missing:
    """A soname no searched folder holds, the vendor files that need it, and what provides it."""

    soname: str
    needed_by: Tuple[str, ...]  # relative to site-packages
    provider: Optional[NeededLibrary]  # None: the channel records nothing for it
    installed: Optional[str] = None  # the provider companion as installed, "nvidia-cudss-cu13 1.0.0.35"
    passed_over: Tuple[str, ...] = ()  # files by its name that are not it: "nvidia/cu13/lib/libx.so.0: is not an ELF file"
    listed: Optional[Listed] = None  # the installed distribution whose RECORD lists a file by its name

    def describe(self) -> str:
        files = ", ".join(self.needed_by[:3]) + (f" and {len(self.needed_by) - 3} more" if len(self.needed_by) > 3 else "")
        if self.listed is not None:
            # A file the environment's own install put there and something removed since.
            return (f"{self.soname} (needed by {files}) is missing: the installed {self.listed.distribution} "
                    f"{self.listed.version} lists {self.listed.path} in its RECORD, and it is not there")
        if "/" in self.soname:
            said = (f"{self.soname} (needed by {files}) is a path, which the loader opens from the folder the program "
                    "runs in" if not self.soname.startswith("/") else f"{self.soname} (needed by {files}) is a path, "
                    "and no library of this board is there")
        else:
            said = f"{self.soname} (needed by {files}) is in no folder the loader searches"
        if self.passed_over:
            said += f" (passed over: {'; '.join(self.passed_over)})"
        if self.provider is None:
            return said
        said += f"; {self.provider.describe()} must provide it"
        if self.installed:
            said += f", and the installed {self.installed} does not"
        return said


@dataclass(frozen=True)
class LibraryReport:
    files: Tuple[str, ...]  # the vendor shared objects read, relative to site-packages
    found: Dict[str, str]  # soname -> where it resolved ("torch/lib", "nvidia/cu13/lib", "/usr/local/cuda/lib64")
    missing: Tuple[Missing, ...]
    unreadable: Tuple[str, ...]  # "torch/lib/x.so: is not an ELF file"
    driver: Tuple[str, ...]  # the driver's sonames that no folder holds (judged by the cuda checks)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unreadable


@dataclass(frozen=True)
class _Folder:
    path: Path
    shown: str  # how the report names it
    machine: Optional[str]  # what a library there is built for, by `uname -m`'s name (None: not known)


def site_packages_of(environment: Path) -> List[Path]:
    """An environment's site-packages folders (a venv's, or a Debian Python's dist-packages)."""
    return sorted(Path(found) for pattern in ("lib/python*/site-packages", "lib/python*/dist-packages")
                  for found in glob.glob(str(environment / pattern)))


def environment_libraries(environment: Path, root: Path, arch: Optional[str],
                          sources: Sequence[VendorSource]) -> LibraryReport:
    """vendor_libraries on an environment's own site-packages (what an install has just made)."""
    return vendor_libraries(site_packages_of(environment), root, arch, sources)


def vendor_libraries(site_dirs: Sequence[Path], root: Path, arch: Optional[str],
                     sources: Sequence[VendorSource]) -> LibraryReport:
    """Read every vendor shared object under `site_dirs` and resolve what each needs; `root` is
    the board's root directory, `arch` its machine ("aarch64"), `sources` where to look up what
    provides a soname (the source the environment was made from first)."""
    distributions = _distributions(site_dirs)
    torch_cuda = _torch_cuda(distributions.get("torch"))
    folders = _environment_folders(site_dirs, distributions, arch) + _board_folders(root, arch)
    files: List[str] = []
    unreadable: List[str] = []
    needers: Dict[str, List[str]] = {}
    runpaths: Dict[str, List[_Folder]] = {}
    for site, relative in _vendor_files(distributions, torch_cuda):
        path = site / relative
        try:
            dynamic = dynamic_of(path)
        except ElfError as exc:
            unreadable.append(f"{relative}: {exc.message.split(': ', 1)[-1]}")
            continue
        files.append(relative)
        for soname in dynamic.needed:
            needers.setdefault(soname, []).append(relative)
            # The run path relative to the file itself (torch's `$ORIGIN`); an absolute one names the
            # build machine's folders, not the board's.
            runpaths.setdefault(soname, []).extend(
                _Folder(path.parent / entry[len("$ORIGIN"):].lstrip("/"), "", arch)
                for entry in dynamic.runpath if entry.startswith("$ORIGIN"))
    found: Dict[str, str] = {}
    missing: List[Missing] = []
    driver: List[str] = []
    installed = _installed_names(distributions)
    for soname in sorted(needers):
        where, passed_over = _where(soname, runpaths.get(soname, []), site_dirs, folders, root, arch)
        if where is not None:
            found[soname] = where
        elif soname in DRIVER:
            driver.append(soname)
        else:
            provider = next((hit for source in sources for hit in [source.provider_of(soname)] if hit), None)
            missing.append(Missing(soname, tuple(sorted(set(needers[soname]))), provider,
                                   _as_installed(provider, installed), tuple(passed_over),
                                   _listed_by(soname, distributions)))
    return LibraryReport(tuple(files), found, tuple(missing), tuple(unreadable), tuple(driver))


def _where(soname: str, runpath: Iterable[_Folder], site_dirs: Sequence[Path], folders: Sequence[_Folder],
           root: Path, arch: Optional[str]) -> Tuple[Optional[str], List[str]]:
    """Where the loader finds `soname`, and the files by its name it passes over (not it)."""
    if "/" in soname:
        # A path (ld.so(8): "If a shared object dependency does not contain a slash, then it is
        # searched for"): an absolute one is the board's file, a relative one the working folder's.
        if not soname.startswith("/"):
            return None, []
        candidates = [(_Folder(_under(root, os.path.dirname(soname)), os.path.dirname(soname), arch),
                       os.path.basename(soname))]
    else:
        candidates = [(folder, soname) for folder in (*runpath, *folders)]
    passed_over: List[str] = []
    seen: Set[Path] = set()
    for folder, name in candidates:
        path = folder.path / name
        if not path.exists() or path.resolve() in seen:  # (a dangling link: an alternative removed)
            continue
        seen.add(path.resolve())
        wrong = _not_the_library(path, soname, folder.machine)
        if wrong is None:
            return folder.shown or _shown(folder.path, site_dirs), passed_over
        passed_over.append(f"{_shown(folder.path, site_dirs)}/{name}: {wrong}")
    return None, passed_over


def _not_the_library(path: Path, needed: str, machine: Optional[str]) -> Optional[str]:
    """Why the file at `path` is not the library `needed` for `machine`; None where it is."""
    try:
        dynamic = dynamic_of(path)
    except ElfError as exc:
        return exc.message.split(": ", 1)[-1]
    if machine in MACHINES and dynamic.machine != MACHINES[machine]:
        built = next((name for name, number in MACHINES.items() if number == dynamic.machine),
                     f"machine {dynamic.machine}")
        return f"is built for {built}, not {machine}"
    if not _is_called(dynamic.soname, os.path.basename(needed)):
        return f"is {dynamic.soname} (its DT_SONAME)"
    return None


#: A copy a wheel carries of a library it needs, renamed with a hash tag and left its own DT_SONAME
#: (`libz.75f4ef3d.so.1` for libz.so.1: patch_new_path in torchvision's packaging/wheel/relocate.py,
#: https://github.com/pytorch/vision, which sets no soname; auditwheel's `-<hash>` copies get theirs).
_RELOCATED_COPY = re.compile(r"^([^.]+)\.[0-9a-f]{8}\.(.+)$")


def _is_called(soname: Optional[str], needed: str) -> bool:
    """Whether a library with DT_SONAME `soname` is the one asked for as `needed`: its own name, no
    name at all (the loader then knows it by its file name: torch 2.13's libarm_compute.so), or the
    name of a relocated copy of it."""
    if soname is None or soname == needed:
        return True
    copy = _RELOCATED_COPY.match(needed)
    return copy is not None and f"{copy.group(1)}.{copy.group(2)}" == soname


def _shown(folder: Path, site_dirs: Sequence[Path]) -> str:
    for site in site_dirs:
        try:
            return os.path.normpath(folder.relative_to(site))
        except ValueError:
            continue
    return str(folder)


# --------------------------------------------------------------------------- the environment

def _distributions(site_dirs: Sequence[Path]) -> Dict[str, Tuple[Path, Path]]:
    """Normalized name -> (site-packages, dist-info) of every distribution there; the first
    folder that holds a name wins, as it does on sys.path."""
    found: Dict[str, Tuple[Path, Path]] = {}
    for site in site_dirs:
        for dist_info in sorted(site.glob("*.dist-info")):
            name = str(canonicalize_name(dist_info.name[: -len(".dist-info")].partition("-")[0]))
            found.setdefault(name, (site, dist_info))
    return found


def _listed_by(soname: str, distributions: Dict[str, Tuple[Path, Path]]) -> Optional[Listed]:
    """The installed distribution whose RECORD lists a file called `soname` that is not on disk:
    what a reinstall of that distribution puts back."""
    if "/" in soname:
        return None
    for name, (site, dist_info) in sorted(distributions.items()):
        try:
            lines = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for row in csv.reader(line for line in lines if soname in line):
            path = row[0] if row else ""
            if path.rsplit("/", 1)[-1] == soname and not path.startswith(("/", "..")) and \
                    not os.path.lexists(site / path):
                return Listed(name, dist_info.name[: -len(".dist-info")].partition("-")[2], path)
    return None


def declared_requirement(site_dirs: Sequence[Path], name: str) -> Optional[str]:
    """`name` with the version the environment's own distributions require of it (torch 2.13's
    cuda-toolkit 13.0.3 requires nvidia-cuda-runtime==13.0.96, for its `cudart` extra), or None
    where none names it with a version."""
    wanted = canonicalize_name(name)
    for _, dist_info in sorted(_distributions(site_dirs).values()):
        try:
            text = (dist_info / "METADATA").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            try:
                requirement = Requirement(line[len("Requires-Dist:"):].strip())
            except InvalidRequirement:
                continue
            if canonicalize_name(requirement.name) == wanted and str(requirement.specifier):
                return f"{wanted}{requirement.specifier}"
    return None


def _installed_names(distributions: Dict[str, Tuple[Path, Path]]) -> Dict[str, str]:
    return {name: dist_info.name[: -len(".dist-info")].partition("-")[2] for name, (_, dist_info) in distributions.items()}


def _as_installed(provider: Optional[NeededLibrary], installed: Dict[str, str]) -> Optional[str]:
    if provider is None or provider.provider != "companion":
        return None

    name = str(canonicalize_name(Requirement(provider.package).name))
    return f"{name} {installed[name]}" if name in installed else None


def _torch_cuda(torch: Optional[Tuple[Path, Path]]) -> Optional[str]:
    """torch.version.cuda, read from torch/version.py (None: a CPU build, or no torch)."""
    if torch is None:
        return None
    try:
        text = (torch[0] / "torch" / "version.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _TORCH_CUDA.search(text)
    return (found.group(1) or found.group(2)) if found else None


def _vendor_files(distributions: Dict[str, Tuple[Path, Path]], torch_cuda: Optional[str]) -> List[Tuple[Path, str]]:
    """(site-packages, relative path) of each vendor distribution's shared objects, as its
    RECORD lists them; of bitsandbytes' per-CUDA libraries only the one it loads for torch's CUDA,
    and none of torchaudio's optional backends."""
    wanted = torch_cuda.replace(".", "") if torch_cuda else None
    files: List[Tuple[Path, str]] = []
    for name in VENDOR_PACKAGES:
        if name not in distributions:
            continue
        site, dist_info = distributions[name]
        try:
            lines = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue  # the torch-build check names a missing RECORD
        for row in csv.reader(lines):
            relative = row[0] if row else ""
            if (not _SHARED_OBJECT.search(relative) or relative.startswith(("/", ".."))
                    or _OPTIONAL_BACKEND.search(relative)):
                continue
            variant = _BNB_VARIANT.search(relative) if name == "bitsandbytes" else None
            if variant is not None and not (variant.group(1) == "cpu" or (variant.group(1) == "cuda"
                                                                          and variant.group(2) == wanted)):
                continue
            files.append((site, relative))
    return files


def _environment_folders(site_dirs: Sequence[Path], distributions: Dict[str, Tuple[Path, Path]],
                         arch: Optional[str]) -> List[_Folder]:
    """torch's own lib folder first, then every package's `lib` folder (nvidia/cu13/lib,
    nvpl/lib) and auditwheel's `*.libs`: what the environment holds is the board's."""
    folders: List[_Folder] = []
    if "torch" in distributions:
        folders.append(_Folder(distributions["torch"][0] / "torch" / "lib", "torch/lib", arch))
    for site in site_dirs:
        for pattern in ("*/lib", "*/*/lib", "*.libs"):
            for path in sorted(site.glob(pattern)):
                if path.is_dir():
                    folders.append(_Folder(path, path.relative_to(site).as_posix(), arch))
    return folders


# --------------------------------------------------------------------------- the board

#: Where the loader looks without being told (ld.so(8): /lib and /usr/lib; Debian and Ubuntu add
#: the multiarch folders through /etc/ld.so.conf.d/<triplet>.conf, which a bare root may lack),
#: and where JetPack's CUDA keeps its libraries, which the loader resolves there (ldd of cuDSS on
#: L4T 36.3: libcublas.so.12 => /usr/local/cuda/lib64/libcublas.so.12,
#: https://github.com/dusty-nv/jetson-containers/issues/1387).
_DEFAULT_FOLDERS = ("/lib/{triplet}", "/usr/lib/{triplet}", "/lib", "/usr/lib", "/usr/local/cuda/lib64")


def _board_folders(root: Path, arch: Optional[str]) -> List[_Folder]:
    """The root's library path. A root that holds none of it (a sample root: release files only)
    describes the board, not where the environment runs: its libraries load on this machine,
    so this machine's path is searched instead."""
    folders = _library_path(root, arch or os.uname().machine)
    if any(folder.path.is_dir() for folder in folders):
        return folders
    return _library_path(Path("/"), os.uname().machine)  # (whose libraries are this machine's)


def _library_path(root: Path, arch: str) -> List[_Folder]:
    written = _conf_folders(root, "/etc/ld.so.conf", set())
    written += [folder.format(triplet=f"{arch}-linux-gnu") for folder in _DEFAULT_FOLDERS]
    return [_Folder(_under(root, folder), folder if root.resolve() == Path("/") else str(_under(root, folder)), arch)
            for folder in dict.fromkeys(written)]


def _under(root: Path, absolute: str) -> Path:
    return root / absolute.lstrip("/")


def _conf_folders(root: Path, conf: str, seen: Set[str]) -> List[str]:
    """The folders an ld.so.conf names, its `include` globs followed (relative ones from the
    including file's folder), each file read once; comments and `hwcap` lines left out."""
    if conf in seen:
        return []
    seen.add(conf)
    try:
        text = _under(root, conf).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    folders: List[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].replace(",", " ").replace(":", " ").split()
        if not words or words[0] == "hwcap":
            continue
        if words[0] == "include":
            for pattern in words[1:]:
                absolute = pattern if pattern.startswith("/") else os.path.join(os.path.dirname(conf), pattern)
                for match in sorted(glob.glob(str(_under(root, absolute)))):
                    folders += _conf_folders(root, "/" + Path(match).relative_to(root).as_posix(), seen)
            continue
        folders += [word for word in words if word.startswith("/")]
    return folders


# --------------------------------------------------------------------------- for inspect

def search_folders(site_dirs: Sequence[Path], root: Path, arch: Optional[str]) -> List[Path]:
    """The folders vendor_libraries looks in, in its order: the environment's, then the board's."""
    return [folder.path for folder in _environment_folders(site_dirs, _distributions(site_dirs), arch) + _board_folders(root, arch)]


#: bitsandbytes' per-CUDA library names (above), for inspect: a board loads only its CUDA's.
BITSANDBYTES_VARIANT = _BNB_VARIANT
