"""The one PEP 440 rule the vendor builds need: a pre-release counts as a release.

NVIDIA's Jetson torch builds are pre-releases with local labels (2.5.0a0+872d972e41.nv24.08);
`==2.5.0a0` ignores the label, and `>=2.2` must accept the build once it is chosen, so
every comparison passes prereleases=True, as PEP 440 says installed pre-releases are accepted
(https://packaging.python.org/en/latest/specifications/version-specifiers/#handling-of-pre-releases).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

__all__ = ["satisfies"]


def satisfies(version: str, specifier: str) -> bool:
    """Whether `version` meets `specifier` (">=2.2", "<2", "==2.8.0"); raises packaging's
    InvalidVersion or InvalidSpecifier for malformed input."""
    return SpecifierSet(specifier).contains(Version(version), prereleases=True)
