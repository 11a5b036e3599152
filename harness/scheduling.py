"""A gpuc plan against the real kube-scheduler: the cluster's Nodes and ResourceSlices (what gpuc
synthesizes, as kubelets and the DRA driver would publish them), its DeviceClasses and rendered
claims, then the plan's pods one by one in gpuc's placement order.

A pod gpuc places on node N is created with a node affinity to N: the scheduler must bind it there,
allocating its claims on N's devices next to everything bound before it. A pod gpuc cannot place is
created without one: the scheduler must find no node for it (PodScheduled=False, Unschedulable).
There is no kubelet: the binding (spec.nodeName) is the verdict. The resource-claim controller makes
each pod's claims from its templates, as in a cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from compiler.place.allocator import cluster_pods, placement_order
from compiler.place.allocator.result import AllocationPlan
from compiler.place.inventory import Inventory
from compiler.place.inventory.codec import inventory_list

from .kube import Kube, Rejection
from .kubelet import add_node
from .replay import device_classes

Obj = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"  # never pulled: there is no kubelet


@dataclass
class Verdicts:
    bound: dict[str, str] = field(default_factory=dict)  # pod -> node
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod -> the scheduler's message
    differences: list[str] = field(default_factory=list)


def publish_inventory(kube: Kube, inventory: Inventory, api_version: str) -> None:
    """Nodes (with room for pods: only devices should decide) and the ResourceSlices of `inventory`."""
    for n in inventory.nodes:
        add_node(kube, n.name, dict(n.labels))
    for s in inventory_list(inventory)["items"]:
        s["apiVersion"] = api_version
        _must(kube.apply(s))


def publish_classes(kube: Kube, compiled: Any, api_version: str) -> None:
    """The driver chart's DeviceClasses (gpuc's own are in the rendered tree)."""
    own = {o.name for o in compiled.objects if o.kind == "DeviceClass"}
    for c in device_classes(compiled):
        if c["metadata"]["name"] not in own:
            _must(kube.apply({"apiVersion": api_version, "kind": "DeviceClass", **c}))


def _must(result: Obj | Rejection) -> Obj:
    if isinstance(result, Rejection):
        raise AssertionError(f"the API server refused the harness's own object: {result}")
    return result


def _pod(pod: Any, channel_template: str | None, node: str | None) -> Obj:
    claims, refs = [], []
    for c in pod.claims:
        ns, name = c.key.split("/", 1)
        if c.label == "channel":
            claims.append({"name": "channel", "resourceClaimTemplateName": channel_template})
        elif c.shared:
            claims.append({"name": c.label, "resourceClaimName": name})
        else:
            claims.append({"name": c.label, "resourceClaimTemplateName": c.source.split("/", 1)[1]})
        refs.append({"name": c.label})
    spec: Obj = {"containers": [{"name": "main", "image": PAUSE, "resources": {"claims": refs}}], "resourceClaims": claims,
                 "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0}
    if node is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    ns = pod.workload.split("/")[0]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name, "namespace": ns, "labels": {"gpuc.dev/harness": "true"}},
            "spec": spec}


def verdict(kube: Kube, ns: str, name: str, timeout: float) -> tuple[str | None, str]:
    """(node it is bound to, or None and the scheduler's Unschedulable message)."""
    deadline = time.monotonic() + timeout
    while True:
        pod = kube.get("v1", "Pod", name, ns) or {}
        node = pod.get("spec", {}).get("nodeName")
        if node:
            return node, ""
        for cond in pod.get("status", {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                return None, cond.get("message", "")
        if time.monotonic() > deadline:
            return None, f"no verdict from the scheduler after {timeout:.0f} s"
        time.sleep(0.05)


def schedule_plan(kube: Kube, compiled: Any, plan: AllocationPlan, channel_templates: dict[str, str] | None = None,
                  timeout: float = 60) -> Verdicts:
    """Create the plan's pods in placement order, each after the previous one has its verdict."""
    pods = cluster_pods(compiled)
    outcomes = {(o.workload, o.pod): o for o in plan.pods}
    out = Verdicts()
    for i in placement_order(pods):
        pod = pods[i]
        outcome = outcomes[(pod.workload, pod.name)]
        ns = pod.workload.split("/")[0]
        _must(kube.apply(_pod(pod, (channel_templates or {}).get(pod.workload), outcome.node)))
        node, why = verdict(kube, ns, pod.name, timeout)
        who = f"{pod.workload} pod {pod.name}"
        if node is not None:
            out.bound[pod.name] = node
            if outcome.node is None:
                out.differences.append(f"{who}: gpuc cannot place it ({outcome.reason}); the scheduler bound it to {node}")
        else:
            out.unschedulable[pod.name] = why
            if outcome.node is not None:
                out.differences.append(f"{who}: gpuc places it on {outcome.node}; the scheduler did not bind it: {why}")
    return out
