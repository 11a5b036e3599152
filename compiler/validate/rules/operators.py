"""Rules of the operators a cluster runs alongside the DRA driver."""

from __future__ import annotations

from ...diagnostics import Findings
from ...facts.platform import gpu_operator
from ..documents import Fleet
from ..resolved import ResolvedCluster


def check_operator_modes(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        _check_operator_mode(cluster, findings)


def _check_operator_mode(cluster: ResolvedCluster, findings: Findings) -> None:
    """With mode none another tool runs the GPU Operator: gpuc's mig-parted ConfigMap and MIG labels do
    nothing until that install's migManager reads the ConfigMap."""
    op = cluster.spec.gpu_operator
    if op.mode == "none" and any(p.mig_layout is not None or p.mig_dynamic for p in cluster.pools):
        name = gpu_operator()["migConfigMapName"]
        findings.add(cluster.intent.warning(("spec", "gpuOperator", "mode"),
                                            f"MIG pools need the GPU Operator's migManager to read gpuc's ConfigMap '{name}' "
                                            f"(namespace {op.namespace}); with mode none gpuc cannot set that",
                                            f"set migManager.config.name={name} in the GPU Operator you run, or use mode patch"))
