"""The runner label users look for by a board's name: an Orin Nano flashed with the Super
configuration says so only in its device-tree model, which platform-data.toml maps to
`orin-nano-super` (the model string as public device outputs on R36.4.3 to R36.5.0 show it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jetson_install.base.errors import CatalogError
from jetson_install.fleet.labels import runner_labels
from jetson_install.board.platform import detect
from jetson_install.board.platform_data import DATA_FILE, platform_data
from jetson_install.board.samples import resolve_root

SUPER = "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super"


def test_an_orin_nano_super_gets_its_label_and_a_plain_one_does_not() -> None:
    nano = detect(resolve_root("sample:orin-nano-jp6.1"))
    assert "orin-nano-super" not in runner_labels(nano, None).labels
    labels = runner_labels(dataclasses.replace(nano, model=SUPER), None).labels
    assert labels[:5] == ("self-hosted", "linux", "ARM64", "jetson", "orin")
    assert "orin-nano-super" in labels and "cuda" not in labels


def test_a_model_label_that_is_no_runner_label_is_refused_with_its_line(tmp_path: Path) -> None:
    text = DATA_FILE.read_text().replace('= "orin-nano-super"', '= "Orin Nano Super"')
    path = tmp_path / "platform-data.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as caught:
        platform_data(path)
    assert f"{path}:" in str(caught.value) and "a runner label" in str(caught.value)
