"""Resolving a source's sets against loopback indexes: which set, why, and what is refused.

Each index here is a directory of stub wheels served on 127.0.0.1, as PEP 503 HTML or
PEP 691 JSON; the catalog is the real wheels-index.toml with its jp6-cu126 source
describing those stubs (support.catalogs).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from support import VENDOR_PINS, VENDOR_TORCH, build_wheel, present, wheel_filename
from support.catalogs import stub_catalog_text
from support.cli import CliResult, run_cli
from support.stub_projects import IndexDirs
from support.index_server import LoopbackIndex

from jetson_install.base.errors import IndexUnreachable
from jetson_install.planning import vendor_sources
from jetson_install.tools import index
from jetson_install.catalog.catalog import VendorSource, load_catalog
from jetson_install.catalog.identity import ChosenFile, IdentityMismatch, NothingInPolicy

TOP = Path(__file__).resolve().parent.parent
REAL = (TOP / "wheels-index.toml").read_text()
OLDER = {"torch": "2.6.0", "torchvision": "0.21.0", "torchaudio": "2.6.0", "bitsandbytes": ">=0.46.1"}
MISSING = {"torch": "2.7.0", "torchvision": "0.22.0", "torchaudio": "2.7.0"}
INCOMPLETE = {"torch": "2.9.0", "torchvision": "0.24.0", "torchaudio": "2.9.0"}


def source_for(tmp_path: Path, vendor_dir: Path, **options: Any) -> VendorSource:
    path = tmp_path / "wheels-index.toml"
    path.write_text(stub_catalog_text(REAL, vendor_dir, **options))
    source = present(load_catalog(path).channel("jp6-cu126").primary)
    assert source is not None
    return source


@pytest.fixture
def vendor_dir(private_index_dirs: IndexDirs) -> Path:
    """The stub vendor builds, plus a complete torch 2.6 set and a lone torch 2.9."""
    directory = private_index_dirs.vendor
    for name in ("torch", "torchvision", "torchaudio"):
        build_wheel(directory, name, OLDER[name])
    build_wheel(directory, "torch", INCOMPLETE["torch"])
    return directory


@pytest.mark.parametrize("pep691", [False, True])
def test_the_preferred_set_is_taken_when_listed(tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex], pep691: bool) -> None:
    served = start_index(vendor_dir, pep691=pep691)
    source = source_for(tmp_path, vendor_dir, sets=[VENDOR_PINS, OLDER])
    resolution = vendor_sources.resolve(source, served.url, "3.10", "2.35")
    assert resolution.pins == VENDOR_PINS
    assert resolution.reason == f"the preferred set torch=={VENDOR_TORCH} is listed"
    torch = present(resolution.file("torch"))
    assert torch.known and torch.cuda == "12.6"
    assert torch.sha256 == next(b.sha256 for b in source.builds if b.name == "torch")
    assert resolution.warnings == ()


def test_newest_complete_set_within_policy_when_the_preferred_is_missing(tmp_path: Path, vendor_dir: Path,
                                                                          start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    source = source_for(tmp_path, vendor_dir, sets=[MISSING, OLDER, INCOMPLETE], preferred="2.7.0")
    resolution = vendor_sources.resolve(source, served.url, "3.10", "2.35")
    # 2.9.0 has no torchvision or torchaudio there: an incomplete set is skipped, not half-installed.
    assert resolution.set_name == "torch==2.6.0"
    assert resolution.pins["torchvision"] == "0.21.0"
    assert "the preferred set torch==2.7.0 is not complete" in resolution.reason
    assert "is not complete on the index" in resolution.warnings[0]


def test_a_set_recorded_for_newer_pythons_is_never_taken_for_an_older_one(tmp_path: Path, vendor_dir: Path,
                                                                            start_index: Callable[..., LoopbackIndex]) -> None:
    # As torch 2.15.0 (Requires-Python >=3.11, no cp310 file): here its stand-in's files would
    # install on any Python, so only the recorded floor keeps a 3.10 interpreter from it.
    newer = {"torch": "2.10.0", "torchvision": "0.25.0", "torchaudio": "2.10.0"}
    for name, version in newer.items():
        build_wheel(vendor_dir, name, version)
    served = start_index(vendor_dir)
    source = source_for(tmp_path, vendor_dir, sets=[MISSING, {**newer, "python": ">=3.11"}, OLDER], preferred="2.7.0")
    assert [s.shown for s in source.sets][1] == "torch==2.10.0 (Python >=3.11)"
    assert vendor_sources.resolve(source, served.url, "3.10", "2.35").set_name == "torch==2.6.0"
    assert vendor_sources.resolve(source, served.url, "3.11", "2.35").set_name == "torch==2.10.0"


def test_thors_torch_2_15_set_is_for_python_3_11_on() -> None:
    for channel in ("jp7-thor-cu130", "jp7.2-thor"):
        newest = present(load_catalog().channel(channel).primary).sets[0]
        assert newest.name == "torch==2.15.0" and newest.python == ">=3.11"
        assert not newest.for_python("3.10") and newest.for_python("3.12")


def test_an_unlisted_build_is_accepted_with_a_warning_and_recorded_as_unknown(tmp_path: Path, vendor_dir: Path,
                                                                            start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    source = source_for(tmp_path, vendor_dir, known=("torchvision", "torchaudio", "bitsandbytes"))
    resolution = vendor_sources.resolve(source, served.url, "3.10", "2.35")
    torch = present(resolution.file("torch"))
    assert not torch.known and torch.sha256 and torch.cuda is None
    assert any(w.startswith(torch.file) and "not a build wheels-index.toml lists" in w and torch.sha256 in w
               for w in resolution.warnings)


def test_nothing_in_policy_says_what_the_index_has(tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    source = source_for(tmp_path, vendor_dir, sets=[MISSING], preferred="2.7.0")
    with pytest.raises(NothingInPolicy) as caught:
        vendor_sources.resolve(source, served.url, "3.10", "2.35")
    assert "lists no complete set within policy (torch==2.7.0)" in caught.value.message
    assert "torch: " in caught.value.message and "2.9.0" in caught.value.message
    assert "--vendor-index URL" in present(caught.value.fix) and "--vendor-fallback" in present(caught.value.fix)


def test_a_pre_release_does_not_count_unless_the_source_says_so(tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    text = stub_catalog_text(REAL, vendor_dir, sets=[OLDER, {"torch": ">=2.5.0a0,<2.6", "torchvision": ">=0",
                                                           "torchaudio": ">=0"}], preferred="2.6.0")
    path = tmp_path / "wheels-index.toml"
    path.write_text(text.replace("prereleases = true\nsets", "sets", 1))
    source = present(load_catalog(path).channel("jp6-cu126").primary)
    assert vendor_sources.resolve(source, served.url, "3.10", "2.35").set_name == "torch==2.6.0"
    assert not source.prereleases


@pytest.mark.parametrize("prefix", [False, True])
def test_another_file_under_a_recorded_name_is_refused_naming_both(tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex],
                                                                   prefix: bool) -> None:
    options: Dict[str, Any] = {"prefix_only": ("torchvision",)} if prefix else {}
    source = source_for(tmp_path, vendor_dir, **options)
    recorded = next(b for b in source.builds if b.name == "torchvision")
    # The vendor re-publishes a different build under the same file name.
    tampered = vendor_dir / wheel_filename("torchvision", VENDOR_PINS["torchvision"])
    rebuilt = build_wheel(tmp_path / "other", "torchvision", VENDOR_PINS["torchvision"], summary="another build")
    shutil.copyfile(rebuilt, tampered)
    served = start_index(vendor_dir, pep691=prefix)
    with pytest.raises(IdentityMismatch) as caught:
        vendor_sources.resolve(source, served.url, "3.10", "2.35")
    message = caught.value.message
    assert tampered.name in message and served.url in message
    assert present(recorded.sha256_prefix if prefix else recorded.sha256) in message
    served_hash = __import__("hashlib").sha256(tampered.read_bytes()).hexdigest()
    assert served_hash in message


def test_an_unreachable_index_is_one_line_fast_with_the_fallback_and_mirror(tmp_path: Path, vendor_dir: Path) -> None:
    source = source_for(tmp_path, vendor_dir)
    started = time.monotonic()
    with pytest.raises(IndexUnreachable) as caught:
        vendor_sources.resolve(source, "http://127.0.0.1:9/simple", "3.10", "2.35")
    assert time.monotonic() - started < 5
    assert "http://127.0.0.1:9/simple did not answer" in caught.value.message
    # What happened, not a wait that never was: a refused port fails at once.
    assert caught.value.message.endswith("did not answer (connection refused)")
    assert "--vendor-fallback" in present(caught.value.fix) and "--vendor-index URL" in present(caught.value.fix)


def test_an_index_error_names_what_happened_and_a_wait_only_when_there_was_one() -> None:
    import requests

    dns = requests.ConnectionError("HTTPSConnectionPool(host='mirror.example', port=443): Max retries exceeded "
                                   "(Caused by NameResolutionError(\"Failed to resolve 'mirror.example' ([Errno -2] "
                                   "Name or service not known)\"))")
    assert index._why(dns) == "its host name does not resolve (DNS)"
    assert index._why(requests.ConnectTimeout()) == f"no connection within {index.CONNECT_TIMEOUT:g} s"
    assert index._why(requests.ReadTimeout()) == f"no answer within {index.READ_TIMEOUT:g} s"
    assert index._why(requests.exceptions.SSLError("bad certificate")) == "SSLError"


def channels_check(tmp_path: Path, vendor_dir: Path, *args: str, **options: Any) -> CliResult:
    path = tmp_path / "check-index.toml"
    path.write_text(stub_catalog_text(REAL, vendor_dir, **options))
    env = dict(os.environ, JETSON_INSTALL_WHEELS_INDEX=str(path), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    return run_cli("channels", "--check", *args, env=env)


def test_channels_check_reports_the_preferred_set_and_newer_sets(tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir, pep691=True)
    newer = {"torch": "2.6.0", "torchvision": "0.21.0", "torchaudio": "2.6.0"}
    result = channels_check(tmp_path, vendor_dir, "jp6-cu126", "--vendor-index", served.url,
                            sets=[newer, VENDOR_PINS], preferred=VENDOR_TORCH)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"preferred set torch=={VENDOR_TORCH}: present, hashes unchanged" in result.stdout
    assert "newer set within policy: torch==2.6.0" in result.stdout


def test_channels_check_fails_when_a_preferred_build_is_missing_or_changed(tmp_path: Path, vendor_dir: Path,
                                                                          start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    missing = channels_check(tmp_path, vendor_dir, "jp6-cu126", "--vendor-index", served.url,
                             sets=[MISSING], preferred="2.7.0")
    assert missing.returncode == 1
    assert "preferred set torch==2.7.0: missing" in missing.stdout
    tampered = vendor_dir / wheel_filename("torchaudio", VENDOR_PINS["torchaudio"])
    text = stub_catalog_text(REAL, vendor_dir)  # records the hash before the change
    shutil.copyfile(build_wheel(tmp_path / "other", "torchaudio", VENDOR_PINS["torchaudio"], summary="x"), tampered)
    path = tmp_path / "check-index.toml"
    path.write_text(text)
    env = dict(os.environ, JETSON_INSTALL_WHEELS_INDEX=str(path), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    changed = run_cli("channels", "--check", "jp6-cu126", "--vendor-index", served.url, "--json", env=env)
    assert changed.returncode == 1
    report = json.loads(changed.stdout)[0]
    assert report["ok"] is False and "refusing a different build" in report["lines"][0]


def test_plan_resolve_with_an_index_down_gives_whole_commands_around_it(tmp_path: Path) -> None:
    env = dict(os.environ, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1", XDG_CONFIG_HOME=str(tmp_path))
    result = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index",
                     "http://127.0.0.1:9/simple", "--resolve", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("error: the vendor index http://127.0.0.1:9/simple did not answer")
    assert ("or use another vendor index: jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 "
            "--resolve --vendor-index URL") in result.stderr
    assert ("add a mirror of its recorded builds: jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 "
            "--vendor-index http://127.0.0.1:9/simple --resolve --mirror URL") in result.stderr
    assert ("use the channel's fallback source: jetson-install plan obliteratus --root sample:agx-orin-64gb-jp6.2 "
            "--resolve --vendor-fallback") in result.stderr


def test_plan_stays_offline_and_resolve_reads_the_index(tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    path = tmp_path / "wheels-index.toml"
    path.write_text(stub_catalog_text(REAL, vendor_dir))
    env = dict(os.environ, JETSON_INSTALL_WHEELS_INDEX=str(path), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
               XDG_CONFIG_HOME=str(tmp_path))
    args = ["plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", served.url, "--json"]
    offline = json.loads(run_cli(*args, env=env).stdout)
    assert served.requests == [] and offline["resolution"] is None
    assert offline["policy"]["preferred"] == f"torch=={VENDOR_TORCH}" and offline["set"] == f"torch=={VENDOR_TORCH}"
    resolved = json.loads(run_cli(*args, "--resolve", env=env).stdout)
    assert set(served.requested_projects()) == {"torch", "torchvision", "torchaudio", "bitsandbytes"}
    assert resolved["resolution"]["reason"] == f"the preferred set torch=={VENDOR_TORCH} is listed"
    # Resolved, the fetch step lists each file it downloads, with the sha256 it must have.
    downloads = next(s for s in resolved["steps"] if s["id"] == "fetch")["downloads"]
    torch = next(f for f in resolved["resolution"]["files"] if f["name"] == "torch")
    assert {"url": torch["url"], "sha256": torch["sha256"]} in downloads and len(torch["sha256"]) == 64
    # What to run next is the install, which takes no --resolve; the text lists each download too.
    text = run_cli(*args[:-1], "--resolve", env=env).stdout
    assert f"       download {torch['url']} (sha256 {torch['sha256']})" in text.splitlines()
    assert text.strip().splitlines()[-1].endswith(f"jetson-install obliteratus --vendor-index {served.url}")


# --- the board's glibc decides which manylinux wheels count --------------------------------------

NEWER = {"torch": "2.7.0", "torchvision": "0.22.0", "torchaudio": "2.7.0"}


@pytest.fixture
def manylinux_dir(tmp_path: Path) -> Path:
    """torch 2.7.0 only as a manylinux_2_39 wheel (Ubuntu 24.04's glibc), torch 2.6.0 as a
    manylinux_2_35 one (22.04's); their torchvision and torchaudio install anywhere."""
    directory = tmp_path / "manylinux"
    build_wheel(directory, "torch", NEWER["torch"], tag="cp310-cp310-manylinux_2_39_aarch64")
    build_wheel(directory, "torch", OLDER["torch"], tag="cp310-cp310-manylinux_2_35_aarch64")
    for name in ("torchvision", "torchaudio"):
        build_wheel(directory, name, NEWER[name])
        build_wheel(directory, name, OLDER[name])
    return directory


def board_glibc(sample: str) -> str:
    from jetson_install.board.platform import detect
    from jetson_install.board.platform_data import ubuntu_glibc
    from jetson_install.board.samples import resolve_root

    return ubuntu_glibc(detect(resolve_root(f"sample:{sample}")).ubuntu)


def test_a_jetpack_6_resolution_refuses_a_manylinux_2_39_wheel_and_a_jetpack_7_one_takes_it(
        tmp_path: Path, manylinux_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(manylinux_dir)
    older = {k: v for k, v in OLDER.items() if k != "bitsandbytes"}
    source = source_for(tmp_path, manylinux_dir, sets=[NEWER, older], preferred="2.7.0")
    assert board_glibc("agx-orin-64gb-jp6.2") == "2.35" and board_glibc("agx-thor-jp7.0") == "2.39"
    jetpack6 = vendor_sources.resolve(source, served.url, "3.10", board_glibc("agx-orin-64gb-jp6.2"))
    assert jetpack6.set_name == "torch==2.6.0"
    assert present(jetpack6.file("torch")).file == "torch-2.6.0-cp310-cp310-manylinux_2_35_aarch64.whl"
    assert "the preferred set torch==2.7.0 is not complete on the index" in jetpack6.reason
    jetpack7 = vendor_sources.resolve(source, served.url, "3.10", board_glibc("agx-thor-jp7.0"))
    assert jetpack7.set_name == "torch==2.7.0"
    assert present(jetpack7.file("torch")).file == "torch-2.7.0-cp310-cp310-manylinux_2_39_aarch64.whl"


def test_plan_resolve_and_channels_check_use_the_jetpack_6_glibc(tmp_path: Path, manylinux_dir: Path,
                                                                  start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(manylinux_dir)
    older = {k: v for k, v in OLDER.items() if k != "bitsandbytes"}
    path = tmp_path / "wheels-index.toml"
    path.write_text(stub_catalog_text(REAL, manylinux_dir, sets=[NEWER, older], preferred="2.7.0"))
    env = dict(os.environ, JETSON_INSTALL_WHEELS_INDEX=str(path), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
               XDG_CONFIG_HOME=str(tmp_path))
    planned = run_cli("plan", "obliteratus", "--root", "sample:agx-orin-64gb-jp6.2", "--vendor-index", served.url,
                      "--resolve", "--json", env=env)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["resolution"]["set"] == "torch==2.6.0"
    # No board here: the channel's glibc comes from its L4T major's Ubuntu in platform-data.toml.
    checked = channels_check(tmp_path, manylinux_dir, "jp6-cu126", "--vendor-index", served.url,
                             sets=[NEWER, older], preferred="2.7.0")
    assert checked.returncode == 1
    assert "preferred set torch==2.7.0: missing" in checked.stdout


# --- channels --check: each status its exit code (README's table) ---------------------------------

def test_channels_check_calls_a_mirror_whose_preferred_set_is_all_unlisted_unlisted(
        tmp_path: Path, vendor_dir: Path, start_index: Callable[..., LoopbackIndex]) -> None:
    served = start_index(vendor_dir)
    result = channels_check(tmp_path, vendor_dir, "jp6-cu126", "--vendor-index", served.url, "--json", known=())
    assert result.returncode == 5, result.stdout + result.stderr
    (report,) = json.loads(result.stdout)
    assert report["status"] == "unlisted" and report["ok"] is False
    assert "none of its files is a build wheels-index.toml lists" in report["lines"][0]
    # One unlisted file among recorded ones is present, and named.
    partly = channels_check(tmp_path, vendor_dir, "jp6-cu126", "--vendor-index", served.url,
                            known=("torch", "torchvision", "torchaudio"))
    assert partly.returncode == 0 and "; not in wheels-index.toml: bitsandbytes-" in partly.stdout
    assert partly.stdout.split()[:2] == ["jp6-cu126", "ok"]


def test_channels_check_of_an_index_that_does_not_answer_is_exit_4(tmp_path: Path, vendor_dir: Path) -> None:
    result = channels_check(tmp_path, vendor_dir, "jp6-cu126", "--vendor-index", "http://127.0.0.1:9/simple")
    assert result.returncode == 4
    # The index given is the one named, not the channel's own (which does not answer here either).
    assert result.stdout.split()[:3] == ["jp6-cu126", "unreachable", "http://127.0.0.1:9/simple"], result.stdout
    assert "did not answer" in result.stdout


def test_channels_check_of_a_mistyped_channel_names_the_closest(tmp_path: Path, vendor_dir: Path) -> None:
    result = channels_check(tmp_path, vendor_dir, "jp6-cu12")
    assert result.returncode == 2
    assert "no channel 'jp6-cu12'" in result.stderr and "did you mean jp6-cu126?" in result.stderr
    assert "fix: jetson-install channels --check jp6-cu126" in result.stderr


def test_an_environments_versions_are_its_metadata_headers_by_normalized_name(tmp_path: Path) -> None:
    from jetson_install.envs.record import installed_versions

    site = tmp_path / "env" / "lib" / "python3.10" / "site-packages"
    for folder, text in {
        "Foo_Bar-1.0.dist-info": "Metadata-Version: 2.1\nName: Foo.Bar\nVersion: 1.0\n\nVersion: 9.9 in the description\n",
        "torch-2.5.0a0+872d972e41.nv24.08.dist-info": "Name: torch\nVersion: 2.5.0a0+872d972e41.nv24.08\n",
        "legacy.egg-info": "Name: legacy\nVersion: 0.3\n",
        "broken-1.0.dist-info": "Name: broken\n",  # no Version: not a distribution uv or pip would leave
    }.items():
        (site / folder).mkdir(parents=True)
        (site / folder / ("PKG-INFO" if folder.endswith(".egg-info") else "METADATA")).write_text(text)
    assert installed_versions(tmp_path / "env") == {"foo-bar": "1.0", "torch": "2.5.0a0+872d972e41.nv24.08",
                                                    "legacy": "0.3"}


def test_thors_files_uv_resolved_are_recorded_as_the_catalogs_builds_by_file_and_sha256() -> None:
    source = load_catalog().channel("jp7-thor-cu130").primary
    assert source is not None and source.default_index
    # uv's default index is not listed by the tool: uv resolves the set (bitsandbytes by its range).
    resolution = vendor_sources.offline_resolution(source)
    assert not any(chosen.url for chosen in resolution.files)
    listed = {build.file: build.sha256 for build in source.builds}
    torch, bnb = "torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl", "bitsandbytes-0.50.2-py3-none-manylinux_2_24_aarch64.whl"
    by_uv = [ChosenFile("torch", "2.13.0", torch, f"https://files.example/{torch}", listed[torch], False),
             ChosenFile("bitsandbytes", "0.50.2", bnb, f"https://files.example/{bnb}", listed[bnb], False)]
    files = {chosen.name: chosen for chosen in resolution.with_resolved(by_uv, source.builds, "uv").files}
    assert (files["torch"].file, files["torch"].sha256, files["torch"].known, files["torch"].cuda) == \
        (torch, listed[torch], True, "13.0")
    assert (files["bitsandbytes"].version, files["bitsandbytes"].url, files["bitsandbytes"].known) == \
        ("0.50.2", f"https://files.example/{bnb}", True)
    assert files["bitsandbytes"].specifier == ">=0.48,<0.51"
    # The catalog's file name with another sha256 is another build: refused, naming both.
    other = [ChosenFile("bitsandbytes", "0.50.2", bnb, f"https://files.example/{bnb}", "0" * 64, False)]
    with pytest.raises(IdentityMismatch) as refused:
        resolution.with_resolved(other, source.builds, "uv's resolution on the default index")
    assert refused.value.message.startswith(f"uv's resolution on the default index gives {bnb} with sha256 {'0' * 64}, "
                                            f"but wheels-index.toml records sha256 {listed[bnb]}")


def test_a_build_the_catalog_does_not_list_is_recorded_with_the_sha256_uv_resolved_it_with() -> None:
    source = load_catalog().channel("jp7-thor-cu130").primary
    assert source is not None
    bnb = "bitsandbytes-0.49.0-py3-none-manylinux_2_24_aarch64.whl"
    resolution = vendor_sources.offline_resolution(source).with_resolved(
        [ChosenFile("bitsandbytes", "0.49.0", bnb, f"https://files.example/{bnb}", "a" * 64, False)], source.builds, "uv")
    chosen = resolution.file("bitsandbytes")
    assert chosen is not None and chosen.version == "0.49.0"
    assert (chosen.file, chosen.sha256, chosen.known) == (bnb, "a" * 64, False)
