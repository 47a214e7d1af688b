"""Why uv failed, read from the text it wrote: its error line and cause chain.

A pure function over text, so it reads a captured stderr and streamed output alike.
uv writes `error: WHAT` followed by `  cause: WHY` lines, most general first
(`Caused by:` and `╰─▶` on a terminal), with indented continuation lines under a
cause (a hash's expected and computed values, a build backend's stderr). The
kinds below are the causes a fix can name; anything else is quoted, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from jetson_install.base.redact import redact

__all__ = ["UvFailure", "read_uv_failure", "cause_chain"]

_CAUSE_MARKERS = ("cause:", "Caused by:", "╰─▶", "×")
_NETWORK_MARKERS = (
    "connection refused", "error sending request", "dns error",
    "timed out", "could not connect", "tcp connect error", "503 service unavailable", "connection closed",
    "connection reset", "http status server error",
)
# An index or a file's server answering that the credentials are missing or wrong: uv says it in
# a hint ("could not be queried due to a lack of valid authentication credentials (401
# Unauthorized)") after calling the package "not found", or as a fetch's cause.
# Read per statement (uv wraps long lines at the terminal's width: COLUMNS).
_REFUSED = re.compile(r"(https?://[^\s()`]+).*?\((40[13]) (?:Unauthorized|Forbidden)\)|"
                      r"\((40[13]) (?:Unauthorized|Forbidden)\).*?(https?://[^\s()`]+)")
_STATEMENT = re.compile(r"\s(?:error|cause|hint|help|Caused by):\s|[×╰├│]")
_QUOTED_PATH = re.compile(r"`([^`]+)`")
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
# "the current Python version (3.8.18) does not satisfy Python>=3.10" (an interpreter), or "the
# requested Python version (>=3.8)" (--python-version 3.8): a requirement's Requires-Python, unmet.
_PYTHON_UNMET = re.compile(r"the (?:current|requested) Python version \((?:>=)?([^)\s]+)\) does not satisfy "
                           r"Python\s*([^\s,]+)")
_MAX_LINE = 600


@dataclass(frozen=True)
class UvFailure:
    """One uv failure: what kind it is and the one line that says so."""

    # disk-full, permission, cross-device, hash-mismatch, git-ref, seed-packages, network,
    # refused (401/403: the credentials), missing-file, requires-python (a Requires-Python the
    # resolution's Python does not meet), unsatisfiable; "other" is quoted as uv said it.
    kind: str
    summary: str  # uv's error line and its deepest cause, as one line
    # The ref, path or package the cause names, when it names one; for requires-python, the
    # Python resolved for and the requirement it misses: "3.8.18 >=3.10".
    subject: Optional[str] = None


def cause_chain(text: str) -> List[Tuple[str, List[str]]]:
    """uv's error line and each cause, with the continuation lines under each.

    Lines before the first `error:` (progress, warnings) and after a `hint:`/`help:` are
    not part of the chain.
    """
    chain: List[Tuple[str, List[str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not chain:
            if line.startswith("error:"):
                chain.append((line[len("error:"):].strip(), []))
            elif line.startswith("×"):
                chain.append((line[1:].strip(), []))
            continue
        if line.startswith(("hint:", "help:")) and raw == raw.lstrip():
            break
        marker = next((m for m in _CAUSE_MARKERS if line.startswith(m)), None)
        if marker is not None:
            chain.append((line[len(marker):].strip(), []))
        elif line and raw[:1].isspace():
            chain[-1][1].append(line)
        elif line.startswith("error:"):
            chain.append((line[len("error:"):].strip(), []))
    return chain


def read_uv_failure(text: str) -> UvFailure:
    """Classify uv's failure from its stderr (or streamed output)."""
    chain = cause_chain(text)
    if not chain:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return UvFailure("other", _clip(lines[-1] if lines else "uv failed without a message"))
    every = " ".join([message for message, _ in chain] + [extra for _, more in chain for extra in more])
    lowered = every.lower()
    os_errors = {int(number) for number in _OS_ERROR.findall(every)}
    head = chain[0][0]
    root, details = chain[-1]

    statements = _STATEMENT.split(" " + " ".join(text.split()))
    refused = next(filter(None, map(_REFUSED.search, statements)), None)
    if refused is not None:
        url, code = refused.group(1) or refused.group(4), refused.group(2) or refused.group(3)
        return UvFailure("refused", _clip(f"{redact(url)} refused the request (HTTP {code}): check the credentials"),
                         redact(url))
    if "no space left on device" in lowered or 28 in os_errors:
        return UvFailure("disk-full", _clip(f"{head}: no space left on device"), _target_path(chain))
    if "hash mismatch" in lowered:
        return UvFailure("hash-mismatch", _clip(f"{head}: {_hash_line(chain)}"))
    ref = _missing_git_ref(every)
    if ref is not None:
        return UvFailure("git-ref", _clip(f"{head}: no branch, tag or commit '{ref}' in the repository"), ref)
    if any(marker in lowered for marker in _NETWORK_MARKERS):
        return UvFailure("network", _clip(f"{head}: {root}"))
    if "seed packages" in head.lower() and ("not found in the package registry" in lowered
                                           or "no solution found" in lowered):
        return UvFailure("seed-packages", _clip(f"{head}: {_last_sentence(root)}"))
    if "cross-device link" in lowered or 18 in os_errors:
        return UvFailure("cross-device", _clip(f"{head}: {root}"), _target_path(chain))
    if "permission denied" in lowered or 13 in os_errors:
        return UvFailure("permission", _clip(f"{head}: {root}"), _target_path(chain))
    deepest = details[-1] if details else root
    if "no such file or directory" in deepest.lower():
        return UvFailure("missing-file", _clip(f"{head}: {deepest}"), _missing_path(deepest))
    if "no solution found" in lowered or "unsatisfiable" in lowered:
        unmet = _PYTHON_UNMET.search(" ".join(every.split()))
        kind = "requires-python" if unmet else "unsatisfiable"
        return UvFailure(kind, _clip(" ".join([f"{root}"] + details)), " ".join(unmet.groups()) if unmet else None)
    return UvFailure("other", _clip(head if deepest == head else f"{head}: {deepest}"))


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…"


