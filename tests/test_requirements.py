"""The target's requirement is one value (base/requirements.py): written as plan.json's
`requirement` and the lock's source, read back by its parts, never by splitting a string."""

from __future__ import annotations

from typing import Tuple

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from jetson_install.base.requirements import TargetRequirement

# PEP 508 names (https://packaging.python.org/en/latest/specifications/name-normalization/).
_NAME = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,10}[A-Za-z0-9])?\Z")
_URL = st.builds(lambda scheme, rest: f"{scheme}://{rest}", st.sampled_from(["git+https", "https", "file"]),
                 st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=30))


@given(_NAME, st.lists(_NAME, max_size=3).map(tuple), _URL)
def test_a_requirement_reads_back_as_it_was_written(name: str, extras: Tuple[str, ...], url: str) -> None:
    event(f"extras: {len(extras)}")
    requirement = TargetRequirement(name, extras, url)
    text = str(requirement)
    assert TargetRequirement.parse(text) == requirement
    assert str(TargetRequirement.parse(text)) == text


def test_the_written_form_is_the_direct_reference_uv_takes() -> None:
    assert str(TargetRequirement("obliteratus", ("quantization",), "git+https://g.example/O@v1")) == \
        "obliteratus[quantization] @ git+https://g.example/O@v1"
    assert str(TargetRequirement("obliteratus", (), "file:///src/o")) == "obliteratus @ file:///src/o"


@pytest.mark.parametrize("text", ["obliteratus", "transformers>=4.40", "git+https://g.example/O", " @ file:///x",
                                  "obliteratus[quantization @ file:///x", "obliteratus @ "])
def test_what_is_not_name_at_url_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not NAME"):
        TargetRequirement.parse(text)
