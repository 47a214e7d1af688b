"""The container lane: keep a torch that is already there, and the Dockerfile for a Jetson image.

Keeping a torch (`--use-existing-torch`): the chosen interpreter already carries a CUDA torch
(an L4T PyTorch or NGC iGPU image, or a system install). uv does not look into a venv's parent
when it resolves or installs (astral-sh/uv#17215, #15162), so a `--system-site-packages`
venv alone would let it plan a second torch into the venv. Instead the torch stack found is
handed to the resolver as given: a metadata-only wheel per package at its exact version, with
no dependencies, named by a direct file reference (so no index is ever asked for it). The
resolution without those packages is then installed with `--no-deps` into a venv that sees the
interpreter's own site-packages, the approach of OBLITERATUS' scripts/setup_jetson.py.

The image (`jetson-install dockerfile`): FROM an image known to match the board's channel
(wheels-index.toml `containers`), the existing-torch install at build time, and an entrypoint
(`jetson-install container-entrypoint`) that refuses a host the image was not built for before
it runs the doctor and the command.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from jetson_install import runner
from jetson_install.errors import BadInput
from jetson_install.versions import satisfies

if TYPE_CHECKING:
    from jetson_install.catalog import Channel, VendorSource

__all__ = [
    "STACK_PACKAGES",
    "StackPackage",
    "ExistingStack",
    "inspect_stack",
    "visible_distributions",
    "sees_parent_environment",
    "judge_stack",
    "write_given_wheels",
    "resolved_requirements",
    "doctor_view",
    "GIVEN_FILE",
    "RESOLUTION",
    "TO_INSTALL",
]

#: The packages an image's torch comes with and that must stay exactly as they are; NumPy
#: belongs to them because the torch build was compiled against its major version.
STACK_PACKAGES = ("torch", "torchvision", "torchaudio", "bitsandbytes", "numpy")
#: In the environment's state directory: what was kept, and the names uv must leave alone.
GIVEN_FILE = "existing-torch.json"
RESOLUTION = "resolution.txt"
TO_INSTALL = "install.txt"

_PROBE = Path(__file__).parent / "probes" / "stack_probe.py"


@dataclass(frozen=True)
class StackPackage:
    """One package of the torch stack as installed: there is no wheel file to hash, so its
    identity is the dist-info RECORD's sha256 and where it lies."""

    name: str
    version: str
    location: str
    record_sha256: Optional[str]
    cuda: Optional[str] = None  # torch only: torch.version.cuda

    def to_json(self) -> Dict[str, Any]:
        found: Dict[str, Any] = {"version": self.version, "location": self.location,
                                 "record_sha256": self.record_sha256}
        if self.name == "torch":
            found["cuda"] = self.cuda
        return found


@dataclass(frozen=True)
class ExistingStack:
    """What the chosen interpreter already has: its Python and the torch stack it sees."""

    python: str
    python_version: str
    packages: Mapping[str, StackPackage]
    torch_cuda_error: Optional[str] = None

    @property
    def abi(self) -> str:
        return ".".join(self.python_version.split(".")[:2])

    @property
    def torch(self) -> Optional[StackPackage]:
        return self.packages.get("torch")

    @property
    def pins(self) -> Dict[str, str]:
        return {name: package.version for name, package in self.packages.items()}

    def to_json(self) -> Dict[str, Any]:
        return {"python": self.python, "python_version": self.python_version,
                "packages": {name: package.to_json() for name, package in self.packages.items()}}


def _run_probe(python: str) -> Dict[str, Any]:
    completed = runner.run([python, str(_PROBE)], timeout=120)
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("probe") == "stack":
                return data
    raise BadInput(f"--python {python}: it did not run ({completed.last_stderr_line() or 'no output'})",
                   fix="pass the interpreter that carries torch, e.g. --python /usr/bin/python3")


def inspect_stack(python: str) -> ExistingStack:
    """The torch stack `python` sees, read without importing torch."""
    data = _run_probe(python)
    packages = {}
    cuda_error = None
    for name in STACK_PACKAGES:
        found = data["stack"].get(name)
        if found:
            packages[name] = StackPackage(name, found["version"], found["location"], found["record_sha256"],
                                          found.get("cuda"))
            if name == "torch":
                cuda_error = found.get("cuda_error")
    return ExistingStack(python, data["python"], packages, cuda_error)


