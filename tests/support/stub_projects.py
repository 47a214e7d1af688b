"""The stub projects behind the loopback indexes, and a stub OBLITERATUS source tree.

Vendor index (NVIDIA/Jetson-AI-Lab stand-in): the JetPack torch family with
the exact pre-release local versions NVIDIA ships, a vendor bitsandbytes, and
BAIT ``numpy==99.0`` / ``filelock==99.0`` that an installer must never take
from there (dependency confusion).

Public index (PyPI stand-in): newer torch releases that must never replace the
vendor one, NumPy 1 and 2, ``needs-newer-torch`` (requires ``torch>=2.6``),
every dependency of OBLITERATUS with realistic specifiers, and the squatted
``obliteratus==0.0.1`` placeholder that must never be requested.

Every generated ``__init__`` carries ``__source_index__`` ("vendor"/"public"),
so after an install a test can tell where each package came from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import zipfile
from pathlib import Path
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence

from .wheels import build_wheel, wheel_from_installed

__all__ = [
    "VENDOR_TORCH",
    "VENDOR_TORCHVISION",
    "VENDOR_TORCHAUDIO",
    "VENDOR_BITSANDBYTES",
    "VENDOR_PINS",
    "VENDOR_BAIT",
    "PUBLIC_TORCH_VERSIONS",
    "NEWEST_PUBLIC_TORCH",
    "OBLITERATUS_DEPENDENCIES",
    "OBLITERATUS_EXTRAS",
    "OBLITERATUS_TAG",
    "IndexDirs",
    "make_vendor_index_files",
    "make_public_index_files",
    "make_seed_wheels",
    "build_index_dirs",
    "make_obliteratus_source",
    "make_obliteratus_git_repo",
]

VENDOR_TORCH = "2.5.0a0+872d972e41.nv24.08"
VENDOR_TORCHVISION = "0.20.0a0+afc54f7"
VENDOR_TORCHAUDIO = "2.5.0a0+79047bf"
VENDOR_BITSANDBYTES = "0.46.1"
VENDOR_PINS: Dict[str, str] = {
    "torch": VENDOR_TORCH,
    "torchvision": VENDOR_TORCHVISION,
    "torchaudio": VENDOR_TORCHAUDIO,
    "bitsandbytes": VENDOR_BITSANDBYTES,
}
# Packages the vendor index carries that must never be installed from it.
VENDOR_BAIT: Dict[str, str] = {"numpy": "99.0", "filelock": "99.0"}

PUBLIC_TORCH_VERSIONS = ("2.5.0", "2.6.0", "2.9.0")
NEWEST_PUBLIC_TORCH = "2.9.0"

# OBLITERATUS v0.1.2 [project].dependencies, verbatim, minus bitsandbytes, which
# v0.1.3 moved to the `quantization` extra (https://github.com/elder-plinius/OBLITERATUS, v0.1.2
# pyproject.toml and the v0.1.3 Jetson plan: "bitsandbytes ... is now an explicit `quantization` extra").
OBLITERATUS_DEPENDENCIES = (
    "torch>=2.0",
    "transformers>=4.40",
    "datasets>=2.14",
    "accelerate>=0.24",
    "safetensors>=0.4",
    "pyyaml>=6.0",
    "rich>=13.0",
    "matplotlib>=3.7",
    "seaborn>=0.12",
    "pandas>=2.0",
    "numpy>=1.24",
    "scikit-learn>=1.3",
    "tqdm>=4.64",
)
OBLITERATUS_EXTRAS: Dict[str, Sequence[str]] = {
    "quantization": ("bitsandbytes>=0.46.1",),
    "dev": ("pytest>=7.0",),
}
OBLITERATUS_TAG = "v0.1.3"

# torch 2.5's real runtime requirements (setuptools/triton markers dropped).
_TORCH_REQUIRES = (
    "filelock",
    "typing-extensions>=4.8.0",
    "networkx",
    "jinja2",
    "fsspec",
    "sympy==1.13.1",
)


class IndexDirs(NamedTuple):
    vendor: Path
    public: Path


# ---------------------------------------------------------------------------
# module bodies
# ---------------------------------------------------------------------------
def _torch_modules(cuda: bool, cuda_version: Optional[str]) -> Dict[str, str]:
    # STUB_TORCH_CUDA=0/1 lets a test flip CUDA availability without rebuilding
    # (e.g. the doctor's "installed but no GPU" path).
    cuda_py = textwrap.dedent(
        '''\
        import os as _os

        _BUILT_WITH_CUDA = {cuda!r}


        def is_available():
            forced = _os.environ.get("STUB_TORCH_CUDA")
            if forced is not None:
                return forced == "1"
            return _BUILT_WITH_CUDA


        def device_count():
            return 1 if is_available() else 0


        def get_device_name(index=0):
            if not is_available():
                raise RuntimeError("Torch not compiled with CUDA enabled")
            return "Orin"


        def get_device_capability(index=0):
            if not is_available():
                raise RuntimeError("Torch not compiled with CUDA enabled")
            return (8, 7)
        '''
    ).format(cuda=cuda)
    version_py = "cuda = {!r}\n".format(cuda_version)
    return {"torch/cuda.py": cuda_py, "torch/version.py": version_py}


_TORCH_INIT_BODY = "from . import cuda, version  # noqa: F401\nversion.__version__ = __version__\n"


def _bnb_modules(cuda: bool) -> Dict[str, str]:
    # Mirrors the attributes a doctor reads (bitsandbytes/cextension.py in
    # https://github.com/bitsandbytes-foundation/bitsandbytes): BNB_BACKEND and lib's class.
    body = textwrap.dedent(
        '''\
        import torch


        class BNBNativeLibrary(object):
            compiled_with_cuda = False


        class CudaBNBNativeLibrary(BNBNativeLibrary):
            compiled_with_cuda = True


        BNB_BACKEND = "CUDA" if torch.cuda.is_available() else "CPU"
        lib = CudaBNBNativeLibrary() if ({cuda!r} and torch.cuda.is_available()) else BNBNativeLibrary()
        '''
    ).format(cuda=cuda)
    return {"bitsandbytes/cextension.py": body}


# ---------------------------------------------------------------------------
# vendor index
# ---------------------------------------------------------------------------
def make_vendor_index_files(dest: Path, tag: str = "py3-none-any", bait: bool = True) -> List[Path]:
    """Write the Jetson-style vendor wheels (plus bait) into ``dest``; ``tag``: the vendor
    wheels' tag (``cp310-none-any`` stands for a build of one Python that installs anywhere)."""
    dest = Path(dest)
    src = "vendor"
    pin = "torch=={}".format(VENDOR_TORCH)
    out = [
        build_wheel(
            dest, "torch", VENDOR_TORCH, requires=_TORCH_REQUIRES, requires_python=">=3.8",
            modules=_torch_modules(True, "12.6"), init_body=_TORCH_INIT_BODY, source_index=src, tag=tag,
        ),
        build_wheel(dest, "torchvision", VENDOR_TORCHVISION, requires=("numpy", pin), source_index=src, tag=tag),
        build_wheel(dest, "torchaudio", VENDOR_TORCHAUDIO, requires=(pin,), source_index=src, tag=tag),
        build_wheel(
            dest, "bitsandbytes", VENDOR_BITSANDBYTES, requires=("torch<3,>=2.2", "numpy>=1.17"),
            modules=_bnb_modules(True), source_index=src, tag=tag,
        ),
    ]
    if not bait:
        return out
    for name, version in VENDOR_BAIT.items():
        out.append(build_wheel(dest, name, version, source_index=src, summary="BAIT: must never be installed"))
    return out


