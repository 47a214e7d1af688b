"""`jetson-install plan obliteratus` as a user and a provisioning script see it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from support.cli import CliResult, run_cli

from jetson_install.base.git_urls import split_git_url


def plan(*args: str, env: Optional[Dict[str, str]] = None) -> CliResult:
    return run_cli("plan", "obliteratus", *args, env=dict(os.environ, **(env or {})))


def plan_json(*args: str, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    result = plan(*args, "--json", env=env)
    assert result.returncode in (0, 3), result.stderr
    data: Dict[str, Any] = json.loads(result.stdout)
    return data


def test_agx_orin_jp62_plan() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--venv", "/tmp/obl")
    assert data["supported"] is True
    assert data["channel"] == "jp6-cu126"
    assert data["python"] == "3.10"
    assert data["vendor_index"] == "https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/"
    assert data["pins"]["torch"] == "2.8.0"
    assert [s["id"] for s in data["steps"]] == ["interpreter", "environment", "fetch", "vendor", "libraries", "target",
                                                "protect", "check", "verify", "switch"]
    # Before the target: the loader must find the apt package's libcudss.so.0 (no command: in process).
    libraries = next(s for s in data["steps"] if s["id"] == "libraries")
    assert libraries["commands"] == [] and libraries["equivalent"][:3] == ["jetson-install", "doctor", "--venv"]
    assert "libcudss.so.0" in libraries["title"]
    target = next(s for s in data["steps"] if s["id"] == "target")["command"]
    assert "obliteratus[quantization] @ git+https://github.com/elder-plinius/OBLITERATUS@v0.1.3" in target
    assert "obliteratus" not in [arg.split("[")[0] for arg in target if " @ " not in arg]


def test_the_vendor_step_installs_only_the_files_the_fetch_step_checked_without_dependencies() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2")
    steps = {s["id"]: s for s in data["steps"]}
    # Before the index is read, the fetch step says what it will download and check, and runs nothing.
    assert steps["fetch"]["commands"] == [] and steps["fetch"]["downloads"] == []
    assert steps["fetch"]["title"].startswith("download the files the vendor index resolves to (`plan --resolve` "
                                              "lists them)")
    vendor = steps["vendor"]["command"]
    assert {"--no-deps", "--no-index", "--require-hashes"} <= set(vendor) and "--default-index" not in vendor
    assert vendor[-2:] == ["--requirements", f"{data['venv']}.d/<new>/jetson-install/fetched.txt"]


def test_unsupported_jetpack5_exits_3_with_reason_and_remedy() -> None:
    result = plan("--root", "sample:xavier-nx-jp5.1.2")
    assert result.returncode == 3
    assert "Python 3.8" in result.stdout
    assert "flash JetPack 6.2" in result.stdout
    data = plan_json("--root", "sample:xavier-nx-jp5.1.2")
    assert data["supported"] is False and "torch 2.2" in data["reason"]


def test_no_verify_keeps_only_the_checks_that_need_no_gpu() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--no-verify")
    verify = next(s for s in data["steps"] if s["id"] == "verify")
    assert verify["kind"] == "doctor" and verify["equivalent"][:2] == ["jetson-install", "doctor"]
    assert verify["equivalent"][-1] == "--no-gpu"
    assert "no GPU needed" in verify["title"]
    # The doctor runs in the install's process: what it starts is the torch probe sealed (in a
    # fresh pycache folder it makes when it starts) and the integrity probe (isolated from the
    # environment's start-up hooks, comparing sizes, judging what ran in the sealed probe, which
    # it reads on its stdin), then, once they have ended, the torch probe as the environment
    # starts (without OBLITERATUS and transformers, which no check selected here reads).
    python = f"{data['venv']}.d/<new>/bin/python"
    probes = Path(verify["commands"][0][5]).parent
    state = f"{data['venv']}.d/<new>/jetson-install"
    assert verify["commands"] == [
        [python, "-I", "-S", "-X", "pycache_prefix=<pycache>", str(probes / "launch.py"), "--sealed",
         str(probes / "torch_probe.py")],
        [python, "-I", "-S", str(probes / "integrity_probe.py"), "--record", f"{state}/vendor.json",
         "--manifest", f"{state}/vendor-files.json", "--ran", "-"],
        [python, str(probes / "launch.py"), str(probes / "torch_probe.py"), "--no-target"]]


def test_the_verify_step_lists_what_its_doctor_starts_and_the_doctor_command_to_run_later() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2")
    verify = next(s for s in data["steps"] if s["id"] == "verify")
    python = f"{data['venv']}.d/<new>/bin/python"
    commands = verify["commands"]
    scripts = [next((Path(word).name for word in command if word.endswith("_probe.py")), command[0])
               for command in commands]
    # The sealed proof (the probes that decide `cuda` sealed, the integrity probe that judges
    # what ran in them), then what runs the environment's own code: the same probes as started,
    # uv pip check (uv asks the interpreter what it is) and the assembler probe (Triton's ptxas).
    assert scripts == ["torch_probe.py", "bnb_probe.py", "integrity_probe.py", "torch_probe.py", "bnb_probe.py",
                       "uv", "assembler_probe.py"]
    assert ["--sealed" in command for command in commands] == [True, True, False, False, False, False, False]
    assert [command[0] for command in commands if command[0] != "uv"] == [python] * 6
    assert commands[5][:3] == ["uv", "pip", "check"]
    assert verify["equivalent"] == ["jetson-install", "doctor", "--venv", data["venv"], "--evidence",
                                    f"{data['venv']}/jetson-install/evidence.json", "--root",
                                    "sample:agx-orin-64gb-jp6.2"]
    text = plan("--root", "sample:agx-orin-64gb-jp6.2").stdout
    assert f"the same later: jetson-install doctor --venv {data['venv']} " in text


def test_vendor_index_flag_and_env_are_reported_as_sources() -> None:
    flag = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", "https://mirror.fleet.example/jp6/cu126")
    assert flag["vendor_index"] == "https://mirror.fleet.example/jp6/cu126"
    assert flag["vendor_index_source"] == "--vendor-index"
    env = plan_json("--root", "sample:agx-orin-64gb-jp6.2", env={"JETSON_INSTALL_DEFAULT_INDEX": "https://pypi-mirror.fleet.example/simple"})
    assert env["default_index"] == "https://pypi-mirror.fleet.example/simple"
    assert env["default_index_source"] == "JETSON_INSTALL_DEFAULT_INDEX"


def test_config_file_sets_fleet_mirrors(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('vendor_index = "https://mirror.fleet.example/jp6/cu126"\ndefault_index = "http://127.0.0.1:3141/simple"\n')
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", env={"JETSON_INSTALL_CONFIG": str(config)})
    assert data["vendor_index"] == "https://mirror.fleet.example/jp6/cu126"
    assert data["vendor_index_source"] == f"config {config}"
    assert data["default_index"] == "http://127.0.0.1:3141/simple"
    cli_wins = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", "https://other.example/simple",
                         env={"JETSON_INSTALL_CONFIG": str(config)})
    assert cli_wins["vendor_index_source"] == "--vendor-index"


def test_config_file_with_unknown_key_names_it(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('vendor_url = "https://x.example"\n')
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", env={"JETSON_INSTALL_CONFIG": str(config)})
    assert result.returncode == 2
    assert "config: key 'vendor_url' is unknown; did you mean 'vendor_index'?" in result.stderr


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://mirror.fleet.example/simple", 2),
        ("http://127.0.0.1:8080/simple", 0),
        ("http://[::1]:8080/simple", 0),
        ("ftp://mirror.example/simple", 2),
    ],
)
def test_plain_http_only_for_loopback(url: str, code: int) -> None:
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", "--default-index", url)
    assert result.returncode == code, result.stderr
    if code:
        assert "--default-index" in result.stderr and "Traceback" not in result.stderr


def test_allow_insecure_index_accepts_remote_http() -> None:
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", "http://mirror.lan/jp6", "--allow-insecure-index")
    assert result.returncode == 0, result.stderr
    # The plan takes the plain-http mirror it was given, not the channel's own source.
    assert "  vendor    http://mirror.lan/jp6   (--vendor-index)" in result.stdout.splitlines(), result.stdout


def test_source_path_and_ref_become_direct_references(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'obliteratus'\n"
                                             "[project.optional-dependencies]\nquantization = ['bitsandbytes']\n")
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--source", str(tmp_path))
    assert data["requirement"] == f"obliteratus[quantization] @ {tmp_path.resolve().as_uri()}"
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--source", "https://github.com/me/OBLITERATUS", "--ref", "main")
    assert data["requirement"] == "obliteratus[quantization] @ git+https://github.com/me/OBLITERATUS@main"


def test_the_extra_follows_the_ref_and_the_checkout(tmp_path: Path) -> None:
    # v0.1.2 has no `quantization` extra (bitsandbytes is one of its own dependencies): asking
    # for it would only get uv's "does not have an extra" warning.
    old = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--ref", "v0.1.2")
    assert old["requirement"] == "obliteratus @ git+https://github.com/elder-plinius/OBLITERATUS@v0.1.2"
    for ref in ("v0.1.3", "main", "0123abc"):
        data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--ref", ref)
        assert data["requirement"].startswith("obliteratus[quantization] @ "), ref
    # A checkout says itself which extras it has (v0.1.2's: dev and spaces).
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'obliteratus'\n"
                                             "[project.optional-dependencies]\ndev = ['pytest']\nspaces = ['gradio']\n")
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--source", str(tmp_path))
    assert data["requirement"] == f"obliteratus @ {tmp_path.resolve().as_uri()}"
    # Without a Jetson bitsandbytes, v0.1.2 still asks for one itself: the plan says where it comes from.
    orin72 = plan_json("--root", "sample:agx-orin-jp7.2.1", "--ref", "v0.1.2")
    assert any("has no 'quantization' extra: it asks for bitsandbytes itself" in w for w in orin72["warnings"])


def test_channel_without_bitsandbytes_build_installs_without_the_extra() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--l4t", "36.3.0")
    assert data["channel"] == "jp6.0"
    assert data["requirement"].startswith("obliteratus @ ")
    assert any("bitsandbytes" in w for w in data["warnings"])


@pytest.mark.parametrize(
    ("source", "ref", "expected"),
    [
        ("https://github.com/me/OBLITERATUS", None, "obliteratus[quantization] @ git+https://github.com/me/OBLITERATUS"),
        ("git+https://github.com/me/OBLITERATUS@v9", None, "obliteratus[quantization] @ git+https://github.com/me/OBLITERATUS@v9"),
        ("https://example.org/obliteratus-0.1.3.tar.gz", None, "obliteratus[quantization] @ https://example.org/obliteratus-0.1.3.tar.gz"),
    ],
)
def test_source_urls(source: str, ref: Optional[str], expected: str) -> None:
    args = ["--root", "sample:agx-orin-64gb-jp6.2", "--source", source] + (["--ref", ref] if ref else [])
    assert plan_json(*args)["requirement"] == expected


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--source", "/nonexistent/checkout"], "--source /nonexistent/checkout: no such folder"),
        (["--source", "git+https://github.com/me/OBLITERATUS@v2", "--ref", "v1"], "already names a ref"),
        (["--l4t", "abc"], "--l4t 'abc': not an L4T release"),
    ],
)
def test_bad_install_options_are_one_line_with_a_fix(args: List[str], fragment: str) -> None:
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", *args)
    assert result.returncode == 2
    assert fragment in result.stderr and "fix:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("source", ["https://s3cr3t-t0ken@git.example.com", "https://me:s3cr3t-t0ken@git.example.com"])
def test_a_source_at_a_hosts_root_with_a_token_and_a_ref_says_why_and_the_options_that_work_without_the_token(
        source: str) -> None:
    """git+https://TOKEN@HOST@REF is a user TOKEN@HOST at the host REF to any URL parser: refused,
    saying so, with the token masked everywhere, and its fix (the token in ~/.netrc, the
    repository's path after the host) plans the source and ref meant, with no token given."""
    args = ["--root", "sample:agx-orin-64gb-jp6.2", "--source", source, "--ref", "v1.2"]
    shown, as_json = plan(*args), plan(*args, "--json")
    assert shown.returncode == 2 and as_json.returncode == 2, shown.stderr
    assert "s3cr3t-t0ken" not in shown.stdout + shown.stderr + as_json.stdout + as_json.stderr
    masked = source.replace("s3cr3t-t0ken", "****")
    assert shown.stderr.splitlines() == [
        f"error: --source {masked} has no path after its host, so --ref v1.2 cannot follow it: every URL parser "
        "would read git.example.com@v1.2 as a user at the host v1.2",
        "  fix: put the token in ~/.netrc (machine git.example.com login USER password TOKEN, mode 0600), then give "
        "the repository's path after the host (/ for a repository at the host's root): --source "
        "https://git.example.com/ --ref v1.2"]
    assert json.loads(as_json.stdout)["error"]["fix"] == shown.stderr.splitlines()[1][len("  fix: "):]
    fixed = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--source", *shown.stderr.rsplit(": --source ", 1)[1].split())
    assert fixed["requirement"] == "obliteratus[quantization] @ git+https://git.example.com/@v1.2"
    assert split_git_url(fixed["requirement"].split(" @ ")[1]) == ("https://git.example.com/", "v1.2")


def test_a_source_at_a_hosts_root_without_a_token_is_refused_with_a_ref_not_read_as_a_token() -> None:
    """Where git+https://HOST@REF was planned, its host read as a token (masked) and REF as the host."""
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", "--source", "https://git.example.com", "--ref", "v1.2")
    assert result.returncode == 2
    assert result.stderr.splitlines()[1] == ("  fix: give the repository's path after the host (/ for a repository "
                                             "at the host's root): --source https://git.example.com/ --ref v1.2")


def test_plan_offers_the_documented_fallback() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2")
    assert data["fallback"].endswith("torch-2.5.0a0+872d972e41.nv24.08.17622132-cp310-cp310-linux_aarch64.whl")
    chosen = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-fallback")
    assert chosen["vendor_index"] == data["fallback"]
    assert chosen["pins"] == {"torch": "2.5.0a0+872d972e41.nv24.08.17622132"}
    vendor = next(s for s in chosen["steps"] if s["id"] == "vendor")["command"]
    assert "--no-index" in vendor and chosen["fallback"] is None


def test_plan_carries_detection_warnings() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--l4t", "36.9.9")
    assert any("JetPack 6.x assumed" in w for w in data["warnings"])


def test_a_named_config_file_that_is_missing_is_an_error() -> None:
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", env={"JETSON_INSTALL_CONFIG": "/nonexistent/fleet.toml"})
    assert result.returncode == 2
    assert "JETSON_INSTALL_CONFIG=/nonexistent/fleet.toml: no such file" in result.stderr


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:abc/simple", "http://127.0.0.1:99999/simple",
                                 " https://mirror.example/simple", "file:"])
