"""A shared library that `import torch` could not load, and the package that provides it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from jetson_install.board.apt import install_command

# "libnvpl_lapack_lp64_gomp.so.0: cannot open shared object file" -> libnvpl_lapack_lp64_gomp.so.0
_LIBRARY_FILE = re.compile(r"\b(lib[A-Za-z0-9_+\-]+\.so(?:\.[0-9]+)*)")


@dataclass(frozen=True)
class MissingLibrary:
    file: str
    provided_by: Optional[str]  # "apt: libopenblas-dev", "pip: nvpl-lapack"; None: not one we know
    fix: Optional[str]


@dataclass(frozen=True)
class _Provider:
    prefix: str  # lower-case start of the library's file name
    apt: Optional[str]  # where the JetPack (CUDA 12, Tegra userspace) apt repositories have it
    pip: Optional[str]  # where only pip has it, or for the CUDA 13 (SBSA userspace) builds
    cuda13: bool = False  # a library only the CUDA 13 builds link (no JetPack 6 package holds it)


_PROVIDERS: Tuple[_Provider, ...] = (
    # NVIDIA's PyTorch-for-Jetson guide installs libopenblas-dev before the wheel
    # (https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/index.html).
    _Provider("libopenblas", "libopenblas-dev", None),
    _Provider("libomp", "libomp-dev", None),
    # bitsandbytes' native libraries link GCC's OpenMP runtime, which minimal images lack
    # (https://packages.debian.org/bookworm/libgomp1, https://packages.ubuntu.com/jammy/libgomp1).
    _Provider("libgomp", "libgomp1", None),
    # What a project put on the stack (--with) loads: OpenCV's wheels (ultralytics' cv2) link
    # libGL.so.1 and libgthread-2.0.so.0, which headless images lack
    # (https://packages.ubuntu.com/jammy/arm64/libgl1/filelist,
    # https://packages.ubuntu.com/jammy/arm64/libglib2.0-0/filelist).
    _Provider("libgl.", "libgl1", None),
    _Provider("libgthread-2.0", "libglib2.0-0", None),
    _Provider("libglib-2.0", "libglib2.0-0", None),
    # Wheels from 24.06 on need cuSPARSELt; on JetPack it is the libcusparselt0 package of NVIDIA's
    # cuda-keyring repository (https://github.com/ultralytics/ultralytics, docs/en/guides/nvidia-jetson.md);
    # CUDA 13 builds take the nvidia-cusparselt-cu13 wheel.
    _Provider("libcusparselt", "libcusparselt0 libcusparselt-dev", "nvidia-cusparselt-cu13"),
    # Jetson AI Lab sbsa/cu130 torch links NVPL and cuDSS without declaring them; the fix was
    # nvpl-blas, nvpl-lapack and nvidia-cudss-cu13 (https://github.com/pollen-robotics/microduck_rl/issues/38).
    # NVPL is not in JetPack's apt repository (https://github.com/roboflow/inference/pull/2478).
    _Provider("libnvpl_lapack", None, "nvpl-lapack"),
    _Provider("libnvpl_blas", None, "nvpl-blas"),
    _Provider("libnvpl", None, "nvpl-blas nvpl-lapack"),
    # jp6/cu126 torch 2.11 links libcudss.so.0; JetPack takes NVIDIA's cudss apt package
    # (https://developer.nvidia.com/cudss-downloads), from NVIDIA's CUDA repository (apt.py).
    _Provider("libcudss", "cudss", "nvidia-cudss-cu13"),
    # The CUDA runtime libraries: JetPack's apt packages for its CUDA (`{cuda}`: 12-6; JetPack's
    # and NVIDIA's CUDA repositories, e.g. cuda-cudart-12-6 "Provides: libcudart.so.12"), and the
    # CUDA 13 wheels the official aarch64 torch requires (torch 2.13.0's cuda-toolkit 13.0.3
    # extras and its nvidia-*-cu13 requirements; each wheel's file list, read from the files the
    # arm64 lane installs: nvidia_cuda_runtime 13.0.96 holds nvidia/cu13/lib/libcudart.so.13).
    _Provider("libcudart", "cuda-cudart-{cuda}", "nvidia-cuda-runtime"),
    _Provider("libcublas", "libcublas-{cuda}", "nvidia-cublas"),
    _Provider("libcufft", "libcufft-{cuda}", "nvidia-cufft"),
    _Provider("libcurand", "libcurand-{cuda}", "nvidia-curand"),
    _Provider("libcusolver", "libcusolver-{cuda}", "nvidia-cusolver"),
    _Provider("libcusparse", "libcusparse-{cuda}", "nvidia-cusparse"),  # (after libcusparselt, above)
    _Provider("libnvrtc", "cuda-nvrtc-{cuda}", "nvidia-cuda-nvrtc"),
    _Provider("libnvjitlink", "libnvjitlink-{cuda}", "nvidia-nvjitlink"),
    _Provider("libcupti", "cuda-cupti-{cuda}", "nvidia-cuda-cupti"),
    # (cuDNN on JetPack 6 is the one JetPack ships: a torch that misses it was built for another.)
    _Provider("libcudnn", None, "nvidia-cudnn-cu13", cuda13=True),
    _Provider("libnccl", None, "nvidia-nccl-cu13", cuda13=True),
    _Provider("libnvshmem", None, "nvidia-nvshmem-cu13", cuda13=True),
    _Provider("libcufile", None, "nvidia-cufile", cuda13=True),
)


def missing_library(error: str, cuda: Optional[str], python: str, uv: str) -> Optional[MissingLibrary]:
    """The library an import error names, with the package for this CUDA (major 13: the pip wheels)."""
    match = _LIBRARY_FILE.search(error)
    if match is None or "cannot open shared object file" not in error:
        return None
    file = match.group(1)
    lowered = file.lower()
    cuda13 = cuda is not None and cuda.split(".")[0].isdigit() and int(cuda.split(".")[0]) >= 13
    for provider in _PROVIDERS:
        if not lowered.startswith(provider.prefix) or (provider.cuda13 and not cuda13):
            continue
        if provider.apt and "{" in provider.apt and not cuda13 and not cuda:
            break  # JetPack's package for a CUDA release not known here
        if provider.pip and (cuda13 or provider.apt is None):
            return MissingLibrary(
                file,
                f"pip: {provider.pip}",
                f"{uv} pip install --python {python} {provider.pip}, then make the library directory it"
                " installs under site-packages visible to the loader (LD_LIBRARY_PATH)",
            )
        apt = (provider.apt or "").format(cuda=(cuda or "").replace(".", "-"))
        return MissingLibrary(file, f"apt: {apt}", install_command(apt.split()))
    return MissingLibrary(file, None, None)
