"""Interpreters and what their environments hold: find a system Python whose version
matches the channel's ABI (the vendor wheels are built for one CPython minor: cp310 on
JetPack 6, cp312 on JetPack 7), the torch stack one carries, and `uv pip check` of one."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple


from jetson_install.base.errors import BadInput
from jetson_install.base.layout import INTERPRETER_CACHE
from jetson_install.base.process import Completed
from jetson_install.base.user_dirs import cache_dir
from jetson_install.probes import probe_command
from jetson_install.tools import uv
from jetson_install.tools.runner import run, run_uv

if TYPE_CHECKING:
    from jetson_install.envs.stack import ExistingStack


class Policy(Protocol):
    """Which Python to take (plan.InterpreterPolicy, which the route makes)."""

    @property
    def explicit(self) -> Optional[str]: ...

    @property
    def abi(self) -> Optional[str]: ...

    @property
    def python3_fallback(self) -> bool: ...

    @property
    def warn_other_abi(self) -> bool: ...

__all__ = ["Interpreter", "inspect_interpreter", "known_interpreter", "find_interpreter", "served_interpreter", "system_python3", "choose_interpreter",
           "inspect_stack", "sees_parent_environment", "pip_check"]

# The version, and the ABI flags a wheel's ABI tag carries ("t": a free-threaded build, cp313t).
_VERSION_PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3], getattr(sys, 'abiflags', ''))"


@dataclass(frozen=True)
class Interpreter:
    """A Python the tool asked for its version and ABI flags."""

    path: str
    version: str  # "3.10.12"
    abiflags: str = ""

    @property
    def abi(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def abi_tag(self) -> str:
        """The wheel ABI tag of what it builds: "cp310"."""
        return "cp" + self.abi.replace(".", "") + self.abiflags


def inspect_interpreter(path: str) -> Interpreter:
    """What the Python at `path` is: asked once per binary, then read from the per-user cache
    while the binary the path leads to keeps its size and modification time (uv keys its
    interpreter cache the same way), which spares each run a Python start-up."""
    known = known_interpreter(path)
    if known is not None:
        return known
    result = run([path, "-c", _VERSION_PROBE], timeout=30)
    if not result.ok or not result.stdout.strip():
        raise BadInput(
            f"--python {path}: cannot run it ({result.last_stderr_line() or 'exit ' + str(result.returncode)})",
            fix="pass a working interpreter, e.g. --python /usr/bin/python3.10",
        )
    version, _, abiflags = result.stdout.strip().partition(" ")
    found = Interpreter(path, version, abiflags.strip())
    key = _binary_key(path)
    if key is not None and re.fullmatch(r"\d+\.\d+\.\d+", version):  # a Python 2 prints a tuple: not kept
        _remember_interpreter(found, key)
    return found


def known_interpreter(path: str) -> Optional[Interpreter]:
    """What the cache says the Python at `path` is, asking no process: kept by the binary the
    path leads to, so a venv's python is known once the Python it was made from is."""
    key = _binary_key(path)
    cached = _cached_interpreters().get(key[0]) if key is not None else None
    if key is None or cached is None or cached.get("key") != key:
        return None
    return Interpreter(path, cached["version"], cached["abiflags"])


def _binary_key(path: str) -> Optional[List[Any]]:
    """The binary `path` leads to, with its size, time and inode; None for what is not an ELF
    binary (a pyenv shim or another wrapper script answers for whichever Python it selects)."""
    try:
        real = os.path.realpath(path)
        with open(real, "rb") as binary:
            if binary.read(4) != b"\x7fELF":
                return None
            stat = os.fstat(binary.fileno())
    except OSError:
        return None
    return [real, stat.st_size, stat.st_mtime_ns, stat.st_ino]


def _interpreter_cache() -> Path:
    return cache_dir().value / INTERPRETER_CACHE


