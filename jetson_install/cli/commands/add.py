"""`add`: the command that made an environment, as it recorded it, with new requirements added,
its relative paths made absolute against the folder it ran in; the install then runs it."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement

from jetson_install.base.errors import BadInput
from jetson_install.base.redact import MASK
from jetson_install.board.samples import PREFIX as SAMPLE_PREFIX
from jetson_install.catalog.catalog import load_catalog
from jetson_install.cli.commands.given import venv_path
from jetson_install.cli.commands.lifecycle import default_environment
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.recorded import recorded_additions, recorded_plan
from jetson_install.envs.record import read_record
from jetson_install.planning.rerun import Rerun
from jetson_install.planning.planner import additions
from jetson_install.running.install import InstallResult

__all__ = ["Addition", "addition", "in_folder"]

#: What `add` leaves out of the recorded command: how it was shown and confirmed (add's own
#: flags say that now), and --upgrade (an addition keeps the recorded vendor set).
_NOT_REPLAYED = ("-q", "--quiet", "-v", "--verbose", "--json", "--yes", "-y", "--dry-run", "--upgrade")


@dataclass(frozen=True)
class Addition:
    """What `add` runs: the command that made the environment at `link` again, with its recorded
    additions (kept by the install itself), the new ones as --with, at the same DIR."""

    link: Path
    target: str
    made_with: str  # the recorded command, as it was run
    command: Rerun  # what runs now, its paths absolute
    kept: Tuple[str, ...]
    new: Tuple[str, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"venv": str(self.link), "target": self.target, "requirements": list(self.new),
                "kept": list(self.kept), "made_with": self.made_with, "command": str(self.command)}

    def result(self, result: InstallResult) -> InstallResult:
        """The install's result, with a conflict's fix said as `add` takes it: a release of the
        addition that accepts the vendor pins (which never change)."""
        if result.failed_step != "target" or "unsatisfiable" not in result.message:
            return result
        plan = result.resolved
        pins = ", ".join(f"{name}=={version}" for name, version in (plan.pins if plan else {}).items()
                         if name == "torch")
        name = _requirement_name(self.new[0]) if len(self.new) == 1 else "REQUIREMENT"
        pinned = (plan.pins if plan else {}).get(name.lower())
        if pinned is not None:
            # `NAME<VERSION` would ask for another vendor build, which no `add` can give.
            return replace(result, fix=f"{name} is the channel's vendor build ({name}=={pinned}), which never "
                                       f"changes: add what needs it without {name}; see what {self.link} has: "
                                       f"{Rerun(('list',))}")
        command = Rerun(("add", "--venv", str(self.link), f"{name}<VERSION"))
        return replace(result, fix=f"the vendor pins ({pins or 'torch'}) never change: add a release of {name} that "
                                   f"accepts them, where one exists: {command}")


def _requirement_name(requirement: str) -> str:
    """The distribution a requirement names, or the requirement itself (a URL, a folder)."""
    try:
        return Requirement(requirement).name
    except InvalidRequirement:
        return requirement


def addition(venv: Optional[str], requirements: Sequence[str], flags: Sequence[str], rerun: Rerun) -> Addition:
    """`add`: the recorded command of the environment at --venv (else the default one that
    exists), with `requirements` added; refused, in one line with the fix, where there is none."""
    if not requirements:
        raise BadInput("add: no REQUIREMENT given", fix=f"name what to add, e.g.: {Rerun(rerun.argv + ('transformers',))}")
    new = additions(requirements, given_as="jetson-install add")
    with_new = tuple(word for requirement in new for word in ("--with", requirement))
    if venv is None:
        link = default_environment("add")[0]
        if EnvironmentHome(link).current() is None:
            raise BadInput("add: no environment made by jetson-install at the default locations",
                           fix=f"make one with the additions: {Rerun(('torch', *with_new))}, or name it: "
                               f"{Rerun(rerun.argv[:1] + ('--venv', 'DIR') + rerun.argv[1:])}")
    else:
        link = venv_path(venv).absolute()
    made = _made_with(link, with_new)
    current = EnvironmentHome(link).current()
    assert current is not None  # _made_with refused it otherwise
    kept = recorded_additions(current)
    cwd = (recorded_plan(current) or {}).get("cwd")
    replayed = Rerun(made).without("--venv").argv
    if isinstance(cwd, str):
        replayed = in_folder(replayed, Path(cwd))
    if any(word in ("--lock", "--wheelhouse") or word.startswith(("--lock=", "--wheelhouse=")) for word in made):
        every = tuple(word for requirement in kept + new for word in ("--with", requirement))
        fix = (f"lock them with the rest, then install that lock: {Rerun(('lock', made[0], *every, '--output', 'new.lock'))} "
               f"&& {Rerun((made[0], '--lock', 'new.lock', '--venv', str(link)))}")
        # Here, not at the top: only this refusal needs what a lock cannot hold.
        from jetson_install.cli.commands.fleet import unlockable, why_not_lockable

        refused = unlockable(kept + new)
        if refused is not None:
            unlocked = Rerun(replayed).without("--lock").without("--wheelhouse").argv
            fix = (f"{refused[0]}: {why_not_lockable(refused[1])}; make it again without a lock, with the additions: "
                   f"{Rerun((*unlocked, '--venv', str(link), *every))}")
        raise BadInput(f"{link} was installed from a lock, which holds exactly its files and no addition", fix=fix)
    command = Rerun((*replayed, "--venv", str(link), *with_new, *flags))
    return Addition(link, made[0], str(Rerun(made)), command, kept, new)


def _made_with(link: Path, with_new: Tuple[str, ...]) -> Tuple[str, ...]:
    """The command that made the environment at `link` (its first word the target), as it
    recorded it: plan.json, or the vendor record's repair command for one made before."""
    home = EnvironmentHome(link)
    current = home.current()
    make = str(Rerun(("torch", "--venv", str(link), *with_new)))
    if current is None:
        if home.is_ours():
            raise BadInput(f"{link} points at no complete environment (removed, or its install was cut short)",
                           fix="see it, and the command that repairs it: jetson-install list")
        if not link.exists() and not link.is_symlink():
            raise BadInput(f"no environment at {link}", fix=f"make one with the additions: {make}")
        raise BadInput(f"{link} was not made by jetson-install (no link into {link}.d); it is left as it is",
                       fix=f"make one with the additions beside it: {Rerun(('torch', '--venv', f'{link}-torch', *with_new))}")
    recorded = recorded_plan(current) or {}
    command = recorded.get("command")
    if not (isinstance(command, list) and all(isinstance(word, str) for word in command)):
        record = read_record(current)
        repair = record.repair if record is not None else ""
        command = shlex.split(repair)[1:] if repair.startswith("jetson-install ") else None
    if not command:
        raise BadInput(f"{current} records no command it was made with (made by an older jetson-install)",
                       fix=f"run the command that made it again, with {' '.join(with_new)} added")
    words = tuple(word for word in command if word not in _NOT_REPLAYED)
    if not words or words[0] not in load_catalog().targets:
        raise BadInput(f"{current} was made by `jetson-install {' '.join(command)}`, not a target's install",
                       fix=f"run the command that made it again, with {' '.join(with_new)} added")
    if any(MASK in word for word in words):
        raise BadInput(f"the command that made {link} gave an index's credentials in a URL, which are not recorded",
                       fix=f"run it again with the additions, the credentials in place of {MASK}: "
                           f"{Rerun((*command, *with_new))}")
    return words


