"""The NVIDIA DRA driver in the loop: its admission webhook and its ComputeDomain controller, built from the driver's
own sources (harness/build.d/dra-driver.sh) and run against real kube-apiservers (harness/dra_driver.py).

Each cluster is tested with the build of its driver line (25.12: v25.12.0; 0.4 and 0.5: main at 9593204, v0.5.0-dev);
a line without a source (25.3, 25.8) with the closest build, v25.12.0, which the tests say where it matters.

The webhook (cmd/webhook) is registered with the API server of the cluster's minor, with the feature gates gpuc
derives for the cluster (the driver chart's values, or the GPU Operator's draDriver values for a GPUCluster):
- every ResourceClaim and ResourceClaimTemplate gpuc renders is admitted;
- gpuc's checks of opaque configs (compiler/check/driver_config.py) against it, the way test_real_validation.py
  holds the API-mirroring checks against the API server: a config damaged the way a rule describes is refused by
  gpuc and by the webhook, and the undamaged object is admitted. The webhook only Normalizes and Validates what it
  decodes; some rules gpuc holds are the kubelet plugin's at Prepare (the claim is admitted and the pod then fails to
  start): PREPARE_TIME lists them with the driver code that fails. DISAGREEMENTS are where gpuc and the driver
  differ: those tests fail until gpuc is changed.

The ComputeDomain controller (cmd/compute-domain-controller), with the CRDs of the same source: for each
ComputeDomain gpuc renders it creates the channel ResourceClaimTemplate under the name gpuc's pods use (class
compute-domain-default-channel.nvidia.com, a ComputeDomainChannelConfig for the domain's UID), the daemons'
DaemonSet and claim template; the scheduler binds gpuc's multi-node pods with claims made from that template; the
domain becomes Ready when its nodes' daemons report Ready (simulated below: no GPU, no IMEX daemon); deleting it
removes what the controller made.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic.exceptions import ConflictError

from compiler.facts.driver import compute_domain_channel_request
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place import synthesize_for
from harness.dra_driver import ComputeDomainController, Webhook, known_feature_gates, source_for_line, start_compute_domain_controller, start_webhook
from harness.kube import Kube, Rejection
from harness.scheduling import publish_classes, publish_inventory, schedule_plan
from harness.servers import ControlPlanes
from harness.trees import apply_tree, tree_objects

from check_support import claim_devices, example_cluster, run_checks
from conftest import EXAMPLES, cluster_doc, gpuc, workload_doc, write_fleet
from real.reference import crds_of
from real.waiting import wait_for

EXAMPLE_CLUSTERS = ["prod-east", "staging", "lab", "west"]
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
CONFIG_API = "resource.nvidia.com/v1beta1"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
# Fields only the 25.8 fork (fabiendupont/k8s-dra-driver-gpu, the build staging runs) decodes: an upstream build
# standing in for the fork refuses a config with them.
FORK_FIELDS = ("fabricTopologyConfig",)
DENIED = 'admission webhook "gpu.nvidia.com" denied the request'
CALL_FAILED = 'failed calling webhook "gpu.nvidia.com"'


# -- the fleets --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A cluster as the driver sees it: the API server's minor, the build standing for its driver line, the gates."""

    name: str
    minor: str
    line: str
    source: str
    stand_in: str | None  # why another line's build stands in, None when it is the line's own
    gates: dict[str, bool]  # what gpuc derives, less what the build does not know
    dropped: tuple[str, ...]  # gates gpuc derives that the build does not know (only where a build stands in)


def rendered_gates(cluster_dir: Path) -> dict[str, bool]:
    """The driver feature gates of a rendered cluster: the DRA chart's values, or for a GPUCluster the GPU Operator's draDriver values."""
    values = cluster_dir / "values"
    chart = sorted(f for f in values.glob("*.yaml") if "dra-driver" in f.name)
    if chart:
        return dict((yaml.safe_load(chart[0].read_text()) or {}).get("featureGates") or {})
    operator = yaml.safe_load((values / "gpu-operator.yaml").read_text()) or {}
    return dict((operator.get("draDriver") or {}).get("featureGates") or {})


def target(fleet: Path, name: str, gates: dict[str, bool]) -> Target:
    spec = yaml.safe_load((fleet / "clusters" / f"{name}.yaml").read_text())["spec"]
    line = ".".join(spec["draDriver"]["version"].split(".")[:2])
    source, stand_in = source_for_line(line)
    known = known_feature_gates(source)
    kept = {k: v for k, v in gates.items() if k in known}
    return Target(name, spec["kubernetesVersion"], line, source, stand_in, kept, tuple(sorted(set(gates) - set(kept))))


