"""What one run of the doctor is asked: the environment's interpreter, what it is judged
against, and which checks. A request that exists can be run: the refusals of options that do
not combine are made when it is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.doctor.profiles import JETSON, Profile

if TYPE_CHECKING:
    from jetson_install.board.platform import Platform
    from jetson_install.catalog.catalog import Channel, VendorSource

__all__ = ["DoctorRequest"]


@dataclass(frozen=True)
class DoctorRequest:
    """``only``: the checks to run (all when empty). ``strict``: the report passes only when
    every check that applies ran and passed. ``install_command``: the command line of an install
    verifying the environment it is building; fixes then say how to run that install
    differently, since a failed one discards the environment. ``profile``: what the environment
    is expected to be (the preflight's expects CPU builds and runs nothing on a GPU).
    ``platform_options``: the doctor's --root/--l4t as given, kept in the installs its fixes
    print. ``target``: the command that made the environment; ``left_out``: the checks that are
    other targets' own, with why they do not apply here (reported as not applicable, never
    omitted). ``additions``: what --with and `add` put on the stack (their modules are imported);
    ``check_commands``: --check-command's, run in the environment."""

    python: str
    platform: Optional[Platform]
    channel: Optional[Channel]
    vendor: Optional[VendorSource] = None
    only: Tuple[str, ...] = ()
    timeout: float = 300
    strict: bool = False
    source_commit: Optional[str] = None
    install_command: Optional[str] = None
    profile: Profile = JETSON
    platform_options: Tuple[str, ...] = ()
    target: str = "obliteratus"
    left_out: Mapping[str, str] = field(default_factory=dict)
    additions: Tuple[str, ...] = ()
    check_commands: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.strict and self.only:
            raise BadInput("--strict runs every check; --check selects only some",
                           fix="drop --check (or --strict)")
        refusal = self.profile.strict_refusal() if self.strict else None
        if refusal is not None:
            raise BadInput(f"--strict is the Jetson runtime gate, and {Path(self.python).parent.parent} {refusal[0]}",
                           fix=refusal[1])
