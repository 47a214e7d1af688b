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
from support.doctor_env import HOST_PYTHON, make_env, write_vendor_manifest
from support.stub_stack import write_record

from jetson_install import doctor
from jetson_install.fleet.evidence import schema_errors

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
        name = dist_info.name.split("-")[0]
        write_record(dist_info, (name, "doctor_stub_scenario.py") if name == "torch" else (name,))
    write_vendor_manifest(root, ["torch", "bitsandbytes"])
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
    # Each applicable check the channel requires is a test (jp6-cu126 does not require compile).
    applicable = [check for check in evidence["checks"] if check["status"] != "not_applicable" and check["required"]]
    assert record["counts"] == {"tests": len(applicable), "failures": 0, "errors": 0, "skipped": 0}
    assert {check["id"]: check["required"] for check in evidence["checks"]}["compile"] is False
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
    older = jetson_install(cli_env, "evidence", "check", stale, "--max-age", "45")
    assert older.returncode == 0 and older.stdout.startswith(f"{stale}: ok: passed strict, 40 days old"), older.stdout
    mismatch = jetson_install(cli_env, "evidence", "check", fresh, "--require", "platform.channel=jp7-thor-cu130")
    assert mismatch.returncode == 1
    assert mismatch.stdout.strip().endswith("FAIL: platform.channel is jp6-cu126, required jp7-thor-cu130")
    # A key the evidence does not have is said so, not compared as null.
    absent = jetson_install(cli_env, "evidence", "check", fresh, "--require", "platform.board_id=p3701")
    assert absent.returncode == 1
    assert absent.stdout == f"{fresh}: FAIL: platform.board_id is not in the evidence\n"
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
    assert lines[3:6] == ["", "Not counted (stale, failed, not strict, incomplete or invalid):", ""]
    assert lines[6].startswith(f"- `{stale}`: stale") and lines[7].startswith(f"- `{failed}`: status failed")


