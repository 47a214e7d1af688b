"""The vendor files' expected hashes come from the wheel itself: its own RECORD, each entry
checked against the member's bytes as it is read (envs/manifest.py). A wheel whose RECORD
disagrees with its members, or whose sha256 is not the one given, is refused, naming the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import stat
import zipfile
from pathlib import Path
from typing import Callable, Dict

import pytest
from support import isolated_env
from support.catalogs import stub_catalog_text
from support.cli import run_cli
from support.index_server import LoopbackIndex
from support.installer import Installer
from support.manifests import assert_measured_from
from support.stub_projects import IndexDirs
from support.wheels import altered_wheel, build_wheel

from jetson_install.envs.manifest import (
    WheelRefused,
    manifest_path,
    read_kept,
    read_manifest,
    read_wheel,
    unmeasured,
    write_manifest,
)

TOP = Path(__file__).resolve().parent.parent


def _torch(folder: Path) -> Path:
    return build_wheel(folder, "torch", "2.8.0", modules={"torch/cuda.py": "X = 1\n",
                                                          "torch/lib/libshm.so": b"\x7fELF stand-in"})


def _record(wheel: Path) -> Dict[str, str]:
    """What the wheel's own RECORD says, as hex sha256 by path (the RECORD itself left out)."""
    with zipfile.ZipFile(wheel) as archive:
        text = next(archive.read(n) for n in archive.namelist() if n.endswith(".dist-info/RECORD")).decode()
    found = {}
    for line in text.splitlines():
        path, hashed, _ = line.rsplit(",", 2)
        if hashed:
            digest = hashed.split("=", 1)[1]
            found[path] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return found


def test_a_wheels_files_are_its_records_each_checked_against_its_bytes(tmp_path: Path) -> None:
    wheel = _torch(tmp_path)
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    read = read_wheel(wheel, sha256, "the catalog")
    assert (read.name, read.version, read.wheel, read.wheel_sha256, read.measured) == \
        ("torch", "2.8.0", wheel.name, sha256, True)
    assert dict(read.files) == _record(wheel)
    assert read.files["torch/lib/libshm.so"] == hashlib.sha256(b"\x7fELF stand-in").hexdigest()
    assert not any(path.endswith("/RECORD") for path in read.files)


def test_a_wheel_of_another_sha256_than_the_one_given_is_refused(tmp_path: Path) -> None:
    wheel = _torch(tmp_path)
    with pytest.raises(WheelRefused) as refused:
        read_wheel(wheel, "0" * 64, "wheels-index.toml")
    assert refused.value.message == (f"refusing {wheel.name}: its sha256 is "
                                     f"{hashlib.sha256(wheel.read_bytes()).hexdigest()}, and wheels-index.toml gives "
                                     f"{'0' * 64}")


def test_a_wheel_whose_record_lies_about_a_member_is_refused_naming_it(tmp_path: Path) -> None:
    lying = altered_wheel(_torch(tmp_path / "made"), tmp_path / "lying", members={"torch/lib/libshm.so": b"other"})
    with pytest.raises(WheelRefused) as refused:
        read_wheel(lying, None, "uv's resolution")
    assert refused.value.message.startswith(f"refusing {lying.name}: torch/lib/libshm.so: its bytes hash to sha256=")
    assert "and its RECORD says sha256=" in refused.value.message
    assert refused.value.fix and "remove it" in refused.value.fix


def test_a_member_the_record_leaves_out_and_a_row_without_its_member_are_refused(tmp_path: Path) -> None:
    wheel = _torch(tmp_path / "made")
    planted = altered_wheel(wheel, tmp_path / "planted", members={"torch/hook.pth": b"import os\n"})
    with pytest.raises(WheelRefused, match=re.escape("it holds torch/hook.pth, which its RECORD does not list")):
        read_wheel(planted, None, "a lock")
    missing = altered_wheel(wheel, tmp_path / "missing",
                            record=lambda text: text + "torch/gone.py,sha256=" + "A" * 43 + ",3\n")
    with pytest.raises(WheelRefused, match=re.escape("its RECORD lists torch/gone.py, which the wheel does not hold")):
        read_wheel(missing, None, "a lock")
    weak = altered_wheel(wheel, tmp_path / "weak", record=lambda text: text.replace(
        "torch/cuda.py,sha256=", "torch/cuda.py,md5="))
    with pytest.raises(WheelRefused, match=re.escape("lists torch/cuda.py without a sha256")):
        read_wheel(weak, None, "a lock")


