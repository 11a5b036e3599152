"""Re-render soundness: a changed fleet rendered over the previous tree is byte for byte a fresh render of it, with
the incremental cache and without, and a render that refuses the change leaves the tree as it was.

The base fleet uses every feature gpuc has (test_the_base_fleet_uses_every_feature keeps it so as the intent
format grows); hypothesis draws changes of every kind over it. The default is a fixed, derandomized set that CI
runs every time; GPUC_RERENDER_EXAMPLES=25 draws that many examples per kind of change, at random.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from compiler.emit.reference import _fields
from compiler.emit.schema import input_schema
from compiler.facts.catalog import gpu_models

from conftest import gpuc

API = "gpuc.dev/v1alpha1"
GKE_LABEL = {"gke-no-default-nvidia-gpu-device-plugin": "true"}
NIM_SECRETS = {"ngcApiKey": "ngc-api-secret", "imagePull": "ngc-secret"}
SRIOV = "device.attributes['sriovnetwork.example.com'].sriovType == 'vf'"
DEEP = int(os.environ.get("GPUC_RERENDER_EXAMPLES", "0"))


def cluster(name: str, kubernetes: str, driver: dict, pools: list[dict], acks: list[tuple[str, list[str] | None]], **spec: Any) -> dict:
    body = {"kubernetesVersion": kubernetes, "draDriver": driver, "gpuOperator": {"mode": "helm", "version": "v26.7.0"},
            "nodePools": pools,
            "gitops": {"repoURL": "https://git.example.com/fleet.git", "path": f"rendered/{name}", "destination": {"name": name}},
            **spec}
    body["acknowledge"] = [{"warning": w, **({"kinds": k} if k else {}), "reason": "the re-render property test's fleet"} for w, k in acks]
    return {"apiVersion": API, "kind": "Cluster", "metadata": {"name": name}, "spec": body}


def workload(name: str, namespace: str, clusters: list[str], **spec: Any) -> dict:
    return {"apiVersion": API, "kind": "GpuWorkload", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusters": clusters, **spec}}


def nim(image: str = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3", parameters: str = "8B", **extra: Any) -> dict:
    return {"image": image, "parameters": parameters, **extra}


# One cluster per platform line (Kubernetes 1.32-1.37; DRA driver 25.3, 25.8, 25.12, 0.4, 0.5; GPU Operator modes
# helm, patch, gpuCluster, none; every provider), each with the features its platform offers.
CLUSTERS = [
    cluster("east", "1.34", {"version": "25.12.0", "nvidiaDriverRoot": "/run/nvidia/driver", "fabric": "none",
                             "values": {"logVerbosity": "2"}},
            provider="gke", nimOperator={"version": "3.1.2"},
            pools=[{"name": "h100", "nodes": 3, "gpu": {"model": "H100-80GB", "count": 8}, "allocation": "dra", "labels": GKE_LABEL,
                    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                    "nodeNames": ["east-h100-0", "east-h100-1", "east-h100-2"], "driverVersion": "570.124.06"},
                   {"name": "a100-mig", "nodes": 2, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"},
                    "labels": GKE_LABEL},
                   {"name": "h100-mig", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8},
                    "mig": {"layout": [{"profile": "3g.40gb", "count": 2}]}, "labels": GKE_LABEL},
                   {"name": "gb200", "nodes": 4, "gpu": {"model": "GB200-186GB", "count": 4}, "labels": GKE_LABEL}],
            charts={"mirror": {"repository": "oci://harbor.internal/helm"}, "releases": {"gpu-operator": {"directory": "charts"}}},
            budgets=[{"namespace": "research", "devices": {"gpu.nvidia.com": 40, "mig.nvidia.com": 24}, "claims": 30}],
            acks=[("unchecked-crds", ["NIMCache", "NIMService", "ComputeDomain"]), ("driver-upgrade", None)]),
    cluster("lab", "1.36", {"version": "0.5.1", "namespace": "dra-driver", "nvidiaDriverRoot": "/run/nvidia/driver",
                            "fabric": "partitionAttributes"},
            provider="eks", nimOperator={"version": "3.1.2", "namespace": "nim"},
            pools=[{"name": "h200", "nodes": 2, "gpu": {"model": "H200-141GB", "count": 8}, "nvlink": {"partitions": [2, 4, 8]},
                    "host": {"addressingMode": "HMM", "numaNodes": 2}, "extendedResource": True},
                   {"name": "h100-dynmig", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}],
            charts={"mirror": {"directory": "charts"}, "releases": {"nim-operator": {"repository": "https://charts.internal/nvidia"}}},
            acks=[("mig-mode", None), ("driver-upgrade", None), ("unchecked-crds", None)]),
    cluster("vdi", "1.35", {"version": "0.4.1", "nvidiaDriverRoot": "/run/nvidia/driver"}, provider="aks",
            pools=[{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8},
                    "nics": {"driver": "sriovnetwork.example.com", "deviceClass": "vf.sriovnetwork.example.com", "count": 8,
                             "attributes": {"sriovType": "vf"}}},
                   {"name": "vm", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 4}, "passthrough": True}],
            acks=[("driver-upgrade", None)]),
    cluster("staging", "1.34", {"version": "25.8.1", "fabric": "topologyConfig",
                                "values": {"image": {"repository": "registry.example.com/dra-fm", "tag": "v25.8.1-fm"}}},
            gpuOperator={"mode": "patch"},
            pools=[{"name": "h100-nvswitch", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "nvlink": {"partitions": [2, 4, 8]}},
                   {"name": "l40s-legacy", "nodes": 3, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"}],
            acks=[("driver-fork", None), ("unchecked-crds", ["ClusterPolicy"])]),
    cluster("west", "1.37", {"version": "0.5.1"}, gpuOperator={"mode": "gpuCluster", "version": "v26.7.0"},
            nimOperator={"version": "3.1.2"}, pools=[{"name": "h200", "nodes": 2, "gpu": {"model": "H200-141GB", "count": 8}}],
            acks=[("unchecked-crds", None)]),
    cluster("legacy", "1.33", {"version": "25.3.2", "nvidiaDriverRoot": "/run/nvidia/driver"},
            gpuOperator={"mode": "helm", "version": "v25.3.4", "namespace": "nvidia-gpu-operator"}, nimOperator={"version": "3.0.2"},
            pools=[{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}}],
            gitops={"repoURL": "https://git.example.com/fleet.git", "targetRevision": "release-1", "path": "rendered/legacy",
                    "destination": {"server": "https://legacy.k8s.example.com:6443"}, "project": "gpu", "namespace": "gitops"},
            acks=[("dra-beta", None), ("helm-capabilities", None), ("driver-upgrade", None), ("unchecked-crds", None)]),
    cluster("edge", "1.32", {"version": "25.12.0"}, gpuOperator={"mode": "none"},
            pools=[{"name": "l4", "nodes": 2, "gpu": {"model": "L4-24GB", "count": 4}}],
            acks=[("dra-beta", None), ("device-plugin-off", None)]),
]


def _moving() -> dict:
    """A cluster in the first step of a staged change (gpuc upgrade): what spec.transition holds back must re-render as
    soundly as the rest; and a budget on a namespace no workload uses yet, acknowledged."""
    doc = cluster("moving", "1.36", {"version": "0.5.1"}, acks=[("unchecked-crds", None)],
                  pools=[{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
                         {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "allocation": "devicePlugin"}],
                  budgets=[{"namespace": "idle", "claims": 2}],
                  transition={"step": 1, "steps": 3, "change": "the re-render property test's transition",
                              "draDriver": {"installed": False}, "gpuOperator": {"customResource": "none"},
                              "nodePools": {"a100": {"allocation": "none"}}})
    doc["spec"]["acknowledge"].append({"warning": "unused-budget", "namespaces": ["idle"], "reason": "the team starts next month"})
    return doc


CLUSTERS.append(_moving())
CLUSTER_NAMES = [c["metadata"]["name"] for c in CLUSTERS]

CLASSES = [
    {"apiVersion": API, "kind": "GpuDeviceClass", "metadata": {"name": "hopper-80g.gpuc.dev"},
     "spec": {"clusters": ["east", "lab", "vdi", "staging", "west"],
              "require": {"architecture": ["Hopper"], "minMemory": "79Gi", "minDriverVersion": "550.0"}}},
    {"apiVersion": API, "kind": "GpuDeviceClass", "metadata": {"name": "h100-exact.gpuc.dev"},
     "spec": {"clusters": ["east"], "require": {"productName": "NVIDIA H100 80GB HBM3", "minComputeCapability": "9.0",
                                                "cel": ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"]}}},
    {"apiVersion": API, "kind": "GpuDeviceClass", "metadata": {"name": "any-gpu.gpuc.dev"}, "spec": {"require": {"minMemory": "16Gi"}}},
    {"apiVersion": API, "kind": "GpuDeviceClass", "metadata": {"name": "half-h100.gpuc.dev"},
     "spec": {"clusters": ["east"], "mig": {"slices": [{"profile": "3g.40gb"}]}}},
]

SMALL_NIM = "nvcr.io/nim/meta/llama-3.2-1b-instruct:1.12.0"
BIG_NIM = "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.3"
WORKLOADS = {
    "east": [
        workload("llama-8b", "nim-service", ["east"], model=nim(engine="tensorrt_llm", concurrency=8), replicas=2,
                 gpu={"count": "auto", "class": "hopper-80g.gpuc.dev"}, cache={"storageClass": "fast-rwx", "accessMode": "ReadWriteMany"},
                 expose={"port": 8080, "type": "NodePort"}, secrets=NIM_SECRETS),
        workload("guard", "nim-service", ["east"], model=nim(SMALL_NIM, "1B", contextLength=4096),
                 gpu={"sharing": "TimeSlicing", "shareGroup": "small", "timeSlicing": {"interval": "Long"}}, secrets=NIM_SECRETS,
                 cache={"accessMode": "ReadWriteOnce"}),
        workload("router", "nim-service", ["east"], model=nim("nvcr.io/nim/qwen/qwen-2.5-1.5b-instruct:1.8.0", "1.5B", contextLength=4096),
                 gpu={"sharing": "TimeSlicing", "shareGroup": "small", "timeSlicing": {"interval": "Long"}}, secrets=NIM_SECRETS),
        workload("mig-nim", "nim-service", ["east"], model=nim(SMALL_NIM, "1B", requests=["mig-3g-40gb"]),
                 gpu={"class": "half-h100.gpuc.dev", "mig": {"slices": [{"profile": "3g.40gb"}]}}, secrets=NIM_SECRETS),
        workload("embeddings", "research", ["east", "staging"], gpu={"count": 1, "sharing": "MPS",
                 "mps": {"activeThreadPercentage": 50, "pinnedMemoryLimit": "10Gi"}, "require": {"minComputeCapability": "8.0"}}),
        workload("notebooks", "research", ["east"], replicas=2,
                 gpu={"mig": {"sameGpu": True, "slices": [{"profile": "3g.40gb"}, {"profile": "1g.10gb", "count": 2}]}}),
        workload("trainer", "research", ["east"], gpu={"count": 4, "multiNode": {"nodes": 2}, "require": {"architecture": ["Blackwell"]}}),
        workload("dcgm", "gpu-monitoring", ["east"], gpu={"adminAccess": True, "require": {
            "productName": "NVIDIA H100 80GB HBM3", "cel": ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"]}}),
        workload("solo", "team", ["east"], gpu={"count": 2, "sharing": "Exclusive", "class": "h100-exact.gpuc.dev", "require": {"architecture": ["Hopper"], "minMemory": "40Gi",
                                                                                                "minDriverVersion": "550.0"}}),
    ],
    "lab": [
        workload("allreduce-8way", "research", ["lab"], gpu={"fabric": {"partitionSize": 8}}),
        # on west: lab's DynamicMIG gate partitions every Hopper GPU there, and fractional memory needs whole GPUs
        workload("frac", "team", ["west"], replicas=4, gpu={"sharing": "Fractional", "memory": "16Gi", "require": {"architecture": ["Hopper"]}}),
        workload("flex", "team", ["lab"], gpu={"alternatives": [
            {"count": 1, "require": {"productName": "NVIDIA H200", "architecture": ["Hopper"], "minMemory": "100Gi",
                                     "minComputeCapability": "9.0", "minDriverVersion": "550.0",
                                     "cel": ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"]}},
            {"count": 2, "class": "hopper-80g.gpuc.dev"}]}),
        workload("mig-on-demand", "research", ["lab"], replicas=3, gpu={"mig": {"slices": [{"profile": "2g.20gb"}]}}),
        workload("nim-70b", "nim-service", ["lab"], model=nim(BIG_NIM, "70B", precision="fp8"),
                 gpu={"count": "auto", "fabric": {"partitionSize": 2}}, cache={"size": "300Gi", "accessMode": "ReadOnlyMany"},
                 secrets=NIM_SECRETS),
    ],
    "vdi": [
        workload("windows-vdi", "vms", ["vdi"], gpu={"count": 2, "passthrough": True}),
        workload("allreduce", "research", ["vdi"], replicas=2, gpu={"count": 4, "require": {"productName": "NVIDIA H100 80GB HBM3"},
                                                                      "nics": {"count": 1, "cel": [SRIOV]}}),
        workload("nccl", "research", ["vdi"], gpu={"count": 2, "nics": 1, "require": {"productName": "NVIDIA H100 80GB HBM3"}}),
    ],
    "staging": [
        workload("nccl-allreduce", "research", ["staging"], gpu={"fabric": {
            "partitionSize": 4, "strategy": "Auto", "virtualizationModel": "BareMetal", "minBandwidth": 600, "maxLatency": 0.1}}),
        workload("pinned", "research", ["staging"], gpu={"count": 2, "fabric": {"strategy": "Manual", "partitionIDs": ["3"]},
                                                         "require": {"productName": "NVIDIA H100 80GB HBM3"}}),
        workload("no-fabric", "research", ["staging"], gpu={"count": 1, "fabric": {"strategy": "Disabled"},
                                                            "require": {"productName": "NVIDIA H100 80GB HBM3"}}),
        workload("dev-sandbox", "research", ["staging"], replicas=3, gpu={"count": 1, "sharing": "Shared"}),
    ],
    "west": [
        workload("llama-70b-fp8", "nim-service", ["west"], model=nim(BIG_NIM, "70B", precision="fp8", contextLength=16384, concurrency=16),
                 replicas=2, gpu={"count": "auto"}, cache={"storageClass": "fast-rwx", "accessMode": "ReadWriteMany"}, secrets=NIM_SECRETS),
    ],
    "legacy": [
        workload("chat", "nim-service", ["legacy"], model=nim(), gpu={"count": "auto"}, secrets=NIM_SECRETS,
                 cache={"accessMode": "ReadWriteOncePod"}),
        workload("batch", "research", ["legacy"], replicas=3, gpu={"count": 2}),
    ],
    "edge": [
        workload("infer", "edge", ["edge"], replicas=4, gpu={"count": 1, "sharing": "TimeSlicing", "timeSlicing": {"interval": "Short"}}),
    ],
    "everywhere": [  # no spec.clusters: on every cluster of the fleet (off the passthrough pools' Ampere GPUs)
        {"apiVersion": API, "kind": "GpuWorkload", "metadata": {"name": "probe", "namespace": "ops"},
         "spec": {"gpu": {"count": 1, "require": {"architecture": ["Hopper", "Ada Lovelace", "Blackwell"]}}}},
    ],
}


# ------------------------------------------------------------------------------------------------- the fleet

@dataclass
class Fleet:
    """A fleet as documents: clusters by name, and workloads/<rel> -> its GpuWorkload and GpuDeviceClass documents."""

    clusters: dict[str, dict]
    files: dict[str, list[dict]]
    held: list[str] = field(default_factory=list)  # base clusters left out, for changes that add a cluster
    made: int = 0  # names handed out to new workloads and pools
    headers: dict[str, str] = field(default_factory=dict)  # file (relative to the fleet) -> comment lines above its documents

    def fresh_name(self, stem: str) -> str:
        self.made += 1
        return f"{stem}-{self.made}"

    def workloads(self) -> list[tuple[str, int, dict]]:
        return [(rel, i, d) for rel, docs in sorted(self.files.items()) for i, d in enumerate(docs) if d["kind"] == "GpuWorkload"]

    def pools(self) -> list[tuple[str, dict]]:
        return [(name, p) for name, c in sorted(self.clusters.items()) for p in c["spec"]["nodePools"]]

    def texts(self) -> dict[str, str]:
        out = {f"clusters/{name}.yaml": yaml.safe_dump(doc, sort_keys=False) for name, doc in self.clusters.items()}
        out.update({f"workloads/{rel}": yaml.safe_dump_all(docs, sort_keys=False) for rel, docs in self.files.items() if docs})
        return {rel: self.headers.get(rel, "") + text for rel, text in out.items()}

    def write(self, root: Path) -> None:
        """Write the files whose text changed and delete the ones gone, as a commit would."""
        texts = self.texts()
        for path in [p for p in root.rglob("*.yaml") if p.relative_to(root).as_posix() not in texts]:
            path.unlink()
        for rel, text in texts.items():
            path = root / rel
            if not path.is_file() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)


def _scoped(doc: dict, names: set[str]) -> dict | None:
    """The document with spec.clusters narrowed to `names`; None when none of its clusters is left."""
    doc = copy.deepcopy(doc)
    if "clusters" in doc["spec"]:
        doc["spec"]["clusters"] = [c for c in doc["spec"]["clusters"] if c in names]
        if not doc["spec"]["clusters"]:
            return None
    return doc


def base_fleet(held: list[str]) -> Fleet:
    names = {n for n in CLUSTER_NAMES if n not in held}
    files: dict[str, list[dict]] = {}
    classes = [d for d in (_scoped(c, names) for c in CLASSES) if d]
    if classes:
        files["platform/classes.yaml"] = classes
    for name in sorted(WORKLOADS):
        if name in names or name not in CLUSTER_NAMES:
            files[f"{name}/workloads.yaml"] = [d for d in (_scoped(w, names) for w in WORKLOADS[name]) if d]
    return Fleet({c["metadata"]["name"]: copy.deepcopy(c) for c in CLUSTERS if c["metadata"]["name"] in names}, files, list(held))


# ------------------------------------------------------------------------------------------------- changes

Draw = Callable[[st.SearchStrategy], Any]
NAMESPACES = ["research", "team", "nim-service", "other-team"]
RELEASES = ["nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu", "gpu-operator", "nim-operator"]


def pick(draw: Draw, options: list) -> Any:
    return draw(st.sampled_from(options))


NEW_WORKLOADS: dict[str, dict] = {
    "exclusive": {"gpu": {"count": 1}},
    "whole-node": {"replicas": 2, "gpu": {"count": 8, "require": {"architecture": ["Hopper"]}}},
    "shared": {"replicas": 2, "gpu": {"count": 1, "sharing": "Shared"}},
    "time-sliced": {"gpu": {"count": 1, "sharing": "TimeSlicing", "shareGroup": "small", "timeSlicing": {"interval": "Medium"}}},
    "mps": {"gpu": {"count": 1, "sharing": "MPS", "mps": {"activeThreadPercentage": 25}}},
    "fractional": {"replicas": 2, "gpu": {"sharing": "Fractional", "memory": "8Gi"}},
    "mig": {"gpu": {"mig": {"slices": [{"profile": "1g.10gb"}]}}},
    "compute-domain": {"gpu": {"count": 4, "multiNode": {"nodes": 2}, "require": {"architecture": ["Blackwell"]}}},
    "nim": {"model": nim(SMALL_NIM, "1B"), "gpu": {"count": "auto"}, "secrets": NIM_SECRETS, "cache": {"accessMode": "ReadWriteMany"}},
    "fabric": {"gpu": {"fabric": {"partitionSize": 2}, "require": {"architecture": ["Hopper"]}}},
    "passthrough": {"gpu": {"count": 1, "passthrough": True}},
    "admin": {"gpu": {"adminAccess": True}},
    "alternatives": {"gpu": {"alternatives": [{"count": 2, "require": {"architecture": ["Blackwell"]}}, {"count": 1}]}},
}


def add_workload(draw: Draw, fleet: Fleet) -> str:
    kind, target = pick(draw, sorted(NEW_WORKLOADS)), pick(draw, sorted(fleet.clusters))
    namespace = "gpu-monitoring" if kind == "admin" else pick(draw, NAMESPACES)
    doc = workload(fleet.fresh_name(kind), namespace, [target], **copy.deepcopy(NEW_WORKLOADS[kind]))
    rel = pick(draw, sorted(fleet.files) + [f"{target}/more.yaml"])
    docs = fleet.files.setdefault(rel, [])
    docs.insert(draw(st.integers(0, len(docs))), doc)  # before others too: their documents move in the file
    return f"add {kind} workload {doc['metadata']['name']} to {target} in {rel}"


def change_workload(draw: Draw, fleet: Fleet) -> str:
    rel, _, doc = pick(draw, fleet.workloads())
    spec, gpu = doc["spec"], doc["spec"].setdefault("gpu", {})
    what = pick(draw, ["replicas", "namespace", "rename", "count", "sharing", "retarget", "require"])
    if what == "replicas":
        spec["replicas"] = draw(st.integers(0, 4))
    elif what == "namespace":
        doc["metadata"]["namespace"] = pick(draw, NAMESPACES)
    elif what == "rename":
        doc["metadata"]["name"] += "-v2"
    elif what == "count":
        gpu["count"] = pick(draw, [1, 2, 4, "auto"])
    elif what == "sharing":
        gpu["sharing"] = pick(draw, ["Exclusive", "Shared", "TimeSlicing", "MPS"])
    elif what == "retarget":
        spec["clusters"] = [pick(draw, sorted(fleet.clusters))]
    else:
        gpu["require"] = {"architecture": [pick(draw, ["Hopper", "Ampere", "Blackwell"])]}
    return f"change {what} of workload {doc['metadata']['name']} in {rel}: {spec}"


def remove_workload(draw: Draw, fleet: Fleet) -> str:
    rel, i, doc = pick(draw, fleet.workloads())
    del fleet.files[rel][i]
    if not fleet.files[rel]:
        del fleet.files[rel]
    return f"remove workload {doc['metadata']['name']} from {rel}"


def change_nim(draw: Draw, fleet: Fleet) -> str:
    """A NIM's model, cache or Service: its NIMCache, NIMService and claim change together."""
    nims = [(rel, i, d) for rel, i, d in fleet.workloads() if "model" in d["spec"]]
    if not nims:
        return add_workload_of(draw, fleet, "nim")
    rel, i, doc = pick(draw, nims)
    spec = doc["spec"]
    what = pick(draw, ["precision", "concurrency", "image", "cache", "expose", "remove"])
    if what == "precision":
        spec["model"]["precision"] = pick(draw, ["bf16", "fp8", "fp16"])
    elif what == "concurrency":
        spec["model"]["concurrency"] = pick(draw, [1, 4, 32])
    elif what == "image":
        spec["model"]["image"] = spec["model"]["image"].rsplit(":", 1)[0] + ":1.9.0"
    elif what == "cache":
        spec["cache"] = pick(draw, [{}, {"size": "500Gi"}, {"accessMode": "ReadWriteMany", "storageClass": "other"}])
    elif what == "expose":
        spec["expose"] = {"port": pick(draw, [8000, 9000]), "type": pick(draw, ["ClusterIP", "LoadBalancer"])}
    else:
        del fleet.files[rel][i]
    return f"change {what} of NIM {doc['metadata']['name']}"


