"""Bad input is caught where it is typed: one line, a fix, exit 2, in a dry run as in a real one;
and each command says what to run next."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from support.cli import CliResult, run_cli

from jetson_install.planning.rerun import Rerun

SAMPLE = "sample:agx-orin-64gb-jp6.2"


def cli(*args: str, env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> CliResult:
    return run_cli(*args, env=dict(os.environ, **(env or {})), cwd=cwd)


def one_error(result: CliResult) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[1].startswith("  fix: "), result.stderr
    return result.stderr


@pytest.mark.parametrize(("venv", "fragment"), [
    ("/proc/x", "--venv /proc/x: cannot create folders in /proc"),
    ("/etc/passwd", "--venv /etc/passwd: exists and was not made by jetson-install"),
])
def test_a_dry_run_refuses_the_locations_a_real_run_refuses(venv: str, fragment: str) -> None:
    argv = ("obliteratus", "--root", SAMPLE, "--dry-run", "--venv", venv, "--python", sys.executable)
    error = one_error(cli(*argv))
    assert fragment in error
    # The fix is the user's own command with the location to choose.
    assert f" {Rerun(argv).with_option('--venv', 'DIR')}" in error.splitlines()[1], error


def test_a_dry_run_refuses_an_interpreter_that_does_not_run(tmp_path: Path) -> None:
    stderr = one_error(cli("obliteratus", "--root", SAMPLE, "--dry-run", "--venv", str(tmp_path / "obl"),
                           "--python", "/nonexistent"))
    assert "--python /nonexistent: cannot run it" in stderr


def test_a_dry_run_changes_nothing_where_it_checks(tmp_path: Path) -> None:
    venv = tmp_path / "new" / "deeper" / "obl"
    result = cli("obliteratus", "--root", SAMPLE, "--dry-run", "--venv", str(venv), "--python", sys.executable)
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []


def _install_into(venv: Path, *more: str) -> Tuple[List[str], CliResult]:
    """An install into `venv` that would fail at its first step (its indexes do not answer)."""
    argv = ["torch", "--root", SAMPLE, "--python", sys.executable, "--venv", str(venv), "--yes",
            "--default-index", "http://127.0.0.1:9/simple/", "--vendor-index", "http://127.0.0.1:9/simple/", *more]
    return argv, cli(*argv)


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_an_empty_folder_of_the_users_is_refused_and_kept_as_it_was(tmp_path: Path, dry_run: Tuple[str, ...]) -> None:
    # DIR becomes a link: replacing the user's folder would lose it (and its mode) on any run, failed or not.
    empty = tmp_path / "empty"
    empty.mkdir()
    empty.chmod(0o2750)
    argv, result = _install_into(empty, *dry_run)
    assert result.stderr.splitlines() == [
        f"error: --venv {empty}: is an empty folder jetson-install did not make (DIR becomes a link to its "
        "environments); it is left as it is",
        f"  fix: remove it (rmdir {empty}), then run: jetson-install {' '.join(argv)}"], result.stderr
    assert result.returncode == 2
    assert empty.is_dir() and not empty.is_symlink() and oct(empty.stat().st_mode & 0o7777) == "0o2750"
    assert not (tmp_path / "empty.d").exists()
    if dry_run:  # the fix, as printed: the same command now passes the location's checks
        empty.rmdir()
        fixed = _install_into(empty, *dry_run)[1]
        assert fixed.returncode == 0 and f"venv      {empty}" in fixed.stdout, fixed.stdout + fixed.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/unshare"), reason="mounts a tmpfs: needs root")
def test_a_mount_point_is_refused_naming_why_with_a_fix_that_works(tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    mount.mkdir()
    argv = ["torch", "--root", SAMPLE, "--python", sys.executable, "--venv", str(mount), "--yes", "--dry-run"]
    fix = Rerun(tuple(argv)).with_option("--venv", str(mount / "venv"))
    # In a mount namespace of its own, so the tmpfs goes with it; the fix is run as printed.
    script = (f"mount -t tmpfs none {mount} 2>&1 || exit 99; {sys.executable} -m jetson_install {' '.join(argv)}; "
              f"echo rc=$?; {sys.executable} -m {str(fix).replace('jetson-install', 'jetson_install', 1)} >/dev/null 2>&1;"
              " echo fixed=$?")
    ran = subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True, text=True, timeout=120)
    if ran.returncode != 0:
        pytest.skip(f"cannot mount here: {ran.stdout.strip()} {ran.stderr.strip()}")
    assert [line for line in ran.stderr.splitlines() if not line.startswith("warning: ")] == [
        f"error: --venv {mount}: is a mount point, and jetson-install makes DIR a link to its environments "
        "(DIR.d/env-*), so DIR cannot be a mount point; it is left as it is",
        f"  fix: use a folder inside the mount: {fix}"]
    assert ran.stdout.splitlines()[-2:] == ["rc=2", "fixed=0"], ran.stdout


@pytest.mark.parametrize(("ref", "fragment"), [
    ("v0.1.3 ; python_version < '3'", "contains ' ', which no git ref name has"),
    ("", "is empty"),
    ("a..b", "is not a valid git ref name"),
    ("--upload-pack=x", "--ref '--upload-pack=x': --upload-pack is an option, not --ref's value"),
    ("v1@{0}", "contains '@'"),
])
def test_a_ref_that_is_not_a_git_ref_name_is_refused_in_plan_and_dry_run(ref: str, fragment: str, tmp_path: Path) -> None:
    assert fragment in one_error(cli("plan", "obliteratus", "--root", SAMPLE, f"--ref={ref}"))
    assert fragment in one_error(cli("obliteratus", "--root", SAMPLE, "--dry-run", f"--ref={ref}",
                                     "--venv", str(tmp_path / "obl")))


@pytest.mark.parametrize("ref", ["v0.1.3", "main", "release/1.2", "4f2c1e9"])
def test_real_refs_pass(ref: str) -> None:
    result = cli("plan", "obliteratus", "--root", SAMPLE, "--ref", ref, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["requirement"].endswith(f"@{ref}")


@pytest.mark.parametrize(("value", "fragment"), [
    ("36", "names only the major release"),
    ("0.0.0", "no Jetson ever ran L4T R0"),
    ("", "not an L4T release"),
    ("36.x", "not an L4T release"),
])
def test_l4t_nonsense_is_refused(value: str, fragment: str) -> None:
    stderr = one_error(cli("detect", "--root", SAMPLE, "--l4t", value))
    assert fragment in stderr and "--l4t 36.4.3" in stderr
    if value:  # an empty variable counts as unset, as for every click option
        assert fragment in one_error(cli("detect", "--root", SAMPLE, env={"JETSON_L4T_VERSION": value}))


def test_a_release_without_its_patch_is_completed_and_says_so() -> None:
    result = cli("detect", "--root", SAMPLE, "--l4t", "36.4", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["l4t"] == "36.4.0"
    assert any(w.startswith("--l4t 36.4 taken as 36.4.0") for w in data["warnings"])


@pytest.mark.parametrize(("venv", "fragment"), [("", "--venv is empty"), ("/tmp/a\nb", "contains the control character '\\n'")])
def test_an_empty_or_multi_line_venv_is_refused(venv: str, fragment: str) -> None:
    assert fragment in one_error(cli("plan", "obliteratus", "--root", SAMPLE, "--venv", venv))
    assert fragment in one_error(cli("doctor", "--root", SAMPLE, "--venv", venv))


def test_a_value_that_is_an_option_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    """`--venv --yes` made ./--yes and ./--yes.d/: the value forgotten, click took the next word."""
    result = cli("obliteratus", "--root", SAMPLE, "--venv", "--yes", "--python", sys.executable, "--dry-run",
                 cwd=str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: --venv '--yes': --yes is an option, not --venv's value",
        "  fix: give --venv its DIR before the next option (one whose name starts with '-' as ./--yes: "
        "--venv ./--yes)"]
    assert list(tmp_path.iterdir()) == []
    for command in (("doctor", "--venv", "-q"), ("rollback", "--venv", "--json"), ("uninstall", "--venv", "--yes"),
                    ("add", "x", "--venv", "--dry-run"), ("labels", "--evidence", "--json"),
                    ("lock", "--output", "--json"), ("torch", "--with", "--yes", "--dry-run")):
        assert "is an option, not" in one_error(cli(*command, cwd=str(tmp_path))), command
    assert list(tmp_path.iterdir()) == []
    # The fix as printed: a folder whose name starts with '-' is given as ./--yes.
    fixed = cli("obliteratus", "--root", SAMPLE, "--venv", "./--yes", "--python", sys.executable, "--dry-run",
                "--json", cwd=str(tmp_path))
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["venv"] == str(tmp_path / "--yes")


def test_an_empty_config_variable_is_refused_not_ignored() -> None:
    stderr = one_error(cli("plan", "obliteratus", "--root", SAMPLE, env={"JETSON_INSTALL_CONFIG": ""}))
    assert "JETSON_INSTALL_CONFIG is set but empty" in stderr


def test_a_config_file_that_is_a_directory_is_refused_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "jetson-install" / "config.toml").mkdir(parents=True)
    stderr = one_error(cli("plan", "obliteratus", "--root", SAMPLE, env={"XDG_CONFIG_HOME": str(tmp_path)}))
    assert f"{tmp_path}/jetson-install/config.toml: is not a file" in stderr
    stderr = one_error(cli("plan", "obliteratus", "--root", SAMPLE,
                           env={"JETSON_INSTALL_CONFIG": str(tmp_path / "jetson-install" / "config.toml")}))
    assert "config.toml: is not a file" in stderr


def test_channels_says_the_catalog_is_valid() -> None:
    result = cli("channels")
    assert result.returncode == 0
    assert result.stdout.strip().splitlines()[-1].endswith("wheels-index.toml: valid, 8 channels (5 installable)")


def test_detect_and_plan_say_what_to_run_next() -> None:
    detect = cli("detect", "--root", SAMPLE)
    assert detect.stdout.strip().splitlines()[-1] == f"next: see what an install would do: jetson-install plan obliteratus --root {SAMPLE}"
    plan = cli("plan", "obliteratus", "--root", SAMPLE, "--venv", "/tmp/my envs/obl")
    if os.uname().machine == "aarch64":
        assert plan.stdout.strip().splitlines()[-1] == (f"next: install it: jetson-install obliteratus --root {SAMPLE} "
                                                        "--venv '/tmp/my envs/obl'")
    else:
        # A sample root previews the board: the install runs there, where the root is /.
        assert plan.stdout.strip().splitlines()[-1] == ("next: on the aarch64 board itself, install it: "
                                                        "jetson-install obliteratus --venv '/tmp/my envs/obl'")


def option_help(help_text: str, option: str) -> str:
    """The help click prints for one option: its line and the lines indented under it."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(option + " "))
    entry = [lines[start]]
    indent = len(lines[start]) - len(lines[start].lstrip())
    for line in lines[start + 1:]:
        if not line.strip() or len(line) - len(line.lstrip()) <= indent:
            break
        entry.append(line)
    return " ".join(" ".join(entry).split())