def test_malformed_index_urls_are_bad_input(url: str) -> None:
    result = plan("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", url, "--json")
    assert result.returncode == 2, result.stderr
    assert json.loads(result.stdout)["error"]["exit_code"] == 2
    assert "Traceback" not in result.stderr


BOARDS = Path(__file__).parent / "resources" / "boards"


def test_jp6_cu126_prefers_the_best_attested_set_and_caps_transformers_for_python_310() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2")
    assert data["set"] == "torch==2.8.0" and data["policy"]["preferred"] == "torch==2.8.0"
    assert [s["torch"] for s in data["policy"]["sets"]] == ["==2.8.0", "==2.9.1", "==2.10.0", "==2.11.0"]
    assert data["caps"] == [{"constraint": "transformers<5.21.0",
                             "why": "transformers 5.21.0 needs Python 3.11, the channel's is 3.10"}]
    assert "transformers<5.21.0" in data["constraints"] and "numpy<2" in data["constraints"]
    text = plan("--root", "sample:agx-orin-64gb-jp6.2").stdout
    assert "cap       transformers<5.21.0   (transformers 5.21.0 needs Python 3.11" in text
    assert "set       torch==2.8.0 (preferred; `plan --resolve` reads the index); policy: torch==2.8.0, torch==2.9.1" in text


