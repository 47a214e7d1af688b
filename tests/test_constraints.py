"""constraints/ is generated from wheels-index.toml; the checked-in files must match."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, Tuple

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


def _protected_environment(home: Path, wheels: Path) -> Tuple[Path, Dict[str, str]]:
    """~/obl as an install leaves it, holding torch 2.8.0 (a stub), protected by its constraints;
    and a shell's environment whose uv finds only the stub wheels in `wheels`."""
    from support import build_wheel, find_uv, isolated_env

    from jetson_install.base.layout import CONSTRAINTS_FILE, STATE_DIR
    from jetson_install.envs.activation import protect

    for version in ("2.8.0", "2.9.0"):
        build_wheel(wheels, "torch", version)
    build_wheel(wheels, "transformers", "9.0", requires=["torch>=2.9"])  # a dependency asking for another torch
    for project in ("torch", "transformers"):  # a PEP 503 index of them, on this machine
        (wheels / "simple" / project).mkdir(parents=True)
        (wheels / "simple" / project / "index.html").write_text("".join(
            f'<a href="../../{path.name}">{path.name}</a>\n' for path in wheels.glob(f"{project}-*.whl")))
    env = dict(isolated_env(home.parent / "shell"), HOME=str(home), UV_DEFAULT_INDEX=(wheels / "simple").as_uri(),
               PATH=f"{Path(find_uv()).parent}:{os.environ['PATH']}")
    environment = home / "obl"
    for command in (["uv", "venv", "-q", str(environment)],
                    ["uv", "pip", "install", "-q", "--python", str(environment / "bin" / "python"), "torch==2.8.0"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    (environment / STATE_DIR).mkdir()
    (environment / STATE_DIR / CONSTRAINTS_FILE).write_text("torch==2.8.0\n")
    protect(environment)
    return environment, env


def _torch(environment: Path) -> str:
    return next(path.name for path in (environment / "lib").glob("python*/site-packages/torch-*.dist-info"))


def test_uv_without_activating_is_held_only_by_the_documented_c_form(tmp_path: Path) -> None:
    """docs/install.md's block, as written: `uv pip install --python ~/obl/bin/python` replaced
    torch (exit 0) without it; with the environment's constraints file it is refused."""
    from support.doc_blocks import block, run_block

    home = tmp_path / "home"
    environment, env = _protected_environment(home, tmp_path / "wheels")
    documented = block("docs/install.md", "How the vendor torch stays in place")
    assert "-c ~/obl/jetson-install/constraints.txt" in documented.text
    refused = run_block(documented, env, tmp_path)
    assert refused.returncode != 0 and "torch==2.8.0" in refused.stderr, refused.stderr
    assert _torch(environment) == "torch-2.8.0.dist-info"
    # In bash, activated, the activate script's UV_CONSTRAINT holds it the same way...
    activated = subprocess.run(["bash", "-c", f". {environment}/bin/activate && uv pip install transformers"],
                               env=env, capture_output=True, text=True, timeout=300)
    assert activated.returncode != 0 and _torch(environment) == "torch-2.8.0.dist-info", activated.stderr
    # ... and without either, uv takes the other torch: what the docs say it does.
    unheld = subprocess.run(["uv", "pip", "install", "--python", str(environment / "bin" / "python"), "transformers"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert unheld.returncode == 0 and _torch(environment) == "torch-2.9.0.dist-info", unheld.stderr


def test_the_docs_name_the_shells_whose_activate_scripts_carry_the_constraints(tmp_path: Path) -> None:
    """Every activate script uv makes is either patched (its shell named as carrying the
    constraints) or named in docs/install.md as one that does not."""
    from jetson_install.envs.activation import protect

    environment, _ = _protected_environment(tmp_path / "home", tmp_path / "wheels")
    protect(environment)
    scripts = {path.name: "# jetson-install:" in path.read_text() for path in (environment / "bin").glob("activate*")
               if path.suffix not in (".bat", ".py")}
    docs = " ".join((TOP / "docs" / "install.md").read_text().split())
    carried = "in a shell that activated the environment with the `activate` scripts of **bash, zsh and fish**"
    assert carried in docs
    assert {name for name, patched in scripts.items() if patched} == {"activate", "activate.fish"}
    unpatched = sorted(name for name, patched in scripts.items() if not patched)
    assert unpatched == ["activate.csh", "activate.nu", "activate.ps1", "activate.xsh"]
    assert ("The other activate scripts uv makes (" + ", ".join(f"`{name}`" for name in unpatched)
            + ": csh/tcsh, Nushell, PowerShell, xonsh) do not carry it") in docs
