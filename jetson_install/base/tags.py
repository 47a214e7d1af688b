"""The wheel tags a target installs, from its Python, architecture and glibc: one generator
for every resolution (the vendor index's listings, a lock's files) and uv's --python-platform.

A manylinux_2_N wheel needs glibc 2.N or newer (PEP 600: https://peps.python.org/pep-0600/);
the board's glibc is its Ubuntu's, which platform-data.toml records.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

__all__ = ["wheel_tags", "python_platform", "platform_glibc", "wheel_rank"]

# The oldest manylinux level (PEP 600): manylinux2014 is manylinux_2_17 by another name.
_OLDEST_MINOR = 17


def _glibc(glibc: str) -> Tuple[int, int]:
    major, _, minor = glibc.partition(".")
    return int(major), int(minor)


def wheel_tags(python: str, arch: str, glibc: str) -> List[Tag]:
    """The tags CPython `python` ("3.10") on Linux `arch` with glibc `glibc` ("2.35") installs,
    most specific first (the order pip and uv prefer)."""
    major, newest = _glibc(glibc)
    platforms = [f"manylinux_{major}_{minor}_{arch}" for minor in range(newest, _OLDEST_MINOR - 1, -1)]
    platforms += [f"manylinux2014_{arch}", f"linux_{arch}"]
    version = tuple(int(part) for part in python.split("."))
    # `cp311-none-any` installs on CPython 3.11 as pip's and uv's own tag lists have it.
    interpreter = "cp" + "".join(str(part) for part in version[:2])
    return list(cpython_tags(version, platforms=platforms)) + list(compatible_tags(version, interpreter, platforms))


def python_platform(arch: str, glibc: str) -> str:
    """uv's --python-platform for that target: "aarch64-manylinux_2_35"."""
    major, minor = _glibc(glibc)
    return f"{arch}-manylinux_{major}_{minor}"


def platform_glibc(platform: str) -> Optional[str]:
    """The glibc of a --python-platform `python_platform` wrote ("aarch64-manylinux_2_35" -> "2.35")."""
    _, _, manylinux = platform.partition("-manylinux_")
    major, _, minor = manylinux.partition("_")
    return f"{major}.{minor}" if major.isdigit() and minor.isdigit() else None


def wheel_rank(filename: str, tags: Sequence[Tag]) -> Optional[int]:
    """The rank of the wheel's best tag among `tags` (lower is better), or None when it does not install."""
    try:
        file_tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return None
    ranks = [tags.index(tag) for tag in file_tags if tag in tags]
    return min(ranks) if ranks else None
