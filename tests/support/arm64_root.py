"""The arm64 Debian root that tests/setup.d/20-arm64-root builds, as the aarch64 lane
(tests/test_lane_arm64.py) and bench/bench_arm64.py use it: where it is, and the plain
environment a command inside it runs with (under qemu-user, through chroot)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

from . import PROXY_VARIABLES

__all__ = ["SAMPLE", "TOOL", "arm64_root", "chroot_environment"]

SAMPLE = "sample:agx-orin-64gb-jp6.2"
# Inside the root: jetson-install's own environment.
TOOL = "/lane/tool"


def arm64_root() -> Path:
    """Where tests/setup.d/20-arm64-root keeps the root (the same rule as the script)."""
    if os.environ.get("JETSON_INSTALL_ARM64_ROOT"):
        return Path(os.environ["JETSON_INSTALL_ARM64_ROOT"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "jetson-install" / "test-lanes" / "arm64-bookworm"


def chroot_environment() -> Dict[str, str]:
    """A user's plain environment inside the root; the host's CA bundle was copied there."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    # The machine's own proxy settings: the lane reaches the registry as a user would.
    env.update({name: os.environ[name] for name in PROXY_VARIABLES if name in os.environ})
    return env
