"""What the target's source is, by content: a re-run with the same source changes nothing,
and an edited checkout or a moved branch is never taken for the same.

* a git checkout: its commit, plus a digest of its uncommitted changes and untracked files;
* a plain folder: a digest of its files' content (never their times: building writes into
  the tree), without build outputs, a link counted by what it points at, as a build reads it;
* a git URL: the commit a branch points to, looked up once per run (`git ls-remote`); a tag
  or a commit names its content already and needs no look-up after the first install.

The same holds for what --with (or `add`) puts on the stack from a folder or a git URL.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence
from urllib.parse import unquote, urlsplit

from jetson_install.base.git_urls import split_git_url
from jetson_install.base.requirements import TargetRequirement
from jetson_install.tools import git
from jetson_install.envs.source_tree import checkout_digest, file_digest, is_build_output

__all__ = ["SourceIdentity", "Sources", "addition_url", "recorded_commit"]

_FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _checkout_identity(root: Path) -> Optional[Dict[str, str]]:
    """Commit + digest of the working tree's differences from it, or None when git cannot say."""
    commit = git.head_commit(root)
    status = git.changes(root) if commit else None
    if commit is None or status is None:
        return None
    digest = hashlib.sha256()
    for entry in sorted(filter(None, status.split("\0"))):
        code, relative = entry[:2], entry[3:]
        if not is_build_output(relative):
            digest.update(code.encode() + b" ")
            file_digest(digest, root, relative)
    return {"kind": "git-checkout", "commit": commit, "changes": digest.hexdigest()}


def _local_identity(root: Path) -> Dict[str, str]:
    if (root / ".git").exists():
        identity = _checkout_identity(root)
        if identity is not None:
            return identity
    return {"kind": "folder", "content": checkout_digest(root, follow_outside=True)}


def _remote_ref(url: str, ref: Optional[str]) -> Dict[str, str]:
    """One `git ls-remote`: whether `ref` is a tag or a branch, and its commit."""
    wanted = ref or "HEAD"
    refs = git.remote_refs(url, wanted)
    if refs is None:
        return {"kind": "unknown"}
    tags = [commit for commit, name in refs if name in (f"refs/tags/{wanted}", f"refs/tags/{wanted}^{{}}")]
    if tags:
        return {"kind": "tag", "commit": tags[-1]}  # the peeled commit of an annotated tag comes last
    branches = [commit for commit, name in refs if name in (f"refs/heads/{wanted}", "HEAD")]
    if branches:
        return {"kind": "branch", "commit": branches[0]}
    # Neither: an abbreviated commit, which names its content like a full one.
    return {"kind": "commit"}


def recorded_commit(recorded: Any) -> Optional[str]:
    """The commit a recorded identity pins the source to: a tag's or a branch's, or a
    checkout's when it had no uncommitted changes (with changes, no commit describes it)."""
    if not isinstance(recorded, dict) or not _FULL_COMMIT.match(str(recorded.get("commit", ""))):
        return None
    if recorded.get("kind") == "git-checkout" and recorded.get("changes") != hashlib.sha256().hexdigest():
        return None
    return str(recorded["commit"])


class SourceIdentity:
    """The identity of one run's source, computed at most once (a remote look-up is slow)."""

    def __init__(self, direct_url: str) -> None:
        self.url = direct_url  # what follows `name @ ` in the requirement
        self._current: Optional[Dict[str, Any]] = None

    def _compute(self) -> Dict[str, Any]:
        url = self.url
        if url.startswith("file://"):
            return _local_identity(Path(unquote(urlsplit(url).path)))
        if not url.startswith("git+"):
            return {"kind": "archive"}  # an archive URL names fixed content, like a release does
        repository, ref = split_git_url(url)
        if ref is not None and _FULL_COMMIT.match(ref):
            return {"kind": "commit"}
        return _remote_ref(repository, ref)

    def current(self) -> Dict[str, Any]:
        if self._current is None:
            self._current = self._compute()
        return self._current

    def unchanged_since(self, recorded: Optional[Dict[str, Any]]) -> bool:
        """Whether the source is what it was when `recorded` was taken (see current())."""
        if not isinstance(recorded, dict) or recorded.get("kind") in (None, "unknown"):
            return False
        if recorded["kind"] in ("tag", "commit", "archive"):
            return True  # the requirement, compared beside this, names fixed content
        return self.current() == recorded


def addition_url(requirement: str) -> Optional[str]:
    """The source of an addition whose content can change under the same requirement: a project
    folder (absolute, as planner.additions gives it) or a git URL; None for a release by name."""
    try:
        url = TargetRequirement.parse(requirement).url  # NAME @ URL, as the target's is written
    except ValueError:
        url = requirement  # a URL or a folder alone, or a release by name
    if url.startswith("/"):
        return Path(url).as_uri()
    return url if url.startswith(("git+", "file://")) else None


class Sources:
    """The target's source and each addition's that can change under the same name: what a
    re-run compares (plan.json's `source` and `additions_source`)."""

    def __init__(self, target_url: str, additions: Sequence[str]) -> None:
        self.target = SourceIdentity(target_url)
        self.additions = {requirement: SourceIdentity(url) for requirement, url in
                          ((requirement, addition_url(requirement)) for requirement in additions) if url}

    def read_local(self) -> None:
        """Read each local tree now, before building writes into it."""
        for identity in (self.target, *self.additions.values()):
            if identity.url.startswith("file://"):
                identity.current()

    def record(self) -> Dict[str, Any]:
        recorded: Dict[str, Any] = {"source": self.target.current()}
        if self.additions:
            recorded["additions_source"] = {name: identity.current() for name, identity in self.additions.items()}
        return recorded

    def unchanged_since(self, recorded: Mapping[str, Any]) -> bool:
        """Whether every source is what it was when `recorded` (a record()) was taken."""
        if not self.target.unchanged_since(recorded.get("source")):
            return False
        added = recorded.get("additions_source") or {}
        return all(identity.unchanged_since(added.get(name) if isinstance(added, dict) else None)
                   for name, identity in self.additions.items())
