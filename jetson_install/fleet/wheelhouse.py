"""A wheelhouse: every file of a lock in one folder, with a PEP 503 index beside them and
the lock itself, so boards without internet (or a whole fleet, over http) install from it."""

from __future__ import annotations

import html
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote

from packaging.utils import canonicalize_name

from jetson_install.base.errors import BadInput, IndexRefused, IndexUnreachable, RegistryError, StepFailed
from jetson_install.base.outputs import replace_file
from jetson_install.catalog.lock_file import (
    FILES_DIR,
    SIMPLE_DIR,
    WHEELHOUSE_LOCK,
    Lock,
    Locked,
    file_name_problem,
    file_sha256,
    render_lock,
)
from jetson_install.base.oci_ref import is_oci, parse_reference
from jetson_install.tools.index import Stalled, fetch_file, project_files
from jetson_install.tools.oci_mirror import blob_reference, fetch_by_reference

__all__ = ["wheelhouse_pages", "fill_wheelhouse", "tool_install_command"]


def wheelhouse_pages(lock: Lock, tool: Sequence[Locked] = ()) -> Dict[str, str]:
    """The PEP 503 pages of a wheelhouse (path under simple/ -> html), with sha256 fragments:
    the lock's files and, with `tool`, jetson-install's own."""
    projects: Dict[str, List[Locked]] = {}
    for entry in _unique(list(lock.entries) + list(tool)):
        projects.setdefault(canonicalize_name(entry.name), []).append(entry)
    pages = {"index.html": _page("Simple index", [(f"{name}/", name) for name in sorted(projects)])}
    for name, entries in projects.items():
        pages[f"{name}/index.html"] = _page(
            f"Links for {name}",
            [(f"../../{FILES_DIR}/{quote(entry.filename)}#sha256={entry.sha256}", entry.filename) for entry in entries])
    return pages


def _page(title: str, links: Sequence[Tuple[str, str]]) -> str:
    body = "\n".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a><br/>' for href, text in links)
    return f"<!DOCTYPE html>\n<html><head><title>{html.escape(title)}</title></head><body>\n{body}\n</body></html>\n"


def _unique(entries: Sequence[Locked]) -> List[Locked]:
    """One entry per file: the tool and the environment may share a dependency's file."""
    return list({entry.filename: entry for entry in entries}.values())


def tool_install_command(directory: Path) -> str:
    """The one command that installs jetson-install from a wheelhouse with no network: a venv
    of its own (pip's --no-index and --find-links; the system Python's ensurepip brings pip)."""
    venv = "~/.local/jetson-install"  # unquoted: the shell expands ~; DIR is the user's, quoted
    return (f"python3 -m venv {venv} && {venv}/bin/pip install --no-index --find-links "
            f"{shlex.quote(str(directory / FILES_DIR))} "
            f"jetson-install && mkdir -p ~/.local/bin && ln -sfn {venv}/bin/jetson-install ~/.local/bin/")


def fill_wheelhouse(lock: Lock, directory: Path, tool: Sequence[Locked] = (),
                    mirrors: Sequence[str] = (), allow_insecure: bool = False) -> Dict[str, Any]:
    """Download every file of `lock` (and of `tool`, jetson-install with its dependencies for the
    board) into `directory`/files (checking each sha256), write the PEP 503 index under simple/
    and the wheelhouse's own lock.txt. Files already there are kept. A vendor file its URL does
    not deliver is taken from the first of `mirrors` that serves it with the lock's sha256."""
    files = directory / FILES_DIR
    files.mkdir(parents=True, exist_ok=True)
    _confined(directory, files)
    fetched = 0
    # A source that stalled or did not answer once is not asked again in this run: behind a
    # mirror that stalls, each file would wait out the read timeout before the next source.
    passed_over: Dict[str, str] = {}
    for entry in _unique(list(lock.entries) + list(tool)):
        problem = file_name_problem(entry)
        if problem is not None:  # parse_lock refuses these; a Lock made otherwise is held to it too
            raise BadInput(f"{entry.name}: {problem}", fix="make the lock again: jetson-install lock --output FILE")
        path = files / entry.filename
        if path.is_file() and not path.is_symlink() and file_sha256(path) == entry.sha256:
            continue
        partial = path.with_name(path.name + ".part")
        _download(entry, partial, mirrors if entry.origin == "vendor" else (), allow_insecure, passed_over)
        partial.replace(path)
        fetched += path.stat().st_size
    for relative, text in wheelhouse_pages(lock, tool).items():
        page = directory / SIMPLE_DIR / relative
        page.parent.mkdir(parents=True, exist_ok=True)
        _confined(directory, page.parent)
        replace_file(page, text)
    replace_file(directory / WHEELHOUSE_LOCK, render_lock(lock))
    return {"schema_version": 1, "command": "wheelhouse", "directory": str(directory), "files": len(lock.entries),
            "downloaded_bytes": fetched, "index": (directory / SIMPLE_DIR).as_uri(),
            "lock": str(directory / WHEELHOUSE_LOCK), "target": lock.target,
            "warnings": [f"{source} passed over for the rest of the run: {why}" for source, why in passed_over.items()],
            "tool": {"files": len(tool), "install": tool_install_command(directory)} if tool else None}


