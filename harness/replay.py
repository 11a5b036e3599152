"""Replay a gpuc plan against Kubernetes' structured allocator, pod by pod, in gpuc's placement order.

For each pod gpuc places on node N, the upstream allocator is asked to allocate the pod's claims on N
in the state the pods before it left (their claims allocated as gpuc allocated them): it must succeed,
and with the devices gpuc chose. For each pod gpuc cannot place, no node may satisfy it upstream.
With `check_skipped`, the nodes gpuc passed over before N must be unsatisfiable upstream too (gpuc's
first-fit claim). Every difference is returned as a line; the tests require none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compiler.facts.driver import builtin_classes, compute_domain_channel_request
from compiler.facts.platform import dra_gates
from compiler.place.allocator import cluster_pods, placement_order
from compiler.place.allocator.result import AllocationPlan
from compiler.place.inventory import Inventory
from compiler.place.inventory.codec import inventory_list

from . import dra
from .allocref import Allocref

Obj = dict[str, Any]


def cluster_gates(kubernetes: str) -> dict[str, bool]:
    """The DRA gates of a Kubernetes minor as its defaults set them (gpuc's gate table)."""
    minor = int(kubernetes.split(".")[1])
    return {name: gate.on_by_default(minor) for name, gate in dra_gates().items()}


def device_classes(compiled) -> list[Obj]:
    """The DeviceClasses the cluster has: gpuc's own and the driver chart's built-in ones."""
    out = {c.name: {"metadata": {"name": c.name}, "spec": {"selectors": [{"cel": {"expression": c.selector}}]}}
           for c in builtin_classes(compiled.cluster.driver).values()}
    for obj in compiled.objects:
        if obj.kind == "DeviceClass":
            out[obj.name] = {"metadata": {"name": obj.name}, "spec": obj.manifest["spec"]}
    return list(out.values())


def _claim_specs(compiled) -> dict[str, Obj]:
    """Claim spec by the source name the plan gives (`ResourceClaim ns/name`, `ResourceClaimTemplate ns/name`)."""
    specs: dict[str, Obj] = {}
    for obj in compiled.objects:
        if obj.kind == "ResourceClaim":
            specs[f"ResourceClaim {obj.namespace}/{obj.name}"] = obj.manifest["spec"]
        elif obj.kind == "ResourceClaimTemplate":
            specs[f"ResourceClaimTemplate {obj.namespace}/{obj.name}"] = obj.manifest["spec"]["spec"]
    return specs


def _channel_spec() -> Obj:
    request, device_class = compute_domain_channel_request()
    return {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": device_class, "count": 1}}]}}


def _rank(claims: list[Obj], results: list[Obj]) -> int:
    """How far down their firstAvailable lists the claims' requests went (0: every first choice), as the
    scheduler scores nodes since 1.34; results name a subrequest `request/subrequest`."""
    rank = 0
    for claim_obj, result in zip(claims, results):
        order = {f"{r['name']}/{sub['name']}": i for r in claim_obj["spec"]["devices"]["requests"]
                 for i, sub in enumerate(r.get("firstAvailable") or [])}
        chosen = {r["request"] for r in result["devices"].get("results", [])}
        rank += sum(order[name] for name in chosen if name in order)
    return rank


@dataclass
class Replay:
    differences: list[str] = field(default_factory=list)
    pods: int = 0
    placed: int = 0
    allocator: str = ""


def replay(ref: Allocref, compiled, inventory: Inventory, plan: AllocationPlan, *, check_skipped: bool = False,
           gates: dict[str, bool] | None = None, running: list[Obj] = ()) -> Replay:  # type: ignore[assignment]
    """`running`: claims already allocated in the cluster (a --state export's), holding their devices from the start."""
    gates = gates if gates is not None else cluster_gates(compiled.cluster.api.kubernetes)
    slices = [dra.slice_to_v1(s) for s in inventory_list(inventory)["items"]]
    node_names = [n.name for n in inventory.nodes]
    labels = {n.name: dict(getattr(n, "labels", {}) or {}) for n in inventory.nodes}
    nodes = {n: dra.node(n, labels[n]) for n in node_names}
    classes = device_classes(compiled)
    specs = _claim_specs(compiled)
    pods = cluster_pods(compiled)
    outcomes = {(o.workload, o.pod): o for o in plan.pods}
    allocated: dict[str, Obj] = {  # claim key -> allocated claim object
        f"{c['metadata']['namespace']}/{c['metadata']['name']}": dict(c, spec=dra.claim_spec_to_v1(c["spec"])) for c in running}
    pinned: dict[str, str] = {}  # shared claim key -> node
    out = Replay()
    for i in placement_order(pods):
        pod = pods[i]
        outcome = outcomes[(pod.workload, pod.name)]
        out.pods += 1
        todo, pin = [], set()
        for c in pod.claims:
            if c.shared and c.key in allocated:
                pin.add(pinned[c.key])
                continue
            spec = _channel_spec() if c.label == "channel" else specs[c.source]
            ns, name = c.key.split("/", 1)
            todo.append(dra.claim(ns, name, spec))
        who = f"{pod.workload} pod {pod.name}"
        if outcome.node is None:
            candidates = sorted(pin) or node_names
            if todo:
                ans = ref.allocate(gates=gates, nodes=[nodes[n] for n in candidates], slices=slices, classes=classes,
                                   claims=todo, allocated_claims=list(allocated.values()))
                out.allocator = ans.allocator
                fits = [a.node for a in ans.nodes if a.satisfiable]
                if fits:
                    out.differences.append(f"{who}: gpuc cannot place it ({outcome.reason}); upstream fits it on {', '.join(fits[:5])}")
            continue
        out.placed += 1
        if pin and outcome.node not in pin:
            out.differences.append(f"{who}: gpuc puts it on {outcome.node}, its shared claim is on {sorted(pin)}")
        if not todo:
            continue
        asked = [outcome.node]
        if check_skipped and not pin:
            asked = node_names[: node_names.index(outcome.node) + 1]
        ans = ref.allocate(gates=gates, nodes=[nodes[n] for n in asked], slices=slices, classes=classes, claims=todo,
                           allocated_claims=list(allocated.values()))
        out.allocator = ans.allocator
        here = ans.nodes[-1]
        if not here.satisfiable:
            out.differences.append(f"{who}: gpuc places it on {outcome.node}; upstream cannot ({here.error or 'unsatisfiable'})")
            continue
        # A node passed over may fit the pod only with a later alternative than the node chosen (scoring).
        for a in ans.nodes[:-1]:
            if a.satisfiable and _rank(todo, a.results) <= _rank(todo, here.results):
                out.differences.append(f"{who}: gpuc passes over node {a.node}, where upstream fits it as well")
        placed = {pc.claim: pc for pc in outcome.claims}
        for claim_obj, result in zip(todo, here.results):
            key = f"{claim_obj['metadata']['namespace']}/{claim_obj['metadata']['name']}"
            mine = placed.get(key)
            theirs = sorted((r["request"], r["pool"], r["device"]) for r in result["devices"].get("results", []))
            ours = sorted((d.request, d.pool, d.device) for d in mine.devices) if mine else []
            if ours != theirs:
                out.differences.append(f"{who}: claim {key} gets {ours} from gpuc, {theirs} upstream")
            # The next pods meet the allocation as the scheduler would write it (share IDs, consumed capacity);
            # where gpuc chose other devices, the difference above already fails the replay.
            allocated[key] = dra.allocated(claim_obj, result["devices"].get("results", []), outcome.node)
            if any(c.key == key and c.shared for c in pod.claims):
                pinned[key] = outcome.node
    return out
