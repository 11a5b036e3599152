"""The input kinds (DESIGN.md section 3) as pydantic models: Cluster, GpuWorkload, GpuDeviceClass.

The models check shape and value ranges only; rules that relate several fields or documents live in
`rules.py`, where they can point at the exact line that is wrong. Unknown fields are errors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from .types import DnsLabel, DnsSubdomain, MemoryField, ParameterCount, Version

API_VERSION = "gpuc.dev/v1alpha1"


class Model(BaseModel):
    # strict: `nodes: true` or `replicas: "2"` are mistakes (YAML 1.1 booleans, quoted numbers), not 1 and 2
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=False, frozen=True, strict=True)


# ---------------------------------------------------------------------------------------- Cluster

class ClusterMetadata(Model):
    name: DnsLabel


class DraDriverSpec(Model):
    version: str = Field(description="DRA driver release: 25.3.x, 25.8.x, 25.12.x, 0.4.x or 0.5.x")
    namespace: DnsLabel = "nvidia-dra-driver-gpu"
    nvidia_driver_root: str = Field("/", description='"/run/nvidia/driver" when the GPU Operator installs the driver')
    fabric: Literal["partitionAttributes", "topologyConfig", "none"] = "none"
    values: dict[str, Any] = Field(default_factory=dict, description="extra chart values, deep-merged")


class GpuOperatorSpec(Model):
    mode: Literal["helm", "patch", "gpuCluster", "none"] = Field(
        "helm", description="helm: gpuc installs the GPU Operator chart; patch: gpuc patches the ClusterPolicy of an operator "
                            "installed elsewhere; gpuCluster: GPU Operator v26.7+ installs the DRA driver itself (GPUCluster "
                            "resource), and gpuc emits no DRA driver release; none: gpuc leaves the operator alone")
    version: str | None = None
    namespace: DnsLabel = "gpu-operator"


class NimOperatorSpec(Model):
    version: str
    namespace: DnsLabel = "nim-operator"


class PoolGpu(Model):
    model: str = Field(description="key of the built-in GPU catalog, e.g. H100-80GB")
    count: int = Field(ge=1, le=16, description="GPUs per node")


class MigSlice(Model):
    profile: str
    count: int = Field(1, ge=1, le=7)


class PoolMig(Model):
    layout: str | list[MigSlice] = Field(
        description="a mig-parted named config (all-balanced, all-<profile>), a list of profiles per GPU, "
                    "or `dynamic` (the driver's DynamicMIG creates instances on demand)")


class NvLink(Model):
    partitions: list[Literal[2, 4, 8]] = Field(min_length=1)


LabelKey = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=316)]
LabelValue = Annotated[str, Field(pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$", max_length=63)]


class Taint(Model):
    """A taint the pool's nodes carry (GKE and EKS GPU nodes: nvidia.com/gpu=present:NoSchedule)."""

    key: LabelKey = Field(description="taint key, e.g. nvidia.com/gpu")
    value: str = Field("", max_length=63, description="taint value (empty: any value is tolerated)")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(description="taint effect")


class PoolNics(Model):
    """NICs the pool's nodes publish through another DRA driver (an RDMA NIC driver), for GPU + NIC alignment."""

    driver: DnsSubdomain = Field(description="the NIC DRA driver's name (its ResourceSlices' spec.driver)")
    device_class: DnsSubdomain = Field(description="the DeviceClass that driver's chart creates for these NICs")
    count: int = Field(ge=1, le=16, description="NICs per node, spread evenly over the GPUs' PCIe roots")
    attributes: dict[str, str | int | bool] = Field(
        default_factory=dict, description="attributes the NIC driver publishes on these NICs besides pcieRoot (e.g. sriovType: "
                                          "vf), in its own domain: gpuc's synthesized NICs carry them, so gpu.nics.cel selects on them")


