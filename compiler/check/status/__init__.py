"""`gpuc status`: the running cluster checked against the fleet's intents for it.

The troubleshooting guides' checks (is DRA served, do the DeviceClasses exist, is CDI on, does every GPU
node publish its ResourceSlice pool, is the device plugin off where DRA allocates, are the claims
allocated and reserved, what do NIMServices and ComputeDomains report) and drift, each a finding with
its level and fix. Pure: it reads a compiled cluster and a ClusterState; reading them is the caller's.
"""

from __future__ import annotations

from ...load.state import ClusterState
from ...lower.graph import CompiledCluster
from ...place.allocator import AllocationPlan
from . import platform, workloads
from .context import StatusContext
from .drift import drift
from .model import LEVELS, Finding, StatusReport


def cluster_status(compiled: CompiledCluster, state: ClusterState, plan: AllocationPlan | None) -> StatusReport:
    ctx = StatusContext(compiled, state)
    for check in (*platform.CHECKS, *workloads.CHECKS, lambda c: workloads.placement(c, plan), drift):
        try:
            check(ctx)
        except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
            # an object shaped unlike anything an API server returns (a hand-edited export): say so, go on
            name = getattr(check, "__name__", "placement").replace("_", "-")
            ctx.add(name, "warn", f"the cluster state has an object this check cannot read ({type(exc).__name__}: {exc})",
                    "export the objects again with `kubectl get ... -o yaml` instead of editing them")
    return StatusReport(compiled.name, state.display, ctx.findings)


__all__ = ["LEVELS", "Finding", "StatusReport", "cluster_status"]
