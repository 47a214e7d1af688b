import os
from typing import List
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from support.fixtures import *  # noqa: F403

# The property tier (-m property): each property test's examples are a fixed budget (its own
# settings(max_examples=N), else this profile's), drawn the same way on every run (derandomize),
# with no example database and no timing health check: CI's verdict hangs on the code alone.
# `pytest -m property --hypothesis-show-statistics` shows the branches each reached (events).
settings.register_profile("suite", max_examples=100, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

# tests/setup.d/10-real-torch-env builds this where torch 2.13.0 (CPU) installs without a download.
_REAL_TORCH_PYTHON = Path(__file__).resolve().parent.parent / ".venv-real-torch" / "bin" / "python"
if _REAL_TORCH_PYTHON.exists():
    os.environ.setdefault("JETSON_INSTALL_REAL_TORCH_PYTHON", str(_REAL_TORCH_PYTHON))

# Variables of this test suite, not of the tool (which never reads them): where a lane's
# prepared inputs are.
SUITE_VARIABLES = ("JETSON_INSTALL_REAL_TORCH_PYTHON", "JETSON_INSTALL_ARM64_ROOT")
# Module-level code and module or session fixtures run before any test's own fixture: the
# developer's JETSON_* variables are gone for the whole session, and each test starts
# without any (below), whatever an earlier one set.
for _name in [name for name in os.environ if name.startswith("JETSON_") and name not in SUITE_VARIABLES]:
    del os.environ[_name]
# The per-user folders platformdirs, uv, pip and git find through these on Linux.
_USER_FOLDERS = {"HOME": "home", "XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_CACHE_HOME": "cache",
                 "XDG_STATE_HOME": "state"}


@pytest.fixture(autouse=True)
def _isolated_from_the_developer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's JETSON_* variables (the README documents several), nor
    their configuration, data, caches or logs: each test gets empty per-user folders of its own.

    A lane keeps the real per-user folders: its prepared roots and images are cached there."""
    for name in list(os.environ):
        if name.startswith("JETSON_") and name not in SUITE_VARIABLES:
            monkeypatch.delenv(name)
    if request.node.get_closest_marker("lane") is None:
        user = tmp_path_factory.mktemp("user")
        for variable, folder in _USER_FOLDERS.items():
            (user / folder).mkdir()
            monkeypatch.setenv(variable, str(user / folder))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Every hypothesis test is in the property tier (pytest.mark.property), whichever module
    holds it; first, so that the mark is there when -m selects."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)