class PoolHost(Model):
    """What the pool's hosts make the DRA driver publish, beside the GPU model: known only to whoever built the nodes."""

    addressing_mode: Literal["None", "HMM", "ATS"] | None = Field(
        None, description="the GPUs' addressingMode attribute as NVML reports it on these nodes (`nvidia-smi -q | grep -i "
                          "addressing`): None on most virtual machines, HMM on x86 hosts with the open kernel modules and HMM, "
                          "ATS on Grace hosts; unset: gpuc publishes no addressingMode and refuses selectors that read it")
    numa_nodes: int | None = Field(
        None, ge=0, le=16, description="how many NUMA nodes the kernel spreads a node's GPUs over (GPU i on node "
                                       "i * numaNodes / GPUs), published as resource.kubernetes.io/numaNode (driver 0.5+); 0: the "
                                       "kernel reports none (virtual machines), so the driver publishes none; unset: gpuc "
                                       "publishes none and refuses selectors and constraints that read it")


class NodePool(Model):
    name: DnsLabel
    nodes: int = Field(ge=1, le=100_000)
    gpu: PoolGpu
    allocation: Literal["dra", "devicePlugin"] = "dra"
    mig: PoolMig | None = None
    nvlink: NvLink | None = None
    node_names: list[DnsSubdomain] | None = Field(
        None, description="names of the pool's nodes, when known: gpuc then emits their labels as Node patches")
    driver_version: Version | None = Field(None, description="host NVIDIA driver version the nodes run")
    extended_resource: bool = Field(
        False, description="serve device-plugin style pods (resources.limits nvidia.com/gpu, nvidia.com/mig-<profile>) "
                           "from this DRA pool through DRA extended resources (Kubernetes 1.34+, GA in 1.37)")
    nics: PoolNics | None = Field(None, description="NICs of another DRA driver on the pool's nodes, for gpu.nics alignment")
    taints: list[Taint] = Field(default_factory=list, description="taints the pool's nodes carry: gpuc derives the tolerations of "
                                                                  "the DRA kubelet plugin, the GPU Operator operands and the NIMServices")
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="labels the pool's nodes carry beside gpuc's own (e.g. GKE's "
                                          "gke-no-default-nvidia-gpu-device-plugin: \"true\" on DRA pools): emitted with the "
                                          "other node labels (node-labels.yaml, Node patches)")
    host: PoolHost | None = Field(
        None, description="host facts the driver publishes as device attributes (addressingMode, NUMA node); they depend on "
                          "the machine, not the GPU model, so gpuc assumes none")
    passthrough: bool = Field(
        False, description="the pool's GPUs go to VMs through vfio-pci (KubeVirt-style): the driver's PassthroughSupport gate "
                           "(0.4+, with DeviceMetadata) publishes them as vfio.gpu.nvidia.com devices, and only gpu.passthrough "
                           "workloads may use them")


class Destination(Model):
    name: str | None = None
    server: str | None = None


class GitOps(Model):
    repo_url: str = Field(alias="repoURL")
    target_revision: str = "main"
    path: str
    destination: Destination
    project: str = "default"
    namespace: DnsLabel = Field("argocd", description="namespace Argo CD Applications live in")


class ChartSource(Model):
    """Where charts come from instead of their public repositories: CI and air-gapped clusters reach neither
    helm.ngc.nvidia.com nor registry.k8s.io. One of the two, never both."""

    repository: str | None = Field(
        None, pattern=r"^(oci|https?)://\S+$",
        description="an internal mirror serving each chart under its own name and version: an OCI registry path "
                    "(oci://registry.internal/helm) or a Helm repository (https://charts.internal/nvidia)")
    directory: str | None = Field(
        None, pattern=r"^\S+$",
        description="a folder of the GitOps repository (spec.gitops.repoURL, for Argo CD; the Pulumi project root, for "
                    "Pulumi) holding each chart unpacked as <chart>-<version>/ (`helm pull REPO/CHART --version V --untar "
                    "--untardir /tmp/c && mv /tmp/c/CHART <directory>/CHART-V`: --untar alone unpacks to CHART/)")

    @model_validator(mode="after")
    def _one(self) -> ChartSource:
        if (self.repository is None) == (self.directory is None):
            raise ValueError("give exactly one of repository (oci:// or https:// mirror) and directory (unpacked charts in the GitOps repository)")
        if self.directory is not None and (self.directory.startswith("/") or ".." in self.directory.split("/")):
            raise ValueError(f"directory '{self.directory}' must be relative to the GitOps repository's root and stay inside it "
                             "(Argo CD reads it from that repository): write e.g. charts")
        return self


