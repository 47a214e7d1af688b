"""The one module that builds git command lines; runner runs them (imported where they run,
so a plan that shows a clone loads nothing that starts processes).

Every command runs with GIT_TERMINAL_PROMPT=0: a repository that wants a password the URL
does not give fails at once instead of waiting for a terminal nobody watches. Credentials in
an http(s) URL (`https://user:token@host/repo`, a token as `https://token@host/repo`) never
reach git's command line, where the process list and the log would show them: git gets the
URL without them and asks for them, as it asks any credential helper
(https://git-scm.com/docs/gitcredentials), through one given in its environment
(GIT_CONFIG_COUNT, https://git-scm.com/docs/git-config#ENVIRONMENT) that prints them from
two environment variables. Nothing is written to disk: a clone's remote is the bare URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from jetson_install.base.process import Completed
from jetson_install.base.redact import credentials

__all__ = ["clone_argv", "clone", "checkout", "head_commit", "changes", "remote_refs"]

_USERNAME = "JETSON_INSTALL_GIT_USERNAME"
_PASSWORD = "JETSON_INSTALL_GIT_PASSWORD"
# A helper value starting with "!" is a shell snippet; git passes it the action ("get") and
# reads key=value lines back. printf, not echo: some shells' echo expands backslashes.
_HELPER = (f'!f() {{ test "$1" = get || exit 0; printf "username=%s\\npassword=%s\\n" '
           f'"${_USERNAME}" "${_PASSWORD}"; }}; f')


def _for_url(url: str) -> Tuple[str, Dict[str, str]]:
    """The URL git is given, and the environment that answers its credential request."""
    secret = credentials(url)
    if secret is None or urlsplit(url).scheme not in ("http", "https"):
        return url, {}  # an ssh URL's user is a login name, not a secret
    parts = urlsplit(secret.url)
    scope = f"credential.{parts.scheme}://{parts.netloc}.helper"
    # The empty value first drops the user's own helpers for this host, so only these are offered.
    return secret.url, {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": scope, "GIT_CONFIG_VALUE_0": "",
                        "GIT_CONFIG_KEY_1": scope, "GIT_CONFIG_VALUE_1": _HELPER,
                        _USERNAME: secret.username, _PASSWORD: secret.password or ""}


def _run(argv: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None) -> Completed:
    from jetson_install.tools import runner

    return runner.run(["git", *argv], timeout=timeout, env={"GIT_TERMINAL_PROMPT": "0", **(env or {})})


def clone_argv(url: str, destination: str, branch: Optional[str] = None, shallow: bool = False) -> List[str]:
    """The `git clone` command line for `url` (without its credentials: `clone` gives them to
    git apart), into `destination`; `branch`: a branch or tag; `shallow`: the one commit only."""
    options = ["--quiet"] + (["--depth", "1"] if shallow else []) + (["--branch", branch] if branch else [])
    return ["git", "clone", *options, "--", _for_url(url)[0], destination]


def clone(url: str, destination: Path, *, timeout: float, branch: Optional[str] = None,
          shallow: bool = False) -> Completed:
    """Run `clone_argv`, the URL's credentials given to git through its environment."""
    return _run(clone_argv(url, str(destination), branch, shallow)[1:], timeout, _for_url(url)[1])


def checkout(directory: Path, ref: str) -> Completed:
    """Switch the checkout at `directory` to `ref` (a tag, branch or commit)."""
    return _run(["-C", str(directory), "checkout", "--quiet", ref, "--"], 120)


def head_commit(directory: Path) -> Optional[str]:
    """The commit the checkout at `directory` is at, or None where git cannot say."""
    result = _run(["-C", str(directory), "rev-parse", "--verify", "HEAD"], 60)
    return result.stdout.strip() if result.ok and result.stdout.strip() else None


def changes(directory: Path) -> Optional[str]:
    """`git status` of the checkout as NUL-separated porcelain entries (untracked files
    included, renames as a deletion and an addition), or None where git cannot say."""
    result = _run(["-C", str(directory), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"],
                  60)
    return result.stdout if result.ok else None


def remote_refs(url: str, ref: str) -> Optional[List[Tuple[str, str]]]:
    """(commit, ref name) of each remote ref matching `ref` (`git ls-remote`), or None when
    the remote did not answer."""
    bare, env = _for_url(url)
    result = _run(["ls-remote", "--", bare, ref], 120, env)
    if not result.ok:
        return None
    return [(commit, name) for commit, _, name in (line.partition("\t") for line in result.stdout.splitlines())
            if name]
