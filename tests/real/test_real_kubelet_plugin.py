"""The node in the loop (issue 45): NVIDIA's real kubelet plugins on NVIDIA's mock NVML publish the slices and
prepare every claim gpuc renders.

One control plane for the module (kube-apiserver, scheduler, claim, workload and garbage controllers at 1.37, with
--allow-privileged for the MPS control daemons); on it, mock GPU nodes (harness/node.py): per node of a cluster, the
real `gpu-kubelet-plugin` of the cluster's driver build (v25.12.0 for 25.12 and, standing in, 25.8; main-9593204 for
0.4 and 0.5) on the mock NVML with the GPU profile of the node's model, configured as gpuc's rendered chart values
configure it (feature gates, driver root), and on GB200 nodes the `compute-domain-kubelet-plugin` beside it; the
kubelet's DRA part (harness/node.py DraKubelet) prepares the claims of every pod the real scheduler binds there, over
the plugins' sockets as kubelet does, and unprepares them when the pod is deleted.

What the kubelet stand-in still plays: container start (no runtime: a pod is reported Running once its claims are
prepared), and so the readiness of the MPS control daemon's pod (the plugin creates its Deployment and waits for the
pod to be Ready, which the stand-in reports) and the ComputeDomain daemons: a daemon pod's claim is prepared by the real
compute-domain plugin, but no compute-domain daemon and no IMEX daemon runs in it; the harness writes the daemon's
entry in the domain's ComputeDomainClique once its pod runs (harness/node.py ComputeDomainDaemons).

What the mock cannot be, and so is not prepared here (each named where the test meets it):
- MIG: the mock has no MIG (no MIG device, no GPU instance profile): a pool with a MIG layout (static or DynamicMIG)
  runs no plugin; its nodes get gpuc's synthesized slices and its pods are scheduled, not prepared. The plugin with
  DynamicMIG on starts on the mock and publishes whole GPUs only.
- Models without a mock profile: A100-80GB (the mock's a100 is the 40 GB board), A30, L4. H200 has none either: its
  mock node runs the mock's h100 profile with the H200's name, memory and PCI device ID as measured on the hardware
  (../shared/reference/hardware/h200), the same GH100 die.
- Fabric Manager partitions (gate FabricManagerPartitioning): the plugin opens Fabric Manager only with an NVSwitch
  under /proc/driver/nvidia-nvswitch and libnvfm.so in the driver root; the mock has neither, so no partition<N>
  attribute is published and a claim matching on one is not allocated (the scheduler's verdict says so).
- The 25.8 fork's fields (fabricTopologyConfig): v25.12.0 stands in for the fork and its strict decoder refuses them at
  Prepare, naming the field (as its webhook does in test_real_dra_driver.py).

Device names: both builds publish a node's GPUs in Go map order (cmd/gpu-kubelet-plugin driver.go publishResources
ranges over a map; DynamicMIG sorts), so which GPUs of a node the scheduler picks for a claim differs from start to
start and from gpuc's plan, which numbers them in order; the tests compare how many devices of which pool each request
got. Values the mock invents are not compared with gpuc's: memory where ../shared/reference/hardware has no dump (the
H100 and H200 mock nodes have the measured memory), UUIDs, PCI addresses and roots, NUMA nodes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compiler.facts.driver import device_attributes, driver_lines
from compiler.place import synthesize_for
from compiler.place.inventory.codec import inventory_list
from harness import components, controlplane
from harness.controlplane import ControlPlane
from harness.kube import Rejection
from harness.node import CD_DRIVER, GPU_DRIVER, MODEL_PROFILES, RECORD_ANNOTATION, MockNodes, NodeSpec, PodRecord, mock_tool
from harness.processes import stop_group
from harness.scheduling import publish_classes, verdict

from check_support import example_cluster
from conftest import EXAMPLES, REFERENCE, cluster_doc, workload_doc, write_fleet
from real import node_run
from real.node_run import ClusterRun, ComputeDomainSide
from real.test_real_dra_driver import PREPARE_TIME, Case, _probe

EXAMPLE_CLUSTERS = ["prod-east", "staging", "lab", "west"]
HARDWARE = REFERENCE / "hardware"
FORK_FIELDS = ("fabricTopologyConfig",)
Obj = dict[str, Any]


# -- the module's control plane and mock nodes -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = controlplane.start(components.newest(), tmp_path_factory.mktemp("node-plane"), scheduler=True, controllers=True,
                            workload_controllers=True, apiserver_args=("--allow-privileged=true",))
    yield cp
    cp.stop()


@pytest.fixture(scope="module")
def mock(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockNodes]:
    nodes = MockNodes(plane, tmp_path_factory.mktemp("mock-nodes"))
    yield nodes
    nodes.stop()


@pytest.fixture(scope="module")
def domains(mock: MockNodes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComputeDomainSide]:
    side = ComputeDomainSide(mock, tmp_path_factory.mktemp("compute-domains"))
    yield side
    side.stop()


@pytest.fixture(scope="module")
def example_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return node_run.render(EXAMPLES, tmp_path_factory.mktemp("examples") / "out")


# -- what the mock cannot be -------------------------------------------------------------------------------------------


def _templates(run: ClusterRun) -> dict[str, Obj]:
    return {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}": o for o in run.objects
            if o["kind"] in ("ResourceClaim", "ResourceClaimTemplate")}


def _claim_spec(obj: Obj) -> Obj:
    return dict(obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"])


def not_preparable(run: ClusterRun) -> dict[str, str]:
    """Pod -> why the mock node cannot prepare it (the module docstring's list), for the pods gpuc places."""
    plans = {p.node: p for p in run.plans}
    objects = _templates(run)
    gates = run.target.setup.gates
    out = {}
    for pod in run.placement.pods:
        if pod.node is None:
            continue
        plan = plans.get(pod.node)
        if plan is not None and plan.spec is None:
            out[pod.pod] = f"node {pod.node} runs no plugin: {plan.why}"
            continue
        for c in pod.claims:
            obj = objects.get(c.source.split(" ", 1)[-1])  # "<kind> <namespace>/<name>"
            spec = _claim_spec(obj) if obj else {}
            params = [(x.get("opaque") or {}).get("parameters") or {} for x in (spec.get("devices") or {}).get("config") or []]
            if run.target.stand_in and any(f in p for p in params for f in FORK_FIELDS):
                out[pod.pod] = f"fork field: {run.target.stand_in}"
            constraints = (spec.get("devices") or {}).get("constraints") or []
            if gates.get("FabricManagerPartitioning") and any("/partition" in str(x.get("matchAttribute", "")) for x in constraints):
                out[pod.pod] = "Fabric Manager partitions: the mock node publishes no partition<N> attribute"
    return out


def _check_exceptions(mock: MockNodes, run: ClusterRun, why: dict[str, str]) -> list[str]:
    """The pods the mock cannot prepare behave as the reason says: a fork field is refused at Prepare naming it; a
    partition claim is not allocated (the scheduler's verdict); a pod on a node without a plugin is bound there."""
    assert run.verdicts is not None
    problems = []
    for pod in run.placement.pods:
        reason = why.get(pod.pod)
        if reason is None:
            continue
        ns = pod.workload.split("/")[0]
        if reason.startswith("fork field"):
            failures = mock.kubelet.failures.get((ns, pod.pod), [])
            if not any(f'unknown field "{f}"' in m for m in failures for f in FORK_FIELDS):
                problems.append(f"{pod.pod}: the stand-in build did not refuse the fork's field at Prepare: {failures}")
        elif reason.startswith("Fabric Manager"):
            if "cannot allocate all claims" not in run.verdicts.unschedulable.get(pod.pod, ""):
                problems.append(f"{pod.pod}: expected unallocatable on the mock node: {run.verdicts.unschedulable.get(pod.pod)}")
        elif run.verdicts.bound.get(pod.pod) != pod.node:
            problems.append(f"{pod.pod}: gpuc places it on {pod.node}, the scheduler bound it to {run.verdicts.bound.get(pod.pod)}")
    return problems


def prepared_problems(mock: MockNodes, run: ClusterRun, records: dict[str, PodRecord]) -> tuple[list[str], dict[str, str]]:
    why = not_preparable(run)
    return node_run.check_prepared(mock, run, records, skip=why) + _check_exceptions(mock, run, why), why


def _clean(mock: MockNodes, run: ClusterRun) -> list[str]:
    """After the pods are gone (and what the plugins started for them: MPS daemons, ComputeDomain daemons): their claims
    unprepared without a failure and no claim's CDI spec left on a node."""
    failed = node_run.stop_cluster(mock, run)
    left = [str(f) for n in run.mock_nodes for f in (mock.state / n / "cdi").glob("*-claim_*.yaml")]  # a claim's spec
    return failed + [f"CDI spec left after unprepare: {f}" for f in left]


# -- the example fleet -------------------------------------------------------------------------------------------------

# What of the example fleet the mock cannot prepare, pinned: a change here is a change of what the suite proves.
EXAMPLE_NOT_PREPARED = {
    "prod-east": {"notebooks-0", "notebooks-1"},  # a100-mig (A100-80GB, MIG all-balanced)
    "staging": {"nccl-allreduce-0"},  # fabricTopologyConfig: the 25.8 fork's field
    "lab": {"mig-on-demand-0", "mig-on-demand-1", "mig-on-demand-2", "allreduce-8way-0"},  # DynamicMIG; FM partitions
    "west": set(),
}


@pytest.mark.parametrize("cluster", EXAMPLE_CLUSTERS)
def test_the_real_plugin_prepares_every_claim_gpuc_places_in_the_example_fleet(mock: MockNodes, domains: ComputeDomainSide,
                                                                               example_tree: Path, cluster: str) -> None:
    run = node_run.start_cluster(mock, EXAMPLES, example_tree, cluster, domains=domains)
    try:
        records = node_run.schedule_and_prepare(mock, run)
        problems, why = prepared_problems(mock, run, records)
        assert problems == [], "\n".join(problems)
        assert set(why) == EXAMPLE_NOT_PREPARED[cluster], why
        placed = {p.pod for p in run.placement.pods if p.node}
        assert {n for n, r in records.items() if r.prepared} == placed - set(why), (sorted(records), sorted(placed))
        # every mock node ran the build of the cluster's line with the gates gpuc rendered
        for name in run.mock_nodes:
            for plugin in mock.node(name).plugins.values():
                assert plugin.source == run.target.source and plugin.setup.gates == run.target.setup.gates
    finally:
        leftovers = _clean(mock, run)
    assert leftovers == [], leftovers


# -- generated fleets: every mock profile, both builds ------------------------------------------------------------------

GENERATED = {  # build -> (Kubernetes minor, driver release, driver root)
    "v25.12.0": ("1.34", "25.12.0", "/"),
    "main-9593204": ("1.37", "0.5.1", "/run/nvidia/driver"),
}


def generated_fleet(root: Path, source: str) -> tuple[Path, str]:
    """A cluster with a pool per model the mock has a profile for (H200 through the harness's), a node or two each, and
    workloads of every kind gpuc renders for whole GPUs: exclusive counts, a shared claim, time-slicing, MPS (25.12) or
    fractional memory (0.5, consumable shares), an alternative, a multi-node job on GB200 (a ComputeDomain)."""
    minor, release, driver_root = GENERATED[source]
    tag = "g12" if source.startswith("v25") else "g05"
    ns = f"gen-{tag}"
    pools = [{"name": f"{tag}-h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": f"{tag}-h200", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}},
             {"name": f"{tag}-a100", "nodes": 1, "gpu": {"model": "A100-40GB", "count": 8}},
             {"name": f"{tag}-b200", "nodes": 1, "gpu": {"model": "B200-180GB", "count": 8}},
             {"name": f"{tag}-gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}},
             {"name": f"{tag}-l40s", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}}]
    name = f"gen-{source.split('-')[0].replace('.', '-')}"
    cluster = cluster_doc(name, kubernetes=minor, driver=release, pools=pools, draDriver={"nvidiaDriverRoot": driver_root},
                          gpuOperator={"mode": "none"},
                          acknowledge=[{"warning": "unchecked-crds", "reason": "generated fleet"},
                                       {"warning": "device-plugin-off", "reason": "the mock nodes run no device plugin"}])
    product = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200", "a100": "NVIDIA A100-SXM4-40GB", "b200": "NVIDIA B200",
               "l40s": "NVIDIA L40S"}
    w = [workload_doc("whole-h100", ns, clusters=[name], replicas=2, gpu={"count": 2, "require": {"productName": product["h100"]}}),
         workload_doc("whole-b200", ns, clusters=[name], gpu={"count": 8, "require": {"productName": product["b200"]}}),
         workload_doc("shared-a100", ns, clusters=[name], replicas=3, gpu={"count": 1, "sharing": "Shared",
                                                                          "require": {"productName": product["a100"]}}),
         workload_doc("sliced-l40s", ns, clusters=[name], replicas=2, gpu={"count": 1, "sharing": "TimeSlicing",
                                                                          "timeSlicing": {"interval": "Short"},
                                                                          "require": {"productName": product["l40s"]}}),
         workload_doc("either", ns, clusters=[name], gpu={"alternatives": [{"count": 2, "require": {"productName": product["l40s"]}},
                                                                           {"count": 1, "require": {"productName": product["h200"]}}]}),
         workload_doc("trainer", ns, clusters=[name], gpu={"count": 4, "multiNode": {"nodes": 2},
                                                                      "require": {"productName": "NVIDIA GB200"}})]
    if source.startswith("v25"):
        w.append(workload_doc("mps-h200", ns, clusters=[name], gpu={"count": 1, "sharing": "MPS",
                                                                   "mps": {"activeThreadPercentage": 25, "pinnedMemoryLimit": "4Gi"},
                                                                   "require": {"productName": product["h200"]}}))
    else:
        w.append(workload_doc("fraction-h200", ns, clusters=[name], replicas=3,
                              gpu={"sharing": "Fractional", "memory": "40Gi", "require": {"productName": product["h200"]}}))
    return write_fleet(root, [cluster], {"w.yaml": w}), name


