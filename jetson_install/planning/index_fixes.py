"""The vendor step's fixes for a plan: whether they offer the channel's fallback source, for
`plan TARGET` (which resolves the set as an install would) and the install alike."""

from __future__ import annotations

from jetson_install.planning.plan import Plan

__all__ = ["offers_fallback"]


def offers_fallback(plan: Plan) -> bool:
    """Whether a failed vendor step's fix offers the channel's documented second source."""
    return plan.route.fallback_location(plan) is not None and \
        plan.settings.vendor_index.source in ("wheels-index.toml", "--vendor-index")
