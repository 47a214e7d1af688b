"""Every data file the tool reads is checked by one loader (toml_file.TomlData): a mistake is
one `error: FILE:LINE: ...` line naming the line that is wrong (for a missing key, the header
of the table that lacks it), one `  fix: ...` line, and exit 2 through the command line.

The files shipped inside the package (platform-data.toml, preflight.toml, the bitsandbytes
releases) are broken in a copy of the package, which the command then runs from; the catalog
and the user's config are pointed at with their own variables.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

TOP = Path(__file__).resolve().parent.parent
PACKAGE = TOP / "jetson_install"
SAMPLE = "sample:agx-orin-64gb-jp6.2"


def environment(tmp_path: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETSON_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config-home"), JETSON_INSTALL_WHEELS_INDEX=str(TOP / "wheels-index.toml"))
    env.update(extra)
    return env


def run(tmp_path: Path, env: Dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # Not from the checkout: `python -m` puts the working directory first on sys.path.
    return subprocess.run([sys.executable, "-m", "jetson_install", *args], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=120)


def broken_copy(tmp_path: Path, relative: str, old: str, new: str) -> Path:
    """A copy of the package with `old` replaced by `new` in one data file; returns that file."""
    root = tmp_path / "package"
    shutil.copytree(PACKAGE, root / "jetson_install", ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "jetson_install" / relative
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


def in_copy(tmp_path: Path) -> Dict[str, str]:
    return environment(tmp_path, PYTHONPATH=str(tmp_path / "package"))


def line_of(path: Path, fragment: str, after: str = "") -> int:
    lines = path.read_text().splitlines()
    begin = next(n for n, line in enumerate(lines) if after in line) if after else 0
    return next(n for n, line in enumerate(lines[begin:], begin + 1) if fragment in line)


def one_error(result: subprocess.CompletedProcess[str], path: Path, line: int) -> List[str]:
    """The two lines of the error, checked for their shape: exit 2, FILE:LINE, a fix, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"error: {path}:{line}: "), (lines[0], line)
    assert lines[1].startswith("  fix: ") and f"edit {path} line {line}, then check it: " in lines[1]
    return lines


def test_wheels_index_names_the_table_that_lacks_a_key_not_the_next_ones_line(tmp_path: Path) -> None:
    text = (TOP / "wheels-index.toml").read_text()
    start = text.index('reason = "JetPack 3 ships')
    path = tmp_path / "wheels-index.toml"
    path.write_text(text[:start] + text[text.index("\n", start) + 1:])
    env = environment(tmp_path, JETSON_INSTALL_WHEELS_INDEX=str(path))
    error = one_error(run(tmp_path, env, "channels"), path, line_of(path, "[[channels]]"))
    assert "channel 'jp3': key 'reason' is required" in error[0]
    assert error[1].endswith("then check it: jetson-install channels")
    # A source's missing key: its own [[channels.sources]] header.
    text = text.replace('preferred = "2.8.0"\n', "", 1)
    path.write_text(text)
    one_error(run(tmp_path, env, "channels"), path, line_of(path, "[[channels.sources]]", after='id = "jp6-cu126"'))


def test_platform_data_names_the_socs_line_and_the_major_that_lacks_a_key(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "board/platform-data.toml", 'tegra234 = { family = "Orin", compute_capability',
                       'tegra234 = { family = "Orin", compute_capabilty')
    error = one_error(run(tmp_path, in_copy(tmp_path), "detect", "--root", SAMPLE), path, line_of(path, "tegra234 ="))
    assert "SoC 'tegra234': key 'compute_capabilty' is unknown; did you mean 'compute_capability'?" in error[0]
    shutil.rmtree(tmp_path / "package")
    path = broken_copy(tmp_path, "board/platform-data.toml", '[majors.36]\njetpack = "6.x"\n', "[majors.36]\n")
    error = one_error(run(tmp_path, in_copy(tmp_path), "detect", "--root", SAMPLE), path, line_of(path, "[majors.36]"))
    assert "L4T major 36: key 'jetpack' is required" in error[0]


def test_bitsandbytes_releases_name_a_typo_and_an_order_that_is_not_newest_first(tmp_path: Path) -> None:
    argv = ("plan", "obliteratus", "--root", SAMPLE, "--bitsandbytes", "build")
    path = broken_copy(tmp_path, "planning/bitsandbytes-releases.toml", 'commit = "c5d481be',
                       'comit = "c5d481be')
    error = one_error(run(tmp_path, in_copy(tmp_path), *argv), path, line_of(path, "comit ="))
    assert "release 0.50.0: key 'comit' is unknown; did you mean 'commit'?" in error[0]
    shutil.rmtree(tmp_path / "package")
    path = broken_copy(tmp_path, "planning/bitsandbytes-releases.toml", 'version = "0.49.0"', 'version = "0.49.9"')
    error = one_error(run(tmp_path, in_copy(tmp_path), *argv), path, line_of(path, 'version = "0.49.9"'))
    assert "release 0.49.9: key 'version' comes after 0.49.2: releases are listed newest first" in error[0]


def test_preflight_data_names_the_line_of_a_typo(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "planning/routes/preflight.toml", 'torchvision = "0.25.0"', 'torchvison = "0.25.0"')
    result = run(tmp_path, in_copy(tmp_path), "plan", "obliteratus", "--root", SAMPLE, "--preflight")
    error = one_error(result, path, line_of(path, "torchvison ="))
    assert "[newest_default_index_cpu]: key 'torchvison' is unknown; did you mean 'torchvision'?" in error[0]


def test_the_user_config_names_the_line_of_an_unknown_or_mistyped_setting(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# the fleet mirror\nvendor_indx = "https://mirror.fleet.example/jp6/cu126"\n')
    env = environment(tmp_path, JETSON_INSTALL_CONFIG=str(config))
    error = one_error(run(tmp_path, env, "plan", "obliteratus", "--root", SAMPLE), config, 2)
    assert "config: key 'vendor_indx' is unknown; did you mean 'vendor_index'?" in error[0]
    config.write_text('vendor_index = "https://mirror.fleet.example/jp6/cu126"\nallow_insecure_index = "yes"\n')
    error = one_error(run(tmp_path, env, "plan", "obliteratus", "--root", SAMPLE), config, 2)
    assert "config: key 'allow_insecure_index' has \"yes\": it must be true or false" in error[0]