def test_data_folders_map_to_where_they_are_installed_and_scripts_are_left_to_the_installer(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, "nvidia-cudss-cu13", "0.7.1", modules={
        "nvidia_cudss_cu13-0.7.1.data/platlib/nvidia/cu13/lib/libcudss.so.0": b"so",
        "nvidia_cudss_cu13-0.7.1.data/purelib/nvidia/cu13/__init__.py": "",
        "nvidia_cudss_cu13-0.7.1.data/scripts/cudss-tool": "#!python\n",
        "nvidia_cudss_cu13-0.7.1.data/data/share/cudss/NOTICE": "notice\n",
    })
    files = read_wheel(wheel, None, "uv's resolution").files
    assert files["nvidia/cu13/lib/libcudss.so.0"] == hashlib.sha256(b"so").hexdigest()
    assert "nvidia/cu13/__init__.py" in files and "../../../share/cudss/NOTICE" in files
    assert not any("scripts" in path or ".data/" in path for path in files)


def test_the_manifest_is_written_private_and_whole_and_grows_by_distribution(tmp_path: Path) -> None:
    environment = tmp_path / "env"
    torch = read_wheel(_torch(tmp_path / "wheels"), None, "the catalog")
    path = write_manifest(environment, [torch])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_manifest(environment, [unmeasured("Torch_Vision", "0.23.0", "kept from /usr/bin/python3.10")])
    data = json.loads(path.read_text())
    assert data["format"] == 1 and sorted(data["distributions"]) == ["torch", "torch-vision"]
    assert data["distributions"]["torch-vision"] == {"version": "0.23.0", "wheel": None, "wheel_sha256": None,
                                                     "measured": False, "reason": "kept from /usr/bin/python3.10",
                                                     "files": {}}
    assert "reason" not in data["distributions"]["torch"]
    assert read_manifest(environment) == {"torch": torch, "torch-vision": unmeasured(
        "torch-vision", "0.23.0", "kept from /usr/bin/python3.10")}
    assert not list(path.parent.glob(".*.tmp"))


@pytest.mark.slow
def test_an_install_refuses_a_vendor_wheel_whose_record_lies_before_anything_is_installed(
        tmp_path: Path, private_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex],
        obliteratus_source: Path) -> None:
    # The index and the catalog agree on the file's sha256: only its own RECORD gives it away.
    [torch] = private_index_dirs.vendor.glob("torch-*.whl")
    altered_wheel(torch, torch.parent, members={"torch/cuda.py": b"def is_available():\n    return True\n"})
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), private_index_dirs.vendor))
    env = dict(isolated_env(tmp_path, fast_fail=True), JETSON_INSTALL_WHEELS_INDEX=str(catalog))
    vendor, public = start_index(private_index_dirs.vendor, name="vendor"), start_index(private_index_dirs.public)
    installer = Installer(tmp_path / "obl", env, vendor.url, public.url, obliteratus_source)
    code, data, stderr = installer.run()
    assert code == 1 and data["error"]["step"] == "fetch", stderr
    assert data["error"]["message"].startswith(f"step 'fetch' failed: refusing {torch.name}: torch/cuda.py: its bytes "
                                               "hash to sha256=")
    assert [step["id"] for step in data["steps"]] == ["interpreter", "environment", "fetch"]
    assert not installer.venv.exists()
    assert not list((tmp_path / "obl.d").glob("env-*"))  # nothing was installed, nothing switched


@pytest.mark.slow
def test_a_damaged_wheel_in_the_cache_is_downloaded_again_and_an_intact_one_is_not(
        installer: Installer, vendor_index: LoopbackIndex, stub_index_dirs: IndexDirs) -> None:
    assert installer.run()[0] == 0
    [torch] = stub_index_dirs.vendor.glob("torch-*.whl")
    [cached] = (Path(installer.env["XDG_CACHE_HOME"]) / "jetson-install" / "wheels").glob(f"*/{torch.name}")
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cached.write_bytes(bytes(data))
    (installer.venv / "jetson-install" / "vendor-files.json").unlink()  # the re-run makes it again
    vendor_index.clear_requests()
    code, result, stderr = installer.run()
    assert code == 0 and result["status"] == "installed", stderr
    assert vendor_index.downloaded_files() == [torch.name]  # that file alone, again
    assert cached.read_bytes() == torch.read_bytes()
    assert_measured_from(installer.venv, "torch", torch)


@pytest.mark.slow
def test_a_vendor_file_changed_with_its_record_rewritten_to_match_is_caught_by_the_strict_doctor(
        installer: Installer) -> None:
    # The attack an installed RECORD cannot stop: a later script edits a vendor file and the RECORD
    # beside it alike. The install's manifest holds the wheel's own hashes, which the doctor reads.
    assert installer.run()[0] == 0

    def vendor_files() -> Dict[str, str]:
        doctor = run_cli("doctor", "--venv", str(installer.venv), "--root", "sample:agx-orin-64gb-jp6.2", "--strict",
                         "--json", env=installer.env)
        check: Dict[str, str] = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "vendor-files")
        return check

    intact = vendor_files()
    assert intact["status"] == "ok" and "match the sha256 their wheels held" in intact["detail"], intact
    [site_packages] = (installer.venv / "lib").glob("python*/site-packages")
    path = site_packages / "torch" / "__init__.py"
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01  # the same size
    path.write_bytes(bytes(data))
    [record] = site_packages.glob("torch-*.dist-info/RECORD")
    digest = base64.urlsafe_b64encode(hashlib.sha256(bytes(data)).digest()).rstrip(b"=").decode()
    record.write_text("".join(f"torch/__init__.py,sha256={digest},{len(data)}\n" if line.startswith("torch/__init__.py,")
                              else line + "\n" for line in record.read_text().splitlines()))
    changed = vendor_files()
    assert changed["status"] == "fail", changed
    assert changed["detail"] == "not the vendor builds' files: torch/__init__.py differs from torch's wheel"


