"""apt packages a channel's wheels need that JetPack's own repositories do not carry, and the
one command that installs them, adding the repository that has them first."""

from __future__ import annotations

from typing import Sequence, Tuple

__all__ = ["CUDA_KEYRING", "from_cuda_repository", "install_command"]

# cuDSS (`cudss`: https://github.com/NVIDIA/Isaac-GR00T/issues/343) and cuSPARSELt
# (`libcusparselt0`, `libcusparselt-dev`: ultralytics/ultralytics docs/en/guides/nvidia-jetson.md)
# are in NVIDIA's CUDA repository, not JetPack's L4T one; both add it with its cuda-keyring
# package for Ubuntu 22.04 arm64, JetPack 6's Ubuntu (the only channels that take them by apt).
CUDA_KEYRING = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/cuda-keyring_1.1-1_all.deb"
_CUDA_REPOSITORY_PACKAGES = ("cudss", "libcusparselt0", "libcusparselt-dev")


def from_cuda_repository(packages: Sequence[str]) -> Tuple[str, ...]:
    """Those of `packages` that only NVIDIA's CUDA repository carries."""
    return tuple(package for package in packages if package in _CUDA_REPOSITORY_PACKAGES)


def install_command(packages: Sequence[str], assume_yes: bool = False) -> str:
    """`sudo apt-get install PACKAGES`, after adding NVIDIA's CUDA repository where one of them
    is only there (an apt-get install of `cudss` on a stock JetPack finds no such package)."""
    install = f"sudo apt-get install {'-y ' if assume_yes else ''}{' '.join(packages)}"
    if not from_cuda_repository(packages):
        return install
    keyring = CUDA_KEYRING.rsplit("/", 1)[1]
    return f"wget {CUDA_KEYRING} && sudo dpkg -i {keyring} && sudo apt-get update && {install}"
