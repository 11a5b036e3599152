"""Tolerations for tainted GPU pools.

A pod asking for `nvidia.com/gpu` through the device plugin gets a toleration for the extended resource
from the ExtendedResourceToleration admission plugin; a DRA pod asks for no extended resource, so
nothing tolerates the taint GKE and EKS put on GPU nodes for it: the DRA kubelet plugin never lands
there and NIMs stay Pending. gpuc derives the tolerations from `nodePools[].taints`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..validate.resolved import ResolvedPool


def tolerations(pools: Iterable[ResolvedPool]) -> list[dict[str, Any]]:
    """One toleration per distinct taint of the pools, in a fixed order: Equal with a value, Exists without."""
    seen = sorted({(t.key, t.value, t.effect) for p in pools for t in p.spec.taints})
    return [{"key": k, "operator": "Equal", "value": v, "effect": e} if v else {"key": k, "operator": "Exists", "effect": e}
            for k, v, e in seen]


def tolerated(toleration: dict[str, Any], taint: tuple[str, str, str]) -> bool:
    """Whether a toleration covers a (key, value, effect) taint, as the scheduler matches them."""
    key, value, effect = taint
    if toleration.get("effect") not in (None, "", effect):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return toleration.get("key") in (None, "", key)
    return toleration.get("key") == key and toleration.get("value", "") == value


def uncovered(pools: Iterable[ResolvedPool], existing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pools' tolerations that `existing` (a chart's defaults) does not already give."""
    return [t for t in tolerations(pools) if not any(tolerated(e, (t["key"], t.get("value", ""), t["effect"])) for e in existing)]
