"""The vendor step's fixes for a plan: whether they offer the channel's fallback source, and
the fix for each way reading the vendor index fails. `plan TARGET` (which resolves the set as
an install would) and the install both take them from here, so both print the same fix."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from jetson_install.base.errors import IndexUnreachable
from jetson_install.catalog.identity import NoBuildForPython, NothingInPolicy
from jetson_install.envs.interpreters import served_interpreter
from jetson_install.planning.fixes import StepContext, index_down_fix, other_python_fix, vendor_missing_fix
from jetson_install.planning.plan import Plan
from jetson_install.planning.rerun import Rerun

__all__ = ["offers_fallback", "index_failure_fix"]


def offers_fallback(plan: Plan) -> bool:
    """Whether a failed vendor step's fix offers the channel's documented second source."""
    return plan.route.fallback_location(plan) is not None and \
        plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index")


def index_failure_fix(exc: Union[IndexUnreachable, NothingInPolicy], plan: Plan, rerun: Rerun) -> str:
    """The fix when reading the vendor index fails: reading it is the vendor step's first half,
    so its fixes are the vendor step's."""
    context = StepContext("vendor", rerun, plan.vendor_index, Path(plan.venv + ".d"), "", fallback=offers_fallback(plan))
    if isinstance(exc, IndexUnreachable):
        return index_down_fix(context)
    if isinstance(exc, NoBuildForPython):
        return other_python_fix(context, exc.python, exc.served, served_interpreter(plan.python_abi, exc.served))
    return vendor_missing_fix(context)
