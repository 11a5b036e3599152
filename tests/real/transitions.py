"""A staged change driven through the real GitOps path: a cluster synced by the real Argo CD with workloads bound by the
real scheduler, `gpuc upgrade` run on the change, and each step of its plan committed, synced and checked in order.

`Transition.start()` gives a GitOpsRun (tests/real/gitops.py) of a small fleet plus what a transition needs beside it:
the DRA kubelet plugin stand-in (harness/dra_plugin.py) publishing gpuc's own inventory for each Running pod of the
driver releases' kubelet-plugin DaemonSets, the device plugin stand-in (harness/device_plugin.py) where the test asks
for it, and watches (harness/watch.py) of DaemonSets, ResourceSlices and Nodes for the whole run, which the
assertions replay event by event. `Checks` evaluates a step's `before` and `done` checks (plan.json: kind + target,
compiler/emit/upgrade/model.py Check) against the live cluster; the ones that are things a user does by hand
(cordon, drain, uncordon, upgrading the control plane, restarting the kubelet plugin) it does, as the user would.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import yaml

from compiler.emit.upgrade.shape import shape_of
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place.allocator import cluster_pods
from harness import argocd, controlplane, helm, servers
from harness.argocd import GitRepo
from harness.device_plugin import DevicePluginStandIn
from harness.dra_plugin import PUBLISHER_POD, SlicePublisher
from harness.kube import Kube
from harness.kubelet import KubeletStandIn
from harness.mig_manager import MigManagerStandIn
from harness.pulumi import Run, Stack
from harness.watch import Event, Recorder
from modules.program import deploy

from conftest import REPO
from real.gitops import GitOpsRun, add_nodes, chart_folder, gpuc, place_chart

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
GPU = "nvidia.com/gpu"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
# What Node Feature Discovery and GPU Feature Discovery put on a GPU node (the DRA kubelet plugin's default affinity
# needs the PCI vendor label, the GPU Operator its OS and kernel labels, its operands nvidia.com/gpu.present): the test
# sets them when it registers a GPU node.
GPU_NODE_LABELS = {"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true",
                   "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                   "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
                   "feature.node.kubernetes.io/kernel-version.full": "6.8.0-60-generic"}
# A node without GPUs besides them: where the charts' controllers go again when a step drains the GPU nodes.
WORKER = "worker-0"
PAUSE = "registry.k8s.io/pause:3.10"  # never pulled: the kubelet stand-in reports it running
TIMEOUT = 600  # one wait: a chart's deletion or a sync on a shared 2-core machine


class Catalog:
    """The hardware as gpuc models it: for a kubelet-plugin DaemonSet (the release that runs it), a node and the MIG
    layout applied there, the ResourceSlices `gpuc inventory` gives for that node. Built from every fleet the run goes
    through (the base and the head), so each release publishes with its own driver's attributes."""

    def __init__(self) -> None:
        self.entries: dict[tuple[tuple[str, str], str, str], list[Obj]] = {}
        self.mig: MigManagerStandIn | None = None  # who knows the layout a node's GPUs have now, when one runs

    def add(self, fleet: Path, cluster: str, by_operator: tuple[str, str] | None = None) -> tuple[str, str] | None:
        """Add what `fleet`'s DRA driver of `cluster` publishes; the (namespace, name) of its kubelet-plugin DaemonSet:
        its release's, or `by_operator` where the GPU Operator's GPUCluster installs the driver (gpuc does not name the
        operator's DaemonSet; the caller does)."""
        outcome = compile_fleet(fleet, CompileOptions(only=cluster, detail=True, allow_infeasible=True)).clusters[cluster]
        assert outcome.compiled is not None, outcome.infeasible
        shape = shape_of(outcome.compiled)
        if shape.driver is not None:
            plugin = (shape.driver.namespace, shape.driver.daemonset)
        elif shape.driver_by_operator and by_operator is not None:
            plugin = by_operator
        else:
            return None
        layout = {n: labels.get(MIG_CONFIG, "") for p in outcome.compiled.cluster.pools
                  for labels in [outcome.compiled.node_labels.get(p.name, {})] for n in _nodes(p)}
        result = gpuc("inventory", fleet, "--cluster", cluster, "--output", "json")
        assert result.returncode == 0, result.stderr
        by_node: dict[str, list[Obj]] = {}
        for s in json.loads(result.stdout)["items"]:
            by_node.setdefault(s["spec"]["nodeName"], []).append(s)
        for node, slices in by_node.items():
            key = (plugin, node, layout.get(node, ""))
            # the same devices, whichever resource.k8s.io version each fleet's minor writes them in (1.33: v1beta2); the
            # first fleet's (the base's) kept: a plugin publishes in the version its cluster served when the run began
            assert _unversioned(self.entries.get(key, slices)) == _unversioned(slices), f"two fleets model {key} differently"
            self.entries.setdefault(key, slices)
        return plugin

    def devices(self, plugin: tuple[str, str], node: Obj) -> list[Obj]:
        """What the plugin finds on `node` as it starts: its GPUs as the MIG Manager stand-in last partitioned them
        (else as its mig.config label says: a layout applied before the cluster was synced)."""
        name = node["metadata"]["name"]
        if self.mig is not None and name in self.mig.applied:
            layout = self.mig.applied[name]
        else:
            layout = (node["metadata"].get("labels") or {}).get(MIG_CONFIG, "")
        return copy.deepcopy(self.entries.get((plugin, name, layout), []))

    def layout(self, plugin: tuple[str, str], node: str, config: str) -> set[str]:
        """The device names of `node` under MIG config `config`."""
        return {d["name"] for s in self.entries.get((plugin, node, config), []) for d in s["spec"]["devices"]}


