"""Credentials in URLs never leave the process in clear.

An index or source URL may carry them (`https://user:secret@host/simple`, a token as
`https://token@host/repo.git`, or in its query: `https://host/simple/?token=secret`).
Everything the tool shows or writes passes through `redact` (or `redact_data` for JSON): the
password, or a lone user name (a token), becomes `****`, as uv shows them, and so does every
value of a URL's query (which of its names hold a secret is the server's to say, not ours). The one use of the clear credentials is handing them to uv and
git (`credentials`), outside their command lines (uv.environment_for, git_urls).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, Optional
from urllib.parse import unquote, urlsplit, urlunsplit

from jetson_install.base.text import printable

__all__ = ["MASK", "CREDENTIALS_FIX", "redact", "redact_data", "Credentials", "credentials", "RedactingStream", "json_text"]

MASK = "****"
#: What to do when a mirror refuses (401, 403): the two ways credentials reach it, neither written anywhere.
CREDENTIALS_FIX = ("give the mirror's user and token in the URL you pass (USER:TOKEN@ before its host; they "
                   "are never written to a file or shown) or in ~/.netrc (machine HOST login USER password TOKEN)")

# scheme://userinfo@ ; the userinfo ends at the last '@' before the path, as URL parsers read it.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")


def _mask(match: "re.Match[str]") -> str:
    scheme, userinfo = match.group("scheme"), match.group("userinfo")
    user, _, password = userinfo.partition(":")
    if password:
        return f"{scheme}{user}:{MASK}@"
    # A user name without a password is a token, whether written TOKEN@ or TOKEN:@ (an empty one).
    if "ssh" in scheme.lower() or userinfo == MASK:
        return match.group(0)  # git@host: a login name, not a secret
    return f"{scheme}{MASK}@"


# scheme://HOST/PATH?QUERY: the query ends at whitespace, a fragment, or what closes a quotation
# around the URL in a message (quotes, brackets, backquotes).
_QUERY = re.compile(r"(?P<url>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?#]*)\?(?P<query>[^\s#\"'`<>()\[\]]+)")


def _mask_query(match: "re.Match[str]") -> str:
    fields = [name + "=" + MASK if sep else MASK
              for name, sep, _ in (field.partition("=") for field in match.group("query").split("&")) if name or sep]
    return f"{match.group('url')}?{'&'.join(fields)}"


def redact(text: str) -> str:
    """`text` with the secret of every URL's credentials, and every value of its query, replaced by ****."""
    if "@" in text:
        text = _USERINFO.sub(_mask, text)
    return _QUERY.sub(_mask_query, text) if "?" in text else text


def redact_data(data: Any) -> Any:
    """A JSON-like value with every string in it redacted."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact_data(key): redact_data(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(item) for item in data]
    return data


class Credentials(NamedTuple):
    url: str  # the URL without them
    username: str
    password: Optional[str]


def credentials(url: str) -> Optional[Credentials]:
    """The credentials in `url` (percent-decoded, as a server receives them), or None."""
    # Here, not at the top: every command imports this module to mask its output, and
    # urllib.parse is a cost on `--help` that only an install's index URLs need.

    parts = urlsplit(url)
    if parts.username is None:
        return None
    host = parts.netloc.rpartition("@")[2]
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    password = unquote(parts.password) if parts.password is not None else None
    return Credentials(bare, unquote(parts.username), password)


class RedactingStream:
    """A text stream that redacts what is written to it and shows its control characters as
    escapes (a device-tree model or an evidence field could otherwise redraw the terminal);
    everything else is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(redact(text), lines=True))
        return len(text)

    def write_controls(self, controls: str) -> None:
        """The tool's own control sequences (a live line's carriage return and erase), as they are."""
        self._stream.write(controls)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def json_text(data: Any) -> str:
    """What --json prints (and evidence files hold): indented, with URL credentials masked."""
    return json.dumps(redact_data(data), indent=2) + "\n"