def _hash_line(chain: List[Tuple[str, List[str]]]) -> str:
    """`Hash mismatch for X (expected sha256:…, computed sha256:…)`, all on one line."""
    for message, details in chain:
        if message.lower().startswith("hash mismatch"):
            values: List[str] = []
            label = ""
            for detail in details:
                if detail.endswith(":") and " " not in detail:
                    label = detail[:-1].lower()
                elif label:
                    values.append(f"{label} {detail}")
                    label = ""
            return f"{message} ({', '.join(values)})" if values else message
    return "hash mismatch"


def _missing_git_ref(text: str) -> Optional[str]:
    for pattern in (r"failed to fetch (?:branch or tag|branch|tag|commit) `([^`]+)`",
                    r"couldn't find remote ref refs/(?:tags|heads)/(\S+)",
                    r"did not match any file\(s\) known to git.*?'([^']+)'"):
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return match.group(1)
    return None


def _target_path(chain: List[Tuple[str, List[str]]]) -> Optional[str]:
    """The last path uv quoted (`…`) or named after `to`/`directory` in its causes."""
    for message, _ in reversed(chain):
        for candidate in reversed(_QUOTED_PATH.findall(message)):
            if candidate.startswith("/"):
                return str(candidate)
        match = re.search(r"\bto (/\S+?):? ", message)
        if match:
            return match.group(1)
    return None


def _missing_path(line: str) -> Optional[str]:
    match = re.search(r"No such file or directory:? '?([^']+)'?$", line)
    return match.group(1) if match else None


def _last_sentence(line: str) -> str:
    return line.split(", we can conclude")[0]
