"""Checks that need to know where the pods go: what the plan puts on several nodes but only works on one.

A NIM's model cache is one PersistentVolumeClaim that every pod of the NIMService mounts. A
ReadWriteOnce volume attaches to one node at a time, so replicas placed on several nodes (or the
workers of a multi-node NIM) stay in ContainerCreating; ReadWriteOncePod lets only one pod mount it.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic
from ..lower.graph import CompiledCluster
from ..place import AllocationPlan

SINGLE_NODE_MODES = ("ReadWriteOnce", "ReadWriteOncePod")


def check_placement(compiled: CompiledCluster, plan: AllocationPlan) -> list[Diagnostic]:
    nodes: dict[str, set[str]] = {}
    pods: dict[str, int] = {}
    for pod in plan.pods:
        pods[pod.workload] = pods.get(pod.workload, 0) + 1
        if pod.node is not None:
            nodes.setdefault(pod.workload, set()).add(pod.node)
    out = []
    for p in compiled.plan.workloads:
        w = p.workload
        key = f"{p.namespace}/{p.name}"
        mode = w.spec.cache.access_mode
        if w.spec.model is None or mode not in SINGLE_NODE_MODES:
            continue
        where = ("spec", "cache", "accessMode")
        used = sorted(nodes.get(key, ()))
        if mode == "ReadWriteOncePod" and pods.get(key, 0) > 1:
            out.append(p.intent.error(where, f"the NIMService runs {pods[key]} pods, and a ReadWriteOncePod cache volume can be "
                                             "mounted by only one of them; the others never start",
                                      "use accessMode ReadWriteMany with a storage class that supports it, or one replica"))
        elif len(used) > 1:
            out.append(p.intent.error(where, f"the plan puts the NIMService's pods on {len(used)} nodes ({', '.join(used[:4])}"
                                             f"{', ...' if len(used) > 4 else ''}) of cluster '{compiled.name}', and a "
                                             "ReadWriteOnce cache volume attaches to one node: the pods elsewhere stay in ContainerCreating",
                                      "use accessMode ReadWriteMany with a storage class that supports it, or fewer replicas or GPUs "
                                      "so that every pod fits one node (the scheduler may still spread them)"))
    return out