@pytest.mark.parametrize("command", [("detect",), ("plan", "obliteratus"), ("obliteratus",), ("doctor",),
                                     ("dockerfile",), ("labels",), ("lock",)])
def test_the_l4t_help_says_it_overrides_the_release_file(command: Tuple[str, ...]) -> None:
    shown = cli(*command, "--help")
    assert shown.returncode == 0, shown.stderr
    assert option_help(shown.stdout, "--l4t").startswith("--l4t VERSION Use this L4T release (e.g. 36.4.3) instead "
                                                         "of what the root's files say")


def test_constraints_outside_a_checkout_says_it_is_a_maintainer_command(tmp_path: Path) -> None:
    stderr = one_error(cli("constraints", cwd=str(tmp_path)))
    assert "`constraints` is a maintainer command" in stderr


def test_a_dry_run_on_this_machine_refuses_what_the_install_would_refuse() -> None:
    import platform

    if platform.machine() == "aarch64":
        pytest.skip("this machine is aarch64: an install on / would go ahead")
    result = cli("obliteratus", "--root", "/", "--l4t", "36.4.3", "--dry-run", "--venv", "/tmp/x-never-made")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "the JetPack wheels are built for aarch64" in result.stdout


def test_a_usage_error_is_one_line_with_the_commands_help() -> None:
    result = cli("plan", "obliteratus", "--xyzzy")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: No such option '--xyzzy'.",
                                          "  fix: see its options: jetson-install plan obliteratus --help"]
    negative = cli("evidence", "check", "evidence.json", "--max-age", "-1")
    assert negative.returncode == 2 and negative.stderr.startswith("error: Invalid value for '--max-age'")



