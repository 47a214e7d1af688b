"""A lock's target from its source, on a thread of its own: checked out at one commit, checked
(no uncommitted changes: the commit is the lock's name for it) and built once into the wheel
that goes beside the lock.

None of it needs the vendor set, so it runs while the vendor index is read (make_lock); the
rest is resolved while it builds, from the metadata pyproject.toml states, kept only if the
built wheel, whose metadata is what boards install, says the same (declared_wheel.py). The thread only
starts git and uv: an interruption of the lock ends them and what they started, a build
backend included (`stop`), as the doctor ends its probes. They stay in the tool's process group
and session, so a kill of that whole group reaches them too, and ssh can ask on the terminal.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Optional, Tuple, TypeVar
from urllib.parse import unquote, urlsplit

from jetson_install.base.errors import BadInput, StepFailed
from jetson_install.base.git_urls import split_git_url
from jetson_install.base.redact import redact
from jetson_install.tools import git, runner, uv

__all__ = ["TargetBuild"]

T = TypeVar("T")


class TargetBuild:
    """The target's checkout, then its build, started at once on a daemon thread (an interrupted
    lock does not wait for it); `source` and `wheel` wait for each and raise what it raised.

    A clone in `work` is built at once; the user's own checkout (a file:// URL) only once
    `may_build` is called (after the vendor index answered): a lock that fails before that
    leaves no build of its own in the user's tree, as none did when the steps ran in turn."""

    def __init__(self, url: str, default_index: Optional[str], work: Path) -> None:
        self._checked: "Future[Tuple[Path, Optional[str]]]" = Future()
        self._built: "Future[Path]" = Future()
        self._cancel = threading.Event()
        self._go = threading.Event()
        if not url.startswith("file://"):
            self._go.set()

        def run() -> None:
            # No child starts once `stop` has run, and `stop` ends what each started too (uv's
            # build backend, git's helpers).
            with runner.cancelled_with(self._cancel):
                _settle(self._checked, lambda: _checkout(url, work))
                failed = self._checked.exception()
                if failed is None:
                    source = self._checked.result()[0]
                    self._go.wait()
                    _settle(self._built, lambda: _build(source, default_index, work))
                else:
                    self._built.set_exception(failed)

        # sysconfig's first read is not thread-safe before Python 3.12
        # (https://github.com/python/cpython/issues/92452): uv's binary, found through it here,
        # and the vendor index's wheel tags, read meanwhile, would both be first. Read it now.
        import sysconfig

        sysconfig.get_config_vars()
        self._thread = threading.Thread(target=run, name="lock-target", daemon=True)

    def start(self) -> None:
        """Start the thread (apart from making it, so that whoever stops it holds it first)."""
        self._thread.start()

    def source(self) -> Tuple[Path, Optional[str]]:
        """The checked-out source and its commit (None: a folder that is not a git checkout)."""
        return self._checked.result()

    def may_build(self) -> None:
        """Let the build of a local checkout start (a clone's has already)."""
        self._go.set()

    def wheel(self) -> Path:
        self.may_build()
        return self._built.result()

    def stop(self) -> None:
        """End git or uv if one runs, with what it started, start none after, and wait for the
        thread (if it started): the work folder it writes into is removed next."""
        runner.end_children(self._cancel)
        self._go.set()  # a build that waited is not started: the cancel is set
        if self._thread.ident is not None:
            self._thread.join()


def _settle(future: "Future[T]", make: Callable[[], T]) -> None:
    try:
        future.set_result(make())
    except BaseException as exc:  # handed to the thread that waits for it
        future.set_exception(exc)


def _checkout(url: str, work: Path) -> Tuple[Path, Optional[str]]:
    """The source of the target's `url` (a clone in `work`, at its ref) and its commit."""
    if url.startswith("git+"):
        repository, ref = split_git_url(url)
        checkout = work / "source"
        clone = git.clone(repository, checkout, timeout=600)
        if not clone.ok:
            raise StepFailed("build", f"git clone {redact(repository)} failed: {redact(git.failure(clone))}",
                             _clone_fix(repository))
        if ref:
            switched = git.checkout(checkout, ref)
            if not switched.ok:
                raise StepFailed("build", f"{redact(repository)} has no ref {ref}: {git.failure(switched)}",
                                 "pass a tag, branch or commit the repository has: --ref REF")
        source = checkout
    elif url.startswith("file://"):
        source = Path(unquote(urlsplit(url).path))
    else:
        raise BadInput(f"a lock builds the source once from git or a checkout, and {url} is an archive",
                       fix="pass the repository URL or a checkout as --source")
    commit = git.head_commit(source) if (source / ".git").exists() else None
    if commit is not None:
        from jetson_install.envs.source_tree import is_build_output

        status = git.changes(source)
        edited = sorted(entry[3:] for entry in (status or "").split("\0") if entry and not is_build_output(entry[3:]))
        if status is None or edited:
            # The lock names a commit as its source's identity: no commit describes an edited tree.
            raise BadInput(f"--source {source} has uncommitted changes ({', '.join(edited[:3]) or 'git cannot say'}"
                           f"{', ...' if len(edited) > 3 else ''}), so no commit names what the lock would build",
                           fix=f"commit or stash them (git -C {source} status), then run the lock again")
    return source, commit


def _clone_fix(repository: str) -> str:
    if urlsplit(repository).scheme == "ssh":
        # ssh asks for a key's passphrase or about a new host key on the terminal; git's own
        # ls-remote, run there, asks the same and says whether this account may read the repository.
        return (f"make sure ssh offers a key the host accepts (ssh-add -l lists the agent's keys; ssh-add adds "
                f"yours) and knows the host's key, check with: git ls-remote {redact(repository)}; then run the lock again")
    return "check the --source URL and the network, then run the lock again"


def _build(source: Path, default_index: Optional[str], work: Path) -> Path:
    """The target built once into a wheel in `work`."""
    built = work / "wheel"
    result = runner.run_uv(uv.build_wheel_argv(sys.executable, str(source), str(built), default_index, isolation=True),
                           indexes=[default_index] if default_index else [])
    wheels = sorted(built.glob("*.whl"))
    if not result.ok or not wheels:
        raise StepFailed("build", f"building {source} into a wheel failed: {uv.summarize_failure(result)}",
                         "fix the build error above, then run the lock again")
    return wheels[0]