def _download(entry: Locked, partial: Path, mirrors: Sequence[str], allow_insecure: bool = False,
              passed_over: Optional[Dict[str, str]] = None) -> None:
    """`entry`'s file into `partial`, from its URL or else the first of `mirrors` that serves
    the same file name with the lock's sha256 (a vendor index that is down, or lost it); an OCI
    registry is asked for the blob of that sha256, whatever name it would give it. A mirror
    that does not answer, or a source that stalls, joins `passed_over` (source -> why), which
    later files skip."""
    tried: List[str] = []
    first: Optional[StepFailed] = None
    passed_over = {} if passed_over is None else passed_over
    for source in (None, *mirrors):
        if source is not None and source in passed_over:
            tried.append(f"{source}: passed over ({passed_over[source]})")
            continue
        if source is not None and is_oci(source):
            partial.unlink(missing_ok=True)
            blob = blob_reference(parse_reference(source, "--mirror"), entry.sha256)
            try:
                fetch_by_reference(blob, partial, allow_insecure)
                return
            except RegistryError as exc:  # its bytes are checked against the sha256 as they arrive
                partial.unlink(missing_ok=True)
                tried.append(exc.message)
                continue
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
        try:
            url = entry.url if source is None else next(
                (listed.url for listed in project_files(source, entry.name) if listed.filename == entry.filename), None)
        except (IndexUnreachable, IndexRefused) as exc:
            tried.append(f"{source}: {exc.message}")
            if isinstance(exc, IndexUnreachable) and source is not None:
                passed_over[source] = exc.message
            continue
        if url is None:
            tried.append(f"{source}: does not list {entry.filename}")
            continue
        # Whatever was there (a link planted to redirect the write) goes; the download is a new file.
        partial.unlink(missing_ok=True)
        try:
            fetch_file(url, partial)
        except StepFailed as failure:
            partial.unlink(missing_ok=True)
            first = first or failure
            tried.append(failure.message)
            if isinstance(failure, Stalled) and source is not None:
                passed_over[source] = failure.message
            continue
        except BaseException:
            # An interrupted download leaves nothing half written; the files already complete
            # stay, and a re-run starts at this one.
            partial.unlink(missing_ok=True)
            raise
        if file_sha256(partial) == entry.sha256:
            return
        partial.unlink()
        first = first or StepFailed("download", f"{url} does not have the sha256 the lock names ({entry.sha256})",
                                    "the index changed the file since the lock was made: make the lock again")
        tried.append(f"{url}: refused, another sha256")
    assert first is not None  # the lock's own URL was tried first
    if not mirrors:
        raise first
    raise StepFailed("download", f"no source served {entry.filename} with the lock's sha256 ({'; '.join(tried)})",
                     first.fix)


def _confined(directory: Path, inner: Path) -> None:
    """`inner` is a real folder inside `directory`: a link there (files/ -> ~/.ssh) would
    send the wheelhouse's writes elsewhere."""
    if inner.resolve() != directory.resolve().joinpath(inner.relative_to(directory)):
        raise BadInput(f"{inner} is a link out of the wheelhouse {directory}; the wheelhouse writes only inside it",
                       fix=f"remove {inner}, or pass another DIR")


