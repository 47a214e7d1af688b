"""How the user gets a newer jetson-install: the command follows the way the running tool was
installed, as its dist-info's direct_url.json records it (PEP 610,
https://packaging.python.org/en/latest/specifications/direct-url-data-structure/)."""

from __future__ import annotations

import json
import shlex
from importlib.metadata import PackageNotFoundError, distribution
from typing import Optional
from urllib.parse import unquote, urlparse

#: README's checkout route ("Install"), for a tool that runs from a source tree no installer recorded.
FROM_CHECKOUT = "git -C jetson-install pull && pipx install --force ./jetson-install"
#: From the package index, replacing whatever was installed.
FROM_INDEX = "pipx install --force jetson-install"


def upgrade_command(direct_url: Optional[str]) -> str:
    """The upgrade for an install whose direct_url.json holds this text; None: the dist-info has
    no such file, so an installer took the package from an index (PEP 610 records every other
    source), and `pipx upgrade` asks that index again."""
    if direct_url is None:
        return "pipx upgrade jetson-install"
    try:
        record = json.loads(direct_url)
    except ValueError:
        return FROM_INDEX
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or "dir_info" not in record or urlparse(url).scheme != "file":
        # A wheel or archive (README's `pipx install dist/jetson_install-*.whl`), a git URL, or a
        # record this version cannot read: none names where a newer one is, the index does.
        return FROM_INDEX
    checkout = shlex.quote(unquote(urlparse(url).path))
    dir_info = record["dir_info"]
    if isinstance(dir_info, dict) and dir_info.get("editable") is True:
        return f"git -C {checkout} pull"  # the environment imports the checkout itself
    return f"git -C {checkout} pull && pipx install --force {checkout}"


def running_upgrade_command() -> str:
    """The upgrade for the jetson-install that runs now."""
    # Imported here: only the messages that name an upgrade read the installed metadata.

    try:
        installed = distribution("jetson-install")
    except PackageNotFoundError:
        return FROM_CHECKOUT
    return upgrade_command(installed.read_text("direct_url.json"))