# ---------------------------------------------------------------------------
# public index
# ---------------------------------------------------------------------------
class _Spec(NamedTuple):
    name: str
    version: str
    requires: Sequence[str] = ()
    import_name: Optional[str] = None
    requires_python: Optional[str] = None
    modules: Mapping[str, str] = {}


# What the doctor asks transformers: whether it counts torch as available.
_TRANSFORMERS_UTILS = """def is_torch_available():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True
"""


# Each stub keeps a realistic subset of the real project's requirements, so
# resolution exercises constraints (e.g. accelerate -> torch>=2.0, scipy -> numpy<2.3).
_PUBLIC_SPECS = (
    _Spec("numpy", "1.26.4", requires_python=">=3.9"),
    _Spec("numpy", "2.1.0", requires_python=">=3.10"),
    _Spec("filelock", "3.13.1"),
    _Spec("typing-extensions", "4.12.2"),
    _Spec("networkx", "3.3"),
    _Spec("jinja2", "3.1.4", ("MarkupSafe>=2.0",)),
    _Spec("markupsafe", "2.1.5"),
    _Spec("fsspec", "2024.6.1"),
    _Spec("sympy", "1.13.1", ("mpmath<1.4,>=1.1.0",)),
    _Spec("mpmath", "1.3.0"),
    _Spec("psutil", "6.0.0"),
    _Spec("pyyaml", "6.0.2", import_name="yaml"),
    _Spec("tqdm", "4.66.5", ('colorama; platform_system == "Windows"',)),
    _Spec("safetensors", "0.4.5"),
    _Spec(
        "huggingface-hub", "0.26.0",
        ("filelock", "fsspec>=2023.5.0", "packaging>=20.9", "pyyaml>=5.1", "tqdm>=4.42.1",
         "typing-extensions>=3.7.4.3"),
    ),
    _Spec(
        "transformers", "4.46.0",
        ("filelock", "huggingface-hub<1.0,>=0.23.2", "numpy>=1.17", "packaging>=20.0", "pyyaml>=5.1",
         "safetensors>=0.4.1", "tqdm>=4.27"),
        modules={"transformers/utils.py": _TRANSFORMERS_UTILS},
    ),
    _Spec(
        "datasets", "3.0.1",
        ("filelock", "numpy>=1.17", "pandas", "tqdm>=4.66.3", "fsspec<=2024.6.1,>=2023.1.0",
         "huggingface-hub>=0.22.0", "packaging", "pyyaml>=5.1"),
    ),
    _Spec(
        "accelerate", "1.0.1",
        ("numpy<3.0.0,>=1.17", "packaging>=20.0", "psutil", "pyyaml", "torch>=2.0.0",
         "huggingface-hub>=0.21.0", "safetensors>=0.4.3"),
    ),
    _Spec("mdurl", "0.1.2"),
    _Spec("markdown-it-py", "3.0.0", ("mdurl~=0.1",), import_name="markdown_it"),
    _Spec("pygments", "2.18.0"),
    _Spec("rich", "13.9.2", ("markdown-it-py>=2.2.0", "pygments<3.0.0,>=2.13.0")),
    _Spec("six", "1.16.0"),
    _Spec("python-dateutil", "2.9.0.post0", ("six>=1.5",), import_name="dateutil"),
    _Spec("pillow", "11.0.0", import_name="PIL"),
    _Spec("pytz", "2024.2"),
    _Spec("tzdata", "2024.2"),
    _Spec(
        "matplotlib", "3.9.2",
        ("numpy>=1.23", "packaging>=20.0", "pillow>=8", "python-dateutil>=2.7"),
    ),
    _Spec(
        "pandas", "2.2.3",
        ('numpy>=1.22.4; python_version < "3.11"', 'numpy>=1.23.2; python_version == "3.11"',
         'numpy>=1.26.0; python_version >= "3.12"', "python-dateutil>=2.8.2", "pytz>=2020.1",
         "tzdata>=2022.7"),
    ),
    _Spec("seaborn", "0.13.2", ("numpy!=1.24.0,>=1.20", "pandas>=1.2", "matplotlib!=3.6.1,>=3.4")),
    _Spec("scipy", "1.14.1", ("numpy<2.3,>=1.23.5",), requires_python=">=3.10"),
    _Spec("joblib", "1.4.2"),
    _Spec("threadpoolctl", "3.5.0"),
    _Spec(
        "scikit-learn", "1.5.2",
        ("numpy>=1.19.5", "scipy>=1.6.0", "joblib>=1.2.0", "threadpoolctl>=3.1.0"),
        import_name="sklearn",
    ),
    _Spec("needs-newer-torch", "1.0", ("torch>=2.6",)),
    _Spec("torchvision", "0.21.0", ("numpy", "torch==2.6.0")),
    _Spec("pytest", "8.3.3"),
)