class Charts(Model):
    """Chart sources for the cluster's releases: one mirror for all, and per release (by release name) overrides."""

    mirror: ChartSource | None = Field(None, description="where every chart comes from, unless `releases` names its release")
    releases: dict[str, ChartSource] = Field(
        default_factory=dict, description="per release name (nvidia-dra-driver-gpu or dra-driver-nvidia-gpu, gpu-operator, "
                                          "nim-operator): its own source")


AckCode = Literal["unchecked-crds", "driver-fork", "helm-capabilities", "dra-beta", "mig-mode", "unknown-release", "driver-upgrade",
                  "device-plugin-off", "unused-budget"]


class Acknowledgement(Model):
    """A warning the platform team has read and accepts: gpuc stops printing it for this cluster."""

    warning: AckCode = Field(description="the code in brackets after the warning: unchecked-crds (objects of a kind with no CRD "
                                         "to check them against), driver-fork (a driver feature only a fork ships), "
                                         "helm-capabilities (the Helm that renders the driver chart is older than 3.19), dra-beta (DRA "
                                         "and its beta API turned on in a 1.32/1.33 cluster), mig-mode (MIG mode enabled outside the "
                                         "MIG Manager on dynamic-MIG pools of Ampere GPUs), "
                                         "unknown-release (a DRA driver or GPU Operator version newer than gpuc's facts), "
                                         "driver-upgrade (GPU driver upgrades by the operator while the DRA kubelet plugin runs), "
                                         "device-plugin-off (gpuOperator.mode none: the team keeps the other install's device "
                                         "plugin off the DRA pools), "
                                         "unused-budget (a budget on a namespace where no workload of this fleet runs: the "
                                         "team's own pods claim there)")
    kinds: list[str] | None = Field(None, description="unchecked-crds only: the kinds accepted unchecked (default: every kind)")
    namespaces: list[str] | None = Field(None, description="unused-budget only: the budgeted namespaces accepted without a "
                                                           "workload of this fleet (default: every budgeted namespace)")
    reason: str = Field(min_length=1, description="why it is accepted, for the reviewer who reads this file next")


class Budget(Model):
    """A team's GPU budget in one namespace of this cluster. gpuc emits it as a ResourceQuota, so the API server's quota
    admission refuses a ResourceClaim that would take the namespace over it, and `plan`/`render` refuse workloads that
    would, before they merge. Quota counts what claims request (facts/data/kubernetes.yaml deviceQuota): a claim from
    a template once per pod, a shared claim once, firstAvailable at its largest alternative, adminAccess like any
    request; a MIG slice is one device of mig.nvidia.com."""

    namespace: DnsLabel = Field(description="the team's namespace")
    devices: dict[DnsSubdomain, Annotated[int, Field(ge=0, le=1_000_000)]] = Field(
        default_factory=dict, description="per DeviceClass (gpu.nvidia.com, mig.nvidia.com, a GpuDeviceClass of this fleet): the devices "
                                          "the namespace's claims may request; a MIG slice is one device of mig.nvidia.com, a "
                                          "shared GPU counts once per claim; every other class that selects devices of a type "
                                          "listed here (a whole GPU, a MIG slice) is held at 0, so no class name escapes the budget")
    claims: int | None = Field(None, ge=0, le=1_000_000, description="ResourceClaims the namespace may hold (every class)")

    @model_validator(mode="after")
    def _something(self) -> Budget:
        if not self.devices and self.claims is None:
            raise ValueError("a budget limits something: give devices (per DeviceClass), claims, or both")
        return self


class TransitionPool(Model):
    allocation: Literal["dra", "devicePlugin", "none"] = Field(
        description="who serves the pool's GPUs during this step: dra, devicePlugin, or none (neither: the pool is being "
                    "handed from one to the other, and no new pod gets its GPUs until a later step)")


class TransitionDriver(Model):
    installed: bool = Field(description="false: no DRA driver release during this step (the previous one is removed before "
                                        "the next is installed, so two kubelet plugins never serve one node)")


class TransitionOperator(Model):
    custom_resource: Literal["none"] = Field(
        description="none: the GPU Operator chart deploys neither its ClusterPolicy nor its GPUCluster during this step "
                    "(the two cannot coexist, so one is gone before the other comes)")