def test_support_table_lists_a_file_that_is_no_evidence_and_tabulates_the_rest(
        gate_runs: Dict[str, Any], cli_env: Dict[str, str], tmp_path: Path) -> None:
    """`evidence table evidence/*.json` with a stray file among them: exit 2 and no table before."""
    fresh = str(gate_runs["working"]["evidence"])
    (tmp_path / "list.json").write_text("[1, 2]\n")
    (tmp_path / "notes.json").write_text("{not json")
    result = jetson_install(cli_env, "evidence", "table", fresh, str(tmp_path / "list.json"), str(tmp_path / "notes.json"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2].startswith("| NVIDIA Jetson AGX Orin Developer Kit | JetPack 6.2 / L4T 36.4.3 | jp6-cu126 |")
    assert lines[3:] == ["", "Not counted (stale, failed, not strict, incomplete or invalid):", "",
                         f"- `{tmp_path / 'list.json'}`: not evidence: not an evidence object",
                         f"- `{tmp_path / 'notes.json'}`: not evidence: not JSON (Expecting property name enclosed "
                         "in double quotes: line 1 column 2 (char 1))"]
    # A path that cannot be read at all is still a mistake in the command line.
    missing = jetson_install(cli_env, "evidence", "table", fresh, str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and "cannot read it (No such file or directory)" in missing.stderr


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


def test_labels_refuse_a_soc_the_device_tree_contradicts(cli_env: Dict[str, str], tmp_path: Path) -> None:
    """On a root whose device tree says Orin, `--soc tegra264` gave Thor labels without a word."""
    orin = "sample:agx-orin-jp7.2.1"
    for given, fix in ((("--soc", "tegra264"), f"drop --soc: jetson-install labels --root {orin}"),
                       ((), "unset JETSON_INSTALL_SOC")):
        env = dict(cli_env, JETSON_INSTALL_SOC="tegra264") if not given else cli_env
        result = jetson_install(env, "labels", "--root", orin, *given)
        named = given[0] if given else "JETSON_INSTALL_SOC"
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr.splitlines() == [
            f"error: labels: {named} tegra264 contradicts the device tree, which names tegra234 "
            "(proc/device-tree/compatible); a runner's labels name the hardware it is", f"  fix: {fix}"]
    fixed = jetson_install(cli_env, "labels", "--root", orin)  # the first fix, as printed
    assert f"jetson-install labels --root {orin}".split()[1:] == list(fixed.args[1:])
    assert fixed.returncode == 0 and fixed.stdout.startswith("self-hosted,linux,ARM64,jetson,orin,jp7.2.1,"), fixed.stderr
    # Where the device tree cannot be read (a container), --soc is what names the SoC.
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "nv_tegra_release").write_text("# R39 (release), REVISION: 2.1, GCID: 0, BOARD: generic, "
                                                  "EABI: aarch64, DATE: Thu Jan 1 00:00:00 UTC 2026\n")
    thor = jetson_install(cli_env, "labels", "--root", str(root), "--soc", "tegra264")
    assert thor.returncode == 0 and ",thor,jp7.2.1," in thor.stdout, thor.stderr
    # Its other warnings are detect's, on stderr.
    unknown = jetson_install(cli_env, "labels", "--root", str(TOP / "tests" / "resources" / "boards" /
                                                             "unknown-point-r36.4.9"))
    assert unknown.stderr.splitlines()[0] == ("warning: L4T 36.4.9 is not in the release table; JetPack 6.x assumed "
                                              "from R36")


def test_memory_class_from_the_roots_meminfo(cli_env: Dict[str, str], tmp_path: Path) -> None:
    import shutil

    from jetson_install.board.samples import resolve_root

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

    from jetson_install.base.layout import STATE_DIR

    python = complete_env(tmp_path / "env")
    commit = "0123456789abcdef0123456789abcdef01234567"
    state = tmp_path / "env" / STATE_DIR
    state.mkdir(exist_ok=True)  # the manifest is there already

    def commit_for(changes: str) -> Any:
        (state / "plan.json").write_text(json.dumps(
            {"source": {"kind": "git-checkout", "commit": commit, "changes": changes}}))
        result = jetson_install(cli_env, "doctor", "--root", ORIN_ROOT, "--python", python, "--json")
        return json.loads(result.stdout)["environment"]["obliteratus"]["commit"]

    assert commit_for(hashlib.sha256().hexdigest()) == commit  # a clean checkout (`--source .` in the workflow)
    assert commit_for(hashlib.sha256(b"M obliteratus/x.py").hexdigest()) is None  # edited: no commit describes it


# -- `cuda` means proven: strict, complete, passed, fresh, from this board --------------------

def _edited(source: Path, target: Path, edit: Any) -> str:
    data = json.loads(source.read_text())
    edit(data)
    target.write_text(json.dumps(data))
    return str(target)


def _cuda(cli_env: Dict[str, str], evidence: str, root: str = ORIN_ROOT) -> Dict[str, Any]:
    result = jetson_install(cli_env, "labels", "--root", root, "--evidence", evidence, "--json")
    assert result.returncode == 0, result.stderr
    data: Dict[str, Any] = json.loads(result.stdout)
    return data


def test_cuda_is_refused_for_evidence_that_did_not_check_cuda(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                              stub_envs: Dict[str, str], tmp_path: Path) -> None:
    python = stub_envs["working"]
    runs = {"no-gpu": ("--no-gpu",), "subset": ("--check", "torch-build"), "not-strict": ()}
    for name, options in runs.items():
        evidence = tmp_path / f"{name}.json"
        result = jetson_install(cli_env, "doctor", "--root", ORIN_ROOT, "--python", python, *options,
                                "--evidence", str(evidence))
        assert result.returncode == 0, result.stdout
        expected = "not strict" if name == "not-strict" else "incomplete: "
        # Each is honest evidence of what it ran: a run of some checks says so in its status...
        assert json.loads(evidence.read_text())["status"] == ("passed" if name == "not-strict" else "partial-passed")
        # ... and none of them proves CUDA: `evidence check` says what it lacks, and takes it as
        # ok only when asked to, still saying what it lacks...
        check = jetson_install(cli_env, "evidence", "check", str(evidence))
        assert check.returncode == 1 and f"{evidence}: FAIL: {expected}" in check.stdout, check.stdout
        partial = jetson_install(cli_env, "evidence", "check", "--partial", str(evidence))
        assert partial.returncode == 0 and f"; does not prove CUDA: {expected}" in partial.stdout, partial.stdout
        # ... and no runner gets the label from it.
        labels = _cuda(cli_env, str(evidence))
        assert labels["cuda"] is False and "cuda" not in labels["labels"], name
        assert expected in labels["cuda_reason"], labels["cuda_reason"]
    assert "cuda-available" in _cuda(cli_env, str(tmp_path / "no-gpu.json"))["cuda_reason"]
    # The support table counts by the same rule: only the strict, complete run is "passed".
    files = [str(tmp_path / f"{name}.json") for name in runs]
    table = jetson_install(cli_env, "evidence", "table", str(gate_runs["working"]["evidence"]), *files)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len([line for line in lines if line.startswith("| NVIDIA")]) == 1 and lines[2].endswith("| passed (strict) |")
    assert lines[3:6] == ["", "Not counted (stale, failed, not strict, incomplete or invalid):", ""]
    assert lines[6:] == [f"- `{file}`: {_cuda(cli_env, file)['cuda_reason'].split(': ', 1)[1]}" for file in files]


def test_cuda_is_refused_where_a_cuda_check_only_warned_or_did_not_apply(
        gate_runs: Dict[str, Any], cli_env: Dict[str, str], tmp_path: Path) -> None:
    source = gate_runs["working"]["evidence"]

    def set_check(check_id: str, status: str) -> Any:
        def edit(data: Dict[str, Any]) -> None:
            for check in data["checks"]:
                if check["id"] == check_id:
                    check["status"], check["fix"] = status, "jetson-install doctor"
            data["strict"] = False
        return edit

    warned = _edited(source, tmp_path / "warn.json", set_check("cuda-arch", "warn"))
    assert _cuda(cli_env, warned)["cuda_reason"].endswith("CUDA is not proven: cuda-arch not ok")
    moot = _edited(source, tmp_path / "moot.json", lambda data: [
        check.update(status="not_applicable") for check in data["checks"] if check["id"] == "cuda-matmul"])
    labels = _cuda(cli_env, moot)
    assert labels["cuda"] is False and "CUDA is not proven: cuda-matmul not ok" in labels["cuda_reason"]
    # A check that does not apply for a stated reason (the torch target has no OBLITERATUS) is complete.
    no_target = _edited(source, tmp_path / "no-target.json", lambda data: [
        check.update(status="not_applicable", detail="does not apply: the torch target installs no OBLITERATUS")
        for check in data["checks"] if check["id"] in ("obliteratus", "jetson-contract")])
    assert _cuda(cli_env, no_target)["cuda"] is True


def test_cuda_and_memory_need_evidence_from_this_very_board(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                            tmp_path: Path) -> None:
    source = gate_runs["working"]["evidence"]
    evidence = json.loads(source.read_text())
    assert evidence["platform"]["soc"] == "tegra234" and evidence["platform"]["compute_capability"] == "8.7"
    nano = _edited(source, tmp_path / "nano.json",
                   lambda data: data["platform"].update(module="NVIDIA Jetson Orin Nano (Developer kit)"))
    labels = _cuda(cli_env, nano)
    assert labels["cuda"] is False
    assert labels["cuda_reason"].endswith("evidence is for module NVIDIA Jetson Orin Nano (Developer kit), "
                                          "this is module NVIDIA Jetson AGX Orin (64GB ram)")
    # Nor does its memory figure (the stub's 8 GB) describe this module: the root's meminfo does.
    assert "mem8g" not in labels["labels"]
    for field, value, words in (("soc", "tegra264", "SoC tegra264"), ("compute_capability", "11.0",
                                                                      "compute capability 11.0")):
        other = _edited(source, tmp_path / f"{field}.json", lambda data, field=field, value=value: data["platform"].update({field: value}))
        assert f"evidence is for {words}, this is" in _cuda(cli_env, other)["cuda_reason"]
    # (with the arch list the doctor would have passed cuda-arch on there, so nothing contradicts it)
    measured = _edited(source, tmp_path / "measured.json",
                       lambda data: data["torch"].update(capability="8.6", arch_list=["sm_86"]))
    assert "evidence is for measured compute capability 8.6" in _cuda(cli_env, measured)["cuda_reason"]


def test_evidence_check_refuses_a_status_its_checks_contradict(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                               tmp_path: Path) -> None:
    edited = _rewrite(gate_runs["cpu-bnb"]["evidence"], tmp_path / "edited.json", status="passed")
    result = jetson_install(cli_env, "evidence", "check", edited)
    assert result.returncode == 1
    assert result.stdout == f"{edited}: FAIL: status passed contradicts its checks: bnb-library failed\n"
    assert _cuda(cli_env, edited)["cuda"] is False
    source = gate_runs["working"]["evidence"]
    kernels = _edited(source, tmp_path / "kernels.json", lambda data: data["torch"]["kernels"].update(matmul="failed"))
    result = jetson_install(cli_env, "evidence", "check", kernels)
    assert result.returncode == 1 and "contradicts torch.kernels.matmul: failed" in result.stdout
    bnb = _edited(source, tmp_path / "bnb.json", lambda data: data["bitsandbytes"].update(kernel_test="not_run"))
    assert "contradicts bitsandbytes.kernel_test: not_run" in jetson_install(cli_env, "evidence", "check", bnb).stdout
    skipped = _edited(source, tmp_path / "skip.json", lambda data: data["checks"][-1].update(status="skip"))
    assert "strict status passed contradicts its checks: pip-check (skip)" in \
        jetson_install(cli_env, "evidence", "check", skipped).stdout
    preflight = _rewrite(source, tmp_path / "preflight.json", profile="preflight")
    assert "status passed contradicts its profile preflight" in \
        jetson_install(cli_env, "evidence", "check", preflight).stdout
    changed = _edited(source, tmp_path / "changed.json", lambda data: data["integrity"].update(result="failed"))
    assert "status passed contradicts integrity.result: failed" in \
        jetson_install(cli_env, "evidence", "check", changed).stdout
    hook = {"path": "/env/site-packages/x.pth", "kind": "pth", "sha256": None, "distribution": "x", "known": None,
            "vendor": False, "foreign": True}
    hooked = _edited(source, tmp_path / "hooked.json", lambda data: data["integrity"]["hooks"].append(hook))
    assert "strict status passed contradicts integrity.hooks: /env/site-packages/x.pth (installed by x) is foreign" in \
        jetson_install(cli_env, "evidence", "check", hooked).stdout


def test_cuda_needs_the_vendor_files_hashed_and_no_foreign_hook(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                                 tmp_path: Path) -> None:
    source = gate_runs["working"]["evidence"]
    assert json.loads(source.read_text())["integrity"]["files"] == "hashed"
    assert _cuda(cli_env, str(source))["cuda"] is True
    sizes = _edited(source, tmp_path / "sizes.json", lambda data: data["integrity"].update(files="sizes"))
    assert _cuda(cli_env, sizes)["cuda_reason"].endswith("the vendor files were not hashed: make it with "
                                                         "jetson-install doctor --strict --evidence FILE")
    # Evidence from before the doctor verified files and hooks proves no CUDA either.
    def older(data: Dict[str, Any]) -> None:
        del data["integrity"]
        data["checks"] = [check for check in data["checks"] if check["id"] not in ("startup-hooks", "vendor-files")]
    old = _edited(source, tmp_path / "old.json", older)
    check = jetson_install(cli_env, "evidence", "check", old)
    assert check.returncode == 1 and check.stdout.startswith(f"{old}: FAIL: incomplete: startup-hooks, vendor-files "
                                                             "did not run")


def test_evidence_whose_sections_contradict_its_ok_checks_proves_nothing(
        gate_runs: Dict[str, Any], cli_env: Dict[str, str], tmp_path: Path) -> None:
    """Each edit of a strict pass's evidence was accepted before as 'passed strict' with `cuda`."""
    source = gate_runs["working"]["evidence"]

    def recorded(data: Dict[str, Any], torch: str = "2.8.0") -> None:
        data["environment"]["vendor_builds"] = {"torch": "2.8.0", "bitsandbytes": "0.46.1"}
        data["torch"]["version"] = torch

    # What an installed environment records, with the torch it recorded: still proof.
    same = _edited(source, tmp_path / "recorded.json", recorded)
    assert jetson_install(cli_env, "evidence", "check", same).returncode == 0
    assert _cuda(cli_env, same)["cuda"] is True
    edits = {
        "cuda-null": (lambda data: data["torch"].update(cuda=None),
                      "status passed contradicts torch.cuda: null while torch-build is ok"),
        "arch-list": (lambda data: data["torch"].update(arch_list=[]),
                      "status passed contradicts torch.arch_list: no sm_87 kernels or usable PTX in an empty arch "
                      "list while cuda-arch is ok"),
        "device-cpu": (lambda data: data["runtime"].update(obliteratus_device="cpu"),
                       "status passed contradicts runtime.obliteratus_device: 'cpu' while obliteratus is ok"),
        "other-torch": (lambda data: recorded(data, torch="2.9.0"),
                        "status passed contradicts torch.version: 2.9.0, while the environment recorded the vendor "
                        "build torch 2.8.0"),
        "partial": (lambda data: data.update(status="partial-passed"),
                    "strict status partial-passed: a strict run is a run of every check, which passes as 'passed'"),
        "partial-not-strict": (lambda data: data.update(status="partial-passed", strict=False),
                               "status partial-passed: only the doctor's full run passes as 'passed'; make it with "
                               "jetson-install doctor --strict --evidence FILE"),
    }
    for name, (edit, reason) in edits.items():
        edited = _edited(source, tmp_path / f"{name}.json", edit)
        check = jetson_install(cli_env, "evidence", "check", edited)
        assert (check.returncode, check.stdout) == (1, f"{edited}: FAIL: {reason}\n"), name
        labels = _cuda(cli_env, edited)
        assert (labels["cuda"], labels["cuda_reason"].split(": ", 1)[1]) == (False, reason), name
        assert "cuda" not in labels["labels"]
    # The same key twice: Python's json reads the last one, other readers the first.
    text = source.read_text()
    assert text.count('"status": "passed"') == 1
    twice = tmp_path / "twice.json"
    twice.write_text(text.replace('"status": "passed"', '"status": "failed", "status": "passed"'))
    check = jetson_install(cli_env, "evidence", "check", str(twice))
    assert check.returncode == 2 and check.stderr.splitlines()[0] == (
        f"error: {twice}: the key 'status' is given twice in one object, and JSON readers differ on which one counts")
    refused = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--evidence", str(twice))
    assert refused.returncode == 2 and ",cuda" not in refused.stdout


def test_hostile_evidence_is_one_line_and_exit_2(cli_env: Dict[str, str], tmp_path: Path) -> None:
    import os

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 3000 + "]" * 3000)
    nested = tmp_path / "nested.json"
    nested.write_text('{"a":' * 200 + "1" + "}" * 200)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(str(fifo))
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(64 * 2**20)
    # Too deep for the parser (3.11's) or for the reader after it (3.13's parser reads it): the same line.
    for path, why in ((deep, "nested more than 32 levels deep"), (nested, "nested more than 32 levels deep"),
                      (fifo, "not a regular file"), (huge, "over 4 MiB"), (tmp_path, "not a regular file")):
        for command in (("evidence", "check"), ("labels", "--root", ORIN_ROOT, "--evidence")):
            result = jetson_install(cli_env, *command, str(path))
            assert result.returncode == 2, (command, path, result.stderr)
            assert result.stderr.splitlines()[0] == f"error: {path}: {why}" or \
                result.stderr.splitlines()[0].startswith(f"error: {path}: {why}"), result.stderr
            assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 2  # error and fix
        # The table lists such a file apart, as it lists stale or failed evidence.
        table = jetson_install(cli_env, "evidence", "table", str(path))
        assert table.returncode == 0 and table.stderr == "", table.stderr
        assert table.stdout.splitlines()[-1].startswith(f"- `{path}`: not evidence: {why}"), table.stdout


