"""The one module that builds git command lines; runner runs them (imported where they run,
so a plan that shows a clone loads nothing that starts processes).

Every command runs with GIT_TERMINAL_PROMPT=0: a repository that wants a password the URL
does not give fails at once instead of waiting for a terminal nobody watches. Credentials in
an http(s) URL never reach git's command line: git gets the URL without them and the
credentials through its environment (git_urls.credential_environment). Nothing is written to
disk: a clone's remote is the bare URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from jetson_install.base.git_urls import credential_environment, without_credentials
from jetson_install.base.process import Completed

__all__ = ["failure", "clone_argv", "clone", "checkout", "head_commit", "changes", "remote_refs", "remote_tags",
           "upstream", "upstream_commit", "contains", "file_at"]

def _run(argv: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None) -> Completed:
    # Here, not at the top: planning imports this module for the command lines it shows, and a
    # plan must not load the module that starts processes (tests/test_layers.py holds that).
    from jetson_install.tools import runner

    return runner.run(["git", *argv], timeout=timeout, env={"GIT_TERMINAL_PROMPT": "0", **(env or {})})


def failure(completed: Completed) -> str:
    """What went wrong, as git's failed run said it: its lines up to the first blank one (ssh's
    `Host key verification failed.` or the server's `remote: ...`, then git's `fatal: ...`),
    not the advice git adds after that blank line (`...and the repository exists.`)."""
    said: List[str] = []
    for line in completed.stderr.splitlines():
        if not line.strip():
            if said:
                break
        elif not line.lower().startswith(("warning:", "hint:")):  # ssh's "Warning: Permanently added ..."
            said.append(line.strip())
    if said:
        return " ".join(said[:4])
    return "it did not finish in time" if completed.timed_out else f"git exited {completed.returncode}"


def clone_argv(url: str, destination: str, branch: Optional[str] = None, shallow: bool = False) -> List[str]:
    """The `git clone` command line for `url` (without its credentials: `clone` gives them to
    git apart), into `destination`; `branch`: a branch or tag; `shallow`: the one commit only."""
    options = ["--quiet"] + (["--depth", "1"] if shallow else []) + (["--branch", branch] if branch else [])
    return ["git", "clone", *options, "--", without_credentials(url), destination]


def clone(url: str, destination: Path, *, timeout: float, branch: Optional[str] = None,
          shallow: bool = False) -> Completed:
    """Run `clone_argv`, the URL's credentials given to git through its environment."""
    return _run(clone_argv(url, str(destination), branch, shallow)[1:], timeout, credential_environment([url]))


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
    # The checkout is the user's, and a stopped lock SIGKILLs this git: without GIT_OPTIONAL_LOCKS=0
    # it refreshes the index under .git/index.lock, which a kill leaves and the user's next
    # commit then refuses (https://git-scm.com/docs/git-status#_background_refresh).
    result = _run(["-C", str(directory), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"],
                  60, {"GIT_OPTIONAL_LOCKS": "0"})
    return result.stdout if result.ok else None


def remote_refs(url: str, ref: str) -> Optional[List[Tuple[str, str]]]:
    """(commit, ref name) of each remote ref matching `ref` (`git ls-remote`), or None when
    the remote did not answer."""
    result = _run(["ls-remote", "--", without_credentials(url), ref], 120, credential_environment([url]))
    if not result.ok:
        return None
    return [(commit, name) for commit, _, name in (line.partition("\t") for line in result.stdout.splitlines())
            if name]


def remote_tags(url: str, timeout: float) -> Completed:
    """`git ls-remote --tags --refs`: each tag of the repository at `url`, one `COMMIT\trefs/tags/NAME` a line."""
    return _run(["ls-remote", "--tags", "--refs", "--", without_credentials(url)], timeout, credential_environment([url]))


def upstream(directory: Path) -> Optional[Tuple[str, str]]:
    """(remote, branch) the checkout's branch follows (`@{upstream}`), or None where it follows none."""
    result = _run(["-C", str(directory), "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"], 60)
    remote, _, branch = result.stdout.strip().partition("/")
    return (remote, branch) if result.ok and branch else None


def upstream_commit(directory: Path, remote: str, branch: str, timeout: float) -> Completed:
    """`git ls-remote REMOTE refs/heads/BRANCH` in the checkout: the commit the remote's branch is at now,
    asked of the remote, with nothing fetched into the checkout."""
    return _run(["-C", str(directory), "ls-remote", "--", remote, f"refs/heads/{branch}"], timeout)


def contains(directory: Path, commit: str) -> Optional[bool]:
    """Whether the checkout's HEAD already has `commit` in its history; None where git does not
    know the commit (it was never fetched here) or cannot say."""
    known = _run(["-C", str(directory), "cat-file", "-e", f"{commit}^{{commit}}"], 60)
    if not known.ok:
        return None
    result = _run(["-C", str(directory), "merge-base", "--is-ancestor", commit, "HEAD"], 60)
    return {0: True, 1: False}.get(result.returncode)


def file_at(directory: Path, ref: str, path: str) -> Optional[str]:
    """The text of `path` at `ref` (a tag, branch or commit) in the repository at `directory`,
    read from git's objects (the checkout is left as it is), or None where git cannot say."""
    result = _run(["-C", str(directory), "show", f"{ref}:{path}", "--"], 60)
    return result.stdout if result.ok else None
