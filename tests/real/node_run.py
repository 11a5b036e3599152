"""A rendered cluster run on mock GPU nodes (harness/node.py): the shared part of tests/real/test_real_kubelet_plugin.py.

For each node of the cluster gpuc places pods on, when its pool's GPU model has a mock profile (harness/node.py
MODEL_PROFILES), no MIG layout (the mock has no MIG) and at most 8 GPUs, a mock node runs under the node's own name:
the real gpu-kubelet-plugin of the cluster's driver build, configured as gpuc's rendered values configure the chart
(feature gates, driver root, consumable shares), publishes that node's slices. Every other node gets the slices gpuc
synthesizes for it (as tests/real/test_real_scheduler.py publishes them), and `NodePlan.why` says why it has no plugin.
Then gpuc's plan is replayed against the real scheduler pod by pod (harness/scheduling.py schedule_plan) and the
kubelet's DRA part prepares every pod bound on a mock node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place import synthesize_for
from compiler.place.inventory.codec import inventory_list
from harness import dra_driver
from harness.dra_driver import ComputeDomainController, start_compute_domain_controller
from harness.kube import Kube, Rejection
from harness.node import CD_DRIVER, GPU_DRIVER, IMEX_MAJOR, ComputeDomainDaemons, MockNodes, NodeSetup, NodeSpec, PodRecord, profile_for
from harness.scheduling import Verdicts, publish_classes, schedule_plan
from harness.trees import tree_objects

from conftest import gpuc
from real.waiting import wait_for

Obj = dict[str, Any]
SETTLED_AFTER = 3  # failed prepares of a pod before the tests take its failure as the plugin's answer
CLAIM_OBJECTS = ("Namespace", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ComputeDomain")


@dataclass(frozen=True)
class Target:
    """The cluster as its nodes run it: the driver line, the build standing for it, what gpuc configured."""

    cluster: str
    line: str
    source: str
    stand_in: str | None  # why another line's build runs, None when it is the line's own
    setup: NodeSetup
    dropped: tuple[str, ...]  # gates gpuc derives that the build does not know (the 25.8 fork's)


def target(fleet: Path, tree: Path, cluster: str) -> Target:
    spec = yaml.safe_load((fleet / "clusters" / f"{cluster}.yaml").read_text())["spec"]
    dra = spec["draDriver"]
    line = ".".join(str(dra["version"]).split(".")[:2])
    source, stand_in = dra_driver.source_for_line(line)
    chart = "nvidia-dra-driver-gpu" if line.startswith("25.") else "dra-driver-nvidia-gpu"
    namespace = dra.get("namespace") or chart
    image = ((dra.get("values") or {}).get("image") or {})
    name = f"{image.get('repository', 'registry.example.com/dra-driver-nvidia-gpu')}:{image.get('tag', source)}"
    setup = NodeSetup.from_values(tree / cluster / "values", namespace, name)
    known = dra_driver.known_feature_gates(source)
    dropped = tuple(sorted(g for g in setup.gates if g not in known))
    setup.gates = {g: on for g, on in setup.gates.items() if g in known}
    return Target(cluster, line, source, stand_in, setup, dropped)


@dataclass(frozen=True)
class NodePlan:
    node: str
    pool: str
    model: str
    spec: NodeSpec | None
    why: str = ""  # why the node runs no plugin


def node_plans(compiled: Any, placement: Any, t: Target, api_version: str, all_nodes: bool = False) -> list[NodePlan]:
    """One plan per DRA node of the cluster: a mock node where gpuc places a pod (every node with `all_nodes`) and the
    mock can be the node's GPUs."""
    from compiler.place.inventory.synth import node_names

    used = {p.node for p in placement.pods if p.node}
    plans = []
    cluster = compiled.cluster
    for pool in cluster.dra_pools:
        model = pool.spec.gpu.model
        profile, why = profile_for(model)
        mig = bool(pool.mig_layout) or pool.mig_dynamic
        labels = tuple(sorted((compiled.node_labels or {}).get(pool.name, {}).items()))
        for node in node_names(pool):
            if profile is None:
                plans.append(NodePlan(node, pool.name, model, None, why))
            elif mig:
                plans.append(NodePlan(node, pool.name, model, None, "the mock has no MIG: it cannot be a pool with a MIG layout"))
            elif pool.spec.gpu.count > 8:
                plans.append(NodePlan(node, pool.name, model, None, "the mock simulates at most 8 GPUs"))
            elif node not in used and not all_nodes:
                plans.append(NodePlan(node, pool.name, model, None, "gpuc places no pod there"))
            else:
                driver = pool.spec.driver_version or "580.95.5"
                # the compute-domain plugin where a ComputeDomain can work (multi-node NVLink: GB200); elsewhere its
                # two devices are gpuc's synthesized ones
                cd = t.setup.compute_domains and pool.gpu.multi_node_nvlink
                spec = NodeSpec(node, profile, pool.spec.gpu.count, t.source, t.setup, labels, driver_version=driver,
                                compute_domains=cd, api_version=api_version)
                plans.append(NodePlan(node, pool.name, model, spec))
    return plans