def generated_fleet(root: Path) -> Path:
    """Clusters gpuc's example fleet lacks: a passthrough (VM) pool on 0.5 (gpuc takes passthrough from 0.4 on), and
    a 0.5 GB200 pool with a multi-node workload (a ComputeDomain without numNodes, which 0.4+ leaves optional)."""
    vm_pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
                {"name": "vm", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 4}, "passthrough": True}]
    h100_only = {"productName": "NVIDIA H100 80GB HBM3"}
    clusters = [cluster_doc("vm-05", kubernetes="1.37", driver="0.5.1", pools=vm_pools),
                cluster_doc("nvl-05", kubernetes="1.37", driver="0.5.1", pools=[{"name": "gb200", "nodes": 4, "gpu": {"model": "GB200-186GB", "count": 4}}])]
    workloads = [workload_doc("vm1", "vms", clusters=["vm-05"], replicas=2, gpu={"count": 2, "passthrough": True}),
                 workload_doc("train", "team", clusters=["vm-05"], gpu={"count": 8, "require": h100_only}),
                 workload_doc("trainer", "team", clusters=["nvl-05"], replicas=2, gpu={"count": 4, "multiNode": {"nodes": 2}})]
    return write_fleet(root, clusters, {"w.yaml": workloads})


@pytest.fixture(scope="module")
def example_tree(rendered: Path) -> Path:
    return rendered


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("generated")
    fleet = generated_fleet(root / "fleet")
    result = gpuc("render", str(fleet), "-o", str(root / "out"))
    assert result.code == 0, result.err
    return fleet, root / "out"


# -- the webhook -------------------------------------------------------------------------------------------------------


class Webhooks:
    """One webhook per API server, restarted when a test needs another build or other gates; all stopped at the end
    (the API servers are the session's: nothing of the webhook may outlive this module)."""

    def __init__(self, planes: ControlPlanes, root: Path) -> None:
        self.planes, self.root = planes, root
        self.running: dict[str, Webhook] = {}

    def kube(self, minor: str, source: str, gates: dict[str, bool]) -> Kube:
        hook = self.running.get(minor)
        if hook is None or hook.source != source or hook.feature_gates != gates:
            if hook is not None:
                hook.stop()
                del self.running[minor]
            self.running[minor] = start_webhook(self.planes.get(minor), source, self.root / minor, gates)
        return self.running[minor].kube

    def close(self) -> None:
        for hook in self.running.values():
            hook.stop()
        self.running.clear()


@pytest.fixture(scope="module")
def webhooks(control_planes: ControlPlanes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhooks]:
    hooks = Webhooks(control_planes, tmp_path_factory.mktemp("dra-webhook"))
    yield hooks
    hooks.close()


def by_webhook(answer: Any) -> str | None:
    """The webhook's refusal (its verdict, or the API server's failure to get one: failurePolicy Fail), else None."""
    if isinstance(answer, Rejection) and (DENIED in answer.message or CALL_FAILED in answer.message):
        return answer.message
    return None