@pytest.fixture(scope="module", params=list(GENERATED))
def generated(request: pytest.FixtureRequest, mock: MockNodes, domains: ComputeDomainSide,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterRun, Path]]:
    """A generated cluster of the build `request.param`, a mock node on every node (plugins started once per profile
    and build, shared by the tests below), pods not created yet."""
    root = tmp_path_factory.mktemp(f"generated-{request.param}")
    fleet, name = generated_fleet(root / "fleet", request.param)
    tree = node_run.render(fleet, root / "out")
    run = node_run.start_cluster(mock, fleet, tree, name, all_nodes=True, domains=domains)
    yield run, fleet
    shutil.rmtree(root / "out", ignore_errors=True)
    leftovers = _clean(mock, run)
    assert leftovers == [], leftovers


def _devices(slices: list[Obj]) -> dict[str, Obj]:
    return {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}


def _typed(attrs: Obj, driver: str) -> dict[str, str]:
    """qualified name -> its type (string, int, bool, version)."""
    return {(k if "/" in k else f"{driver}/{k}"): next(iter(v)) for k, v in attrs.items()}


def _host_attributes(line: str) -> set[str]:
    """The attributes whose values are the host's (addressingMode, numaNode): gpuc publishes them where a pool declares
    them (nodePools[].host); the mock node's come from its fake sysfs and config."""
    return {f"{f.qualified[0]}/{f.qualified[1]}" for f in device_attributes(driver_lines()[line], "gpu").values() if f.host}


