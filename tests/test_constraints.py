"""constraints/ is generated from wheels-index.toml; the checked-in files must match."""

from __future__ import annotations

from pathlib import Path

from support.cli import run_cli

from jetson_install.catalog.catalog import load_catalog
from jetson_install.catalog.constraints import expected_files, stale_files

TOP = Path(__file__).resolve().parent.parent


def test_checked_in_constraints_match_the_catalog() -> None:
    assert stale_files(load_catalog(), TOP / "constraints") == [], "run: jetson-install constraints --write"


def test_constraints_pin_vendor_packages_exactly() -> None:
    text = expected_files(load_catalog())["jp6-cu126.txt"]
    assert "torch==2.8.0" in text.splitlines()
    assert "numpy<2" in text.splitlines()


def test_the_command_round_trips(tmp_path: Path) -> None:
    write = run_cli("constraints", "--write", "--dir", str(tmp_path))
    assert write.returncode == 0, write.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (TOP / "constraints").iterdir())
    (tmp_path / "jp6-cu126.txt").write_text("torch==2.9.0\n")
    check = run_cli("constraints", "--dir", str(tmp_path))
    assert check.returncode == 1
    assert "jp6-cu126.txt" in check.stderr and "constraints --write" in check.stderr


def test_write_never_touches_files_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("rich\n")
    (tmp_path / "jp6-cu126.txt").write_text("my own pins\n")
    result = run_cli("constraints", "--write", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert "was not written by jetson-install" in result.stderr
    assert (tmp_path / "requirements.txt").read_text() == "rich\n"
    assert (tmp_path / "jp6-cu126.txt").read_text() == "my own pins\n"


def test_write_into_a_file_is_bad_input(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("")
    result = run_cli("constraints", "--write", "--dir", str(target))
    assert result.returncode == 2 and "is not a directory" in result.stderr and "Traceback" not in result.stderr
