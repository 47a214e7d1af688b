"""The target's requirement as a value: `NAME[EXTRA,…] @ URL`, a direct reference
(https://packaging.python.org/en/latest/specifications/dependency-specifiers/), by which the
target is installed from its source, never by name from an index. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

__all__ = ["TargetRequirement"]


@dataclass(frozen=True)
class TargetRequirement:
    """The target as uv is given it: `NAME[EXTRAS] @ URL`."""

    name: str  # the distribution
    extras: Tuple[str, ...]
    url: str  # git+URL@REF, an archive's URL, or file:// for a checkout or a built wheel

    @classmethod
    def parse(cls, text: str) -> "TargetRequirement":
        """`NAME[EXTRA,…] @ URL` read back; ValueError for text of another form."""
        head, at, url = text.partition(" @ ")
        name, bracket, rest = head.partition("[")
        if not at or not name or not url.strip() or (bracket and not rest.endswith("]")):
            raise ValueError(f"{text!r} is not NAME[EXTRAS] @ URL")
        return cls(name, tuple(rest[:-1].split(",")) if bracket else (), url.strip())

    def __str__(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.name}{extras} @ {self.url}"
