"""Find a system Python whose version matches the channel's ABI (the vendor wheels are
built for one CPython minor: cp310 on JetPack 6, cp312 on JetPack 7)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from jetson_install.errors import BadInput
from jetson_install.runner import run

__all__ = ["Interpreter", "inspect_interpreter", "find_interpreter"]

_VERSION_PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3])"


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: str  # "3.10.12"

    @property
    def abi(self) -> str:
        return ".".join(self.version.split(".")[:2])


def inspect_interpreter(path: str) -> Interpreter:
    result = run([path, "-c", _VERSION_PROBE], timeout=30)
    if not result.ok or not result.stdout.strip():
        raise BadInput(
            f"--python {path}: cannot run it ({result.last_stderr_line() or 'exit ' + str(result.returncode)})",
            fix="pass a working interpreter, e.g. --python /usr/bin/python3.10",
        )
    return Interpreter(path, result.stdout.strip())


def _candidates(abi: str) -> Iterator[str]:
    names = (f"python{abi}", "python3")
    directories = ["/usr/bin", "/usr/local/bin"] + os.environ.get("PATH", "").split(os.pathsep)
    seen = set()
    for name in names:
        for directory in directories:
            path = Path(directory or ".") / name
            if str(path) not in seen and path.is_file() and os.access(path, os.X_OK):
                seen.add(str(path))
                yield str(path)


def find_interpreter(abi: str) -> Optional[Interpreter]:
    for path in _candidates(abi):
        try:
            found = inspect_interpreter(path)
        except BadInput:
            continue  # e.g. a pyenv shim for a version that is not selected
        if found.abi == abi:
            return found
    return None