def test_a_broken_default_evidence_still_gives_the_labels(cli_env: Dict[str, str], tmp_path: Path) -> None:
    from jetson_install.base.layout import EVIDENCE_FILE, STATE_DIR

    own = Path(cli_env["XDG_DATA_HOME"]) / "jetson-install" / "envs" / "obliteratus" / STATE_DIR / EVIDENCE_FILE
    own.parent.mkdir(parents=True)
    own.write_text("{truncated")
    try:
        result = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--json")
    finally:
        own.unlink()
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["labels"][:4] == ["self-hosted", "linux", "ARM64", "jetson"] and data["cuda"] is False
    assert data["cuda_reason"].startswith(f"{own}: not JSON")


def test_support_table_cells_carry_no_markup_from_the_evidence(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                               tmp_path: Path) -> None:
    board = "Orin\n| x | <script>alert(1)</script> `y`"
    crafted = _edited(gate_runs["working"]["evidence"], tmp_path / "crafted.json",
                      lambda data: data["platform"].update(board=board))
    result = jetson_install(cli_env, "evidence", "table", crafted)
    assert result.returncode == 0, result.stderr
    row = result.stdout.splitlines()[2]
    assert row.startswith("| Orin \\| x \\| &lt;script&gt;alert(1)&lt;/script&gt; \\`y\\` | JetPack 6.2")
    assert len(result.stdout.splitlines()) == 3


