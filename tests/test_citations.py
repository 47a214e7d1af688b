"""Every fact in the project names a public source; users do not have the notes it was gathered in."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {".git", "__pycache__", "build", "dist"}
# Built from parts so that this file does not cite what it forbids.
PRIVATE_CITATION = re.compile("shared/" + "reference" + r"|\b[\w.-]+\.md\s*" + "\u00a7")


def project_files() -> List[Path]:
    files = []
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = sorted(
            name for name in subdirectories
            if name not in SKIPPED_DIRS and not name.startswith(".venv") and not name.endswith(".egg-info")
        )
        files.extend(Path(directory, name) for name in sorted(names))
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


def test_the_pattern_catches_both_forms(tmp_path: Path) -> None:
    assert PRIVATE_CITATION.search("(see " + "shared/" + "reference/torch-indexes.md)")
    assert PRIVATE_CITATION.search("(platform-detection.md " + "\u00a7" + "5.1)")
    assert not PRIVATE_CITATION.search("(https://github.com/rbonghi/jetson_stats, README.md)")
