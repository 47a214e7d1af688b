"""One prepared install: what an install of a plan will do, decided once before anything
changes, from the plan (the platform, the catalog, the options) and, where asked, the vendor
index. The install, `--upgrade`, the dry run and a saved plan (`plan --out`) take it from here,
and `plan --resolve` the same interpreter and the same read of the index:

- the interpreter, chosen in one place (`interpreter_for`: the route's policy);
- the checks an install makes before its first step (DIR usable, the build tools named);
- the environment at DIR as it was made (noop.Current), read once;
- the vendor set, and where it comes from: the route's own files (a lock), a saved plan's, the
  set the environment recorded while the vendor policy is unchanged (noop.known_set: no index
  read; `--upgrade` reads it again), else the index's: read here where asked (a dry run with
  `--upgrade`, `plan --out`), else by the install itself, on a thread while it makes the
  environment.

Whether the environment already satisfies the prepared install stays noop.py's one decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from jetson_install.base.errors import IndexUnreachable, JetsonInstallError, StepFailed
from jetson_install.board.platform_data import ubuntu_glibc
from jetson_install.catalog.identity import NoBuildForPython, NothingInPolicy, Resolution
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.interpreters import Interpreter, choose_interpreter
from jetson_install.planning.plan import Plan, resolved_plan, with_interpreter
from jetson_install.planning.rerun import Rerun
from jetson_install.running.noop import Current, decide, known_set, sources_of

__all__ = ["interpreter_for", "Checked", "check", "Prepared", "prepare", "read_vendor_set", "vendor_step_failure",
           "set_line"]


def interpreter_for(plan: Plan) -> Tuple[Optional[Interpreter], List[str]]:
    """The interpreter an install of `plan` takes (its route's policy), and the warnings about
    it; None: no such Python here. The one place it is chosen."""
    return choose_interpreter(plan.route.interpreter_policy(plan), plan.channel.id if plan.channel else "?")


@dataclass(frozen=True)
class Checked:
    """What the checks before an install's first step found: the plan names the interpreter."""

    home: EnvironmentHome
    interpreter: Interpreter
    warnings: Tuple[str, ...]
    plan: Plan


def check(plan: Plan, dry_run: bool, rerun: Rerun) -> Checked:
    """Every check an install makes before its first step, made by a dry run too (which leaves
    everything as it was). Raises BadInput (a bad location or --python) or StepFailed (no
    system Python of the channel's version, no build tools)."""
    home = EnvironmentHome(Path(plan.venv))
    home.check_usable(lambda venv: str(rerun if venv is None else rerun.with_option("--venv", venv)), create=not dry_run)
    interpreter, warnings = interpreter_for(plan)
    if interpreter is None:
        policy = plan.route.interpreter_policy(plan)
        wanted = "python3" if policy.python3_fallback else f"Python {policy.abi}"
        package = "python3 python3-venv" if policy.python3_fallback else f"python{policy.abi} python{policy.abi}-venv"
        raise StepFailed("interpreter", f"no {wanted} found on this system (searched /usr/bin, /usr/local/bin, PATH)",
                         f"sudo apt-get install {package}, or pass --python PATH")
    if plan.route.planned_build() is not None:
        # Missing build tools are named, with their apt packages, before anything starts.
        from jetson_install.planning.bitsandbytes_source import CUDA_HOME
        from jetson_install.running.bitsandbytes_build import find_toolchain

        find_toolchain(CUDA_HOME, plan.platform.cuda)
    return Checked(home, interpreter, tuple(warnings), with_interpreter(plan, interpreter.path, interpreter.abi))


@dataclass(frozen=True)
class Prepared:
    """An install decided before it changes anything: the plan whole (the interpreter named in
    its steps; its vendor set, where one is known or was read), the environment at DIR as it was
    made, the warnings of the checks, and how the vendor set was had (`note`, as the install
    says it). `index_unread`: the index decides the set, and the install reads it itself."""

    plan: Plan
    interpreter: Interpreter
    current: Optional[Current]
    warnings: Tuple[str, ...] = ()
    note: str = ""
    index_unread: bool = False

    def would_change(self) -> Tuple[bool, str]:
        """Whether the install would change the environment, and why: noop.decide on the set
        the install takes (where the index decides and was not read, the environment was made
        under another vendor policy, or none recorded its set: it changes). Reads only."""
        current = self.current
        if current is None:
            return True, f"no environment at {self.plan.venv} yet"
        if self.index_unread:
            return True, f"{current.path} was made under another vendor policy (sets, preferred set or source)"
        decision = decide(self.plan, current, self.interpreter, sources_of(self.plan))
        return decision.changes, decision.reason


def prepare(checked: Checked, rerun: Rerun, upgrade: bool, read_index: bool) -> Prepared:
    """The install `checked` will run, on the environment at DIR as it is now (the install holds
    DIR's lock while it asks): the vendor set known without an index, else, with `read_index`,
    the one the index gives (read_vendor_set: what fails to read it raises, with the vendor
    step's fixes; the install reports it as that step's failure, vendor_step_failure), else
    left to the install."""
    existing = checked.home.current()
    current = Current.read(existing) if existing is not None else None
    plan = checked.plan
    known = known_set(plan, current, upgrade)
    if known is not None:
        return Prepared(known.plan, checked.interpreter, current, checked.warnings, known.note)
    if not read_index:
        return Prepared(plan, checked.interpreter, current, checked.warnings, index_unread=True)
    resolution = read_vendor_set(plan, checked.interpreter.abi, rerun)
    return Prepared(resolved_plan(plan, resolution), checked.interpreter, current, checked.warnings, set_line(resolution))


def read_vendor_set(plan: Plan, python: str, rerun: Rerun) -> Resolution:
    """The set the vendor index (then its mirrors) resolves to for CPython `python` ("3.11": the
    interpreter's own decides the files), as every reader of it reads it: the install, the
    prepared dry run, `plan --resolve` and `lock`. An index that does not answer, or serves no
    set for it, raises with the vendor step's fix (the channel's fallback, another vendor index,
    a mirror, another Python)."""
    assert plan.vendor is not None
    # Imported here: a no-op re-run, which never reads an index, never loads the listings' code
    # nor the fixes for a failed read.
    from jetson_install.planning import vendor_sources
    from jetson_install.planning.index_fixes import index_failure_fix

    try:
        return vendor_sources.resolve(plan.vendor, plan.vendor_index, python, ubuntu_glibc(plan.platform.ubuntu),
                                      plan.settings.allow_insecure)
    except IndexUnreachable as exc:
        raise IndexUnreachable(exc.message, fix=index_failure_fix(exc, plan, rerun)) from None
    except NoBuildForPython as exc:
        raise NoBuildForPython(exc.message, index_failure_fix(exc, plan, rerun), exc.python, exc.served) from None
    except NothingInPolicy as exc:
        raise NothingInPolicy(exc.message, fix=index_failure_fix(exc, plan, rerun)) from None


def vendor_step_failure(exc: JetsonInstallError) -> StepFailed:
    """A failed read of the vendor index, as the install reports it: the vendor step's failure."""
    return StepFailed("vendor", f"step 'vendor' failed: {exc.message}", exc.fix)


def set_line(resolution: Resolution) -> str:
    """How the install says the vendor set the index gave."""
    return f"vendor set: {resolution.set_name} from {resolution.source}: {resolution.reason}"