class Transition(Model):
    """One step of a staged change that cannot be applied as one safe commit (`gpuc upgrade` writes it; the last step
    removes it). Only what differs from the rest of the intent during the step is here; everything else is the intent
    as written."""

    step: int = Field(ge=1, description="this step's number")
    steps: int = Field(ge=2, description="how many steps the change takes (the last one is the intent without transition)")
    change: str = Field(min_length=1, description="what the steps do, for the reviewer (gpuc upgrade writes it)")
    dra_driver: TransitionDriver | None = Field(None, description="hold the DRA driver release back during this step")
    gpu_operator: TransitionOperator | None = Field(None, description="hold the GPU Operator's custom resource back during this step")
    node_pools: dict[DnsLabel, TransitionPool] = Field(default_factory=dict, description="per node pool name: its allocation "
                                                                                     "during this step")

    @model_validator(mode="after")
    def _before_last(self) -> Transition:
        if self.step >= self.steps:
            raise ValueError(f"step {self.step} of {self.steps}: the last step is the intent without spec.transition; remove it")
        return self


class ClusterSpec(Model):
    kubernetes_version: str = Field(description='Kubernetes minor version of the cluster, quoted: "1.34"')
    provider: Literal["gke", "eks", "aks"] | None = Field(
        None, description="managed Kubernetes provider: gpuc warns about node labels its DRA pools need (GKE: "
                          "gke-no-default-nvidia-gpu-device-plugin) and emits the ResourceQuota that admits the DRA driver's "
                          "system-node-critical pods where the provider requires one (GKE); with --state it is also recognised "
                          "from the nodes' labels")
    dra_driver: DraDriverSpec
    gpu_operator: GpuOperatorSpec = GpuOperatorSpec()
    nim_operator: NimOperatorSpec | None = None
    crds: str | None = Field(None, description="directory (inside the fleet) with the CRDs of the operator versions this cluster runs")
    node_pools: list[NodePool] = Field(min_length=1)
    gitops: GitOps | None = None
    charts: Charts | None = Field(None, description="chart sources instead of the public repositories (a mirror, or charts "
                                                    "unpacked in the GitOps repository), for Argo CD and Pulumi alike")
    acknowledge: list[Acknowledgement] = Field(default_factory=list, description="warnings accepted for this cluster, each with its reason")
    budgets: list[Budget] = Field(default_factory=list, description="per team namespace: the GPUs its claims may take (a ResourceQuota "
                                                                  "the API server enforces, checked by plan and render first)")
    transition: Transition | None = Field(None, description="a step of a staged change (`gpuc upgrade`): what is held back "
                                                              "during it; removed in the last step")

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        if isinstance(v, float):  # kubernetesVersion: 1.34 unquoted parses as a float
            text = f"{v}0" if len(str(v).rpartition(".")[2]) == 1 else str(v)  # 1.30 was read as 1.3
            raise ValueError(f"write the version as a string, \"{text}\": YAML reads {text} as the number {v}")
        return v

    def acknowledged(self, code: str, kind: str | None = None, namespace: str | None = None) -> bool:
        return any(a.warning == code and (kind is None or a.kinds is None or kind in a.kinds)
                   and (namespace is None or a.namespaces is None or namespace in a.namespaces) for a in self.acknowledge)


class Cluster(Model):
    api_version: Literal["gpuc.dev/v1alpha1"]
    kind: Literal["Cluster"]
    metadata: ClusterMetadata
    spec: ClusterSpec


# ------------------------------------------------------------------------------------ GpuWorkload

class WorkloadMetadata(Model):
    name: DnsLabel
    namespace: DnsLabel = "default"


class ModelSpec(Model):
    image: str = Field(description="NIM image, repository:tag")
    parameters: ParameterCount
    precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    context_length: int = Field(8192, ge=128, le=2_097_152)
    concurrency: int = Field(1, ge=1, le=4096)
    engine: str | None = None
    requests: list[DnsLabel] | None = Field(
        None, min_length=1, description="the requests of the workload's claim the model container gets (NIMService "
                                        "draResources[].requests; default: the whole claim), e.g. [mig-3g-40gb]")


