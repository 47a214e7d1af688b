"""The strict gate, its record, and evidence as an input: check, table and runner labels.

Evidence here is real doctor output: `jetson-install doctor` run through the CLI on the
AGX Orin sample root against a venv of the doctor's stub CUDA torch (tests/doctor_stubs/).
"""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any, Dict, List

import jsonschema
import pytest
from support import isolated_env
from support.cli import CliResult, run_cli
from support.doctor_env import HOST_PYTHON, make_env

from jetson_install import doctor
from jetson_install.evidence import schema_errors

TOP = Path(__file__).resolve().parent.parent
ORIN_ROOT = "sample:agx-orin-64gb-jp6.2"


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The real catalog with jp6-cu126 built for the test interpreter's Python, so python-abi passes."""
    base = tmp_path_factory.mktemp("catalog")
    text = (TOP / "wheels-index.toml").read_text()
    jp6 = text.index('id = "jp6-cu126"')
    text = text[:jp6] + text[jp6:].replace('python = "3.10"', f'python = "{HOST_PYTHON}"', 1)
    (base / "wheels-index.toml").write_text(text)
    # Made before each test's own isolation (a module fixture): isolated here.
    env = isolated_env(base, {"JETSON_INSTALL_WHEELS_INDEX": str(base / "wheels-index.toml")})
    env.pop("GITHUB_SHA", None)
    return env


def jetson_install(env: Dict[str, str], *args: str) -> CliResult:
    return run_cli(*args, env=env)


def complete_env(root: Path, **changes: Any) -> str:
    """make_env's stubs, with the dist-info files `uv pip check` reads, so the whole gate can pass."""
    python = make_env(root, **changes)
    for dist_info in root.glob("lib/python*/site-packages/*.dist-info"):
        (dist_info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        (dist_info / "RECORD").write_text("")
    return python


@pytest.fixture(scope="module")
def stub_envs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    base = tmp_path_factory.mktemp("envs")
    return {"working": complete_env(base / "working"), "cpu-bnb": complete_env(base / "cpu-bnb", bnb_library="cpu")}


@pytest.fixture(scope="module")
def gate_runs(tmp_path_factory: pytest.TempPathFactory, cli_env: Dict[str, str], stub_envs: Dict[str, str]) -> Dict[str, Any]:
    """Each stub environment through `doctor --strict --evidence --gate-evidence`, once."""
    out = tmp_path_factory.mktemp("evidence")
    runs = {}
    for name, python in stub_envs.items():
        evidence, gate = out / f"{name}.json", out / f"{name}-gate.json"
        result = jetson_install(cli_env, "doctor", "--root", ORIN_ROOT, "--python", python, "--strict",
                                "--evidence", str(evidence), "--gate-evidence", str(gate))
        runs[name] = {"result": result, "evidence": evidence, "gate": gate}
    return runs


def test_strict_gate_passes_and_writes_upstreams_gate_record(gate_runs: Dict[str, Any]) -> None:
    run = gate_runs["working"]
    assert run["result"].returncode == 0, run["result"].stdout + run["result"].stderr
    assert run["result"].stdout.splitlines()[-1].startswith("Strict gate passed")
    record = json.loads(run["gate"].read_text())
    assert list(record) == sorted(record)  # sorted keys, as upstream writes it
    assert record["schema_version"] == 1 and record["gate"] == "jetson-runtime" and record["status"] == "passed"
    assert record["git_sha"] == "local" and record["exit_code"] == 0
    evidence = json.loads(run["evidence"].read_text())
    assert record["generated_at"] == evidence["generated_at"]
    applicable = [check for check in evidence["checks"] if check["status"] != "not_applicable"]
    assert record["counts"] == {"tests": len(applicable), "failures": 0, "errors": 0, "skipped": 0}
    assert evidence["strict"] is True and evidence["platform"]["channel"] == "jp6-cu126"
    assert evidence["platform"]["board"] == "NVIDIA Jetson AGX Orin Developer Kit"


def test_strict_gate_fails_a_skip_with_its_reason_and_records_it(gate_runs: Dict[str, Any]) -> None:
    run = gate_runs["cpu-bnb"]
    assert run["result"].returncode == 1
    output = run["result"].stdout
    assert "- bitsandbytes NF4 kernels run [bnb-kernels]: needs bnb-library, which did not pass" in output
    assert output.splitlines()[-1].startswith("Strict gate failed: bnb-library (fail), bnb-kernels (skip)")
    record = json.loads(run["gate"].read_text())
    assert record["status"] == "failed" and record["exit_code"] == 1
    assert record["counts"]["failures"] == 1 and record["counts"]["skipped"] == 2


def test_gate_record_carries_the_commit_under_actions(cli_env: Dict[str, str], stub_envs: Dict[str, str],
                                                      tmp_path: Path) -> None:
    sha = "a" * 40
    result = jetson_install(dict(cli_env, GITHUB_SHA=sha), "doctor", "--root", ORIN_ROOT, "--python",
                            stub_envs["working"], "--gate-evidence", str(tmp_path / "gate.json"))
    assert result.returncode == 0, result.stdout
    assert "Strict gate passed" in result.stdout  # --gate-evidence implies --strict
    assert json.loads((tmp_path / "gate.json").read_text())["git_sha"] == sha


def _rewrite(source: Path, target: Path, **changes: Any) -> str:
    data = json.loads(source.read_text())
    data.update(changes)
    target.write_text(json.dumps(data))
    return str(target)


def _days_ago(days: int) -> str:
    when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=days)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_evidence_check_one_line_per_file_and_the_exit_code(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                            tmp_path: Path) -> None:
    fresh = str(gate_runs["working"]["evidence"])
    stale = _rewrite(gate_runs["working"]["evidence"], tmp_path / "stale.json", generated_at=_days_ago(40))
    result = jetson_install(cli_env, "evidence", "check", fresh, "--require", "platform.channel=jp6-cu126",
                            "--require", "strict=true")
    assert result.returncode == 0, result.stdout
    assert result.stdout == f"{fresh}: ok: passed strict, 0 days old (jp6-cu126, JetPack 6.2 / L4T 36.4.3)\n"
    result = jetson_install(cli_env, "evidence", "check", fresh, stale)
    assert result.returncode == 1
    assert result.stdout.splitlines()[1] == f"{stale}: FAIL: stale: generated {_days_ago(40)[:10]}, 40 days ago (maximum 30)"
    assert jetson_install(cli_env, "evidence", "check", stale, "--max-age", "45").returncode == 0
    mismatch = jetson_install(cli_env, "evidence", "check", fresh, "--require", "platform.channel=jp7-thor-cu130")
    assert mismatch.returncode == 1
    assert mismatch.stdout.strip().endswith("FAIL: platform.channel is jp6-cu126, required jp7-thor-cu130")
    failed = jetson_install(cli_env, "evidence", "check", str(gate_runs["cpu-bnb"]["evidence"]))
    assert failed.returncode == 1 and "FAIL: status failed (bnb-library)" in failed.stdout


