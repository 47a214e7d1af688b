"""git URLs: a requirement's `git+URL@REF` read, and the credentials of an http(s) URL
(`https://user:token@host/repo`, a token as `https://token@host/repo`) kept off every command
line, where the process list and the log would show them.

git gets the URL without them (`without_credentials`) and asks for them, as it asks any
credential helper (https://git-scm.com/docs/gitcredentials), through one given in its
environment (GIT_CONFIG_COUNT, https://git-scm.com/docs/git-config#ENVIRONMENT) that prints
them from environment variables (`credential_environment`). jetson-install's own git (git.py)
and uv's git, for a `git+` requirement, both get them so: uv puts a URL's credentials on its
git command lines (`git fetch URL`, `-c url.URL.insteadOf`), and where the URL has none its
git asks the credential helpers (https://docs.astral.sh/uv/concepts/authentication/git/).
Pure: nothing here runs a process.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from jetson_install.base.redact import Credentials, credentials

__all__ = ["split_git_url", "without_credentials", "requirement_without_credentials", "requirement_for_a_probe",
           "credential_environment"]

_USERNAME = "JETSON_INSTALL_GIT_USERNAME"
_PASSWORD = "JETSON_INSTALL_GIT_PASSWORD"


def _helper(number: int) -> str:
    """A helper value starting with "!" is a shell snippet; git passes it the action ("get") and
    reads key=value lines back. printf, not echo: some shells' echo expands backslashes."""
    return (f'!f() {{ test "$1" = get || exit 0; printf "username=%s\\npassword=%s\\n" '
            f'"${_USERNAME}_{number}" "${_PASSWORD}_{number}"; }}; f')


def split_git_url(url: str) -> Tuple[str, Optional[str]]:
    """`git+URL@REF` -> (URL, REF); REF None when the URL names none."""
    bare = url[len("git+"):] if url.startswith("git+") else url
    scheme, _, rest = bare.partition("://")
    path, at, ref = rest.rpartition("@")
    if at and "/" in path:
        return f"{scheme}://{path}", ref
    return bare, None


def _secret(url: str) -> Optional[Credentials]:
    """The credentials of an http(s) URL; an ssh URL's user is a login name, not a secret."""
    secret = credentials(url)
    return secret if secret is not None and urlsplit(url).scheme in ("http", "https") else None


def without_credentials(url: str) -> str:
    """A git URL (`https://…`, `git+https://…@REF`) without its credentials."""
    plain = url[len("git+"):] if url.startswith("git+") else url
    secret = _secret(plain)
    if secret is None:
        return url
    return f"{'git+' if url.startswith('git+') else ''}{secret.url}"


def requirement_without_credentials(requirement: str) -> str:
    """A requirement naming a git URL (`NAME @ git+https://…`, or the bare `git+https://…`)
    with that URL's credentials taken out; any other as it is: uv fetches an archive URL
    itself, with the credentials in it (and off its command line: shared.target_requirements)."""
    name, at, url = requirement.rpartition(" @ ")
    return f"{name}{at}{without_credentials(url)}" if url.startswith("git+") else requirement


def requirement_for_a_probe(requirement: str) -> str:
    """A requirement with its URL's credentials taken out, a git URL's or an archive's, for a
    process that fetches nothing: the additions probe finds the installed project by the URL's
    host and path, so a password never reaches its command line (`ps`, the log) at the install
    or at any doctor run."""
    name, at, url = requirement.rpartition(" @ ")
    plain = url[len("git+"):] if url.startswith("git+") else url
    secret = credentials(plain) if "://" in plain else None
    if secret is None:
        return requirement
    return f"{name}{at}{url[:len(url) - len(plain)]}{secret.url}"


def credential_environment(urls: Sequence[str], inherited: Mapping[str, str] = os.environ) -> Dict[str, str]:
    """The variables that answer git's credential requests for each http(s) URL (or `git+URL@REF`)
    in `urls` that carries credentials, once git has the URL without them; empty when none does.

    A host's helper is scoped to the host, as uv's `insteadOf` scoped its credentials, so a
    submodule there gets them too; where two URLs give one host different credentials, each
    helper is scoped to its repository instead (git matches a credential URL's path exactly).
    The entries follow the caller's own GIT_CONFIG_* ones, which stay in force."""
    given: Dict[str, Tuple[str, Credentials]] = {}
    for url in urls:
        repository = split_git_url(url)[0]
        secret = _secret(repository)
        if secret is not None:
            given.setdefault(secret.url, (repository, secret))
    by_host: Dict[str, List[Credentials]] = {}
    for _, secret in given.values():
        parts = urlsplit(secret.url)
        by_host.setdefault(f"{parts.scheme}://{parts.netloc}", []).append(secret)
    scopes: Dict[str, Credentials] = {}
    for host, secrets in by_host.items():
        if len({(secret.username, secret.password) for secret in secrets}) == 1:
            scopes[host] = secrets[0]
        else:
            scopes.update((secret.url, secret) for secret in secrets)
    if not scopes:
        return {}
    count = inherited.get("GIT_CONFIG_COUNT", "")
    first = int(count) if count.isdigit() else 0
    env = {"GIT_TERMINAL_PROMPT": "0"}
    for number, (scope, secret) in enumerate(scopes.items()):
        key = f"credential.{scope}.helper"
        # The empty value first drops the user's own helpers for this scope, so only ours is offered.
        for offset, value in enumerate(("", _helper(number))):
            env[f"GIT_CONFIG_KEY_{first + 2 * number + offset}"] = key
            env[f"GIT_CONFIG_VALUE_{first + 2 * number + offset}"] = value
        env[f"{_USERNAME}_{number}"] = secret.username
        env[f"{_PASSWORD}_{number}"] = secret.password or ""
    env["GIT_CONFIG_COUNT"] = str(first + 2 * len(scopes))
    return env