def _capacity_shape(device: Obj) -> Obj:
    """A device's capacities with its memory (a value the mock invents where no dump exists) written as <memory>
    wherever it appears (the value, a request policy's default or bounds)."""
    caps = device.get("capacity") or {}
    memory = (caps.get("memory") or {}).get("value")

    def shape(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shape(x) for k, x in v.items()}
        return "<memory>" if v == memory else v

    return {k: shape(v) for k, v in caps.items()}


IDENTITY = ("productName", "architecture", "brand", "cudaComputeCapability", "type", "driverVersion", "cudaDriverVersion")


def _reference_device(model: str, source: str) -> Obj | None:
    """The device the driver's own enumeration published on the real GPU (../shared/reference/hardware), if measured."""
    folder = {"H100-80GB": "h100-80gb-hbm3", "H200-141GB": "h200"}.get(model)
    if folder is None:
        return None
    name = "driver-v25.12.0-default-gates.json" if source.startswith("v25") else "driver-main-0.5.0-dev-default-gates.json"
    dump = json.loads((HARDWARE / folder / name).read_text())
    first = dump[0]["devices"][0] if "devices" in dump[0] else dump[0]  # main's dump lists slices, v25.12.0's devices
    return dict(first)


@pytest.mark.parametrize("model", sorted(MODEL_PROFILES))
def test_the_slices_the_real_plugin_publishes_are_gpucs_inventory(mock: MockNodes, generated: tuple[ClusterRun, Path], model: str) -> None:
    """On a mock node of each model, the plugin's slices hold gpuc's devices (names), each with gpuc's attributes (names
    and types; the model's identity and the driver's versions by value), capacities (with consumable shares on 0.5, the
    same request policy relative to the device's memory, and allowMultipleAllocations) and no counters (no MIG); gpuc's
    memory is the memory the driver published on the real GPU where one was measured. Where the plugin publishes an
    attribute of the host gpuc leaves out (the pool does not declare its hosts' NUMA nodes), that is the only difference.
    The compute-domain plugin's slice on a GB200 node holds gpuc's two devices with their attributes by value."""
    run, _ = generated
    plan = next(p for p in run.plans if p.model == model and p.spec is not None)
    ours = inventory_list(synthesize_for(run.compiled))["items"]
    gpuc_gpus = _devices([s for s in ours if s["spec"].get("nodeName") == plan.node and s["spec"]["driver"] == GPU_DRIVER])
    plugin = mock.node(plan.node).plugins[GPU_DRIVER]
    theirs = _devices(plugin.slices(mock.kube))
    assert sorted(theirs) == sorted(gpuc_gpus), (plan.node, sorted(theirs), sorted(gpuc_gpus))
    host = _host_attributes(run.target.line)
    for name, ours_dev in gpuc_gpus.items():
        real = theirs[name]
        a, b = _typed(ours_dev.get("attributes") or {}, GPU_DRIVER), _typed(real.get("attributes") or {}, GPU_DRIVER)
        differ = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        assert set(differ) <= host and all(ours_t is None for ours_t, _ in differ.values()), (name, differ)
        for attr in IDENTITY:
            assert ours_dev["attributes"][attr] == real["attributes"][attr], (name, attr, ours_dev["attributes"][attr], real["attributes"][attr])
        assert _capacity_shape(ours_dev) == _capacity_shape(real), (name, ours_dev.get("capacity"), real.get("capacity"))
        assert ours_dev.get("allowMultipleAllocations") == real.get("allowMultipleAllocations"), name
        assert not ours_dev.get("consumesCounters") and not real.get("consumesCounters"), name
    assert not any(s["spec"].get("sharedCounters") for s in plugin.slices(mock.kube))
    # memory and the model's identity against the hardware where it was measured (not against the mock)
    reference = _reference_device(model, run.target.source)
    if reference is not None:
        sample = gpuc_gpus["gpu-0"]
        assert sample["capacity"]["memory"]["value"] == reference["capacity"]["memory"]["value"], (model, sample["capacity"])
        for attr in ("productName", "architecture", "brand", "cudaComputeCapability", "type"):
            assert sample["attributes"][attr] == reference["attributes"][attr], (model, attr)
        names = set(_typed(reference["attributes"], GPU_DRIVER)) - host
        assert names == set(_typed(sample["attributes"], GPU_DRIVER)) - host, (model, names)
    if mock.node(plan.node).plugins.get(CD_DRIVER) is not None:
        cd = _devices(mock.node(plan.node).plugins[CD_DRIVER].slices(mock.kube))
        gpuc_cd = _devices([s for s in ours if s["spec"].get("nodeName") == plan.node and s["spec"]["driver"] == CD_DRIVER])
        assert {n: d.get("attributes") for n, d in cd.items()} == {n: d.get("attributes") for n, d in gpuc_cd.items()}