def test_evidence_check_refuses_what_it_cannot_read(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                    tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    result = jetson_install(cli_env, "evidence", "check", str(gate_runs["working"]["evidence"]),
                            str(tmp_path / "broken.json"))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {tmp_path / 'broken.json'}: not JSON")
    old = _rewrite(gate_runs["working"]["evidence"], tmp_path / "v1.json", schema_version=1)
    result = jetson_install(cli_env, "evidence", "check", old)
    assert result.returncode == 1
    assert "FAIL: not valid evidence (schema 1): $.schema_version: must be 2" in result.stdout
    bad = jetson_install(cli_env, "evidence", "check", old, "--require", "platform.channel")
    assert bad.returncode == 2 and "expected KEY=VALUE" in bad.stderr


def test_support_table_counts_fresh_passing_evidence_only(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                         tmp_path: Path) -> None:
    fresh = str(gate_runs["working"]["evidence"])
    stale = _rewrite(gate_runs["working"]["evidence"], tmp_path / "stale.json", generated_at=_days_ago(31))
    failed = str(gate_runs["cpu-bnb"]["evidence"])
    result = jetson_install(cli_env, "evidence", "table", fresh, stale, failed)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| board | JetPack / L4T | channel | torch | bitsandbytes | date | result |"
    assert lines[2] == (f"| NVIDIA Jetson AGX Orin Developer Kit | JetPack 6.2 / L4T 36.4.3 | jp6-cu126 | 2.8.0 | "
                        f"0.46.1 (kernels passed) | {_days_ago(0)[:10]} | passed (strict) |")
    assert lines[3:6] == ["", "Not counted (stale, failed or invalid):", ""]
    assert lines[6].startswith(f"- `{stale}`: stale") and lines[7].startswith(f"- `{failed}`: status failed")


def test_labels_follow_the_convention_and_cuda_needs_fresh_passing_evidence(
        gate_runs: Dict[str, Any], cli_env: Dict[str, str], tmp_path: Path) -> None:
    base = "self-hosted,linux,ARM64,jetson,orin,jp6.2,l4t-36.4,sm87"
    fresh = str(gate_runs["working"]["evidence"])
    result = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--evidence", fresh)
    assert result.returncode == 0, result.stderr
    # The stub device reports 7.99e9 bytes: an 8 GB module.
    assert result.stdout == base + ",mem8g,cuda\n"
    stale = _rewrite(gate_runs["working"]["evidence"], tmp_path / "stale.json", generated_at=_days_ago(31))
    result = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--evidence", stale, "--json")
    data = json.loads(result.stdout)
    assert data["labels"] == base.split(",") and data["cuda"] is False and "stale" in data["cuda_reason"]
    failed = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--evidence", str(gate_runs["cpu-bnb"]["evidence"]))
    assert failed.stdout == base + "\n" and "cuda: no" in failed.stderr
    none = jetson_install(cli_env, "labels", "--root", ORIN_ROOT)
    assert none.stdout == base + "\n" and "no evidence" in none.stderr


def test_labels_refuse_cuda_for_evidence_from_another_release(gate_runs: Dict[str, Any], cli_env: Dict[str, str]) -> None:
    result = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--l4t", "36.4.4", "--evidence",
                            str(gate_runs["working"]["evidence"]))
    assert ",cuda" not in result.stdout
    assert "evidence is for L4T 36.4.3, this is L4T 36.4.4" in result.stderr


