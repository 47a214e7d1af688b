"""How the user gets a newer jetson-install: the command follows the way the running tool was
installed, as its dist-info's direct_url.json records it (PEP 610,
https://packaging.python.org/en/latest/specifications/direct-url-data-structure/)."""

from __future__ import annotations

import json
import shlex
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urlparse

#: README's checkout route ("Install"), for a tool that runs from a source tree no installer recorded.
FROM_CHECKOUT = "git -C jetson-install pull && pipx install --force ./jetson-install"


def upgrade_command(direct_url: Optional[str], manager: str = "pipx") -> str:
    """The upgrade for an install whose direct_url.json holds this text, made by `manager`
    ("pipx", or "uv tool" for `uv tool install`); None: the dist-info has no such file, so an
    installer took the package from an index (PEP 610 records every other source), and an
    upgrade asks that index again."""
    if direct_url is None:
        return f"{manager} upgrade jetson-install"
    from_index = f"{manager} install --force jetson-install"
    try:
        record = json.loads(direct_url)
    except ValueError:
        return from_index
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or "dir_info" not in record or urlparse(url).scheme != "file":
        # A wheel or archive (README's `pipx install dist/jetson_install-*.whl`), a git URL, or a
        # record this version cannot read: none names where a newer one is, the index does.
        return from_index
    checkout = shlex.quote(unquote(urlparse(url).path))
    dir_info = record["dir_info"]
    if isinstance(dir_info, dict) and dir_info.get("editable") is True:
        return f"git -C {checkout} pull"  # the environment imports the checkout itself
    return f"git -C {checkout} pull && {manager} install --force {checkout}"


def running_upgrade_command() -> str:
    """The upgrade for the jetson-install that runs now."""
    try:
        installed = distribution("jetson-install")
    except PackageNotFoundError:
        return FROM_CHECKOUT
    # `uv tool install` leaves its receipt in the tool's environment
    # (uv-receipt.toml: https://github.com/astral-sh/uv/blob/main/crates/uv-tool/src/lib.rs); pipx's have none.
    manager = "uv tool" if (Path(sys.prefix) / "uv-receipt.toml").is_file() else "pipx"
    return upgrade_command(installed.read_text("direct_url.json"), manager)
