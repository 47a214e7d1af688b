"""The per-user folders jetson-install keeps its things in, each with where it came from: one
place, so what the tool writes and what `jetson-install paths` shows cannot disagree.

platformdirs picks them: on Linux the XDG base directories (`$XDG_DATA_HOME`, else
`~/.local/share`, and likewise for config, cache and state; the log folder is `log` in the
state folder), https://specifications.freedesktop.org/basedir-spec/latest/. Which variable
gave a folder is read from the folder platformdirs returned, not decided again here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Tuple

import platformdirs

from jetson_install.base.sourced import DEFAULT, Sourced

__all__ = ["APP", "data_dir", "config_dir", "cache_dir", "log_dir", "under_variable"]

#: The name platformdirs puts each folder under.
APP = "jetson-install"


def under_variable(path: Path, variables: Tuple[str, ...]) -> Sourced[Path]:
    """`path`, sourced from the first of `variables` that is set and holds it, else the default."""
    for variable in variables:
        value = os.environ.get(variable, "").strip()
        if value and (path == Path(value).expanduser() or Path(value).expanduser() in path.parents):
            return Sourced(path, variable)
    return Sourced(path, DEFAULT)


def data_dir() -> Sourced[Path]:
    """Environments (envs/<target>) and the list of every DIR worked on."""
    return under_variable(Path(platformdirs.user_data_dir(APP)), ("XDG_DATA_HOME",))


def config_dir() -> Sourced[Path]:
    """Where config.toml is looked for (unless JETSON_INSTALL_CONFIG names one)."""
    return under_variable(Path(platformdirs.user_config_dir(APP)), ("XDG_CONFIG_HOME",))


def cache_dir() -> Sourced[Path]:
    """bitsandbytes built here, and what each Python binary said it is."""
    return under_variable(Path(platformdirs.user_cache_dir(APP)), ("XDG_CACHE_HOME",))


def log_dir() -> Sourced[Path]:
    """Every install's log."""
    # log/ in the state folder from platformdirs 3 on (pyproject.toml's floor).
    return under_variable(Path(platformdirs.user_log_dir(APP)), ("XDG_STATE_HOME",))
