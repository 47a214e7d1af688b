"""Locks and wheelhouses as a trust chain: a file name is one path component of the entry's own
distribution, a wheelhouse writes only inside DIR, a served wheelhouse obeys the https rule, a
trusted local lock's hashes hold against a mirror's files, and a lock's vendor files are judged
against the catalog's known builds."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from support import isolated_env, needs_obliteratus_python
from support.catalogs import stub_catalog_text
from support.cli import CliResult, run_cli
from support.index_server import LoopbackIndex
from support.stub_projects import IndexDirs
from support.wheels import build_wheel

from jetson_install.base.errors import BadInput
from jetson_install.catalog.lock_file import Lock, Locked, parse_lock, render_lock
from jetson_install.catalog.settings import check_index_url

TOP = Path(__file__).resolve().parent.parent
SAMPLE = "sample:agx-orin-64gb-jp6.2"


def _lock(*entries: Locked) -> str:
    return render_lock(Lock("jp6-cu126", "3.10", "aarch64", "aarch64-manylinux_2_35", "obliteratus @ git+x@v1",
                            "c0ffee", "1.0", entries))


def _entry(name: str, version: str, url: str, sha256: str = "a" * 64) -> Locked:
    return Locked(name, version, url, sha256, "default")


@pytest.mark.parametrize(("name", "version", "url", "said"), [
    ("torch", "2.5.0", "http://127.0.0.1/files/%2Fetc%2Fpasswd", "is not one plain file name"),
    ("torch", "2.5.0", "http://127.0.0.1/files/..%2F..%2F.ssh%2Fauthorized_keys", "is not one plain file name"),
    ("torch", "2.5.0", "http://127.0.0.1/files/..", "is not one plain file name"),
    ("torch", "2.5.0", "http://127.0.0.1/files/.bashrc", "is not one plain file name"),
    ("torch", "2.5.0", "http://127.0.0.1/files/a%5Cb-1.0.tar.gz", "is not one plain file name"),
    ("numpy", "2.5.0", "http://127.0.0.1/files/torch-2.5.0-cp310-cp310-linux_aarch64.whl",
     "is a file of torch, not of numpy"),
    ("torch", "2.4.0", "http://127.0.0.1/files/torch-2.5.0-cp310-cp310-linux_aarch64.whl",
     "is version 2.5.0, and the lock says 2.4.0"),
    ("torch", "2.5.0", "http://127.0.0.1/files/authorized_keys", "is not a wheel or source archive name"),
])
def test_a_lock_entrys_file_must_be_a_plain_file_of_its_own_distribution(name: str, version: str, url: str,
                                                                         said: str) -> None:
    with pytest.raises(BadInput) as refused:
        parse_lock(_lock(_entry(name, version, url)), "crafted.lock")
    assert refused.value.message.startswith(f"crafted.lock:10: {name}: ") and said in refused.value.message
    assert refused.value.fix == "make the lock again: jetson-install lock --output FILE"


def test_wheel_and_source_archive_names_of_the_entry_are_accepted() -> None:
    good = [_entry("torch", "2.5.0a0+872d972e41.nv24.08",
                   "https://x.example/torch-2.5.0a0+872d972e41.nv24.08-cp310-cp310-linux_aarch64.whl"),
            _entry("Jinja2", "3.1.4", "https://x.example/jinja2-3.1.4-py3-none-any.whl"),
            _entry("antlr4-python3-runtime", "4.9.3", "https://x.example/antlr4-python3-runtime-4.9.3.tar.gz")]
    assert sorted(entry.filename for entry in parse_lock(_lock(*good), "x").entries) == [
        "antlr4-python3-runtime-4.9.3.tar.gz", "jinja2-3.1.4-py3-none-any.whl",
        "torch-2.5.0a0+872d972e41.nv24.08-cp310-cp310-linux_aarch64.whl"]


def _env(tmp_path: Path) -> Dict[str, str]:
    return isolated_env(tmp_path, fast_fail=True)


def test_wheelhouse_refuses_a_crafted_lock_before_writing_anything(tmp_path: Path) -> None:
    precious = tmp_path / "home" / ".ssh" / "authorized_keys"
    precious.parent.mkdir(parents=True)
    precious.write_text("ssh-ed25519 AAAA admin\n")
    crafted = tmp_path / "crafted.lock"
    crafted.write_text(_lock(_entry("torch", "2.5.0", f"file://{tmp_path}/x/..%2F..%2Fhome%2F.ssh%2Fauthorized_keys")))
    house = tmp_path / "house"
    result = run_cli("wheelhouse", str(house), "--lock", str(crafted), env=_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[0].startswith(f"error: --lock {crafted}:10: torch: its file name ")
    assert precious.read_text() == "ssh-ed25519 AAAA admin\n" and not (house / "files").exists()


def test_wheelhouse_writes_only_inside_dir(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "built", "tinypkg", "1.0", tag="py3-none-any")
    entry = Locked("tinypkg", "1.0", wheel.as_uri(), hashlib.sha256(wheel.read_bytes()).hexdigest(), "default")
    lock = tmp_path / "good.lock"
    lock.write_text(_lock(entry))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    house = tmp_path / "house"
    house.mkdir()
    (house / "files").symlink_to(elsewhere)  # planted: files/ -> somewhere else
    result = run_cli("wheelhouse", str(house), "--lock", str(lock), env=_env(tmp_path))
    assert result.returncode == 2 and "is a link out of the wheelhouse" in result.stderr, result.stderr
    assert list(elsewhere.iterdir()) == []
    (house / "files").unlink()
    (house / "files").mkdir()
    (house / "files" / f"{wheel.name}.part").symlink_to(elsewhere / "victim")  # a planted partial file
    (house / "lock.txt").symlink_to(elsewhere / "lock-victim")
    result = run_cli("wheelhouse", str(house), "--lock", str(lock), env=_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert list(elsewhere.iterdir()) == [] and (house / "files" / wheel.name).is_file()
    assert not (house / "lock.txt").is_symlink()


@pytest.mark.parametrize(("url", "refused"), [("file://mirror.example/srv/simple", True), ("file:///srv/simple", False),
                                          ("file://localhost/srv/simple", False)])
def test_a_file_url_names_this_machine_only(url: str, refused: bool) -> None:
    if refused:
        with pytest.raises(BadInput) as error:
            check_index_url(url, "--vendor-index", False)
        assert "names the host mirror.example" in error.value.message
        assert error.value.fix == "give a local index as file:///path/to/simple"
    else:
        check_index_url(url, "--vendor-index", False)


def test_a_served_wheelhouse_obeys_the_https_rule(tmp_path: Path) -> None:
    result = run_cli("obliteratus", "--root", SAMPLE, "--venv", str(tmp_path / "env"), "--wheelhouse",
                     "http://192.0.2.1:8000/", "--yes", env=_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: --wheelhouse http://192.0.2.1:8000/: http://192.0.2.1:8000/ uses plain http to a remote host, so "
        "packages could be altered in transit",
        "  fix: use https://192.0.2.1:8000/, or accept the risk by adding --allow-insecure-index"]


# -- a trusted lock with a mirror's files; the built wheel beside a copied lock ---------------

def _cli_env(tmp_path: Path, vendor_dir: Path) -> Dict[str, str]:
    catalog = tmp_path / "wheels-index.toml"
    catalog.write_text(stub_catalog_text((TOP / "wheels-index.toml").read_text(), vendor_dir))
    return dict(_env(tmp_path), JETSON_INSTALL_WHEELS_INDEX=str(catalog))


def _install(env: Dict[str, str], venv: Path, *args: str) -> CliResult:
    return run_cli("obliteratus", "--root", SAMPLE, "--venv", str(venv), "--python", sys.executable,
                   *args, "--no-verify", "--yes", "--json", env=env)


@pytest.mark.slow
def test_a_local_lock_keeps_its_hashes_against_a_mirror_and_its_wheel_travels_with_it(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_source: Path, tmp_path: Path) -> None:
    env = _cli_env(tmp_path, stub_index_dirs.vendor)
    made_in = tmp_path / "made"
    made_in.mkdir()
    lock = made_in / "here.lock"
    made = run_cli("lock", "--root", str(board_here), "--vendor-index", vendor_index.url, "--default-index",
                   public_index.url, "--source", str(obliteratus_source), "--output", str(lock), "--python", sys.executable, env=env)
    assert made.returncode == 0, made.stderr
    house = tmp_path / "house"
    assert run_cli("wheelhouse", str(house), "--lock", str(lock), env=env).returncode == 0
    # The mirror swaps a file, and its own lock.txt with it.
    entries = parse_lock(lock.read_text(), "lock").entries
    victim = next(entry for entry in entries if entry.origin == "default")
    swapped_dir = tmp_path / "swapped"
    swapped = build_wheel(swapped_dir, victim.name, victim.version, tag=victim.filename[:-4].split("-", 2)[2])
    assert swapped.name == victim.filename
    shutil.copy(swapped, house / "files" / victim.filename)
    served_lock = house / "lock.txt"
    served_lock.write_text(served_lock.read_text().replace(
        victim.sha256, hashlib.sha256(swapped.read_bytes()).hexdigest()))
    result = _install(env, tmp_path / "env", "--lock", str(lock), "--wheelhouse", str(house))
    assert result.returncode == 1, result.stdout + result.stderr
    assert victim.sha256 in result.stderr and "hash" in result.stderr.lower(), result.stderr
    assert not (tmp_path / "env").exists()
    # The mirror's true files install under the local lock; the result names the lock as given.
    assert run_cli("wheelhouse", str(tmp_path / "house2"), "--lock", str(lock), env=env).returncode == 0
    result = _install(env, tmp_path / "env", "--lock", str(lock), "--wheelhouse", str(tmp_path / "house2"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["lock"]["file"] == str(lock)
    assert data["lock"]["sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    # A lock copied to a board with its built wheel beside it installs.
    board = tmp_path / "board"
    board.mkdir()
    built = next(entry for entry in entries if entry.origin == "built")
    shutil.copy(lock, board / "here.lock")
    shutil.move(str(made_in / built.filename), str(board / built.filename))
    result = _install(env, tmp_path / "env2", "--lock", str(board / "here.lock"))
    assert result.returncode == 0, result.stderr


@needs_obliteratus_python
def test_a_locks_vendor_file_under_a_known_name_must_have_the_known_hash(
        stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path, obliteratus_source: Path, tmp_path: Path) -> None:
    env = _cli_env(tmp_path, stub_index_dirs.vendor)
    lock = tmp_path / "here.lock"
    made = run_cli("lock", "--root", str(board_here), "--vendor-index", vendor_index.url, "--default-index",
                   public_index.url, "--source", str(obliteratus_source), "--output", str(lock), "--python", sys.executable, env=env)
    assert made.returncode == 0, made.stderr
    torch = next(entry for entry in parse_lock(lock.read_text(), "lock").entries if entry.name == "torch")
    other = tmp_path / "other.lock"
    other.write_text(lock.read_text().replace(torch.sha256, "b" * 64))
    result = _install(env, tmp_path / "env", "--lock", str(other))
    assert result.returncode == 1, result.stdout + result.stderr
    lines: List[str] = result.stderr.splitlines()
    assert any(f"names {torch.filename} with sha256 {'b' * 64}, but wheels-index.toml records" in line
               for line in lines), result.stderr
    assert not (tmp_path / "env").exists()


def test_a_lock_from_an_edited_checkout_is_refused(stub_index_dirs: IndexDirs, vendor_index: LoopbackIndex, public_index: LoopbackIndex, board_here: Path,
                                                   obliteratus_git_repo: Path, tmp_path: Path) -> None:
    env = _cli_env(tmp_path, stub_index_dirs.vendor)
    checkout = tmp_path / "checkout"
    shutil.copytree(obliteratus_git_repo, checkout, symlinks=True)
    (checkout / "edited.py").write_text("print('not in any commit')\n")
    lock = tmp_path / "edited.lock"
    result = run_cli("lock", "--root", str(board_here), "--vendor-index", vendor_index.url, "--default-index",
                     public_index.url, "--source", str(checkout), "--output", str(lock), "--python", sys.executable, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"error: --source {checkout} has uncommitted changes (edited.py), so no commit names what the lock would build",
        f"  fix: commit or stash them (git -C {checkout} status), then run the lock again"]
    assert not lock.exists()


def test_a_mirror_that_refuses_says_check_the_credentials(stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex]) -> None:
    from jetson_install.base.errors import StepFailed
    from jetson_install.base.errors import IndexRefused
    from jetson_install.tools.index import fetch_text, project_files

    mirror = start_index(stub_index_dirs.vendor, name="authenticated", credentials="fleet:s3cret")
    with pytest.raises(IndexRefused) as refused:
        project_files(mirror.url, "torch")
    assert refused.value.message.endswith("refused the request (HTTP 401): check the credentials")
    assert "~/.netrc" in (refused.value.fix or "")
    with pytest.raises(StepFailed) as failed:
        fetch_text(mirror.url.replace("//", "//fleet:wrong@", 1) + "lock.txt")
    assert "was refused (HTTP 401): check the credentials" in str(failed.value.message)
    assert "wrong" not in failed.value.message
    assert project_files(mirror.url.replace("//", "//fleet:s3cret@", 1), "torch")  # the URL's credentials work


@pytest.mark.slow
def test_an_authenticated_mirror_serves_lock_wheelhouse_and_install_through_netrc(
        stub_index_dirs: IndexDirs, start_index: Callable[..., LoopbackIndex], board_here: Path, obliteratus_source: Path, tmp_path: Path) -> None:
    env = _cli_env(tmp_path, stub_index_dirs.vendor)
    vendor = start_index(stub_index_dirs.vendor, name="vendor-mirror", credentials="fleet:s3cret")
    public = start_index(stub_index_dirs.public, name="public-mirror", credentials="fleet:s3cret")

    def lock(output: Path, userinfo: str = "") -> CliResult:
        vendor_url, public_url = (url.replace("//", f"//{userinfo}", 1) for url in (vendor.url, public.url))
        return run_cli("lock", "--root", str(board_here), "--vendor-index", vendor_url, "--default-index", public_url,
                       "--source", str(obliteratus_source), "--output", str(output), "--python", sys.executable, env=env)

    # The credentials in the URLs given reach those indexes, not the vendor files the resolution
    # asks for by URL: the fix names the netrc line for their host, and no output the token.
    in_url = lock(tmp_path / "in-url.lock", "fleet:s3cret@")
    assert in_url.returncode == 1 and not (tmp_path / "in-url.lock").exists(), in_url.stderr
    assert in_url.stderr.splitlines()[1] == (
        "  fix: put the credentials for 127.0.0.1 in ~/.netrc (machine 127.0.0.1 login USER password TOKEN, mode "
        "0600): this resolution fetches the vendor files by their URLs, which carry none, then run the lock again")
    assert "s3cret" not in in_url.stdout + in_url.stderr
    netrc = Path(env["HOME"]) / ".netrc"  # read by jetson-install (requests) and by uv alike
    netrc.write_text("machine 127.0.0.1 login fleet password s3cret\n")
    netrc.chmod(0o600)
    made = lock(tmp_path / "here.lock")
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "here.lock").read_text()
    assert "s3cret" not in text and f"{vendor.base_url}/files/torch-" in text  # the mirror's URLs, no credentials
    house = run_cli("wheelhouse", str(tmp_path / "house"), "--lock", str(tmp_path / "here.lock"), env=env)
    assert house.returncode == 0, house.stderr
    installed = _install(env, tmp_path / "env", "--lock", str(tmp_path / "here.lock"))
    assert installed.returncode == 0, installed.stderr
    assert json.loads(installed.stdout)["installed"]["torch"].startswith("2.5.0a0")

    # Wrong credentials: each of the three says the mirror refused them, never "did not answer".
    netrc.write_text("machine 127.0.0.1 login fleet password expired\n")
    refused = lock(tmp_path / "refused.lock")
    assert refused.returncode == 1 and not (tmp_path / "refused.lock").exists()
    assert refused.stderr.splitlines()[0] == (
        f"error: the vendor index {vendor.url} refused the request (HTTP 401): check the credentials")
    assert "~/.netrc (machine HOST login USER password TOKEN)" in refused.stderr and "expired" not in refused.stderr
    vendor.credentials = "fleet:expired"  # the vendor index takes them now; uv's resolution is refused
    by_uv = lock(tmp_path / "refused.lock")
    assert by_uv.returncode == 1 and "did not answer" not in by_uv.stderr
    assert by_uv.stderr.splitlines()[0] == (
        f"error: resolving from the default index ({public.url}) failed: {public.url} refused the request "
        "(HTTP 401): check the credentials")
    public.credentials = "fleet:expired"
    vendor.credentials = "fleet:s3cret"
    # A runner that has not downloaded them yet: neither uv's cache nor jetson-install's checked wheels.
    cold = dict(env, UV_CACHE_DIR=str(tmp_path / "cold-cache"), XDG_CACHE_HOME=str(tmp_path / "cold-xdg"))
    again = _install(cold, tmp_path / "env2", "--lock", str(tmp_path / "here.lock"))
    error = json.loads(again.stdout)["error"]
    assert again.returncode == 1 and error["step"] == "fetch", again.stderr
    assert "was refused (HTTP 401): check the credentials" in error["message"]
    # --lock takes no URL: the fix is the netrc line for the host that refused, then this install.
    assert error["fix"] == ("give 127.0.0.1's user and token in ~/.netrc (machine 127.0.0.1 login USER password TOKEN; "
                            "never written elsewhere or shown), then run: jetson-install obliteratus --root "
                            f"{SAMPLE} --venv {tmp_path / 'env2'} --python {sys.executable} --lock "
                            f"{tmp_path / 'here.lock'} --no-verify --yes --json")
    netrc.write_text("machine 127.0.0.1 login fleet password s3cret\n")
    public.credentials = "fleet:s3cret"  # both mirrors take the one line for their host
    as_printed = run_cli(*shlex.split(error["fix"].split("then run: ", 1)[1])[1:], env=cold)
    assert as_printed.returncode == 0, as_printed.stderr
    netrc.write_text("machine 127.0.0.1 login fleet password expired\n")
    filled = run_cli("wheelhouse", str(tmp_path / "house2"), "--lock", str(tmp_path / "here.lock"), env=env)
    assert filled.returncode == 1 and "was refused (HTTP 401): check the credentials" in filled.stderr
    # wheelhouse --lock takes no URL: the fix is the netrc line for the host, then this command.
    fix = filled.stderr.splitlines()[-1]
    assert fix == ("  fix: give 127.0.0.1's user and token in ~/.netrc (machine 127.0.0.1 login USER password TOKEN; "
                   "never written elsewhere or shown), then run: jetson-install wheelhouse "
                   f"{tmp_path / 'house2'} --lock {tmp_path / 'here.lock'}")
    netrc.write_text("machine 127.0.0.1 login fleet password s3cret\n")
    assert run_cli(*shlex.split(fix.split("then run: ", 1)[1])[1:], env=env).returncode == 0
