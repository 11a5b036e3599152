"""`gpuc explain`: the arithmetic and decisions behind one workload, per cluster it runs on."""

from __future__ import annotations

from typing import Any

from ..check.gate import CompiledFleet
from ..diagnostics import Diagnostic
from ..lower.graph import CompiledCluster
from ..plan import WorkloadPlan
from ..plan.sizing import GIB, Sizing, floor_text


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def sizing_lines(s: Sizing) -> list[str]:
    shape = s.shape
    lines = [
        f"model: {s.parameters / 1e9:g}B parameters at {s.precision}",
        f"  weights  = {s.parameters / 1e9:g}e9 x {s.weight_bytes_per_param:g} B x {s.overhead:g} overhead = {_gib(s.weights)}",
        f"  KV/token = 2 x {shape.layers} layers x {shape.kv_heads} KV heads x {shape.head_dim} head dim x "
        f"{s.kv_element_bytes} B = {s.kv_per_token:,} B   (shape of {shape.name})",
        f"  KV cache = {s.kv_per_token:,} B x {s.context_length:,} tokens x {s.concurrency} sequences = {_gib(s.kv_cache)}",
        f"  need     = {_gib(s.weights)} + {_gib(s.kv_cache)} = {_gib(s.need)}",
    ]
    for name, need in s.shared_with:
        lines.append(f"  + {_gib(need)} for {name}, which shares the same GPUs (share group) = {_gib(s.total_need)}")
    if s.auto:
        lines.append("count: auto, smallest of 1, 2, 4, 8 GPUs whose share fits a serving pool:")
        lines.extend(f"  {step}" for step in s.steps)
    if s.count and s.nodes > 1:
        lines.append(f"=> {s.count} GPU(s) per node x {s.nodes} nodes = {s.gpus_per_replica} per replica, {_gib(s.per_gpu)} per GPU; "
                     f"tensor parallelism {s.count}, pipeline parallelism {s.nodes}")
    elif s.count:
        lines.append(f"=> {s.count} GPU(s) per replica, {_gib(s.per_gpu)} per GPU; NIMCache tensorParallelism \"{s.count}\"")
    else:
        lines.append("=> does not fit: no pool has GPUs large enough, even at 8 per " + ("node" if s.nodes > 1 else "replica"))
    return lines


def explain_warnings(compilation: CompiledFleet, workload_ref: str, data: dict[str, Any]) -> list[Diagnostic]:
    """The warnings that concern this workload: about its own document, and about the Cluster of a cluster it
    runs on, except a CRD left unchecked for kinds it does not make (another workload's NIM is not its
    business). Warnings about other workloads and files are `gpuc validate`'s to show."""
    fleet = compilation.fleet
    intent = fleet.workload(workload_ref)
    assert intent is not None
    mine = {fleet.clusters[c["cluster"]].source.file for c in data["clusters"] if c["cluster"] in fleet.clusters}
    kinds = {obj.split(" ", 1)[0] for c in data["clusters"] for obj in c["objects"]}
    out = []
    for w in compilation.warnings:
        if w.file in mine:
            if w.code != "unchecked-crds" or any(f"{kind} (" in w.message for kind in kinds):
                out.append(w)
        elif fleet.document_at(w.file, w.line) is intent:
            out.append(w)
    return out


def explain_data(compilation: CompiledFleet, workload_ref: str) -> dict[str, Any]:
    intent = compilation.fleet.workload(workload_ref)
    assert intent is not None
    key = f"{intent.model.metadata.namespace}/{intent.model.metadata.name}"
    out: dict[str, Any] = {"workload": key, "source": intent.ref, "clusters": []}
    for compiled in compilation.compiled.values():
        plan = next((p for p in compiled.plan.workloads if f"{p.namespace}/{p.name}" == key), None)
        if plan is None:
            continue
        out["clusters"].append(_cluster_entry(compiled, plan, key))
    return out


def _cluster_entry(compiled: CompiledCluster, plan: WorkloadPlan, key: str) -> dict[str, Any]:
    c = compiled.cluster
    claim = compiled.claims.get(key)
    objects = [f"{o.kind} {o.namespace + '/' if o.namespace else ''}{o.name}"
               for o in compiled.sorted_objects()
               if o.component == f"workload/{key}" or (claim and o.name == claim.name and o.kind == claim.kind)]
    entry: dict[str, Any] = {
        "cluster": c.name,
        "kubernetes": c.api.kubernetes,
        "resourceApi": c.api.api_version,
        "draDriver": c.spec.dra_driver.version,
        "draDriverInstalledBy": ("the GPU Operator (GPUCluster)" if c.spec.gpu_operator.mode == "gpuCluster"
                                 else f"its own chart {c.driver.chart_name}"),
        "pools": [{"pool": m.pool.name, "serves": m.ok, "reason": m.reason} for m in plan.matches],
        "gpusPerReplica": plan.gpus * _nodes(plan) if plan.gpus else plan.gpus,
        "multiNode": _multi_node(compiled, plan, key),
        "tensorParallelism": plan.tensor_parallelism if plan.workload.spec.model else None,
        "minMemorySelector": floor_text(plan.min_memory) if plan.min_memory else None,
        "claim": {"kind": claim.kind, "name": claim.name, "namespace": claim.namespace, "requests": list(claim.requests)} if claim else None,
        "computeDomainChannel": compiled.channels.get(key),
        # GPUs from the device plugin, the channel through DRA: what the pods put in resources.limits
        "devicePluginGpus": (plan.gpus or 1) if plan.device_plugin else None,
        "sizing": sizing_lines(plan.sizing) if plan.sizing and not plan.alternatives else None,
        "cache": plan.cache.lines() if plan.cache else None,
        "alternatives": [{"alternative": a.index + 1, "gpusPerReplica": a.gpus,
                          "pools": [{"pool": m.pool.name, "serves": m.ok, "reason": m.reason} for m in a.matches],
                          "minMemorySelector": floor_text(a.min_memory) if a.min_memory else None,
                          "sizing": sizing_lines(a.sizing) if a.sizing else None} for a in plan.alternatives],
        "fractionalMemory": str(plan.workload.spec.gpu.memory) if plan.workload.spec.gpu.fractional else None,
        "cachesEveryProfile": plan.workload.spec.model is not None and plan.tensor_parallelism is None,
        "objects": objects,
    }
    return entry