def test_the_real_plugin_prepares_every_claim_gpuc_places_in_a_generated_fleet(mock: MockNodes, generated: tuple[ClusterRun, Path]) -> None:
    """Every pod of a generated cluster of each build prepared on mock nodes of every profile: a TimeSlicing interval
    set on its GPUs, an MPS daemon started for its GPU (25.12) or a fraction of a GPU's memory shared (0.5: consumable
    shares), a shared claim prepared once for three pods, an alternative's devices, a ComputeDomain's channels."""
    run, _ = generated
    # gpuc places every pod (a pod it cannot place would wait for any node, mock nodes of later tests included)
    assert [p.pod for p in run.placement.pods if p.node is None] == []
    records = node_run.schedule_and_prepare(mock, run)
    problems, why = prepared_problems(mock, run, records)
    assert problems == [] and why == {}, "\n".join(problems) or why
    assert {r.node for r in records.values()} == run.mock_nodes, "every mock node prepares a claim"
    # each kind reached the plugin: one shared claim for three pods, a channel per multi-node pod, and per build the
    # MPS claim (its daemon checked above) or three claims of 40Gi of GPU memory, each a share of its GPU
    shared = {r.claims["gpu"].uid for n, r in records.items() if n.startswith("shared-a100-")}
    assert len(shared) == 1 and sum(n.startswith("shared-a100-") for n in records) == 3, shared
    channels = [r.claims["channel"].devices for n, r in records.items() if n.startswith("trainer-")]
    assert len(channels) == 2 and all(d and d[0]["driver"] == CD_DRIVER for d in channels), channels
    if run.target.line == "25.12":
        assert "mps-h200-0" in records and run.target.setup.gates.get("MPSSupport")
    else:
        claims = [mock.kube.get("resource.k8s.io/v1", "ResourceClaim", r.claims["gpu"].name, r.namespace) or {}
                  for n, r in records.items() if n.startswith("fraction-h200-")]
        shares = [x["status"]["allocation"]["devices"]["results"][0] for x in claims]
        assert len(shares) == 3 and len({s["shareID"] for s in shares}) == 3, shares  # a share of a GPU each
        assert all(s["consumedCapacity"] == {"memory": "40Gi"} for s in shares), shares
        assert run.target.setup.consumable_shares == "memory"


