"""Where a registry's credentials are: the registry clients' own places, ~/.docker/config.json
(its credential helpers, or `auths`) and ~/.netrc, read only when a registry asks for them
(tools/oci.py sends them, to that registry or the token service it names only). Nothing here
is logged or shown: a helper's answer is read as a secret.
"""

from __future__ import annotations

import base64
import binascii
import json
import netrc
import os
import re
import stat
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from jetson_install.base.errors import RegistryRefused
from jetson_install.base.oci_ref import Reference
from jetson_install.base.outputs import read_regular_file

__all__ = ["CREDENTIALS_FIX", "Secret", "IDENTITY_TOKEN_USER", "credentials"]

_CONFIG_LIMIT = 1 << 20  # ~/.docker/config.json
#: Seconds a docker credential helper has to answer (it may ask a keyring that is locked).
_HELPER_TIMEOUT = 30.0
#: What to do when a registry refuses: the two places registries' clients keep credentials, neither a command line.
CREDENTIALS_FIX = ("log in as the registry's clients do: `docker login HOST` (~/.docker/config.json, or the credential "
                   "helper it names), or a line in ~/.netrc (machine HOST login USER password TOKEN); never on a "
                   "command line")

Secret = Tuple[str, str]  # (user, password); user "<token>" with an identity token, as docker's helpers give it
IDENTITY_TOKEN_USER = "<token>"


def _docker_config() -> Dict[str, Any]:
    """~/.docker/config.json (or $DOCKER_CONFIG/config.json), as docker reads it; {} where there is none."""
    folder = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    try:
        # Bounded, and a FIFO or device in its place is passed over rather than waited on.
        text = read_regular_file(Path(folder) / "config.json", _CONFIG_LIMIT)
        data = json.loads(text.decode("utf-8")) if text is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _hostname_of(key: str) -> str:
    """An `auths` key as docker matches it: "https://host/v1/" and "host" both name host."""
    if "://" in key:
        key = key.split("://", 1)[1]
    return key.split("/", 1)[0]


def _from_helper(helper: str, host: str) -> Optional[Secret]:
    """A docker credential helper's answer for `host`: `docker-credential-NAME get`, the server
    on its stdin, JSON {Username, Secret} on its stdout, which is never logged
    (https://github.com/docker/docker-credential-helpers#development)."""
    from jetson_install.tools import runner

    if not re.fullmatch(r"[A-Za-z0-9_.-]+", helper):
        return None
    program = f"docker-credential-{helper}"
    fix = f"check it by hand: echo {host} | {program} get"
    done = runner.run([program, "get"], input_text=host, timeout=_HELPER_TIMEOUT, secret_stdout=True)
    if done.timed_out:
        raise RegistryRefused(f"the credential helper {program} gave no answer for {host} within "
                              f"{_HELPER_TIMEOUT:g} s", fix=fix)
    if done.returncode != 0:
        return None  # "credentials not found": anonymous, or ~/.netrc
    try:
        answer = json.loads(done.stdout)
        user, secret = str(answer["Username"]), str(answer["Secret"])
    except (ValueError, KeyError, TypeError):
        # Its output is never shown: it may hold the secret itself.
        raise RegistryRefused(f"the credential helper {program} answered for {host} with something other than "
                              "its JSON", fix=fix) from None
    return (user, secret) if secret else None


def _from_auths(entry: Mapping[str, Any]) -> Optional[Secret]:
    token = entry.get("identitytoken")
    if isinstance(token, str) and token:
        return IDENTITY_TOKEN_USER, token
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            user, _, password = base64.b64decode(auth).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return (user, password) if password else None
    name, secret = entry.get("username"), entry.get("password")
    return (name, secret) if isinstance(name, str) and isinstance(secret, str) and secret else None


def _from_netrc(hostname: str) -> Optional[Secret]:
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # a FIFO or device in its place is passed over rather than waited on
        found = netrc.netrc(path).authenticators(hostname)
    except (OSError, netrc.NetrcParseError):
        return None
    if found is None or not found[2]:
        return None
    return found[0] or "", found[2]


def credentials(reference: Reference) -> Optional[Secret]:
    """The user and secret for the registry, where docker reads them (a credential helper
    named for the host, else the default store, else `auths`), else ~/.netrc's line for its
    host (https://docs.docker.com/reference/cli/docker/login/#credential-stores)."""
    config = _docker_config()
    helpers = config.get("credHelpers")
    if isinstance(helpers, dict) and isinstance(helpers.get(reference.host), str):
        found = _from_helper(helpers[reference.host], reference.host)
        if found:
            return found
    store = config.get("credsStore")
    if isinstance(store, str) and store:
        found = _from_helper(store, reference.host)
        if found:
            return found
    auths = config.get("auths")
    if isinstance(auths, dict):
        for key, entry in auths.items():
            if isinstance(entry, dict) and _hostname_of(str(key)) == reference.host:
                found = _from_auths(entry)
                if found:
                    return found
    return _from_netrc(reference.hostname)
