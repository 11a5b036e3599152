"""Deterministic synthetic fleets for benchmarks: C clusters x W workloads per cluster, every feature.

`python -m benchmarks.fleetgen OUT --clusters 20 --workloads 1000 --seed 7` writes a fleet directory;
`--plan-nodes 5000 --plan-pods 20000` instead writes one large cluster for the allocator benchmark.
The same seed and sizes always give byte-identical files.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Platform:
    """One cluster flavour of today's platform matrix (compiler/facts/data/: kubernetes.yaml, dra_driver.yaml,
    operators.yaml): written so gpuc accepts it, every warning it must give acknowledged with a reason."""

    kubernetes: str
    driver: str
    fabric: str = "none"             # none | topologyConfig (the 25.8 fork) | partitionAttributes (0.5+)
    operator: str = "helm"           # gpuOperator.mode: helm | patch | gpuCluster | none
    operator_version: str | None = "v26.7.0"
    nim: str | None = None           # NIM Operator version (3.0.x reads 1.33's v1beta2 claims, 3.1.x 1.34's v1)
    driver_root: str = "/"           # "/run/nvidia/driver": the operator installs the GPU driver (acknowledged upgrades)
    mig: str | None = "all-balanced"  # the MIG pool's layout, "dynamic" (DynamicMIG: no MPS beside it), or no MIG pool
    device_plugin_pool: bool = False  # an L40S pool left on the device plugin

    @property
    def mps(self) -> bool:
        return self.mig != "dynamic"  # the driver refuses DynamicMIG and MPSSupport together


# Every supported minor (1.32-1.37), every driver line (25.3, 25.8, 25.12, 0.4, 0.5), every GPU Operator mode and
# every fabric mode; clusters take them in turn, so any fleet of len(PLATFORMS) clusters or more covers them all.
PLATFORMS = [
    Platform("1.34", "25.12.0", operator_version="v25.10.1", nim="3.1.2", driver_root="/run/nvidia/driver"),
    Platform("1.34", "25.8.1", fabric="topologyConfig", operator="patch", operator_version=None, device_plugin_pool=True),
    Platform("1.36", "0.5.1", fabric="partitionAttributes", nim="3.1.2", driver_root="/run/nvidia/driver"),
    # mode none: no MIG pool (nothing gpuc writes would reach another install's MIG Manager)
    Platform("1.35", "0.4.1", operator="none", operator_version=None, mig=None),
    Platform("1.37", "0.5.1", operator="gpuCluster", nim="3.1.2", mig="dynamic"),
    Platform("1.33", "25.12.0", operator_version="v26.3.3", nim="3.0.2"),
    Platform("1.32", "25.12.0", operator="patch", operator_version=None),
    Platform("1.34", "25.3.2", operator_version="v25.3.4"),
    Platform("1.36", "0.5.0", operator_version="v26.7.2", mig="dynamic", nim="3.1.2"),
]
FORK_IMAGE = {"repository": "registry.example.com/gpu/k8s-dra-driver-gpu-fm", "tag": "v25.8.1-fm.3"}
NIM_IMAGES = ["nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3", "nvcr.io/nim/meta/llama-3.2-1b-instruct:1.12.0",
              "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.3"]


NIM_GPUS = {("1B", "bf16"): 1, ("1B", "fp8"): 1, ("8B", "bf16"): 1, ("8B", "fp8"): 1, ("70B", "bf16"): 4, ("70B", "fp8"): 2}
HEADROOM = 1.5  # pools are sized to half again the demand, so plans fit despite whole-node requests


def demand(workloads: list[dict]) -> dict[str, int]:
    """GPUs each pool must provide for these workloads (a shared claim counts once)."""
    gpus = {"h100": 0, "a100-mig": 0, "gb200": 0}
    groups = set()
    for w in workloads:
        spec, gpu = w["spec"], w["spec"]["gpu"]
        replicas = spec["replicas"]
        if "mig" in gpu:
            gpus["a100-mig"] += replicas
        elif "multiNode" in gpu:
            gpus["gb200"] += gpu["count"] * gpu["multiNode"]["nodes"] * replicas
        elif "fabric" in gpu:
            gpus["h100"] += gpu["fabric"]["partitionSize"] * replicas
        elif gpu.get("sharing") in ("Shared", "TimeSlicing", "MPS"):
            key = (w["metadata"]["namespace"], gpu.get("shareGroup") or w["metadata"]["name"])
            gpus["h100"] += 0 if key in groups else 1
            groups.add(key)
        elif "model" in spec:
            gpus["h100"] += NIM_GPUS[(spec["model"]["parameters"], spec["model"]["precision"])] * replicas
        else:
            gpus["h100"] += gpu["count"] * replicas
    return gpus


def _acknowledge(p: Platform) -> list[dict]:
    """The warnings each flavour gives by design, acknowledged as a platform team would."""
    acks = [{"warning": "unchecked-crds", "reason": "benchmark fleet: no operator CRDs"}]
    if p.kubernetes in ("1.32", "1.33"):
        acks.append({"warning": "dra-beta", "reason": "DRA and its beta API are turned on in this cluster"})
    if p.fabric == "topologyConfig":
        acks.append({"warning": "driver-fork", "reason": "runs the Fabric Manager fork's build"})
    if p.operator in ("helm", "patch") and p.driver_root == "/run/nvidia/driver":
        acks.append({"warning": "driver-upgrade", "reason": "DRA nodes are drained before GPU driver upgrades"})
    # no mig-mode: the dynamic pool is Hopper, whose MIG mode the kubelet plugin turns on itself (facts dynamicMig)
    if p.operator == "none":
        acks.append({"warning": "device-plugin-off", "reason": "the operator install this team runs has devicePlugin.enabled=false"})
    return acks


def cluster(i: int, nodes: int, workloads: list[dict]) -> dict:
    p = PLATFORMS[i % len(PLATFORMS)]
    need = demand(workloads)
    size = lambda pool, per_node, minimum: max(minimum, math.ceil(need[pool] * HEADROOM / per_node))
    partitioned = p.fabric != "none"  # Fabric Manager partitions mean something only where a fabric mode selects them
    mig_model = "H100-80GB" if p.mig == "dynamic" else "A100-80GB"  # DynamicMIG is a 25.12+ Hopper feature here
    pools = [
        {"name": "h100", "nodes": size("h100", 8, nodes), "gpu": {"model": "H100-80GB", "count": 8},
         **({"nvlink": {"partitions": [2, 4, 8]}} if partitioned else {})},
        {"name": "gb200", "nodes": size("gb200", 4, max(2, nodes // 8)), "gpu": {"model": "GB200-186GB", "count": 4},
         **({"nvlink": {"partitions": [4]}} if partitioned else {})},
    ]
    if p.mig:
        pools.insert(1, {"name": "a100-mig", "nodes": size("a100-mig", 8, max(1, nodes // 4)), "gpu": {"model": mig_model, "count": 8},
                         "mig": {"layout": p.mig}})
    if p.device_plugin_pool:
        pools.append({"name": "l40s-legacy", "nodes": 2, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"})
    driver: dict = {"version": p.driver, "nvidiaDriverRoot": p.driver_root, "fabric": p.fabric}
    if p.fabric == "topologyConfig":
        driver["values"] = {"image": dict(FORK_IMAGE)}
    operator: dict = {"mode": p.operator, **({"version": p.operator_version} if p.operator_version else {})}
    spec = {
        "kubernetesVersion": p.kubernetes,
        "draDriver": driver,
        "gpuOperator": operator,
        "nodePools": pools,
        "gitops": {"repoURL": "https://git.example.com/fleet.git", "path": f"rendered/c{i:02d}", "destination": {"name": f"c{i:02d}"}},
        "acknowledge": _acknowledge(p),
    }
    if p.nim:
        spec["nimOperator"] = {"version": p.nim}
    return {"apiVersion": "gpuc.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": f"c{i:02d}"}, "spec": spec}


def workload(c: int, j: int, p: Platform, rng: random.Random) -> dict:
    kind = rng.choice(["nim", "nim", "exclusive", "shared", "timeslicing", "mps", "mig", "multinode", "fabric"])
    name, ns = f"c{c:02d}-w{j:04d}", f"team-{j % 10}"
    spec: dict = {"clusters": [f"c{c:02d}"], "replicas": rng.randint(1, 3)}
    gpu: dict = {}
    # with FabricManagerPartitioning on, a claim of several GPUs must ask for the partition of exactly those GPUs
    per_claim = p.fabric == "partitionAttributes"
    if kind == "nim" and p.nim:
        parameters, precision = rng.choice(["1B", "8B", "8B", "70B"]), rng.choice(["bf16", "fp8"])
        spec["model"] = {"image": rng.choice(NIM_IMAGES), "parameters": parameters,
                         "precision": precision, "contextLength": 8192, "concurrency": rng.choice([1, 4, 8])}
        spec["secrets"] = {"ngcApiKey": "ngc-api-secret", "imagePull": "ngc-secret"}
        spec["cache"] = {"accessMode": "ReadWriteMany"}  # replicas may land on several nodes
        gpu = {"count": "auto", "require": {"architecture": ["Hopper"]}}
        if per_claim and NIM_GPUS[(parameters, precision)] > 1:
            gpu["fabric"] = {"partitionSize": NIM_GPUS[(parameters, precision)]}
    elif kind == "shared":
        gpu = {"count": 1, "sharing": "Shared"}
    elif kind == "timeslicing":
        gpu = {"count": 1, "sharing": "TimeSlicing", "shareGroup": f"c{c:02d}-ts-{j % 50}", "timeSlicing": {"interval": "Long"}}
    elif kind == "mps" and p.mps:
        gpu = {"count": 1, "sharing": "MPS", "mps": {"activeThreadPercentage": 50}}
    elif kind == "mig" and p.mig:
        gpu = {"mig": {"slices": rng.choice([[{"profile": "1g.10gb"}], [{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]])}}
    elif kind == "multinode":
        gpu = {"count": 4, "multiNode": {"nodes": 2}, "require": {"architecture": ["Blackwell"]},
               **({"fabric": {"partitionSize": 4}} if per_claim else {})}
    elif kind == "fabric" and p.fabric != "none":
        gpu = {"fabric": {"partitionSize": rng.choice([2, 4])}, "require": {"architecture": ["Hopper"]}}
    else:
        count = rng.choice([1, 1, 2, 4, 8])
        gpu = {"count": count, "require": {"architecture": ["Hopper"], "minMemory": "40Gi"}}
        if per_claim and count > 1:
            gpu = {"fabric": {"partitionSize": count}, "require": gpu["require"]}
    spec["gpu"] = gpu
    if "shareGroup" in gpu:
        ns = f"team-ts-{j % 50}"  # a share group lives in one namespace
    return {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def generate(out: Path, clusters: int, workloads: int, nodes: int, seed: int, spread: int = 1) -> None:
    """`spread` 1: each cluster's workloads in files of their own (100 documents per file, like a team's
    folder). `spread` N > 1: files of 50 workloads, each holding workloads of N neighbouring clusters (a team
    that deploys to several clusters keeps them in one file); the workloads are the same either way."""
    rng = random.Random(seed)
    (out / "clusters").mkdir(parents=True, exist_ok=True)
    per_cluster = []
    for c in range(clusters):
        docs = [workload(c, j, PLATFORMS[c % len(PLATFORMS)], rng) for j in range(workloads)]
        doc = cluster(c, nodes, docs)
        (out / "clusters" / f"c{c:02d}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        per_cluster.append(docs)
    if spread > 1:
        _write_spread(out / "workloads", per_cluster, spread)
        return
    for c, docs in enumerate(per_cluster):
        target = out / "workloads" / f"c{c:02d}"
        target.mkdir(parents=True, exist_ok=True)
        for start in range(0, len(docs), 100):
            (target / f"batch-{start // 100:03d}.yaml").write_text(yaml.safe_dump_all(docs[start:start + 100], sort_keys=False))


def _write_spread(target: Path, per_cluster: list[list[dict]], spread: int, per_file: int = 50) -> None:
    """File k holds per_file/spread workloads of each of the clusters k, k+1, ... k+spread-1 (modulo the
    fleet), interleaved: every cluster shares files with its neighbours, and through them with all."""
    target.mkdir(parents=True, exist_ok=True)
    share = per_file // spread
    taken = [0] * len(per_cluster)
    k = 0
    while any(t < len(docs) for t, docs in zip(taken, per_cluster)):
        members = [(k + i) % len(per_cluster) for i in range(spread)]
        batch: list[dict] = []
        for _ in range(share):
            for c in members:
                if taken[c] < len(per_cluster[c]):
                    batch.append(per_cluster[c][taken[c]])
                    taken[c] += 1
        if batch:
            (target / f"team-{k:04d}.yaml").write_text(yaml.safe_dump_all(batch, sort_keys=False))
        k += 1


def _pods(doc: dict) -> int:
    gpu = doc["spec"]["gpu"]
    return doc["spec"]["replicas"] * (gpu["multiNode"]["nodes"] if "multiNode" in gpu else 1)


def plan_workload(j: int, rng: random.Random) -> dict:
    """One workload of the allocator benchmark: mostly small full-GPU pods, with MIG mixes, shared
    claims, NIM sizing and whole-node trainers mixed in, so every search path of the allocator runs."""
    kind = rng.choices(["exclusive", "nim", "mig", "shared", "timeslicing", "node"], weights=[40, 20, 15, 10, 10, 5])[0]
    spec: dict = {"replicas": rng.randint(1, 4)}
    ns = f"team-{j % 20}"
    if kind == "exclusive":
        gpu: dict = {"count": rng.choice([1, 1, 2]), "require": {"architecture": ["Hopper"], "minMemory": "40Gi"}}
    elif kind == "nim":
        spec["model"] = {"image": NIM_IMAGES[0], "parameters": "8B", "precision": rng.choice(["bf16", "fp8"]),
                         "contextLength": 8192, "concurrency": rng.choice([1, 4, 8])}
        spec["secrets"] = {"ngcApiKey": "ngc-api-secret", "imagePull": "ngc-secret"}
        spec["cache"] = {"accessMode": "ReadWriteMany"}  # replicas may land on several nodes
        gpu = {"count": "auto", "require": {"architecture": ["Hopper"]}}
    elif kind == "mig":
        gpu = {"mig": {"slices": rng.choice([[{"profile": "1g.10gb"}], [{"profile": "2g.20gb"}],
                                             [{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]])}}
    elif kind == "shared":
        gpu = {"count": 1, "sharing": "Shared"}
    elif kind == "timeslicing":
        gpu = {"count": 1, "sharing": "TimeSlicing", "shareGroup": f"ts-{j % 40}", "timeSlicing": {"interval": "Short"}}
        ns = f"team-ts-{j % 40}"
    else:
        gpu = {"count": 8, "require": {"productName": "NVIDIA H100 80GB HBM3"}}
    spec["gpu"] = gpu
    return {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": f"w{j:05d}", "namespace": ns}, "spec": spec}


def generate_plan(out: Path, nodes: int, pods: int, seed: int) -> None:
    """One Kubernetes 1.34 cluster of `nodes` 8-GPU nodes (a tenth of them A100s in MIG mode) and
    workloads adding up to exactly `pods` pods."""
    rng = random.Random(seed)
    docs: list[dict] = []
    total = 0
    while total < pods:
        doc = plan_workload(len(docs), rng)
        doc["spec"]["replicas"] = min(doc["spec"]["replicas"], pods - total)
        docs.append(doc)
        total += _pods(doc)
    mig_nodes = max(1, nodes // 10)
    pools = [{"name": "h100", "nodes": nodes - mig_nodes, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": "a100-mig", "nodes": mig_nodes, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}}]
    spec = {"kubernetesVersion": "1.34",
            "draDriver": {"version": "25.12.0", "nvidiaDriverRoot": "/run/nvidia/driver"},
            "gpuOperator": {"mode": "helm", "version": "v25.10.1"}, "nimOperator": {"version": "3.1.2"},
            "nodePools": pools,
            "gitops": {"repoURL": "https://git.example.com/fleet.git", "path": "rendered/big", "destination": {"name": "big"}},
            "acknowledge": [{"warning": "unchecked-crds", "reason": "benchmark fleet: no operator CRDs"},
                            {"warning": "driver-upgrade", "reason": "DRA nodes are drained before GPU driver upgrades"}]}
    (out / "clusters").mkdir(parents=True, exist_ok=True)
    (out / "clusters" / "big.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "gpuc.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": "big"}, "spec": spec}, sort_keys=False))
    (out / "workloads").mkdir(parents=True, exist_ok=True)
    for start in range(0, len(docs), 500):
        (out / "workloads" / f"batch-{start // 500:03d}.yaml").write_text(yaml.safe_dump_all(docs[start:start + 500], sort_keys=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--workloads", type=int, default=1000, help="workloads per cluster")
    parser.add_argument("--nodes", type=int, default=8, help="at least this many nodes in each cluster's main H100 pool "
                                                             "(pools grow to fit the generated workloads)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spread", type=int, default=1, help="clusters whose workloads share each workload file (1: a folder per cluster)")
    parser.add_argument("--plan-nodes", type=int, help="write one cluster of this many nodes for the allocator benchmark")
    parser.add_argument("--plan-pods", type=int, default=20000, help="with --plan-nodes: pods in all")
    args = parser.parse_args()
    if args.plan_nodes:
        generate_plan(args.out, args.plan_nodes, args.plan_pods, args.seed)
    else:
        generate(args.out, args.clusters, args.workloads, args.nodes, args.seed, args.spread)


if __name__ == "__main__":
    main()
