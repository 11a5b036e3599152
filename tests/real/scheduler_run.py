"""Setting up a gpuc plan against the real kube-scheduler (harness/scheduling.py has the method): a generated
fleet, its control plane's objects, and the plan's pods scheduled one at a time or in a batch. Shared by
test_real_scheduler.py and the plan-vs-scheduler benchmark (benchmarks/scheduler_bench.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from compiler.load.live import read_live
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place import synthesize_for
from harness.controlplane import ControlPlane
from harness.kube import Kube
from harness.scheduling import Verdicts, publish_classes, publish_inventory, schedule_batch, schedule_plan, verdict
from harness.trees import apply_tree

from conftest import cluster_doc, gpuc, write_fleet
from real.reference import crds_of


def channel_templates(kube: Kube, compiled: Any, api_version: str) -> dict[str, str]:
    """The channel claim templates the ComputeDomain controller would make (request and class from gpuc's facts)."""
    from compiler.facts.driver import compute_domain_channel_request

    request, device_class = compute_domain_channel_request()
    out = {}
    for key, name in compiled.channels.items():
        ns = key.split("/")[0]
        kube.apply({"apiVersion": api_version, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
                    "spec": {"spec": {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": device_class}}]}}}})
        out[key] = name
    return out


def schedule(start: Callable[[str], ControlPlane], fleet: Path, cluster: str, tmp_path: Path,
             foreign: list[dict[str, Any]] | None = None, batch: bool = False) -> tuple[Verdicts, Any]:
    """Render, publish the cluster to a fresh control plane, plan with gpuc (reading the live cluster when
    something already runs there) and schedule the plan's pods (`batch`: all at once, timed); the verdicts and gpuc's plan."""
    doc = yaml.safe_load((fleet / "clusters" / f"{cluster}.yaml").read_text())
    minor = doc["spec"]["kubernetesVersion"]
    cp = start(minor)
    kube = Kube(cp)
    out = tmp_path / "rendered"
    rendered = gpuc("render", fleet, "-o", out, "--cluster", cluster, "--allow-infeasible")
    assert rendered.code == 0, rendered.err
    compiled = compile_fleet(fleet, CompileOptions(only=cluster, detail=True, allow_infeasible=True)).clusters[cluster].compiled
    api_version = compiled.cluster.api.api_version
    publish_inventory(kube, synthesize_for(compiled), api_version)
    publish_classes(kube, compiled, api_version)
    rejected, _ = apply_tree(kube, out / cluster, crds_of(fleet, cluster))
    assert [str(r) for r in rejected] == []
    for obj in foreign or []:
        kube.ensure_namespace(obj["metadata"]["namespace"])
        kube.apply(obj)
        if obj["kind"] == "Pod":
            node, why = verdict(kube, obj["metadata"]["namespace"], obj["metadata"]["name"], 60)
            assert node is not None, f"the foreign pod did not start: {why}"
    options = CompileOptions(only=cluster, detail=True, allow_infeasible=True,
                             state=read_live(str(cp.kubeconfig()), None) if foreign else None)
    outcome = compile_fleet(fleet, options).clusters[cluster]
    templates = channel_templates(kube, outcome.compiled, api_version)
    if batch:
        verdicts = schedule_batch(kube, outcome.compiled, outcome.placement, templates, scheduler=cp.procs["kube-scheduler"])
    else:
        verdicts = schedule_plan(kube, outcome.compiled, outcome.placement, templates)
    return verdicts, outcome.placement


def generated_fleet(root: Path, nodes: int = 200, pods: int = 1000, seed: int = 5) -> Path:
    """A Kubernetes 1.37 / driver 0.5.1 cluster of `nodes` nodes (H100, L40S and A100 in MIG mode) and workloads of
    every kind gpuc plans adding up to `pods` pods: exclusive counts, shared claims, MIG slices, alternatives and
    fractional GPU memory; more than fits, so some cannot be placed."""
    rng = random.Random(seed)
    h100, l40s = nodes * 3 // 4, nodes // 10
    pools = [{"name": "h100", "nodes": h100, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": "l40s", "nodes": l40s, "gpu": {"model": "L40S-48GB", "count": 4}},
             {"name": "a100-mig", "nodes": nodes - h100 - l40s, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}]
    cluster = cluster_doc("gen", kubernetes="1.37", driver="0.5.1", pools=pools,
                          acknowledge=[{"warning": "unchecked-crds", "reason": "generated fleet"}])
    docs, total = [], 0
    while total < pods:
        kind = rng.choices(["exclusive", "shared", "mig", "alternatives", "fractional"], weights=[40, 10, 20, 15, 15])[0]
        gpu: dict[str, Any]
        if kind == "exclusive":
            gpu = {"count": rng.choice([1, 1, 2, 4, 8])}
        elif kind == "shared":
            gpu = {"count": 1, "sharing": "Shared"}
        elif kind == "mig":
            gpu = {"mig": {"slices": [{"profile": rng.choice(["1g.10gb", "2g.20gb", "3g.40gb"])}]}}
        elif kind == "alternatives":
            gpu = {"alternatives": [{"count": 2, "require": {"productName": "NVIDIA L40S"}}, {"count": 1, "require": {"architecture": ["Hopper"]}}]}
        else:
            gpu = {"sharing": "Fractional", "memory": rng.choice(["10Gi", "16Gi", "20Gi", "40Gi"]), "require": {"architecture": ["Hopper"]}}
        replicas = min(rng.randint(1, 12), pods - total)
        docs.append({"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": f"w{len(docs):04d}", "namespace": f"team-{len(docs) % 7}"},
                     "spec": {"clusters": ["gen"], "replicas": replicas, "gpu": gpu}})
        total += replicas
    return write_fleet(root, [cluster], {"w.yaml": docs})


def foreign_claim(node: str, count: int = 8) -> list[dict[str, Any]]:
    """A training job gpuc knows nothing of, already running: a claim of `count` GPUs and its pod on `node`."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "train", "namespace": "research-foreign"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "research-foreign"},
           "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "train"}], "automountServiceAccountToken": False,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}}
    return [claim, pod]
