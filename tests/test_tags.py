"""One wheel-tag generator: a board's Python, architecture and glibc decide which wheels install."""

from __future__ import annotations

from jetson_install.catalog.catalog import load_catalog
from jetson_install.fleet.lock import LockTarget
from jetson_install.board.platform_data import major_glibc, platform_data
from jetson_install.base.tags import python_platform, wheel_rank, wheel_tags


def test_a_jetpack_6_board_takes_manylinux_up_to_its_glibc_and_linux_wheels_last() -> None:
    tags = [str(tag) for tag in wheel_tags("3.10", "aarch64", "2.35")]
    assert tags[0] == "cp310-cp310-manylinux_2_35_aarch64"
    assert "cp310-cp310-manylinux_2_17_aarch64" in tags and "cp310-cp310-manylinux2014_aarch64" in tags
    assert "py3-none-any" in tags
    assert not any("manylinux_2_36" in tag or "manylinux_2_39" in tag or "x86_64" in tag for tag in tags)
    assert wheel_rank("torch-2.8.0-cp310-cp310-manylinux_2_39_aarch64.whl", wheel_tags("3.10", "aarch64", "2.35")) is None
    best = wheel_rank("x-1-cp310-cp310-manylinux_2_35_aarch64.whl", wheel_tags("3.10", "aarch64", "2.35"))
    vendor = wheel_rank("x-1-cp310-cp310-linux_aarch64.whl", wheel_tags("3.10", "aarch64", "2.35"))
    assert best is not None and vendor is not None and best < vendor


def test_a_lock_for_a_board_gives_uv_the_same_level() -> None:
    assert python_platform("aarch64", "2.39") == "aarch64-manylinux_2_39"
    target = LockTarget("3.12", "aarch64", "2.39")
    assert target.platform == "aarch64-manylinux_2_39"
    assert target.accepted == wheel_tags("3.12", "aarch64", "2.39")
    here = LockTarget("3.12", "x86_64", None, "/usr/bin/python3")
    assert here.platform == "native" and here.accepted is None


def test_every_installable_channel_has_a_glibc_from_its_l4t_majors_ubuntu() -> None:
    data = platform_data()
    for channel in load_catalog().channels:
        if channel.installable:
            ubuntu = data.majors[channel.l4t_from[0]].ubuntu
            assert major_glibc(channel.l4t_from[0]) == data.glibc[str(ubuntu)], channel.id
    assert major_glibc(36) == "2.35" and major_glibc(38) == "2.39" and major_glibc(39) == "2.39"