def _installed(site: Path, files: Dict[str, bytes]) -> str:
    """torch 2.5.0 as an installer left it in `site` (its RECORD listing `files`); the RECORD's sha256."""
    dist_info = site / "torch-2.5.0.dist-info"
    files = {**files, "torch-2.5.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.0\n",
             "torch-2.5.0.dist-info/INSTALLER": b"pip\n"}
    rows = []
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{relative},sha256={digest},{len(data)}")
    (dist_info / "RECORD").write_text("\n".join(rows + ["torch-2.5.0.dist-info/RECORD,,"]) + "\n")
    return hashlib.sha256((dist_info / "RECORD").read_text().encode()).hexdigest()


def test_a_kept_stack_is_measured_from_its_installed_files_against_the_record_the_plan_read(tmp_path: Path) -> None:
    """--use-existing-torch: no wheel of the tool's, so the files as installed, each checked
    against its RECORD (whose sha256 the plan read), are what the doctor holds them to later."""
    site = tmp_path / "site"
    source = b"import torch.cuda\n"
    record = _installed(site, {"torch/__init__.py": source, "torch/lib/libshm.so": b"\x7fELF kept",
                               "torch/__pycache__/__init__.cpython-311.pyc": b"compiled",
                               "../../../bin/torchrun": b"#!/usr/bin/python3\n"})
    kept = read_kept("Torch", "2.5.0", str(site), record, "/usr/bin/python3")
    assert (kept.name, kept.measured, kept.wheel, kept.kept_from) == ("torch", True, None, "/usr/bin/python3")
    # Python's caches, scripts outside site-packages and what the installer wrote are not held.
    assert kept.files == {"torch/__init__.py": hashlib.sha256(source).hexdigest(),
                          "torch/lib/libshm.so": hashlib.sha256(b"\x7fELF kept").hexdigest(),
                          "torch-2.5.0.dist-info/METADATA": hashlib.sha256(
                              (site / "torch-2.5.0.dist-info/METADATA").read_bytes()).hexdigest()}
    write_manifest(tmp_path / "env", [kept])
    assert json.loads(manifest_path(tmp_path / "env").read_text())["distributions"]["torch"]["kept_from"] == \
        "/usr/bin/python3"
    assert read_manifest(tmp_path / "env") == {"torch": kept}
    # A file that no longer matches its RECORD, or a RECORD changed since the plan: nothing is measured, and why.
    (site / "torch" / "lib" / "libshm.so").write_bytes(b"\x7fELF kepT")
    assert read_kept("torch", "2.5.0", str(site), record, "/usr/bin/python3") == unmeasured(
        "torch", "2.5.0", "kept from /usr/bin/python3: torch/lib/libshm.so differs from its RECORD")
    assert read_kept("torch", "2.5.0", str(site), "0" * 64, "/usr/bin/python3").reason == \
        f"kept from /usr/bin/python3: {site}/torch-2.5.0.dist-info/RECORD changed after the plan read it"
    assert read_kept("numpy", "1.26.4", str(site), record, "/usr/bin/python3").reason == \
        f"kept from /usr/bin/python3: numpy has no readable RECORD in {site}"


def test_a_named_pipe_in_a_kept_stacks_file_is_not_measured_and_not_waited_on(tmp_path: Path) -> None:
    """The install measures a kept stack's files as they are: a FIFO in a listed file's place
    (its read would wait for a writer that never comes) is said, not hashed."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    record = _installed(site, {"torch/__init__.py": b"import torch.cuda\n", "torch/lib/libshm.so": b"\x7fELF kept"})
    (site / "torch" / "lib" / "libshm.so").unlink()
    os.mkfifo(site / "torch" / "lib" / "libshm.so")
    # In a child, so that a read that waits fails this test instead of holding the run.
    code = ("import sys; from jetson_install.envs.manifest import read_kept; "
            "print(read_kept('torch', '2.5.0', sys.argv[1], sys.argv[2], '/usr/bin/python3').reason)")
    done = subprocess.run([sys.executable, "-c", code, str(site), record], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "kept from /usr/bin/python3: torch/lib/libshm.so, which its RECORD lists, is not a regular " \
                          "file\n"
