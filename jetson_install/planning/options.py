"""What a plan is made from besides the board and the catalog: the target, the index settings,
the environment's place and the user's choices. A value that exists has options that combine:
the refusals of combined options are made when it is built, before the planner runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.catalog.settings import IndexSettings

if TYPE_CHECKING:
    from jetson_install.envs.stack import ExistingStack

__all__ = ["PlanOptions"]


@dataclass(frozen=True)
class PlanOptions:
    """`existing`: the interpreter's stack to keep (--use-existing-torch); `bitsandbytes` is
    --bitsandbytes' value (build, build=VERSION or build=PATH), if given; `preflight` puts CPU
    builds of torch (from `cpu_index`, else the default index) in place of the vendor builds;
    `added`: the requirements --with puts on the stack beside the target; `check_commands`:
    --check-command's, run in the new environment by the check step and the doctor."""

    target: str
    settings: IndexSettings
    venv: Path
    interpreter: Optional[str] = None
    source: Optional[str] = None
    ref: Optional[str] = None
    verify: bool = True
    fallback: bool = False
    existing: Optional[ExistingStack] = None
    bitsandbytes: Optional[str] = None
    preflight: bool = False
    cpu_index: Optional[str] = None
    added: Tuple[str, ...] = ()
    check_commands: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        building = self.build_choice() is not None  # parsed first: a malformed value is named as such
        if building and self.existing is not None:
            raise BadInput("--bitsandbytes build and --use-existing-torch were both given",
                           fix="keep the image's stack as it is, or build bitsandbytes for a downloaded torch: use one")
        if self.preflight and (self.existing is not None or building):
            other = "--use-existing-torch" if self.existing is not None else "--bitsandbytes build"
            raise BadInput(f"--preflight and {other} were both given",
                           fix=f"use one: --preflight installs CPU torch and needs no GPU build; drop {other}")
        if self.cpu_index is not None and not self.preflight:
            raise BadInput("--cpu-index is only for --preflight", fix="add --preflight, or drop --cpu-index")
        if self.preflight and self.fallback:
            raise BadInput("--preflight and --vendor-fallback were both given: a preflight takes CPU builds, not a "
                           "vendor source", fix="drop --vendor-fallback (an index of CPU builds: --cpu-index URL)")
        if self.preflight and self.settings.vendor_index.source == "--vendor-index":
            raise BadInput("--preflight and --vendor-index were both given: a preflight takes CPU builds, not the "
                           "vendor builds", fix="drop --vendor-index (an index of CPU builds: --cpu-index URL)")

    def build_choice(self) -> Optional[str]:
        """None: no bitsandbytes build; "": the default release's; else build=VALUE's value."""
        if self.bitsandbytes is None:
            return None
        # Here, not at the top: only --bitsandbytes build needs the build's modules (git, the releases).
        from jetson_install.planning.bitsandbytes_source import parse_choice

        return parse_choice(self.bitsandbytes) or ""
