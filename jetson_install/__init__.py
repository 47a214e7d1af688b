"""jetson-install: a CUDA-enabled OBLITERATUS environment on NVIDIA Jetson, proven."""

__version__ = "0.1.0"

#: How a user gets a newer jetson-install: the name is not published on the package index, so
#: `pipx upgrade` cannot find one; the README installs it from a checkout.
UPGRADE_COMMAND = "git -C jetson-install pull && pipx install --force ./jetson-install"
