"""Pure parsers for the files a Jetson root carries; no I/O here.

Each parser takes the file's bytes or text and returns a value or raises
InvalidReleaseFile. The formats follow real captures (tests/resources/boards/PROVENANCE.md) and
jetson_stats' parser (get_nvidia_l4t in jtop/core/jetson_variables.py, https://github.com/rbonghi/jetson_stats).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional, Tuple

from jetson_install.base.errors import BadInput, InvalidReleaseFile

__all__ = [
    "L4T",
    "parse_l4t",
    "parse_nv_tegra_release",
    "parse_dpkg_status",
    "parse_apt_source",
    "parse_compatible",
    "parse_cuda_version_json",
    "parse_cuda_version_txt",
]


@dataclass(frozen=True, order=True)
class L4T:
    """An L4T release such as 36.4.3 (R36, REVISION 4.3)."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


_L4T_TEXT = re.compile(r"^[Rr]?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?$")
# Jetson TK1's L4T R19 is the oldest release any Jetson ran
# (https://developer.nvidia.com/embedded/linux-tegra-archive): a lower major is a typo.
OLDEST_JETSON_MAJOR = 19


def parse_l4t(text: str) -> L4T:
    """Parse "36.4.3", "R36.4.3" or "36.4" (taken as 36.4.0), as given to --l4t or
    JETSON_L4T_VERSION. A major alone ("36") is refused: it spans channels (R36.3 and
    R36.4 need different wheels)."""
    match = _L4T_TEXT.match(text.strip())
    if not match:
        if re.match(r"^[Rr]?\d{1,3}$", text.strip()):
            raise BadInput("names only the major release; give major.minor.patch (the minor picks the channel)")
        raise BadInput("not an L4T release (expected a form like 36.4.3)")
    major, minor, patch = (int(part) if part else 0 for part in match.groups())
    if major < OLDEST_JETSON_MAJOR:
        raise BadInput(f"no Jetson ever ran L4T R{major} (the oldest release is R{OLDEST_JETSON_MAJOR})")
    return L4T(major, minor, patch)


# Line 1 only; the leading "# " may be missing in pasted copies, and "REVISION: 5"
# (no patch) means x.5.0 (jetson_stats keeps "32.5" keys). DATE, GCID and BOARD are
# ignored: R39 uses a 12-hour clock and BOARD says t186ref on Orin R35.
_RELEASE_LINE = re.compile(
    r"^\s*(?:#\s*)?R(\d{1,3})\s*\(release\)\s*,\s*REVISION:\s*(\d{1,3})(?:\.(\d{1,3}))?(?=\s*(?:,|$))"
)
# A line this long is not a release banner; refuse before running the regex on it.
_MAX_LINE = 4096


def parse_nv_tegra_release(data: bytes) -> Tuple[L4T, Optional[str]]:
    """Return the L4T release and the EABI (architecture) from etc/nv_tegra_release."""
    try:
        # utf-8-sig: a copy saved by a Windows editor starts with a byte-order mark.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidReleaseFile("is not text") from None
    lines = text.splitlines()
    # Trailing NULs are padding (a file copied from a fixed-size block); a NUL inside the line is not.
    first = lines[0].rstrip("\x00") if lines else ""
    if not first.strip():
        raise InvalidReleaseFile("is empty")
    if len(first) > _MAX_LINE or "\x00" in first:
        raise InvalidReleaseFile("is not an L4T release banner")
    match = _RELEASE_LINE.match(first)
    if not match:
        shown = first.strip()[:80]
        raise InvalidReleaseFile(f"has no 'R<major> (release), REVISION: <minor>.<patch>' in line 1 ({shown!r})")
    major, minor, patch = match.groups()
    eabi = re.search(r"EABI:\s*([A-Za-z0-9_]+)", first)
    return L4T(int(major), int(minor), int(patch or 0)), eabi.group(1) if eabi else None


def parse_dpkg_status(text: str, package: str = "nvidia-l4t-core") -> Optional[L4T]:
    """The installed version of `package` from var/lib/dpkg/status, e.g. 36.4.3-20250107174145."""
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(
            (key.strip().lower(), value.strip())
            for key, _, value in (line.partition(":") for line in stanza.splitlines() if line[:1] not in (" ", "\t"))
        )
        if fields.get("package") != package:
            continue
        if "installed" not in fields.get("status", "").split():
            continue
        version = re.match(r"(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?", fields.get("version", ""))
        if version:
            major, minor, patch = version.groups()
            return L4T(int(major), int(minor), int(patch or 0))
    return None


def parse_apt_source(text: str) -> Optional[Tuple[int, int]]:
    """L4T major.minor from nvidia-l4t-apt-source.list (`.../jetson/common r36.4 main`)."""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = re.search(r"/jetson/\S+\s+r(\d{1,3})\.(\d{1,3})\b", line)
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


def parse_compatible(data: bytes) -> Tuple[str, ...]:
    """The NUL-separated entries of proc/device-tree/compatible."""
    text = data.decode("utf-8", "replace")
    return tuple(entry.strip() for entry in text.split("\x00") if entry.strip())


def _major_minor(version: str) -> Optional[str]:
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    return f"{int(match.group(1))}.{int(match.group(2))}" if match else None


def parse_cuda_version_json(text: str) -> Optional[str]:
    """major.minor from usr/local/cuda/version.json; the top-level version may be
    date-stamped (12.6.20241114), so only major.minor is kept, as jetson-containers does
    (https://github.com/dusty-nv/jetson-containers)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for key in ("cuda", "cuda_cudart", "cuda_nvcc"):
        entry = data.get(key)
        if isinstance(entry, dict) and isinstance(entry.get("version"), str):
            found = _major_minor(entry["version"])
            if found:
                return found
    return None


def parse_cuda_version_txt(text: str) -> Optional[str]:
    """major.minor from usr/local/cuda/version.txt (CUDA 10.2 and older): 'CUDA Version 10.2.89'."""
    match = re.search(r"CUDA Version\s+(\d+\.\d+)", text)
    return _major_minor(match.group(1)) if match else None