def test_memory_class_from_the_roots_meminfo(cli_env: Dict[str, str], tmp_path: Path) -> None:
    import shutil

    from jetson_install.samples import resolve_root

    root = tmp_path / "root"
    shutil.copytree(str(resolve_root(ORIN_ROOT)), str(root))
    # A 64 GB AGX Orin leaves about 61 GiB to the kernel.
    (root / "proc" / "meminfo").write_text("MemTotal:       64335836 kB\nMemFree:        60000000 kB\n")
    result = jetson_install(cli_env, "labels", "--root", str(root), "--json")
    assert json.loads(result.stdout)["labels"][-1] == "mem64g"


def _mutations(evidence: Dict[str, Any]) -> List[Dict[str, Any]]:
    variants = []
    for path, value in [(("schema_version",), 1), (("status",), "maybe"), (("platform", "l4t"), "36.4"),
                        (("torch", "total_memory_bytes"), -1), (("torch", "arch_list"), ["sm_87", 87]),
                        (("checks", 0, "status"), "fail"), (("checks", 0, "fix"), None),
                        (("environment", "obliteratus", "commit"), "abc"), (("strict",), "yes"),
                        (("environment", "vendor_builds"), {"torch": 2}), (("platform", "extra"), "x")]:
        variant = copy.deepcopy(evidence)
        target: Any = variant
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        variants.append(variant)
    variant = copy.deepcopy(evidence)
    del variant["environment"]
    variants.append(variant)
    return variants


def test_the_tools_own_validator_agrees_with_jsonschema(gate_runs: Dict[str, Any]) -> None:
    documents = [json.loads(gate_runs[name]["evidence"].read_text()) for name in gate_runs]
    documents += _mutations(documents[0])
    schema = doctor.evidence_schema()
    for document in documents:
        expected = not list(jsonschema.Draft202012Validator(schema).iter_errors(document))
        assert (not schema_errors(document)) == expected, (document, schema_errors(document))
    assert sum(1 for document in documents if schema_errors(document)) == len(documents) - 3  # the two runs, and no fix on an ok check


def test_evidence_names_the_commit_a_checkout_source_was_installed_from(
        cli_env: Dict[str, str], tmp_path: Path) -> None:
    import hashlib

    from jetson_install.layout import STATE_DIR

    python = complete_env(tmp_path / "env")
    commit = "0123456789abcdef0123456789abcdef01234567"
    state = tmp_path / "env" / STATE_DIR
    state.mkdir()

    def commit_for(changes: str) -> Any:
        (state / "plan.json").write_text(json.dumps(
            {"source": {"kind": "git-checkout", "commit": commit, "changes": changes}}))
        result = jetson_install(cli_env, "doctor", "--root", ORIN_ROOT, "--python", python, "--json")
        return json.loads(result.stdout)["environment"]["obliteratus"]["commit"]

    assert commit_for(hashlib.sha256().hexdigest()) == commit  # a clean checkout (`--source .` in the workflow)
    assert commit_for(hashlib.sha256(b"M obliteratus/x.py").hexdigest()) is None  # edited: no commit describes it