def _nodes(plan: WorkloadPlan) -> int:
    multi = plan.workload.spec.gpu.multi_node
    return multi.nodes if multi is not None else 1


def _multi_node(compiled: CompiledCluster, plan: WorkloadPlan, key: str) -> dict[str, Any] | None:
    """The pods and nodes of a multi-node replica, and whether a ComputeDomain joins them (and why not)."""
    if plan.workload.spec.gpu.multi_node is None:
        return None
    nodes, replicas = _nodes(plan), plan.workload.spec.replicas
    domain = next((o.name for o in compiled.objects if o.kind == "ComputeDomain" and o.component == f"workload/{key}"), None)
    return {"podsPerReplica": nodes, "gpusPerPod": plan.gpus, "replicas": replicas, "pods": nodes * replicas,
            "nodes": nodes * replicas, "computeDomain": domain,
            "why": ("the serving pools are multi-node NVLink: the replica's pods share IMEX channels through the ComputeDomain"
                    if domain else "the serving pools have no multi-node NVLink: no ComputeDomain, the replica's pods talk "
                    "over the network (NCCL)")}


def explain_text(data: dict[str, Any]) -> str:
    lines = [f"# {data['workload']}  ({data['source']})"]
    if not data["clusters"]:
        lines.append("\nThe workload targets no compiled cluster.")
    for c in data["clusters"]:
        lines.append("")
        lines.append(f"## cluster {c['cluster']}: Kubernetes {c['kubernetes']} ({c['resourceApi']}), DRA driver {c['draDriver']} "
                     f"installed by {c['draDriverInstalledBy']}")
        lines.append("pools:")
        for p in c["pools"]:
            lines.append(f"  {'+' if p['serves'] else '-'} {p['pool']}" + ("" if p["serves"] else f": {p['reason']}"))
        if c["sizing"]:
            lines.extend(c["sizing"])
        elif c["fractionalMemory"]:
            lines.append(f"fractional: each replica's claim takes {c['fractionalMemory']} of one GPU's memory "
                         "(consumable capacity; GPUs are shared while their memory lasts)")
        elif c["gpusPerReplica"] and not c["alternatives"]:
            lines.append(f"GPUs per replica: {c['gpusPerReplica']} (set in the intent)")
        multi = c["multiNode"]
        if multi:
            lines.append(f"multi-node: each replica is {multi['podsPerReplica']} pods, one per node, each with "
                         f"{multi['gpusPerPod']} GPU(s) (gpu.count is per pod) = {c['gpusPerReplica']} GPU(s) per replica; "
                         f"{multi['replicas']} replica(s) = {multi['pods']} pods on {multi['nodes']} nodes")
            lines.append(f"  ComputeDomain {multi['computeDomain']}: {multi['why']}" if multi["computeDomain"] else
                         f"  no ComputeDomain: {multi['why']}")
        lines.extend(c["cache"] or ())
        for a in c["alternatives"]:
            serving = ", ".join(p["pool"] for p in a["pools"] if p["serves"]) or "no pool"
            got = f"{a['gpusPerReplica']} GPU(s) per replica" if a["gpusPerReplica"] else "cannot be satisfied (skipped)"
            lines.append(f"alternative {a['alternative']} (firstAvailable, tried in order): {got}; pools: {serving}")
            lines.extend(f"  {line}" for line in a["sizing"] or ())
        if c["cachesEveryProfile"]:
            lines.append("  the alternatives give different GPU counts: the NIMCache caches every tensor-parallel profile "
                         "and the NIM picks the one matching the GPUs it gets")
        if c["minMemorySelector"]:
            lines.append(f"selector added by sizing: GPU memory >= {c['minMemorySelector']}")
        if c["claim"]:
            cl = c["claim"]
            lines.append(f"claim: {cl['kind']} {cl['namespace']}/{cl['name']} (requests: {', '.join(cl['requests'])})")
            field = "resourceClaimTemplateName" if cl["kind"] == "ResourceClaimTemplate" else "resourceClaimName"
            lines.append(f"  pods attach it with spec.resourceClaims: [{{name: gpu, {field}: {cl['name']}}}]")
        if c["devicePluginGpus"]:
            lines.append(f"GPUs from the device plugin (the pool is allocation: devicePlugin): pods request "
                         f"resources.limits nvidia.com/gpu: {c['devicePluginGpus']}; only the ComputeDomain channel comes through DRA")
        if c["computeDomainChannel"]:
            lines.append(f"  {'and ' if c['claim'] else ''}the ComputeDomain channel: "
                         f"{{name: channel, resourceClaimTemplateName: {c['computeDomainChannel']}}}")
        lines.append("objects:")
        lines.extend(f"  {o}" for o in c["objects"])
    return "\n".join(lines) + "\n"
