"""Kubernetes, operator and model-shape facts (data/kubernetes.yaml, operators.yaml, models.yaml)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache

from . import VersionError, load_table

_K8S = re.compile(r"^v?1\.(\d+)(?:\.\d+)?$")


@dataclass(frozen=True)
class ResourceApi:
    kubernetes: str  # "1.34"
    api_version: str  # resource.k8s.io/v1
    flat_requests: bool  # v1beta1: request fields directly on the request, no `exactly`

    @property
    def minor(self) -> int:
        return int(self.kubernetes.split(".")[1])


def parse_kubernetes_version(version: str) -> ResourceApi:
    table = load_table("kubernetes")["resourceApi"]
    match = _K8S.match(str(version).strip())
    minors = list(table)
    oldest, newest = minors[0], minors[-1]
    supported = f"gpuc supports Kubernetes {oldest} to {newest}"
    if not match:
        raise VersionError(f"'{version}' is not a Kubernetes minor version: {supported}",
                           f'write the minor the cluster runs, quoted, e.g. kubernetesVersion: "{newest}"')
    key = f"1.{int(match.group(1))}"
    if key not in table:
        if int(match.group(1)) > int(newest.split(".")[1]):
            raise VersionError(f"Kubernetes {key} is newer than this gpuc knows: {supported}",
                               f"upgrade gpuc to a release that knows {key} (`gpuc catalog` lists what this one knows); until "
                               f'then, kubernetesVersion: "{newest}" compiles the cluster as {newest} (nothing {key} added is used)')
        raise VersionError(f"Kubernetes {key} is older than DRA with structured parameters: {supported}",
                           f"upgrade the cluster to Kubernetes {oldest} or newer ({oldest} and {minors[1]} need DRA turned on; "
                           f"{_default_on(table)} and newer have it on by default)")
    entry = table[key]
    return ResourceApi(key, entry["version"], entry["requestShape"] == "flat")


def _default_on(table: dict) -> str:
    """The first minor that serves resource.k8s.io/v1 (DRA on by default)."""
    return next(minor for minor, entry in table.items() if entry["version"] == "resource.k8s.io/v1")


@dataclass(frozen=True)
class DraGate:
    """A Kubernetes DRA feature gate (data/kubernetes.yaml `draFeatureGates`)."""

    name: str
    alpha: int | None  # first minor of each stage, None when not reached
    beta: int | None
    ga: int | None
    beta_off: bool  # a beta that stays off by default
    uses: str
    runtime_config: dict[str, str]  # minor -> the --runtime-config that serves its API there (beta API groups)

    def stage(self, minor: int) -> str | None:
        """"GA", "beta" or "alpha" on Kubernetes 1.<minor>; None when that version does not have the gate."""
        for stage, since in (("GA", self.ga), ("beta", self.beta), ("alpha", self.alpha)):
            if since is not None and minor >= since:
                return stage
        return None

    def on_by_default(self, minor: int) -> bool:
        stage = self.stage(minor)
        return stage == "GA" or (stage == "beta" and not self.beta_off)


@cache
def dra_gates() -> dict[str, DraGate]:
    def minor(text: str | None) -> int | None:
        return int(text.split(".")[1]) if text else None

    return {name: DraGate(name, minor(g.get("alpha")), minor(g.get("beta")), minor(g.get("ga")), bool(g.get("betaOff")), g["uses"],
                          dict(g.get("runtimeConfig") or {}))
            for name, g in load_table("kubernetes")["draFeatureGates"].items()}


def dra_gate_note(name: str, minor: int) -> str:
    """How a cluster of Kubernetes 1.<minor> stands with DRA gate `name`, for a finding: "" when it is on."""
    gate = dra_gates()[name]
    stage = gate.stage(minor)
    if gate.on_by_default(minor):
        return ""
    if stage is None:
        first = gate.alpha or gate.beta or gate.ga
        return f"Kubernetes 1.{minor} does not have the {name} feature gate ({gate.uses}); it arrives in 1.{first}"
    return (f"{name} ({gate.uses}) is {stage} and off by default on Kubernetes 1.{minor}: enable the feature gate on the "
            "API server, the scheduler and the kubelets" + (f", or upgrade to 1.{gate.beta}, where it is on" if gate.beta and not gate.beta_off else ""))


def admin_access_label(minor: int) -> str | None:
    """The namespace label (value "true") Kubernetes 1.<minor> requires for claims with adminAccess; None before 1.33."""
    keys = [(int(v.split(".")[1]), key) for v, key in load_table("kubernetes")["adminAccessNamespaceLabel"].items()]
    return max(((since, key) for since, key in keys if since <= minor), default=(0, None))[1]


def cel_function_since(name: str) -> int:
    """The first Kubernetes minor whose API server accepts CEL function `name` in a new selector."""
    return int(str(load_table("kubernetes")["celFunctionsInNewSelectors"][name]).split(".")[1])


def dra_limits() -> dict[str, int]:
    return dict(load_table("kubernetes")["limits"])


@dataclass(frozen=True)
class DeviceQuota:
    """The ResourceQuota keys that hold a namespace's ResourceClaims (data/kubernetes.yaml `deviceQuota`)."""

    claims_key: str
    devices_key: str  # format with deviceClass=
    all_mode_devices: int  # what quota charges a request for allocationMode All

    def devices(self, device_class: str) -> str:
        return self.devices_key.format(deviceClass=device_class)


