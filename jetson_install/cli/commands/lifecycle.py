"""Which environment a command works on: --venv as typed, else the default one that exists;
`list`, `rollback`, `uninstall` and `clean` then call envs/lifecycle.py on it."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

from jetson_install.base.errors import BadInput
from jetson_install.catalog.catalog import load_catalog
from jetson_install.cli.commands.given import venv_path
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.known_dirs import default_venv

__all__ = ["default_venv", "default_environment", "environment_link"]


def default_environment(command: str) -> Tuple[Path, Optional[str]]:
    """The DIR a command works on without --venv: the default one of a target that has an
    environment there (OBLITERATUS' where several have), and a note saying which, unless it is
    OBLITERATUS' alone; `add` refuses to choose between two."""
    names = sorted(load_catalog().targets, key=lambda name: (name != "obliteratus", name))
    made = [name for name in names if EnvironmentHome(default_venv(name)).current() is not None]
    if command == "add" and len(made) > 1:
        raise BadInput(f"add: {' and '.join(made)} both have an environment at their default location; which one?",
                       fix=f"name it: jetson-install add --venv {default_venv(made[0])} REQUIREMENT")
    if not made:
        return default_venv("obliteratus"), None
    chosen = made[0]
    if made == ["obliteratus"]:
        return default_venv(chosen), None
    others = "; " + ", ".join(f"`jetson-install {name}`'s is at {default_venv(name)}" for name in made[1:]) \
        if made[1:] else ""
    return default_venv(chosen), (f"{command}: {default_venv(chosen)}, the environment `jetson-install {chosen}` "
                                  f"made (no --venv{others})")


def environment_link(venv: Optional[str], command: str) -> Tuple[Path, str, Optional[str]]:
    """The DIR a lifecycle command works on (--venv, else the default one that exists), how to
    name it in a message (as the user typed it), and a note naming the default it took."""
    if venv is not None:
        return venv_path(venv).absolute(), f"--venv {venv}", None
    link, note = default_environment(command)
    return link, str(link), note
