"""Runs `jetson-install obliteratus` through the CLI against loopback indexes, as a user would
(in this process, see support.cli; `argv()` is the same command for a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .cli import run_cli

__all__ = ["VENDOR_PACKAGES", "Installer"]

# What the stub vendor index serves besides its bait: the builds an install takes from it.
VENDOR_PACKAGES = {"torch", "torchvision", "torchaudio", "bitsandbytes"}


class Installer:
    def __init__(self, venv: Path, env: Dict[str, str], vendor_url: str, public_url: str, source: Path) -> None:
        self.venv, self.env, self.vendor_url, self.public_url, self.source = venv, env, vendor_url, public_url, source

    def args(self, source: Optional[Path] = None) -> List[str]:
        return [
            "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2",
            "--venv", str(self.venv), "--python", sys.executable, "--vendor-index", self.vendor_url,
            "--default-index", self.public_url, "--source", str(source or self.source), "--no-verify", "--yes", "--json",
        ]

    def argv(self, source: Optional[Path] = None) -> List[str]:
        return [sys.executable, "-m", "jetson_install", *self.args(source)]

    def run(self, source: Optional[Path] = None, extra: "tuple[str, ...]" = ()) -> "tuple[int, Dict[str, Any], str]":
        result = run_cli(*self.args(source), *extra, env=self.env)
        data = json.loads(result.stdout) if result.stdout.strip() else {}
        return result.returncode, data, result.stderr

    def python(self, code: str) -> str:
        result = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                                env=self.env, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def torch(self) -> str:
        return self.python("import importlib.metadata as m, torch; print(m.version('torch'), torch.__source_index__)")