def publish_synthesized(kube: Kube, compiled: Any, nodes: set[str], drivers: tuple[str, ...]) -> int:
    """gpuc's synthesized slices of `drivers` on `nodes` (the Nodes registered as harness/scheduling.py does)."""
    from harness.kubelet import add_node

    inventory = synthesize_for(compiled)
    api_version = compiled.cluster.api.api_version
    for n in inventory.nodes:
        if n.name in nodes and kube.get("v1", "Node", n.name) is None:
            add_node(kube, n.name, dict(n.labels))
    count = 0
    for s in inventory_list(inventory)["items"]:
        if s["spec"].get("nodeName") in nodes and s["spec"]["driver"] in drivers:
            s["apiVersion"] = api_version
            result = kube.apply(s)
            assert not isinstance(result, Rejection), result
            count += 1
    return count


class ComputeDomainSide:
    """The ComputeDomain controller of one driver build on the module's control plane (its CRDs with it: main's
    controller refuses v25.12.0's), and the daemons' part (harness/node.py ComputeDomainDaemons); started when a
    cluster renders ComputeDomains, replaced when the next one needs another build or gates."""

    def __init__(self, mock: MockNodes, workdir: Path) -> None:
        self.mock, self.workdir = mock, workdir
        self.controller: ComputeDomainController | None = None
        self.daemons: ComputeDomainDaemons | None = None

    def ensure(self, t: Target) -> None:
        c = self.controller
        if c is not None and (c.source, c.namespace, c.feature_gates) == (t.source, t.setup.namespace, t.setup.gates):
            return
        self.stop()
        self.controller = start_compute_domain_controller(self.mock.cp, t.source, self.workdir / t.source, namespace=t.setup.namespace,
                                                          feature_gates=t.setup.gates)
        self.daemons = ComputeDomainDaemons(self.mock, t.setup.namespace)

    def stop(self) -> None:
        if self.daemons is not None:
            self.daemons.stop()
        if self.controller is not None:
            self.controller.stop()
        self.controller = self.daemons = None


@dataclass
class ClusterRun:
    cluster: str
    target: Target
    compiled: Any
    placement: Any
    plans: list[NodePlan]
    verdicts: Verdicts | None = None
    objects: list[Obj] = field(default_factory=list)  # what was applied of the tree

    @property
    def mock_nodes(self) -> set[str]:
        return {p.node for p in self.plans if p.spec is not None}

    def pods_on_mock_nodes(self) -> list[Any]:
        return [p for p in self.placement.pods if p.node in self.mock_nodes]


def render(fleet: Path, out: Path) -> Path:
    result = gpuc("render", str(fleet), "-o", str(out), "--allow-infeasible")
    assert result.code == 0, result.err
    return out


