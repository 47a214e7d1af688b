"""DIR.d holds jetson-install's environments and may hold the user's things too: only what
the tool marked as its own is removed, on any filesystem, and an interrupted clean-up never
leaves an environment half deleted."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import NoReturn, Optional

import pytest
from support import present
from support.cli import run_cli

from jetson_install.running import install as install_module
from jetson_install.running.noop import plan_fingerprint
from jetson_install.catalog.catalog import load_catalog
from jetson_install.envs.home import EnvironmentHome
from jetson_install.envs.interpreters import Interpreter
from jetson_install.envs.source_identity import Sources
from jetson_install.catalog.identity import Resolution
from jetson_install.planning.plan import Plan
from jetson_install.running.execution import Run
from jetson_install.planning.rerun import Rerun
from jetson_install.base.layout import OWNER_MARK, STATE_DIR
from jetson_install.planning.options import PlanOptions
from jetson_install.planning.planner import make_plan
from jetson_install.tools.progress import PlainDisplay
from jetson_install.board.platform import detect
from jetson_install.board.samples import resolve_root
from jetson_install.base.sourced import Sourced
from jetson_install.catalog.settings import IndexSettings


def built(home: EnvironmentHome) -> Path:
    """An environment as a finished install leaves it."""
    path = home.new_environment_path()
    (path / "bin").mkdir(parents=True)
    (path / STATE_DIR).mkdir()
    home.record_plan(path, {"plan": 1})
    home.mark_complete(path)
    return path


def users_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "results.csv").write_text("precious\n")
    return path


def test_prune_keeps_what_the_user_put_in_dir_d(tmp_path: Path) -> None:
    home = EnvironmentHome(tmp_path / "obl")
    home.home.mkdir()
    mine = users_folder(home.home / "env-mydata")
    lookalike = users_folder(home.home / "env-20250101-000000-abcdef")  # the tool's naming, not its mark
    old, current = built(home), built(home)
    home.prune(keep=[current])
    assert (mine / "results.csv").read_text() == "precious\n"
    assert (lookalike / "results.csv").is_file()
    assert not old.exists() and current.is_dir()


def test_an_install_refuses_a_linked_or_hand_made_dir_d_and_leaves_it_as_it_is(tmp_path: Path) -> None:
    elsewhere = users_folder(tmp_path / "big-disk")
    linked = tmp_path / "linked"
    EnvironmentHome(linked).home.symlink_to(elsewhere)
    made = tmp_path / "made.d"  # familiar names, made by hand: `previous` naming another folder's environment
    made.mkdir()
    (made / "previous").write_text(f"{tmp_path / 'other.d' / 'env-20260101-000000-abcdef'}\n")
    (made / ".lock").write_text("")
    for venv, line in ((linked, f"error: --venv {linked}: {linked}.d is a link, not a folder jetson-install made; "
                                "it is left as it is"),
                       (tmp_path / "made", f"error: --venv {tmp_path / 'made'}: {made} exists and does not carry "
                                           "jetson-install's mark (.jetson-install-owner); it is left as it is")):
        result = run_cli("obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--venv", str(venv), "--dry-run")
        assert (result.returncode, result.stderr.splitlines()[0]) == (2, line)
    assert sorted(path.name for path in elsewhere.iterdir()) == ["results.csv"]
    assert sorted(path.name for path in made.iterdir()) == [".lock", "previous"]


def test_a_leftover_of_a_killed_build_is_removed(tmp_path: Path) -> None:
    home = EnvironmentHome(tmp_path / "obl")
    home.home.mkdir()
    killed = home.new_environment_path()
    (killed / "lib").mkdir(parents=True)  # uv venv was killed half-way: no complete mark
    (killed / "lib" / "libtorch.so").write_bytes(b"\0" * 100_000)
    removed = home.prune(keep=[])
    assert not killed.exists() and list(home.home.iterdir()) == [home.home / OWNER_MARK]  # DIR.d stays the tool's
    assert [path for path, _ in removed] == [killed] and removed[0][1] >= 100_000  # what it took, said


def test_ctrl_c_in_the_clean_up_after_the_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = IndexSettings(Sourced(None, "wheels-index.toml"), Sourced(None, "uv default"), False)
    venv = tmp_path / "obl"
    plan = make_plan(detect(resolve_root("sample:agx-orin-64gb-jp6.2")), load_catalog(),
                     PlanOptions("obliteratus", settings, venv, interpreter=sys.executable, verify=False))
    home = EnvironmentHome(venv)
    home.home.mkdir()
    oldest, previous = built(home), built(home)
    home.switch_to(oldest)
    home.switch_to(previous)

    def fake_execute(home: EnvironmentHome, staging: Path, interpreter: Interpreter, sources: Sources, run: Run,
                     reading: object = None) -> Optional[Path]:  # the real steps need uv and indexes
        (staging / STATE_DIR).mkdir(parents=True)
        home.record_plan(staging, plan_fingerprint(run.plan, interpreter))
        home.mark_complete(staging)
        replaced = home.switch_to(staging)
        home.prune(keep=[staging, replaced])  # as the switch step does, after its rename
        return replaced

    def fake_read(plan: Plan, python: str, rerun: Rerun) -> Resolution:  # the preferred set, without reading the index
        from jetson_install.planning.vendor_sources import offline_resolution

        return offline_resolution(present(plan.vendor))

    def rmtree_interrupted(path: str, ignore_errors: bool = False) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(install_module, "_execute", fake_execute)
    monkeypatch.setattr(install_module, "read_vendor_set", fake_read)
    monkeypatch.setattr("jetson_install.envs.home.shutil.rmtree", rmtree_interrupted)
    result = install_module.install(plan, progress=PlainDisplay(io.StringIO(), interval=15), rerun=Rerun(("obliteratus",)))
    assert result.status == "interrupted" and result.exit_code == 130
    new = home.current()
    assert new is not None and result.environment == str(new) and new not in (oldest, previous)
    assert "ready to use" in result.message
    assert (previous / STATE_DIR / "complete").is_file()  # the one to roll back to is whole
    assert not oldest.exists()  # renamed away at once: never a half-deleted environment
    assert sorted(p.name for p in home.home.glob("env-*")) == sorted([previous.name, new.name])
