"""Every kind of change `gpuc upgrade` stages, driven through the real GitOps path step by step.

Each test syncs a small base cluster through the real Argo CD (its application controller, repo server with the real
Helm and kustomize, and redis; the app-of-apps under rendered/<cluster>/argocd, the real charts from
../shared/upstream/charts) into a real API server with the real scheduler, resource-claim controller, garbage
collector and workload controllers; creates the pods of gpuc's claims-only workloads as a user's Deployment would
and waits until the real scheduler bound them with their claims allocated; then makes the change, runs the
`gpuc upgrade` CLI, and commits each step of plan.json in order (spec.transition set in the cluster intent as the
step says, `gpuc render`, git commit; the rendered tree must be the plan's step-N/rendered byte for byte), checking
the step's `before` checks first and waiting for its `done` checks after, against the live cluster
(tests/real/transitions.py Checks: the cordons, drains and uncordons, the control-plane upgrade and the kubelet
plugin restart the plan asks of the user, the test does). After each step: every pod the step keeps is the same pod
(UID) on the same node with the same claims allocated; pods a step restarts are created again by the test, as their
controller would. Over the whole run, watches of DaemonSets, ResourceSlices and Nodes are replayed event by event:
the old driver release's kubelet-plugin DaemonSet is gone before the new one's exists, no node ever has two
publishers of gpu.nvidia.com slices, and no node is served by the device plugin and DRA at once. At the end, what
Argo CD manages is the head's rendered tree: the head's Applications and no other, the tree's Application managing
exactly the rendered objects and each chart's Application exactly what its chart renders with the head's values
(helm template, as Argo CD's repo server runs it), all Synced.

What the harness plays, and how:
- kubelets (harness/kubelet.py): a bound pod is reported Running; a pod the API server marks deleted on a node is
  deleted for good at once, as a kubelet does once its containers stopped (so the garbage collector's foreground
  deletion of a DaemonSet, which Argo CD's resources finalizer uses, finishes).
- the DRA driver's kubelet plugin (harness/dra_plugin.py): for each Running pod of a driver release's kubelet-plugin
  DaemonSet (`<name>-kubelet-plugin` in the release's namespace), the ResourceSlices `gpuc inventory` synthesizes for
  that node (the node names are gpuc's: the pools list them as nodeNames), published once as the pod starts and
  marked with the pod; wiped when the pod stops, as kubelet wipes an unregistered plugin's slices. No GPU exists: the
  devices are gpuc's model of the hardware, with the attributes of the publishing release's driver line.
- the GPU Operator's device plugin (harness/device_plugin.py): a node's allocatable nvidia.com/gpu is its GPU count
  where the operator would run the device plugin (a ClusterPolicy with devicePlugin.enabled, GFD's
  nvidia.com/gpu.present, no nvidia.com/gpu.deploy.device-plugin=false: the label gpuc sets), else 0.
- Node Feature Discovery and GPU Feature Discovery: the test registers the GPU nodes with their labels.
- the GPU Operator's controller runs for real in the move to a GPUCluster: its manager (harness/operators.py)
  reconciles the ClusterPolicy and then the GPUCluster, and the stand-in kubelet reports its operands' pods Running.
- the GPU Operator's MIG Manager (harness/mig_manager.py): applies a node's nvidia.com/mig.config once no pod holds a
  GPU there, and reports it in nvidia.com/mig.config.state.
No NVIDIA image runs; the DRA driver's controllers do not run, nor the GPU Operator's but in the move above (their
Deployments' pods are reported Running); the DRA driver 0.5.1 chart is rendered from the 0.5.0-dev chart (no 0.5 tag exists).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from pulumi.automation.errors import CommandError

from harness import operators

from conftest import cluster_doc, workload_doc, write_fleet
from real.transitions import (
    GPU,
    MIG_CONFIG,
    TIMEOUT,
    Checks,
    Live,
    Obj,
    StackTransition,
    Transition,
    allocated_devices,
    both_plugins,
    double_publishers,
    edit_spec,
    first,
    plugin_daemonsets,
    server_minor,
    wait_until,
)

H100 = {"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 2}, "nodeNames": ["h100-0"]}
A100_DEVICE_PLUGIN = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 2}, "nodeNames": ["a100-0"],
                      "allocation": "devicePlugin"}
A100_MIG = {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 1}, "nodeNames": ["a100-0"],
            "mig": {"layout": "all-balanced"}}
ON_H100 = {"require": {"productName": "NVIDIA H100 80GB HBM3"}}
ON_A100 = {"require": {"productName": "NVIDIA A100-SXM4-80GB"}}
NO_OPERATOR = {"gpuOperator": {"mode": "none"}, "acknowledge": [{"warning": "device-plugin-off", "reason": "no GPU Operator here"}]}
TRAIN = workload_doc("train", "research", gpu={"count": 1, **ON_H100})


def given(tmp_path: Path, pools: list[Obj], workloads: list[Obj], **spec: Obj) -> Path:
    doc = cluster_doc("c1", pools=pools, **spec)
    doc["spec"].pop("nimOperator")  # not part of any transition here: one chart less to sync
    return write_fleet(tmp_path / "given", [doc], {"w.yaml": workloads})


def spec_change(edit: Callable[[Obj], None]) -> Callable[[Path], None]:
    return lambda fleet: edit_spec(fleet, edit)


def drive(t: Live, change: Callable[[Path], None], tmp_path: Path, kinds: list[str]) -> list[Obj]:
    """The change made in the fleet, `gpuc upgrade` run on it, and each step committed and deployed (synced by Argo CD,
    or `pulumi up` of the stack) and checked in order; the plan's steps."""
    change(t.fleet)
    plan = t.upgrade(tmp_path / "upgrade")
    assert plan["kinds"] == kinds and plan["staged"], plan["why"]
    steps: list[Obj] = plan["steps"]
    previous: list[Obj] = []
    revision = t.base
    for step in steps:
        checks = Checks(t)
        checks.hold(step["before"], revision, previous)
        if isinstance(t, Transition):
            revision = t.commit_step(step, tmp_path / "upgrade")
            checks.hold(step["done"], revision)
            t.wait_synced(revision)
        else:
            assert isinstance(t, StackTransition)
            t.write_step(step)
            revision = t.repo.commit(f"step {step['step']}: {step['title']}")
            t.up()
            checks.hold(step["done"], revision)
        t.assert_kept(step)
        taken_down = {f["pod"] for f in step["pods"] if f["fate"] in ("restarted", "waiting")}  # waiting: not running
        assert set(checks.drained) & set(t.running) <= taken_down, f"step {step['step']} took down pods it does not restart"
        t.assert_still_running(exclude=set(checks.drained))  # no running pod loses its allocation unless restarted
        t.follow(step, checks.drained)
        previous = step["done"]
    return steps