# -- what the webhook admits and the plugin fails at Prepare (test_real_dra_driver.py PREPARE_TIME) ----------------------

# The plugin's own words for each case (a part of the case's `why`, which names the driver code), and how a real
# Prepare shows them here:
# - "answer": the plugin's answer to NodePrepareResources carries them (the pod never starts);
# - "log": the compute-domain plugin retries a config it cannot validate until its own 45 s limit (the error is not
#   permanent), so kubelet's call (45 s too; 10 s on this node) ends in DeadlineExceeded, or the plugin's answer
#   leaves the claim out (kubelet: "skipped 1 ResourceClaims"): the words are in the plugin's log;
# - "ignored": on Kubernetes 1.37 the scheduler drops a config's `requests` when they name every request of the claim
#   (k8s.io/dynamic-resource-allocation v0.37 allocator, "empty means all"; v0.34 to v0.36 keep them), and the plugin
#   then skips a MigDeviceConfig for a GPU instead of refusing it: Prepare succeeds with the default GpuConfig. The
#   harness's scheduler is 1.37 (emulating an older minor does not bring the older allocator back): the refusal the
#   case names is that of 1.34 to 1.36, and on 1.37 the config is silently ignored; gpuc refuses it on both;
# - "no MIG": the claim needs a MIG device, which the mock cannot be: the scheduler finds none.
AT_PREPARE = {
    "mps_with_time_slicing_config": ("cannot use TimeSlicingConfig with the 'MPS' strategy", "answer"),
    "time_slicing_with_mps_config": ("cannot use MpsConfig with the 'TimeSlicing' strategy", "answer"),
    "pinned_memory_below_1mi": ("invalid limit: default value set too low", "answer"),
    "per_device_pinned_memory_below_1mi": ("invalid limit: value set too low", "answer"),
    "gpu_config_on_a_mig_request": ("cannot apply GpuConfig to device type mig-static", "no MIG"),
    "mig_config_on_a_gpu_request": ("cannot apply MigDeviceConfig to device type gpu", "ignored"),
    "channel_config_under_the_gpu_driver": ("runtime object is not a recognized configuration", "answer"),
    "channel_config_without_domain_id": ("domainID cannot be empty", "log"),
}