def start_cluster(mock: MockNodes, fleet: Path, tree: Path, cluster: str, *, api_version: str = "v1",
                  all_nodes: bool = False, domains: ComputeDomainSide | None = None) -> ClusterRun:
    """Mock nodes for the cluster's nodes (one after the other: each plugin starts in about 2 s of one core), gpuc's
    slices for the others, the chart's DeviceClasses and gpuc's claims and ComputeDomains (with `domains`' controller
    making the channel claim templates gpuc's pods name); no pod yet."""
    kube = mock.kube
    t = target(fleet, tree, cluster)
    outcome = compile_fleet(fleet, CompileOptions(only=cluster, detail=True, allow_infeasible=True)).clusters[cluster]
    compiled, placement = outcome.compiled, outcome.placement
    assert compiled is not None and placement is not None
    plans = node_plans(compiled, placement, t, api_version, all_nodes)
    run = ClusterRun(cluster, t, compiled, placement, plans)
    if compiled.channels:
        assert domains is not None, f"{cluster} renders ComputeDomains: start_cluster needs a ComputeDomainSide"
        domains.ensure(t)
    for plan in plans:
        if plan.spec is not None:
            mock.add(plan.spec)
    others = {p.node for p in plans if p.spec is None}
    publish_synthesized(kube, compiled, others, (GPU_DRIVER, CD_DRIVER))
    if t.setup.compute_domains:  # the compute-domain plugin's two devices where it does not run: gpuc's
        publish_synthesized(kube, compiled, {p.node for p in plans if p.spec is not None and not p.spec.compute_domains}, (CD_DRIVER,))
    publish_classes(kube, compiled, compiled.cluster.api.api_version)
    for _, obj in tree_objects(tree / cluster):
        if obj["kind"] in CLAIM_OBJECTS:
            if obj["metadata"].get("namespace"):
                kube.ensure_namespace(obj["metadata"]["namespace"])
            result = kube.apply(obj)
            assert not isinstance(result, Rejection), result
            run.objects.append(obj)
    for key, name in compiled.channels.items():  # the controller's channel templates, under the names gpuc's pods use
        ns = key.split("/")[0]
        wait_for(f"the ComputeDomain controller's channel template {ns}/{name}",
                 lambda: kube.get("resource.k8s.io/v1", "ResourceClaimTemplate", name, ns), 60)  # noqa: B023
    return run


def schedule_and_prepare(mock: MockNodes, run: ClusterRun, timeout: float = 120) -> dict[str, PodRecord]:
    """gpuc's plan replayed against the scheduler, then every pod bound on a mock node prepared (or failed): pod name
    -> what kubelet's DRA part did for it."""
    run.verdicts = schedule_plan(mock.kube, run.compiled, run.placement, dict(run.compiled.channels))
    on_mock = [(p.workload.split("/")[0], p.pod) for p in run.placement.pods
               if p.pod in run.verdicts.bound and run.verdicts.bound[p.pod] in run.mock_nodes]

    def settled() -> bool:  # prepared, or failed as often as kubelet's first retries (a failure may pass: the node-wide
        k = mock.kubelet      # prepare lock the plugin holds while an MPS daemon starts times other prepares out)
        return all((key in k.records and k.records[key].prepared) or len(k.failures.get(key, [])) >= SETTLED_AFTER for key in on_mock)

    wait_for(f"kubelet's DRA part done with the {len(on_mock)} pods of {run.cluster} on mock nodes", settled, timeout)
    return {name: mock.kubelet.records[(ns, name)] for ns, name in on_mock if (ns, name) in mock.kubelet.records}