def test_a_driver_line_change_retires_the_old_kubelet_plugin_before_the_new_one_starts(tmp_path: Path) -> None:
    """25.12 -> 0.5: the chart and the release are renamed (nvidia-dra-driver-gpu -> dra-driver-nvidia-gpu). Step 1
    removes the old release's Application, whose resources finalizer deletes its DaemonSet (the plugin pods go, and
    with them their slices) while running pods keep their GPUs; step 2 installs the new release, whose plugin
    publishes the node's devices again. The pod with its own claim and the two sharing one claim run through both."""
    workloads = [TRAIN, workload_doc("notebooks", "research", replicas=2, gpu={"count": 1, "sharing": "TimeSlicing", **ON_H100})]
    change = spec_change(lambda spec: spec["draDriver"].update(version="0.5.1"))
    with Transition.start(tmp_path / "run", given(tmp_path, [H100], workloads, **NO_OPERATOR), change,
                          gpu_nodes={"h100-0": 2}) as t:
        t.sync_base()
        t.start_pods()
        steps = drive(t, change, tmp_path, ["driver-release"])
        assert [s["title"] for s in steps] == ["Retire the DRA driver release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu",
                                               "Install nvidia-dra-driver-gpu/dra-driver-nvidia-gpu"]

        old, new = ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin"), \
                   ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu-kubelet-plugin")
        assert t.plugins == {old, new}
        assert double_publishers(t) == []
        seen = plugin_daemonsets(t)
        events = [e for e, _ in seen if e is not None]
        deleted, created = first(events, "DELETED", old), first(events, "ADDED", new)
        assert deleted is not None and created is not None and deleted < created, [(e.type, e.key) for e in events]
        assert all(len(live) <= 1 for _, live in seen), [(e and (e.type, e.key), live) for e, live in seen]
        assert [(p.what, p.pod.rsplit("-", 1)[0]) for p in t.publisher.log] == [
            ("published", "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin"),
            ("wiped", "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin"),
            ("published", "nvidia-dra-driver-gpu/dra-driver-nvidia-gpu-kubelet-plugin")]

        t.assert_manages_the_head(removed_apps={"c1-nvidia-dra-driver-gpu"})
        assert "transition" not in yaml.safe_load(t.cluster_file.read_text())["spec"]


