"""The command blocks of README.md and docs/, and a shell that runs them as written.

A block fenced as ```sh holds commands a user types; every such block is run by a test
(tests/test_docs_blocks.py), exactly as it is written, in `board_shell`: a bash whose
environment stands in for a Jetson the way the rest of the suite does it. The commands are
never rewritten; what they find is: the documented variables point `--root` at a sample root
and the indexes at loopback ones, the catalog (JETSON_INSTALL_WHEELS_INDEX) describes the stub
vendor builds and takes OBLITERATUS from the stub git repository, HOME and the XDG folders are
the test's own, and `jetson-install` on PATH is this checkout's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from . import isolated_env

__all__ = ["TOP", "Block", "blocks", "doc_files", "block", "board_env", "run_block", "SAMPLE"]

TOP = Path(__file__).resolve().parent.parent.parent
SAMPLE = TOP / "jetson_install" / "board" / "samples" / "agx-orin-64gb-jp6.2"
OBLITERATUS_GIT = "https://github.com/elder-plinius/OBLITERATUS"
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.S | re.M)
_HEADING = re.compile(r"^#+ (.+)$", re.M)


@dataclass(frozen=True)
class Block:
    file: str  # relative to the top of the checkout
    heading: str  # the heading the block is under
    language: str  # its info string: sh (commands), text, toml, json ...
    text: str

    @property
    def name(self) -> str:
        return f"{self.file} / {self.heading}"


def doc_files() -> List[Path]:
    return [TOP / "README.md", *sorted((TOP / "docs").glob("*.md"))]


def blocks() -> List[Block]:
    found = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            headings = _HEADING.findall(text[:match.start()])
            found.append(Block(str(path.relative_to(TOP)), headings[-1] if headings else "", match.group(1).strip(),
                               match.group(2)))
    return found


def block(file: str, heading: str, index: int = 0) -> Block:
    """The `index`th sh block under `heading` in `file`."""
    matching = [b for b in blocks() if b.file == file and b.heading == heading and b.language == "sh"]
    assert len(matching) > index, f"{file} has no sh block number {index} under '{heading}'"
    return matching[index]


def board_env(tmp_path: Path, vendor_url: str, public_url: str, catalog: Path, git_repo: Path,
              extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of a board's shell, as the suite stands one in (see the module's text);
    `catalog` is support.gate_stubs' (the doctor's stubs pass the strict gate)."""
    env = isolated_env(tmp_path, fast_fail=True)
    # OBLITERATUS' git URL, as the catalog has it, is fetched from the stub repository (git's own
    # rewriting, which uv's git fetches follow too).
    git_config = tmp_path / "gitconfig"
    git_config.write_text(f'[url "{git_repo.as_uri()}"]\n\tinsteadOf = {OBLITERATUS_GIT}\n')
    bin_dir = tmp_path / "board-bin"
    bin_dir.mkdir()
    tool = bin_dir / "jetson-install"
    tool.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m jetson_install "$@"\n')
    tool.chmod(0o755)
    env.update(
        JETSON_INSTALL_ROOT=str(SAMPLE), JETSON_INSTALL_VENDOR_INDEX=vendor_url,
        JETSON_INSTALL_DEFAULT_INDEX=public_url, JETSON_INSTALL_WHEELS_INDEX=str(catalog),
        PATH=os.pathsep.join([str(bin_dir), env.get("PATH", "/usr/bin:/bin")]), GIT_CONFIG_GLOBAL=str(git_config),
    )
    env.update(extra or {})
    return env


def run_block(block: Block, env: Mapping[str, str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """The block as a user pastes it into bash: each line runs, and the first that fails stops it."""
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], env=dict(env), cwd=cwd, text=True,
                          capture_output=True, timeout=timeout)
