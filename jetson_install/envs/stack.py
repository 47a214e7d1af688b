"""A torch stack an interpreter already carries (an L4T PyTorch image, a system install): the
values the existing-torch route keeps and interpreters.inspect_stack reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

__all__ = ["STACK_PACKAGES", "StackPackage", "ExistingStack"]

#: The packages an image's torch comes with and that must stay exactly as they are; NumPy
#: belongs to them because the torch build was compiled against its major version.
STACK_PACKAGES = ("torch", "torchvision", "torchaudio", "bitsandbytes", "numpy")


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
