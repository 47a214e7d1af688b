"""The environment's constraints kept in force after jetson-install exits: pip.conf for pip, and the
activate scripts (bash and fish) exporting what uv and Triton read, restored on deactivate."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

from jetson_install.base.layout import ACTIVATE_FILE, CONSTRAINTS_FILE, EXCLUDES_FILE, STATE_DIR
from jetson_install.base.outputs import write_own

__all__ = ["protect", "activate_variables", "activate_command"]


_ACTIVATE_MARK = "# jetson-install:"

_BASH_EXPORT = """
# jetson-install: {why}.
if [ -z "${{_JETSON_INSTALL_{var}_SET:-}}" ] ; then
    _JETSON_INSTALL_OLD_{var}="${{{var}:-}}"
    _JETSON_INSTALL_{var}_SET=1
fi
{var}="{value}"
export {var}
"""

_BASH_RESTORE = """    # jetson-install: restore the {var} from before activation.
    if [ -n "${{_JETSON_INSTALL_{var}_SET:-}}" ] ; then
        if [ -n "${{_JETSON_INSTALL_OLD_{var}:-}}" ] ; then
            {var}="$_JETSON_INSTALL_OLD_{var}"
            export {var}
        else
            unset {var}
        fi
        unset _JETSON_INSTALL_OLD_{var} _JETSON_INSTALL_{var}_SET
    fi
"""

_FISH_EXPORT = """
# jetson-install: {why}.
set -gx {var} "{value}"
"""

_FISH_RESTORE = """    # jetson-install: drop {var} with the environment.
    set -e {var}
"""



#: Why the activate scripts export each variable, as their comment says it.
_WHY = {
    "UV_CONSTRAINT": "uv ignores pip.conf, so it gets the vendor constraints from UV_CONSTRAINT",
    "UV_EXCLUDE": "uv ignores pip.conf, so it leaves the kept stack alone through UV_EXCLUDE",
    "TRITON_PTXAS_PATH": "Triton's own ptxas cannot assemble for this GPU; TRITON_PTXAS_PATH names the board's",
    "TRITON_PTXAS_BLACKWELL_PATH": "Triton's own ptxas-blackwell cannot assemble for this GPU; "
                                   "TRITON_PTXAS_BLACKWELL_PATH names the board's",
}


def protect(environment: Path, excludes: Sequence[str] = (), triton: Optional[Mapping[str, str]] = None) -> Path:
    """Make the environment's constraints file outlive jetson-install.

    pip reads <prefix>/pip.conf (its "site" configuration) for every pip run
    inside the environment; uv reads no pip configuration at all
    (https://docs.astral.sh/uv/pip/compatibility/), so the activate scripts export UV_CONSTRAINT.
    `excludes` names packages the environment takes from its parent interpreter
    (--use-existing-torch): uv does not see them there (astral-sh/uv#17215), so a
    constraint alone would let it put a same-version build into the environment;
    UV_EXCLUDE keeps them out of every uv resolution instead.
    `triton`: TRITON_PTXAS_PATH or TRITON_PTXAS_BLACKWELL_PATH and the board's assembler, where
    Triton's own cannot assemble for the GPU (Triton reads them: triton/knobs.py).
    """
    state = environment / STATE_DIR
    constraints_path = state / CONSTRAINTS_FILE
    # Both pip.conf and UV_CONSTRAINT split their value on whitespace; a file:// URI
    # survives a path with spaces in it (verified with uv 0.13.9 and pip 23.2).
    uri = constraints_path.as_uri()
    write_own(environment / "pip.conf", "# Written by jetson-install: keeps the JetPack torch (and bitsandbytes) in "
              f"place.\n[global]\nconstraint = {uri}\n")
    variables = {"UV_CONSTRAINT": uri}
    if excludes:
        write_own(state / EXCLUDES_FILE, "\n".join(excludes) + "\n")
        variables["UV_EXCLUDE"] = (state / EXCLUDES_FILE).as_uri()
    variables.update(triton or {})
    write_own(state / ACTIVATE_FILE, json.dumps(variables, indent=2, sort_keys=True) + "\n")
    _patch_activate(environment / "bin" / "activate", _BASH_EXPORT, _BASH_RESTORE, "deactivate () {", variables)
    _patch_activate(environment / "bin" / "activate.fish", _FISH_EXPORT, _FISH_RESTORE, "function deactivate", variables)
    return constraints_path


def activate_variables(environment: Path) -> Dict[str, str]:
    """What the environment's activate scripts export, as protect recorded it (none where it did not)."""
    try:
        recorded = json.loads((environment / STATE_DIR / ACTIVATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {str(name): value for name, value in recorded.items() if isinstance(value, str)}


def _patch_activate(script: Path, export: str, restore: str, deactivate_line: str, variables: Dict[str, str]) -> None:
    if not script.is_file():
        return
    text = script.read_text()
    if _ACTIVATE_MARK in text:
        return
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.strip().startswith(deactivate_line):
            lines.insert(number + 1, "".join(restore.format(var=var) for var in variables))
            break
    exports = "".join(export.format(var=var, value=value, why=_WHY[var]) for var, value in variables.items())
    script.write_text("".join(lines) + exports)


def activate_command(venv: str) -> str:
    """The line that activates the environment at `venv`, quoted for a shell."""
    return f"source {shlex.quote(venv + '/bin/activate')}"
