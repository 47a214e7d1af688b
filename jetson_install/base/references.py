"""Direct references, read once: `git+URL@REF` split into the repository and its ref.

Pure string rules, so the planner, the fixes and the source's identity (which runs git) all
read a git URL the same way without the planner loading what runs processes.
"""

from __future__ import annotations

from typing import Optional, Tuple

__all__ = ["split_git_url"]


def split_git_url(url: str) -> Tuple[str, Optional[str]]:
    """`git+URL@REF` -> (URL, REF); REF None when the URL names none. An `@` before the path
    is a user name (`git+https://user@host/repo`), not a ref."""
    bare = url[len("git+"):] if url.startswith("git+") else url
    scheme, _, rest = bare.partition("://")
    path, at, ref = rest.rpartition("@")
    if at and "/" in path:
        return f"{scheme}://{path}", ref
    return bare, None
