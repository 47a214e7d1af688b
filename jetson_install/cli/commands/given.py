"""What the command line gave a command: option values with where each came from, and the
checks on a value as typed that every command taking it makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.base.text import control_character, printable
from jetson_install.base.sourced import Sourced

__all__ = ["PlatformOptions", "InstallOptions", "venv_path", "given_platform"]


@dataclass(frozen=True)
class PlatformOptions:
    """Which board a command is about: --root, --l4t and --soc, each with where its value came from."""

    root: Sourced[Optional[str]]
    l4t: Sourced[Optional[str]]
    soc: Sourced[Optional[str]] = field(default_factory=lambda: Sourced(None, "--soc"))


@dataclass(frozen=True)
class InstallOptions:
    """What a target's command (`obliteratus`, `torch`), `plan TARGET` and `lock` were given."""

    target: str
    platform: PlatformOptions
    vendor_index: Sourced[Optional[str]]
    default_index: Sourced[Optional[str]]
    allow_insecure_index: bool = False
    venv: Optional[str] = None
    python: Optional[str] = None
    source: Optional[str] = None
    ref: Optional[str] = None
    verify: bool = True
    fallback: bool = False
    use_existing_torch: bool = False
    bitsandbytes: Optional[str] = None
    preflight: bool = False
    cpu_index: Optional[str] = None
    added: Tuple[str, ...] = ()  # --with
    mirrors: Tuple[str, ...] = ()  # --mirror
    check_commands: Tuple[str, ...] = ()  # --check-command


def venv_path(value: str) -> Path:
    """--venv as typed: an empty value or a control character (a newline from a script) is
    refused, never read as the default location or written into a path."""
    if not value.strip():
        raise BadInput("--venv is empty", fix="give the environment's location, e.g. --venv ~/obliteratus, or drop --venv")
    bad = control_character(value)
    if bad is not None:
        raise BadInput(f"--venv '{printable(value)}' contains the control character '{bad}'",
                       fix="give a location without control characters (a newline often comes from a script's variable)")
    return Path(value).expanduser()


def given_platform(options: PlatformOptions) -> Tuple[str, ...]:
    """The --root and --l4t the user typed, for the commands a fix prints."""
    words: List[str] = []
    for flag, given in (("--root", options.root), ("--l4t", options.l4t)):
        if given.value is not None and given.source == flag:
            words += [flag, given.value]
    return tuple(words)