@pytest.fixture(scope="module")
def prod_east_nodes(mock: MockNodes, example_tree: Path) -> Iterator[dict[str, str]]:
    """Two mock nodes as prod-east runs them (v25.12.0, its gates and driver root): an H100 node and a GB200 node with
    the compute-domain plugin; pool -> node name. Their own names: the example test's prod-east nodes come and go."""
    t = node_run.target(EXAMPLES, example_tree, "prod-east")
    specs = {"h100": NodeSpec("pt-h100-0", MODEL_PROFILES["H100-80GB"], 8, t.source, t.setup),
             # kubelet waits 45 s for an answer; 10 s here: a channel config the compute-domain plugin cannot
             # validate is retried until its own 45 s limit, and the answer is the same, sooner
             "gb200": NodeSpec("pt-gb200-0", MODEL_PROFILES["GB200-186GB"], 4, t.source, t.setup, compute_domains=True, call_timeout=10)}
    for spec in specs.values():
        mock.add(spec)
    yield {pool: spec.name for pool, spec in specs.items()}
    for spec in specs.values():
        mock.remove(spec.name)


def _prepare_time_pod(name: str, namespace: str, obj: Obj, node: str) -> Obj:
    source = {"resourceClaimTemplateName": obj["metadata"]["name"]} if obj["kind"] == "ResourceClaimTemplate" else \
        {"resourceClaimName": obj["metadata"]["name"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": {"gpuc.dev/harness": "true"}},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "c"}]}}],
                     "resourceClaims": [{"name": "c", **source}], "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0,
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
                     "tolerations": [{"operator": "Exists"}]}}


@pytest.mark.parametrize("case", PREPARE_TIME, ids=[c.damage.__name__ for c in PREPARE_TIME])
def test_what_the_webhook_admits_fails_at_a_real_prepare_for_the_reason_named(mock: MockNodes, prod_east_nodes: dict[str, str],
                                                                             case: Case) -> None:
    """The configs gpuc refuses that the webhook admits (tests/real/test_real_dra_driver.py PREPARE_TIME): the claim,
    damaged as the case says, allocated by the real scheduler on a prod-east mock node and handed to the real plugin as
    kubelet hands it: Prepare fails for the reason the case's `why` names and the pod never starts, but where AT_PREPARE
    says otherwise (a MIG device the mock cannot be; a config Kubernetes 1.37 makes the plugin ignore)."""
    words, how = AT_PREPARE[case.damage.__name__]
    assert words in case.why, (words, case.why)
    c = example_cluster(case.cluster)
    obj = case.damage(c)
    manifest = _probe(obj, case.damage.__name__)
    kube = mock.kube
    ns = manifest["metadata"]["namespace"]
    kube.ensure_namespace(ns)
    publish_classes(kube, c, c.cluster.api.api_version)
    node = prod_east_nodes["gb200" if "trainer" in obj.name else "h100"]
    pod_name = f"pt-{case.damage.__name__.replace('_', '-')}"[:60]
    created = kube.apply(manifest)
    assert not isinstance(created, Rejection), created
    kube.apply(_prepare_time_pod(pod_name, ns, manifest, node))
    try:
        where, why = verdict(kube, ns, pod_name, 60)
        if how == "no MIG":
            assert where is None and "cannot allocate all claims" in why, (where, why)
            return
        assert where == node, why
        if how == "ignored":
            record = node_run.wait_for(f"{pod_name} prepared", lambda: (r := mock.kubelet.records.get((ns, pod_name))) and r.prepared and r, 60)
            claim = kube.get("resource.k8s.io/v1", "ResourceClaim", record.claims["c"].name, ns) or {}
            configs = claim["status"]["allocation"]["devices"]["config"]
            assert [x.get("requests") for x in configs] == [None] and _claim_spec(manifest)["devices"]["config"][0]["requests"], configs
            return
        failures = node_run.wait_for(f"{pod_name}'s prepare failing", lambda: mock.kubelet.failures.get((ns, pod_name)), 90)
        if how == "log":
            plugin = mock.node(node).plugins[CD_DRIVER]
            # kubelet's call ends at its deadline, or the plugin gives up first and its answer leaves the claim out
            assert any("DeadlineExceeded" in f or "skipped 1 ResourceClaims" in f for f in failures), failures
            assert f"{pod_name}" in plugin.log.read_text() and words in plugin.log.read_text(), plugin.log_tail()
        else:
            assert any(words in f for f in failures), failures
        record = mock.kubelet.records.get((ns, pod_name))
        assert record is None or not record.prepared
        pod = kube.get("v1", "Pod", pod_name, ns) or {}
        assert (pod.get("status") or {}).get("phase") != "Running", "the stand-in started a pod whose claims failed to prepare"
    finally:
        kube.dyn.delete(kube.resource("v1", "Pod"), name=pod_name, namespace=ns)
        node_run.wait_for(f"{pod_name} gone and unprepared", lambda: kube.get("v1", "Pod", pod_name, ns) is None
                          and (ns, pod_name) not in mock.kubelet.records, 60)
        kube.dyn.delete(kube.resource(manifest["apiVersion"], manifest["kind"]), name=manifest["metadata"]["name"], namespace=ns)
        mock.kubelet.failures.pop((ns, pod_name), None)


