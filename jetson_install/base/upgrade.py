"""How the user gets a newer jetson-install: the command follows the way the running tool was
installed, as its dist-info's direct_url.json records it (PEP 610,
https://packaging.python.org/en/latest/specifications/direct-url-data-structure/)."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urlparse

__all__ = ["FROM_CHECKOUT", "Installed", "installed_from", "running_install", "upgrade_command",
           "running_upgrade_command"]

#: README's checkout route ("Install"), for a tool that runs from a source tree no installer recorded.
FROM_CHECKOUT = "git -C jetson-install pull && pipx install --force ./jetson-install"


@dataclass(frozen=True)
class Installed:
    """Where the running tool came from, and the command that upgrades it."""

    kind: str  # "index", "archive" (a wheel, an archive or a git URL), "checkout", "editable", "source tree"
    checkout: Optional[Path]  # the checkout a "checkout" or "editable" install was made from
    upgrade: str


def installed_from(direct_url: Optional[str], manager: str = "pipx") -> Installed:
    """How a tool whose dist-info's direct_url.json holds this text was installed, by `manager`
    ("pipx", or "uv tool" for `uv tool install`); None: the dist-info has no such file, so an
    installer took the package from an index (PEP 610 records every other source), and an
    upgrade asks that index again."""
    if direct_url is None:
        return Installed("index", None, f"{manager} upgrade jetson-install")
    from_index = Installed("archive", None, f"{manager} install --force jetson-install")
    try:
        record = json.loads(direct_url)
    except ValueError:
        return from_index
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or "dir_info" not in record or urlparse(url).scheme != "file":
        # A wheel or archive (README's `pipx install dist/jetson_install-*.whl`), a git URL, or a
        # record this version cannot read: none names where a newer one is, the index does.
        return from_index
    path = unquote(urlparse(url).path)
    checkout = shlex.quote(path)
    dir_info = record["dir_info"]
    if isinstance(dir_info, dict) and dir_info.get("editable") is True:
        return Installed("editable", Path(path), f"git -C {checkout} pull")  # the environment imports the checkout
    return Installed("checkout", Path(path), f"git -C {checkout} pull && {manager} install --force {checkout}")


def upgrade_command(direct_url: Optional[str], manager: str = "pipx") -> str:
    """The upgrade for an install whose direct_url.json holds this text (see installed_from)."""
    return installed_from(direct_url, manager).upgrade


def running_install() -> Installed:
    """How the jetson-install that runs now was installed. importlib.metadata is imported here,
    where it is read, not with the module: the board's and the catalog's readers name the upgrade
    in a fix, and `detect`, `plan` and an install never need it unless one fails."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        installed = distribution("jetson-install")
    except PackageNotFoundError:
        # Run from a source tree (PYTHONPATH, `python -m` in a checkout): README's checkout route.
        tree = Path(__file__).resolve().parents[2]
        return Installed("source tree", tree if (tree / ".git").exists() else None, FROM_CHECKOUT)
    # `uv tool install` leaves its receipt in the tool's environment
    # (uv-receipt.toml: https://github.com/astral-sh/uv/blob/main/crates/uv-tool/src/lib.rs); pipx's have none.
    manager = "uv tool" if (Path(sys.prefix) / "uv-receipt.toml").is_file() else "pipx"
    return installed_from(installed.read_text("direct_url.json"), manager)


def running_upgrade_command() -> str:
    """The upgrade for the jetson-install that runs now."""
    return running_install().upgrade