def test_a_pool_moves_from_the_device_plugin_to_dra_while_a_dra_pool_runs_on(tmp_path: Path) -> None:
    """Pool a100 from the GPU Operator's device plugin to DRA, with a pod on the h100 DRA pool running throughout and
    a device-plugin pod on a100 (nvidia.com/gpu: 1). Step 1 takes a100 from the device plugin (gpuc's
    nvidia.com/gpu.deploy.device-plugin=false; the ClusterPolicy's device plugin off) and the test drains it as the
    plan asks; step 2 (the change itself, with a new workload on A100s) labels it for the DRA kubelet plugin, whose
    slices then serve it: the new workload's pod is bound there. No node ever advertises nvidia.com/gpu while DRA
    publishes its devices."""
    def change(fleet: Path) -> None:
        edit_spec(fleet, lambda spec: spec["nodePools"][1].update(allocation="dra"))
        (fleet / "workloads" / "w.yaml").write_text(yaml.safe_dump_all(
            [TRAIN, workload_doc("infer", "research", gpu={"count": 1, **ON_A100})], sort_keys=False))

    with Transition.start(tmp_path / "run", given(tmp_path, [H100, A100_DEVICE_PLUGIN], [TRAIN]), change,
                          gpu_nodes={"h100-0": 2, "a100-0": 2}, device_plugin=True) as t:
        t.sync_base()
        t.start_pods()
        t.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "namespace": "research"},
                       "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                "resources": {"limits": {GPU: "1"}}}], "terminationGracePeriodSeconds": 5}})
        legacy = t.wait_running("research/legacy")
        assert legacy.node == "a100-0" and t.running["research/train-0"].node == "h100-0"

        steps = drive(t, change, tmp_path, ["pool-allocation"])
        assert [s["transition"] and s["transition"]["nodePools"] for s in steps] == [{"a100": {"allocation": "none"}}, None]
        assert {f["pod"]: f["fate"] for f in steps[0]["pods"]} == {"research/train-0": "kept"}  # the base, a100 held back
        assert {f["pod"]: f["fate"] for f in steps[1]["pods"]} == {"research/train-0": "kept", "research/infer-0": "placed"}

        assert t.kube.get("v1", "Pod", "legacy", "research") is None  # drained in step 1, as the plan said
        assert t.running["research/infer-0"].node == "a100-0"
        assert {p for p, _ in allocated_devices(t.kube, "research/infer-0")} == {"a100-0"}
        assert both_plugins(t, since=t.synced_at) == []
        assert double_publishers(t) == []
        assert t.device_plugin is not None and ("a100-0", "0") in t.device_plugin.changes
        t.assert_manages_the_head(removed_apps=set())


def test_a_mig_layout_changes_under_a_running_notebook(tmp_path: Path) -> None:
    """Pool a100's MIG layout all-balanced -> all-1g.10gb while a notebook holds a 1g.10gb device. The plan drains the
    pool first (the MIG Manager cannot repartition a GPU a pod holds), and once the MIG Manager reports the new layout
    applied, the DRA kubelet plugin must publish it: the devices published are the new layout's, and the restarted
    notebook holds one of them."""
    notebook = workload_doc("nb", "research", gpu={"mig": {"slices": [{"profile": "1g.10gb", "count": 1}]}})
    change = spec_change(lambda spec: spec["nodePools"][0].update(mig={"layout": "all-1g.10gb"}))
    with Transition.start(tmp_path / "run", given(tmp_path, [A100_MIG], [notebook]), change, gpu_nodes={"a100-0": 1},
                          node_labels={"a100-0": {MIG_CONFIG: "all-balanced", "nvidia.com/mig.config.state": "success"}},
                          mig_manager=True) as t:
        t.sync_base()
        t.start_pods()
        before = allocated_devices(t.kube, "research/nb-0")
        steps = drive(t, change, tmp_path, ["mig-layout"])
        (step,) = steps
        assert {f["pod"]: f["fate"] for f in step["pods"]} == {"research/nb-0": "restarted"}

        plugin = next(iter(t.plugins))
        published = {d["name"] for s in t.kube.items("resource.k8s.io/v1", "ResourceSlice")
                     if s["spec"]["nodeName"] == "a100-0" for d in s["spec"]["devices"]}
        assert published == t.catalog.layout(plugin, "a100-0", "all-1g.10gb"), "the plugin publishes another layout than the GPU has"
        after = allocated_devices(t.kube, "research/nb-0")
        assert {d for _, d in after} <= published and after != before
        assert t.catalog.mig is not None and [(n, state, c) for _, n, state, c in t.catalog.mig.log] == [
            ("a100-0", "pending", "all-1g.10gb"), ("a100-0", "success", "all-1g.10gb")]  # never with the notebook running
        assert double_publishers(t) == []
        t.assert_manages_the_head(removed_apps=set())