def visible_distributions(python: str) -> Dict[str, str]:
    """Normalized name -> version of every distribution `python` can import, parents included."""
    return dict(_run_probe(python)["distributions"])


def sees_parent_environment(python: str) -> bool:
    """Whether `python` belongs to a venv made with --system-site-packages."""
    config = Path(python).parent.parent / "pyvenv.cfg"
    try:
        text = config.read_text()
    except OSError:
        return False
    return re.search(r"^\s*include-system-site-packages\s*=\s*true\s*$", text, re.M | re.I) is not None


def judge_stack(stack: ExistingStack, channel_cuda: Optional[str], requires_python: str,
                requires_torch: str) -> Tuple[str, str, List[str]]:
    """(reason, remedy, warnings): an empty reason when the stack can be kept."""
    remedy = ("start from an image that carries the Jetson CUDA torch (`jetson-install plan obliteratus` lists them), "
              "or drop --use-existing-torch to install the vendor build into a new environment")
    warnings: List[str] = []
    torch = stack.torch
    where = f"the torch of {stack.python}"
    if not satisfies(f"{stack.python_version}", requires_python):
        return (f"unsupported: {stack.python} is Python {stack.python_version}; OBLITERATUS needs Python "
                f"{requires_python}"), remedy, warnings
    if torch is None:
        return f"unsupported: {stack.python} has no torch to keep", remedy, warnings
    if stack.torch_cuda_error:
        return f"unsupported: {where} cannot be judged: {stack.torch_cuda_error}", remedy, warnings
    if not torch.cuda:
        return (f"unsupported: {where} ({torch.version} in {torch.location}) is a CPU-only build "
                "(torch.version.cuda is None)"), remedy, warnings
    if channel_cuda and torch.cuda.split(".")[0] != channel_cuda.split(".")[0]:
        return (f"unsupported: {where} ({torch.version}) is built for CUDA {torch.cuda}, "
                f"and this JetPack has CUDA {channel_cuda}"), remedy, warnings
    if not satisfies(torch.version, requires_torch):
        return (f"unsupported: {where} is {torch.version}; OBLITERATUS needs torch {requires_torch}"), remedy, warnings
    if channel_cuda and torch.cuda != channel_cuda:
        # NGC iGPU images bring a newer CUDA 12 userspace than JetPack's (the compatibility table of
        # https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform-release-notes/pytorch-jetson-rel.html);
        # the doctor's CUDA checks decide whether it runs on this board.
        warnings.append(f"{where} is built for CUDA {torch.cuda}, JetPack has CUDA {channel_cuda}: "
                        "it runs only where the image brings its own CUDA runtime")
    return "", "", warnings


def write_given_wheels(stack: ExistingStack, directory: Path) -> List[str]:
    """A metadata-only wheel per kept package (exact version, no dependencies) and the
    requirement naming each by file, so the resolver takes them as they are."""
    directory.mkdir(parents=True, exist_ok=True)
    requirements = []
    for name, version in stack.pins.items():
        path = directory / f"{name}-{version}-py3-none-any.whl"
        _write_metadata_wheel(path, name, version)
        requirements.append(f"{name} @ {path.as_uri()}")
    return requirements


def _write_metadata_wheel(path: Path, name: str, version: str) -> None:
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 "Summary: Already installed in the chosen interpreter; kept by jetson-install\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: jetson-install\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(data)}")
            archive.writestr(member, data)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n")


def resolved_requirements(compiled: str, kept: Sequence[str]) -> List[str]:
    """The lines of `uv pip compile` output that are to be installed: all but the kept stack."""
    lines = []
    for line in compiled.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[\s=<>!~;@\[]", line, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", name).lower() not in kept:
            lines.append(line)
    return lines


def doctor_view(channel: Optional["Channel"], abi: str, pins: Mapping[str, str]
                ) -> Tuple[Optional["Channel"], "VendorSource"]:
    """The channel and source the doctor judges a kept stack against: the interpreter's own
    Python is the ABI its packages were built for, and their versions are the pins."""
    from dataclasses import replace

    from jetson_install.catalog import VendorSource

    return (replace(channel, python=abi) if channel is not None else None), VendorSource.pinned(None, (), dict(pins))