def _nodes(pool: Any) -> list[str]:
    from compiler.place.inventory.synth import node_names

    return list(node_names(pool))


@dataclass
class PodRecord:
    uid: str
    node: str
    claims: dict[str, str]  # claim name -> UID


@dataclass(kw_only=True)
class Live:
    """A cluster going through a transition, however it is deployed: its control plane, the stand-ins and watches,
    the fleet in a git repository (`gpuc upgrade --base` reads its history), and the pods of gpuc's workloads."""

    cp: controlplane.ControlPlane
    kube: Kube  # the test's own client (each stand-in and watch has one of its own)
    repo: GitRepo
    fleet: Path
    cluster: str
    catalog: Catalog
    plugins: set[tuple[str, str]]
    publisher: SlicePublisher
    daemonsets: Recorder
    slices: Recorder
    nodes: Recorder
    argo: argocd.ArgoCD | None = None  # None: no Argo CD (the stack deploys)
    device_plugin: DevicePluginStandIn | None = None
    extra: list[Any] = field(default_factory=list)  # other stand-ins the test started (stopped first)
    base: str = ""
    head: Path = Path()  # the fleet with the change made (what the last step commits)
    synced_at: float = 0.0  # when the base was running (time.monotonic())
    running: dict[str, PodRecord] = field(default_factory=dict)  # ns/name -> what ran at the base (or was last started)
    manual: list[str] = field(default_factory=list)  # checks only a person can do, as the plan words them
    skipped: list[str] = field(default_factory=list)  # checks of a deployer this run does not have (Argo CD's, under Pulumi)

    def stop(self) -> None:
        """The stand-ins and watches first, then what deploys (Argo CD, the stack) and the control plane."""
        for part in [*self.extra, self.device_plugin, self.publisher, self.daemonsets, self.slices, self.nodes]:
            if part is not None:
                part.stop()
        self.stop_deployer()

    def stop_deployer(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def cluster_file(self) -> Path:
        return self.fleet / "clusters" / f"{self.cluster}.yaml"

    # -- the pods of gpuc's workloads ---------------------------------------------------------------------------------

    def start_pods(self, names: list[str] | None = None, fleet: Path | None = None, wait: bool = True) -> dict[str, PodRecord]:
        """Create the pods of gpuc's workloads (all, or `names`: ns/name) as a user's Deployment would, referencing the
        claim templates and shared claims of the tree now deployed, and (`wait`) wait until the real scheduler bound
        each with its claims allocated and the kubelet stand-in reports it Running."""
        if names == []:
            return {}
        compiled = compile_fleet(fleet or self.fleet, CompileOptions(only=self.cluster, detail=True,
                                                                   allow_infeasible=True)).clusters[self.cluster].compiled
        assert compiled is not None
        pods = {f"{p.workload.split('/')[0]}/{p.name}": p for p in cluster_pods(compiled)}
        wanted = names if names is not None else sorted(pods)
        for key in wanted:
            self.kube.create(user_pod(pods[key]))
        if not wait:
            return {}
        out = {key: self.wait_running(key) for key in wanted}
        self.running.update(out)
        return out

    def wait_running(self, key: str, timeout: float = TIMEOUT) -> PodRecord:
        found: PodRecord = wait_until(lambda: pod_record(self.kube, key), f"pod {key} bound, Running, with its claims allocated",
                                      timeout, self.argo)
        return found

    def follow(self, step: Obj, drained: list[str]) -> None:
        """What the users' controllers do after a step: a pod the step restarts (drained by the step's checks) or starts
        (new in it) is created again from the step's tree, and must then run with its claims allocated; one the step
        says waits is created too, and must stay Pending, unschedulable."""
        fates = {f["pod"]: f["fate"] for f in step["pods"]}
        missing = [k for k, fate in sorted(fates.items()) if fate in ("restarted", "placed", "waiting")
                   and self.kube.get("v1", "Pod", k.split("/")[1], k.split("/")[0]) is None]
        assert not [k for k in missing if fates[k] == "restarted" and k not in drained], \
            f"step {step['step']} restarts pods its checks never took down: {missing}"
        self.start_pods([k for k in missing if fates[k] != "waiting"])
        self.start_pods([k for k in missing if fates[k] == "waiting"], wait=False)
        for key, fate in sorted(fates.items()):
            if fate in ("restarted", "placed"):
                self.running[key] = self.wait_running(key)
            elif fate == "waiting":
                wait_until(lambda key=key: unschedulable(self.kube, key), f"pod {key} Pending, unschedulable (the plan says it "
                           "waits)", TIMEOUT, self.argo)

    # -- When --------------------------------------------------------------------------------------------------------

    def upgrade(self, out: Path) -> Obj:
        """`gpuc upgrade FLEET --base <base> -o OUT`, as the user runs it on the change in the working tree (kept: the
        last step commits it); the cluster's plan.json."""
        self.head = out.parent / "head-intent"
        shutil.copytree(self.fleet, self.head)
        result = gpuc("upgrade", self.fleet, "--base", self.base, "--cluster", self.cluster, "-o", out)
        assert result.returncode == 0, result.stderr
        plan = json.loads((out / self.cluster / "plan.json").read_text())
        (cluster,) = plan["clusters"]
        return cluster

    def write_step(self, step: Obj) -> None:
        """The fleet as plan.md tells the user to commit the step: a step with a transition is the fleet as the cluster
        runs it (the base) with the step's fields set (`intent`, dotted paths in the Cluster document) and
        spec.transition added; the last step is the change itself."""
        shutil.rmtree(self.fleet)
        if step["transition"] is None:
            shutil.copytree(self.head, self.fleet)
            return
        self.repo.git("checkout", self.base, "--", str(self.fleet.relative_to(self.repo.path)))
        doc = yaml.safe_load(self.cluster_file.read_text())
        for dotted, value in step["intent"].items():
            *parents, leaf = dotted.split(".")
            node = doc
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        doc["spec"]["transition"] = step["transition"]
        self.cluster_file.write_text(yaml.safe_dump(doc, sort_keys=False))

    def drain(self, nodes: list[str]) -> list[str]:
        """`kubectl drain --ignore-daemonsets`: every pod on `nodes` but a DaemonSet's is deleted; their ns/names."""
        out = []
        for pod in self.kube.items("v1", "Pod"):
            owners = {r.get("kind") for r in pod["metadata"].get("ownerReferences") or []}
            if pod["spec"].get("nodeName") in nodes and "DaemonSet" not in owners and not pod["metadata"].get("deletionTimestamp"):
                meta = pod["metadata"]
                self.kube.dyn.delete(self.kube.resource("v1", "Pod"), name=meta["name"], namespace=meta["namespace"])
                out.append(f"{meta['namespace']}/{meta['name']}")
        return out

    def cordon(self, nodes: list[str], on: bool) -> None:
        for n in nodes:
            self.kube.dyn.patch(self.kube.resource("v1", "Node"), name=n, body={"spec": {"unschedulable": on or None}},
                                content_type="application/merge-patch+json")

    # -- Then --------------------------------------------------------------------------------------------------------

    def assert_kept(self, step: Obj) -> None:
        """Every pod the step keeps runs on: the same pod (UID) on the same node, its claims the same (UID) and allocated."""
        for fate in step["pods"]:
            if fate["fate"] != "kept":
                continue
            key = fate["pod"]
            assert key in self.running, f"step {step['step']} keeps {key}, which never ran"
            now = pod_record(self.kube, key)
            assert now == self.running[key], f"step {step['step']} keeps {key}: before {self.running[key]}, now {now}"

    def assert_still_running(self, exclude: set[str]) -> None:
        """Every pod that ran (at the base, or since it was last started) and was not taken down still runs as it did."""
        for key, before in sorted(self.running.items()):
            if key not in exclude:
                now = pod_record(self.kube, key)
                assert now == before, f"{key} no longer runs as it did: before {before}, now {now}"
        for key in exclude:
            self.running.pop(key, None)


def _watch(cp: controlplane.ControlPlane, kubelet: KubeletStandIn, catalog: Catalog, plugins: set[tuple[str, str]],
           gpu_nodes: dict[str, int], device_plugin: bool, mig_manager: bool) -> dict[str, Any]:
    """The watches and stand-ins a transition runs beside its control plane (Live's fields)."""
    started: list[Any] = []
    try:
        resources = Kube(cp).preferred("resource.k8s.io")  # v1beta2 at 1.33; kept served through an upgrade by the plan
        for api, kind in (("apps/v1", "DaemonSet"), (resources, "ResourceSlice"), ("v1", "Node")):
            started.append(Recorder(cp, api, kind))
        if mig_manager:
            catalog.mig = MigManagerStandIn(cp, list(gpu_nodes))
            started.append(catalog.mig)
        publisher = SlicePublisher(cp, kubelet, plugins, catalog.devices)
        started.append(publisher)
        dp = DevicePluginStandIn(cp, gpu_nodes) if device_plugin else None
    except BaseException:
        for part in started:
            part.stop()
        raise
    daemonsets, slices, nodes = started[:3]
    return {"catalog": catalog, "plugins": plugins, "publisher": publisher, "daemonsets": daemonsets, "slices": slices,
            "nodes": nodes, "device_plugin": dp, "extra": [catalog.mig] if catalog.mig else []}


@dataclass(kw_only=True)
class Transition(Live):
    """A cluster synced by the real Argo CD: a GitOpsRun, its fleet in the repository Argo CD reads."""

    run: GitOpsRun
    root: str = ""

    @classmethod
    def start(cls, workdir: Path, given: Path, change: Callable[[Path], None], *, cluster: str = "c1", gpu_nodes: dict[str, int],
              node_labels: dict[str, dict[str, str]] | None = None, device_plugin: bool = False,
              mig_manager: bool = False, operator_plugin: tuple[str, str] | None = None) -> Transition:
        """A GitOpsRun of `given` with `gpu_nodes` (name -> GPUs, each with GPU_NODE_LABELS and `node_labels`), the
        kubelet plugin stand-in for the driver releases of the base and of the head (`change` applied to a copy of the
        fleet), the device plugin and MIG Manager stand-ins when asked, and the watches."""
        nodes = {WORKER: {}, **{n: {**GPU_NODE_LABELS, **(node_labels or {}).get(n, {})} for n in gpu_nodes}}
        run = GitOpsRun.start(workdir, cluster, given, nodes=nodes)
        run.kubelet.full_grace = True  # a deleted pod stops when its grace period ends: no order holds by quickness
        try:
            catalog = Catalog()
            head = _changed(run.fleet, change, workdir)
            plugins = {p for p in (catalog.add(run.fleet, cluster, operator_plugin), catalog.add(head, cluster, operator_plugin)) if p}
            parts = _watch(run.cp, run.kubelet, catalog, plugins, gpu_nodes, device_plugin, mig_manager)
        except BaseException:
            run.stop()
            raise
        run.repo.copy_tree(run.fleet, "fleet")  # the fleet lives in the repository: gpuc upgrade reads its history
        run.fleet = run.repo.path / "fleet"
        return cls(run=run, cp=run.cp, kube=run.kube, repo=run.repo, fleet=run.fleet, cluster=cluster, argo=run.argo, **parts)

    def stop_deployer(self) -> None:
        self.run.stop()

    def sync_base(self) -> str:
        """The base rendered, committed and synced through the app-of-apps: every Application Synced and Healthy."""
        self.base = self.run.render("base")
        self.root = self.run.sync_app_of_apps()
        self.wait_synced(self.base)
        self.synced_at = time.monotonic()
        return self.base

    def wait_synced(self, revision: str, timeout: float = TIMEOUT) -> None:
        """The root Application and every child Synced and Healthy at `revision` (an app whose sources did not change
        is compared again, not synced: no new operation is waited for)."""
        argo = self.run.argo
        argo.refresh(self.root)
        argo.wait(self.root, revision=revision, phase=None, timeout=timeout)
        for name in sorted(self.run.applications()):
            if name != self.root:
                argo.wait(name, revision=revision, phase=None, timeout=timeout)

    def commit_step(self, step: Obj, plan_dir: Path) -> str:
        """The fleet written as the step says, rendered and committed: the step's commit, whose tree must be the plan's
        step-N/rendered byte for byte."""
        self.write_step(step)
        revision = self.run.render(f"step {step['step']}: {step['title']}")
        planned = plan_dir / self.cluster / f"step-{step['step']}" / "rendered"
        assert tree(self.run.tree) == tree(planned), f"step {step['step']}'s render is not the tree its plan shows"
        for name in self.run.applications():
            self.run.argo.refresh(name)
        return revision

    def app_resources(self, name: str) -> dict[tuple[str, str, str], str]:
        app = self.run.argo.application(name) or {}
        return {(r["kind"], r.get("namespace") or "", r["name"]): r.get("status", "")
                for r in (app.get("status") or {}).get("resources") or [] if not r.get("hook")}

    def assert_manages_the_head(self, removed_apps: set[str]) -> None:
        """What Argo CD manages is the head's rendered tree: the Applications are the head's (and the root), none of the
        base's removed ones; the tree's Application manages exactly the rendered objects and each chart's Application
        exactly what its chart renders with the head's values, every one Synced."""
        head_apps = {yaml.safe_load(f.read_text())["metadata"]["name"] for f in (self.run.tree / "argocd").glob("*.yaml")
                     if f.name != "kustomization.yaml" and yaml.safe_load(f.read_text())["kind"] == "Application"}
        assert set(self.run.applications()) == head_apps | {self.root}, (sorted(self.run.applications()), sorted(head_apps))
        assert not removed_apps & set(self.run.applications())
        rendered = {(o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in self.run.rendered_objects()}
        managed = self.app_resources(f"{self.run.cluster}-gpuc")
        assert set(managed) == rendered, f"managed {sorted(managed)}\nrendered {sorted(rendered)}"
        for name in sorted(head_apps - {f"{self.run.cluster}-gpuc"}):
            managed = self.app_resources(name)
            expected = chart_objects(self.run, name)
            assert set(managed) == expected, f"{name}: managed {sorted(set(managed) - expected)} not rendered, " \
                                             f"rendered {sorted(expected - set(managed))} not managed"
            assert {s for s in managed.values()} == {"Synced"}, f"{name}: {managed}"
        assert set(self.app_resources(f"{self.run.cluster}-gpuc").values()) == {"Synced"}


@dataclass(kw_only=True)
class StackTransition(Live):
    """A cluster deployed by `pulumi up` of its stack with the real engine and Kubernetes provider (harness/pulumi.py:
    the stack program runs as the Automation API's inline program), from a project of its own: a git repository with
    the fleet under fleet/ and the real charts its Helm releases install under charts/ (spec.charts directory mode).
    The API server, scheduler and controllers are the GitOps runs' (the kubelet stand-in too); there is no Argo CD."""

    stack: Stack
    kubelet: KubeletStandIn
    stand_ins: list[str] = field(default_factory=list)  # which chart is installed for which version

    @classmethod
    def start(cls, workdir: Path, given: Path, change: Callable[[Path], None], *, cluster: str = "c1",
              gpu_nodes: dict[str, int]) -> StackTransition:
        minor = str(yaml.safe_load((given / "clusters" / f"{cluster}.yaml").read_text())["spec"]["kubernetesVersion"])
        release, emulated = servers.server_for(minor, newest=True)
        cp = controlplane.start(release, workdir / "control-plane", emulated_minor=emulated, scheduler=True, controllers=True,
                                workload_controllers=True, apiserver_args=("--allow-privileged=true",))
        kubelet: KubeletStandIn | None = None
        try:
            kube = Kube(cp)
            add_nodes(kube, {name: dict(GPU_NODE_LABELS) for name in gpu_nodes})
            kubelet = KubeletStandIn(Kube(cp), full_grace=True)
            project = workdir / "project"
            repo = GitRepo.init(project)
            fleet = project / "fleet"
            shutil.copytree(given, fleet)
            edit_spec(fleet, lambda spec: spec.update(charts={"mirror": {"directory": "charts"}}), cluster)
            head = _changed(fleet, change, workdir)
            stand_ins = place_charts(project, fleet, cluster) + place_charts(project, head, cluster)
            catalog = Catalog()
            plugins = {p for p in (catalog.add(fleet, cluster), catalog.add(head, cluster)) if p}
            parts = _watch(cp, kubelet, catalog, plugins, gpu_nodes, False, False)
            stack_file = workdir / f"Pulumi.{cluster}.yaml"
            stack_file.write_text(yaml.safe_dump({"config": {"gpuc:fleet": "fleet"}}))
            stack = Stack(cluster, lambda: deploy(project), workdir / "pulumi", REPO / "Pulumi.yaml", stack_file,
                          {"gpuc:kubeconfig": (str(cp.kubeconfig()), True)})
        except BaseException:
            if kubelet is not None:
                kubelet.stop()
            cp.stop()
            raise
        base = repo.commit("base")
        return cls(stack=stack, kubelet=kubelet, stand_ins=stand_ins, cp=cp, kube=kube, repo=repo, fleet=fleet, cluster=cluster,
                   base=base, **parts)

    def stop_deployer(self) -> None:
        self.kubelet.stop()
        self.cp.stop()

    def up(self) -> Run:
        run = self.stack.up()
        if not self.synced_at:
            self.synced_at = time.monotonic()
        return run


def place_charts(project: Path, fleet: Path, cluster: str) -> list[str]:
    """Unpack each chart the cluster's releases pin where spec.charts says (charts/<chart>-<version>), as the README
    tells users; a version with no chart of its own gets the nearest one of its line with that version in its
    Chart.yaml (Pulumi installs a chart folder only at the version the release pins). What stands in for what."""
    outcome = compile_fleet(fleet, CompileOptions(only=cluster, allow_infeasible=True)).clusters[cluster]
    assert outcome.compiled is not None, outcome.infeasible
    notes = []
    for r in outcome.compiled.releases:
        dest = project / r.chart.path
        if not r.chart.path or dest.exists():
            continue
        src, note = chart_folder(r.chart.name, r.chart.version)
        place_chart(src, dest)
        if note:
            meta = yaml.safe_load((dest / "Chart.yaml").read_text())
            meta["version"] = r.chart.version
            (dest / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
            notes.append(note)
    return notes


def _changed(fleet: Path, change: Callable[[Path], None], workdir: Path) -> Path:
    """A copy of `fleet` with `change` applied: the head."""
    out = workdir / "head-fleet"
    shutil.copytree(fleet, out)
    change(out)
    return out


def edit_spec(fleet: Path, edit: Callable[[Obj], None], cluster: str = "c1") -> None:
    """`edit` the spec of the cluster intent in `fleet`, as a user edits the file."""
    path = fleet / "clusters" / f"{cluster}.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc["spec"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def user_pod(pod: Any) -> Obj:
    """A pod of a gpuc workload as a user's Deployment makes it: its claims from gpuc's templates (one claim per pod)
    or gpuc's shared claim; no node chosen (the scheduler places it)."""
    claims, refs = [], []
    for c in pod.claims:
        _, name = c.key.split("/", 1)
        if c.shared:
            claims.append({"name": c.label, "resourceClaimName": name})
        else:
            claims.append({"name": c.label, "resourceClaimTemplateName": c.source.split("/", 1)[1]})
        refs.append({"name": c.label})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": pod.workload.split("/")[0], "labels": {"app": pod.workload.split("/")[1]}},
            "spec": {"containers": [{"name": "main", "image": PAUSE, "resources": {"claims": refs}}], "resourceClaims": claims,
                     "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 5}}


def pod_record(kube: Kube, key: str) -> PodRecord | None:
    """The pod bound, Running, each claim allocated and reserved for it; None until then (or when it is gone)."""
    ns, name = key.split("/", 1)
    pod = kube.get("v1", "Pod", name, ns)
    if pod is None or not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") != "Running" \
            or pod["metadata"].get("deletionTimestamp"):
        return None
    generated = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    claims = {}
    for ref in pod["spec"].get("resourceClaims") or []:
        claim_name = ref.get("resourceClaimName") or generated.get(ref["name"])
        if not claim_name:
            return None
        claim = kube.get(kube.preferred("resource.k8s.io"), "ResourceClaim", claim_name, ns)
        status = (claim or {}).get("status") or {}
        if claim is None or not status.get("allocation") or \
                pod["metadata"]["uid"] not in {r.get("uid") for r in status.get("reservedFor") or []}:
            return None
        claims[claim_name] = claim["metadata"]["uid"]
    return PodRecord(pod["metadata"]["uid"], pod["spec"]["nodeName"], claims)


def unschedulable(kube: Kube, key: str) -> bool:
    ns, name = key.split("/", 1)
    pod = kube.get("v1", "Pod", name, ns) or {}
    return not (pod.get("spec") or {}).get("nodeName") and any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or [])


def allocated_devices(kube: Kube, key: str) -> set[tuple[str, str]]:
    """(pool, device) of every device the pod's claims hold."""
    ns, name = key.split("/", 1)
    record = pod_record(kube, key)
    assert record is not None, f"{key} is not running"
    out = set()
    for claim_name in record.claims:
        claim = kube.get(kube.preferred("resource.k8s.io"), "ResourceClaim", claim_name, ns) or {}
        for r in claim["status"]["allocation"]["devices"]["results"]:
            out.add((r["pool"], r["device"]))
    return out


def wait_until(probe: Callable[[], Any], what: str, timeout: float = TIMEOUT, argo: argocd.ArgoCD | None = None) -> Any:
    """Poll `probe` until it returns something truthy (that is returned); fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        if argo is not None:
            argo.check_running()
        try:
            value = probe()
        except Exception as exc:  # the API server restarting under the probe: ask again
            value, last = None, exc
        else:
            last = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s" + (f" (last error: {last})" if last else ""))
        time.sleep(0.5)


def chart_objects(run: GitOpsRun, app_name: str) -> set[tuple[str, str, str]]:
    """What a chart Application of the head deploys: `helm template` of its chart (from the repository) with its
    values file, release name and namespace, as Argo CD's repo server runs it (the harness's Helm, the API server's
    discovery as --api-versions, --include-crds as Argo CD passes it), hooks left out as Argo CD leaves them out of its
    managed resources."""
    app = yaml.safe_load((run.tree / "argocd" / f"{app_name}.yaml").read_text())
    chart_source = next(s for s in app["spec"]["sources"] if "helm" in s)
    values = [run.repo.path / v.removeprefix("$values/") for v in chart_source["helm"]["valueFiles"]]
    chart = run.repo.path / chart_source["path"]
    namespace = app["spec"]["destination"]["namespace"]
    docs = helm.render(chart, release=chart_source["helm"]["releaseName"], namespace=namespace, values=values,
                       kube_version=run.cp.minor, api_versions=helm.discovered_api_versions(run.cp), include_crds=True)
    out = set()
    for d in docs:
        if (d["metadata"].get("annotations") or {}).get("helm.sh/hook"):
            continue
        cluster_scoped = d["kind"] in CLUSTER_KINDS
        out.add((d["kind"], "" if cluster_scoped else d["metadata"].get("namespace") or namespace, d["metadata"]["name"]))
    extra = [s for s in app["spec"]["sources"] if s.get("path") and "helm" not in s]
    for s in extra:  # the release's own objects gpuc renders beside it (rendered/<c>/releases/<name>/)
        folder = run.repo.path / s["path"]
        for name in yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]:
            o = yaml.safe_load((folder / name).read_text())
            out.add((o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]))
    return out


CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "DeviceClass", "Namespace", "PriorityClass",
                 "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "RuntimeClass", "ClusterPolicy",
                 "GPUCluster", "NodeFeatureRule", "StorageClass", "APIService", "ValidatingAdmissionPolicy",
                 "ValidatingAdmissionPolicyBinding"}


# -- what the watches saw ------------------------------------------------------------------------------------------

def plugin_daemonsets(t: Live) -> list[tuple[Event | None, set[tuple[str, str]]]]:
    """The kubelet-plugin DaemonSets of the driver releases that existed after each DaemonSet event."""
    out = []
    for event, live in t.daemonsets.replay():
        if event is None or event.key in t.plugins:
            out.append((event, {k for k in live if k in t.plugins}))
    return out


def first(events: list[Event], kind: str, key: tuple[str, str]) -> int | None:
    return next((i for i, e in enumerate(events) if e.type == kind and e.key == key), None)


def publishers_per_node(t: Live) -> Iterator[tuple[Event | None, dict[str, set[str]]]]:
    """After each ResourceSlice event: node -> the pods publishing gpu.nvidia.com slices there."""
    for event, live in t.slices.replay():
        nodes: dict[str, set[str]] = {}
        for s in live.values():
            if s["spec"].get("driver") == DRIVER:
                nodes.setdefault(s["spec"].get("nodeName", ""), set()).add(
                    (s["metadata"].get("annotations") or {}).get(PUBLISHER_POD, "(not the stand-in)"))
        yield event, nodes


def double_publishers(t: Live) -> list[str]:
    """Every moment a node had more than one publisher of gpu.nvidia.com slices."""
    return [f"{event.type if event else 'start'} {event.key[1] if event else ''}: {node} published by {sorted(pods)}"
            for event, nodes in publishers_per_node(t) for node, pods in nodes.items() if len(pods) > 1]


def both_plugins(t: Live, since: float = 0.0) -> list[str]:
    """Every moment (from `since` on, time.monotonic()) a node advertised nvidia.com/gpu (the device plugin) while
    gpu.nvidia.com slices were published for it."""
    merged = sorted([(e.at, 0, e) for e in t.nodes.snapshot()] + [(e.at, 1, e) for e in t.slices.snapshot()], key=lambda x: (x[0], x[1]))
    allocatable = {k[1]: ((o.get("status") or {}).get("allocatable") or {}).get(GPU, "0") for k, o in t.nodes.initial.items()}
    slices = {k: o for k, o in t.slices.initial.items() if o["spec"].get("driver") == DRIVER}
    out = []
    for _, which, e in merged:
        if which == 0:
            allocatable[e.key[1]] = "0" if e.type == "DELETED" else ((e.obj.get("status") or {}).get("allocatable") or {}).get(GPU, "0")
        elif e.type == "DELETED":
            slices.pop(e.key, None)
        elif e.obj["spec"].get("driver") == DRIVER:
            slices[e.key] = e.obj
        served = {s["spec"].get("nodeName") for s in slices.values()}
        if e.at >= since:
            out += [f"{node}: nvidia.com/gpu {count} and gpu.nvidia.com slices" for node, count in allocatable.items()
                    if count not in ("0", "") and node in served]
    return out


def _unversioned(slices: list[Obj]) -> list[Obj]:
    return [{k: v for k, v in s.items() if k != "apiVersion"} for s in slices]


# -- the plan's checks, against the live cluster ---------------------------------------------------------------------

def kube_object(kube: Kube, target: Obj) -> Obj | None:
    """The object a check names; None where it does not exist, its kind not served included (its CRD never installed)."""
    try:
        return kube.get(target["apiVersion"], target["kind"], target["name"], target.get("namespace"))
    except Exception as exc:
        if "not find" in str(exc) or "NotFound" in type(exc).__name__:
            return None
        raise


@dataclass
class Checks:
    """Evaluates plan.json checks, waiting until each holds; what a user does by hand it does. `restarts` are the
    pods this step's actions took down (drains), for the test to start again as their controllers would."""

    t: Live
    timeout: float = TIMEOUT
    drained: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)  # the texts of the checks that held, in order
    restarted_at: dict[tuple[str, str], str] = field(default_factory=dict)  # DaemonSet -> when it was restarted (RFC 3339)

    def hold(self, checks: list[Obj], revision: str, previous: list[Obj] | None = None) -> None:
        for check in checks:
            self.one(check, revision, previous or [])

    def one(self, check: Obj, revision: str, previous: list[Obj]) -> None:
        t, kind, target = self.t, check["kind"], check["target"]
        if kind == "previous":
            self.hold(previous, revision)
            return
        if kind == "manual":
            t.manual.append(check["text"])
            return
        if t.argo is None and (kind in ("application", "finalizer") or target.get("apiVersion", "").startswith("argoproj.io/")):
            t.skipped.append(check["text"])  # Argo CD's own state, where the stack deploys instead
            return
        if kind in ("cordoned", "uncordoned"):
            t.cordon(target["nodes"], kind == "cordoned")
        elif kind == "no-gpu-pods":
            self.drained += t.drain(target["nodes"])
        elif kind == "server-version" and server_minor(t.cp) != target["minor"]:
            if target.get("runtimeConfig"):  # the running tree's beta version, served until the step is synced
                t.cp.runtime_config = ",".join(c for c in (t.cp.runtime_config, target["runtimeConfig"]) if c)
            controlplane.restart(t.cp, target["minor"])  # the user upgrades the control plane, etcd kept
        elif kind == "node-labels":  # the node provisioner applies node-labels.yaml (None: the label goes)
            for n in target["nodes"]:
                t.kube.dyn.patch(t.kube.resource("v1", "Node"), name=n, body={"metadata": {"labels": target["labels"]}},
                                 content_type="application/merge-patch+json")
        elif kind == "deleted":  # `kubectl delete`: background propagation, its default
            if kube_object(t.kube, target) is not None:
                t.kube.dyn.delete(t.kube.resource(target["apiVersion"], target["kind"]), name=target["name"],
                                  namespace=target.get("namespace"), body={"propagationPolicy": "Background"})
        elif kind == "restarted":
            self.restarted_at[(target["namespace"], target["daemonSet"])] = rollout_restart(t.kube, target["namespace"],
                                                                                            target["daemonSet"])
        wait_until(lambda: self.holds(check, revision), f"check {kind} {target}: {check['text']}", self.timeout, t.argo)
        self.done.append(check["text"])

    def holds(self, check: Obj, revision: str) -> bool:
        kube, kind, target = self.t.kube, check["kind"], check["target"]
        if kind in ("absent", "deleted"):
            try:
                return kube_object(kube, target) is None
            except Exception:  # the API server restarting, say: not yet
                return False
        if kind == "no-pods":
            return not [p for p in kube.items("v1", "Pod", target["namespace"])
                        if any(r.get("kind") == "DaemonSet" and r.get("name") == target["daemonSet"]
                               for r in p["metadata"].get("ownerReferences") or [])]
        if kind == "application":
            app = self.t.argo.application(target["name"]) if self.t.argo else {}
            app = app or {}
            st = app.get("status") or {}
            sync = st.get("sync") or {}
            return (sync.get("status") == "Synced" and (st.get("health") or {}).get("status") == "Healthy"
                    and (sync.get("revision") == revision or revision in (sync.get("revisions") or [])))
        if kind == "finalizer":
            app = self.t.argo.application(target["name"]) if self.t.argo else {}
            app = app or {}
            return target["finalizer"] in (app.get("metadata") or {}).get("finalizers", [])
        if kind in ("slices", "no-slices"):
            served = {s["spec"].get("nodeName") for s in kube.items(kube.preferred("resource.k8s.io"), "ResourceSlice")
                      if s["spec"].get("driver") == target["driver"] and s["spec"].get("devices")}
            return set(target["nodes"]) <= served if kind == "slices" else not set(target["nodes"]) & served
        if kind == "no-gpu-pods":
            return not gpu_pods(kube, target["nodes"])
        if kind == "allocatable":
            return all(str(((kube.get("v1", "Node", n) or {}).get("status") or {}).get("allocatable", {}).get(target["resource"], "0"))
                       == str(target["count"]) for n in target["nodes"])
        if kind == "node-label":
            return all(((kube.get("v1", "Node", n) or {}).get("metadata") or {}).get("labels", {}).get(target["label"]) == target["value"]
                       for n in target["nodes"])
        if kind == "node-labels":
            return all(all(((kube.get("v1", "Node", n) or {}).get("metadata") or {}).get("labels", {}).get(k) == v
                           for k, v in target["labels"].items()) for n in target["nodes"])
        if kind in ("cordoned", "uncordoned"):
            return all(bool(((kube.get("v1", "Node", n) or {}).get("spec") or {}).get("unschedulable")) == (kind == "cordoned")
                       for n in target["nodes"])
        if kind == "server-version":
            return server_minor(self.t.cp) == target["minor"]
        if kind == "restarted":
            since = self.restarted_at[(target["namespace"], target["daemonSet"])]
            ds = kube.get("apps/v1", "DaemonSet", target["daemonSet"], target["namespace"]) or {}
            st = ds.get("status") or {}
            rolled = st.get("observedGeneration") == ds["metadata"]["generation"] and \
                st.get("updatedNumberScheduled") == st.get("desiredNumberScheduled") == st.get("numberAvailable")
            pods = [p for p in kube.items("v1", "Pod", target["namespace"]) if p["spec"].get("nodeName") in target["nodes"]
                    and any(r.get("name") == target["daemonSet"] for r in p["metadata"].get("ownerReferences") or [])]
            return rolled and {p["spec"]["nodeName"] for p in pods if (p.get("status") or {}).get("phase") == "Running"
                               and p["metadata"]["creationTimestamp"] >= since} == set(target["nodes"]) and len(pods) == len(target["nodes"])
        if kind == "ready":
            obj = kube.get(target["apiVersion"], target["kind"], target["name"]) or {}
            return (obj.get("status") or {}).get("state") == target["state"]
        raise AssertionError(f"the plan has a check of a kind this evaluator does not know: {check}")


def rollout_restart(kube: Kube, namespace: str, name: str) -> str:
    """`kubectl rollout restart daemonset/NAME`: a new pod template annotation, so every pod is replaced; its time."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": now}}}}}
    kube.dyn.patch(kube.resource("apps/v1", "DaemonSet"), name=name, namespace=namespace, body=body,
                   content_type="application/strategic-merge-patch+json")
    return now


def server_minor(cp: controlplane.ControlPlane) -> str:
    """The minor the API server reports (`kubectl version`): the emulated one when it emulates one."""
    status, body = cp.get("/version")
    assert status == 200, status
    v = json.loads(body)
    return f"{v.get('emulationMajor') or v['major']}.{v.get('emulationMinor') or v['minor']}"


def gpu_pods(kube: Kube, nodes: list[str]) -> list[str]:
    """Pods on `nodes` that hold a GPU: an nvidia.com/gpu request, or an allocated ResourceClaim."""
    out = []
    for pod in kube.items("v1", "Pod"):
        if pod["spec"].get("nodeName") not in nodes:
            continue
        requests = [c.get("resources", {}).get("limits", {}).get(GPU) for c in pod["spec"].get("containers", [])]
        if any(requests) or pod["spec"].get("resourceClaims"):
            out.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return out
