"""Every command block in README.md and docs/ runs, as it is written, in a test.

A block fenced ```sh is commands a user types; ```text is a synopsis or output, ```toml data.
Each sh block is run here by `bash -euo pipefail` in a shell that stands in for a Jetson as the
rest of the suite does (support.doc_blocks.board_env: a sample root and loopback indexes through
the documented variables, the doctor's stubs as the vendor builds), or by the lane or the CI
script named in RUN_ELSEWHERE. A new block with no test fails test_every_block_is_run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import find_uv, needs_obliteratus_python
from support.doc_blocks import TOP, Block, block, blocks, board_env, run_block
from support.gate_stubs import make_gate_catalog, make_gate_vendor_index
from support.lanes import lane_unavailable
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs
from typing import Callable, Dict

# Blocks a fast test cannot run as written, and what runs them instead (or why nothing can).
RUN_ELSEWHERE: Dict[str, str] = {
    "README.md / Install": (
        "tests/test_index_route.py (lane: both lines from a loopback index serving the built sdist and wheel, on a "
        "sample root; the name is not published yet)"),
    "README.md / Install#2": "test_the_install_block_with_pipx (lane: pipx builds the checkout from the registry)",
    "README.md / Run the tests": "CI: .ci/run runs exactly this line (tests/test_readme.py holds them equal)",
    "README.md / Run the tests#2": (
        "the fast tier is this suite itself; tests/test_readme.py holds its markers to those pytest declares"),
    "README.md / On a GPU machine": (
        "tests/test_device_check.py runs tests/device/check here against the doctor's stub CUDA torch; the two pip "
        "lines need the package registry, the check itself a lent GPU machine"),
    "docs/install.md / bitsandbytes where no Jetson build exists": (
        "not run: a bitsandbytes source build needs a CUDA toolkit (nvcc) and, for a release, GitHub; "
        "tests/test_build_bitsandbytes.py builds it for real in the source-build lane"),
    "docs/fleets.md / Locks and wheelhouses#2": (
        "not run here: a lock is made for the board's architecture (aarch64), and an install here is for this "
        "machine's; tests/test_lock.py installs a lock (--lock, --wheelhouse) made for this machine"),
    "docs/uv-projects.md / On the Jetson: sync, then prove it": (
        "tests/test_export_uv_sync.py (its first test) runs both lines in the project, on a .venv whose interpreter "
        "answers uv's markers as an Orin's: this machine is no Jetson, so a plain uv sync here takes the "
        "workstation's torch"),
    "docs/fleets.md / nginx, or any static web server": (
        "tests/test_fleet.py::test_nginx_serves_a_wheelhouse_with_the_documented_server_block_and_runners_install_from_it "
        "(lane: Debian's nginx on loopback with this page's server block, a runner with its own lock)"),
    "docs/fleets.md / An OCI registry": (
        "tests/test_registry_lane.py (lane: Debian's docker-registry on loopback; push, then install by tag with the "
        "lock and by digest alone)"),
    "docs/install.md / How the vendor torch stays in place": (
        "tests/test_constraints.py, test_uv_without_activating_is_held_only_by_the_documented_c_form: as written, "
        "on ~/obl made and protected as an install leaves it, with stub wheels for torch and a dependency that "
        "asks for another"),
    "docs/fleets.md / Locks and wheelhouses#3": (
        "not run: it serves until Ctrl-C, to a HOST of the fleet's own; tests/test_wheelhouse_server.py serves one"),
}
# The sh blocks this module runs, by name (and #N for the Nth block under one heading).
RUN_HERE = {
    "README.md / On a Jetson", "README.md / Try it without a Jetson", "docs/containers.md / Two lanes: a container "
    "for the support claim, bare metal for a quick start", "docs/install.md / bitsandbytes where no Jetson build exists#2",
    "docs/install.md / The environments' lifecycle", "docs/fleets.md / Locks and wheelhouses",
    "README.md / For other projects", "README.md / For other projects#2",
    "docs/install.md / The stack for other projects, and adding to it later",
    "docs/fleets.md / An authenticated mirror", "docs/uv-projects.md / On the workstation: write the settings, lock", "README.md / Install#3",
}


def _named() -> Dict[str, Block]:
    named: Dict[str, Block] = {}
    for found in blocks():
        if found.language != "sh":
            continue
        name, number = found.name, 1
        while (name if number == 1 else f"{name}#{number}") in named:
            number += 1
        named[name if number == 1 else f"{name}#{number}"] = found
    return named


def test_every_block_is_tagged_and_run() -> None:
    untagged = [found.name for found in blocks() if not found.language]
    assert not untagged, f"fence these as ```sh (commands, then run them in a test), ```text or ```toml: {untagged}"
    named = set(_named())
    assert named == RUN_HERE | set(RUN_ELSEWHERE), (
        f"blocks without a test: {sorted(named - RUN_HERE - set(RUN_ELSEWHERE))}; "
        f"tests of blocks that are gone: {sorted((RUN_HERE | set(RUN_ELSEWHERE)) - named)}")
    elsewhere = set(RUN_ELSEWHERE) & named
    for name in elsewhere:
        where = RUN_ELSEWHERE[name]
        if where.startswith("test_"):
            assert where.split()[0] in globals(), where


@pytest.fixture
def board(tmp_path: Path, start_index: Callable[..., LoopbackIndex], public_index: LoopbackIndex, obliteratus_git_repo: Path) -> Dict[str, str]:
    vendor = make_gate_vendor_index(tmp_path / "gate-vendor")
    catalog = make_gate_catalog(tmp_path / "wheels-index.toml", vendor)
    served = start_index(vendor, name="gate-vendor")
    env = board_env(tmp_path, served.url, public_index.url, catalog, obliteratus_git_repo)
    # A board's own HOME: the per-user folders are the defaults under it, as the docs name them.
    for variable in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env.pop(variable, None)
    env["PIP_INDEX_URL"], env["UV_DEFAULT_INDEX"] = public_index.url, public_index.url
    (tmp_path / "work").mkdir()
    os.symlink(TOP, tmp_path / "work" / "jetson-install")  # the checkout, where the docs' ./jetson-install is
    return env


@pytest.fixture
def board_with_projects(tmp_path: Path, start_index: Callable[..., LoopbackIndex], private_index_dirs: IndexDirs, obliteratus_git_repo: Path) -> Dict[str, str]:
    """The board's shell, its default index also carrying a CPU stand-in of ultralytics (asking
    for torch as the real one does)."""
    from support.wheels import build_wheel

    public = private_index_dirs.public
    # transformers and accelerate are the stub index's own (with what the doctor asks of transformers).
    build_wheel(public, "ultralytics", "8.3.0", requires=("torch>=1.8.0", "numpy>=1.23.0"), source_index="public")
    vendor = make_gate_vendor_index(tmp_path / "gate-vendor")
    catalog = make_gate_catalog(tmp_path / "wheels-index.toml", vendor)
    served, index = start_index(vendor, name="gate-vendor"), start_index(public)
    env = board_env(tmp_path, served.url, index.url, catalog, obliteratus_git_repo)
    for variable in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env.pop(variable, None)
    env["PIP_INDEX_URL"], env["UV_DEFAULT_INDEX"] = index.url, index.url
    (tmp_path / "work").mkdir()
    return env


def test_the_other_projects_dry_run_on_a_sample_root(board_with_projects: Dict[str, str], tmp_path: Path) -> None:
    result = run_block(block("README.md", "For other projects"), board_with_projects, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "install transformers and accelerate under the vendor constraints" in result.stdout
    assert not (_home(board_with_projects) / ".local" / "share" / "jetson-install" / "envs" / "torch").exists()


@pytest.mark.slow
def test_the_other_projects_block_on_the_board_then_add(board_with_projects: Dict[str, str], tmp_path: Path) -> None:
    result = run_block(block("README.md", "For other projects", 1), board_with_projects, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    venv = _home(board_with_projects) / ".local" / "share" / "jetson-install" / "envs" / "torch"
    # The doctor passed before each switch; the second environment holds all three, the first is kept.
    assert result.stderr.count(f"the Jetson torch stack is ready in {venv}\n") == 2, result.stderr
    assert "install transformers, accelerate and ultralytics under the vendor constraints" in result.stderr
    assert f"add: ultralytics to {venv} (kept: transformers, accelerate)" in result.stderr
    assert (venv / "jetson-install" / "added.txt").read_text() == "transformers\naccelerate\nultralytics\n"
    assert (Path(f"{venv}.d") / "previous").is_file()


@pytest.mark.slow
def test_the_add_block(board_with_projects: Dict[str, str], tmp_path: Path) -> None:
    result = run_block(block("docs/install.md", "The stack for other projects, and adding to it later"),
                       board_with_projects, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    venv = _home(board_with_projects) / "stack"
    assert "install transformers and accelerate under the vendor constraints" in result.stdout
    assert f"{venv}\n  current   env-" in result.stdout and "added: transformers, accelerate" in result.stdout


def _home(env: Dict[str, str]) -> Path:
    return Path(env["HOME"])


def _stand_in(env: Dict[str, str], name: str, script: str) -> Path:
    """A command of the board's that the block calls and this machine lacks (or must not run)."""
    path = Path(env["PATH"].split(os.pathsep)[0]) / name
    path.write_text("#!/bin/bash\nset -eu\n" + script)
    path.chmod(0o755)
    return path


