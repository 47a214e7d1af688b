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
    from jetson_install.platform import Platform
    from jetson_install.release_files import L4T

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
    "dockerfile_text",
    "HostFacts",
    "host_facts",
    "host_mismatch",
    "START_EVIDENCE",
    "START_STATUS",
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
    from packaging.utils import canonicalize_name

    lines = []
    for line in compiled.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[\s=<>!~;@\[]", line, maxsplit=1)[0]
        if canonicalize_name(name) not in kept:
            lines.append(line)
    return lines


def doctor_view(channel: Optional["Channel"], abi: str, pins: Mapping[str, str]
                ) -> Tuple[Optional["Channel"], "VendorSource"]:
    """The channel and source the doctor judges a kept stack against: the interpreter's own
    Python is the ABI its packages were built for, and their versions are the pins."""
    from dataclasses import replace

    from jetson_install.catalog import VendorSource

    return (replace(channel, python=abi) if channel is not None else None), VendorSource.pinned(None, (), dict(pins))


# -- the image -----------------------------------------------------------------------------

#: Where the entrypoint leaves what its doctor found, for the HEALTHCHECK and for people.
START_EVIDENCE = "/tmp/jetson-install/start-evidence.json"
START_STATUS = "/tmp/jetson-install/start-status"
#: For hosts (and tests) where /etc/nv_tegra_release or the device tree is not mounted.
HOST_L4T_VARIABLE = "JETSON_INSTALL_HOST_L4T"
HOST_CAPABILITY_VARIABLE = "JETSON_INSTALL_HOST_CAPABILITY"
_TEMPLATE = Path(__file__).parent / "Dockerfile.template"


def dockerfile_text(platform: "Platform", channel: "Channel", base: Optional[str], regenerate: str) -> str:
    """The Dockerfile for `channel` on `platform`'s release: FROM `base`, else the first image
    wheels-index.toml knows to match the channel."""
    from jetson_install import __version__

    if base is None:
        if not channel.containers:
            raise BadInput(f"no container image is known to carry a CUDA torch for channel {channel.id}",
                           fix="name the image to build on: jetson-install dockerfile --base IMAGE")
        base = channel.containers[0].image
    assert platform.l4t is not None
    device = platform.module or platform.family
    capability = platform.compute_capability or ""
    values = {
        "@VERSION@": __version__,
        "@CHANNEL_TITLE@": channel.title,
        "@CHANNEL@": channel.id,
        "@L4T@": str(platform.l4t),
        "@L4T_MAJOR@": str(platform.l4t.major),
        "@FOR_DEVICE@": f", {device} (compute capability {capability or 'unknown'})" if device else "",
        "@ARGS@": regenerate,
        "@BASE@": base,
        "@CAPABILITY@": capability,
        "@STATUS_FILE@": START_STATUS,
    }
    text = _TEMPLATE.read_text()
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


@dataclass(frozen=True)
class HostFacts:
    """What the host says about itself inside the container, and where it was read."""

    l4t: Optional["L4T"]
    l4t_source: str
    capability: Optional[str]
    capability_source: str


def host_facts(root: Path, environ: Mapping[str, str]) -> HostFacts:
    """The host's L4T release (from the /etc/nv_tegra_release the NVIDIA container runtime
    mounts, never the image's dpkg database) and the GPU's compute capability."""
    from jetson_install.errors import InvalidReleaseFile
    from jetson_install.release_files import parse_l4t, parse_nv_tegra_release

    l4t, l4t_source = None, "/etc/nv_tegra_release"
    if environ.get(HOST_L4T_VARIABLE):
        try:
            l4t = parse_l4t(environ[HOST_L4T_VARIABLE])
        except BadInput as exc:
            raise BadInput(f"{HOST_L4T_VARIABLE}={environ[HOST_L4T_VARIABLE]!r}: {exc.message}",
                           fix=f"set {HOST_L4T_VARIABLE} to a release such as 36.4.3") from None
        l4t_source = HOST_L4T_VARIABLE
    else:
        try:
            l4t = parse_nv_tegra_release((root / "etc" / "nv_tegra_release").read_bytes())[0]
        except (OSError, InvalidReleaseFile):
            l4t = None
    capability, capability_source = environ.get(HOST_CAPABILITY_VARIABLE) or None, HOST_CAPABILITY_VARIABLE
    if capability is None:
        from jetson_install.platform import L4TOverride, detect

        try:
            capability = detect(root, L4TOverride(str(l4t), l4t_source) if l4t else None).compute_capability
        except BadInput:
            capability = None
        capability_source = "/proc/device-tree/compatible"
    return HostFacts(l4t, l4t_source, capability, capability_source)


def host_mismatch(host: HostFacts, environ: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(message, fix) when the host is not what the image was built for, else None."""
    built_major = environ.get("JETSON_INSTALL_IMAGE_L4T_MAJOR", "")
    built_capability = environ.get("JETSON_INSTALL_IMAGE_CAPABILITY", "")
    built = f"L4T R{built_major}" + (f", compute capability {built_capability}" if built_capability else "")
    rebuild = "build the image for this host: run `jetson-install dockerfile` on it"
    if host.l4t is None:
        return (f"this image is built for {built}, and the host's L4T is unknown: {host.l4t_source} is missing or empty",
                f"run it with the NVIDIA container runtime (--runtime nvidia), which mounts it, "
                f"or set {HOST_L4T_VARIABLE}=<the host's release>")
    if str(host.l4t.major) != built_major:
        return f"this image is built for {built}, and the host runs L4T R{host.l4t} ({host.l4t_source})", rebuild
    if built_capability and host.capability and host.capability != built_capability:
        return (f"this image is built for {built}, and the host's GPU has compute capability {host.capability} "
                f"({host.capability_source})", rebuild)
    return None