@pytest.mark.parametrize(("command", "option", "url"), [
    (("obliteratus",), "--source", "notaurl://x"),
    (("obliteratus",), "--source", "git+ftp://host/repo"),
    (("torch",), "--with", "git+notaurl://x"),
    (("torch",), "--with", "ftp://host/pkg-1.0-py3-none-any.whl"),
])
def test_a_url_uv_does_not_install_from_is_refused_before_the_plan(command: Tuple[str, ...], option: str, url: str,
                                                                  tmp_path: Path) -> None:
    """Refused at step `target` in uv's words before; now with the other URLs, before anything runs."""
    dry_run = (*command, "--dry-run", "--venv", str(tmp_path / "env"), "--python", sys.executable)
    for words in (("plan", *command), dry_run):
        stderr = one_error(cli(*words, "--root", SAMPLE, option, url))
        assert stderr.splitlines()[0].startswith(f"error: {option} {url}: not a URL uv installs from"), stderr
    if option == "--source":
        fix = stderr.splitlines()[1]
        assert fix == ("  fix: give the repository's URL, e.g. --source https://github.com/elder-plinius/OBLITERATUS, "
                       "or a checkout's folder")
        fixed = cli("plan", "obliteratus", "--root", SAMPLE, "--source", fix.split("--source ")[1].split(",")[0],
                    "--json")
        assert fixed.returncode == 0, fixed.stderr
        assert json.loads(fixed.stdout)["requirement"].startswith(
            "obliteratus[quantization] @ git+https://github.com/elder-plinius/OBLITERATUS")
    assert list(tmp_path.iterdir()) == []


