"""The arm64 Debian root that tests/setup.d/20-arm64-root builds, as the aarch64 lane
(tests/test_lane_arm64.py) and bench/bench_arm64.py use it: where it is, and the plain
environment a command inside it runs with (under qemu-user, through chroot)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Dict, Optional

from . import PROXY_VARIABLES

__all__ = ["SAMPLE", "TOOL", "arm64_root", "chroot_environment", "InRoot"]

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


class InRoot:
    """Commands inside the root (chroot, qemu-user through binfmt), each timed as its step;
    `tool` is where jetson-install's environment is inside it."""

    def __init__(self, root: Path, tool: str, timeout: float) -> None:
        self.root, self.tool_dir, self.timeout = root, tool, timeout
        self.timings: Dict[str, float] = {}

    def run(self, step: str, *argv: str, timeout: Optional[float] = None) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = subprocess.run(["chroot", str(self.root), *argv], capture_output=True, text=True,
                                env=chroot_environment(), timeout=timeout or self.timeout)
        self.timings[step] = round(self.timings.get(step, 0.0) + time.monotonic() - started, 1)
        return result

    def tool(self, step: str, *args: str, timeout: Optional[float] = None) -> subprocess.CompletedProcess[str]:
        return self.run(step, f"{self.tool_dir}/bin/jetson-install", *args, timeout=timeout)

    def inside(self, path: str) -> Path:
        return self.root / path.lstrip("/")