def _cached_interpreters() -> Dict[str, Dict[str, Any]]:
    """The real path of each binary asked -> its key, version and ABI flags."""
    # A cache only saves time: one that cannot be read, or is not what this version wrote, is empty.
    try:
        data = json.loads(_interpreter_cache().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("interpreters") if isinstance(data, dict) and data.get("schema_version") == 1 else None
    if not isinstance(entries, dict):
        return {}
    return {path: entry for path, entry in entries.items()
            if isinstance(entry, dict) and isinstance(entry.get("version"), str) and isinstance(entry.get("abiflags"), str)}


def _remember_interpreter(found: Interpreter, key: List[Any]) -> None:
    cache = _interpreter_cache()
    entries = _cached_interpreters()
    entries[key[0]] = {"key": key, "version": found.version, "abiflags": found.abiflags}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        # Written whole and renamed into place: a run reading it meanwhile sees the old or the new.
        partial = cache.with_name(f".{cache.name}.{os.getpid()}")
        partial.write_text(json.dumps({"schema_version": 1, "interpreters": entries}, indent=1) + "\n", encoding="utf-8")
        os.replace(partial, cache)
    except OSError:
        pass  # a read-only cache folder: the next run asks the interpreter again


def _candidates(abi: str) -> Iterator[str]:
    names = (f"python{abi}", "python3")
    directories = ["/usr/bin", "/usr/local/bin"] + os.environ.get("PATH", "").split(os.pathsep)
    seen = set()
    for name in names:
        for directory in directories:
            path = Path(directory or ".") / name
            if str(path) not in seen and _runnable(path):
                seen.add(str(path))
                yield str(path)


def _runnable(path: Path) -> bool:
    """Whether `path` is a file this user may run. A PATH folder this user cannot enter (another
    user's ~/.cargo/bin under `sudo -u`) is passed over, as a shell's command search does:
    os.path.isfile answers False for any OSError, where Path.is_file lets EACCES through."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_interpreter(abi: str) -> Optional[Interpreter]:
    for path in _candidates(abi):
        try:
            found = inspect_interpreter(path)
        except BadInput:
            continue  # e.g. a pyenv shim for a version that is not selected
        if found.abi == abi:
            return found
    return None


def served_interpreter(channel_abi: Optional[str], served: Sequence[str]) -> Optional[str]:
    """The path of a Python here that the index has the vendor set for (the channel's own
    first, else the newest), for a fix that runs as printed; None: there is none."""
    ordered = sorted(served, key=lambda abi: (abi != channel_abi, tuple(-int(p) for p in abi.split("."))))
    for abi in ordered:
        found = find_interpreter(abi)
        if found is not None:
            return found.path
    return None


def system_python3() -> Optional[Interpreter]:
    python3 = shutil.which("python3")
    if python3 is None:
        return None
    try:
        return inspect_interpreter(python3)
    except BadInput:
        return None


def choose_interpreter(policy: Policy, channel: str) -> Tuple[Optional[Interpreter], List[str]]:
    """The interpreter a route's policy takes, and the warnings about it; None: no such Python."""
    if policy.explicit:
        found: Optional[Interpreter] = inspect_interpreter(policy.explicit)
    else:
        found = find_interpreter(policy.abi or "") or (system_python3() if policy.python3_fallback else None)
    warnings: List[str] = []
    if found is not None and policy.warn_other_abi and found.abi != policy.abi:
        if policy.python3_fallback:
            warnings.append(f"preflight with Python {found.abi}; on the Jetson, channel {channel} "
                            f"uses Python {policy.abi}")
        else:
            warnings.append(f"--python {found.path} is Python {found.abi}, but channel {channel} wheels are built "
                            f"for Python {policy.abi}; the vendor wheels may not install or run")
    return found, warnings


# -- what an interpreter's environment has -------------------------------------------------------

def _run_stack_probe(python: str) -> Dict[str, Any]:
    completed = run(probe_command(python, "stack"), timeout=120)
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


def inspect_stack(python: str) -> "ExistingStack":
    """The torch stack `python` sees, read without importing torch."""
    # Here, not at the top: only --use-existing-torch reads a stack.
    from jetson_install.envs.stack import STACK_PACKAGES, ExistingStack, StackPackage

    data = _run_stack_probe(python)
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


def sees_parent_environment(python: str) -> bool:
    """Whether `python` belongs to a venv made with --system-site-packages."""
    config = Path(python).parent.parent / "pyvenv.cfg"
    try:
        text = config.read_text()
    except OSError:
        return False
    return re.search(r"^\s*include-system-site-packages\s*=\s*true\s*$", text, re.M | re.I) is not None


def pip_check(python: str, command: Optional[Sequence[str]] = None) -> Completed:
    """`uv pip check` on `python`'s environment; in a venv that sees its parent's packages,
    what the parent provides is judged by what the interpreter imports (uv does not see it), and
    a wheel mislabelled with an SBSA platform is judged by the interpreter's machine."""
    result = run_uv(command or uv.pip_check_argv(python), timeout=300)
    parent = sees_parent_environment(python)
    if result.ok or result.timed_out or not (parent or "built for a different platform" in result.stdout + result.stderr):
        return result
    seen = _run_stack_probe(python)
    if parent:
        result = uv.judge_unseen(result, seen["distributions"])
    if result.ok:
        return result
    return uv.judge_sbsa_tags(result, seen.get("wheel_tags", {}), seen.get("machine", ""))
