"""`jetson-install add`: a new environment beside the old one, made from the command that made
the old one, with its additions kept and the new ones added under the same constraints,
switched in only if its doctor passes. Installs run against the loopback stub indexes; the
stand-ins are CPU-only stubs of the real projects (transformers and accelerate ask for torch
as the real ones do)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from support import VENDOR_PINS, isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.stub_projects import make_obliteratus_source
from support.planned import assert_ran_as_planned, assert_vendor_set_pinned
from support.wheels import build_wheel

from jetson_install.base.layout import OWNER_MARK, OWNER_MARK_PREFIX
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs

TOP = Path(__file__).resolve().parent.parent
ORIN = "sample:agx-orin-64gb-jp6.2"


@pytest.fixture
def stack(tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
          ) -> Tuple[Dict[str, str], str, str]:
    """The stub indexes (transformers and accelerate are their own), and a project that wants a
    newer torch than any Jetson build."""
    public_dir = private_index_dirs.public
    build_wheel(public_dir, "wants-new-torch", "1.0", requires=("torch>=2.9",), source_index="public")
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor))
    env = isolated_env(tmp_path, fast_fail=True)
    env["JETSON_INSTALL_WHEELS_INDEX"] = str(catalog)
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(public_dir)
    return env, vendor.url, public.url


def _torch(venv: Path, env: Dict[str, str], vendor: str, public: str, *extra: str) -> Tuple[int, Dict[str, Any], str]:
    result = run_cli("torch", "--root", ORIN, "--venv", str(venv), "--python", sys.executable, "--vendor-index",
                     vendor, "--default-index", public, "--no-verify", "--yes", "--json", *extra, env=env)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def _add(env: Dict[str, str], *argv: str, cwd: Path = TOP) -> Tuple[int, Dict[str, Any], str]:
    result = run_cli("add", *argv, "--json", env=env, cwd=cwd)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def _versions(venv: Path, env: Dict[str, str], *names: str) -> List[str]:
    import subprocess

    code = f"import importlib.metadata as m; print(' '.join(m.version(n) for n in {list(names)!r}))"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _own(venv: Path) -> List[str]:
    """What DIR.d holds of jetson-install's: its environments and what a run may leave."""
    return sorted(entry.name for entry in Path(f"{venv}.d").iterdir() if entry.name not in (".lock", OWNER_MARK))


