"""wheels-index.toml: the loader names the bad key and line; every board lands on the right channel."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import present

from jetson_install.catalog.catalog import default_catalog_path, load_catalog
from jetson_install.base.errors import CatalogError
from jetson_install.base.sourced import Sourced
from jetson_install.board.platform import detect

BOARDS = Path(__file__).parent / "resources" / "boards"


@pytest.mark.parametrize(
    ("board", "channel"),
    [
        ("agx-orin-64gb-r36.4.3", "jp6-cu126"),
        ("apt-upgraded-r36.4.3-to-r36.4.7", "jp6-cu126"),
        ("unknown-point-r36.4.9", "jp6-cu126"),
        ("orin-nx-r36.3.0", "jp6.0"),
        ("agx-thor-r38.2.0", "jp7-thor-cu130"),
        ("thor-r39.2.0-dpkg", "jp7.2-thor"),
        ("orin-r39.2.0-dpkg", "jp7.2-orin"),
        ("agx-thor-r39.2.1", "jp7.2-thor"),
        ("agx-orin-r39.2.1", "jp7.2-orin"),
        ("agx-orin-r35.4.1", "jp5"),
        ("nano-r32.4.4", "jp4"),
        ("tx2-r28.2.1", "jp3"),
    ],
)
def test_board_maps_to_channel(board: str, channel: str) -> None:
    match = load_catalog().match(detect(BOARDS / board))
    assert match.channel is not None and match.channel.id == channel


def test_unknown_major_is_unsupported_never_a_neighbour() -> None:
    match = load_catalog().match(detect(BOARDS / "future-r41.0.0"))
    assert match.channel is None
    assert "unknown L4T release 41.0.0" in match.reason


def test_r39_without_a_device_tree_cannot_pick_thor_or_orin() -> None:
    match = load_catalog().match(detect(BOARDS / "r39.2.1-12-hour-clock"))
    assert match.channel is None
    assert "several SoC families" in match.reason


def test_orin_is_never_routed_to_the_thor_channel() -> None:
    platform = detect(BOARDS / "agx-orin-64gb-r36.4.3", Sourced("39.2.0", "--l4t"))
    match = load_catalog().match(platform)
    assert match.channel is not None and match.channel.id == "jp7.2-orin"
    assert match.channel.status == "experimental"


def test_supported_channels_prefer_a_set_of_every_vendor_package() -> None:
    for channel in load_catalog().channels:
        if channel.status == "supported":
            primary = present(channel.primary)
            preferred = primary.preferred
            assert set(preferred.specifiers) == {"torch", "torchvision", "torchaudio", "bitsandbytes"}
            assert set(preferred.pins) == {"torch", "torchvision", "torchaudio"}  # bitsandbytes is a range
            assert any(build.name == "torch" and build.cuda == channel.cuda for build in primary.builds)


GOOD = default_catalog_path().read_text()


def broken(tmp_path: Path, old: str, new: str) -> Path:
    assert old in GOOD
    path = tmp_path / "wheels-index.toml"
    path.write_text(GOOD.replace(old, new, 1))
    return path


def line_of(path: Path, fragment: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


@pytest.mark.parametrize(
    ("old", "new", "key", "problem"),
    [
        ('status = "supported"', 'status = "stable"', "status", "must be one of"),
        ('  { torch = "2.8.0", torchvision', '  { torch = "two", torchvision', "sets",
         'has torch = "two": it must be a version ("2.8.0") or a version specifier'),
        ('sha256_prefix = "d5bcaaf709f11750"', 'sha256_prefix = "d5bcaaf7"', "builds", "16 hex digits"),
        ('sha256_prefix = "d12bede7113e6b00" }', 'sha256_prefix = "d12bede7113e6b00", md5 = "x" }', "builds",
         "has the key 'md5'"),
        ('preferred = "2.8.0"', 'preferred = "2.7.0"', "preferred", "exactly one of the sets"),
        ('{ file = "torch-2.8.0-cp310-cp310-linux_aarch64.whl", sha256 = "62a1beee9f2f147076a974d2942c90060c12771c94740830327cae705b2595fc", cuda = "12.6" }',
         '{ file = "torch-2.8.0-cp310-cp310-linux_aarch64.whl", sha256 = "62a1beee9f2f147076a974d2942c90060c12771c94740830327cae705b2595fc" }',
         "builds", "gives cuda"),
        ('numpy = "<2"\napt = ["libopenblas-dev", "libcusparselt0"]\n\n[[channels]]\nid = "jp7-thor-cu130"', 'numpy = "under 2"\napt = ["libopenblas-dev", "libcusparselt0"]\n\n[[channels]]\nid = "jp7-thor-cu130"', "numpy", 'has "under 2": it must be the NumPy the builds need, a version specifier like "<2"'),
        ('index = "https://pypi.jetson-ai-lab.io/jp6/cu126/+simple/"', 'index = "http://pypi.jetson-ai-lab.io/jp6/cu126/+simple/"', "index", "https"),
        ('l4t = { from = "36.4", below = "37.0" }', 'l4t = { from = "36.3", below = "37.0" }', "l4t", "overlaps channel 'jp6.0'"),
        ('python = "3.10"\nkind = "tegra"\nstatus = "supported"', 'python = "3.10"\nkind = "tegra"\nstatus = "supported"\nflavour = "x"', "flavour", "is unknown (known: compile, containers, cuda, families, id, jetpack, kind, l4t, python, reason, remedy, sources, status, title)"),
        ('remedy = "flash JetPack 6.2 (L4T R36.4.3) for the CUDA 12.6 channel with bitsandbytes"',
         'remedey = "flash JetPack 6.2 (L4T R36.4.3) for the CUDA 12.6 channel with bitsandbytes"', "remedey",
         "channel 'jp6.0': key 'remedey' is unknown; did you mean 'remedy'?"),
    ],
)
def test_loader_names_key_and_line(tmp_path: Path, old: str, new: str, key: str, problem: str) -> None:
    path = broken(tmp_path, old, new)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    message = caught.value.message
    assert f"key '{key}'" in message and problem in message
    expected_line = line_of(path, new.splitlines()[-1] if key == "flavour" else new.splitlines()[0].strip())
    assert f"wheels-index.toml:{expected_line}:" in message


def test_a_pre_release_counts_only_where_the_source_says_so(tmp_path: Path) -> None:
    path = broken(tmp_path, '  { torch = "2.8.0", torchvision', '  { torch = "2.9.0a0", torchvision')
    with pytest.raises(CatalogError, match="prereleases = true"):
        load_catalog(path)
    nvidia = present(load_catalog().channel("jp6.0").primary)
    assert nvidia.prereleases and nvidia.preferred.pins == {"torch": "2.4.0a0+3bcc3cddb5.nv24.07.16234504"}


def test_companions_may_not_name_a_vendor_package(tmp_path: Path) -> None:
    path = broken(tmp_path, 'preferred = "2.8.0"', 'preferred = "2.8.0"\n'
                  'companions = [{ requirement = "torch==2.8.0", provides = ["libtorch.so"] }]')
    with pytest.raises(CatalogError, match="vendor packages come only from the vendor source"):
        load_catalog(path)


def test_each_companion_names_the_soname_its_bound_holds_it_to() -> None:
    thor = load_catalog().channel("jp7-thor-cu130").sources[1]
    # nvidia-cudss-cu13 1.0.0.35 ships only libcudss.so.1; the torch links libcudss.so.0.
    assert "nvidia-cudss-cu13<1" in thor.companions
    assert present(thor.provider_of("libcudss.so.0")).describe() == "the channel's companion wheel nvidia-cudss-cu13<1"
    orin = present(load_catalog().channel("jp7.2-orin").primary)
    assert orin.provides("nvidia-cublas-cu12==12.9.2.10") == ("libcublas.so.12", "libcublasLt.so.12")
    jp6 = present(load_catalog().channel("jp6-cu126").primary)
    assert present(jp6.provider_of("libcudss.so.0")).describe() == "the apt package cudss"


@pytest.mark.parametrize(("new", "problem"), [
    # The form before sonames were recorded: a bare name holds the companion to nothing.
    ('companions = ["nvidia-cudss-cu13"]', 'has "nvidia-cudss-cu13": it must be { requirement = "NAME<BOUND", provides = ['),
    ('companions = [\n  { requirement = "nvidia-cudss-cu13<1" },\n]',
     "has an entry without 'provides': the sonames as DT_NEEDED names them"),
    ('companions = [\n  { requirement = "nvidia-cudss-cu13<1", provides = [] },\n]',
     "has provides = []: it must be the sonames as DT_NEEDED names them"),
    ('companions = [\n  { requirement = "nvidia-cudss-cu13<1", provides = ["cudss 0"] },\n]',
     'has "cudss 0": it must be a soname as DT_NEEDED names it'),
    ('companions = [\n  { requirement = "nvidia cudss", provides = ["libcudss.so.0"] },\n]',
     'has requirement = "nvidia cudss": it must be a requirement'),
])
def test_a_companion_without_its_soname_is_refused_at_its_line(tmp_path: Path, new: str, problem: str) -> None:
    old = ('companions = [\n  { requirement = "nvpl-blas", provides = ["libnvpl_blas_lp64_gomp.so.0"] },\n'
           '  { requirement = "nvpl-lapack", provides = ["libnvpl_lapack_lp64_gomp.so.0"] },\n'
           '  { requirement = "nvidia-cudss-cu13<1", provides = ["libcudss.so.0"] },\n]')
    path = broken(tmp_path, old, new)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    message = caught.value.message
    assert "key 'companions'" in message and problem in message
    assert f"wheels-index.toml:{line_of(path, new.splitlines()[-2] if len(new.splitlines()) > 1 else new)}:" in message


def test_apt_provides_names_only_packages_the_sets_install(tmp_path: Path) -> None:
    path = broken(tmp_path, 'apt_provides = { cudss = ["libcudss.so.0"] }',
                  'apt_provides = { libcudss0 = ["libcudss.so.0"] }')
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert "key 'apt_provides' names 'libcudss0', which no set of this source installs" in caught.value.message
    assert f"wheels-index.toml:{line_of(path, 'apt_provides = { libcudss0')}:" in caught.value.message


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "wheels-index.toml"
    path.write_text("schema_version = 2\n[[channels]\n")
    with pytest.raises(CatalogError, match="line 2"):
        load_catalog(path)


def test_the_cached_catalog_and_platform_data_cannot_be_changed_by_a_caller() -> None:
    # Both are cached per file: one caller's change would be every later caller's data.
    from jetson_install.board.platform_data import platform_data

    targets = load_catalog(default_catalog_path()).targets
    with pytest.raises(TypeError):
        targets["other"] = targets["torch"]  # type: ignore[index]
    with pytest.raises(TypeError):
        platform_data().socs["tegra999"] = platform_data().socs["tegra234"]  # type: ignore[index]