def test_outputs_replace_a_symlink_never_the_file_it_points_at(cli_env: Dict[str, str], stub_envs: Dict[str, str],
                                                              tmp_path: Path) -> None:
    precious = tmp_path / "authorized_keys"
    precious.write_text("ssh-ed25519 AAAA admin\n")
    for option in ("--evidence", "--gate-evidence"):
        link = tmp_path / f"link{option}.json"
        link.symlink_to(precious)
        result = jetson_install(cli_env, "doctor", "--root", ORIN_ROOT, "--python", stub_envs["working"],
                                option, str(link))
        assert result.returncode == 0, result.stdout + result.stderr
        assert precious.read_text() == "ssh-ed25519 AAAA admin\n"
        assert not link.is_symlink() and json.loads(link.read_text())["generated_at"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "authorized_keys", "link--evidence.json", "link--gate-evidence.json"]  # no temporary file left


def test_labels_read_the_evidence_of_the_environment_venv_names(gate_runs: Dict[str, Any], cli_env: Dict[str, str],
                                                                tmp_path: Path) -> None:
    from jetson_install.base.layout import EVIDENCE_FILE, STATE_DIR

    environment = tmp_path / "mine"
    (environment / STATE_DIR).mkdir(parents=True)
    (environment / STATE_DIR / EVIDENCE_FILE).write_text(Path(gate_runs["working"]["evidence"]).read_text())
    result = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--venv", str(environment))
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(",mem8g,cuda\n")
    both = jetson_install(cli_env, "labels", "--root", ORIN_ROOT, "--venv", str(environment), "--evidence", "x.json")
    assert both.returncode == 2
    assert both.stderr.splitlines() == ["error: labels: --evidence and --venv both name the evidence to read",
                                        f"  fix: give one: jetson-install labels --root {ORIN_ROOT} --venv {environment}"]


def test_max_age_zero_counts_evidence_from_today_and_not_from_yesterday(gate_runs: Dict[str, Any],
                                                                        cli_env: Dict[str, str], tmp_path: Path) -> None:
    hours_old = _rewrite(gate_runs["working"]["evidence"], tmp_path / "today.json",
                         generated_at=(datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=3)).strftime(
                             "%Y-%m-%dT%H:%M:%SZ"))
    table = jetson_install(cli_env, "evidence", "table", hours_old, "--max-age", "0")
    assert table.returncode == 0, table.stderr
    assert "Not counted" not in table.stdout and "stale" not in table.stdout
    today = jetson_install(cli_env, "evidence", "check", hours_old, "--max-age", "0")
    assert today.returncode == 0 and today.stdout.startswith(f"{hours_old}: ok: passed strict, 0 days old"), today.stdout
    yesterday = _rewrite(gate_runs["working"]["evidence"], tmp_path / "old.json", generated_at=_days_ago(1))
    old = jetson_install(cli_env, "evidence", "check", yesterday, "--max-age", "0")
    assert old.returncode == 1 and "1 days ago (maximum 0)" in old.stdout