def make_public_index_files(dest: Path, *, seed_wheels: bool = True) -> List[Path]:
    """Write the PyPI stand-in into ``dest``.

    ``seed_wheels`` also copies the interpreter's bundled pip (and setuptools)
    wheels in, because ``uv venv --seed`` fetches its seed packages from the
    configured index; without them an offline ``--seed`` fails.
    """
    dest = Path(dest)
    src = "public"
    out: List[Path] = []
    for version in PUBLIC_TORCH_VERSIONS:
        out.append(
            build_wheel(
                dest, "torch", version, requires=_TORCH_REQUIRES, requires_python=">=3.8",
                modules=_torch_modules(False, None), init_body=_TORCH_INIT_BODY, source_index=src,
            )
        )
    out.append(
        build_wheel(
            dest, "bitsandbytes", "0.49.0", requires=("torch<3,>=2.3", "numpy>=1.17", "packaging>=20.9"),
            modules=_bnb_modules(False), source_index=src,
        )
    )
    for spec in _PUBLIC_SPECS:
        out.append(
            build_wheel(
                dest, spec.name, spec.version, requires=spec.requires, import_name=spec.import_name,
                requires_python=spec.requires_python, source_index=src, modules=spec.modules,
            )
        )
    out.append(_packaging_wheel(dest))
    # The package index's placeholder of the name (`pip index versions obliteratus` lists only
    # 0.0.1, as wheels-index.toml says): an empty module, no dependencies.
    out.append(
        build_wheel(
            dest, "obliteratus", "0.0.1", requires_python=">=3.7", source_index="squatted",
            summary="Reserved name placeholder. No functionality.",
        )
    )
    if seed_wheels:
        out.extend(make_seed_wheels(dest))
    return out