def fork_fields(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"].get("spec", obj["spec"]) if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
    params = [(c.get("opaque") or {}).get("parameters") or {} for c in (spec.get("devices") or {}).get("config") or []]
    return sorted({f for p in params for f in FORK_FIELDS if f in p})


def apply_claims(hooks: Webhooks, fleet: Path, tree: Path, cluster: str) -> tuple[Target, list[tuple[str, dict[str, Any], Any]]]:
    """Every claim and claim template of a rendered cluster, server-side applied (dry run, then for real) with the
    webhook of the cluster's build and gates registered; (target, [(file, object, answer of the first refusal or None)])."""
    t = target(fleet, cluster, rendered_gates(tree / cluster))
    kube = hooks.kube(t.minor, t.source, t.gates)
    out = []
    for f, obj in tree_objects(tree / cluster):
        if obj["kind"] not in CLAIM_KINDS:
            continue
        kube.ensure_namespace(obj["metadata"]["namespace"])
        answer = None
        for dry_run in (True, False):
            result = kube.apply(obj, dry_run=dry_run)
            if isinstance(result, Rejection):
                answer = result
                break
        out.append((f, obj, answer))
    return t, out


@pytest.mark.parametrize("cluster", EXAMPLE_CLUSTERS)
def test_the_webhook_admits_every_claim_gpuc_renders_for_the_example_fleet(webhooks: Webhooks, example_tree: Path, cluster: str) -> None:
    t, answers = apply_claims(webhooks, EXAMPLES, example_tree, cluster)
    assert answers, f"{cluster} renders no claims"
    refused = {f: str(a) for f, obj, a in answers if a is not None and not (t.stand_in and fork_fields(obj))}
    assert refused == {}, f"the webhook of {t.source} ({t.gates}) refused what gpuc renders:\n" + "\n".join(refused.values())
    # Where another line's build stands in (staging: 25.8, the fork's build), what only the fork decodes is refused by
    # the stand-in, naming the field, and the fork's gates are unknown to it: that is the stand-in, not gpuc.
    for f, obj, answer in answers:
        if t.stand_in and fork_fields(obj):
            assert by_webhook(answer) and all(f'unknown field "{x}"' in answer.message for x in fork_fields(obj)), (f, answer)
    if t.stand_in:
        assert cluster == "staging" and t.dropped == ("FabricTopologySupport",), (t.stand_in, t.dropped)


def test_the_webhook_refuses_only_the_vfio_claims_gpuc_renders_for_passthrough_pools(webhooks: Webhooks, generated: tuple[Path, Path]) -> None:
    """A passthrough workload's claim carries a VfioDeviceConfig with enableAPIDevice (KubeVirt's virt-launcher needs
    /dev/vfio/vfio, which the plugin's DefaultVfioDeviceConfig leaves out: facts capabilities.Passthrough). The webhook
    (main, standing for 0.5; v25.12.0 and v0.4.1 have the same switch) refuses every such claim: its type switch has no
    case for it (cmd/webhook/main.go admitResourceClaimParameters), "expected a recognized configuration type ... but
    got: *v1beta1.VfioDeviceConfig". The webhook is off unless the chart values turn it on, and gpuc refuses passthrough
    pools beside an enabled one (tests/test_seed_patterns_2.py); every other claim of the cluster is admitted."""
    fleet, tree = generated
    t, answers = apply_claims(webhooks, fleet, tree, "vm-05")
    assert t.gates == {"DeviceMetadata": True, "PassthroughSupport": True} and t.stand_in is None
    vfio = {f for f, obj, _ in answers if "vfio.gpu.nvidia.com" in yaml.safe_dump(obj)}
    assert vfio and all("VfioDeviceConfig" in yaml.safe_dump(obj) for f, obj, _ in answers if f in vfio)
    refused = {f: a for f, _, a in answers if a is not None}
    assert set(refused) == vfio, f"the webhook of {t.source} refuses what gpuc renders:\n" + "\n".join(map(str, refused.values()))
    assert all(isinstance(a, Rejection) and "expected a recognized configuration type" in a.message for a in refused.values())


# -- gpuc's checks of opaque configs against the webhook ---------------------------------------------------------------

Damage = Callable[[Any], Any]  # damages a compiled example cluster in place, returns the object it damaged


def _claim(c, name: str) -> Any:
    return next(o for o in c.objects if o.kind in CLAIM_KINDS and name in o.name)


def _ts(c) -> dict[str, Any]:
    """prod-east's small-models claim: GpuConfig, TimeSlicing, interval Long (gate TimeSlicingSettings on)."""
    return claim_devices(_claim(c, "small-models"))["config"][0]["opaque"]["parameters"]


def _mps(c) -> dict[str, Any]:
    """prod-east's batch-embeddings claim: GpuConfig, MPS, 50 % of the SMs, 10Gi pinned (gate MPSSupport on)."""
    return claim_devices(_claim(c, "batch-embeddings"))["config"][0]["opaque"]["parameters"]


def _configure(c, name: str, parameters: dict[str, Any], requests: list[str] | None = None, driver: str = "gpu.nvidia.com") -> Any:
    """Give the claim (template) `name` one opaque config."""
    entry: dict[str, Any] = {"opaque": {"driver": driver, "parameters": {"apiVersion": CONFIG_API, **parameters}}}
    if requests is not None:
        entry["requests"] = requests
    claim_devices(_claim(c, name))["config"] = [entry]
    return _claim(c, name)


def _with_channel(c, parameters: dict[str, Any]) -> Any:
    """prod-east's trainer template with a channel request and a ComputeDomainChannelConfig for it."""
    devices = claim_devices(_claim(c, "trainer"))
    devices["requests"].append({"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}})
    return _configure(c, "trainer", {"kind": "ComputeDomainChannelConfig", **parameters}, ["channel"], "compute-domain.nvidia.com")


def _gate(c, gate: str, on: bool) -> None:
    c.driver_values.setdefault("featureGates", {})[gate] = on


def interval_unknown(c):
    _ts(c)["sharing"]["timeSlicingConfig"]["interval"] = "long"
    return _claim(c, "small-models")


def interval_missing(c):
    _ts(c)["sharing"]["timeSlicingConfig"] = {}
    return _claim(c, "small-models")


def unknown_field(c):
    _ts(c)["sharing"]["timeSlicingConfig"]["intervall"] = "Long"
    return _claim(c, "small-models")


def strategy_missing(c):
    del _mps(c)["sharing"]["strategy"]
    return _claim(c, "batch-embeddings")


def strategy_unknown(c):
    _mps(c)["sharing"]["strategy"] = "Exclusive"
    return _claim(c, "batch-embeddings")


def thread_percentage_over_100(c):
    _mps(c)["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = 101
    return _claim(c, "batch-embeddings")


def thread_percentage_negative(c):
    _mps(c)["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = -1
    return _claim(c, "batch-embeddings")


def thread_percentage_not_an_integer(c):
    _mps(c)["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = 50.5
    return _claim(c, "batch-embeddings")


def memory_limit_not_a_quantity(c):
    _mps(c)["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"] = "10GiB"
    return _claim(c, "batch-embeddings")


def api_version_unknown(c):
    _ts(c)["apiVersion"] = "resource.nvidia.com/v1"
    return _claim(c, "small-models")


def kind_unknown(c):
    _ts(c)["kind"] = "GpuConfiguration"
    return _claim(c, "small-models")


def mig_config_with_time_slicing_config(c):
    return _configure(c, "notebooks", {"kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})


def time_slicing_gate_off(c):
    _gate(c, "TimeSlicingSettings", False)
    return _claim(c, "small-models")


def mps_gate_off(c):
    _gate(c, "MPSSupport", False)
    return _claim(c, "batch-embeddings")


def multi_user_before_0_5(c):
    _mps(c)["sharing"]["mpsConfig"]["multiUser"] = True
    return _claim(c, "batch-embeddings")


def fabric_topology_config_upstream(c):
    _ts(c)["fabricTopologyConfig"] = {"strategy": "Auto"}
    return _claim(c, "small-models")


def mig_time_slicing_gate_off_0_5(c):
    """lab (0.5, the main build): no sharing gate is on there."""
    return _configure(c, "mig-on-demand", {"kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}})


def unknown_field_0_5(c):
    return _configure(c, "allreduce-8way", {"kind": "GpuConfig", "fabricTopologyConfig": {"strategy": "Auto"}})


def mps_with_time_slicing_config(c):
    _mps(c)["sharing"]["timeSlicingConfig"] = {"interval": "Long"}
    return _claim(c, "batch-embeddings")


def time_slicing_with_mps_config(c):
    _ts(c)["sharing"]["mpsConfig"] = {"defaultActiveThreadPercentage": 50}
    return _claim(c, "small-models")


def pinned_memory_below_1mi(c):
    _mps(c)["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"] = "512Ki"
    return _claim(c, "batch-embeddings")


def per_device_pinned_memory_below_1mi(c):
    _mps(c)["sharing"]["mpsConfig"]["defaultPerDevicePinnedMemoryLimit"] = {"0": "512Ki"}
    return _claim(c, "batch-embeddings")


def gpu_config_on_a_mig_request(c):
    return _configure(c, "notebooks", {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}},
                      ["mig-1g-10gb"])


def mig_config_on_a_gpu_request(c):
    return _configure(c, "trainer", {"kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}, ["gpu"])


def channel_config_under_the_gpu_driver(c):
    return _configure(c, "trainer", {"kind": "ComputeDomainChannelConfig", "domainID": "5b1c0a4e-0000-4000-8000-000000000001"}, ["gpu"])


def channel_config_without_domain_id(c):
    return _with_channel(c, {})


def mig_time_slicing_with_mps_config(c):
    return _configure(c, "notebooks", {"kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}}})


def sharing_null(c):
    _ts(c)["sharing"] = None
    return _claim(c, "small-models")


def mps_config_null(c):
    _mps(c)["sharing"]["mpsConfig"] = None
    return _claim(c, "batch-embeddings")


def time_slicing_config_null(c):
    _ts(c)["sharing"]["timeSlicingConfig"] = None
    return _claim(c, "small-models")


def channel_allocation_mode_unknown(c):
    return _with_channel(c, {"domainID": "5b1c0a4e-0000-4000-8000-000000000001", "allocationMode": "Both"})


def gpu_config_under_the_compute_domain_driver(c):
    return _configure(c, "trainer", {"kind": "GpuConfig"}, driver="compute-domain.nvidia.com")


@dataclass(frozen=True)
class Case:
    cluster: str
    damage: Damage
    finding: str  # what gpuc's error says
    webhook: str = ""  # what the API server's refusal says ("" where the webhook admits it)
    why: str = ""  # where the webhook admits it: what the driver does with it


# The webhook refuses what gpuc refuses.
AGREE = [
    Case("prod-east", interval_unknown, "must be one of 'Default', 'Short', 'Medium', 'Long'; got 'long'", "unknown time-slice interval: long"),
    # The webhook crashes on it (TimeSlicingConfig.Validate dereferences the nil interval: a panic net/http recovers
    # by dropping the connection); with failurePolicy Fail the API server refuses the claim anyway.
    Case("prod-east", interval_missing, "required field 'interval' is missing", CALL_FAILED),
    Case("prod-east", unknown_field, "unknown field 'intervall'", 'unknown field "sharing.timeSlicingConfig.intervall"'),
    Case("prod-east", strategy_missing, "required field 'strategy' is missing", "unknown GPU sharing strategy: "),
    Case("prod-east", strategy_unknown, "must be one of 'TimeSlicing', 'MPS'; got 'Exclusive'", "unknown GPU sharing strategy: Exclusive"),
    Case("prod-east", thread_percentage_over_100, "must be at most 100", "active thread percentage must not be greater than 100"),
    Case("prod-east", thread_percentage_negative, "must be at least 0", "active thread percentage must not be negative"),
    Case("prod-east", thread_percentage_not_an_integer, "must be an integer", "error decoding object"),
    Case("prod-east", memory_limit_not_a_quantity, "is not a Kubernetes quantity", "quantities must match the regular expression"),
    Case("prod-east", api_version_unknown, "decodes apiVersion resource.nvidia.com/v1beta1", 'no kind "GpuConfig" is registered for version "resource.nvidia.com/v1"'),
    Case("prod-east", kind_unknown, "has no config kind 'GpuConfiguration'", 'no kind "GpuConfiguration" is registered'),
    Case("prod-east", mig_config_with_time_slicing_config, "unknown field 'timeSlicingConfig'", 'unknown field "sharing.timeSlicingConfig"'),
    Case("prod-east", time_slicing_gate_off, "unless feature gate TimeSlicingSettings is on", "unknown GPU sharing strategy: TimeSlicing"),
    Case("prod-east", mps_gate_off, "unless feature gate MPSSupport is on", "unknown GPU sharing strategy: MPS"),
    Case("prod-east", multi_user_before_0_5, "unknown field 'multiUser'", 'unknown field "sharing.mpsConfig.multiUser"'),
    Case("prod-east", fabric_topology_config_upstream, "unknown field 'fabricTopologyConfig'", 'unknown field "fabricTopologyConfig"'),
    Case("lab", mig_time_slicing_gate_off_0_5, "unless feature gate TimeSlicingSettings is on",
         '"TimeSlicing" is selected as the GPU sharing strategy, but the "TimeSlicingSettings" feature gate is not enabled'),
    Case("lab", unknown_field_0_5, "unknown field 'fabricTopologyConfig'", 'unknown field "fabricTopologyConfig"'),
]

# gpuc refuses, the webhook admits, and the kubelet plugin fails the claim's Prepare: the pod never starts
# (api/nvidia.com/resource/v1beta1 and cmd/*-kubelet-plugin at both builds). gpuc is right to refuse these.
PREPARE_TIME = [
    Case("prod-east", mps_with_time_slicing_config, "timeSlicingConfig only goes with strategy TimeSlicing",
         why="GpuSharing.GetMpsConfig: cannot use TimeSlicingConfig with the 'MPS' strategy (gpu-kubelet-plugin applySharingConfig)"),
    Case("prod-east", time_slicing_with_mps_config, "mpsConfig only goes with strategy MPS",
         why="GpuSharing.GetTimeSlicingConfig: cannot use MpsConfig with the 'TimeSlicing' strategy (applySharingConfig)"),
    Case("prod-east", pinned_memory_below_1mi, "must be at least 1Mi",
         why="MpsPerDevicePinnedMemoryLimit.Normalize: invalid limit: default value set too low (MPS control daemon start)"),
    Case("prod-east", per_device_pinned_memory_below_1mi, "must be at least 1Mi",
         why="MpsPerDevicePinnedMemoryLimit.Normalize: invalid limit: value set too low (MPS control daemon start)"),
    Case("prod-east", gpu_config_on_a_mig_request, "GpuConfig applies only to gpu devices",
         why="gpu-kubelet-plugin prepareDevices: cannot apply GpuConfig to device type mig-static"),
    Case("prod-east", mig_config_on_a_gpu_request, "MigDeviceConfig applies only to mig devices",
         why="gpu-kubelet-plugin prepareDevices: cannot apply MigDeviceConfig to device type gpu"),
    Case("prod-east", channel_config_under_the_gpu_driver, "is decoded by driver compute-domain.nvidia.com, not gpu.nvidia.com",
         why="the webhook decodes and validates it (domainID set); gpu-kubelet-plugin prepareDevices: runtime object is not a recognized configuration"),
    Case("prod-east", channel_config_without_domain_id, "required field 'domainID' is missing",
         why="the webhook does not look at compute-domain.nvidia.com configs; compute-domain-kubelet-plugin: domainID cannot be empty"),
]

# gpuc refuses what no part of the driver refuses (the webhook admits it, the kubelet plugins take or ignore it).
# These tests fail until gpuc accepts them (or only warns).
DISAGREEMENTS = [
    Case("prod-east", mig_time_slicing_with_mps_config, "mpsConfig only goes with strategy MPS",
         why="MigDeviceSharing.Validate takes TimeSlicing without looking at mpsConfig and MigDeviceSharing.GetTimeSlicingConfig "
             "returns nil, nil: the plugin time-slices and ignores mpsConfig (unlike GpuSharing, which refuses the pair)"),
    Case("prod-east", sharing_null, "must be an object, got null",
         why="null decodes as an absent sharing; Normalize gives TimeSlicing with interval Default (gate on)"),
    Case("prod-east", mps_config_null, "must be an object, got null",
         why="null decodes as an absent mpsConfig; Normalize gives an empty MpsConfig (gate MPSSupport on)"),
    Case("prod-east", time_slicing_config_null, "must be an object, got null",
         why="null decodes as an absent timeSlicingConfig; Normalize gives interval Default"),
    Case("prod-east", channel_allocation_mode_unknown, "must be one of 'Single', 'All'; got 'Both'",
         why="no webhook check (driver compute-domain.nvidia.com); compute-domain-kubelet-plugin applyComputeDomainChannelConfig "
             "injects all channels for 'All' and one for anything else; Validate checks only domainID"),
    Case("prod-east", gpu_config_under_the_compute_domain_driver, "GpuConfig is decoded by driver gpu.nvidia.com, not compute-domain.nvidia.com",
         why="no webhook check (not driver gpu.nvidia.com); the gpu plugin skips another driver's config and the compute-domain "
             "plugin applies configs only to its own devices: the config is ignored (gpuc warns, not errs, for configs the driver ignores)"),
]


def _probe(obj: Any, name: str) -> dict[str, Any]:
    """The object under a name no object has: the webhook judges a CREATE of the damage itself."""
    return dict(obj.manifest, metadata=dict(obj.manifest["metadata"], name=f"probe-{name.replace('_', '-')}"))


def _gpuc_errors(c, obj: Any) -> list[str]:
    prefix = f"{obj.kind} {obj.namespace}/{obj.name} "
    return [d.message for d in run_checks(c) if d.severity == "error" and d.message.startswith(prefix)]


def _answer(hooks: Webhooks, c, obj: Any, name: str) -> Any:
    """The API server's answer to a dry-run apply of `obj` with the webhook of `c`'s build at `c`'s gates."""
    gates = dict(c.driver_values.get("featureGates") or {})
    t = target(EXAMPLES, c.cluster.name, gates)
    kube = hooks.kube(t.minor, t.source, t.gates)
    kube.ensure_namespace(obj.namespace)
    return kube.apply(_probe(obj, name), dry_run=True)


def _control(hooks: Webhooks, case: Case) -> None:
    """The undamaged object, at the undamaged cluster's gates, is admitted: a refusal below is the damage's."""
    damaged = example_cluster(case.cluster)
    obj = case.damage(damaged)
    c = example_cluster(case.cluster)
    original = next(o for o in c.objects if (o.kind, o.namespace, o.name) == (obj.kind, obj.namespace, obj.name))
    assert _gpuc_errors(c, original) == []
    answer = _answer(hooks, c, original, f"control-{case.damage.__name__}")
    assert not isinstance(answer, Rejection), answer


@pytest.mark.parametrize("case", AGREE, ids=[c.damage.__name__ for c in AGREE])
def test_the_webhook_refuses_the_configs_gpuc_refuses(webhooks: Webhooks, case: Case) -> None:
    _control(webhooks, case)
    c = example_cluster(case.cluster)
    obj = case.damage(c)
    errors = _gpuc_errors(c, obj)
    assert any(case.finding in m for m in errors), errors
    answer = _answer(webhooks, c, obj, case.damage.__name__)
    refused = by_webhook(answer)
    assert refused, f"the webhook admitted what gpuc refuses ({case.finding}): {answer if isinstance(answer, Rejection) else 'admitted'}"
    assert case.webhook in refused, refused


@pytest.mark.parametrize("case", PREPARE_TIME, ids=[c.damage.__name__ for c in PREPARE_TIME])
def test_what_gpuc_refuses_and_the_webhook_admits_fails_at_prepare(webhooks: Webhooks, case: Case) -> None:
    """The webhook admits these: its verdict is Normalize and Validate of what it decodes. The driver code in `why`
    fails them when the pod's claim is prepared; gpuc refuses them at render time."""
    _control(webhooks, case)
    c = example_cluster(case.cluster)
    obj = case.damage(c)
    errors = _gpuc_errors(c, obj)
    assert any(case.finding in m for m in errors), errors
    answer = _answer(webhooks, c, obj, case.damage.__name__)
    assert not isinstance(answer, Rejection), f"the webhook now refuses it: move the case to AGREE: {answer}"


@pytest.mark.parametrize("case", DISAGREEMENTS, ids=[c.damage.__name__ for c in DISAGREEMENTS])
def test_gpuc_refuses_no_config_the_driver_takes(webhooks: Webhooks, case: Case) -> None:
    """DISAGREEMENTS: the webhook admits these and the kubelet plugins take them (`why`); gpuc refuses them."""
    _control(webhooks, case)
    c = example_cluster(case.cluster)
    obj = case.damage(c)
    answer = _answer(webhooks, c, obj, case.damage.__name__)
    assert not isinstance(answer, Rejection), f"the webhook refuses it: {answer}"
    errors = _gpuc_errors(c, obj)
    assert not any(case.finding in m for m in errors), f"gpuc refuses what the driver takes ({case.why}): {errors}"


# -- the ComputeDomain controller --------------------------------------------------------------------------------------


def simulate_daemons(kube: Kube, cd: dict[str, Any], daemon_set: dict[str, Any], nodes: list[str], namespace: str) -> None:
    """What the driver does on the nodes once the workload's channel claims are prepared there, without GPUs: the
    compute-domain kubelet plugin labels each node with the domain (AddNodeLabel), the DaemonSet's pod runs there
    (there is no DaemonSet controller here: made from its template), becomes Ready with an IP (no kubelet: written
    as one would), and its IMEX daemon joins the domain's ComputeDomainClique <uid>.<cliqueID> with status Ready
    (cmd/compute-domain-daemon cdclique.go; the clique ID is the nodes' NVLink fabric's)."""
    uid = cd["metadata"]["uid"]
    template = daemon_set["spec"]["template"]
    kube.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": template["spec"].get("serviceAccountName", "default"), "namespace": namespace}})
    clique = "gpuc-harness-fabric.1"
    daemons = []
    for i, node in enumerate(nodes):
        kube.dyn.patch(kube.resource("v1", "Node"), name=node, body={"metadata": {"labels": {"resource.nvidia.com/computeDomain": uid}}},
                       content_type="application/merge-patch+json")
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{daemon_set['metadata']['name']}-{node}", "namespace": namespace,
                            "labels": dict(template["metadata"]["labels"]) | {"resource.nvidia.com/computeDomain.cliqueID": clique}},
               "spec": copy.deepcopy(template["spec"]) | {"nodeName": node}}
        kube.create(pod)
        ip = f"10.244.{i}.7"
        status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]}
        for attempt in range(20):  # the claim controller writes the pod's status too (its claims' names)
            try:
                kube.set_status({**pod, "status": status})
                break
            except ConflictError:
                time.sleep(0.1 * attempt)
        else:
            raise AssertionError(f"could not write the status of pod {namespace}/{pod['metadata']['name']}")
        daemons.append({"nodeName": node, "ipAddress": ip, "cliqueID": clique, "index": i, "status": "Ready"})
    kube.create({"apiVersion": CONFIG_API, "kind": "ComputeDomainClique",
                 "metadata": {"name": f"{uid}.{clique}", "namespace": namespace,
                              "labels": {"resource.nvidia.com/computeDomain": uid, "resource.nvidia.com/computeDomain.cliqueID": clique}},
                 "daemons": daemons})


def _stored(kube: Kube, cd: dict[str, Any]) -> dict[str, Any] | None:
    return kube.get(CONFIG_API, "ComputeDomain", cd["metadata"]["name"], cd["metadata"]["namespace"])


def _made_by_the_controller(kube: Kube, controller: ComputeDomainController, cd: dict[str, Any], namespace: str) -> str:
    """The controller's finalizer on the domain, its channel template (the name gpuc gave, class and config of the
    domain), the daemons' DaemonSet and claim template in the driver's namespace; the domain's UID."""
    ns, name = cd["metadata"]["namespace"], cd["metadata"]["name"]
    channel = cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
    stored = wait_for(f"the controller's finalizer on ComputeDomain {ns}/{name}",
                      lambda: (_stored(kube, cd) or {}).get("metadata", {}).get("finalizers"), log=controller.log) and _stored(kube, cd)
    assert stored is not None
    uid = stored["metadata"]["uid"]
    rct = wait_for(f"the channel ResourceClaimTemplate {ns}/{channel}",
                   lambda: kube.get("resource.k8s.io/v1", "ResourceClaimTemplate", channel, ns), log=controller.log)
    request, device_class = compute_domain_channel_request()
    assert device_class == CHANNEL_CLASS
    devices = rct["spec"]["spec"]["devices"]
    assert devices["requests"] == [{"name": request, "exactly": {"deviceClassName": CHANNEL_CLASS, "allocationMode": "ExactCount", "count": 1}}]
    opaque = devices["config"][0]["opaque"]
    assert opaque["driver"] == "compute-domain.nvidia.com"
    assert (opaque["parameters"]["kind"], opaque["parameters"]["domainID"]) == ("ComputeDomainChannelConfig", uid)
    daemons = f"computedomain-daemon-{uid}"
    wait_for(f"the daemons' DaemonSet {namespace}/{daemons}", lambda: kube.get("apps/v1", "DaemonSet", daemons, namespace), log=controller.log)
    wait_for(f"the daemons' ResourceClaimTemplate {namespace}/{daemons}",
             lambda: kube.get("resource.k8s.io/v1", "ResourceClaimTemplate", daemons, namespace), log=controller.log)
    return str(uid)


def _channel_claims_allocated(kube: Kube, ns: str, pods: list[str]) -> None:
    """Each pod's `channel` claim (the claim controller made it from the controller's template) holds a channel."""
    claims = kube.items("resource.k8s.io/v1", "ResourceClaim", ns)
    for pod in pods:
        claim = next(c for c in claims if c["metadata"].get("annotations", {}).get("resource.kubernetes.io/pod-claim-name") == "channel"
                     and any(o["name"] == pod for o in c["metadata"].get("ownerReferences") or []))
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [r["driver"] for r in results] == ["compute-domain.nvidia.com"], (pod, claim["status"])


def _ready(kube: Kube, controller: ComputeDomainController, cd: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        o = _stored(kube, cd) or {}
        status = o.get("status") or {}
        return o if status.get("status") == "Ready" and sorted(n["name"] for n in status.get("nodes") or []) == nodes else None

    return wait_for(f"ComputeDomain {cd['metadata']['name']} Ready on {nodes}", probe, log=controller.log)


def _removed(kube: Kube, controller: ComputeDomainController, cd: dict[str, Any], uid: str, namespace: str) -> None:
    """Deleting the domain: the controller removes its channel template, the daemons' DaemonSet and template and the
    nodes' domain label, then its finalizer, and the domain goes."""
    ns, name = cd["metadata"]["namespace"], cd["metadata"]["name"]
    channel = cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
    kube.dyn.delete(kube.resource(CONFIG_API, "ComputeDomain"), name=name, namespace=ns)

    def gone() -> bool:
        left = (_stored(kube, cd), kube.get("resource.k8s.io/v1", "ResourceClaimTemplate", channel, ns),
                kube.get("apps/v1", "DaemonSet", f"computedomain-daemon-{uid}", namespace),
                kube.get("resource.k8s.io/v1", "ResourceClaimTemplate", f"computedomain-daemon-{uid}", namespace))
        labelled = [n for n in kube.items("v1", "Node") if n["metadata"].get("labels", {}).get("resource.nvidia.com/computeDomain") == uid]
        return all(x is None for x in left) and not labelled

    wait_for(f"ComputeDomain {ns}/{name} and what the controller made for it removed", gone, log=controller.log)


@pytest.mark.parametrize(("fleet_name", "cluster"), [("examples", "prod-east"), ("generated", "nvl-05")])
def test_the_compute_domain_controller_serves_the_compute_domains_gpuc_renders(fresh_plane, tmp_path: Path, fleet_name: str,
                                                                              cluster: str) -> None:
    fleet = EXAMPLES if fleet_name == "examples" else generated_fleet(tmp_path / "fleet")
    out = tmp_path / "rendered"
    rendered = gpuc("render", str(fleet), "-o", str(out), "--cluster", cluster, "--allow-infeasible")
    assert rendered.code == 0, rendered.err
    t = target(fleet, cluster, rendered_gates(out / cluster))
    assert t.stand_in is None
    outcome = compile_fleet(fleet, CompileOptions(only=cluster, detail=True, allow_infeasible=True)).clusters[cluster]
    compiled, placement = outcome.compiled, outcome.placement
    assert compiled is not None and placement is not None
    domains = [obj for _, obj in tree_objects(out / cluster) if obj["kind"] == "ComputeDomain"]
    assert domains and compiled.channels, f"{cluster} renders no ComputeDomain"

    cp = fresh_plane(t.minor)
    kube = Kube(cp)
    namespace = compiled.cluster.spec.dra_driver.namespace
    controller = start_compute_domain_controller(cp, t.source, tmp_path / "controller", namespace=namespace, feature_gates=t.gates)
    try:
        api_version = compiled.cluster.api.api_version
        publish_inventory(kube, synthesize_for(compiled), api_version)
        publish_classes(kube, compiled, api_version)
        rejected, lost = apply_tree(kube, out / cluster, crds_of(fleet, cluster))
        assert [str(r) for r in rejected] == [] and lost == []
        uids = {}
        for cd in domains:
            workload = f"{cd['metadata']['namespace']}/{cd['metadata']['labels']['gpuc.dev/workload']}"
            # the name gpuc's pods take their channel claims from is the one the domain asks the controller for
            assert compiled.channels[workload] == cd["spec"]["channel"]["resourceClaimTemplate"]["name"]
            uids[workload] = _made_by_the_controller(kube, controller, cd, namespace)

        # gpuc's pods in gpuc's placement order, each with a channel claim made from the controller's template
        verdicts = schedule_plan(kube, compiled, placement, dict(compiled.channels))
        assert verdicts.differences == []
        for cd in domains:
            ns = cd["metadata"]["namespace"]
            workload = f"{ns}/{cd['metadata']['labels']['gpuc.dev/workload']}"
            pods = [p.pod for p in placement.pods if p.workload == workload]
            assert len(pods) > 1 and all(p in verdicts.bound for p in pods), (workload, verdicts.unschedulable)
            _channel_claims_allocated(kube, ns, pods)
            nodes = sorted({verdicts.bound[p] for p in pods})
            # Before any daemon joins: NotReady while numNodes (25.x requires it) counts more nodes than have joined;
            # without numNodes (0.4+, gpuc leaves it out) the controller calls the domain Ready at once (0 >= 0).
            before = "NotReady" if cd["spec"].get("numNodes") else "Ready"
            wait_for(f"ComputeDomain {ns}/{cd['metadata']['name']} {before} before its daemons join",
                     lambda: (_stored(kube, cd) or {}).get("status", {}).get("status") == before, log=controller.log)  # noqa: B023
            stored = _stored(kube, cd)
            daemon_set = kube.get("apps/v1", "DaemonSet", f"computedomain-daemon-{uids[workload]}", namespace)
            assert stored is not None and daemon_set is not None
            simulate_daemons(kube, stored, daemon_set, nodes, namespace)
            ready = _ready(kube, controller, cd, nodes)
            assert all(n["status"] == "Ready" for n in ready["status"]["nodes"]), ready["status"]
            _removed(kube, controller, cd, uids[workload], namespace)
    finally:
        controller.stop()
