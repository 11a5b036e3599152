"""`gpuc schema`: JSON Schema of the input kinds, for editors (yaml-language-server) and CI linters."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from ..validate.intents import Cluster, GpuDeviceClass, GpuWorkload

Document = Annotated[Cluster | GpuWorkload | GpuDeviceClass, Field(discriminator="kind")]


def input_schema() -> dict[str, Any]:
    schema = TypeAdapter(Document).json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gpuc.dev/schemas/v1alpha1.json"
    schema["title"] = "gpuc intent document (gpuc.dev/v1alpha1): Cluster, GpuWorkload or GpuDeviceClass"
    return describe(schema)


# Descriptions of the fields whose models carry none (editors show them on hover); a test keeps every
# property described, so a new field cannot ship without one.
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Cluster": {"apiVersion": "gpuc.dev/v1alpha1", "kind": "Cluster", "metadata": "the cluster's name", "spec": "platform versions, node pools, GitOps"},
    "GpuWorkload": {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": "name and namespace",
                    "spec": "what the workload needs: model, GPUs, replicas, clusters"},
    "GpuDeviceClass": {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": "the class name (a DNS subdomain)",
                       "spec": "what a device of the class must offer"},
    "ClusterMetadata": {"name": "cluster name: also the Pulumi stack name and the rendered/<name>/ directory"},
    "WorkloadMetadata": {"name": "workload name (a DNS label)", "namespace": "namespace its objects go to (default: default)"},
    "DeviceClassMetadata": {"name": "class name, a DNS subdomain such as hopper-80g.gpuc.dev"},
    "ClusterSpec": {"draDriver": "the NVIDIA DRA driver release and its settings", "gitops": "where Argo CD reads the rendered tree",
                    "gpuOperator": "how the GPU Operator is managed", "nimOperator": "the NIM Operator release (needed by NIM workloads)",
                    "nodePools": "the GPU node pools, one per GPU model and allocation"},
    "DraDriverSpec": {"fabric": "how NVLink partitions are selected: none, partitionAttributes (driver 0.5+), topologyConfig (a fork)",
                      "namespace": "namespace of the DRA driver release"},
    "GpuOperatorSpec": {"namespace": "namespace of the GPU Operator", "version": "GPU Operator chart version, e.g. v25.10.1"},
    "NimOperatorSpec": {"namespace": "namespace of the NIM Operator", "version": "NIM Operator chart version, e.g. 3.1.2"},
    "NodePool": {"allocation": "dra (the DRA driver hands out the GPUs) or devicePlugin (nvidia.com/gpu)",
                 "gpu": "GPU model (gpuc catalog) and GPUs per node", "mig": "MIG layout of every GPU: a named layout, per-profile counts, or dynamic",
                 "name": "pool name (a DNS label)", "nodes": "number of nodes", "nvlink": "Fabric Manager partition sizes the pool offers"},
    "NvLink": {"partitions": "NVLink partition sizes (GPUs) Fabric Manager offers on these nodes"},
    "GitOps": {"destination": "the cluster as Argo CD names it (name) or reaches it (server)", "path": "directory of the rendered tree in repoURL",
               "project": "Argo CD project", "repoURL": "git repository Argo CD reads the rendered tree from",
               "targetRevision": "branch, tag or commit Argo CD follows"},
    "Destination": {"name": "the cluster's name in Argo CD", "server": "the cluster's API server URL"},
    "WorkloadSpec": {"cache": "NIM model cache (a PVC the NIMCache fills)", "clusters": "clusters the workload runs on",
                     "expose": "Service in front of a NIM", "gpu": "the GPUs each replica needs",
                     "model": "a NIM model: gpuc sizes the GPUs from it and emits NIMCache and NIMService",
                     "replicas": "number of replicas (pods)", "secrets": "NGC secrets of a NIM (API key, image pull)"},
    "ModelSpec": {"concurrency": "concurrent requests to size the KV cache for", "contextLength": "context length in tokens",
                  "engine": "NIM engine profile (e.g. tensorrt_llm, vllm)", "parameters": "model size, e.g. 8B, 70B, 405B",
                  "precision": "weight precision"},
    "Cache": {"accessMode": "PVC access mode: ReadWriteMany when replicas land on several nodes", "storageClass": "PVC storage class"},
    "Expose": {"port": "Service port", "type": "Service type"},
    "GpuRequest": {"class": "a GpuDeviceClass (or built-in class) the GPUs come from", "count": "GPUs per replica, or auto (sized from the model)",
                   "fabric": "GpuConfig fabric settings (NVLink partitions)", "mig": "MIG slices instead of whole GPUs",
                   "mps": "MPS sharing settings", "multiNode": "span several nodes over multi-node NVLink (a ComputeDomain)",
                   "require": "what each GPU must offer (attributes, memory, driver)",
                   "shareGroup": "replicas with the same group share one claim (one set of GPUs)",
                   "timeSlicing": "time-slicing settings"},
    "Require": {"architecture": "GPU architectures, e.g. [Hopper, Blackwell]", "cel": "extra CEL selectors, on `device`",
                "minComputeCapability": "lowest CUDA compute capability, e.g. \"9.0\"", "minDriverVersion": "lowest host driver version, e.g. \"570.0\"",
                "minMemory": "lowest GPU memory, with a unit: 40Gi", "productName": "exact product name, e.g. NVIDIA H100 80GB HBM3"},
    "MigMix": {"sameGpu": "all slices of a replica on one GPU", "slices": "MIG slices per replica"},
    "MigSlice": {"count": "slices of this profile", "profile": "MIG profile (gpuc catalog), e.g. 1g.10gb"},
    "ClassMig": {"slices": "MIG profiles a device of the class may be"},
    "ClassMigSlice": {"profile": "MIG profile (gpuc catalog), e.g. 3g.40gb"},
    "DeviceClassSpec": {"mig": "MIG devices instead of whole GPUs", "require": "what a device of the class must offer"},
    "Mps": {"activeThreadPercentage": "share of the GPU's SMs each client may use (0-100)",
            "pinnedMemoryLimit": "device memory each client may pin, with a unit"},
    "MultiNode": {"nodes": "nodes the replica spans"},
    "TimeSlicing": {"interval": "time slice length"},
    "Fabric": {"partitionIDs": "Fabric Manager partition IDs to use", "partitionSize": "GPUs in the NVLink partition",
               "strategy": "fabric topology strategy", "virtualizationModel": "fabric virtualization model"},
}


def describe(schema: dict[str, Any]) -> dict[str, Any]:
    """Fill in DESCRIPTIONS and the enums editors complete: GPU models and MIG profiles from the catalog."""
    from ..facts import catalog

    models = sorted(catalog.gpu_models())
    profiles = sorted({p for m in catalog.gpu_models().values() if m.mig for p in m.mig.profiles})
    for name, definition in schema.get("$defs", {}).items():
        for field, prop in (definition.get("properties") or {}).items():
            text = DESCRIPTIONS.get(name, {}).get(field)
            if text and "description" not in prop:
                prop["description"] = text
            if (name, field) == ("PoolGpu", "model"):
                prop["enum"] = models
            if field == "profile" and name in ("MigSlice", "ClassMigSlice"):
                prop["enum"] = profiles
    return schema