def test_jp6_0_caps_transformers_below_the_first_release_that_disables_its_pre_release_torch() -> None:
    data = plan_json("--root", str(BOARDS / "orin-nx-r36.3.0"))
    assert data["channel"] == "jp6.0" and data["pins"]["torch"].startswith("2.4.0a0+")
    caps = {cap["constraint"]: cap["why"] for cap in data["caps"]}
    # transformers compares full PEP 440 versions at run time: 2.4.0a0+... is below 2.4.0.
    assert caps["transformers<5.1.0"].startswith("transformers 5.1.0 needs torch 2.4.0, the channel's is 2.4.0a0+")
    assert "bitsandbytes<0.50.0" in caps


def test_the_jp6_fallback_torch_caps_transformers_below_its_2_5_floor() -> None:
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-fallback")
    assert {cap["constraint"] for cap in data["caps"]} == {"transformers<5.15.0"}


@pytest.mark.parametrize(("sample", "channel"), [("agx-thor-jp7.0", "jp7-thor-cu130"), ("agx-thor-jp7.2.1", "jp7.2-thor")])
def test_thor_takes_official_cuda_13_builds_from_the_default_index(sample: str, channel: str) -> None:
    data = plan_json("--root", f"sample:{sample}")
    assert data["supported"] is True and data["channel"] == channel and data["status"] == "experimental"
    assert data["vendor_index"] == "the default index" and data["python"] == "3.12"
    assert data["pins"] == {"torch": "2.13.0", "torchvision": "0.28.0"}
    assert "bitsandbytes>=0.48,<0.51" in data["constraints"] and data["caps"] == []
    assert data["fallback"] == "https://pypi.jetson-ai-lab.io/sbsa/cu130/+simple/"
    [compile_] = next(s for s in data["steps"] if s["id"] == "fetch")["commands"]
    assert "--default-index" not in compile_ and compile_[-1].endswith("/jetson-install/vendor.in")
    fallback = plan_json("--root", f"sample:{sample}", "--vendor-fallback")
    fetch = next(s for s in fallback["steps"] if s["id"] == "fetch")
    assert fallback["companions"] == [] and fetch["commands"][0][-1].endswith("/jetson-install/companions.in")
    companions = fetch["title"]
    # Each with the soname it must provide; cuDSS held below its 1.0, which ships only libcudss.so.1.
    assert ("nvpl-blas for libnvpl_blas_lp64_gomp.so.0, nvpl-lapack for libnvpl_lapack_lp64_gomp.so.0, "
            "nvidia-cudss-cu13<1 for libcudss.so.0") in companions
    assert {"soname": "libcudss.so.0", "provider": "companion", "package": "nvidia-cudss-cu13<1"} in (
        fallback["policy"]["libraries"])


