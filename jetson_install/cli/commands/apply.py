"""A saved plan: `plan TARGET --out FILE` writes it, `jetson-install TARGET --plan FILE` (and
`add --plan FILE`) runs exactly it, or refuses in one line with the reason and the command that
makes a new plan (terraform's `plan -out` and `apply PLANFILE`:
https://developer.hashicorp.com/terraform/cli/commands/apply#automatic-plan-mode).

A plan is made whole before it is saved: its vendor set with the files' hashes (the set the
environment recorded, else the index's, as the install would take it), the interpreter that
runs it, the sources' identities. Applying it makes the plan again from the same command on
this machine, with the saved set, and runs it only where the two are the same plan: the same
jetson-install, catalog, board, environment, sources, steps and vendor files, still served.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from jetson_install import __version__
from jetson_install.base.errors import BadInput, JetsonInstallError, NotAJetson, Unsupported
from jetson_install.base.redact import MASK, redact, redact_data
from jetson_install.catalog.identity import Resolution
from jetson_install.cli.commands.add import in_folder
from jetson_install.cli.commands.version import catalog_revision
from jetson_install.envs.home import EnvironmentHome
from jetson_install.planning.rerun import Rerun
from jetson_install.planning.plan import Plan, resolved_plan
from jetson_install.planning.vendor_sources import no_longer_served
from jetson_install.planning.plan_file import PlanFile, read_plan_file, write_plan_file
from jetson_install.running.noop import sources_of
from jetson_install.running.prepared import Prepared, check, prepare

__all__ = ["SHOWN_ONLY", "saved_command", "save_plan", "read_saved", "applied_plan"]

#: What only changes how a command shows its result: never part of what a plan stands for.
SHOWN_ONLY = ("-q", "--quiet", "-v", "--verbose", "--json")
#: What decides the board: a saved plan is for one, and says so when applied on another.
_BOARD = ("jetson", "model", "module", "soc", "family", "l4t", "jetpack", "cuda", "compute_capability", "kind",
          "ubuntu", "arch")


def saved_command(plan_command: Rerun, cwd: Path) -> Tuple[str, ...]:
    """What `plan TARGET ... --out FILE` (or `plan add ...`) stands for: the same command
    without `plan`, --out, --resolve and how it shows its result, its paths made absolute
    against the folder it ran in (so it means the same wherever the plan is applied)."""
    words = Rerun(tuple(word for word in plan_command.argv if word not in (*SHOWN_ONLY, "--resolve")))
    return in_folder(words.without("--out").replaced("plan", ()).argv, cwd)


def _refuse_credentials(plan_command: Rerun) -> None:
    """A plan file keeps no secret: a URL with credentials on the command line would be lost
    from it (and an apply could not run it), so the plan is not saved."""
    for number, word in enumerate(plan_command.argv):
        if redact(word) == word:
            continue
        option = word.split("=", 1)[0] if word.startswith("--") and "=" in word else \
            plan_command.argv[number - 1] if number and plan_command.argv[number - 1].startswith("-") else word
        without = plan_command.argv[:number] + (_USERINFO.sub(r"\1", word),) + plan_command.argv[number + 1:]
        raise BadInput(f"--out: a plan file keeps no credentials, and {redact(option)} gives some in a URL",
                       fix=f"put them in ~/.netrc (machine HOST login USER password TOKEN), which jetson-install, uv "
                           f"and git read, then: {Rerun(without)}")


#: A URL's user and password (or token), as base/redact.py finds them.
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")


def _completed(plan: Plan, resolution: Optional[Resolution], companions: Sequence[str], rerun: Rerun) -> Prepared:
    """`plan` whole, as an install would run it (prepared.py): with its vendor set (the saved one
    where given, else as the install would take it) and the interpreter an install takes here,
    named in its steps. The saved plan and the one made again to apply it are both made so:
    equal inputs give the same plan."""
    if resolution is not None:
        plan = resolved_plan(plan, resolution, companions)
    return prepare(check(plan, dry_run=True, rerun=rerun), rerun, upgrade=False, read_index=False)


def save_plan(plan: Plan, plan_command: Rerun, command: Sequence[str], out: Path, resolve: bool
              ) -> Tuple[Plan, PlanFile, Tuple[str, ...]]:
    """`plan TARGET --out FILE` (typed as `plan_command`, standing for the install `command`):
    `plan` made whole and written to `out`: the install prepared as the install prepares it, its
    vendor set the one the environment recorded (no index read), else, or with `resolve`, the
    index's, read as the install reads it. Returns the warnings of the install's checks too."""
    _refuse_credentials(plan_command)
    if not plan.supported:
        raise Unsupported(f"--out {out}: no plan to save: {plan.reason}", fix=plan.remedy or None)
    prepared = prepare(check(plan, dry_run=True, rerun=plan_command), plan_command, upgrade=resolve, read_index=True)
    whole, current = prepared.plan, prepared.current
    changes, reason = prepared.would_change()
    saved = PlanFile(
        tool_version=__version__, catalog_sha256=catalog_revision().sha256 or "",
        made_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), plan_command=plan_command.argv,
        command=tuple(command), platform=whole.platform.to_json(),
        environment=str(current.path) if current is not None else None, sources=sources_of(whole).record(),
        would_change=changes, would_change_reason=reason, plan=_as_saved(whole))
    write_plan_file(out, saved)
    return whole, saved, prepared.warnings


def _as_saved(plan: Plan) -> Dict[str, Any]:
    """The plan's JSON as the file holds it (redacted, JSON's own types)."""
    saved: Dict[str, Any] = json.loads(json.dumps(redact_data(plan.to_json())))
    return saved


def read_saved(path: Path, command: str, given: Sequence[str]) -> PlanFile:
    """The plan at `path`, for `jetson-install COMMAND --plan FILE`; refused where it is for another
    command, another jetson-install or another catalog, or where options that would change it
    (`given`) are given beside it."""
    saved = read_plan_file(path)
    remake = _remake(saved)
    if given:
        raise BadInput(f"--plan runs the plan as {path} holds it, so {given[0]} cannot change it",
                       fix=f"leave {given[0]} out, or make a new plan with it: {remake}")
    planned = saved.plan_command[saved.plan_command.index("plan") + 1] if "plan" in saved.plan_command else ""
    if planned != command:
        raise BadInput(f"--plan {path}: is a plan for `jetson-install {planned}`, not `jetson-install {command}`",
                       fix=f"apply it with: jetson-install {planned} --plan {path}")
    if saved.tool_version != __version__:
        raise BadInput(f"--plan {path}: was made by jetson-install {saved.tool_version}; this is {__version__}",
                       fix=f"apply it with jetson-install {saved.tool_version}, or make a new plan: {remake}")
    catalog = catalog_revision()
    if saved.catalog_sha256 != catalog.sha256:
        where = f" ({catalog.file.value})" if catalog.file is not None else ""
        raise BadInput(f"--plan {path}: was made with another catalog (wheels-index.toml sha256 "
                       f"{saved.catalog_sha256[:12]}; this one's is {catalog.revision}{where})",
                       fix=f"make a new plan with this catalog: {remake}")
    if any(MASK in word for word in saved.command):
        raise BadInput(f"--plan {path}: its command gave credentials in a URL, which a plan file does not keep",
                       fix=f"put them in ~/.netrc, then make a new plan: {remake}")
    return saved


def _remake(saved: PlanFile) -> str:
    """The command that makes a new plan in place of `saved`: the one that made it."""
    return str(Rerun(saved.plan_command))


def applied_plan(saved: PlanFile, path: Path, make: Callable[[], Plan]) -> Plan:
    """The plan to run for `saved` (read from `path`): the one `make` makes again here from its
    command, with its vendor set, once it is the same plan; else BadInput with the reason and
    the command that makes a new one."""
    remake = _remake(saved)

    def refuse(why: str) -> BadInput:
        return BadInput(f"--plan {path}: {why}", fix=f"make a new plan: {remake}")

    try:
        made = make()
    except NotAJetson as exc:
        raise refuse(f"was made for another board ({_shown(_board(saved.platform))}; here: {exc.message})") from None
    if not made.supported:
        raise refuse(f"the platform here is not supported: {made.reason}")
    board, here = _board(saved.platform), _board(made.platform.to_json())
    if board != here:
        raise refuse(f"was made for another board ({_shown(board)}; this is {_shown(here)})")
    current = EnvironmentHome(Path(made.venv)).current()
    if (str(current) if current is not None else None) != saved.environment:
        raise refuse(f"the environment at {made.venv} changed since the plan was made "
                     f"({_environment(saved.environment)} then, {_environment(current)} now)")
    data = saved.plan
    try:
        resolution = Resolution.from_json(data["resolution"]) if data.get("resolution") else None
    except (KeyError, TypeError, ValueError):
        raise refuse("its vendor set is not what a plan file holds") from None
    companions = [str(line) for line in data.get("companions", ())]
    try:
        prepared = _completed(made, resolution, companions, Rerun(saved.command))  # the install says its warnings itself
    except JetsonInstallError as exc:
        raise refuse(f"it cannot run here: {exc.message}") from None
    whole = prepared.plan
    difference = _difference(data, _as_saved(whole))
    if difference:
        raise refuse(difference)
    if not sources_of(whole).unchanged_since(saved.sources):
        raise refuse("its source changed since the plan was made (a branch moved, or a folder was edited)")
    if resolution is not None and whole.vendor is not None and prepared.would_change()[0]:
        gone = _not_served(whole, resolution)
        if gone:
            raise refuse(gone)
    return whole


def _board(platform: Mapping[str, Any]) -> Dict[str, Any]:
    return {key: platform.get(key) for key in _BOARD}


def _shown(board: Mapping[str, Any]) -> str:
    if not board.get("jetson"):
        return "no Jetson"
    return ", ".join(f"{key} {board[key]}" for key in ("model", "l4t", "soc", "cuda") if board.get(key))


def _environment(path: Any) -> str:
    return str(path) if path is not None else "none"


#: What a difference in a key of the plan's JSON means, in the user's words.
_MEANING = {
    "venv": "it installs elsewhere",
    "interpreter": "another Python would run it",
    "interpreter_python": "another Python would run it",
    "python": "another Python would run it",
    "channel": "another channel serves this board",
    "vendor_index": "its vendor index differs",
    "vendor_mirrors": "its mirrors differ",
    "default_index": "its default index differs",
    "requirement": "its source differs",
    "additions": "what it adds differs",
    "steps": "its steps differ",
}


def _difference(saved: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """How the plan made now differs from the saved one, first difference first; "" when it does not."""
    for key in sorted(set(saved) | set(now), key=lambda key: (key != "steps", key)):
        if saved.get(key) == now.get(key):
            continue
        meaning = _MEANING.get(key, f"its {key} differs")
        if key == "steps":
            return f"the plan made now differs: {meaning} ({_step_difference(saved.get(key), now.get(key))})"
        before, after = saved.get(key), now.get(key)
        if all(isinstance(value, (str, int, float, type(None))) for value in (before, after)):
            return f"the plan made now differs: {meaning} ({before} then, {after} now)"
        return f"the plan made now differs: {meaning}"
    return ""


def _step_difference(before: Any, after: Any) -> str:
    steps = [list(steps) if isinstance(steps, list) else [] for steps in (before, after)]
    for then, now in zip(*steps):
        if then != now:
            return f"step {now.get('id') if isinstance(now, dict) else '?'}"
    return f"{len(steps[0])} steps then, {len(steps[1])} now"


def _not_served(plan: Plan, resolution: Resolution) -> str:
    """Why the saved vendor set can no longer be had where the plan takes it from, or ""."""
    assert plan.vendor is not None
    missing = no_longer_served(plan.vendor, plan.vendor_index, resolution)
    if not missing:
        return ""
    return (f"its vendor set {resolution.set_name} is no longer served by {resolution.source} "
            f"({', '.join(missing)} not listed with the recorded sha256)")
