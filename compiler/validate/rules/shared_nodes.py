"""Rules of nodes with several GPU models: one node pool per model, the pools listing the same nodeNames.

The pools describe one set of machines, so what belongs to a node must agree across them: its allocation mode
(one kubelet plugin or device plugin per node), its host driver, its taints and labels. What gpuc cannot yet
model on such nodes is refused with the reason: MIG (one mig-parted label per node), Fabric Manager partitions
and NICs (both laid out per baseboard of one model).
"""

from __future__ import annotations

from ...diagnostics import Findings, one_of
from ...facts.catalog import host_defaults
from ..documents import Fleet
from ..resolved import ResolvedCluster, ResolvedPool


def check_shared_nodes(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        for pool in cluster.pools:
            mates = cluster.node_mates(pool)
            if len(mates) > 1 and mates[0] is pool:
                _check_group(cluster, mates, findings)


def _check_group(cluster: ResolvedCluster, mates: tuple[ResolvedPool, ...], findings: Findings) -> None:
    intent = cluster.intent
    first, names = mates[0], one_of(p.name for p in mates)

    def refuse(pool: ResolvedPool, field: str, message: str, hint: str) -> None:
        findings.add(intent.error(pool.path + (field,), f"pools {names} share their nodes: {message}", hint))

    limit = len(host_defaults()["pciBusIds"])
    if sum(p.spec.gpu.count for p in mates) > limit:
        refuse(mates[-1], "gpu", f"{sum(p.spec.gpu.count for p in mates)} GPUs per node", f"at most {limit} GPUs fit a node")
    for pool in mates[1:]:
        if pool.gpu.key == first.gpu.key:
            refuse(pool, "gpu", f"'{pool.name}' has the same GPU model as '{first.name}'", "make it one pool with the sum of their counts")
        for field, mine, theirs in (("allocation", pool.spec.allocation, first.spec.allocation),
                                    ("driverVersion", pool.spec.driver_version, first.spec.driver_version)):
            if mine != theirs:
                refuse(pool, field, f"'{pool.name}' says {field} {mine}, '{first.name}' {theirs}; a node has one",
                       f"write the same {field} on both")
        if sorted(t.model_dump_json() for t in pool.spec.taints) != sorted(t.model_dump_json() for t in first.spec.taints):
            refuse(pool, "taints", f"'{pool.name}' and '{first.name}' declare different taints for the same nodes",
                   "write the node's taints on every pool of it")
        for key in sorted(set(pool.spec.labels) & set(first.spec.labels)):
            if pool.spec.labels[key] != first.spec.labels[key]:
                refuse(pool, "labels", f"label {key} is '{pool.spec.labels[key]}' on '{pool.name}' and "
                       f"'{first.spec.labels[key]}' on '{first.name}'", "a node carries one value per label")
    for pool in mates:
        for field, given in (("mig", pool.spec.mig), ("nvlink", pool.spec.nvlink), ("nics", pool.spec.nics)):
            if given is not None:
                refuse(pool, field, f"gpuc does not model {field} on nodes with several GPU models (MIG: one mig-parted "
                       "label per node; NVLink partitions and NICs: laid out per baseboard of one model)",
                       f"drop {field}, or give the pool nodes of its own")