def _packaging_wheel(dest: Path) -> Path:
    # Real `packaging` (a dependency of this project, so always importable
    # here): code inside the target venv, e.g. a doctor, may import it.
    try:
        return wheel_from_installed(dest, "packaging")
    except Exception:  # not installed as a plain dist: a stub is enough for resolution
        return build_wheel(dest, "packaging", "24.1", source_index="public")


def make_seed_wheels(dest: Path) -> List[Path]:
    """What ``uv venv --seed`` fetches for Python < 3.12: pip, setuptools, wheel.

    pip and setuptools are the real wheels ensurepip bundles with the
    interpreter (always there, offline). ``wheel`` is not bundled, so it is a
    stub: nothing in these tests builds a setuptools sdist with it.
    """
    import ensurepip

    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("*.whl"))
    # Debian's (and Ubuntu's) ensurepip bundles none: it takes them from python3-pip-whl's folder.
    bundled = bundled or sorted(path for path in Path("/usr/share/python-wheels").glob("*.whl")
                                if path.name.startswith(("pip-", "setuptools-")))
    out = []
    for wheel in bundled:
        target = Path(dest) / wheel.name
        shutil.copyfile(str(wheel), str(target))
        out.append(target)
    out.append(build_wheel(dest, "wheel", "0.45.1", source_index="public", summary="Seed stub of wheel"))
    return out


def build_index_dirs(base: Path) -> IndexDirs:
    """Build both index directories under ``base`` (meant to be done once per session)."""
    base = Path(base)
    dirs = IndexDirs(vendor=base / "vendor", public=base / "public")
    make_vendor_index_files(dirs.vendor)
    make_public_index_files(dirs.public)
    return dirs