def test_a_kubernetes_minor_upgrade_that_changes_the_served_dra_version_keeps_every_claim_and_pod(tmp_path: Path) -> None:
    """Kubernetes 1.33 -> 1.34, the minor where resource.k8s.io goes from v1beta2 (a beta API, served on request) to v1.
    The plan's one step needs the control plane upgraded first, serving the running tree's v1beta2 until the step is
    synced (1.34 serves it only on request); the test does as the plan says: the API server, scheduler and controllers
    of Kubernetes 1.34.4 restarted from emulating 1.33 to 1.34 on the same etcd, with that --runtime-config. The tree is
    then written in v1, with the same claim names (hashed from the v1 shape), so Argo CD updates the objects it has:
    the pod runs on with its claim (same UIDs) through the upgrade and the sync."""
    change = spec_change(lambda spec: spec.update(kubernetesVersion="1.34"))
    beta = {"warning": "dra-beta", "reason": "the test's 1.33 control plane turns DRA on"}
    base = given(tmp_path, [H100], [TRAIN], kubernetes="1.33", **{**NO_OPERATOR, "acknowledge": [*NO_OPERATOR["acknowledge"], beta]})
    with Transition.start(tmp_path / "run", base, change, gpu_nodes={"h100-0": 2}) as t:
        t.sync_base()
        t.start_pods()
        assert server_minor(t.run.cp) == "1.33" and t.kube.preferred("resource.k8s.io") == "resource.k8s.io/v1beta2"
        steps = drive(t, change, tmp_path, ["kubernetes-minor"])
        (step,) = steps
        assert [c["kind"] for c in step["before"]] == ["server-version", "manual"]
        assert step["before"][0]["target"] == {"minor": "1.34", "runtimeConfig": "resource.k8s.io/v1beta2=true"}
        assert server_minor(t.run.cp) == "1.34" and t.manual == [step["before"][1]["text"]]
        assert t.kube.preferred("resource.k8s.io") == "resource.k8s.io/v1"
        assert {f["pod"]: f["fate"] for f in step["pods"]} == {"research/train-0": "kept"}
        assert {yaml.safe_load(f.read_text())["apiVersion"] for f in t.run.tree.glob("*-resourceclaimtemplate-*.yaml")} == \
            {"resource.k8s.io/v1"}
        assert double_publishers(t) == []
        t.assert_manages_the_head(removed_apps=set())


