"""wheels-index.toml variants whose jp6-cu126 source describes the stub vendor builds.

The real file's jp6-cu126 source (its preferred set, sets and known builds) is replaced by
one that lists the stub builds of the loopback vendor index, with their real sha256, so an
install against that index resolves, checks identities and records them as on a board.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from .stub_projects import VENDOR_PINS, VENDOR_TORCH

__all__ = ["stub_catalog_text", "JP6_SOURCE"]

# The jp6-cu126 primary source, from its index line to the comments above the next table.
JP6_SOURCE = re.compile(r'index = "https://pypi\.jetson-ai-lab\.io/jp6/cu126/\+simple/"\n.*?(?=\n(?:#[^\n]*\n)*\[\[channels)', re.S)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stub_catalog_text(
    real: str,
    vendor_dir: Path,
    *,
    sets: Optional[Sequence[Mapping[str, str]]] = None,
    preferred: str = VENDOR_TORCH,
    known: Sequence[str] = ("torch", "torchvision", "torchaudio", "bitsandbytes"),
    prefix_only: Sequence[str] = (),
    companions: Sequence[Tuple[str, Sequence[str]]] = (),
    apt_provides: Mapping[str, Sequence[str]] = {},
) -> str:
    """The catalog text with jp6-cu126 pointing at the stub builds in `vendor_dir`.

    `known` names the packages listed as known builds (the rest are "unlisted"); those in
    `prefix_only` are listed by their 16-digit sha256 prefix, as a `+f/` URL gives it.
    `companions`: (requirement, the sonames it must provide); `apt_provides`: the same for apt
    packages the sets name.
    """
    sets = sets if sets is not None else [dict(VENDOR_PINS)]
    set_lines = ",\n".join("  { " + ", ".join(f'{k} = "{v}"' for k, v in s.items()) + " }" for s in sets)
    build_lines = []
    for path in sorted(vendor_dir.glob("*.whl")):
        name = path.name.split("-")[0]
        if name not in known:
            continue
        digest = _sha256(path)
        hash_part = f'sha256_prefix = "{digest[:16]}"' if name in prefix_only else f'sha256 = "{digest}"'
        cuda = ', cuda = "12.6"' if name == "torch" else ""
        build_lines.append(f'  {{ file = "{path.name}", {hash_part}{cuda} }}')
    source = (
        'index = "https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/"\n'
        f'preferred = "{preferred}"\n'
        "prereleases = true\n"
        f"sets = [\n{set_lines},\n]\n"
        "builds = [\n" + "".join(line + ",\n" for line in build_lines) + "]\n"
        + (f"companions = [{', '.join(_companion(c, provides) for c, provides in companions)}]\n" if companions else "")
        + 'numpy = "<2"\n'
        'apt = ["libopenblas-dev", "libomp-dev"]\n'
        + (f"apt_provides = {{ {', '.join(f'{k} = {_strings(v)}' for k, v in apt_provides.items())} }}\n"
           if apt_provides else "")
    )
    text, count = JP6_SOURCE.subn(source, real)
    assert count == 1, "the jp6-cu126 source was not found in wheels-index.toml"
    return text


def _strings(values: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{value}"' for value in values) + "]"


def _companion(requirement: str, provides: Sequence[str]) -> str:
    return f'{{ requirement = "{requirement}", provides = {_strings(provides)} }}'