class TimeSlicing(Model):
    interval: Literal["Default", "Short", "Medium", "Long"] = "Default"


class Mps(Model):
    active_thread_percentage: int | None = Field(None, ge=0, le=100)
    pinned_memory_limit: MemoryField | None = None


class Require(Model):
    architecture: list[str] | None = None
    product_name: str | None = None
    min_memory: MemoryField | None = None
    min_compute_capability: Version | None = None
    min_driver_version: Version | None = None
    cel: list[str] = Field(default_factory=list)


class MigMix(Model):
    same_gpu: bool = True
    slices: list[MigSlice] = Field(min_length=1)


class Fabric(Model):
    partition_size: Literal[2, 4, 8] | None = None
    strategy: Literal["Auto", "Manual", "Disabled"] = "Auto"
    partition_ids: list[str] = Field(default_factory=list, alias="partitionIDs")
    virtualization_model: Literal["BareMetal", "FullPassthrough", "SharedNVSwitch", "VGPU"] = "BareMetal"
    min_bandwidth: float | None = Field(None, ge=0, description="GB/s")
    max_latency: float | None = Field(None, ge=0, description="ms")


class MultiNode(Model):
    nodes: int = Field(ge=2, le=1024, description="pods per replica, one per node, each with gpu.count GPUs")


class GpuNics(Model):
    """RDMA NICs of another DRA driver, per GPU, on that GPU's PCIe root."""

    count: int = Field(1, ge=1, le=8, description="NICs per GPU")
    cel: list[str] = Field(default_factory=list, description="CEL selectors on the NICs, in the NIC driver's attribute domain, "
                                                             "e.g. device.attributes['sriovnetwork.example.com'].sriovType == 'vf'")


GpuCount = Annotated[Literal["auto"] | Annotated[int, Field(ge=1, le=32)], Field(union_mode="left_to_right")]


def _count_value(v: Any) -> Any:
    if v is None or v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 32):
        return v
    raise ValueError(f"must be 'auto' or a whole number of GPUs from 1 to 32, got {v!r}")


class GpuAlternative(Model):
    """One way to satisfy the GPU request, tried in order (a `firstAvailable` subrequest)."""

    count: GpuCount | None = Field(None, description="GPUs per replica on this alternative; auto: sized from spec.model")
    require: Require | None = Field(None, description="what this alternative's GPUs must be (with gpu.require, if any)")
    class_: DnsSubdomain | None = Field(None, alias="class", description="a GpuDeviceClass of this fleet for this alternative")

    @field_validator("count", mode="before")
    @classmethod
    def _count(cls, v: Any) -> Any:
        return _count_value(v)


