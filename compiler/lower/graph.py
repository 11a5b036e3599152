"""The compiled object graph: what every backend (rendered tree, Pulumi, diff, plan) reads.

One `CompiledCluster` per cluster holds plain Kubernetes manifests plus the metadata backends need
to treat them right: the sync wave (apply order), the component they belong to, the fields whose
change forces a replacement, and where each came from. Backends never build manifests themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ..facts.driver import ChartRef
from ..load.yaml_source import SourceDoc
from ..plan import ClusterPlan
from ..validate.resolved import ResolvedCluster


class Wave(IntEnum):
    """Apply order (DESIGN.md section 4.8): charts < node config < classes < claims < NIMCache < NIMService."""

    CHARTS = 0
    NODE_CONFIG = 1
    DEVICE_CLASSES = 2
    CLAIMS = 3
    NIM_CACHE = 4
    NIM_SERVICE = 5


@dataclass(frozen=True)
class Replacement:
    """A field whose change cannot be applied in place, and what happens instead."""

    path: str  # e.g. "spec" or "spec.draResources"
    effect: str  # how the backends handle it, in words for reviewers
    delete_first: bool  # the new object cannot coexist with the old one (same name)


RELEASES_DIR = "releases"  # rendered/<cluster>/releases/<release>/: objects synced with a chart


@dataclass
class KubeObject:
    manifest: dict[str, Any]
    wave: Wave
    component: str  # "dra-driver", "node-config", "device-classes", "workload/<ns>/<name>", ...
    origin: SourceDoc  # the intent document that produced it (file, document index, line of every field)
    replacements: tuple[Replacement, ...] = ()
    patch: bool = False  # a partial object applied with server-side apply onto an existing one
    identity: str = ""  # the name without its content hash: what stays the same when the spec changes
    # Which intent field produced which part of the manifest, recorded as it is built: object path (a
    # dotted prefix, "" for the whole object) -> intent field paths in `origin`, the first one the user
    # wrote wins. Findings about the object point at that line (check.report). Kept as written (often a
    # shared constant) and parsed only when there is a finding to place.
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    # The Helm release whose Argo CD Application syncs the object beside its chart, for what the chart's own pods
    # need before they start (a quota that admits them): in the rendered tree's Application, a later wave than the
    # charts, they would wait on charts that wait on them. "" for the rendered tree's Application.
    release: str = ""

    def __post_init__(self) -> None:
        self.identity = self.identity or self.name

    @property
    def source(self) -> str:
        """`file#doc`, as in the gpuc.dev/source annotation."""
        return self.origin.ref

    @property
    def api_version(self) -> str:
        return self.manifest["apiVersion"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.manifest["metadata"].get("namespace", "")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def logical_key(self) -> tuple[str, str, str]:
        """Pairs an object with its predecessor across a spec change that renamed it."""
        return (self.kind, self.namespace, self.identity)

    def sort_key(self) -> tuple:
        return (int(self.wave), self.kind, self.namespace, self.name)

    @property
    def file_name(self) -> str:
        """The object's file in the rendered tree (emit.tree): wave, kind, namespace and name. Here, so the check
        stage can refuse a name no file system would take before anything is written."""
        parts = [str(int(self.wave)), self.kind.lower()] + ([self.namespace] if self.namespace else []) + [self.name]
        return "-".join(parts) + ".yaml"

    @property
    def path(self) -> str:
        """Where emit.tree writes it: beside the cluster's kustomization, or in its release's folder."""
        return f"{RELEASES_DIR}/{self.release}/{self.file_name}" if self.release else self.file_name


@dataclass
class HelmRelease:
    name: str
    namespace: str
    chart: ChartRef
    values: dict[str, Any]
    wave: Wave
    component: str
    origin: SourceDoc
    create_namespace: bool = True
    # the names the same release had under other charts (the DRA driver: 25.x nvidia-dra-driver-gpu, 0.4+
    # dra-driver-nvidia-gpu): a deployer that keys releases by name treats a rename as a replacement of the old one
    formerly: tuple[str, ...] = ()
    # how a deployer deletes the objects the release stops rendering ("" the deployer's default): the GPU Operator's
    # ClusterPolicy goes only in the background (facts/data/operators.yaml prunePropagation)
    prune_propagation: str = ""

    @property
    def source(self) -> str:
        return self.origin.ref


@dataclass
class CompiledCluster:
    cluster: ResolvedCluster
    plan: ClusterPlan
    objects: list[KubeObject] = field(default_factory=list)
    releases: list[HelmRelease] = field(default_factory=list)
    # Argo CD Applications, and the argocd-cm patch (patch=True) with health checks (rendered backend only)
    gitops: list[KubeObject] = field(default_factory=list)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # pool -> labels
    claims: dict[str, Any] = field(default_factory=dict)  # "ns/workload" -> ClaimRef it consumes
    # the DRA driver's settings as its chart's values, whoever installs it (its own release, or the GPU
    # Operator in gpuCluster mode): what decides the devices it publishes
    driver_values: dict[str, Any] = field(default_factory=dict)
    channels: dict[str, str] = field(default_factory=dict)  # "ns/workload" -> ComputeDomain channel template
    # chart values for releases gpuc does not deploy but the cluster needs set (file name -> values), e.g. the
    # standalone device plugin's affinity with gpuOperator.mode none
    advice: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.cluster.name

    def sorted_objects(self) -> list[KubeObject]:
        return sorted(self.objects, key=KubeObject.sort_key)


@dataclass
class CompiledFleet:
    clusters: dict[str, CompiledCluster]
    warnings: list = field(default_factory=list)