# ---------------------------------------------------------------------------
# stub OBLITERATUS source tree
# ---------------------------------------------------------------------------
def _toml_list(items: Sequence[str], indent: str = "    ") -> str:
    return "[\n" + "".join('{}"{}",\n'.format(indent, item) for item in items) + "]"


def _pyproject(version: str, dependencies: Sequence[str], extras: Mapping[str, Sequence[str]]) -> str:
    extra_lines = "\n".join("{} = {}".format(k, _toml_list(v)) for k, v in sorted(extras.items()))
    return textwrap.dedent(
        """\
        [build-system]
        # In-tree backend: building needs no index and no network.
        requires = []
        build-backend = "stub_backend"
        backend-path = ["_build"]

        [project]
        name = "obliteratus"
        version = "{version}"
        description = "Stub of OBLITERATUS for jetson-install tests"
        requires-python = ">=3.10"
        license = {{text = "AGPL-3.0-or-later"}}
        dependencies = {deps}

        [project.optional-dependencies]
        {extras}

        [project.scripts]
        obliteratus = "obliteratus.cli:main"
        """
    ).format(version=version, deps=_toml_list(dependencies), extras=extra_lines)


_DEVICE_PY = '''\
"""Stub of obliteratus/device.py: discovery delegated to torch.cuda.is_available()."""


def is_cuda():
    import torch

    return bool(torch.cuda.is_available())


def get_device(pref="auto"):
    if pref != "auto":
        return pref
    return "cuda" if is_cuda() else "cpu"


def supports_bitsandbytes(device):
    return device.startswith("cuda")
'''