def test_jetpack_7_2_on_orin_is_experimental_with_the_sm87_build_and_its_cuda_12_9_runtime() -> None:
    data = plan_json("--root", "sample:agx-orin-jp7.2.1")
    assert data["supported"] is True and data["channel"] == "jp7.2-orin" and data["status"] == "experimental"
    assert data["platform"]["kind"] == "sbsa"
    assert data["vendor_index"] == "https://pypi.jetson-ai-lab.io/jp6/cu129/+simple/"
    assert data["pins"] == {"torch": "2.8.0", "torchvision": "0.23.0"}
    assert data["requirement"].startswith("obliteratus @ ")  # no quantization extra
    assert any("no Jetson bitsandbytes" in w for w in data["warnings"])
    assert any("bitsandbytes has no upstream sm_87 build" in w for w in data["warnings"])
    steps = [s["id"] for s in data["steps"]]
    assert steps.index("fetch") < steps.index("vendor") < steps.index("target")
    # uv resolves the runtime wheels as pylock.toml (each file's URL and sha256), which the fetch step downloads.
    [compile_argv] = next(s for s in data["steps"] if s["id"] == "fetch")["commands"]
    assert compile_argv[compile_argv.index("--format") + 1] == "pylock.toml"
    assert compile_argv[compile_argv.index("--output-file") + 1].endswith("/jetson-install/pylock.companions.toml")
    assert plan_json("--root", "sample:agx-orin-jp7.2.1", "--vendor-fallback")["vendor_index"] == "the default index"


