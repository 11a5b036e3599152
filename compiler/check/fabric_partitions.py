"""Claims on a driver with gate FabricManagerPartitioning on.

The gate is driver-wide: Prepare of full GPUs activates the Fabric Manager partition whose members are exactly
the allocated GPUs, and fails for any other set. A claim of more than one GPU therefore needs a matchAttribute
on the partition<N> attribute of its size, or its pod never starts (data/dra_driver.yaml fabricManagerPartitioning).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..facts.driver import fabric_manager_partitioning, gpu_driver
from .dra_limits import CLAIM_KINDS, claim_devices, request_body
from .driver_config import class_device_types, effective_gates, request_classes
from .model import ClusterContext, Finding, as_list


def _count(body: dict[str, Any]) -> int | None:
    if body.get("allocationMode", "ExactCount") != "ExactCount":
        return None  # All: every device of a node, which the node's largest partition is
    count = body.get("count", 1)
    return count if isinstance(count, int) else None


def _partition_sizes(devices: dict[str, Any], request: str, prefix: str) -> set[int]:
    """Sizes N of the partition<N> matchAttribute constraints that cover `request`."""
    out = set()
    for constraint in as_list(devices.get("constraints")):
        if not isinstance(constraint, dict) or not isinstance(constraint.get("matchAttribute"), str):
            continue
        covered = constraint.get("requests")
        if covered and request not in covered:
            continue
        name = constraint["matchAttribute"]
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            out.add(int(name[len(prefix):]))
    return out


def check_fabric_partitions(ctx: ClusterContext) -> Iterable[Finding]:
    facts = fabric_manager_partitioning()
    if not effective_gates(ctx).get(facts["gate"]):
        return
    types = class_device_types(ctx.objects)
    prefix = f"{gpu_driver()}/{facts['attributePrefix']}"
    for obj in ctx.objects:
        if obj.kind not in CLAIM_KINDS:
            continue
        found = claim_devices(obj.manifest)
        if found is None:
            continue
        base, devices = found
        classes = request_classes(devices)
        partitioned = {name for name, cls in classes.items() if types.get(cls) in facts["deviceTypes"] and "/" not in name}
        total, counts = 0, {}
        for i, request in enumerate(as_list(devices.get("requests"))):
            if isinstance(request, dict) and request.get("name") in partitioned:
                count = _count(request_body(request))
                if count is None:
                    total = -1
                    break
                counts[request["name"]] = (i, count)
                total += count
        if total <= 1:
            continue  # one GPU is its own partition; All takes a whole node
        for name, (i, _) in counts.items():
            sizes = _partition_sizes(devices, name, prefix)
            if total not in sizes:
                yield Finding(obj, base + ("requests", i),
                              f"the DRA driver runs with gate {facts['gate']}, so preparing this claim's {total} GPUs needs a "
                              f"Fabric Manager partition of exactly those GPUs, and nothing here asks for one: the pod would "
                              f"not start",
                              (f"give the workload gpu.fabric: {{partitionSize: {total}}}" if total in facts["partitionSizes"] else
                               f"ask for a Fabric Manager partition size ({', '.join(map(str, facts['partitionSizes'][1:]))}) "
                               "with gpu.fabric.partitionSize") +
                              f" (one of the pool's nvlink.partitions), ask for 1 GPU, or run it where the driver has no {facts['gate']}")
                break
