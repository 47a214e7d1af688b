"""A saved plan, as a user runs it: `plan obliteratus ... --out FILE` writes it (mode 0600, no
secret), `jetson-install obliteratus --plan FILE` runs exactly it, or refuses in one line, exit 2,
with the reason and the command that makes a new plan: another board, another catalog, another
jetson-install, an environment changed since, a changed source, a vendor set no longer served,
an option that would change it, a file edited or cut short. `--dry-run --detailed-exitcode`
exits 6 where the install would change the environment and 0 where it would not.

Against loopback indexes (support.stub_projects); nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest
from support.cli import CliResult, run_cli
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.planned import assert_ran_as_planned
from support.stub_projects import IndexDirs

from jetson_install.base.errors import EXIT_BAD_INPUT, EXIT_CHANGED


def _plan_args(installer: Installer, source: Optional[Path] = None) -> List[str]:
    """The install's options, as `plan obliteratus` takes them (no --yes, no --json)."""
    return ["plan", *[arg for arg in installer.args(source) if arg not in ("--yes", "--json")]]


def _save(installer: Installer, out: Path, *extra: str, env: Optional[Dict[str, str]] = None) -> CliResult:
    result = run_cli(*_plan_args(installer), "--out", str(out), *extra, env={**installer.env, **(env or {})})
    assert result.returncode == 0, result.stderr
    return result


def _refused(result: CliResult, why: str, fix: str) -> None:
    """One line with the reason, the fix, exit 2, and nothing on stdout (no --json)."""
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and why in lines[0], result.stderr
    assert lines[1].startswith("  fix: ") and fix in lines[1], result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def saved(installer: Installer, tmp_path: Path) -> Path:
    """A plan of a first install into installer.venv, saved (it reads the loopback vendor index)."""
    out = tmp_path / "obliteratus.plan"
    result = _save(installer, out)
    assert f"plan saved to {out}" in result.stderr
    assert f"next: apply exactly this plan: jetson-install obliteratus --plan {out}" in result.stderr
    return out


def test_a_saved_plan_holds_the_whole_plan_for_this_board_and_is_the_users_alone(
        installer: Installer, saved: Path) -> None:
    data = json.loads(saved.read_text())
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert data["format"] == "jetson-install plan" and data["format_version"] == 1
    assert data["command"][0] == "obliteratus" and "--out" not in data["command"]
    assert data["platform"]["l4t"] == "36.4.3" and data["platform"]["soc"] == "tegra234"
    assert data["environment"] is None and data["would_change"] is True
    # The vendor set resolved, file by file with its sha256, and the steps that fetch and install exactly those files.
    files = data["plan"]["resolution"]["files"]
    assert {chosen["name"] for chosen in files} >= {"torch", "torchvision", "torchaudio"}
    assert all(len(chosen["sha256"]) == 64 for chosen in files)
    assert [step["id"] for step in data["plan"]["steps"]][:4] == ["interpreter", "environment", "fetch", "vendor"]
    assert data["plan"]["interpreter"]  # the Python the install takes, named in its steps


@pytest.mark.slow  # it installs
def test_the_install_runs_exactly_the_saved_plan_then_a_stale_plan_is_refused(installer: Installer,
                                                                              saved: Path) -> None:
    planned = json.loads(saved.read_text())["plan"]
    dry = run_cli("obliteratus", "--plan", str(saved), "--dry-run", "--detailed-exitcode", env=installer.env)
    assert dry.returncode == EXIT_CHANGED, dry.stderr
    assert not installer.venv.exists()
    result = run_cli("obliteratus", "--plan", str(saved), "--yes", "--json", "--detailed-exitcode", env=installer.env)
    assert result.returncode == EXIT_CHANGED, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "installed"
    assert_ran_as_planned(data)
    assert data["resolution"]["files"] == planned["resolution"]["files"]
    # The environment records the install command the plan stood for, which `add` runs again.
    recorded = json.loads((installer.venv / "jetson-install" / "plan.json").read_text())
    assert recorded["command"] == json.loads(saved.read_text())["command"]
    # As terraform's: a saved plan is for the state it was made against.
    again = run_cli("obliteratus", "--plan", str(saved), "--yes", env=installer.env)
    _refused(again, f"the environment at {installer.venv} changed since the plan was made",
             f"make a new plan: jetson-install {' '.join(_plan_args(installer))} --out {saved}")
    # A new plan changes nothing, and says so; applied, it is a no-op, exit 0 with --detailed-exitcode.
    _save(installer, saved)
    assert json.loads(saved.read_text())["would_change"] is False
    same = run_cli("obliteratus", "--plan", str(saved), "--yes", "--json", "--detailed-exitcode", env=installer.env)
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["status"] == "unchanged"