def test_the_gpu_operator_moves_from_its_clusterpolicy_to_a_gpucluster(tmp_path: Path) -> None:
    """GPU Operator 26.7 from ClusterPolicy mode (with the 25.12 DRA driver release beside it) to gpuCluster mode, where
    the operator's GPUCluster installs the DRA driver (0.5). The real GPU Operator manager runs against the cluster
    (harness/operators.py, with the settings of the chart's own Deployment as synced): step 1 drains the GPU node and
    removes the ClusterPolicy (the chart renders none; Argo CD prunes it in the background, which alone lets it go while
    the operator reconciles it) with its operands and the driver release; step 2 deploys the GPUCluster, from which the
    operator makes its DRA kubelet plugin, whose pod publishes the node's devices again, and the drained pod runs again."""
    def change(fleet: Path) -> None:
        edit_spec(fleet, lambda spec: (spec["gpuOperator"].update(mode="gpuCluster"), spec["draDriver"].update(version="0.5.1")))

    fleet = given(tmp_path, [H100], [TRAIN], gpuOperator={"mode": "helm", "version": "v26.7.0"},
                  draDriver={"version": "25.12.0", "nvidiaDriverRoot": "/"})
    with Transition.start(tmp_path / "run", fleet, change, gpu_nodes={"h100-0": 2}, operator_plugin=OPERATOR_PLUGIN) as t:
        t.sync_base()
        t.start_pods()
        deployment = t.kube.get("apps/v1", "Deployment", "gpu-operator", "gpu-operator")
        assert deployment is not None
        container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "gpu-operator")
        env = {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}
        with operators.start_gpu_operator(t.cp, tmp_path / "gpu-operator", env=env):
            wait_until(lambda: operands_of(t, "ClusterPolicy"), "the ClusterPolicy's operands", TIMEOUT, t.argo)
            steps = drive(t, change, tmp_path, ["operator-resource"])
            assert [s["title"] for s in steps] == ["Remove the GPU Operator's ClusterPolicy", "Deploy the GPU Operator's GPUCluster"]
            assert [(f["pod"], f["fate"]) for f in steps[-1]["pods"]] == [("research/train-0", "placed")]
            assert "research/train-0" in t.running  # follow() saw it run again, its claim allocated on the operator's devices

        old = ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin")
        assert t.plugins == {old, OPERATOR_PLUGIN}
        assert double_publishers(t) == []
        events = [e for e, _ in plugin_daemonsets(t) if e is not None]
        deleted, created = first(events, "DELETED", old), first(events, "ADDED", OPERATOR_PLUGIN)
        assert deleted is not None and created is not None and deleted < created, [(e.type, e.key) for e in events]
        # the ClusterPolicy's operands (its container toolkit, GFD, validator...) were all gone before the GPUCluster's came
        came = next(live for e, live in t.daemonsets.replay() if e is not None and e.type == "ADDED" and e.key == OPERATOR_PLUGIN)
        assert not [k for k, o in came.items() if owner_kinds(o) & {"ClusterPolicy"}], sorted(came)
        assert [(p.what, p.pod.rsplit("-", 1)[0]) for p in t.publisher.log] == [
            ("published", "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin"),
            ("wiped", "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin"),
            ("published", "gpu-operator/nvidia-dra-driver-kubelet-plugin")]
        t.assert_manages_the_head(removed_apps={"c1-nvidia-dra-driver-gpu"})


def owner_kinds(obj: Obj) -> set[str]:
    return {r.get("kind", "") for r in obj.get("metadata", {}).get("ownerReferences") or []}


def operands_of(t: Live, kind: str) -> list[str]:
    """The DaemonSets the GPU Operator runs for its custom resource of `kind` (its controller reference)."""
    found = t.kube.dyn.get(t.kube.resource("apps/v1", "DaemonSet"), namespace="gpu-operator").to_dict()["items"]
    return [d["metadata"]["name"] for d in found if kind in owner_kinds(d)]


OPERATOR_PLUGIN = ("gpu-operator", "nvidia-dra-driver-kubelet-plugin")  # GPU Operator v26.7.0 manifests/state-dra-driver

# -- the same changes under `pulumi up` ----------------------------------------------------------------------------------

def slices_published(t: Live, nodes: list[str]) -> None:
    Checks(t).hold([{"kind": "slices", "target": {"driver": "gpu.nvidia.com", "nodes": nodes},
                     "text": f"ResourceSlices of gpu.nvidia.com are published for each of {nodes}"}], "")


def swap_in_one_update(t: StackTransition, change: Callable[[Path], None]) -> Obj:
    """The stack up at 25.12 with a pod bound, then the change to 0.5.1 `pulumi up` in one update; the release's steps
    as the engine reported them (op, logical name), or the error the update ended with."""
    t.up()
    slices_published(t, ["h100-0"])
    t.start_pods()
    change(t.fleet)
    try:
        run = t.up()
    except CommandError as exc:
        return {"error": str(exc), "steps": []}
    return {"error": "", "steps": [(s.op, s.name) for s in run.steps if s.type == RELEASE]}