def test_the_verify_step_promises_bitsandbytes_only_where_the_route_installs_it() -> None:
    steps = {step["id"]: step["title"] for step in plan_json("--root", "sample:agx-orin-64gb-jp6.2")["steps"]}
    assert steps["verify"] == "prove torch.cuda and bitsandbytes run CUDA kernels; keep the evidence"
    fallback = {step["id"]: step["title"]
                for step in plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-fallback")["steps"]}
    assert fallback["verify"] == ("prove torch.cuda runs CUDA kernels (this route installs no bitsandbytes); "
                                  "keep the evidence")



def test_the_plan_says_where_apt_finds_cudss() -> None:
    # cudss is a package of NVIDIA's CUDA repository (https://github.com/NVIDIA/Isaac-GR00T/issues/343):
    # a stock JetPack 6's apt has no such package until its cuda-keyring package is installed.
    keyring = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/arm64/cuda-keyring_1.1-1_all.deb"
    command = (f"wget {keyring} && sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt-get update && "
               "sudo apt-get install -y libopenblas-dev libomp-dev cudss")
    data = plan_json("--root", "sample:agx-orin-64gb-jp6.2")
    assert data["apt"] == ["libopenblas-dev", "libomp-dev", "cudss"]
    assert data["apt_command"] == command
    lines = plan("--root", "sample:agx-orin-64gb-jp6.2").stdout.splitlines()
    at = lines.index(f"  apt       {command}   (the vendor wheels need these)")
    assert lines[at + 1] == "            (cudss: from NVIDIA's CUDA repository, which its cuda-keyring package adds first)"
    # `cudss` follows cuDSS's newest major: the plan says which soname it must still provide.
    assert lines[at + 2] == ("            (cudss must provide libcudss.so.0: the libraries step and the doctor check that "
                             "the loader finds it)")
    assert {"soname": "libcudss.so.0", "provider": "apt", "package": "cudss"} in data["policy"]["libraries"]
    # NVIDIA's JetPack 6.1 fallback wheel needs cuSPARSELt, from the same repository.
    fallback = plan("--root", "sample:agx-orin-64gb-jp6.2", "--vendor-fallback").stdout
    assert (f"  apt       wget {keyring} && sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt-get update && "
            "sudo apt-get install -y libopenblas-dev libcusparselt0   (the vendor wheels need these)\n"
            "            (libcusparselt0: from NVIDIA's CUDA repository") in fallback


def test_the_extra_is_read_from_the_sources_pyproject_at_the_ref_tags_branches_and_commits(tmp_path: Path) -> None:
    """A local repository says at each ref which extras it has: a branch or a commit from before
    the extra gets none, where the catalog's rule (by tag name) would have given it."""
    from support.stub_projects import _git

    repo = tmp_path / "OBLITERATUS"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text("[project]\nname = 'obliteratus'\nversion = '0.1.2'\n"
                                         "[project.optional-dependencies]\ndev = ['pytest']\n")
    _git(repo, "add", "pyproject.toml")
    _git(repo, "commit", "-q", "-m", "0.1.2")
    _git(repo, "tag", "v0.1.2")
    _git(repo, "branch", "before-quantization")
    old = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    (repo / "pyproject.toml").write_text("[project]\nname = 'obliteratus'\nversion = '0.1.3'\n"
                                         "[project.optional-dependencies]\nquantization = ['bitsandbytes']\n")
    _git(repo, "commit", "-q", "-am", "0.1.3")
    _git(repo, "tag", "v0.1.3")
    args = ("--root", "sample:agx-orin-64gb-jp6.2", "--source", str(repo))
    for ref in ("v0.1.2", "before-quantization", old):
        data = plan_json(*args, "--ref", ref)
        assert data["requirement"] == f"obliteratus @ git+{repo.resolve().as_uri()}@{ref}", ref
        assert (data["extra"], data["extra_from"]) == (None, f"pyproject.toml at {ref} in {repo.resolve()}")
    for ref in ("v0.1.3", "main"):
        data = plan_json(*args, "--ref", ref)
        assert data["requirement"].startswith("obliteratus[quantization] @ "), ref
        assert data["extra_from"] == f"pyproject.toml at {ref} in {repo.resolve()}"
    # A ref git cannot read there falls back to the catalog's rule, and the plan says so.
    data = plan_json(*args, "--ref", "v9.9.9")
    assert data["extra"] == "quantization"
    assert data["extra_from"] == (f"wheels-index.toml's rule: 'quantization' from 0.1.3 on; the source at v9.9.9 has "
                                  f"no pyproject.toml git can read in {repo.resolve()}")
    text = plan(*args, "--ref", "before-quantization").stdout
    assert f"  extras    none   (from pyproject.toml at before-quantization in {repo.resolve()})" in text
    # A remote source is not fetched to plan: the catalog's rule, said.
    remote = plan_json("--root", "sample:agx-orin-64gb-jp6.2", "--ref", "v0.1.2")
    assert remote["extra"] is None and remote["extra_from"].startswith("wheels-index.toml's rule")
    assert remote["extra_from"].endswith("the source at v0.1.2 is remote, and planning reads nothing over the network")