@pytest.mark.slow
def test_the_quick_start_on_a_jetson(board: Dict[str, str], tmp_path: Path) -> None:
    # pipx itself is the Install block's lane; here the tool it would install is on PATH already.
    _stand_in(board, "pipx", 'test "$*" = "install ./jetson-install" && test -f jetson-install/pyproject.toml\n')
    result = run_block(block("README.md", "On a Jetson"), board, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    venv = _home(board) / ".local" / "share" / "jetson-install" / "envs" / "obliteratus"
    assert f"OBLITERATUS is ready in {venv}" in result.stderr
    assert "All required checks passed" in result.stdout  # the doctor, run from the activated environment
    assert result.stdout.rstrip().splitlines()[-1].startswith("obliteratus-")  # the install's log, listed
    assert f"  log: {_home(board) / '.local/state/jetson-install/log/obliteratus-'}" in result.stderr


@pytest.mark.lane
def test_try_it_without_a_jetson_as_written(tmp_path: Path) -> None:
    """The whole line in a copy of the checkout: a venv, the editable install (its build backend
    and dependencies from the package registry), the plan."""
    work = tmp_path / "checkout"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=TOP, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        if (TOP / name).is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes((TOP / name).read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETSON_", "VIRTUAL_ENV"))}
    result = run_block(block("README.md", "Try it without a Jetson"), env, work)
    if result.returncode != 0 and "Could not find a version" in result.stdout + result.stderr:
        lane_unavailable("registry", "the package registry did not answer")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "channel   jp6-cu126 (supported)" in result.stdout


@pytest.mark.slow
def test_the_container_block_with_its_wheel_step(board: Dict[str, str], tmp_path: Path) -> None:
    calls = tmp_path / "docker-calls"
    # docker is the container lane's (buildah builds the generated Dockerfile there); here it checks
    # the context the block made holds what the Dockerfile copies in.
    _stand_in(board, "docker", f'echo "$*" >> {calls}\n'
                               'if [ "$1" = build ]; then test -f "${@: -1}/Dockerfile" && '
                               'ls "${@: -1}"/jetson_install-*-py3-none-any.whl; fi\n')
    _stand_in(board, "pip", f'exec "{sys.executable}" -m pip "$@"\n')
    board.update(PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0")  # hatchling from this interpreter, not the index
    result = run_block(block("docs/containers.md", "Two lanes: a container for the support claim, bare metal for a "
                                                   "quick start"), board, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    context = tmp_path / "work" / "obliteratus-jetson"
    assert (context / "Dockerfile").read_text().startswith("# ")
    assert calls.read_text().splitlines() == ["build -t obliteratus-jetson obliteratus-jetson/",
                                              "run --rm -it --runtime nvidia obliteratus-jetson"]
    assert "images    nvcr.io/nvidia/pytorch:25.06-py3-igpu" in result.stdout


@pytest.mark.slow
def test_the_constraints_without_the_tool(board: Dict[str, str], tmp_path: Path) -> None:
    os.symlink(TOP / "constraints", tmp_path / "work" / "constraints")
    _stand_in(board, "uv", f'exec "{find_uv()}" "$@"\n')
    result = run_block(block("docs/install.md", "bitsandbytes where no Jetson build exists", 1), board, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    numpy = subprocess.run([str(tmp_path / "work" / "my-env" / "bin" / "python"), "-c",
                            "import importlib.metadata as m; print(m.version('numpy'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert numpy.startswith("1.")  # constraints/jp6-cu126.txt: numpy<2, though the index has a 2.x


@pytest.mark.slow
def test_the_lifecycle_block(board: Dict[str, str], tmp_path: Path) -> None:
    result = run_block(block("docs/install.md", "The environments' lifecycle"), board, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    venv = _home(board) / "obliteratus"
    assert f"{venv}\n  current   env-" in result.stdout and "  previous  env-" in result.stdout
    assert result.stdout.count(f"  undo: jetson-install rollback --venv {venv}") == 2
    assert "would remove " in result.stdout and f"removed {venv} (env-" in result.stdout
    assert not os.path.lexists(venv)


@pytest.mark.slow
def test_the_lock_and_wheelhouse_block(board: Dict[str, str], tmp_path: Path) -> None:
    result = run_block(block("docs/fleets.md", "Locks and wheelhouses"), board, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "work" / "jp6.lock").is_file() and (tmp_path / "work" / "wheelhouse" / "simple").is_dir()
    assert "files in " in result.stderr and "install offline: jetson-install obliteratus --wheelhouse " in result.stderr


@pytest.mark.slow
def test_the_authenticated_mirror_block(board: Dict[str, str], tmp_path: Path, start_index: Callable[..., LoopbackIndex], stub_index_dirs: IndexDirs) -> None:
    # The mirror: the gate's vendor builds and the public index, each answering only with the credentials.
    token = "fleet-token-5f3a"
    vendor = start_index(tmp_path / "gate-vendor", name="vendor-mirror", credentials=f"runner:{token}")
    public = start_index(stub_index_dirs.public, name="public-mirror", credentials=f"runner:{token}")
    board.update(MIRROR_HOST="127.0.0.1", FLEET_USER="runner", FLEET_TOKEN=token, VENDOR_MIRROR=vendor.url,
                 PYPI_MIRROR=public.url)
    result = run_block(block("docs/fleets.md", "An authenticated mirror"), board, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    netrc = _home(board) / ".netrc"
    assert netrc.stat().st_mode & 0o777 == 0o600
    lock = (tmp_path / "work" / "jp6.lock").read_text()
    assert f"{vendor.base_url}/files/torch-" in lock and token not in lock + result.stdout + result.stderr
    assert (tmp_path / "work" / "wheelhouse" / "lock.txt").is_file()
    assert vendor.requests and public.requests  # the mirror answered both


@pytest.mark.lane
def test_the_install_block_with_pipx(tmp_path: Path) -> None:
    """README's checkout Install line, as written, with pipx from tests/setup.d/20-pipx: it builds the
    checkout (hatchling and the dependencies from the package registry)."""
    pipx = TOP / ".venv-pipx" / "bin" / "pipx"
    if not pipx.exists():
        lane_unavailable("pipx", f"no {pipx} (tests/setup.d/20-pipx makes it)")
    (tmp_path / "bin").mkdir()
    os.symlink(pipx, tmp_path / "bin" / "pipx")
    os.symlink(TOP, tmp_path / "jetson-install")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETSON_", "PIPX_", "VIRTUAL_ENV"))}
    env.update(PIPX_HOME=str(tmp_path / "pipx-home"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"), PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = run_block(block("README.md", "Install", 1), env, tmp_path)
    if result.returncode != 0 and "Could not find a version" in result.stdout + result.stderr:
        lane_unavailable("pipx", "the package registry did not answer")
    assert result.returncode == 0, result.stdout + result.stderr
    detected = subprocess.run([str(tmp_path / "bin" / "jetson-install"), "detect", "--root",
                               "sample:agx-orin-64gb-jp6.2", "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(detected.stdout)["l4t"] == "36.4.3", detected.stderr


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    import re

    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def test_every_link_between_the_pages_resolves() -> None:
    import re

    from support.doc_blocks import doc_files

    broken = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]*\.md)?(#[^)]*)?\)", text):
            file, anchor = target
            if not file and not anchor:
                continue
            linked = (path.parent / file).resolve() if file else path
            if not linked.is_file():
                broken.append(f"{path.name}: {file}")
                continue
            headings = {_anchor(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)}
            if anchor and anchor[1:] not in headings:
                broken.append(f"{path.name}: {file}{anchor}")
    assert not broken, broken


@needs_obliteratus_python
def test_the_uv_project_block_writes_and_locks(board: Dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "work" / "my-project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "my-project"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = ["torch>=2.0"]\n')
    board = {**board, "PATH": f"{Path(find_uv()).parent}{os.pathsep}{board['PATH']}", "UV_PYTHON": sys.executable}
    result = run_block(block("docs/uv-projects.md", "On the workstation: write the settings, lock"), board,
                       tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("# jetson-install export --uv --channel jp6-cu126: ")
    assert "\nmy-project/pyproject.toml: jp6-cu126's uv settings written: JetPack 6.1-6.2.x" in result.stdout
    lock = (project / "uv.lock").read_text()
    assert f'version = "2.8.0"\nsource = {{ registry = "{board["JETSON_INSTALL_VENDOR_INDEX"]}" }}' in lock


def test_the_completion_block_sets_up_each_shell(tmp_path: Path) -> None:
    """README's Install: each shell's line, run as written in a HOME of the test's own; bash then
    has the completion when it starts (tests/test_completion.py completes with it at a terminal)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**{key: value for key, value in os.environ.items() if not key.startswith("XDG_")}, "HOME": str(home),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = run_block(block("README.md", "Install", 2), env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (home / ".zshrc").read_text() == 'eval "$(_JETSON_INSTALL_COMPLETE=zsh_source jetson-install)"\n'
    fish = (home / ".config" / "fish" / "completions" / "jetson-install.fish").read_text()
    assert "complete " in fish and "_JETSON_INSTALL_COMPLETE=fish_complete" in fish
    loaded = subprocess.run(["bash", "-i", "-c", "complete -p jetson-install"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert loaded.stdout.strip() == "complete -o nosort -F _jetson_install_completion jetson-install", loaded.stderr


def test_the_roles_server_block_is_the_documented_one() -> None:
    template = (TOP / "examples" / "ansible" / "roles" / "jetson_install" / "templates" / "wheelhouse-nginx.conf.j2").read_text()
    from support.engines import documented_server_block

    documented = documented_server_block()
    assert template.replace("{{ jetson_install_wheelhouse_listen }}", "8000").replace(
        "{{ jetson_install_wheelhouse_nginx }}", "/srv/wheelhouse") == documented