#: The install's options that may name a path, read relative to the folder it runs in.
_PATH_OPTIONS = ("--root", "--source", "--python", "--with", "--bitsandbytes")


def in_folder(argv: Sequence[str], cwd: Path) -> Tuple[str, ...]:
    """`argv` (`--opt VALUE` or `--opt=VALUE`) with each path the install would read relative to
    the folder it runs in made absolute against `cwd`, the folder `argv` was run in: a recorded
    command then means what it meant there, wherever it runs again."""
    words: List[str] = list(argv)
    at = 0
    while at < len(words):
        option, inline, value = words[at].partition("=")
        if option in _PATH_OPTIONS and inline:
            words[at] = f"{option}={_absolute(option, value, cwd)}"
        elif option in _PATH_OPTIONS and at + 1 < len(words):
            at += 1
            words[at] = _absolute(option, words[at], cwd)
        at += 1
    return tuple(words)


def _absolute(option: str, value: str, cwd: Path) -> str:
    """`value` of `option` against `cwd`, where the install reads it as a relative path (by the
    same tests it makes of the value); otherwise `value` as it is."""
    if option == "--bitsandbytes":
        kind, inline, path = value.partition("=")
        # planning/bitsandbytes_source.py: build=X is a checkout where X looks like a path or is a
        # folder; `~` is the user's home there.
        local = bool(inline) and not path.startswith("~") and (os.sep in path or path.startswith(".") or (cwd / path).is_dir())
        return f"{kind}={_joined(path, cwd)}" if local else value
    if option == "--root":
        local = not value.startswith(SAMPLE_PREFIX)  # board/samples.py: sample:NAME is a shipped root
    elif option == "--source":
        local = "://" not in value  # planning/planner.py: a --source without a scheme is a folder
    elif option == "--python":
        local = os.sep in value  # a bare name is looked up on PATH, as exec does
    else:  # --with: planning/planner.py `additions` takes a project folder (`~` the user's home)
        local = not value.startswith("~") and (
            value.startswith(".") or (os.sep in value and "://" not in value and "@" not in value))
    return _joined(value, cwd) if local else value


def _joined(path: str, cwd: Path) -> str:
    """A relative `path` under `cwd`; an absolute (or empty) one as it is."""
    return path if not path or os.path.isabs(path) else str(cwd / path)
