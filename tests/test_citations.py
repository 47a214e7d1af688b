"""Every fact in the project names a public source; users do not have the notes it was gathered in."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
# What git, Python and the tools write beside the sources (a worktree's .git is a file).
SKIPPED = {".git", "__pycache__", ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
# Build outputs, only where the build writes them: a package folder of that name is source.
SKIPPED_AT_TOP = {"build", "dist"}
# Built from parts so that this file does not cite what it forbids: the notes' folder, and a
# section sign after a space or parenthesis ("platform-detection.md \u00a75.1", "(\u00a73.5)",
# "reference \u00a72"), which is how the notes are cited; public sources are cited by URL.
PRIVATE_CITATION = re.compile("shared/" + "reference" + r"|(?:^|[\s(\[])" + "\u00a7")


def project_files() -> List[Path]:
    files: List[Path] = []
    for directory, subdirectories, names in os.walk(ROOT):
        top = Path(directory) == ROOT
        subdirectories[:] = sorted(
            name for name in subdirectories
            if name not in SKIPPED and not (top and name in SKIPPED_AT_TOP) and not name.startswith(".venv")
            and not name.endswith(".egg-info")
        )
        files.extend(Path(directory, name) for name in sorted(names) if name not in SKIPPED)
    return files


def private_citations(path: Path) -> List[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # a binary file cites nothing
        return []
    relative = path.relative_to(ROOT)
    return [
        f"{relative}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if PRIVATE_CITATION.search(line)
    ]


def test_no_file_cites_private_reference_notes() -> None:
    found = [hit for path in project_files() for hit in private_citations(path)]
    assert not found, "cite the public source (a URL or a repository path) instead:\n" + "\n".join(found)


def test_the_pattern_catches_every_form(tmp_path: Path) -> None:
    assert PRIVATE_CITATION.search("(see " + "shared/" + "reference/torch-indexes.md)")
    assert PRIVATE_CITATION.search("(platform-detection.md " + "\u00a7" + "5.1)")
    assert PRIVATE_CITATION.search("(platform-detection.md F7, " + "\u00a7" + "7 item 14)")
    assert PRIVATE_CITATION.search("attributes a doctor reads (reference " + "\u00a7" + "3.5)")
    assert PRIVATE_CITATION.search("the loaded .so (" + "\u00a7" + "3.5)")
    assert not PRIVATE_CITATION.search("(https://github.com/rbonghi/jetson_stats, README.md)")


def test_package_folders_named_like_build_outputs_are_read() -> None:
    files = project_files()
    assert ROOT / "jetson_install" / "planning" / "bitsandbytes_source.py" in files
    assert ROOT / "jetson_install" / "probes" / "bnb_probe.py" in files
    assert not [path for path in files if path.relative_to(ROOT).parts[0] in SKIPPED_AT_TOP | {".venv", ".git"}]