# -- kubelet's gRPC side: registration, health, both API versions --------------------------------------------------------


@pytest.mark.parametrize("source", list(GENERATED))
def test_kubelet_registers_each_build_and_prepares_with_dra_api_v1beta1_as_with_v1(mock: MockNodes, example_tree: Path, source: str) -> None:
    """kubelet's plugin watcher takes each build's registration (a DRA plugin of its driver, serving v1 and v1beta1 of
    the DRA gRPC API); both API versions answer the plugin's own liveness calls; a pod's claim prepared over v1beta1 (as
    a 1.32 or 1.33 kubelet speaks) gets the devices and CDI spec it gets over v1, and unprepare over v1beta1 removes it."""
    t = node_run.target(EXAMPLES, example_tree, "prod-east" if source.startswith("v25") else "west")
    spec = NodeSpec(f"api-{source.split('-')[0].replace('.', '')}-0", MODEL_PROFILES["H100-80GB"], 2, source, t.setup, api_version="v1beta1")
    node = mock.add(spec)
    kube, ns, name = mock.kube, "api-versions", f"claimer-{source.split('-')[0].replace('.', '')}"
    try:
        plugin = node.plugins[GPU_DRIVER]
        assert plugin.info == {"type": "DRAPlugin", "name": GPU_DRIVER, "endpoint": str(plugin.endpoint),
                               "supportedVersions": ["v1.DRAPlugin", "v1beta1.DRAPlugin"]}, plugin.info
        assert mock.client.health(plugin, "v1") == "" and mock.client.health(plugin, "v1beta1") == ""
        kube.ensure_namespace(ns)
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_DRIVER, "count": 2}}]}}}
        kube.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU_DRIVER},
                    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == 'gpu'"}}]}})
        kube.apply(claim)
        kube.apply(_prepare_time_pod(name, ns, claim, spec.name))
        record = node_run.wait_for(f"{name} prepared over v1beta1", lambda: (r := mock.kubelet.records.get((ns, name))) and r.prepared and r, 60)
        devices = record.claims["c"].devices
        assert sorted(d["deviceName"] for d in devices) == ["gpu-0", "gpu-1"] and all(d.get("shareID") is None for d in devices)
        uid = record.claims["c"].uid
        assert record.containers["main"] == [f"k8s.gpu.nvidia.com/claim={uid}-{d}" for d in ("gpu-0", "gpu-1")] or \
            sorted(record.containers["main"]) == sorted(f"k8s.gpu.nvidia.com/claim={uid}-{d}" for d in ("gpu-0", "gpu-1"))
        assert (plugin.cdi_dir / f"k8s.gpu.nvidia.com-claim_{uid}.yaml").is_file()
        assert json.loads(kube.get("v1", "Pod", name, ns)["metadata"]["annotations"][RECORD_ANNOTATION]) == record.containers
        kube.dyn.delete(kube.resource("v1", "Pod"), name=name, namespace=ns)
        node_run.wait_for(f"{name}'s claim unprepared", lambda: not (plugin.cdi_dir / f"k8s.gpu.nvidia.com-claim_{uid}.yaml").exists(), 60)
        assert not mock.kubelet.failures.get((ns, name))
    finally:
        for kind, n in (("Pod", name), ("ResourceClaim", name)):
            api = "v1" if kind == "Pod" else "resource.k8s.io/v1"
            if kube.get(api, kind, n, ns) is not None:
                kube.dyn.delete(kube.resource(api, kind), name=n, namespace=ns)
        node_run.wait_for("no pod left on the node", lambda: not [p for p in kube.items("v1", "Pod") if p["spec"].get("nodeName") == spec.name], 60)
        mock.remove(spec.name)


