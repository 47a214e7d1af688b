"""PlanOptions refuses options that do not combine when it is built: no plan value exists for
them, and the refusal is the one line (and fix) the command line prints."""

from pathlib import Path
from typing import Any, Tuple

import pytest

from jetson_install.base.errors import BadInput
from jetson_install.base.sourced import Sourced
from jetson_install.catalog.settings import IndexSettings
from jetson_install.envs.stack import ExistingStack
from jetson_install.planning.options import PlanOptions

CHANNEL_INDEX = IndexSettings(Sourced(None, "wheels-index.toml"), Sourced(None, "uv default"), False)
GIVEN_INDEX = IndexSettings(Sourced("http://127.0.0.1:9/simple", "--vendor-index"), Sourced(None, "uv default"), False)
STACK = ExistingStack("/usr/bin/python3", "3.10.12", {})


@pytest.mark.parametrize(("given", "refusal"), [
    ({"existing": STACK, "bitsandbytes": "build"},
     ("--bitsandbytes build and --use-existing-torch were both given",
      "keep the image's stack as it is, or build bitsandbytes for a downloaded torch: use one")),
    ({"preflight": True, "existing": STACK},
     ("--preflight and --use-existing-torch were both given",
      "use one: --preflight installs CPU torch and needs no GPU build; drop --use-existing-torch")),
    ({"preflight": True, "bitsandbytes": "build=0.49.2"},
     ("--preflight and --bitsandbytes build were both given",
      "use one: --preflight installs CPU torch and needs no GPU build; drop --bitsandbytes build")),
    ({"cpu_index": "http://127.0.0.1:9/cpu"},
     ("--cpu-index is only for --preflight", "add --preflight, or drop --cpu-index")),
    ({"preflight": True, "fallback": True},
     ("--preflight and --vendor-fallback were both given: a preflight takes CPU builds, not a vendor source",
      "drop --vendor-fallback (an index of CPU builds: --cpu-index URL)")),
    ({"preflight": True, "settings": GIVEN_INDEX},
     ("--preflight and --vendor-index were both given: a preflight takes CPU builds, not the vendor builds",
      "drop --vendor-index (an index of CPU builds: --cpu-index URL)")),
    # A malformed value is named as such, before what it is combined with.
    ({"existing": STACK, "bitsandbytes": "built"},
     ("--bitsandbytes 'built': expected build, build=VERSION or build=PATH",
      "--bitsandbytes build (the newest release this torch accepts), e.g. --bitsandbytes build=0.49.2")),
])
def test_options_that_do_not_combine_are_refused_when_built(tmp_path: Path, given: Any,
                                                             refusal: Tuple[str, str]) -> None:
    settings = given.pop("settings", CHANNEL_INDEX)
    with pytest.raises(BadInput) as refused:
        PlanOptions("obliteratus", settings, tmp_path / "env", **given)
    assert (refused.value.message, refused.value.fix) == refusal


def test_options_that_combine_are_kept_as_given(tmp_path: Path) -> None:
    options = PlanOptions("obliteratus", CHANNEL_INDEX, tmp_path / "env", preflight=True,
                          cpu_index="http://127.0.0.1:9/cpu")
    assert (options.preflight, options.cpu_index, options.build_choice()) == (True, "http://127.0.0.1:9/cpu", None)
    assert PlanOptions("obliteratus", CHANNEL_INDEX, tmp_path / "env", bitsandbytes="build").build_choice() == ""
    assert PlanOptions("obliteratus", CHANNEL_INDEX, tmp_path / "env",
                       bitsandbytes="build=0.49.2").build_choice() == "0.49.2"