def test_add_names_its_own_argument_and_fix_for_a_requirement_it_cannot_read(tmp_path: Path) -> None:
    """`add 'not a req!!'` called its argument --with, and its fix used --with, which add does not take."""
    stderr = one_error(cli("add", "not a req!!", "--dry-run", cwd=str(tmp_path)))
    assert stderr.splitlines()[0].startswith("error: jetson-install add 'not a req!!' is not a requirement: ")
    assert stderr.splitlines()[1] == ("  fix: give a package name with an optional version, e.g. jetson-install add "
                                      "'transformers>=4.40'")
    folder = one_error(cli("add", "./nothing", "--dry-run", cwd=str(tmp_path))).splitlines()
    assert folder == ["error: jetson-install add ./nothing: no Python project there (no pyproject.toml or setup.py)",
                      "  fix: give a project folder, a package name (e.g. jetson-install add transformers) or a git URL"]


def _locks_that_are_not(tmp_path: Path) -> "List[Tuple[str, str]]":
    """(path, what the line says) for a device, a FIFO, a folder and a lock past the bound."""
    from jetson_install.catalog.lock_file import Lock, render_lock

    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    big = tmp_path / "big.lock"
    lock = Lock("jp6-cu126", "cp310", "aarch64", "linux_aarch64", "https://example.invalid/simple", None, "0.1.0",
                ())
    # A real lock read back, with 17 MiB of comment lines after it: more than any lock, and still a lock.
    big.write_text(render_lock(lock) + ("#" * 1023 + "\n") * (17 * 1024))
    return [("/dev/zero", "not a regular file"), (str(fifo), "not a regular file"),
            (str(tmp_path), "not a regular file"), (str(big), "larger than 16 MiB")]


@pytest.mark.parametrize("command", [["wheelhouse", "{tmp}/house"], ["obliteratus", "--root", "sample:agx-orin-64gb-jp6.2",
                                                                    "--dry-run"]])
