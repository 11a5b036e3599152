"""Checks that need the plan's pods: what several pods of a workload share but only one node or pod can use.

A NIM's model cache is one PersistentVolumeClaim that every pod of the NIMService mounts. A
ReadWriteOnce volume attaches to one node at a time, and gpuc emits nothing that makes the scheduler put
every pod on one node (the plan's packing is not the scheduler's), so a cache for more than one pod (replicas,
or the workers of a multi-node NIM) must be ReadWriteMany; ReadWriteOncePod lets only one pod mount it.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic
from ..lower.graph import CompiledCluster
from ..place import AllocationPlan

SINGLE_NODE_MODES = ("ReadWriteOnce", "ReadWriteOncePod")


def check_placement(compiled: CompiledCluster, plan: AllocationPlan) -> list[Diagnostic]:
    pods: dict[str, int] = {}
    for pod in plan.pods:
        pods[pod.workload] = pods.get(pod.workload, 0) + 1
    out = []
    for p in compiled.plan.workloads:
        w = p.workload
        key = f"{p.namespace}/{p.name}"
        mode = w.spec.cache.access_mode
        if w.spec.model is None or mode not in SINGLE_NODE_MODES:
            continue
        where = ("spec", "cache", "accessMode")
        count = pods.get(key, 0)
        if count > 1:
            attach = ("can be mounted by only one of them; the others never start" if mode == "ReadWriteOncePod" else
                      "attaches to one node at a time, and nothing keeps the scheduler from spreading the pods (whatever "
                      "this plan's packing): pods on another node stay in ContainerCreating with a Multi-Attach error")
            out.append(p.intent.error(where, f"the NIMService runs {count} pods, and a {mode} cache volume {attach}",
                                      "use accessMode ReadWriteMany with a storage class that supports it, or one replica"))
    return out
