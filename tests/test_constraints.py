"""constraints/ is generated from wheels-index.toml; the checked-in files must match."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from jetson_install.catalog import load_catalog
from jetson_install.constraints import expected_files, stale_files

TOP = Path(__file__).resolve().parent.parent


def test_checked_in_constraints_match_the_catalog() -> None:
    assert stale_files(load_catalog(), TOP / "constraints") == [], "run: jetson-install constraints --write"


def test_constraints_pin_vendor_packages_exactly() -> None:
    text = expected_files(load_catalog())["jp6-cu126.txt"]
    assert "torch==2.8.0" in text.splitlines()
    assert "numpy<2" in text.splitlines()


def test_the_command_round_trips(tmp_path: Path) -> None:
    write = subprocess.run([sys.executable, "-m", "jetson_install", "constraints", "--write", "--dir", str(tmp_path)],
                           capture_output=True, text=True)
    assert write.returncode == 0, write.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (TOP / "constraints").iterdir())
    (tmp_path / "jp6-cu126.txt").write_text("torch==2.9.0\n")
    check = subprocess.run([sys.executable, "-m", "jetson_install", "constraints", "--dir", str(tmp_path)],
                           capture_output=True, text=True)
    assert check.returncode == 1
    assert "jp6-cu126.txt" in check.stderr and "constraints --write" in check.stderr
