"""A value with where it came from: a flag, its environment variable, the config file or a
default. Kept together so that `plan` and the errors can say why a value was used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Sourced", "DEFAULT", "CONFIG_PREFIX"]

T = TypeVar("T")

#: The source of a value that nothing gave: the tool's own default.
DEFAULT = "default"
#: How a value from the configuration file names its source: "config FILE".
CONFIG_PREFIX = "config "


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """`Sourced[Optional[str]]` for an option that may be absent (its source then names the
    default that applies); `Sourced[str]` where a value was given."""

    value: T
    source: str  # "--l4t", "JETSON_L4T_VERSION", "config /etc/…/config.toml", "uv default"