def stop_cluster(mock: MockNodes, run: ClusterRun, timeout: float = 120) -> list[str]:
    """Delete the cluster's pods (kubelet's DRA part unprepares their claims), its claims and classes, stop its mock
    nodes and remove every node; what failed to unprepare."""
    kube = mock.kube
    pods = [p for p in kube.items("v1", "Pod") if (p["metadata"].get("labels") or {}).get("gpuc.dev/harness") == "true"]
    for p in pods:
        try:
            kube.dyn.delete(kube.resource("v1", "Pod"), name=p["metadata"]["name"], namespace=p["metadata"]["namespace"])
        except Exception:  # gone already
            pass
    keys = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}

    def gone() -> bool:
        left = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in kube.items("v1", "Pod")}
        return not (keys & left) and not any(k in mock.kubelet.records and not mock.kubelet.records[k].unprepared for k in keys)

    wait_for(f"the pods of {run.cluster} deleted and their claims unprepared", gone, timeout)
    mock.kubelet.wait_idle()
    failed = [m for k in keys for m in mock.kubelet.failures.get(k, []) if m.startswith("unprepare")]
    for obj in reversed(run.objects):
        if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ComputeDomain"):
            try:
                kube.dyn.delete(kube.resource(obj["apiVersion"], obj["kind"]), name=obj["metadata"]["name"],
                                namespace=obj["metadata"].get("namespace"))
            except Exception:  # gone with its namespace's cleanup, or never made
                pass
    # what the plugins and the controller made on the nodes goes too (an MPS daemon's Deployment, deleted in the
    # foreground at unprepare; a ComputeDomain's daemons), its pods ended by kubelet's part while the nodes are there
    nodes = run.mock_nodes

    def nothing_on_the_nodes() -> bool:
        mps = [d for d in kube.items("apps/v1", "Deployment", run.target.setup.namespace) if d["metadata"]["name"].startswith("mps-control-daemon-")]
        return not mps and not [p for p in kube.items("v1", "Pod") if p["spec"].get("nodeName") in nodes]

    wait_for(f"no pod left on the mock nodes of {run.cluster}", nothing_on_the_nodes, timeout)
    for key in keys:
        mock.kubelet.records.pop(key, None)
        mock.kubelet.failures.pop(key, None)
    for plan in run.plans:
        if plan.spec is not None:
            mock.remove(plan.node)
        else:
            mock.delete_node(plan.node)
    return failed


# -- what a prepared pod must show ---------------------------------------------------------------------------------------

INTERVALS = {"Default": 0, "Short": 1, "Medium": 2, "Long": 3}  # TimeSliceInterval.Int() (api/nvidia.com/resource/v1beta1)


def _host(root: str, path: str) -> str:
    return str(Path(root) / path.lstrip("/"))


def _sharing(claim: Obj) -> list[tuple[list[str], Obj]]:
    """(requests it applies to, [] for all) and the GpuConfig sharing of each opaque config of `claim` for driver gpu.nvidia.com."""
    out = []
    for c in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        opaque = c.get("opaque") or {}
        params = opaque.get("parameters") or {}
        if opaque.get("driver") == GPU_DRIVER and params.get("kind") == "GpuConfig" and params.get("sharing"):
            out.append((list(c.get("requests") or []), params["sharing"]))
    return out