@pytest.mark.slow
def test_add_makes_a_new_environment_with_the_additions_and_keeps_the_old_one(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, made, stderr = _torch(venv, env, vendor, public, "--with", "transformers")
    assert code == 0, stderr
    first = made["environment"]
    # Run from another folder than the first install: the recorded command is what counts.
    code, data, stderr = _add(env, "--venv", str(venv), "accelerate", cwd=tmp_path)
    assert code == 0, stderr
    assert_ran_as_planned(data)
    assert data["add"]["requirements"] == ["accelerate"] and data["add"]["kept"] == ["transformers"]
    assert data["add"]["made_with"].startswith("jetson-install torch --root sample:agx-orin-64gb-jp6.2 --venv ")
    assert data["command"] == "torch" and data["environment"] != first
    assert os.readlink(venv) == data["environment"]
    # The vendor builds stay exactly as they were: same files, by hash, from the recorded set.
    assert assert_vendor_set_pinned(venv, list(VENDOR_PINS)) == VENDOR_PINS
    assert _versions(venv, env, "transformers", "accelerate", "torch") == ["4.46.0", "1.0.1", VENDOR_PINS["torch"]]
    assert (venv / "jetson-install" / "added.txt").read_text() == "transformers\naccelerate\n"
    assert "no index read" in stderr  # the recorded vendor set, not a new resolution
    # The old environment is the one a rollback goes back to.
    assert _own(venv) == sorted([Path(first).name, Path(data["environment"]).name, "previous"])
    # The record, written before the switch's rename, names DIR.d's environments by name: the one
    # in use (the new one) keeps the first; the first kept none.
    assert Path(f"{venv}.d/previous").read_text() == f"{Path(data['environment']).name} {Path(first).name}\n"
    # A re-run of the first command keeps both additions: nothing changes.
    code, again, stderr = _torch(venv, env, vendor, public)
    assert code == 0 and again["status"] == "unchanged", stderr
    # So does adding what is there already.
    code, same, stderr = _add(env, "--venv", str(venv), "accelerate")
    assert code == 0 and same["status"] == "unchanged", stderr
    listed = run_cli("list", "--json", env=env)
    entry = next(e for e in json.loads(listed.stdout)["environments"] if e["venv"] == str(venv))
    assert entry["current"]["target"] == "torch" and entry["current"]["additions"] == ["transformers", "accelerate"]
    assert entry["current"]["path"] == data["environment"] and entry["previous"]["path"] == first
    rolled = run_cli("rollback", "--venv", str(venv), env=env)
    assert rolled.returncode == 0, rolled.stderr
    assert os.readlink(venv) == first


@pytest.mark.slow
def test_add_dry_run_shows_the_plan_it_runs_and_changes_nothing(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, made, stderr = _torch(venv, env, vendor, public)
    assert code == 0, stderr
    before = _own(venv)
    code, dry, stderr = _add(env, "--venv", str(venv), "--dry-run", "transformers")
    assert code == 0, stderr
    assert dry["additions"] == ["transformers"] and dry["would_change"] is True
    target = next(step for step in dry["steps"] if step["id"] == "target")
    assert target["title"] == "install transformers under the vendor constraints"
    assert _own(venv) == before and os.readlink(venv) == made["environment"]
    text = run_cli("add", "--venv", str(venv), "--dry-run", "transformers", env=env)
    assert text.returncode == 0 and "install transformers under the vendor constraints" in text.stdout
    assert text.stderr.startswith(f"add: transformers to {venv}; a new environment from the command that made it: "
                                  "jetson-install torch --root sample:agx-orin-64gb-jp6.2"), text.stderr
    # What the dry run showed is what runs.
    code, data, stderr = _add(env, "--venv", str(venv), "transformers")
    assert code == 0, stderr
    ran = next(step for step in data["plan_steps"] if step["id"] == "target")
    assert ran["commands"] == target["commands"]
    shown = {step["id"]: step["commands"] for step in dry["steps"]}
    for step in data["plan_steps"]:
        assert shown.get(step["id"]) == step["commands"], (step["id"], shown.get(step["id"]), step["commands"])


@pytest.mark.slow
def test_an_addition_that_needs_another_torch_switches_nothing_and_leaves_nothing(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, made, stderr = _torch(venv, env, vendor, public, "--with", "transformers")
    assert code == 0, stderr
    before = _own(venv)
    code, data, stderr = _add(env, "--venv", str(venv), "wants-new-torch")
    assert code == 1
    assert data["error"]["step"] == "target", data["error"]
    # uv's own reason, naming the package and the torch it wants; the old environment stays.
    assert "wants-new-torch" in data["error"]["message"] and "torch" in data["error"]["message"]
    assert f"{venv} is unchanged" in data["error"]["message"]
    assert data["error"]["fix"] == (f"the vendor pins (torch=={VENDOR_PINS['torch']}) never change: add a release of "
                                    "wants-new-torch that accepts them, where one exists: jetson-install add --venv "
                                    f"{venv} 'wants-new-torch<VERSION'")
    assert os.readlink(venv) == made["environment"] and _own(venv) == before
    assert (venv / "jetson-install" / "added.txt").read_text() == "transformers\n"
    lines = stderr.splitlines()
    error = next(number for number, line in enumerate(lines) if line.startswith("error: "))
    assert lines[error + 1].startswith("  fix: ")
    # torch itself is the vendor build: no release of it other than the pin can be added.
    code, data, stderr = _add(env, "--venv", str(venv), "torch>=2.9")
    assert code == 1 and data["error"]["step"] == "target", stderr
    fix = data["error"]["fix"]
    assert fix == (f"torch is the channel's vendor build (torch=={VENDOR_PINS['torch']}), which never changes: add "
                   f"what needs it without torch; see what {venv} has: jetson-install list")
    assert run_cli(*fix.rsplit(": jetson-install ", 1)[1].split(), env=env).returncode == 0
    assert os.readlink(venv) == made["environment"] and _own(venv) == before


@pytest.mark.slow
def test_add_a_local_folder_named_where_add_ran_and_known_by_its_content(tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    venv = tmp_path / "stack"
    code, _, stderr = _torch(venv, env, vendor, public)
    assert code == 0, stderr
    # A project folder of one's own (the stub OBLITERATUS tree builds offline), named relatively.
    project = make_obliteratus_source(tmp_path / "work" / "myproj")
    code, data, stderr = _add(env, "--venv", str(venv), "./myproj", cwd=tmp_path / "work")
    assert code == 0, stderr
    assert data["add"]["requirements"] == [str(project)]
    assert (venv / "jetson-install" / "added.txt").read_text() == f"{project}\n"
    # The folder is known by its content: unchanged, a re-run does nothing; edited, it builds again.
    code, again, stderr = _torch(venv, env, vendor, public)
    assert code == 0 and again["status"] == "unchanged", stderr
    (project / "obliteratus" / "cli.py").write_text("# edited\n", encoding="utf-8")
    code, edited, stderr = _torch(venv, env, vendor, public)
    assert code == 0 and edited["status"] == "installed", stderr
    assert edited["environment"] != data["environment"]


def test_add_refuses_an_environment_made_from_a_lock_with_the_commands_that_do_it(tmp_path: Path) -> None:
    venv = _fake_environment(tmp_path, ["torch", "--lock", "board.lock", "--venv", "x"])
    result = run_cli("add", "--venv", str(venv), "accelerate", env=isolated_env(tmp_path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {venv} was installed from a lock, which holds exactly its files and no addition",
        "  fix: lock them with the rest, then install that lock: jetson-install lock torch --with accelerate "
        f"--output new.lock && jetson-install torch --lock new.lock --venv {venv}"]


def test_add_of_a_folder_to_an_environment_made_from_a_lock_is_told_to_make_it_again_without_one(
        tmp_path: Path) -> None:
    """Its fix was `lock ... --with FOLDER`, which a lock refuses: it is the install without one."""
    venv = _fake_environment(tmp_path, ["torch", "--lock", "board.lock", "--venv", "x"])
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "1.0"\n')
    result = run_cli("add", "--venv", str(venv), "./proj", env=isolated_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    proj = tmp_path / "proj"
    assert result.stderr.splitlines() == [
        f"error: {venv} was installed from a lock, which holds exactly its files and no addition",
        f"  fix: {proj}: a lock holds only files an index lists, each pinned by its sha256 so that every board "
        "installs the same, and a project folder is built on each board from whatever its own copy holds; make it "
        f"again without a lock, with the additions: jetson-install torch --venv {venv} --with {proj}"]
    command = result.stderr.rsplit("with the additions: ", 1)[1].split()
    planned = run_cli("plan", *command[1:], "--root", ORIN, "--json", env=isolated_env(tmp_path))
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["additions"] == [str(proj)]


def test_add_reads_the_recorded_commands_relative_paths_in_the_folder_it_ran_in(tmp_path: Path) -> None:
    # The first install ran in work/, naming its root, interpreter and a project relatively.
    work = tmp_path / "work"
    shutil.copytree(TOP / "jetson_install" / "board" / "samples" / "agx-orin-64gb-jp6.2", work / "board", symlinks=True)
    (work / "bin").mkdir()
    (work / "bin" / "python").symlink_to(sys.executable)
    (work / "proj").mkdir()
    (work / "proj" / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "1.0"\n')
    venv = _fake_environment(tmp_path, ["torch", "--root=board", "--python", "bin/python", "--with", "./proj"], cwd=work)
    code, data, stderr = _add(isolated_env(tmp_path), "--venv", str(venv), "--dry-run", "accelerate")  # from TOP
    assert code == 0, stderr
    # What runs names the same folders, wherever it runs (and wherever it is run again from).
    assert data["add"]["command"] == (f"jetson-install torch --root={work / 'board'} --python {work / 'bin' / 'python'} "
                                      f"--with {work / 'proj'} --venv {venv} --with accelerate --dry-run --json")
    assert data["add"]["made_with"] == "jetson-install torch --root=board --python bin/python --with ./proj"
    assert data["interpreter"] == str(work / "bin" / "python")
    assert data["additions"] == [str(work / "proj"), "accelerate"]


@pytest.mark.parametrize(("words", "expected"), [
    (["--root", "board", "--root=sample:agx-orin-64gb-jp6.2"], ["--root", "/was/here/board", "--root=sample:agx-orin-64gb-jp6.2"]),
    (["--python", "python3.10", "--python=../bin/python"], ["--python", "python3.10", "--python=/was/here/../bin/python"]),
    (["--source", "OBLITERATUS", "--source", "https://example.com/o.git"],
     ["--source", "/was/here/OBLITERATUS", "--source", "https://example.com/o.git"]),
    (["--with", "transformers", "--with", "./proj", "--with", "~/proj", "--with=pkg @ git+https://h/r"],
     ["--with", "transformers", "--with", "/was/here/proj", "--with", "~/proj", "--with=pkg @ git+https://h/r"]),
    (["--bitsandbytes", "build", "--bitsandbytes=build=0.49.2", "--bitsandbytes", "build=./bnb"],
     ["--bitsandbytes", "build", "--bitsandbytes=build=0.49.2", "--bitsandbytes", "build=/was/here/bnb"]),
    (["--ref", "./v1", "--root", "/abs", "--venv", "rel"], ["--ref", "./v1", "--root", "/abs", "--venv", "rel"]),
])
def test_a_recorded_commands_paths_are_read_where_it_ran_and_nothing_else(words: List[str], expected: List[str]) -> None:
    from jetson_install.cli.commands.add import in_folder

    assert list(in_folder(["torch", *words], Path("/was/here"))) == ["torch", *expected]


def _fake_environment(tmp_path: Path, command: List[str], cwd: Optional[Path] = None) -> Path:
    """DIR -> DIR.d/env-… as an install leaves it, recording `command`, run in `cwd` (no install run)."""
    venv = tmp_path / "made"
    environment = tmp_path / "made.d" / "env-20260101-000000-abcdef"
    state = environment / "jetson-install"
    state.mkdir(parents=True)
    (state / "complete").write_text("2026-01-01T00:00:00+0000\n")
    (state / "plan.json").write_text(json.dumps({"target": "torch", "command": command, "cwd": str(cwd or tmp_path)}))
    mark = f"{OWNER_MARK_PREFIX}{'0' * 32}\n"  # DIR.d's mark and the environment's copy of it
    (tmp_path / "made.d" / OWNER_MARK).write_text(mark)
    (state / OWNER_MARK).write_text(mark)
    venv.symlink_to(environment)
    return venv


@pytest.mark.parametrize(("case", "argv", "message", "fix"), [
    ("empty", [], "add: no REQUIREMENT given", "name what to add, e.g.: jetson-install add --venv {venv} transformers"),
    ("missing", ["accelerate"], "no environment at {venv}",
     "make one with the additions: jetson-install torch --venv {venv} --with accelerate"),
    ("foreign", ["accelerate"], "{venv} was not made by jetson-install (no link into {venv}.d); it is left as it is",
     "make one with the additions beside it: jetson-install torch --venv {venv}-torch --with accelerate"),
    ("masked", ["accelerate"], "the command that made {venv} gave an index's credentials in a URL, which are not "
     "recorded", "run it again with the additions, the credentials in place of ****: jetson-install torch "
     "--vendor-index 'https://alice:****@mirror.example/simple' --with accelerate"),
    ("bad", ["not a requirement!"], "jetson-install add 'not a requirement!' is not a requirement",
     "give a package name with an optional version, e.g. jetson-install add"),
])
def test_add_refuses_in_one_line_with_the_fix(case: str, argv: List[str], message: str, fix: str,
                                              tmp_path: Path) -> None:
    venv = tmp_path / "made"
    if case == "foreign":
        venv.mkdir()
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    elif case == "masked":
        _fake_environment(tmp_path, ["torch", "--vendor-index", "https://alice:****@mirror.example/simple"])
    result = run_cli("add", "--venv", str(venv), *argv, env=isolated_env(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: " + message.format(venv=venv)), result.stderr
    assert lines[1].startswith("  fix: ") and fix.format(venv=venv) in lines[1] and len(lines) == 2, result.stderr
    as_json = run_cli("add", "--venv", str(venv), *argv, "--json", env=isolated_env(tmp_path))
    assert json.loads(as_json.stdout)["error"]["exit_code"] == 2


def test_add_without_venv_takes_the_default_environment_that_exists(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    result = run_cli("add", "accelerate", env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == "error: add: no environment made by jetson-install at the default locations"
    assert "jetson-install torch --with accelerate" in result.stderr


@pytest.mark.slow
def test_without_venv_the_commands_take_the_default_environment_that_exists_and_say_which(
        tmp_path: Path, stack: Tuple[Dict[str, str], str, str]) -> None:
    env, vendor, public = stack
    made = run_cli("torch", "--root", ORIN, "--python", sys.executable, "--vendor-index", vendor, "--default-index",
                   public, "--no-verify", "--yes", "--json", "--with", "transformers", env=env)
    assert made.returncode == 0, made.stderr
    venv = Path(json.loads(made.stdout)["venv"])
    assert venv.name == "torch"  # only `jetson-install torch`'s default environment exists
    note = f"{venv}, the environment `jetson-install torch` made (no --venv)"
    doctor = run_cli("doctor", "--root", ORIN, "--no-gpu", env=env)
    assert f"note: doctor: {note}" in doctor.stderr
    assert doctor.returncode == 0 and "torch" in doctor.stdout, doctor.stdout + doctor.stderr
    labels = run_cli("labels", "--root", ORIN, env=env)
    assert labels.returncode == 0 and f"note: labels: {note}" in labels.stderr
    rollback = run_cli("rollback", env=env)
    assert rollback.returncode == 2 and f"note: rollback: {note}" in rollback.stderr
    assert f"error: --venv {venv}: no previous environment is kept" in rollback.stderr
    code, data, stderr = _add(env, "accelerate")
    assert code == 0, stderr
    assert data["add"]["venv"] == str(venv) and data["add"]["kept"] == ["transformers"]
