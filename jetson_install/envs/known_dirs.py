"""Every DIR jetson-install worked on for this user: the default DIRs' folder in the user's data
folder, and the list each run's lock adds its DIR to (what `list` and `clean` go through)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Dict, List

from jetson_install.base.logs import user_folder_refused
from jetson_install.base.outputs import OWN_FILE_FLAGS
from jetson_install.base.layout import ENVIRONMENTS_DIR, HOME_SUFFIX, KNOWN_ENVIRONMENTS
from jetson_install.base.user_dirs import data_dir

__all__ = ["default_environments", "default_venv", "known_environments_file", "known_environments", "remember"]


def default_environments() -> Path:
    """Where each target's default DIR is (envs/<target>), in the user's data folder."""
    return data_dir().value / ENVIRONMENTS_DIR


def default_venv(target: str) -> Path:
    """The DIR an install of `target` makes without --venv."""
    return default_environments() / target


def known_environments_file() -> Path:
    """The list each run's lock adds its DIR to, in the user's data folder."""
    return data_dir().value / KNOWN_ENVIRONMENTS


def known_environments() -> List[Path]:
    """Every DIR jetson-install worked on for this user, first seen first: the default DIRs
    (envs/<target>) and each one recorded when a run took its lock."""
    envs = default_environments()
    # envs/ holds each default DIR beside its DIR.d (and a killed switch's hidden link).
    found = sorted(path for path in envs.glob("[!.]*") if not path.name.endswith(HOME_SUFFIX))
    found += sorted(path.with_name(path.name[:-len(HOME_SUFFIX)]) for path in envs.glob(f"[!.]*{HOME_SUFFIX}"))
    with contextlib.suppress(OSError):
        found += [Path(line) for line in known_environments_file().read_text().splitlines() if line.strip()]
    unique: Dict[Path, None] = {}
    for path in found:
        unique.setdefault(path, None)
    return list(unique)


def remember(link: Path) -> None:
    """Add DIR to the user's list of what jetson-install worked on. Appended, never rewritten,
    so two runs at once cannot lose each other's line; `list` leaves out what is gone."""
    listed = known_environments_file()
    path = link.absolute()
    if path in known_environments():
        return
    try:
        listed.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(listed, OWN_FILE_FLAGS | os.O_APPEND, 0o600)
        try:
            os.write(descriptor, f"{path}\n".encode())
        finally:
            os.close(descriptor)
    except OSError as exc:
        raise user_folder_refused("the list of environments", listed.parent, "XDG_DATA_HOME", exc) from None