def add_workload_of(draw: Draw, fleet: Fleet, kind: str) -> str:
    target = pick(draw, sorted(fleet.clusters))
    doc = workload(fleet.fresh_name(kind), "research", [target], **copy.deepcopy(NEW_WORKLOADS[kind]))
    fleet.files.setdefault(f"{target}/more.yaml", []).append(doc)
    return f"add {kind} workload {doc['metadata']['name']} to {target}"


def change_compute_domain(draw: Draw, fleet: Fleet) -> str:
    """A multi-node workload: its ComputeDomain and the claims of its pods."""
    spanning = [(rel, i, d) for rel, i, d in fleet.workloads() if "multiNode" in d["spec"].get("gpu", {})]
    if not spanning:
        return add_workload_of(draw, fleet, "compute-domain")
    rel, i, doc = pick(draw, spanning)
    gpu = doc["spec"]["gpu"]
    what = pick(draw, ["nodes", "count", "replicas", "single-node", "remove"])
    if what == "nodes":
        gpu["multiNode"]["nodes"] = draw(st.integers(2, 4))
    elif what == "count":
        gpu["count"] = pick(draw, [1, 2, 4])
    elif what == "replicas":
        doc["spec"]["replicas"] = draw(st.integers(0, 2))
    elif what == "single-node":
        del gpu["multiNode"]
    else:
        del fleet.files[rel][i]
    return f"change {what} of ComputeDomain workload {doc['metadata']['name']}"


