"""`--use-existing-torch`: keep the CUDA torch an interpreter already has, end to end.

The "image interpreter" is the Python these tests run on (its base installation, not the
test venv), with the doctor's stub CUDA torch stack installed as real distributions into
its user site under a private HOME: a venv made with --system-site-packages sees that site,
as it sees an image's /usr/local/lib/python3.X/dist-packages. The stack's torch is 2.5.0,
a version the loopback public index also carries as a CPU build: the bait a resolver that
does not see the parent (uv) would install into the venv. Nothing reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from support.cli import run_cli
from support import isolated_env, needs_obliteratus_python
from support.planned import assert_ran_as_planned
from support.stub_stack import install_stub_stack

from jetson_install.tools import runner, uv
from jetson_install.tools.runner import Completed
from support.index_server import LoopbackIndex

BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
KEPT_TORCH = "2.5.0"
ROOT = "sample:agx-orin-64gb-jp6.2"


class Image:
    """The base interpreter with a stub torch stack in its user site, and the CLI around it."""

    def __init__(self, tmp_path: Path, public_url: str, source: Path, **scenario: Any) -> None:
        self.env = isolated_env(tmp_path, fast_fail=True)
        self.public_url, self.source = public_url, source
        self.venv = tmp_path / "obl"
        self.user_site = Path(self.env["HOME"]) / ".local" / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
        self.packages = scenario.pop("packages", ("torch", "bitsandbytes", "numpy"))
        install_stub_stack(self.user_site, self.packages, **dict({"torch_version": KEPT_TORCH}, **scenario))

    def cli(self, *args: str) -> Tuple[int, Dict[str, Any], str]:
        result = run_cli(*args, env=self.env)
        data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
        return result.returncode, data, result.stderr

    def install(self, *extra: str) -> Tuple[int, Dict[str, Any], str]:
        return self.cli("obliteratus", "--use-existing-torch", "--root", ROOT, "--python", BASE_PYTHON,
                        "--venv", str(self.venv), "--default-index", self.public_url, "--source", str(self.source),
                        "--yes", "--json", *extra)

    def run(self, code: str) -> str:
        result = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                                env=self.env, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def venv_site(self) -> Path:
        (site,) = (self.venv / "bin" / "..").resolve().glob("lib/python*/site-packages")
        return site


@pytest.fixture
def image(tmp_path: Path, public_index: LoopbackIndex, obliteratus_source: Path) -> Image:
    return Image(tmp_path, public_index.url, obliteratus_source)


@pytest.mark.slow
def test_the_kept_torch_stays_and_everything_else_installs_around_it(image: Image, public_index: LoopbackIndex) -> None:
    code, data, stderr = image.install()
    assert code == 0, stderr
    assert_ran_as_planned(data)
    assert [s["id"] for s in data["steps"]] == ["interpreter", "environment", "resolve", "target", "protect",
                                                "check", "verify", "switch"]
    # torch, bitsandbytes and NumPy come from the interpreter; the venv has none of its own.
    assert image.run("import torch, numpy, bitsandbytes; print(torch.__file__, numpy.__file__, bitsandbytes.__file__)") \
        .count(str(image.user_site)) == 3
    assert not any((image.venv_site() / name).exists() for name in ("torch", "numpy", "bitsandbytes"))
    # The index was never asked for a kept package, and OBLITERATUS' other dependencies came from it.
    assert not {"torch", "numpy", "bitsandbytes"} & set(public_index.requested_projects())
    assert image.run("import transformers, obliteratus.device as d; print(d.get_device('auto'))") == "cuda"
    assert data["installed"]["torch"] == KEPT_TORCH
    state = image.venv / "jetson-install"
    kept = json.loads((state / "existing-torch.json").read_text())
    torch = kept["packages"]["torch"]
    assert (torch["version"], torch["cuda"], torch["location"]) == (KEPT_TORCH, "12.6", str(image.user_site))
    assert len(torch["record_sha256"]) == 64
    # The tool downloaded no wheel of the kept stack: its manifest holds each installed file's
    # sha256 as the environment was made (each matching its RECORD then), and says where from.
    manifest = json.loads((state / "vendor-files.json").read_text())["distributions"]
    assert sorted(manifest) == sorted(kept["packages"])
    torch_files = manifest["torch"].pop("files")
    assert manifest["torch"] == {"version": KEPT_TORCH, "wheel": None, "wheel_sha256": None, "measured": True,
                                 "kept_from": BASE_PYTHON}
    assert torch_files["torch/cuda.py"] == hashlib.sha256((image.user_site / "torch" / "cuda.py").read_bytes()).hexdigest()
    evidence = json.loads((state / "evidence.json").read_text())
    assert evidence["status"] == "passed", [c for c in evidence["checks"] if c["status"] == "fail"]
    # The strict doctor holds the kept files to those hashes, not to a RECORD a later package can rewrite.
    code, strict, stderr = image.cli("doctor", "--root", ROOT, "--venv", str(image.venv), "--strict", "--json")
    assert strict["integrity"]["hashes_from"] == "kept", strict["integrity"]
    assert all(found["basis"] == "kept" and found["verified"] == found["expected"] > 0
               for found in strict["integrity"]["distributions"].values())
    checks = {check["id"]: check["status"] for check in strict["checks"]}
    assert (checks["vendor-files"], checks["loaded-files"]) == ("ok", "ok"), stderr


@pytest.mark.slow
def test_the_doctor_works_on_the_environment_as_in_the_download_lane(image: Image) -> None:
    assert image.install("--no-verify")[0] == 0
    code, evidence, stderr = image.cli("doctor", "--root", ROOT, "--venv", str(image.venv), "--json")
    assert code == 0, stderr
    checks = {check["id"]: check for check in evidence["checks"]}
    assert checks["torch-build"]["status"] == "ok" and KEPT_TORCH in checks["torch-build"]["detail"]
    assert checks["pip-check"]["status"] == "ok"
    assert checks["python-abi"]["status"] == "ok"


@pytest.mark.slow
def test_add_on_a_kept_stack_keeps_it_and_adds_around_it(image: Image) -> None:
    code, made, stderr = image.install()
    assert code == 0, stderr
    code, data, stderr = image.cli("add", "--venv", str(image.venv), "accelerate", "--json")
    assert code == 0, stderr
    assert data["route"] == "existing-torch" and data["environment"] != made["environment"]
    assert_ran_as_planned(data)
    # The image's torch is still the one the environment takes, and accelerate sits on it.
    assert image.run("import accelerate, torch; print(torch.__file__.startswith(%r))" % str(image.user_site)) == "True"


@pytest.mark.slow
def test_protection_outlives_the_tool_for_pip_and_for_uv(image: Image) -> None:
    assert image.install("--no-verify")[0] == 0
    pip = subprocess.run([str(image.venv / "bin" / "pip"), "install", "-U", "torch", "--index-url", image.public_url],
                         capture_output=True, text=True, env=image.env, timeout=180)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    uv_bin = runner.uv_binary()
    script = f'. "{image.venv}/bin/activate" && "{uv_bin}" pip install torch=={KEPT_TORCH} --default-index "{image.public_url}"'
    uv_run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=image.env, timeout=180)
    assert uv_run.returncode == 0, uv_run.stderr
    assert not (image.venv_site() / "torch").exists(), pip.stdout + uv_run.stderr
    assert str(image.user_site) in image.run("import torch; print(torch.__file__)")
    # Without the activate script's UV_EXCLUDE the same uv command puts the index's CPU build in the venv.
    bare = script.replace(f'. "{image.venv}/bin/activate" && ', f'VIRTUAL_ENV="{image.venv}" ') + " --dry-run"
    dry = subprocess.run(["bash", "-c", bare], capture_output=True, text=True, env=image.env, timeout=180)
    assert f"+ torch=={KEPT_TORCH}" in dry.stderr, dry.stderr


@pytest.mark.parametrize(("scenario", "said"), [
    ({"torch_cuda": None}, "is a CPU-only build (torch.version.cuda is None)"),
    ({"torch_cuda": "13.0"}, "is built for CUDA 13.0, and this JetPack has CUDA 12.6"),
    ({"packages": ("numpy",)}, "has no torch to keep"),
    ({"torch_version": "2.1.0"}, "OBLITERATUS needs torch >=2.2"),
])
@needs_obliteratus_python
def test_a_torch_that_cannot_be_kept_is_said_before_anything_is_installed(
        tmp_path: Path, public_index: LoopbackIndex, obliteratus_source: Path, scenario: Dict[str, Any], said: str) -> None:
    image = Image(tmp_path, public_index.url, obliteratus_source, **scenario)
    code, data, stderr = image.install()
    assert code == 3, stderr
    assert said in data["reason"]
    assert "--use-existing-torch" in data["remedy"]
    assert not image.venv.exists() and not Path(f"{image.venv}.d").exists()
    assert public_index.requests == []


@pytest.mark.slow
def test_a_dependency_needing_another_torch_fails_at_resolve_and_changes_nothing(
        tmp_path: Path, public_index: LoopbackIndex, obliteratus_source: Path) -> None:
    image = Image(tmp_path, public_index.url, obliteratus_source)
    assert image.install("--no-verify")[0] == 0
    first = os.readlink(image.venv)
    from support import make_obliteratus_source, OBLITERATUS_DEPENDENCIES

    greedy = make_obliteratus_source(tmp_path / "greedy", dependencies=OBLITERATUS_DEPENDENCIES + ("needs-newer-torch",))
    image.source = greedy
    code, data, _stderr = image.install("--no-verify")
    assert code == 1
    assert data["error"]["step"] == "resolve", data["error"]
    assert "torch" in data["error"]["message"] and "unchanged" in data["error"]["message"]
    assert os.readlink(image.venv) == first


def _check(stdout: str) -> Completed:
    return Completed(("uv", "pip", "check"), 1, stdout, "")


@pytest.mark.parametrize(("lines", "visible", "ok", "left"), [
    (["The package `obliteratus` requires `torch>=2.0`, but it's not installed"], {"torch": "2.5.0a0+872d972e41.nv24.08"}, True, []),
    (["The package `obliteratus` requires `torch>=2.6`, but it's not installed"], {"torch": "2.5.0"}, False,
     ["The package `obliteratus` requires `torch>=2.6`, but it's not installed"]),
    (["The package `a` requires `six`, but it's not installed",
      "The package `a` requires `b<2`, but `2.0` is installed"], {"six": "1.16.0"}, False,
     ["The package `a` requires `b<2`, but `2.0` is installed"]),
])
def test_uv_pip_check_is_judged_against_what_the_parent_provides(lines: List[str], visible: Dict[str, str], ok: bool,
                                                                 left: List[str]) -> None:
    judged = uv.judge_unseen(_check("\n".join(["Checked 9 packages"] + lines + ["Found 1 incompatibility"])), visible)
    assert judged.ok == ok
    assert [line for line in judged.stderr.splitlines() if line.startswith("The package")] == left