@cache
def device_quota() -> DeviceQuota:
    q = load_table("kubernetes")["deviceQuota"]
    return DeviceQuota(q["claimsKey"], q["devicesKey"], int(q["allModeDevices"]))


@dataclass(frozen=True)
class SliceLayout:
    """How a DRA driver may split a pool into ResourceSlices on one Kubernetes version (None: no limit)."""

    separate_counters: bool  # counter sets in slices of their own (1.35+), not beside their devices
    devices: int
    devices_with_counters: int  # when any device of the slice consumes counters
    counter_sets: int | None
    shared_counters: int | None  # summed over a slice's counter sets
    counters_per_set: int
    consumed_counters: int | None  # summed over a slice's devices


def slice_layout(kubernetes: str) -> SliceLayout:
    """The layout rules of the newest entry at or before `kubernetes` ("1.35")."""
    table = load_table("kubernetes")["sliceLayout"]
    minor = int(kubernetes.split(".")[1])
    key = max((k for k in table if int(k.split(".")[1]) <= minor), key=lambda k: int(k.split(".")[1]), default=min(table))
    e = table[key]
    return SliceLayout(e["separateCounters"], e["devices"], e["devicesWithCounters"], e["counterSets"],
                       e["sharedCounters"], e["countersPerSet"], e["consumedCounters"])


@dataclass(frozen=True)
class ObjectMetaRules:
    name_format: dict[str, str]  # kind -> dnsLabel | dnsSubdomain
    annotations_total_bytes: int
    cluster_scoped: frozenset[str]

    def name_format_of(self, kind: str) -> str:
        return self.name_format.get(kind, "dnsSubdomain")


@cache
def object_meta_rules() -> ObjectMetaRules:
    table = load_table("kubernetes")["objectMeta"]
    return ObjectMetaRules(dict(table["nameFormat"]), int(table["annotationsTotalBytes"]),
                           frozenset(table["clusterScopedKinds"]))


@dataclass(frozen=True)
class ReplacementRule:
    """A field whose change cannot be applied in place (data/kubernetes.yaml `replacements`)."""

    path: str  # dotted, e.g. "spec" or "spec.draResources"
    effect: str  # what happens instead, in words for reviewers
    delete_first: bool  # the new object keeps the name: the old one goes first
    api_server: bool  # the API server refuses the update itself (built-in kinds)


@cache
def replacement_rules() -> dict[str, tuple[ReplacementRule, ...]]:
    """Kind -> the fields of it that are replaced, not updated, on change."""
    return {kind: (ReplacementRule(r["path"], r["effect"], r["deleteFirst"], r["apiServer"]),)
            for kind, r in load_table("kubernetes")["replacements"].items()}


def immutable_fields() -> dict[str, tuple[str, ...]]:
    """Built-in kind -> dotted field paths the API server refuses to change on update."""
    return {kind: tuple(r.path for r in rules if r.api_server) for kind, rules in replacement_rules().items()
            if any(r.api_server for r in rules)}


@dataclass(frozen=True)
class StateKind:
    group: str  # "" for the core API
    kind: str
    plural: str
    managed_only: bool  # list only what gpuc manages (app.kubernetes.io/managed-by=gpuc)


def standard_attribute(name: str) -> str:
    """A fully qualified standard device attribute (kubernetes.yaml standardAttributes)."""
    return str(load_table("kubernetes")["standardAttributes"][name])


def state_kinds() -> tuple[StateKind, ...]:
    """The kinds gpuc reads of a running cluster (kubernetes.yaml clusterState)."""
    return tuple(StateKind(k["group"], k["kind"], k["plural"], bool(k.get("managedOnly")))
                 for k in load_table("kubernetes")["clusterState"])


def gpu_operator() -> dict:
    return load_table("operators")["gpuOperator"]


def nim_operator() -> dict:
    return load_table("operators")["nimOperator"]


def nim_name_limit(kind: str) -> int:
    """The longest name a NIM Operator object of `kind` may have: 63 less the suffix the operator derives a name with."""
    return 63 - len(nim_operator()["derivedNameSuffixes"][kind])


def version_tuple(version: str) -> tuple[int, ...]:
    """Lenient numeric tuple of a version string ("v3.1.2" -> (3, 1, 2)) for ordering only."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("-")[0])[:3])


@dataclass(frozen=True)
class ModelShape:
    name: str
    parameters: float
    layers: int
    kv_heads: int
    head_dim: int


@cache
def model_shapes() -> tuple[ModelShape, ...]:
    return tuple(
        ModelShape(s["name"], float(s["parameters"]), s["layers"], s["kvHeads"], s["headDim"])
        for s in load_table("models")["shapes"]
    )


def nearest_shape(parameters: float) -> ModelShape:
    return min(model_shapes(), key=lambda s: (abs(math.log(s.parameters) - math.log(parameters)), s.parameters))


def sizing_table() -> dict:
    return load_table("models")


def allocator_variants() -> dict[str, frozenset[str]]:
    """Upstream allocator implementations in the order NewAllocator tries them, with the gates each supports."""
    return {name: frozenset(gates) for name, gates in load_table("kubernetes")["allocatorVariants"].items()}


def pools_skipped_from() -> int:
    """The first minor whose allocator skips incomplete and invalid pools instead of using or failing on them."""
    return int(str(load_table("kubernetes")["allocatorPools"]["skipUnusableFrom"]).split(".")[1])
