"""Fetch one file a lock names, over http(s) or from a file: URL, for the wheelhouse.

Kept apart from the vendor index listings so it stays small; it is the only place the
wheelhouse talks HTTP (through requests, as the index listings do).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

from jetson_install.errors import StepFailed
from jetson_install.redact import redact

__all__ = ["fetch_file", "fetch_text"]

#: Seconds to connect, and to wait for each read: an index that is down costs seconds, never a hang.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0


def fetch_file(url: str, destination: Path) -> None:
    """Write the file at `url` to `destination`, streamed (torch is 0.5-2 GB)."""
    if urlsplit(url).scheme == "file":
        try:
            shutil.copyfile(unquote(urlsplit(url).path), destination)
        except OSError as exc:
            raise _failed(url, exc.strerror or str(exc)) from None
        return
    import requests

    try:
        with requests.get(url, stream=True, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)) as response:
            if response.status_code != 200:
                raise _failed(url, f"HTTP {response.status_code}")
            with destination.open("wb") as stream:
                for chunk in response.iter_content(chunk_size=1 << 20):
                    stream.write(chunk)
    except requests.RequestException as exc:
        raise _failed(url, type(exc).__name__) from None


def fetch_text(url: str) -> str:
    """A small text file (a wheelhouse's lock) from `url`."""
    if urlsplit(url).scheme in ("", "file"):
        path = Path(unquote(urlsplit(url).path))
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise _failed(url, exc.strerror or str(exc)) from None
    import requests

    try:
        response = requests.get(url, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    except requests.RequestException as exc:
        raise _failed(url, type(exc).__name__) from None
    if response.status_code != 200:
        raise _failed(url, f"HTTP {response.status_code}")
    return response.text


def _failed(url: str, why: str) -> StepFailed:
    return StepFailed("download", f"could not fetch {redact(url)} ({why})",
                      "check that the index or wheelhouse answers, then run the command again")
