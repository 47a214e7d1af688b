"""The environments' lifecycle as a pipx or uv user expects it: `list`, `rollback` (one rename,
itself undone by a second), `uninstall`, `clean` (with sizes), and -q/-v; each only on what
jetson-install made, and each under the environment's lock."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Callable

import pytest
from support import VENDOR_TORCH
from support.cli import run_cli
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.stub_projects import IndexDirs

from jetson_install.envs.home import EnvironmentHome
from jetson_install.base.layout import STATE_DIR


def built(home: EnvironmentHome) -> Path:
    """An environment as a finished install leaves it."""
    path = home.new_environment_path()
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_bytes(b"x" * 10000)
    (path / STATE_DIR).mkdir()
    home.record_plan(path, {"channel": "jp6-cu126", "requirement": "obliteratus @ git+https://example.invalid/O@v1"})
    home.mark_complete(path)
    return path


def switched(link: Path) -> "tuple[EnvironmentHome, Path]":
    """A DIR whose link points at one built environment, as a first install leaves it."""
    home = EnvironmentHome(link)
    home.link.parent.mkdir(parents=True, exist_ok=True)
    home.lock().__enter__().__exit__()
    env = built(home)
    home.switch_to(env)
    return home, env


def installed_twice(installer: Installer, tmp_path: Path) -> "tuple[str, str]":
    """Two installs into one DIR: the first environment is kept as the previous one."""
    code, _, stderr = installer.run()
    assert code == 0, stderr
    first = os.readlink(installer.venv)
    changed = tmp_path / "changed-source"
    shutil.copytree(installer.source, changed)
    (changed / "obliteratus" / "extra.py").write_text("X = 2\n")
    code, _, stderr = installer.run(changed)
    assert code == 0, stderr
    return first, os.readlink(installer.venv)


@pytest.mark.slow
def test_list_rollback_undo_and_uninstall_an_installed_environment(installer: Installer, tmp_path: Path) -> None:
    first, second = installed_twice(installer, tmp_path)
    venv = str(installer.venv)

    listed = run_cli("list", env=installer.env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == venv
    assert lines[1].startswith(f"  current   {Path(second).name}   made 20") and lines[1].endswith("iB")
    # The install's --no-verify ran only the checks that need no GPU: its doctor says so.
    assert f"channel jp6-cu126   torch {VENDOR_TORCH} (CUDA 12.6)   doctor partial-passed, 8 checks " in lines[2]
    assert any(line.startswith(f"  previous  {Path(first).name}") for line in lines)
    assert f"roll back to it: jetson-install rollback --venv {venv}" in listed.stdout
    data = json.loads(run_cli("list", "--json", env=installer.env).stdout)["environments"]
    assert [entry["venv"] for entry in data] == [venv]
    assert data[0]["current"]["path"] == second and data[0]["previous"]["path"] == first
    assert data[0]["current"]["size_bytes"] > 100_000 and data[0]["current"]["channel"] == "jp6-cu126"

    rolled = run_cli("rollback", "--venv", venv, env=installer.env)
    assert rolled.returncode == 0, rolled.stderr
    assert rolled.stdout.splitlines() == [f"{venv} -> {Path(first).name} (rolled back; {Path(second).name} is kept)",
                                          f"  undo: jetson-install rollback --venv {venv}"]
    assert os.readlink(venv) == first
    assert installer.torch() == f"{VENDOR_TORCH} vendor"  # the rolled-back environment works as it is
    assert run_cli("rollback", "--venv", venv, env=installer.env).returncode == 0  # the undo
    assert os.readlink(venv) == second
    # A re-run after a rollback and its undo is still a no-op: nothing was moved.
    code, data_again, stderr = installer.run(tmp_path / "changed-source")
    assert (code, data_again["status"]) == (0, "unchanged"), stderr

    removed = run_cli("uninstall", "--venv", venv, env=installer.env)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith(f"removed {venv} (env-") and Path(first).name in removed.stdout
    assert Path(second).name in removed.stdout
    assert not os.path.lexists(venv) and not Path(venv + ".d").exists()
    listed = run_cli("list", env=installer.env)
    assert listed.stdout.startswith("no environments made by jetson-install for this user")


@pytest.mark.slow
def test_list_says_the_cuda_of_the_torch_there_now_not_the_one_recorded(installer: Installer, tmp_path: Path) -> None:
    """After a `+cpu` torch replaced the vendor build, `list` said "(CUDA 12.6)" beside it."""
    import subprocess

    from support import build_wheel, find_uv

    code, _, stderr = installer.run()
    assert code == 0, stderr
    cpu = build_wheel(tmp_path / "cpu", "torch", "2.9.0+cpu", modules={"torch/version.py": "cuda = None\n"})
    replaced = subprocess.run([find_uv(), "pip", "install", "--python", str(installer.venv / "bin" / "python"),
                               "--no-deps", "--offline", str(cpu)], capture_output=True, text=True, env=installer.env,
                              timeout=300)
    assert replaced.returncode == 0, replaced.stderr
    listed = run_cli("list", env=installer.env)
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if "torch " in line)
    assert "torch 2.9.0+cpu   doctor" in line and "CUDA" not in line, line


def test_what_the_tool_did_not_make_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    mine = tmp_path / "myenv"
    (mine / "bin").mkdir(parents=True)
    (mine / "bin" / "python").write_text("mine\n")
    for command in ("rollback", "uninstall"):
        result = run_cli(command, "--venv", str(mine))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            f"error: --venv {mine}: was not made by jetson-install; it is left as it is",
            "  fix: see the environments it made: jetson-install list"]
        assert (mine / "bin" / "python").read_text() == "mine\n"
    nothing = run_cli("uninstall", "--venv", str(tmp_path / "none"))
    assert (nothing.returncode, nothing.stderr.splitlines()[0]) == (2, f"error: --venv {tmp_path / 'none'}: "
                                                                       "no environment there")
    assert "Traceback" not in nothing.stderr


def test_rollback_needs_a_kept_previous_environment(tmp_path: Path) -> None:
    home = EnvironmentHome(tmp_path / "obl")
    home.lock().__enter__().__exit__()
    only = built(home)
    home.switch_to(only)
    result = run_cli("rollback", "--venv", str(home.link))
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (f"error: --venv {home.link}: no previous environment is kept to roll "
                                             f"back to (only {only.name}, the one in use)")
    assert home.current() == only


def test_the_single_path_record_of_earlier_builds_still_names_the_environment_to_roll_back_to(
        tmp_path: Path) -> None:
    home = EnvironmentHome(tmp_path / "obl")
    home.home.mkdir()
    old, new = built(home), built(home)
    home.switch_to(new)
    (home.home / "previous").write_text(f"{old}\n")  # written after the rename, as those builds did
    assert home.previous() == old
    (home.home / "previous").write_text(f"{new}\n")  # ... and a kill between the two: the record names DIR's own
    assert home.previous() == old
    assert home.rollback() == (old, new)
    assert home.previous() == new


def test_uninstall_keeps_what_the_user_put_in_dir_d(tmp_path: Path) -> None:
    home = EnvironmentHome(tmp_path / "obl")
    home.home.mkdir()
    (home.home / "env-mydata").mkdir()
    (home.home / "env-mydata" / "results.csv").write_text("precious\n")
    old, new = built(home), built(home)
    home.switch_to(old)
    home.switch_to(new)
    result = run_cli("uninstall", "--venv", str(home.link), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert sorted(data["removed"]) == sorted([str(old), str(new)]) and data["left"] == [str(home.home / "env-mydata")]
    assert data["freed_bytes"] >= 20000
    assert (home.home / "env-mydata" / "results.csv").read_text() == "precious\n"
    assert not os.path.lexists(home.link) and not old.exists() and not new.exists()
    assert "left in obl.d, not made by jetson-install: env-mydata" in result.stderr


def test_list_finds_the_default_environment_and_says_what_is_broken(tmp_path: Path) -> None:
    from jetson_install.cli.commands.lifecycle import default_venv

    home, env = switched(default_venv("obliteratus"))
    listed = run_cli("list")
    assert listed.stdout.splitlines()[0] == str(home.link)
    assert "channel jp6-cu126   torch none   no doctor evidence" in listed.stdout
    shutil.rmtree(env)
    listed = run_cli("list")
    assert listed.stdout.splitlines()[0] == f"{home.link}   (broken)"
    assert f"  fix: install it again: jetson-install obliteratus --venv {home.link}" in listed.stdout


def test_a_broken_dir_is_fixed_by_the_command_of_the_target_that_made_it(tmp_path: Path) -> None:
    from jetson_install.cli.commands.lifecycle import default_venv

    torch, made = switched(default_venv("torch"))
    shutil.rmtree(made)  # nothing in DIR.d says what made it: the default DIR's name does
    elsewhere, made = switched(tmp_path / "mine")
    shutil.rmtree(made)
    killed = elsewhere.new_environment_path()  # a build killed before it finished, its plan recorded
    (killed / STATE_DIR).mkdir(parents=True)
    elsewhere.record_plan(killed, {"channel": "jp6-cu126", "target": "torch"})
    unknown, made = switched(tmp_path / "unknown")
    shutil.rmtree(made)
    listed = run_cli("list", "--json")
    targets = {entry["venv"]: entry["target"] for entry in json.loads(listed.stdout)["environments"]}
    assert targets == {str(torch.link): "torch", str(elsewhere.link): "torch", str(unknown.link): None}, targets
    text = run_cli("list").stdout
    assert f"  fix: install it again: jetson-install torch --venv {torch.link}" in text
    assert f"  fix: install it again: jetson-install torch --venv {elsewhere.link}" in text
    assert (f"  fix: install it again with the command that made it: jetson-install TARGET --venv {unknown.link} "
            "(the targets: jetson-install --help)") in text


def _user_folders() -> "tuple[Path, Path]":
    import platformdirs

    return Path(platformdirs.user_log_dir("jetson-install")), Path(platformdirs.user_cache_dir("jetson-install"))


def test_clean_removes_logs_build_cache_and_leftovers_and_says_how_much(tmp_path: Path) -> None:
    logs, cache = _user_folders()
    logs.mkdir(parents=True)
    (logs / "obliteratus-20261201-101010.log").write_bytes(b"l" * 5000)
    (logs / "notes.txt").write_text("mine\n")
    (cache / "builds" / "bitsandbytes" / "0.49.2-sm87").mkdir(parents=True)
    (cache / "builds" / "bitsandbytes" / "0.49.2-sm87" / "bnb.whl").write_bytes(b"w" * 50000)
    (cache / "wheels" / ("a" * 64)).mkdir(parents=True)  # a vendor wheel the fetch step downloaded and checked
    (cache / "wheels" / ("a" * 64) / "torch-2.8.0-cp310-cp310-linux_aarch64.whl").write_bytes(b"t" * 20000)
    (cache / "test-lanes").mkdir()
    (cache / "interpreters.json").write_text("{}\n")
    (cache / ".interpreters.json.4242").write_text("{")  # a write killed before its rename
    home = EnvironmentHome(tmp_path / "obl")
    home.lock().__enter__().__exit__()  # as an install would: DIR is now known
    old, new = built(home), built(home)
    home.switch_to(old)
    home.switch_to(new)
    killed = home.new_environment_path()  # a build a kill left
    killed.mkdir()
    (home.home / ".removing-env-20261201-000000-abcdef").mkdir()
    (home.home / "failed-env-20261201-000000-abcdef-evidence.json").write_text("{}\n")

    preview = run_cli("clean", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert (logs / "obliteratus-20261201-101010.log").exists() and killed.exists()
    lines = preview.stdout.splitlines()
    assert any(line.startswith("would remove ") and line.endswith(f"log: {logs / 'obliteratus-20261201-101010.log'}")
               for line in lines)
    assert any("bitsandbytes build cache: " + str(cache / "builds") in line for line in lines)
    assert any(line.endswith("checked vendor wheels: " + str(cache / "wheels")) for line in lines)
    assert any(line.endswith("interpreter cache: " + str(cache / "interpreters.json")) for line in lines)
    assert f"unfinished environment: {killed}" in preview.stdout
    assert f"left      {logs / 'notes.txt'} (not made by jetson-install)" in lines
    assert f"left      {cache / 'test-lanes'} (not made by jetson-install)" in lines

    result = run_cli("clean", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total_bytes"] >= 75000 and len(data["removed"]) == 7
    assert not (logs / "obliteratus-20261201-101010.log").exists() and not (cache / "builds").exists()
    assert not (cache / "wheels").exists()
    assert not (cache / "interpreters.json").exists() and not (cache / ".interpreters.json.4242").exists()
    assert not killed.exists() and not (home.home / ".removing-env-20261201-000000-abcdef").exists()
    # A failed verify's evidence is kept on purpose (the install keeps the last five): not a leftover.
    assert (home.home / "failed-env-20261201-000000-abcdef-evidence.json").is_file()
    assert (logs / "notes.txt").exists() and (cache / "test-lanes").is_dir()
    assert home.current() == new and home.previous() == old  # the environments are never cleaned
    assert run_cli("clean").stdout.startswith("nothing to clean")


def test_clean_waits_for_nobody_while_an_install_holds_an_environment(tmp_path: Path) -> None:
    logs, _ = _user_folders()
    logs.mkdir(parents=True)
    (logs / "obliteratus-20261201-101010.log").write_text("running\n")
    home = EnvironmentHome(tmp_path / "obl")
    with home.lock():
        result = run_cli("clean")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: another jetson-install is working on {home.link}",
                                          "  fix: wait for it to finish, then run the command again"]
    assert (logs / "obliteratus-20261201-101010.log").exists()


@pytest.mark.slow
def test_quiet_keeps_results_and_errors_and_verbose_shows_each_command(installer: Installer) -> None:
    plain = run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2")
    quiet = run_cli("-q", "detect", "--root", "sample:agx-orin-64gb-jp6.2")
    after = run_cli("detect", "--root", "sample:agx-orin-64gb-jp6.2", "--quiet")
    assert quiet.returncode == after.returncode == 0 and quiet.stderr == after.stderr == ""
    assert quiet.stdout.splitlines()[:-1] == after.stdout.splitlines()[:-1] == plain.stdout.splitlines()[:-1]
    code, data, stderr = installer.run(extra=("-q",))
    assert code == 0 and data["status"] == "installed"
    # No progress and no summary: only the warnings (a sample root, another Python) are left.
    assert stderr and all(line.startswith("warning: ") for line in stderr.splitlines()), stderr
    # A no-op re-run runs no command at all: -v is seen on an install into a new DIR.
    args = installer.args()
    args[args.index("--venv") + 1] = f"{installer.venv}-verbose"
    verbose = run_cli(*args, "-v", env=installer.env)
    assert verbose.returncode == 0, verbose.stderr
    assert "  | run: " in verbose.stderr
    refused = run_cli("obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--venv", "", "-q")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == ["error: --venv is empty", "  fix: give the environment's location, e.g. "
                                           "--venv ~/obliteratus, or drop --venv"]
    both = run_cli("-q", "list", "-v")
    assert both.returncode == 2
    assert both.stderr.splitlines()[0] == "error: -q/--quiet and -v/--verbose were both given"
    entrypoint = run_cli("container-entrypoint", "--help")
    # Before its COMMAND, as every command (its COMMAND's own -q stays the COMMAND's: tests/test_dockerfile.py).
    assert "--quiet" in entrypoint.stdout


def test_rollback_follows_previous_only_to_an_environment_of_its_own_dir_d(tmp_path: Path) -> None:
    ours, only = switched(tmp_path / "obl")
    other, theirs = switched(tmp_path / "other")
    # A copy of another DIR.d's environment, under the tool's naming, carries that DIR.d's token.
    copied = ours.home / "env-20260101-000000-abcdef"
    shutil.copytree(theirs, copied)
    for edited in (str(theirs), f"{ours.home}/../other.d/{theirs.name}", str(copied)):
        (ours.home / "previous").write_text(edited + "\n")  # edited by hand
        result = run_cli("rollback", "--venv", str(ours.link))
        assert result.returncode == 2, edited
        assert result.stderr.splitlines()[0] == (f"error: --venv {ours.link}: no previous environment is kept to "
                                                 f"roll back to (only {only.name}, the one in use)")
        assert ours.current() == only and other.current() == theirs


def test_a_linked_dir_d_is_refused_and_nothing_in_its_target_is_removed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = data / "env-20260101-000000-abcdef"
    (env / STATE_DIR).mkdir(parents=True)
    (env / STATE_DIR / "complete").write_text("mine\n")
    (data / ".removing-env-20260101-000000-abcdef").mkdir()
    (data / ".removing-env-20260101-000000-abcdef" / "results.csv").write_text("precious\n")
    (data / "previous").write_text("my notes\n")
    (data / ".lock").write_text("")
    link = tmp_path / "obl"
    home = EnvironmentHome(link)
    home.home.symlink_to(data)
    link.symlink_to(home.home / env.name)
    for command in ("uninstall", "rollback"):
        result = run_cli(command, "--venv", str(link))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            f"error: --venv {link}: {home.home} is a link, not a folder jetson-install made; it is left as it is",
            f"  fix: remove the link {home.home} (its target stays), then choose a --venv on the disk it pointed to"]
    assert (data / "previous").read_text() == "my notes\n"
    assert (data / ".removing-env-20260101-000000-abcdef" / "results.csv").read_text() == "precious\n"
    assert (env / STATE_DIR / "complete").is_file() and os.path.islink(link)
    assert not run_cli("list").stdout.startswith(str(link))


def test_a_dir_d_made_before_the_mark_is_adopted_once_and_a_hand_made_one_is_not(tmp_path: Path) -> None:
    from jetson_install.base.layout import OWNER_MARK

    home, old = switched(tmp_path / "obl")
    new = built(home)
    home.switch_to(new)
    for mark in (home.home / OWNER_MARK, old / STATE_DIR / OWNER_MARK, new / STATE_DIR / OWNER_MARK):
        mark.unlink()  # as an install before marks left it: the lock file, complete environments, their plans
    assert run_cli("list").stdout.splitlines()[0] == str(home.link)
    result = run_cli("rollback", "--venv", str(home.link))
    assert result.returncode == 0, result.stderr
    assert home.current() == old and home.previous() == new
    token = (home.home / OWNER_MARK).read_text()
    assert (old / STATE_DIR / OWNER_MARK).read_text() == (new / STATE_DIR / OWNER_MARK).read_text() == token

    made = tmp_path / "hand.d"  # familiar names only: the lock file, `previous`, a lookalike environment
    (made / "env-20260101-000000-abcdef" / STATE_DIR).mkdir(parents=True)
    (made / "env-20260101-000000-abcdef" / STATE_DIR / "complete").write_text("x\n")
    (made / ".lock").write_text("")
    (made / "previous").write_text(f"{made / 'env-20260101-000000-abcdef'}\n")
    (tmp_path / "hand").symlink_to(made / "env-20260101-000000-abcdef")
    refused = run_cli("uninstall", "--venv", str(tmp_path / "hand"))
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[0] == f"error: --venv {tmp_path / 'hand'}: was not made by jetson-install; " \
                                             "it is left as it is"
    assert sorted(path.name for path in made.iterdir()) == [".lock", "env-20260101-000000-abcdef", "previous"]


def test_list_tells_an_install_in_progress_and_kept_evidence_from_leftovers(tmp_path: Path) -> None:
    home, _env = switched(tmp_path / "obl")
    (home.home / "failed-env-20261201-000000-abcdef-evidence.json").write_text("{}\n")
    quiet = run_cli("list")
    assert quiet.stdout.splitlines()[0] == str(home.link) and "left by interrupted runs" not in quiet.stdout
    with home.lock():
        building = home.new_environment_path()  # what the install holding the lock is building
        (building / "lib").mkdir(parents=True)
        (building / "lib" / "libtorch.so").write_bytes(b"\0" * 100_000)
        listed = run_cli("list")
    assert listed.stdout.splitlines()[0] == f"{home.link}   (install in progress)"
    assert "left by interrupted runs" not in listed.stdout
    after = run_cli("list")  # the run was killed: now it is a leftover
    assert after.stdout.splitlines()[0] == str(home.link)
    assert "left by interrupted runs (remove: jetson-install clean)" in after.stdout


def _evidence(environment: Path, status: str) -> None:
    from jetson_install.base.layout import EVIDENCE_FILE

    (environment / STATE_DIR / EVIDENCE_FILE).write_text(json.dumps(
        {"status": status, "checks": [{"id": "torch-build"}], "generated_at": "2026-12-01T00:00:00Z"}))


def test_list_offers_a_rollback_only_to_a_previous_environment_its_own_evidence_vouches_for(tmp_path: Path) -> None:
    home, first = switched(tmp_path / "obl")
    _evidence(first, "passed")
    second = built(home)
    home.switch_to(second)
    listed = run_cli("list")
    assert f"roll back to it: jetson-install rollback --venv {home.link}" in listed.stdout
    _evidence(first, "failed")  # its doctor, run again, failed
    listed = run_cli("list")
    assert "doctor failed, 1 checks" in listed.stdout and "roll back to it" not in listed.stdout
    assert f"check it before rolling back to it: jetson-install doctor --python {first}/bin/python" in listed.stdout
    entry = json.loads(run_cli("list", "--json").stdout)["environments"][0]
    assert entry["previous"]["doctor"].startswith("failed")


@pytest.mark.slow
def test_list_says_a_previous_environment_changed_since_its_doctor_and_offers_no_rollback(
        installer: Installer, tmp_path: Path) -> None:
    first, _second = installed_twice(installer, tmp_path)
    (init,) = Path(first).glob("lib/python*/site-packages/torch/__init__.py")
    init.unlink()  # what a pip install over it, or a hand, can do to a kept environment
    listed = run_cli("list", env=installer.env)
    assert listed.returncode == 0, listed.stderr
    assert f"changed since its doctor ran: torch {VENDOR_TORCH} lost files its RECORD lists: torch/__init__.py" \
        in listed.stdout
    assert "roll back to it" not in listed.stdout
    check = next(line for line in listed.stdout.splitlines() if "check it before rolling back" in line)
    entry = json.loads(run_cli("list", "--json", env=installer.env).stdout)["environments"][0]
    assert entry["previous"]["changed_since_install"] and not entry["current"]["changed_since_install"]
    # The printed command runs as printed: the doctor judges that environment (and finds torch broken).
    doctor = run_cli(*shlex.split(check.split(": jetson-install ", 1)[1]), "--root", "sample:agx-orin-64gb-jp6.2",
                     env=installer.env)
    assert doctor.returncode == 1, doctor.stderr
    assert "torch" in doctor.stdout


def test_list_and_clean_name_the_kept_failed_verify_evidence_and_clean_removes_it_only_when_asked(
        tmp_path: Path) -> None:
    home, _env = switched(tmp_path / "obl")
    evidence = home.home / "failed-env-20261201-000000-abcdef-evidence.json"
    evidence.write_text("{}\n")
    listed = run_cli("list")
    assert f"  failed    1 failed verify(s), their doctor evidence kept: {evidence} (the newest)" in listed.stdout
    assert json.loads(run_cli("list", "--json").stdout)["environments"][0]["failed_evidence"] == [str(evidence)]
    cleaned = run_cli("clean")
    assert cleaned.returncode == 0 and evidence.is_file()
    kept = cleaned.stdout.splitlines()[-1]
    assert kept == (f"kept      1 failed-verify evidence file(s), the newest {evidence} (remove them too: "
                    "jetson-install clean --failed-evidence)")
    asked = run_cli(*kept.split("remove them too: jetson-install ", 1)[1].rstrip(")").split())
    assert asked.returncode == 0, asked.stderr
    assert f"failed-verify evidence: {evidence}" in asked.stdout and not evidence.exists()


def test_clean_dry_run_shows_what_it_can_while_an_install_runs_and_locks_nothing(tmp_path: Path) -> None:
    logs, _ = _user_folders()
    logs.mkdir(parents=True)
    (logs / "obliteratus-20261201-101010.log").write_text("done\n")
    home, _env = switched(tmp_path / "obl")
    with home.lock():
        killed = home.new_environment_path()  # what the install holding the lock is building
        killed.mkdir()
        preview = run_cli("clean", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert f"log: {logs / 'obliteratus-20261201-101010.log'}" in preview.stdout
    assert str(killed) not in preview.stdout  # the running install's, not a leftover
    assert f"skipped   {home.link} (an install is in progress there; run clean when it ends)" in preview.stdout


def test_clean_counts_what_it_removes_in_words_a_person_writes() -> None:
    from jetson_install.cli.render import clean_lines
    from jetson_install.envs.lifecycle import Cleaned

    one = Cleaned((("interpreter cache", "/c/interpreters.json", 215),), (), dry_run=True)
    two = Cleaned((("log", "/l/a.log", 100), ("log", "/l/b.log", 100)), (), dry_run=False)
    assert clean_lines(one)[-1] == "would remove 215 B in 1 item"
    assert clean_lines(two)[-1] == "removed 200 B in 2 items"


def test_a_link_planted_as_the_lock_is_refused_and_nothing_is_made_where_it_points(tmp_path: Path) -> None:
    home, env = switched(tmp_path / "obl")
    home.switch_to(built(home))
    outside = tmp_path / "elsewhere" / "created-by-the-tool"
    outside.parent.mkdir()
    lock = home.home / ".lock"
    lock.unlink()
    lock.symlink_to(outside)
    for command in (("rollback", "--venv", str(home.link)), ("uninstall", "--venv", str(home.link))):
        result = run_cli(*command)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"error: {home.link}: {lock} is a link, not jetson-install's lock file; nothing was done, and what it "
            "points to is left as it is",
            f"  fix: remove the link (rm {lock}), then run the command again"]
    assert not outside.exists() and os.readlink(home.link) != str(env)  # nothing rolled back or removed
    listed = run_cli("list")  # reading the lock (is an install running?) does not follow it either
    assert listed.returncode == 0 and "(install in progress)" not in listed.stdout, listed.stdout
    assert not outside.exists()


def test_the_tools_own_files_are_never_written_through_a_link(tmp_path: Path) -> None:
    from jetson_install.envs.recorded import write_constraints

    home = EnvironmentHome(tmp_path / "obl")
    home.lock().__enter__().__exit__()
    environment = home.new_environment_path()
    (environment / STATE_DIR).mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's\n")
    for name in ("complete", "constraints.txt", "plan.json"):
        (environment / STATE_DIR / name).symlink_to(outside)
    for write in (lambda: home.mark_complete(environment), lambda: write_constraints(environment, ["torch==2.8.0"]),
                  lambda: home.record_plan(environment, {"channel": "jp6-cu126"})):
        with pytest.raises(OSError, match="Too many levels of symbolic links"):
            write()
    assert outside.read_text() == "the user's\n"


def test_another_users_environment_is_theirs_to_change_and_a_refused_command_records_nothing(
        nobodys_folder: Path) -> None:
    from support.fixtures import as_nobody

    shared = nobodys_folder / "shared"  # root's, where every user may look
    shared.mkdir(mode=0o755)
    shutil.chown(shared, "root")
    home, first = switched(shared / "obl")
    home.switch_to(built(home))
    for path in [shared, *shared.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    for command in ("rollback", "uninstall"):
        result = as_nobody(nobodys_folder, command, "--venv", str(home.link))
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"error: --venv {home.link}: {home.home} belongs to root, not to this user (nobody); nothing was done",
            f"  fix: run it as the user who made it: sudo -u root jetson-install {command} --venv {home.link}"]
    # The fix, as printed (root is running these tests: sudo -u root is what it already is).
    assert run_cli("rollback", "--venv", str(home.link)).returncode == 0 and home.current() == first
    # Nothing of root's was put in nobody's list by the commands it refused.
    listed = as_nobody(nobodys_folder, "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("no environments made by jetson-install for this user"), listed.stdout


@pytest.mark.slow
def test_clean_dry_run_while_an_install_runs_lists_none_of_its_files(
        installer: Installer, tmp_path: Path, stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]
) -> None:
    from test_install_interrupted import reinstall_caught_mid_download

    logs = Path(installer.env["XDG_STATE_HOME"]) / "jetson-install" / "log"
    logs.mkdir(parents=True, exist_ok=True)
    old = logs / "obliteratus-20261201-101010.log"
    old.write_text("an install long done\n")
    process, before, _, held = reinstall_caught_mid_download(installer, tmp_path, stub_index_dirs, start_index)
    try:
        # The running install's own files: the log it holds open, the environment it is making.
        fds = Path(f"/proc/{process.pid}/fd")
        running = {os.readlink(fd) for fd in fds.iterdir() if os.readlink(fd).startswith(str(logs))}
        building = {str(path) for path in Path(f"{installer.venv}.d").glob("env-*") if str(path) != before}
        preview = run_cli("clean", "--dry-run", env=installer.env)
    finally:
        held.release()
        _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    assert preview.returncode == 0, preview.stderr
    assert len(running) == 1 and len(building) == 1, (running, building)
    assert f"log: {old}" in preview.stdout
    for path in running | building:
        assert path not in preview.stdout, preview.stdout
    assert "cache" not in preview.stdout and "vendor wheels" not in preview.stdout  # what it may be reading
    assert f"skipped   {installer.venv} (an install is in progress there; run clean when it ends)" in preview.stdout