def check_prepared(mock: MockNodes, run: ClusterRun, records: dict[str, PodRecord], skip: Iterable[str] = ()) -> list[str]:
    """Every pod gpuc places on a mock node, as kubelet's DRA part left it: a problem per line, none when
    - the real scheduler bound it where gpuc placed it and allocated the devices gpuc chose;
    - each of its claims was prepared by the plugin of the claim's driver on that node, with the allocated devices;
    - each container gets exactly the CDI devices of the claims (requests) it names, and those resolve in the plugins'
      CDI specs to the allocated GPUs' device nodes (/dev/nvidia<minor>) and the driver's files, under the driver root
      gpuc configured (for a channel, its IMEX channel's device node);
    - the opaque configs gpuc wrote took effect: TimeSlicing ran `nvidia-smi compute-policy --set-timeslice <interval>`
      on the allocated GPUs, MPS set them EXCLUSIVE_PROCESS and started a control daemon for them (driver root gpuc's,
      the thread percentage and memory limits gpuc set) whose pipe and shm the container mounts.
    The pods in `skip` (what the mock cannot be) are left out."""
    problems: list[str] = []
    assert run.verdicts is not None
    skip = set(skip)
    problems += [d for d in run.verdicts.differences if not any(f" pod {p}:" in d for p in skip)]
    kube = mock.kube
    root = run.target.setup.driver_root
    for outcome in run.pods_on_mock_nodes():
        if outcome.pod in skip:
            continue
        ns = outcome.workload.split("/")[0]
        who = f"{outcome.workload} pod {outcome.pod}"
        record = records.get(outcome.pod)
        failures = mock.kubelet.failures.get((ns, outcome.pod), [])
        if record is None or not record.prepared:
            problems.append(f"{who}: not prepared: {failures or 'no attempt'}")
            continue
        node = mock.node(record.node)
        gpu_plugin = node.plugins.get(GPU_DRIVER)
        uuids = {d["name"]: d["attributes"]["uuid"]["string"] for s in (gpu_plugin.slices(kube) if gpu_plugin else [])
                 for d in s["spec"].get("devices") or [] if "uuid" in d.get("attributes", {})}
        smi = gpu_plugin.nvidia_smi_calls() if gpu_plugin else []
        for placed in outcome.claims:
            rec = record.claims.get(placed.label)
            if rec is None:
                problems.append(f"{who}: claim {placed.label} not prepared")
                continue
            claim = kube.get("resource.k8s.io/v1", "ResourceClaim", rec.name, ns) or {}
            results = claim["status"]["allocation"]["devices"]["results"]
            allocated = sorted((r["driver"], r["pool"], r["device"]) for r in results)
            # which devices of a pool: the plugins publish a node's GPUs in Go map order (the module's docstring)
            per_request = Counter((r["request"], r["driver"], r["pool"]) for r in results)
            chosen = Counter((d.request, d.driver, d.pool) for d in placed.devices)
            if per_request != chosen:
                problems.append(f"{who} claim {placed.label}: the scheduler allocated {sorted(per_request.items())}, gpuc chose {sorted(chosen.items())}")
            got = sorted((d["driver"], d["poolName"], d["deviceName"]) for d in rec.devices)
            if got != allocated:
                problems.append(f"{who} claim {placed.label}: the plugin prepared {got}, the allocation is {allocated}")
            for requests, sharing in _sharing(claim):
                gpus = [uuids[d["deviceName"]] for d in rec.devices
                        if d["driver"] == GPU_DRIVER and (not requests or set(d["requestNames"]) & set(requests))]
                if sharing.get("strategy") == "TimeSlicing":
                    interval = INTERVALS[(sharing.get("timeSlicingConfig") or {}).get("interval", "Default")]
                    missing = [u for u in gpus if f"compute-policy -i {u} --set-timeslice {interval}" not in smi]
                    if missing:
                        problems.append(f"{who} claim {placed.label}: no time slice {interval} set on {missing}: nvidia-smi ran {smi}")
                elif sharing.get("strategy") == "MPS":
                    problems += _check_mps(kube, who, placed.label, run, rec.uid, gpus, sharing.get("mpsConfig") or {}, smi, record)
        for container, ids in record.containers.items():
            edits = record.edits[container]
            if edits["missing"]:
                problems.append(f"{who} container {container}: CDI devices no spec defines: {edits['missing']}")
            wanted = [i for rec in record.claims.values() for d in rec.devices for i in d["cdiDeviceIDs"]]
            if sorted(ids) != sorted(wanted):
                problems.append(f"{who} container {container}: CDI devices {ids}, its claims' are {wanted}")
            nodes = {n["path"]: n.get("hostPath", n["path"]) for n in edits["deviceNodes"]}
            specs = {n["path"]: n for n in edits["deviceNodes"]}
            for rec in record.claims.values():
                for d in rec.devices:
                    name = d["deviceName"]
                    if d["driver"] == GPU_DRIVER and name.startswith("gpu-"):
                        path = f"/dev/nvidia{name.split('-')[1]}"
                        if nodes.get(path) != _host(root, path):
                            problems.append(f"{who} container {container}: {name} is not {path} from the driver root {root}: {nodes}")
                    elif d["driver"] == CD_DRIVER and name.startswith("channel-"):
                        # the channel's node is made from its major and minor (the IMEX channels' major in the node's
                        # /proc/devices), not bound from a host path (internal/common/nvcaps.go CDICharDevNode)
                        path = f"/dev/nvidia-caps-imex-channels/channel{name.split('-')[1]}"
                        got = specs.get(path) or {}
                        if (got.get("type"), got.get("major"), got.get("minor", 0)) != ("c", IMEX_MAJOR, int(name.split("-")[1])):
                            problems.append(f"{who} container {container}: {name} is not the IMEX channel {path}: {got}")
            if any(GPU_DRIVER in r.drivers for r in record.claims.values()):
                for path in ("/dev/nvidiactl", "/dev/nvidia-uvm"):
                    if nodes.get(path) != _host(root, path):
                        problems.append(f"{who} container {container}: {path} is not from the driver root {root}: {nodes}")
                libs = [m for m in edits["mounts"] if "libnvidia-ml.so" in m["containerPath"]]
                if not libs or any(not m["hostPath"].startswith(_host(root, "usr/lib64/")) for m in libs):
                    problems.append(f"{who} container {container}: the NVML library is not mounted from the driver root {root}: {libs}")
    return problems


