"""What every status check reads: the compiled cluster, the running one, and which node is in which pool."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...facts.driver import gpu_driver
from ...facts.platform import gpu_operator
from ...load.state import ClusterState, StateObject
from ...lower.graph import CompiledCluster
from ...place.inventory.load import node_pool
from ...validate.resolved import ResolvedPool
from .model import Finding, Level

RESOURCE = "resource.k8s.io"


def product_key(name: str) -> str:
    """GPU Feature Discovery writes `NVIDIA-H100-80GB-HBM3` for the product `NVIDIA H100 80GB HBM3`."""
    return name.replace(" ", "-")


@dataclass
class StatusContext:
    compiled: CompiledCluster
    state: ClusterState
    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.driver = gpu_driver()
        self.nodes = self.state.of("", "Node")
        self.slices = self.state.of(RESOURCE, "ResourceSlice")
        self.gpu_slices: dict[str, list[StateObject]] = {}
        for s in self.slices:
            if s.spec.get("driver") == self.driver and isinstance(s.spec.get("nodeName"), str):
                self.gpu_slices.setdefault(s.spec["nodeName"], []).append(s)
        pools = {p.name: p for p in self.compiled.cluster.pools}
        products = {product_key(p.gpu.product_name): p.gpu.product_name for p in self.compiled.cluster.pools}
        label = gpu_operator()["productLabel"]
        self.pool_of: dict[str, ResolvedPool] = {}
        for node in self.nodes:
            product = products.get(str((node.metadata.get("labels") or {}).get(label, "")))
            name = node_pool(node.name, self.compiled.cluster, {product} if product else self._slice_products(node.name))
            if name is not None:
                self.pool_of[node.name] = pools[name]

    def _slice_products(self, node: str) -> set[str]:
        return {str(((d.get("attributes") or {}).get("productName") or {}).get("string"))
                for s in self.gpu_slices.get(node, []) for d in s.spec.get("devices") or [] if isinstance(d, dict)} - {"None"}

    def add(self, check: str, level: Level, message: str, fix: str = "", obj: StateObject | None = None, path: tuple = ()) -> None:
        where = ""
        if obj is not None and level in ("warn", "fail"):
            d = obj.diagnostic("", path=path, cheap=False)
            where = f"{d.file}:{d.line}" if d.line else d.file
        self.findings.append(Finding(check, level, message, fix, where))

    def skip(self, check: str, kinds: str) -> None:
        self.add(check, "skip", f"the cluster state holds no {kinds}",
                 f"export them too: `kubectl get {kinds.lower()} -A -o yaml` (or read the cluster live with --kubeconfig)")

    def labels(self, obj: StateObject) -> dict[str, Any]:
        return obj.metadata.get("labels") or {}


def names(items: list[str], shown: int = 5) -> str:
    """`a, b, c and 4 more`: findings about hundreds of nodes stay one line."""
    head = ", ".join(items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")