OLD_PLUGIN = ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin")
NEW_PLUGIN = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu-kubelet-plugin")
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_pulumi_swaps_the_driver_release_delete_first_in_one_update_through_its_alias(tmp_path: Path) -> None:
    """25.12 -> 0.5.1 in one `pulumi up`: the stack registers the 0.5 release with an alias to the 25.12 one and
    replace_on_changes/delete_before_replace (modules/helm.py release_options), so the engine deletes the old release
    (helm uninstall, waited for) before it creates the new one: the old kubelet-plugin DaemonSet is gone before the new
    one exists, and the pod runs on with its claim.

    What one update does not give: Helm uninstalls in the background and waits only for the objects, so the old
    plugin's pods outlive their DaemonSet by their grace period (the kubelet stand-in takes all of it) and publish
    beside the new plugin's. For one publisher per node under Pulumi too, take the staged plan's steps (the next test)."""
    change = spec_change(lambda spec: spec["draDriver"].update(version="0.5.1"))
    with StackTransition.start(tmp_path / "run", given(tmp_path, [H100], [TRAIN], **NO_OPERATOR), change,
                               gpu_nodes={"h100-0": 2}) as t:
        result = swap_in_one_update(t, change)
        assert not result["error"], result["error"]
        assert result["steps"] == [("delete-replaced", "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"),
                                   ("replace", "nvidia-dra-driver-gpu/dra-driver-nvidia-gpu"),
                                   ("create-replacement", "nvidia-dra-driver-gpu/dra-driver-nvidia-gpu")]
        slices_published(t, ["h100-0"])
        seen = plugin_daemonsets(t)
        events = [e for e, _ in seen if e is not None]
        deleted, created = first(events, "DELETED", OLD_PLUGIN), first(events, "ADDED", NEW_PLUGIN)
        assert deleted is not None and created is not None and deleted < created, [(e.type, e.key) for e in events]
        assert all(len(live) <= 1 for _, live in seen)
        t.assert_still_running(set())
        assert double_publishers(t), "the old plugin's pods no longer outlive their DaemonSet: one update may now be enough"
        assert t.stand_ins == ["dra-driver-nvidia-gpu 0.5.1 is rendered from dra-driver-nvidia-gpu-0.5.0-dev, the nearest chart there is"]


def test_pulumi_without_the_alias_creates_the_new_release_first_and_helm_refuses_it(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The same update with release_options giving nothing (no alias, no delete-first): the 0.5 release is another
    resource to the engine, which creates it before it deletes the 25.12 one, the other order. Both releases' objects
    would run at once, but Helm refuses to install over objects another release owns (the two charts share object
    names), so the update fails with the old release untouched and its plugin the only one: the alias is what orders
    the swap, and what lets it happen at all."""
    import modules.cluster

    monkeypatch.setattr(modules.cluster, "release_options", lambda release: {})
    change = spec_change(lambda spec: spec["draDriver"].update(version="0.5.1"))
    with StackTransition.start(tmp_path / "run", given(tmp_path, [H100], [TRAIN], **NO_OPERATOR), change,
                               gpu_nodes={"h100-0": 2}) as t:
        result = swap_in_one_update(t, change)
        assert "nvidia-dra-driver-gpu/dra-driver-nvidia-gpu **creating failed** error: Unable to continue with install" in result["error"]
        assert "must equal \"dra-driver-nvidia-gpu\": current value is \"nvidia-dra-driver-gpu\"" in result["error"]
        assert "deleting" not in result["error"], "the engine deleted the old release first without the alias"
        events = [e for e, _ in plugin_daemonsets(t) if e is not None]
        assert first(events, "DELETED", OLD_PLUGIN) is None and t.kube.get("apps/v1", "DaemonSet", OLD_PLUGIN[1], OLD_PLUGIN[0])
        t.assert_still_running(set())
        assert double_publishers(t) == []


def test_pulumi_up_of_each_step_of_the_staged_driver_swap_keeps_one_publisher_per_node(tmp_path: Path) -> None:
    """The staged plan under Pulumi: each step written into the fleet as plan.md says and `pulumi up` of the stack,
    with the step's checks (but Argo CD's: no Argo CD here) evaluated live. Step 1 uninstalls the 25.12 release and
    waits until its plugin's pods and slices are gone; step 2 installs 0.5. One publisher per node throughout."""
    workloads = [TRAIN, workload_doc("notebooks", "research", replicas=2, gpu={"count": 1, "sharing": "TimeSlicing", **ON_H100})]
    change = spec_change(lambda spec: spec["draDriver"].update(version="0.5.1"))
    with StackTransition.start(tmp_path / "run", given(tmp_path, [H100], workloads, **NO_OPERATOR), change,
                               gpu_nodes={"h100-0": 2}) as t:
        t.up()
        slices_published(t, ["h100-0"])
        t.start_pods()
        steps = drive(t, change, tmp_path, ["driver-release"])
        argo_only = {c["text"] for s in steps for c in s["before"] + s["done"]
                     if c["kind"] in ("finalizer", "application") or c["target"].get("apiVersion") == "argoproj.io/v1alpha1"}
        assert len(steps) == 2 and set(t.skipped) == argo_only, t.skipped
        assert double_publishers(t) == []
        seen = plugin_daemonsets(t)
        events = [e for e, _ in seen if e is not None]
        deleted, created = first(events, "DELETED", OLD_PLUGIN), first(events, "ADDED", NEW_PLUGIN)
        assert deleted is not None and created is not None and deleted < created
        assert all(len(live) <= 1 for _, live in seen)