# -- MIG: what the mock can show -----------------------------------------------------------------------------------------


def test_with_dynamic_mig_on_the_plugin_turns_mig_mode_off_on_hopper_gpus_of_whole_gpu_pools(mock: MockNodes, example_tree: Path) -> None:
    """The mock has no MIG (no MIG device, no GPU instance profile), but it answers MIG mode: with lab's gates (DynamicMIG
    on for its h100-dynmig pool) the plugin on a node of lab's whole-GPU H200 pool runs DynamicMIG on every GPU it
    finds, and at start sets MIG mode off on each Hopper GPU without MIG devices (nvlib.go maybeDisableMigMode: an
    `nvidia-smi -mig 1` done at boot is undone), while on Ampere it leaves MIG mode alone (no reset-less toggle). With no
    MIG profile to offer, the mock node publishes whole GPUs only; on real GPUs the same start publishes every MIG
    placement (../shared/reference/hardware/*/driver-main-0.5.0-dev-dynamic-mig.json)."""
    t = node_run.target(EXAMPLES, example_tree, "lab")
    assert t.setup.gates.get("DynamicMIG") is True
    specs = [NodeSpec("dm-h200-0", MODEL_PROFILES["H200-141GB"], 2, t.source, t.setup),
             NodeSpec("dm-a100-0", MODEL_PROFILES["A100-40GB"], 2, t.source, t.setup)]
    try:
        logs = {}
        for spec in specs:
            plugin = mock.add(spec).plugins[GPU_DRIVER]
            logs[spec.name] = plugin.log.read_text()
            assert sorted(_devices(plugin.slices(mock.kube))) == ["gpu-0", "gpu-1"], spec.name
        assert "DynamicMIG enabled" in logs["dm-h200-0"]
        for i in range(2):
            assert f"Called nvml.SetMigMode(nvml.DEVICE_MIG_DISABLE) for device gpu-{i}-" in logs["dm-h200-0"], i
        assert "SetMigMode(nvml.DEVICE_MIG_DISABLE)" not in logs["dm-a100-0"]
        assert "skipping MIG mode disable (architecture does not support reset-less MIG toggling)" in logs["dm-a100-0"]
    finally:
        for spec in specs:
            mock.remove(spec.name)


# -- ComputeDomains: what of IMEX runs without hardware ------------------------------------------------------------------


def test_the_mocks_fake_imex_serves_daemons_that_name_peers_by_ip_not_by_the_dns_names_gpucs_drivers_write(
        example_tree: Path, tmp_path: Path) -> None:
    """The mock's fake IMEX (k8s-test-infra cmd/fake-imex, deprecated there for the real nvidia-imex in --nogpu mode)
    replaces `nvidia-imex` and `nvidia-imex-ctl` in a ComputeDomain daemon's container: the daemon writes a marker per
    pod IP, the ctl reports READY when every peer nodes.cfg lists has one. It runs without hardware for peers named by
    IP. The compute-domain daemon of both builds, with IMEXDaemonsWithDNSNames on (the default, and gpuc leaves it on),
    writes nodes.cfg as DNS names, compute-domain-daemon-%04d for each possible node (cmd/compute-domain-daemon
    dnsnames.go WriteNodesConfig), which the fake ctl refuses as peers: a daemon pod would never become Ready. So no
    compute-domain daemon runs here and its part (the domain's clique entry) is played (harness/node.py)."""
    for cluster in ("prod-east", "lab", "west"):
        assert node_run.target(EXAMPLES, example_tree, cluster).setup.gates.get("IMEXDaemonsWithDNSNames", True) is True
    state, nodes = tmp_path / "state", tmp_path / "nodes.cfg"
    env = {"PATH": "/usr/bin:/bin", "IMEX_STATE_DIR": str(state), "IMEX_NODES_CONFIG": str(nodes), "POD_IP": "10.0.0.1"}
    nodes.write_text("10.0.0.1\n")
    daemon = subprocess.Popen([str(mock_tool("fake-imex")), "-c", "/imexd/imexd.cfg"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        node_run.wait_for("the fake IMEX daemon's marker", (state / "10.0.0.1").exists, 30)
        ready = subprocess.run([str(mock_tool("fake-imex-ctl")), "-c", "/imexd/imexd.cfg", "-q"], env=env, capture_output=True, text=True)
        assert (ready.returncode, ready.stdout) == (0, "READY\n"), ready
        nodes.write_text("".join(f"compute-domain-daemon-{i:04d}\n" for i in range(2)))
        named = subprocess.run([str(mock_tool("fake-imex-ctl")), "-c", "/imexd/imexd.cfg", "-q"], env=env, capture_output=True, text=True)
        assert named.returncode != 0 and "compute-domain-daemon-0000 not ready" in named.stderr, named
    finally:
        stop_group(daemon)