_CLI_PY = '''\
"""Stub CLI: --help and --version without importing torch, like the real one."""
import argparse
import sys

from . import __version__


def main(argv=None):
    parser = argparse.ArgumentParser(prog="obliteratus", description="OBLITERATUS stub")
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("info", help="print device info (imports torch)")
    args = parser.parse_args(argv)
    if args.command == "info":
        from .device import get_device

        print(get_device("auto"))
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_MAIN_PY = "import sys\n\nfrom .cli import main\n\nsys.exit(main())\n"

# A self-contained PEP 517 backend. It must not import anything outside the
# stdlib: the build runs with `requires = []`, offline.
_BACKEND_PY = r'''"""In-tree PEP 517 backend for the stub OBLITERATUS (stdlib only, offline)."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "obliteratus"
VERSION = {version!r}
REQUIRES_PYTHON = ">=3.10"
DEPENDENCIES = {dependencies!r}
EXTRAS = {extras!r}
SCRIPTS = {{"obliteratus": "obliteratus.cli:main"}}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_INFO = "{{}}-{{}}.dist-info".format(NAME, VERSION)
TAG = "py3-none-any"


def _metadata():
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + VERSION,
             "Summary: Stub of OBLITERATUS for jetson-install tests",
             "Requires-Python: " + REQUIRES_PYTHON]
    lines += ["Requires-Dist: " + d for d in DEPENDENCIES]
    for extra in sorted(EXTRAS):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: {{}}; extra == "{{}}"'.format(d, extra) for d in EXTRAS[extra]]
    return "\n".join(lines) + "\n"


def _dist_info_files():
    return {{
        DIST_INFO + "/METADATA": _metadata().encode(),
        DIST_INFO + "/WHEEL": ("Wheel-Version: 1.0\nGenerator: stub_backend\nRoot-Is-Purelib: true\nTag: "
                               + TAG + "\n").encode(),
        DIST_INFO + "/entry_points.txt": ("[console_scripts]\n" + "".join(
            "{{}} = {{}}\n".format(k, v) for k, v in sorted(SCRIPTS.items()))).encode(),
    }}


def _package_files():
    out = {{}}
    pkg_root = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(pkg_root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                full = os.path.join(dirpath, filename)
                rel = os.path.relpath(full, ROOT).replace(os.sep, "/")
                with open(full, "rb") as handle:
                    out[rel] = handle.read()
    return out


def _write_wheel(wheel_directory, files):
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("{{}},sha256={{}},{{}}".format(path, digest, len(data)))
    record.append(DIST_INFO + "/RECORD,,")
    files = dict(files)
    files[DIST_INFO + "/RECORD"] = ("\n".join(record) + "\n").encode()
    name = "{{}}-{{}}-{{}}.whl".format(NAME, VERSION, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    for path, data in _dist_info_files().items():
        target = os.path.join(metadata_directory, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files()
    files.update(_dist_info_files())
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    files = {{"_obliteratus_editable.pth": (ROOT + "\n").encode()}}
    files.update(_dist_info_files())
    return _write_wheel(wheel_directory, files)


def build_sdist(sdist_directory, config_settings=None):
    base = "{{}}-{{}}".format(NAME, VERSION)
    name = base + ".tar.gz"
    members = dict(("{{}}/{{}}".format(base, k), v) for k, v in _package_files().items())
    for rel in ("pyproject.toml", "_build/stub_backend.py"):
        with open(os.path.join(ROOT, rel), "rb") as handle:
            members[base + "/" + rel] = handle.read()
    members[base + "/PKG-INFO"] = _metadata().encode()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as archive:
        for path, data in sorted(members.items()):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return name
'''


def make_obliteratus_source(
    dest: Path,
    version: str = "0.1.3",
    *,
    dependencies: Sequence[str] = OBLITERATUS_DEPENDENCIES,
    extras: Mapping[str, Sequence[str]] = OBLITERATUS_EXTRAS,
) -> Path:
    """Write a buildable (offline) stub OBLITERATUS source tree at ``dest`` and return it."""
    root = Path(dest)
    (root / "obliteratus").mkdir(parents=True, exist_ok=True)
    (root / "_build").mkdir(parents=True, exist_ok=True)
    extras_plain = dict((k, list(v)) for k, v in extras.items())
    (root / "pyproject.toml").write_text(_pyproject(version, dependencies, extras_plain), encoding="utf-8")
    (root / "_build" / "stub_backend.py").write_text(
        _BACKEND_PY.format(version=version, dependencies=list(dependencies), extras=extras_plain),
        encoding="utf-8",
    )
    package = root / "obliteratus"
    (package / "__init__.py").write_text(
        '__version__ = "{}"\n__source_index__ = "source"\n'.format(version), encoding="utf-8"
    )
    (package / "__main__.py").write_text(_MAIN_PY, encoding="utf-8")
    (package / "cli.py").write_text(_CLI_PY, encoding="utf-8")
    (package / "device.py").write_text(_DEVICE_PY, encoding="utf-8")
    (root / "README.md").write_text("Stub OBLITERATUS for tests.\n", encoding="utf-8")
    return root


def _git(repo: Path, *args: str) -> None:
    env = dict(os.environ)
    # Commits must not depend on the machine's git identity or global config.
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="stub",
        GIT_AUTHOR_EMAIL="stub@example.invalid",
        GIT_COMMITTER_NAME="stub",
        GIT_COMMITTER_EMAIL="stub@example.invalid",
        GIT_AUTHOR_DATE="2026-01-01T00:00:00+0000",
        GIT_COMMITTER_DATE="2026-01-01T00:00:00+0000",
    )
    subprocess.run(["git", "-C", str(repo)] + list(args), check=True, env=env, capture_output=True)


def make_obliteratus_git_repo(dest: Path, version: str = "0.1.3", tag: str = OBLITERATUS_TAG) -> Path:
    """The stub source as a git repo with ``tag`` (for ``git+file://...@v0.1.3``)."""
    root = make_obliteratus_source(dest, version)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "stub obliteratus " + version)
    _git(root, "tag", tag)
    return root


def planted_workspace_wheel(folder: Path, name: str, version: str, ran: Path) -> None:
    """A wheel of `name` whose .pth file, run at every start of Python where it is installed,
    writes `ran`."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "raise SystemExit('planted')\n",
             f"{name}-planted.pth": f"import pathlib; pathlib.Path({str(ran)!r}).write_text('ran')\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n")