@pytest.mark.slow  # it installs
def test_detailed_exitcode_says_whether_a_dry_run_would_change_the_environment(installer: Installer) -> None:
    args = [arg for arg in installer.args() if arg not in ("--yes", "--json")]
    before = run_cli(*args, "--dry-run", "--detailed-exitcode", env=installer.env)
    assert before.returncode == EXIT_CHANGED, before.stderr
    assert installer.run(extra=("--detailed-exitcode",))[0] == EXIT_CHANGED
    after = run_cli(*args, "--dry-run", "--detailed-exitcode", env=installer.env)
    assert after.returncode == 0, after.stderr
    assert run_cli(*installer.args(), "--detailed-exitcode", env=installer.env).returncode == 0  # unchanged


@pytest.mark.parametrize(("damage", "why"), [
    (lambda text: text.replace('"--no-verify"', '"--no-gpu-check"', 1), "was changed after it was written"),
    (lambda text: text[: len(text) // 2], "is not a whole plan file (cut short or edited"),
    (lambda text: json.dumps({"format": "something else"}), "is not a jetson-install plan file"),
    (lambda text: text.replace('"format_version": 1', '"format_version": 99', 1), "is in plan format 99, newer"),
    (lambda text: text.replace('"would_change": true', '"would_change": "yes"', 1), "its 'would_change' is missing"),
])
def test_an_edited_or_cut_plan_file_is_refused_naming_the_file(installer: Installer, saved: Path,
                                                               damage: Callable[[str], str], why: str) -> None:
    saved.write_text(damage(saved.read_text()))
    _refused(run_cli("obliteratus", "--plan", str(saved), "--yes", env=installer.env), f"--plan {saved}: {why}",
             "make the plan again: jetson-install plan")
    assert not installer.venv.exists()


def test_what_is_no_plan_file_is_refused(installer: Installer, tmp_path: Path) -> None:
    _refused(run_cli("obliteratus", "--plan", str(tmp_path), env=installer.env), "is not a regular file",
             "jetson-install plan TARGET")
    _refused(run_cli("obliteratus", "--plan", str(tmp_path / "none"), env=installer.env), "cannot read it",
             "jetson-install plan TARGET")
    large = tmp_path / "large.plan"
    with open(large, "wb") as handle:
        handle.truncate(4 * 1024 * 1024 + 1)
    _refused(run_cli("obliteratus", "--plan", str(large), env=installer.env), "is larger than any plan",
             "jetson-install plan TARGET")


def test_a_plan_for_another_board_is_refused(installer: Installer, tmp_path: Path) -> None:
    out = tmp_path / "other.plan"
    _save(installer, out, env={"JETSON_L4T_VERSION": "36.4.4"})  # the plan's board says L4T 36.4.4
    result = run_cli("obliteratus", "--plan", str(out), "--yes", env=installer.env)
    _refused(result, "was made for another board (", "make a new plan: jetson-install plan obliteratus")
    assert "l4t 36.4.4, soc tegra234" in result.stderr and "; this is " in result.stderr
    assert "l4t 36.4.3, soc tegra234" in result.stderr


def test_a_plan_made_with_another_catalog_or_jetson_install_is_refused(
        installer: Installer, saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = Path(installer.env["JETSON_INSTALL_WHEELS_INDEX"])
    original = catalog.read_text()
    catalog.write_text(original + "\n# a newer revision\n")
    _refused(run_cli("obliteratus", "--plan", str(saved), "--yes", env=installer.env),
             "was made with another catalog (wheels-index.toml sha256", "make a new plan with this catalog")
    catalog.write_text(original)
    monkeypatch.setattr("jetson_install.cli.commands.apply.__version__", "9.9.9")
    _refused(run_cli("obliteratus", "--plan", str(saved), "--yes", env=installer.env),
             "was made by jetson-install 0.1.0; this is 9.9.9", "apply it with jetson-install 0.1.0, or make a new plan")


def test_a_plan_whose_source_changed_since_is_refused(installer: Installer, tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(installer.source, source)
    out = tmp_path / "source.plan"
    result = run_cli(*_plan_args(installer, source), "--out", str(out), env=installer.env)
    assert result.returncode == 0, result.stderr
    (source / "obliteratus" / "extra.py").write_text("X = 1\n")
    _refused(run_cli("obliteratus", "--plan", str(out), "--yes", env=installer.env),
             "its source changed since the plan was made", "make a new plan: jetson-install plan obliteratus")


def test_a_vendor_set_no_longer_served_is_refused(
        installer: Installer, tmp_path: Path, private_index_dirs: IndexDirs,
        start_index: Callable[..., LoopbackIndex]) -> None:
    vendor = start_index(private_index_dirs.vendor, name="vendor")
    args = _plan_args(installer)
    args[args.index("--vendor-index") + 1] = vendor.url
    out = tmp_path / "served.plan"
    assert run_cli(*args, "--out", str(out), env=installer.env).returncode == 0
    resolution = json.loads(out.read_text())["plan"]["resolution"]
    torch = next(chosen["file"] for chosen in resolution["files"] if chosen["name"] == "torch")
    next(private_index_dirs.vendor.rglob(torch)).unlink()
    _refused(run_cli("obliteratus", "--plan", str(out), "--yes", env=installer.env),
             f"its vendor set {resolution['set']} is no longer served by {vendor.url} ({torch} not listed",
             "make a new plan")
    assert not installer.venv.exists()


def test_options_that_would_change_the_plan_or_another_command_are_refused(installer: Installer, saved: Path,
                                                                           tmp_path: Path) -> None:
    _refused(run_cli("obliteratus", "--plan", str(saved), "--venv", str(tmp_path / "other"), env=installer.env),
             f"--plan runs the plan as {saved} holds it, so --venv cannot change it",
             "leave --venv out, or make a new plan with it: jetson-install plan obliteratus")
    _refused(run_cli("torch", "--plan", str(saved), env=installer.env),
             f"--plan {saved}: is a plan for `jetson-install obliteratus`, not `jetson-install torch`",
             f"apply it with: jetson-install obliteratus --plan {saved}")
    _refused(run_cli("add", "--plan", str(saved), env=installer.env), "not `jetson-install add`",
             f"apply it with: jetson-install obliteratus --plan {saved}")


def test_a_plan_file_keeps_no_credentials(installer: Installer, tmp_path: Path) -> None:
    out = tmp_path / "secret.plan"
    args = _plan_args(installer)
    at = args.index("--vendor-index") + 1
    with_token = args[at].replace("http://", "http://fleet:s3cr3t-token@")
    given = [*args[:at], with_token, *args[at + 1:]]
    result = run_cli(*given, "--out", str(out), env=installer.env)
    _refused(result, "--out: a plan file keeps no credentials, and --vendor-index gives some in a URL",
             f"put them in ~/.netrc (machine HOST login USER password TOKEN), which jetson-install, uv and git read, "
             f"then: jetson-install {' '.join(args)} --out {out}")
    assert "s3cr3t-token" not in result.stderr + result.stdout and not out.exists()
    # Given where a plan does not keep them (the variable, read again by the apply), they stay out of the file.
    env = {"JETSON_INSTALL_VENDOR_INDEX": with_token}
    without = [*args[:at - 1], *args[at + 1:]]
    assert run_cli(*without, "--out", str(out), env={**installer.env, **env}).returncode == 0
    assert "s3cr3t-token" not in out.read_text() and "fleet:****@" in out.read_text()
    dry = run_cli("obliteratus", "--plan", str(out), "--dry-run", "--detailed-exitcode", env={**installer.env, **env})
    assert dry.returncode == EXIT_CHANGED, dry.stderr



@pytest.mark.slow  # it installs
def test_add_applies_a_saved_plan_of_an_addition(installer: Installer, tmp_path: Path) -> None:
    assert installer.run()[0] == 0
    before = os.readlink(installer.venv)
    out = tmp_path / "add.plan"
    planned = run_cli("plan", "add", "--venv", str(installer.venv), "six", "--out", str(out), env=installer.env)
    assert planned.returncode == 0, planned.stderr
    assert f"next: apply exactly this plan: jetson-install add --plan {out}" in planned.stderr
    command = json.loads(out.read_text())["command"]
    assert command[0] == "obliteratus" and command[-2:] == ["--with", "six"]
    _refused(run_cli("add", "--plan", str(out), "six", env=installer.env),
             f"--plan runs the plan as {out} holds it, so REQUIREMENT... cannot change it", "leave REQUIREMENT... out")
    result = run_cli("add", "--plan", str(out), "--yes", "--json", env=installer.env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "installed"
    assert os.readlink(installer.venv) != before
    assert installer.python("import importlib.metadata as m; print(m.version('six'))")