class GpuRequest(Model):
    class_: DnsSubdomain | None = Field(None, alias="class")
    count: GpuCount | None = Field(None, description="GPUs per pod, always: a replica is one pod, or with multiNode one pod on "
                                                     "each of multiNode.nodes nodes (count x nodes GPUs per replica); auto: "
                                                     "sized from spec.model")
    sharing: Literal["Exclusive", "Shared", "TimeSlicing", "MPS", "Fractional"] = Field(
        "Exclusive", description="Exclusive: whole GPUs per replica; Shared/TimeSlicing/MPS: the members of a share group use "
                                 "one claim; Fractional: each replica gets gpu.memory of one GPU (consumable capacity)")
    memory: MemoryField | None = Field(None, description="with sharing Fractional: the GPU memory each replica's claim takes")
    alternatives: list[GpuAlternative] | None = Field(
        None, min_length=1, max_length=8,
        description="ways to satisfy the request, tried in order (firstAvailable, at most 8): each with count, require, class")
    share_group: DnsLabel | None = None
    time_slicing: TimeSlicing | None = None
    mps: Mps | None = None
    require: Require | None = None
    mig: MigMix | None = None
    fabric: Fabric | None = None
    multi_node: MultiNode | None = None
    nics: Annotated[int, Field(ge=1, le=8)] | GpuNics | None = Field(
        None, union_mode="left_to_right",
        description="RDMA NICs per GPU on that GPU's PCIe root (a number, or {count, cel} to select among them); with count N, "
                    "each GPU gets a request pair of its own (gpu-<i>, nic-<i>) aligned by matchAttribute; the serving pools "
                    "declare the NICs in nodePools[].nics")
    passthrough: bool = Field(
        False, description="whole GPUs for a VM (KubeVirt-style): a request on vfio.gpu.nvidia.com with a VfioDeviceConfig that "
                           "gives virt-launcher /dev/vfio/vfio, served by pools with passthrough: true (driver 0.4+, gates "
                           "PassthroughSupport and DeviceMetadata)")
    admin_access: bool = Field(
        False, description="management access (monitoring, health checks): the claim sees GPUs other claims hold, without "
                            "allocating them (request adminAccess; every matching GPU of a node unless count is set); gpuc labels "
                            "the namespace resource.kubernetes.io/admin-access, which the API server requires")

    @field_validator("count", mode="before")
    @classmethod
    def _count(cls, v: Any) -> Any:
        return _count_value(v)

    @property
    def nics_per_gpu(self) -> int | None:
        return self.nics.count if isinstance(self.nics, GpuNics) else self.nics

    @property
    def nic_selectors(self) -> list[str]:
        return list(self.nics.cel) if isinstance(self.nics, GpuNics) else []

    # The one notion of sharing every stage uses.
    @property
    def shared(self) -> bool:
        """The workloads of a share group (namespace and cluster) use one named ResourceClaim."""
        return self.sharing in ("Shared", "TimeSlicing", "MPS")

    @property
    def fractional(self) -> bool:
        """Each replica's own claim takes part of one GPU's memory (consumable capacity)."""
        return self.sharing == "Fractional"

    @property
    def driver_sharing(self) -> str | None:
        """The strategy the opaque driver config carries (it needs a driver gate), or None: Exclusive
        and Shared emit no sharing config."""
        return self.sharing if self.sharing in ("TimeSlicing", "MPS") else None


class Cache(Model):
    size: MemoryField | None = Field(None, description="the NIMCache volume; default: the model's files with headroom "
                                                         "(gpuc explain shows it); a size below the files is refused")
    storage_class: str = ""
    access_mode: Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"] = "ReadWriteOnce"


class Expose(Model):
    port: int = Field(8000, ge=1, le=65535)
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"


class Secrets(Model):
    ngc_api_key: DnsSubdomain | None = Field(None, description="name of the Secret holding NGC_API_KEY")
    image_pull: DnsSubdomain | None = Field(None, description="name of the image pull Secret for nvcr.io")


class WorkloadSpec(Model):
    clusters: list[DnsLabel] | None = None
    model: ModelSpec | None = None
    replicas: int = Field(1, ge=0, le=10_000)
    gpu: GpuRequest = GpuRequest()
    cache: Cache = Cache()
    expose: Expose = Expose()
    secrets: Secrets = Secrets()


class GpuWorkload(Model):
    api_version: Literal["gpuc.dev/v1alpha1"]
    kind: Literal["GpuWorkload"]
    metadata: WorkloadMetadata
    spec: WorkloadSpec

    @property
    def share_group(self) -> str | None:
        """The share group's name, unique per namespace and cluster (the workload's name when unset), or
        None when the workload does not share."""
        gpu = self.spec.gpu
        return (gpu.share_group or self.metadata.name) if gpu.shared else None


# --------------------------------------------------------------------------------- GpuDeviceClass

class ClassMigSlice(Model):
    profile: str


class ClassMig(Model):
    slices: list[ClassMigSlice] = Field(min_length=1)


class DeviceClassSpec(Model):
    clusters: list[DnsLabel] | None = Field(None, description="clusters that get this DeviceClass (default: every cluster)")
    require: Require | None = None
    mig: ClassMig | None = None


class DeviceClassMetadata(Model):
    name: DnsSubdomain


class GpuDeviceClass(Model):
    api_version: Literal["gpuc.dev/v1alpha1"]
    kind: Literal["GpuDeviceClass"]
    metadata: DeviceClassMetadata
    spec: DeviceClassSpec = DeviceClassSpec()


KINDS: dict[str, type[Model]] = {"Cluster": Cluster, "GpuWorkload": GpuWorkload, "GpuDeviceClass": GpuDeviceClass}
