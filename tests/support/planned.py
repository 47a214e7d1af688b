"""What the install ran, against what its plan said it would run.

An install's JSON result carries the plan it carried out (`plan_steps`: every command, with
the placeholder DIR.d/<new> for the environment it made) and the log it wrote (every command
line the runner started). The two must be the same list: the plan is the program.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jetson_install.tools import runner
from jetson_install.probes import PYCACHE, SCRIPTS

__all__ = ["host_programs", "planned_commands", "planned_probes", "logged_commands", "planned_downloads",
           "logged_downloads", "assert_ran_as_planned", "assert_vendor_set_pinned"]


#: What a source build's steps name by placeholder: its private work folder and its wheel.
_BUILD_PLACEHOLDERS = ("<build>", "<wheel>")


def host_programs() -> Dict[str, str]:
    """How a plan names a program, and the binary an install on this machine runs for it."""
    return {"uv": runner.uv_binary(), "jetson-install": f"{sys.executable} -m jetson_install",
            "cmake": shutil.which("cmake") or "cmake"}


def planned_commands(result: Dict[str, Any], programs: Optional[Mapping[str, str]] = None) -> List[str]:
    """The commands of the plan the install carried out, as they ran (the programs it names
    put in; the new environment's own python, the smoke command's, left out)."""
    placeholder = f"{result['venv']}.d/<new>"
    programs = programs or host_programs()
    commands = []
    for step in result["plan_steps"]:
        for command in step["commands"]:
            if command[0] not in programs:
                continue
            parts = [programs[command[0]]] + [part.replace(placeholder, result["environment"]) for part in command[1:]]
            commands.append(" ".join(parts))
    return commands


def probe_commands(commands: List[str]) -> List[str]:
    """The probes among command lines (the script is a word of them: the integrity and
    assembler probes' arguments follow it, a sealed probe's launcher comes before it), sorted:
    those of one step run side by side. A sealed probe's fresh pycache folder, chosen when it
    starts, is written as the plan writes it."""
    scripts = tuple(f"/probes/{SCRIPTS[probe]}" for probe in ("torch", "bitsandbytes", "integrity", "assembler"))
    return sorted(re.sub(r"pycache_prefix=\S+", f"pycache_prefix={PYCACHE}", command) for command in commands
                  if any(word.endswith(scripts) for word in command.split()))


def planned_probes(result: Dict[str, Any]) -> List[str]:
    """The probes the plan lists (the verify step's, and the protect step's assembler probe), as they ran."""
    placeholder = f"{result['venv']}.d/<new>"
    return probe_commands([" ".join(part.replace(placeholder, result["environment"]) for part in command)
                           for step in result["plan_steps"] for command in step["commands"]])


def logged_commands(log: Path, programs: Optional[Mapping[str, str]] = None,
                    started: Optional[Tuple[str, ...]] = None) -> List[str]:
    """The command lines of those programs (or those `started` with these words) the install's
    log says it started, in order."""
    started = started or tuple((programs or host_programs()).values())
    found = []
    for line in log.read_text().splitlines():
        _, marker, command = line.partition(" DEBUG run: ")
        if marker and command.startswith(started):
            found.append(command)
    return found


def planned_downloads(result: Dict[str, Any]) -> Tuple[List[str], bool]:
    """The files the plan lists for its steps to download themselves, in order; and whether a
    step also has uv resolve files it then downloads (which the plan cannot list before)."""
    steps = [step for step in result["plan_steps"] if step.get("downloads")
             or (step["kind"] == "fetch" and step["commands"])]
    return ([download["url"] for step in steps for download in step.get("downloads", [])],
            any(step["commands"] for step in steps))


def logged_downloads(log: Path) -> List[str]:
    """The files the install's log says it fetched (downloaded, or read from the cache or where they are)."""
    found = []
    for line in log.read_text().splitlines():
        _, marker, rest = line.partition(" DEBUG fetch: ")
        if marker:
            found.append(rest.split(" (sha256 ", 1)[0])
    return found


def _same(planned: str, ran: str) -> bool:
    """Equal, where a source build's placeholders stand for the paths it chose at run time."""
    pattern = re.escape(planned)
    for placeholder in _BUILD_PLACEHOLDERS:
        pattern = pattern.replace(re.escape(placeholder), r"\S+")
    return re.fullmatch(pattern, ran) is not None


def assert_ran_as_planned(result: Dict[str, Any], programs: Optional[Mapping[str, str]] = None,
                          log: Optional[Path] = None) -> None:
    """`log`: where the log is read from here (inside a root the install ran in)."""
    assert result["status"] == "installed", result.get("error")
    planned = planned_commands(result, programs)
    logged = logged_commands(log or Path(result["log"]), programs)
    same = len(planned) == len(logged) and all(_same(p, r) for p, r in zip(planned, logged))
    assert planned and same, "\nplanned:\n  " + "\n  ".join(planned) + "\nran:\n  " + "\n  ".join(logged)
    # The doctor runs in the install's process: the probes it started are the ones the plan lists.
    planned = planned_probes(result)
    logged = probe_commands(logged_commands(log or Path(result["log"]), started=(result["environment"] + "/",)))
    assert planned == logged, "\nplanned:\n  " + "\n  ".join(planned) + "\nran:\n  " + "\n  ".join(logged)
    # The files the tool fetches itself: those the plan lists, in its order; more only where uv
    # resolved them in the same step.
    planned, resolved_by_uv = planned_downloads(result)
    fetched = logged_downloads(log or Path(result["log"]))
    remaining = iter(fetched)
    in_order = all(any(url == ran for ran in remaining) for url in planned)
    assert in_order and (resolved_by_uv or fetched == planned), \
        "\nplanned downloads:\n  " + "\n  ".join(planned) + "\nfetched:\n  " + "\n  ".join(fetched)


def assert_vendor_set_pinned(environment: Path, packages: List[str]) -> Dict[str, str]:
    """Every vendor package of the set is pinned to one exact version in the environment's
    constraints (what pip.conf and UV_CONSTRAINT keep in force); returns the pins."""
    lines = (environment / "jetson-install" / "constraints.txt").read_text().split()
    pins = dict(line.split("==", 1) for line in lines if "==" in line)
    missing = [name for name in packages if name not in pins]
    assert not missing, f"not pinned in constraints.txt: {missing} ({lines})"
    return {name: pins[name] for name in packages}
