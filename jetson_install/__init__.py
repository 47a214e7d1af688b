"""jetson-install: a CUDA-enabled OBLITERATUS environment on NVIDIA Jetson, proven."""

__version__ = "0.1.0"