def _check_mps(kube: Kube, who: str, label: str, run: ClusterRun, claim_uid: str, gpus: list[str], mps: Obj, smi: list[str],
               record: PodRecord) -> list[str]:
    problems = []
    missing = [u for u in gpus if f"-i {u} -c EXCLUSIVE_PROCESS" not in smi]
    if missing:
        problems.append(f"{who} claim {label}: MPS did not set {missing} EXCLUSIVE_PROCESS: nvidia-smi ran {smi}")
    ns = run.target.setup.namespace
    daemons = [d for d in kube.items("apps/v1", "Deployment", ns) if d["metadata"]["name"].startswith(f"mps-control-daemon-{claim_uid}")]
    if len(daemons) != 1:
        return problems + [f"{who} claim {label}: {len(daemons)} MPS control daemon Deployments in {ns}"]
    spec = daemons[0]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env") or []}
    if sorted((env.get("CUDA_VISIBLE_DEVICES") or "").split(",")) != sorted(gpus):
        problems.append(f"{who} claim {label}: the MPS daemon serves {env.get('CUDA_VISIBLE_DEVICES')}, the claim holds {gpus}")
    roots = [v["hostPath"]["path"] for v in spec.get("volumes") or [] if v["name"] == "driver-root"]
    if roots != [run.target.setup.driver_root]:
        problems.append(f"{who} claim {label}: the MPS daemon mounts the driver root {roots}, gpuc configured {run.target.setup.driver_root}")
    script = "\n".join(spec["containers"][0].get("args") or [])
    if "defaultActiveThreadPercentage" in mps and f"set_default_active_thread_percentage {mps['defaultActiveThreadPercentage']}" not in script:
        problems.append(f"{who} claim {label}: the MPS daemon does not set the thread percentage {mps['defaultActiveThreadPercentage']}")
    if "defaultPinnedDeviceMemoryLimit" in mps and "set_default_device_pinned_mem_limit" not in script:
        problems.append(f"{who} claim {label}: the MPS daemon sets no pinned memory limit ({mps['defaultPinnedDeviceMemoryLimit']})")
    mounts = {m["containerPath"] for e in record.edits.values() for m in e["mounts"]}
    env_all = {v for e in record.edits.values() for v in e["env"]}
    if not {"/dev/shm", "/tmp/nvidia-mps"} <= mounts or "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps" not in env_all:
        problems.append(f"{who} claim {label}: the container gets no MPS pipe and shm: {sorted(mounts)} {sorted(env_all)}")
    return problems