def test_every_lock_is_read_bounded_and_only_from_a_regular_file(tmp_path: Path, command: List[str]) -> None:
    import subprocess

    for path, why in _locks_that_are_not(tmp_path):
        # A process of its own, given a minute: before, /dev/zero filled the memory and a FIFO waited for a writer.
        result = subprocess.run([sys.executable, "-m", "jetson_install", *[word.format(tmp=tmp_path) for word in command],
                                 "--lock", path], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, (path, result.stderr)
        assert result.stderr.startswith(f"error: --lock {path}: {why}"), result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 2


@pytest.mark.parametrize(("args", "shown"), [
    (["dockerfile", "--root", "sample:agx-orin-64gb-jp6.2", "--output", "/proc/x/Dockerfile"], "/proc/x/Dockerfile"),
    # Before anything is resolved: the dead vendor index would fail it otherwise.
    (["lock", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", "http://127.0.0.1:9/simple",
      "--output", "/proc/x.lock"], "/proc/x.lock"),
    (["doctor", "--root", "sample:agx-orin-64gb-jp6.2", "--python", sys.executable, "--evidence", "/proc/x.json"],
     "/proc/x.json"),
])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(args: List[str], shown: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"error: --{args[-2].lstrip('-')} {shown}: cannot write there (No such file "
                                          "or directory)", "  fix: pass a file in a folder you can write"]


def test_a_home_that_cannot_be_written_names_the_variable_that_moves_the_log(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name not in ("XDG_STATE_HOME", "XDG_CACHE_HOME")}
    result = run_cli("obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--venv", str(tmp_path / "obl"),
                     "--python", sys.executable, "--yes", env={**env, "HOME": "/proc"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: cannot write the log in /proc/.local/state/jetson-install/log (No such file or directory)",
        "  fix: set XDG_STATE_HOME to a folder you can write (or HOME), then run the command again"]
    assert not (tmp_path / "obl").exists() and not (tmp_path / "obl.d").exists()


# A run killed (SIGKILL, which runs no `finally`) the instant its check of a folder made a file or a
# folder there, before it could remove it: each such kill would leave one more in the user's folder.
_KILLED_CHECKING = """
import os, signal, sys
from pathlib import Path
from jetson_install.base.outputs import check_output
from jetson_install.envs.home import EnvironmentHome
folder, what = sys.argv[1], sys.argv[2]
opened, made = os.open, os.mkdir
def killed_if_in_the_folder(descriptor_or_path):
    where = os.readlink(f"/proc/self/fd/{descriptor_or_path}") if isinstance(descriptor_or_path, int) \\
        else os.path.abspath(descriptor_or_path)
    if where.startswith(folder + "/"):
        os.kill(os.getpid(), signal.SIGKILL)
def killed_once_opened(path, flags, *args, **kwargs):
    descriptor = opened(path, flags, *args, **kwargs)
    killed_if_in_the_folder(descriptor)
    return descriptor
def killed_once_made(path, *args, **kwargs):
    made(path, *args, **kwargs)
    killed_if_in_the_folder(path)
os.open, os.mkdir = killed_once_opened, killed_once_made
if what == "output":
    check_output("--evidence", Path(folder) / "evidence.json")
else:
    EnvironmentHome(Path(folder) / "obl").check_usable(str, create=False)
"""


@pytest.mark.parametrize("what", ["output", "venv"])
def test_a_run_killed_while_it_checks_a_folder_it_writes_in_leaves_nothing_there(what: str, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    source = str(Path(__file__).resolve().parent.parent)
    killed = subprocess.run([sys.executable, "-c", _KILLED_CHECKING, str(folder), what], capture_output=True,
                            text=True, env=dict(os.environ, PYTHONPATH=source), timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # killed at that instant, as a kill -9 may
    assert list(folder.iterdir()) == []


def test_a_root_that_is_empty_missing_or_a_file_is_refused_saying_which(tmp_path: Path) -> None:
    """`--root ''` was taken as / (the host's own root read as if asked), a missing folder was
    "not a directory"."""
    afile = tmp_path / "afile"
    afile.write_text("")
    fix = ("  fix: pass the directory a Jetson's filesystem is mounted at (/ on the board), or a sample: --root "
           "sample:agx-orin-64gb-jp6.2 (jetson-install samples)")
    cases = {"": ["error: --root: empty",
                  "  fix: pass a directory, e.g. --root /, or a sample: --root sample:agx-orin-64gb-jp6.2"],
             str(tmp_path / "absent"): [f"error: --root {tmp_path / 'absent'}: no such directory", fix],
             str(afile): [f"error: --root {afile}: not a directory", fix]}
    for root, lines in cases.items():
        result = run_cli("detect", "--root", root)
        assert (result.returncode, result.stderr.splitlines()) == (2, lines), root


@pytest.mark.parametrize(("argv", "command"), [(["detect", "--root"], "jetson-install detect"),
                                               (["plan", "obliteratus", "--root"], "jetson-install plan obliteratus")])
def test_an_option_without_its_value_points_at_its_own_commands_help(argv: List[str], command: str) -> None:
    result = run_cli(*argv)
    assert (result.returncode, result.stderr.splitlines()) == (2, [
        "error: Option '--root' requires an argument.", f"  fix: see its options: {command} --help"])
