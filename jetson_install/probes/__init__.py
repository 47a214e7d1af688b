"""Standalone probe scripts run by the target interpreter; they never import jetson_install.

This module is the tool's side only: how a probe is started (the doctor starts its own, the
ones that decide `cuda` twice: sealed, and as the user's python starts once every sealed one
has ended; the verify step's plan lists the same command lines, the protect step runs the
assembler probe, and the stack probe reads an interpreter's packages without importing torch).
"""

from __future__ import annotations

import shlex
from pathlib import Path, PurePosixPath
from typing import Optional, Sequence, Tuple

from jetson_install.base.git_urls import requirement_for_a_probe

__all__ = ["SCRIPTS", "BOARD_PTXAS", "PYCACHE", "ASSEMBLER_WORK", "probe_command", "sealed_command", "started_command",
           "integrity_command", "additions_command", "check_command", "assembler_command"]

#: Each probe by name, and its script beside this file.
SCRIPTS = {"torch": "torch_probe.py", "bitsandbytes": "bnb_probe.py", "stack": "stack_probe.py",
           "integrity": "integrity_probe.py", "additions": "additions_probe.py", "assembler": "assembler_probe.py"}
#: What starts a probe that decides `cuda`, sealed or as started, and accounts for its files.
LAUNCHER = "launch.py"
#: Where a sealed probe's command names its pycache folder: a fresh, empty one each run.
PYCACHE = "<pycache>"
#: The assembler of the board's own CUDA, under its root (JetPack installs CUDA there).
BOARD_PTXAS = "usr/local/cuda/bin/ptxas"
#: The prefix of the work folder (base/work_folders.py) that the tool runs the assembler probe
#: in as its temporary folder (TMPDIR: the probe's PTX and cubin, what ptxas writes): held while
#: the probe runs, so what a killed doctor or install left there goes with the next run's.
ASSEMBLER_WORK = "jetson-install-ptx-"


def probe_command(python: str, probe: str) -> Tuple[str, ...]:
    """The command line that runs `probe` in the environment of `python`."""
    return (python, str(Path(__file__).parent / SCRIPTS[probe]))


def sealed_command(python: str, probe: str, pycache: str = PYCACHE) -> Tuple[str, ...]:
    """`probe` sealed: isolated (-I: no PYTHON* variable, no user site), without `site` (-S: no
    .pth file, no sitecustomize), reading no __pycache__ of the environment (`pycache`, a
    fresh empty folder, PYCACHE in a plan); the launcher puts the environment's site folders
    on the path from its layout, and accounts for every file that ran."""
    here = Path(__file__).parent
    return (python, "-I", "-S", "-X", f"pycache_prefix={pycache}", str(here / LAUNCHER), "--sealed",
            str(here / SCRIPTS[probe]))


def started_command(python: str, probe: str, target: bool = True) -> Tuple[str, ...]:
    """`probe` as the user's `python` starts (site on, every start-up hook run), through the
    same launcher, which accounts for what ran. `target`: the torch probe reads OBLITERATUS and
    transformers too (a check reads them)."""
    here = Path(__file__).parent
    return (python, str(here / LAUNCHER), str(here / SCRIPTS[probe]),
            *(() if target or probe != "torch" else ("--no-target",)))


def integrity_command(python: str, record: Optional[str], hash_files: bool, manifest: Optional[str] = None,
                      ran: bool = False) -> Tuple[str, ...]:
    """The integrity probe in the environment of `python`: isolated (-I) and without `site`
    (-S), so no start-up hook of the environment runs in the process that lists them;
    `record`: the environment's vendor.json, naming its vendor builds and companions;
    `hash_files`: compare every vendor file's digest, not only its size; `manifest`: the
    environment's vendor-files.json (the wheels' own hashes), where it may be; `ran`: the
    sealed probes' accounts of what ran come on its stdin, to be judged file by file."""
    return (python, "-I", "-S", str(Path(__file__).parent / SCRIPTS["integrity"]),
            *(("--hash",) if hash_files else ()), *(("--record", record) if record else ()),
            *(("--manifest", manifest) if manifest else ()), *(("--ran", "-") if ran else ()))


def additions_command(python: str, requirements: Sequence[str]) -> Tuple[str, ...]:
    """The additions probe in the environment of `python`: each of `requirements` (what --with
    and `add` gave uv) found and its top-level modules imported; given without the credentials
    of any URL, which it fetches nothing with."""
    return (*probe_command(python, "additions"), *(requirement_for_a_probe(line) for line in requirements))


def check_command(python: str, command: str) -> Tuple[str, ...]:
    """A --check-command as it runs in the environment of `python`: its words split as a shell
    would (no shell started), a first word that is a bare name the environment's own program
    (`python`, a console script such as `yolo`), a path as it is."""
    program, *rest = shlex.split(command)
    if "/" not in program:
        program = str(PurePosixPath(python).parent / program)
    return (program, *rest)


def assembler_command(python: str, compute_capability: str, root: Optional[str]) -> Tuple[str, ...]:
    """The assembler probe in the environment of `python` for a GPU of `compute_capability`
    ("11.0"), trying the board's own ptxas under `root` too where a board is named."""
    digits = compute_capability.replace(".", "")
    candidate = ("--candidate", str(Path(root) / BOARD_PTXAS)) if root else ()
    return (python, str(Path(__file__).parent / SCRIPTS["assembler"]), "--capability", digits, *candidate)