NEW_POOLS = {
    "h100": {"nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
    "l40s-plugin": {"nodes": 2, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"},
    "a100-mig": {"nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-1g.10gb"}},
    "a30-vm": {"nodes": 1, "gpu": {"model": "A30-24GB", "count": 2}, "passthrough": True},
    "gb200": {"nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}},
}


def add_pool(draw: Draw, fleet: Fleet) -> str:
    kind, target = pick(draw, sorted(NEW_POOLS)), pick(draw, sorted(fleet.clusters))
    pool = {"name": fleet.fresh_name(kind), **copy.deepcopy(NEW_POOLS[kind])}
    fleet.clusters[target]["spec"]["nodePools"].append(pool)
    return f"add pool {pool['name']} to {target}"


def change_pool(draw: Draw, fleet: Fleet) -> str:
    name, pool = pick(draw, fleet.pools())
    what = pick(draw, ["nodes", "count", "labels", "taints", "nodeNames", "allocation", "extendedResource"])
    if what == "nodes":
        pool["nodes"] = draw(st.integers(1, 5))
        pool.pop("nodeNames", None)
    elif what == "count":
        pool["gpu"]["count"] = pick(draw, [2, 4, 8])
    elif what == "labels":
        pool["labels"] = {**pool.get("labels", {}), "team": pick(draw, ["ml", "infra"])}
    elif what == "taints":
        pool["taints"] = [] if pool.get("taints") else [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]
    elif what == "nodeNames":
        pool["nodeNames"] = [f"{name}-{pool['name']}-{i}" for i in range(pool["nodes"])] if "nodeNames" not in pool else pool["nodeNames"][::-1]
    elif what == "allocation":
        pool["allocation"] = "dra" if pool.get("allocation") == "devicePlugin" else "devicePlugin"
    else:
        pool["extendedResource"] = not pool.get("extendedResource", False)
    return f"change {what} of pool {pool['name']} of {name}"


def remove_pool(draw: Draw, fleet: Fleet) -> str:
    """A pool of a cluster that has others; first the ones no base workload needs (device-plugin pools, pools a
    change added), then any (its workloads then fit elsewhere, or the render refuses)."""
    candidates = sorted(((n, p) for n, p in fleet.pools() if len(fleet.clusters[n]["spec"]["nodePools"]) > 1),
                        key=lambda np: not (np[1].get("allocation") == "devicePlugin" or re.search(r"-\d+$", np[1]["name"])))
    if not candidates:
        return "no cluster with a pool to spare"
    name, pool = pick(draw, candidates)
    fleet.clusters[name]["spec"]["nodePools"].remove(pool)
    return f"remove pool {pool['name']} of {name}"


def change_mig_layout(draw: Draw, fleet: Fleet) -> str:
    capable = [(n, p) for n, p in fleet.pools() if gpu_models()[p["gpu"]["model"]].mig]
    partitioned = [(n, p) for n, p in capable if "mig" in p]  # mostly: a new layout on a pool in MIG mode already
    name, pool = pick(draw, partitioned if partitioned and draw(st.integers(0, 3)) < 3 else capable)
    profiles = sorted(gpu_models()[pool["gpu"]["model"]].mig.profiles)
    layout = pick(draw, ["all-balanced", "dynamic", "none", "all-profile", "list"])
    if layout == "none":
        pool.pop("mig", None)
    elif layout == "all-profile":
        pool["mig"] = {"layout": f"all-{pick(draw, profiles)}"}
    elif layout == "list":
        pool["mig"] = {"layout": [{"profile": pick(draw, profiles), "count": draw(st.integers(1, 2))}]}
    else:
        pool["mig"] = {"layout": layout}
    return f"MIG layout of pool {pool['name']} of {name}: {pool.get('mig')}"


def change_passthrough(draw: Draw, fleet: Fleet) -> str:
    """A pool whose GPUs go to VMs: its vfio devices, and the VMs' claims."""
    what = pick(draw, ["add", "end", "toggle"])
    if what == "add":  # mostly on a cluster whose driver publishes vfio devices (0.4+)
        vfio = sorted(n for n, c in fleet.clusters.items() if c["spec"]["draDriver"]["version"].startswith("0."))
        target = pick(draw, vfio if vfio and draw(st.integers(0, 3)) < 3 else sorted(fleet.clusters))
        pool = {"name": fleet.fresh_name("vm"), **copy.deepcopy(NEW_POOLS["a30-vm"])}
        fleet.clusters[target]["spec"]["nodePools"].append(pool)
        fleet.files.setdefault(f"{target}/more.yaml", []).append(
            workload(fleet.fresh_name("vm"), "vms", [target], gpu={"count": 1, "passthrough": True}))
        return f"add passthrough pool {pool['name']} and a VM to {target}"
    candidates = fleet.pools() if what == "toggle" else [(n, p) for n, p in fleet.pools() if p.get("passthrough")]
    if not candidates:
        return "no passthrough pool to end"
    name, pool = pick(draw, candidates)
    pool["passthrough"] = not pool.get("passthrough", False)
    if what == "end":  # and the VMs that used it
        for docs in fleet.files.values():
            docs[:] = [d for d in docs if not (d["spec"].get("gpu", {}).get("passthrough") and name in d["spec"].get("clusters", [name]))]
    return f"{what} passthrough of pool {pool['name']} of {name}: {pool['passthrough']}"


def add_cluster(draw: Draw, fleet: Fleet) -> str:
    """A base cluster the fleet left out, with its workloads; or a copy of one of the fleet's under a new name."""
    if fleet.held and draw(st.booleans()):
        name = pick(draw, sorted(fleet.held))
        fleet.held.remove(name)
        fleet.clusters[name] = copy.deepcopy(next(c for c in CLUSTERS if c["metadata"]["name"] == name))
        names = set(fleet.clusters)
        fleet.files[f"{name}/workloads.yaml"] = [d for d in (_scoped(w, names) for w in WORKLOADS[name]) if d]
        return f"add base cluster {name}"
    source = pick(draw, sorted(fleet.clusters))
    doc = copy.deepcopy(fleet.clusters[source])
    name = f"{source}-copy"
    doc["metadata"]["name"] = name
    doc["spec"]["gitops"].update(path=f"rendered/{name}", destination={"name": name})
    fleet.clusters[name] = doc
    return f"add cluster {name}, a copy of {source}"


def remove_cluster(draw: Draw, fleet: Fleet) -> str:
    name = pick(draw, sorted(fleet.clusters))
    if len(fleet.clusters) == 1:
        return "keep the last cluster"
    del fleet.clusters[name]
    for rel in list(fleet.files):
        docs = [d for d in (_scoped(d, set(fleet.clusters)) for d in fleet.files[rel]) if d]
        if docs:
            fleet.files[rel] = docs
        else:
            del fleet.files[rel]
    return f"remove cluster {name} and its workloads"


def change_budget(draw: Draw, fleet: Fleet) -> str:
    name = pick(draw, sorted(fleet.clusters))
    budgets = fleet.clusters[name]["spec"].setdefault("budgets", [])
    what = pick(draw, ["add", "devices", "claims", "remove"] if budgets else ["add"])
    if what == "add":
        budgets.append({"namespace": pick(draw, NAMESPACES), "devices": {"gpu.nvidia.com": draw(st.integers(0, 40))}})
    elif what == "devices":
        budgets[0]["devices"] = {"gpu.nvidia.com": draw(st.integers(0, 40)), "mig.nvidia.com": draw(st.integers(0, 30))}
    elif what == "claims":
        budgets[0]["claims"] = draw(st.integers(0, 40))
    else:
        budgets.pop(0)
    return f"budgets of {name}: {budgets}"


def change_provider(draw: Draw, fleet: Fleet) -> str:
    name = pick(draw, sorted(fleet.clusters))
    provider = pick(draw, [None, "gke", "eks", "aks"])
    spec = fleet.clusters[name]["spec"]
    if provider is None:
        spec.pop("provider", None)
    else:
        spec["provider"] = provider
    if provider == "gke" and draw(st.booleans()):
        for pool in spec["nodePools"]:
            pool["labels"] = {**pool.get("labels", {}), **GKE_LABEL}
    return f"provider of {name}: {provider}"


def change_charts(draw: Draw, fleet: Fleet) -> str:
    name = pick(draw, sorted(fleet.clusters))
    spec = fleet.clusters[name]["spec"]
    source = pick(draw, [{"repository": "oci://mirror.internal/helm"}, {"repository": "https://charts.internal/nvidia"}, {"directory": "vendor/charts"}])
    what = pick(draw, ["mirror", "release", "remove"])
    if what == "mirror":
        spec.setdefault("charts", {})["mirror"] = source
    elif what == "release":
        spec.setdefault("charts", {}).setdefault("releases", {})[pick(draw, RELEASES)] = source
    else:
        spec.pop("charts", None)
    return f"chart sources of {name}: {spec.get('charts')}"


PLATFORMS = [("1.34", "25.12.0"), ("1.34", "25.8.1"), ("1.34", "0.4.1"), ("1.35", "0.5.1"), ("1.36", "0.5.0"), ("1.37", "0.5.1"),
             ("1.33", "25.12.0"), ("1.34", "25.3.2")]


def change_platform(draw: Draw, fleet: Fleet) -> str:
    """Kubernetes minor, DRA driver line and GPU Operator mode: release names, API versions and chart values move."""
    name = pick(draw, sorted(fleet.clusters))
    spec = fleet.clusters[name]["spec"]
    what = pick(draw, ["platform", "operator", "namespace"])
    if what == "platform":
        spec["kubernetesVersion"], spec["draDriver"]["version"] = pick(draw, PLATFORMS)
    elif what == "operator":
        spec["gpuOperator"] = pick(draw, [{"mode": "helm", "version": "v26.7.0"}, {"mode": "patch"}, {"mode": "none"},
                                          {"mode": "gpuCluster", "version": "v26.7.0"}])
    else:
        spec["draDriver"]["namespace"] = pick(draw, ["gpu-dra", "nvidia-dra-driver-gpu"])
    return f"{what} of {name}: {spec['kubernetesVersion']} {spec['draDriver']} {spec['gpuOperator']}"


def change_class(draw: Draw, fleet: Fleet) -> str:
    classes = [(rel, i, d) for rel, docs in sorted(fleet.files.items()) for i, d in enumerate(docs) if d["kind"] == "GpuDeviceClass"]
    if not classes:
        return "no device class to change"
    rel, i, doc = pick(draw, classes)
    what = pick(draw, ["memory", "clusters", "remove"])
    if what == "memory" and "require" in doc["spec"]:
        doc["spec"]["require"]["minMemory"] = pick(draw, ["40Gi", "80Gi"])
    elif what == "clusters":
        doc["spec"]["clusters"] = sorted(fleet.clusters)
    else:  # and the workloads that named it ask for plain GPUs
        del fleet.files[rel][i]
        for _, _, w in fleet.workloads():
            gpu = w["spec"].get("gpu", {})
            if gpu.get("class") == doc["metadata"]["name"]:
                del gpu["class"]
                gpu.pop("mig", None)
            for alternative in gpu.get("alternatives", []):
                if alternative.get("class") == doc["metadata"]["name"]:
                    del alternative["class"]
    return f"change {what} of device class {doc['metadata']['name']}"


def move_document(draw: Draw, fleet: Fleet) -> str:
    """A document moved to another file, or to another place in its own: every line and position after it changes."""
    rel, i = pick(draw, [(rel, i) for rel, docs in sorted(fleet.files.items()) for i in range(len(docs))])
    doc = fleet.files[rel].pop(i)
    target = pick(draw, sorted(fleet.files) + ["moved/here.yaml"])
    docs = fleet.files.setdefault(target, [])
    docs.insert(draw(st.integers(0, len(docs))), doc)
    return f"move {doc['metadata']['name']} from {rel} to {target}"


def comment_file(draw: Draw, fleet: Fleet) -> str:
    """Comment lines above a file's documents: nothing but their line numbers (the objects' source annotations) moves."""
    rel = pick(draw, sorted(fleet.texts()))
    fleet.headers[rel] = fleet.headers.get(rel, "") + "# reviewed\n" * draw(st.integers(1, 2))
    return f"comment {rel}"


def change_gitops(draw: Draw, fleet: Fleet) -> str:
    """Where Argo CD reads the tree: without spec.gitops the cluster has no argocd/ folder."""
    name = pick(draw, sorted(fleet.clusters))
    spec = fleet.clusters[name]["spec"]
    what = pick(draw, ["remove", "revision", "destination"] if "gitops" in spec else ["add"])
    if what == "remove":
        del spec["gitops"]
    elif what == "add":
        spec["gitops"] = {"repoURL": "https://git.example.com/other.git", "path": f"clusters/{name}", "destination": {"name": name}}
    elif what == "revision":
        spec["gitops"]["targetRevision"] = "v2"
    else:
        spec["gitops"]["destination"] = {"server": f"https://{name}.example.com:6443"}
    return f"gitops of {name}: {spec.get('gitops')}"


CHANGES = [add_workload, change_workload, remove_workload, change_nim, change_compute_domain, add_pool, change_pool, remove_pool,
           change_mig_layout, change_passthrough, add_cluster, remove_cluster, change_budget, change_provider, change_charts,
           change_platform, change_class, change_gitops, move_document, comment_file]


# ------------------------------------------------------------------------------------------------- the test

def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def render(fleet: Path, out: Path, *options: str) -> tuple[int, list[dict]]:
    """The exit code and the findings (errors and warnings) of `gpuc render`."""
    result = gpuc("render", fleet, "-o", out, "--output", "json", *options)
    return result.code, (json.loads(result.out)["diagnostics"] if result.code else json.loads(result.out)["warnings"])


def errors(findings: list[dict]) -> set[tuple]:
    return {(d["file"], d["line"], d["path"], d["message"]) for d in findings if d["severity"] == "error"}


REPLACE = "render again with --allow-replace"  # an update the API server refuses: only a render over the old tree sees it


def rerender(root: Path, out: Path, options: tuple[str, ...], expected: tuple[int, list[dict]], before: dict[str, bytes]) -> None:
    """Render over the previous tree in `out`; it must give what the fresh render gave (`expected`), or refuse an update
    the API server refuses (an immutable field changed) and write nothing, and then, with --allow-replace, give it."""
    code, findings = render(root, out, *options)
    assert not [d for d in findings if "gpuc did not write" in d["message"]], findings
    refused = {e for e in errors(findings) if e not in errors(expected[1])}
    if refused:
        assert code != 0 and tree(out) == before, options
        assert all(REPLACE in d["hint"] for d in findings if (d["file"], d["line"], d["path"], d["message"]) in refused), findings
        code, findings = render(root, out, *options, "--allow-replace")
    assert code == expected[0] and errors(findings) == errors(expected[1]), (options, findings, expected)


# Every kind of change leads two examples (the simplest, then a drawn one) with up to two more changes after it:
# 40 examples, the same each run.
RERENDER = settings(max_examples=DEEP or 2, derandomize=not DEEP, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("first", CHANGES, ids=lambda change: change.__name__)
@RERENDER
@given(held=st.lists(st.sampled_from(CLUSTER_NAMES), max_size=2, unique=True), data=st.data())
def test_rendering_a_changed_fleet_over_its_tree_gives_the_fresh_render(first, held, data):
    base = base_fleet(sorted(held))
    head = copy.deepcopy(base)
    for change in [first, *data.draw(st.lists(st.sampled_from(CHANGES), max_size=2), label="then")]:
        note(change(data.draw, head))
    with tempfile.TemporaryDirectory() as tmp:
        root, cached, uncached, fresh = (Path(tmp) / name for name in ("fleet", "cached", "uncached", "fresh"))
        cache = ("--cache-dir", str(Path(tmp) / "cache"))
        base.write(root)
        assert render(root, cached, *cache)[0] == 0
        rendered = tree(cached)
        shutil.copytree(cached, uncached)
        if data.draw(st.booleans(), label="the tree is a fresh checkout (CI: git restores no file times; the cache matches by content)"):
            shutil.copytree(cached, Path(tmp) / "checkout", copy_function=shutil.copy)
            shutil.rmtree(cached)
            (Path(tmp) / "checkout").rename(cached)
        head.write(root)
        expected = render(root, fresh, "--no-cache", "--allow-replace")
        event(f"head rendered: exit {expected[0]}")
        after = tree(fresh) if expected[0] == 0 else rendered  # refused: nothing written
        before = {out: rendered for out in (cached, uncached)}
        single = data.draw(st.sampled_from([None, *sorted(head.clusters)]), label="first render only this cluster")
        if single is not None and expected[0] == 0:  # `render --cluster`: that cluster's folder, the others as they were
            rerender(root, cached, (*cache, "--cluster", single), (0, []), rendered)
            before[cached] = {k: v for k, v in rendered.items() if not k.startswith(f"{single}/")} | \
                {k: v for k, v in after.items() if k.startswith(f"{single}/")}
            assert tree(cached) == before[cached]
        for out, options in ((cached, cache), (uncached, ("--no-cache", "--jobs", "2"))):  # clusters built in forked workers
            rerender(root, out, options, expected, before[out])
            assert tree(out) == (after if expected[0] == 0 else before[out]), options
        assert render(root, cached, *cache, "--allow-replace")[0] == expected[0]  # every cluster a hit of the cache now
        settled = tree(cached)
        assert settled == (after if expected[0] == 0 else before[cached])
        base.write(root)  # and back: the change reverted
        rerender(root, cached, cache, (0, []), settled)
        assert tree(cached) == rendered


# ------------------------------------------------------------------------------------------- the base fleet

def _used(doc: Any, path: str = "") -> set[str]:
    """The field paths a document sets, as the intent reference writes them: a[] for list items, and each map key
    also as a.<key> (the schema, not the document, says which dicts are maps; the extra paths match nothing)."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for key, value in doc.items():
            for name in (key, "<key>"):
                here = f"{path}.{name}" if path else name
                out |= {here} | _used(value, here)
    elif isinstance(doc, list):
        for item in doc:
            out |= _used(item, f"{path}[]")
    return out


NOT_IN_BASE = {  # fields the base fleet leaves out, and why
    "Cluster": {"spec.crds": "a folder of the operators' CRD files: it changes which checks run, not what is rendered"},
}


@pytest.mark.parametrize("kind", ["Cluster", "GpuWorkload", "GpuDeviceClass"])
def test_the_base_fleet_uses_every_feature(kind):
    """Every field of the intent format, and every value of its modes, is in the base fleet: a new feature is drawn
    over by the property test as soon as it ships."""
    schema = input_schema()
    ref = schema["discriminator"]["mapping"][kind].rpartition("/")[2]
    fields = {path: prop for path, prop, _ in _fields(schema["$defs"][ref], schema["$defs"], "")}
    docs = {"Cluster": CLUSTERS, "GpuDeviceClass": CLASSES, "GpuWorkload": [w for ws in WORKLOADS.values() for w in ws]}[kind]
    used = set().union(*(_used(d) for d in docs))
    missing = sorted(set(fields) - used - set(NOT_IN_BASE.get(kind, {})))
    assert not missing, f"the base fleet of tests/test_rerender.py does not use: {missing}"
    modes = {"Cluster": ["spec.provider", "spec.gpuOperator.mode", "spec.draDriver.fabric", "spec.nodePools[].allocation"],
             "GpuWorkload": ["spec.gpu.sharing", "spec.gpu.fabric.strategy", "spec.cache.accessMode"], "GpuDeviceClass": []}[kind]
    for path in modes:
        allowed = {v for option in fields[path].get("anyOf", [fields[path]]) for v in option.get("enum", [])}
        values = set().union(*(_values(d, path.split(".")) for d in docs))
        assert allowed <= values, f"{kind} {path}: the base fleet never uses {sorted(allowed - values)}"


def _values(doc: Any, parts: list[str]) -> set[Any]:
    if not parts:
        return {doc} if not isinstance(doc, (dict, list)) else set()
    head, rest = parts[0], parts[1:]
    if head.endswith("[]"):
        items = doc.get(head[:-2], []) if isinstance(doc, dict) else []
        return set().union(*(_values(i, rest) for i in items))
    return _values(doc[head], rest) if isinstance(doc, dict) and head in doc else set()


def test_the_base_fleet_covers_every_platform_line_and_renders_clean(tmp_path):
    minors = {c["spec"]["kubernetesVersion"] for c in CLUSTERS}
    lines = {".".join(c["spec"]["draDriver"]["version"].split(".")[:2]) for c in CLUSTERS}
    assert minors == {"1.32", "1.33", "1.34", "1.35", "1.36", "1.37"} and lines == {"25.3", "25.8", "25.12", "0.4", "0.5"}
    base_fleet([]).write(tmp_path / "fleet")
    code, warnings = render(tmp_path / "fleet", tmp_path / "out", "--no-cache")
    held = [w for w in warnings if w["message"].startswith("(step 1 of 3: ")]  # pods 'moving' holds back, as its step says
    assert code == 0 and held and warnings == held, warnings
    assert len(list((tmp_path / "out" / "east" / "releases").glob("*/0-resourcequota-*"))) == 2  # the GKE quota files
