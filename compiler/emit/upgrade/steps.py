"""The steps of a change that one commit cannot take. Each step but the last is the intent as the cluster runs it (the
base) with a `spec.transition` that holds something back, and the few fields the step must already set; the last
step is the change itself. Every step comes with what must be true before it, what it disrupts and how to tell it
finished. One kind of hazard per plan: a change that is two of them is two pull requests, each planned on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...facts.platform import gpu_operator
from .hazards import KUBERNETES, MIG_RELAYOUT, OPERATOR_SWAP, POOL_HANDOVER, RELEASE_SWAP, Hazard
from .model import Check, Step
from .shape import DriverRelease, Shape

GPU_DRIVER = "gpu.nvidia.com"
FINALIZER_CHECK = "finalizer"


@dataclass(frozen=True)
class CannotStage(Exception):
    """A change gpuc has no staged plan for: the intent field to point at, why, and what to do instead."""

    field: tuple
    message: str
    hint: str


def plan_steps(before: Shape, after: Shape, found: list[Hazard], busy: dict[str, tuple[str, ...]]) -> list[Step]:
    """The steps from `before` to `after`, given the hazards of doing it in one commit (none: no steps)."""
    kinds = sorted({h.kind for h in found}, key=[KUBERNETES, OPERATOR_SWAP, RELEASE_SWAP, POOL_HANDOVER, MIG_RELAYOUT].index)
    if not kinds:
        return []
    if len(kinds) > 1:
        first, second = (next(h for h in found if h.kind == k) for k in kinds[:2])
        raise CannotStage(second.field, f"this change is both a {first.kind} change ({first.message}) and a {second.kind} "
                                        f"change ({second.message}); gpuc stages one kind of change at a time",
                          f"split it: merge the {first.kind} change first (its own `gpuc upgrade`), then this one")
    hazard = next(h for h in found if h.kind == kinds[0])
    build = {RELEASE_SWAP: _release_swap, POOL_HANDOVER: _pool_handover, OPERATOR_SWAP: _operator_swap,
             KUBERNETES: _kubernetes, MIG_RELAYOUT: _mig_relayout}[hazard.kind]
    steps = build(before, after, hazard, busy)
    for i, step in enumerate(steps, 1):
        step.number = i
        if step.transition is not None:
            step.transition = {"step": i, "steps": len(steps), "change": _change(hazard, before, after), **step.transition}
    return steps


def _change(hazard: Hazard, before: Shape, after: Shape) -> str:
    if hazard.kind == RELEASE_SWAP and before.driver and after.driver:
        return f"DRA driver {before.driver.chart} {before.driver.version} -> {after.driver.chart} {after.driver.version}"
    if hazard.kind == POOL_HANDOVER:
        return "pools " + ", ".join(f"{p} {before.pools[p].allocation} -> {after.pools[p].allocation}" for p in hazard.pools)
    if hazard.kind == OPERATOR_SWAP:
        return f"GPU Operator {before.operator or 'ClusterPolicy'} -> {after.operator}"
    return hazard.kind


# -- checks ------------------------------------------------------------------------------------------------------------


def _dra_pools(shape: Shape) -> list[str]:
    return [p for p in shape.pools if shape.pools[p].allocation == "dra"]


def _dra_nodes(shape: Shape) -> list[str]:
    return [n for p in shape.pools.values() if p.allocation == "dra" for n in p.nodes]


def _application_synced(shape: Shape, name: str) -> list[Check]:
    if not shape.gitops_namespace or not name:
        return []
    return [Check(f"Argo CD Application {name} is Synced and Healthy", "application",
                  {"namespace": shape.gitops_namespace, "name": name})]


def _rendered_synced(shape: Shape) -> list[Check]:
    return _application_synced(shape, f"{shape.cluster}-gpuc")


def _driver_gone(shape: Shape, old: DriverRelease) -> list[Check]:
    out = []
    if old.application and shape.gitops_namespace:
        out.append(Check(f"Argo CD Application {old.application} is gone (its finalizer deleted the release's objects)", "absent",
                         {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "namespace": shape.gitops_namespace,
                          "name": old.application}))
    out.append(Check(f"DaemonSet {old.namespace}/{old.daemonset} (the old kubelet plugin) is gone", "absent",
                     {"apiVersion": "apps/v1", "kind": "DaemonSet", "namespace": old.namespace, "name": old.daemonset}))
    out.append(Check(f"no pod of DaemonSet {old.namespace}/{old.daemonset} is left (terminating ones included)", "no-pods",
                     {"namespace": old.namespace, "daemonSet": old.daemonset}))
    return out


def _driver_up(shape: Shape, nodes: list[str]) -> list[Check]:
    out = _application_synced(shape, shape.driver.application) if shape.driver is not None else []
    if nodes:
        out.append(Check(f"ResourceSlices of {GPU_DRIVER} are published for each of {_nodes(nodes)}", "slices",
                         {"driver": GPU_DRIVER, "nodes": nodes}))
    return out


def _finalizer(shape: Shape, old: DriverRelease) -> list[Check]:
    if not old.application or not shape.gitops_namespace:
        return []
    finalizer = "resources-finalizer.argocd.argoproj.io"
    return [Check(f"the live Application {old.application} carries the resources finalizer ({finalizer}): it does once a "
                  f"tree rendered by this gpuc is synced (`kubectl -n {shape.gitops_namespace} get application {old.application} "
                  "-o jsonpath='{.metadata.finalizers}'`); without it, deleting the Application leaves its DaemonSet running",
                  FINALIZER_CHECK, {"namespace": shape.gitops_namespace, "name": old.application, "finalizer": finalizer})]


def _nodes(nodes: list[str]) -> str:
    return ", ".join(nodes) if len(nodes) <= 6 else f"{', '.join(nodes[:5])} and {len(nodes) - 5} more nodes"


def _no_gpu_pods(nodes: list[str], what: str) -> Check:
    return Check(f"no pod on {what} holds a GPU (drain them: `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data` "
                 "for each node)", "no-gpu-pods", {"nodes": nodes})


def _cordoned(nodes: list[str], what: str) -> Check:
    return Check(f"{what} are cordoned (`kubectl cordon NODE`), so no new pod lands there meanwhile", "cordoned", {"nodes": nodes})


def _uncordoned(nodes: list[str], what: str) -> Check:
    return Check(f"{what} are uncordoned again (`kubectl uncordon NODE`)", "uncordoned", {"nodes": nodes})


# -- one builder per kind ----------------------------------------------------------------------------------------------


def _release_swap(before: Shape, after: Shape, hazard: Hazard, busy: dict[str, tuple[str, ...]]) -> list[Step]:
    old = before.driver
    dra = _dra_nodes(after)
    if old is None:  # the GPUCluster's driver gives way to a release of gpuc's: hold the release until the GPUCluster is gone
        return [Step(0, "Hold the DRA driver release back while the GPUCluster's driver goes", {"draDriver": {"installed": False}},
                     disrupts=["no new GPU claim is allocated or prepared until the next step is done; running pods keep their GPUs"],
                     done=[Check("no ResourceSlice of gpu.nvidia.com is left", "no-slices", {"driver": GPU_DRIVER, "nodes": dra})]),
                Step(0, "Install the DRA driver release", None, done=_driver_up(after, dra))]
    new_name = f"{after.driver.namespace}/{after.driver.name}" if after.driver else "the GPUCluster's DRA driver"
    retire = Step(0, f"Retire the DRA driver release {old.namespace}/{old.name}", {"draDriver": {"installed": False}},
                  before=_finalizer(before, old),
                  disrupts=[f"from this step until the next is done, no new GPU claim on the DRA pools ({', '.join(_dra_pools(after))}) "
                            "is allocated or prepared: pods that start meanwhile wait; running pods keep their GPUs (the plugin "
                            "only hands devices out, it does not hold them)"],
                  done=[*_driver_gone(before, old), Check(f"no ResourceSlice of {GPU_DRIVER} is left on {_nodes(dra)}", "no-slices",
                                                          {"driver": GPU_DRIVER, "nodes": dra})])
    install = Step(0, f"Install {new_name}", None,
                   before=[Check("step 1's checks hold: the old kubelet plugin is gone from every node", "previous")],
                   done=[*_driver_up(after, dra), *_rendered_synced(after)])
    return [retire, install]


def _pool_handover(before: Shape, after: Shape, hazard: Hazard, busy: dict[str, tuple[str, ...]]) -> list[Step]:
    handed = [p for p in after.pools if p in hazard.pools]
    steps: list[Step] = []
    for i, name in enumerate(handed):
        done_pools = {p: {"allocation": after.pools[p].allocation} for p in handed[:i]}
        nodes = list(after.pools[name].nodes)
        what = f"the nodes of pool {name}"
        source, target = before.pools[name].allocation, after.pools[name].allocation
        off: list[Check] = [_no_gpu_pods(nodes, what)]
        if source == "devicePlugin":
            off.append(Check(f"{what} advertise no nvidia.com/gpu (the device plugin left them)", "allocatable",
                             {"nodes": nodes, "resource": "nvidia.com/gpu", "count": 0}))
        else:
            off.append(Check(f"no ResourceSlice of {GPU_DRIVER} is left on {what}", "no-slices", {"driver": GPU_DRIVER, "nodes": nodes}))
        pods = busy.get(name, ())
        steps.append(Step(0, f"Take pool {name} off the {'device plugin' if source == 'devicePlugin' else 'DRA driver'}",
                          {"nodePools": {**done_pools, name: {"allocation": "none"}}},
                          before=[_cordoned(nodes, what)],
                          disrupts=[f"pool {name}'s GPUs serve nobody from this step until the next is done: its pods are drained "
                                    f"and restart on other pools or wait{': ' + ', '.join(pods) if pods else ''}"],
                          done=off))
        on: list[Check]
        if target == "dra":
            on = [Check(f"ResourceSlices of {GPU_DRIVER} are published for each of {_nodes(nodes)}", "slices",
                        {"driver": GPU_DRIVER, "nodes": nodes})]
        else:
            count = after.pools[name].gpus
            on = [Check(f"{what} advertise nvidia.com/gpu: {count}", "allocatable",
                        {"nodes": nodes, "resource": "nvidia.com/gpu", "count": count})]
        steps.append(Step(0, f"Hand pool {name} to the {'DRA driver' if target == 'dra' else 'device plugin'}",
                          {"nodePools": {**done_pools, name: {"allocation": target}}} if i + 1 < len(handed) else None,
                          before=[Check(f"step {2 * i + 1}'s checks hold: nothing holds pool {name}'s GPUs", "previous")],
                          done=[*on, _uncordoned(nodes, what), *_rendered_synced(after)]))
    return steps


def _operator_swap(before: Shape, after: Shape, hazard: Hazard, busy: dict[str, tuple[str, ...]]) -> list[Step]:
    if after.operator_mode in ("patch", "none"):
        raise CannotStage(("spec", "gpuOperator", "mode"),
                          f"the GPU Operator's GPUCluster would give way to a GPU Operator another team installs (mode "
                          f"{after.operator_mode}): gpuc can take its own install down, not time somebody else's",
                          "move to gpuOperator.mode helm first (its own `gpuc upgrade`), then hand the install over")
    gpu_nodes = [n for p in before.pools.values() for n in p.nodes]
    ours = before.operator_mode != "patch"  # a patched ClusterPolicy is its owner's to remove
    held: dict[str, Any] = {"gpuOperator": {"customResource": "none"}} if ours else {}
    if before.driver is not None:  # the release the GPUCluster's driver replaces goes with the ClusterPolicy
        held["draDriver"] = {"installed": False}
    policy = "ClusterPolicy" if before.operator_mode == "patch" else before.operator
    owner = [] if ours else [Check(
        "the ClusterPolicy's owner has removed it, with the GPU Operator install it belongs to (gpuc only patched it): "
        "`kubectl get clusterpolicies` lists none", "absent", _operator_object(before, policy))]
    gone = [*_deleted_by_hand(before, policy), Check(f"the {policy} is gone", "absent", _operator_object(before, policy))] if ours else []
    if before.driver is not None:
        gone += _driver_gone(before, before.driver)
    pods = sorted({p for v in busy.values() for p in v})
    first = Step(0, f"Remove the GPU Operator's {policy}", held,
                 intent={"spec.gpuOperator.version": after.operator_version}
                 if ours and after.operator_version != before.operator_version else {},
                 before=[_cordoned(gpu_nodes, "the GPU nodes"), _no_gpu_pods(gpu_nodes, "any GPU node"), *owner],
                 disrupts=["every GPU of the cluster, from this step until the next is done: NVIDIA documents the move between a "
                           "ClusterPolicy and a GPUCluster as for new clusters only, so the operands are removed and installed "
                           f"again{': the drained pods are ' + ', '.join(pods) if pods else ''}"],
                 done=gone)
    ready = [Check(f"the {after.operator} reports ready", "ready", {**_operator_object(after, after.operator), "state": "ready"})]
    second = Step(0, f"Deploy the GPU Operator's {after.operator}", None, answers=() if ours else (OPERATOR_SWAP,),
                  before=[Check("step 1's checks hold", "previous")],
                  done=[*ready, *_driver_up(after, _dra_nodes(after)), _uncordoned(gpu_nodes, "the GPU nodes"), *_rendered_synced(after)])
    return [first, second]


def _deleted_by_hand(shape: Shape, kind: str) -> list[Check]:
    """Helm keeps the ClusterPolicy its chart stops rendering (helm.sh/resource-policy: keep); Argo CD prunes it all
    the same, so only a cluster deployed by `pulumi up` (a Helm release) needs it deleted by hand, in the background
    as kubectl does by default: in the foreground it never goes (facts/data/operators.yaml prunePropagation)."""
    facts = gpu_operator()
    if shape.gitops_namespace or kind != "ClusterPolicy" or not facts["helmKeepsClusterPolicy"]:
        return []
    return [Check(f"once `pulumi up` of this step is done, delete the ClusterPolicy: Helm keeps it (the chart annotates it "
                  f"helm.sh/resource-policy: keep): `kubectl delete clusterpolicy {facts['clusterPolicyName']} "
                  f"--cascade={facts['prunePropagation']}`", "deleted", _operator_object(shape, kind))]


def _operator_object(shape: Shape, kind: str) -> dict[str, Any]:
    facts = gpu_operator()
    if kind == "GPUCluster":
        return {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "name": facts["gpuCluster"]["name"]}
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": facts["clusterPolicyName"]}


def _kubernetes(before: Shape, after: Shape, hazard: Hazard, busy: dict[str, tuple[str, ...]]) -> list[Step]:
    old, new = (int(v.split(".")[1]) for v in (before.kubernetes, after.kubernetes))
    if new < old:
        raise CannotStage(("spec", "kubernetesVersion"), f"Kubernetes {before.kubernetes} -> {after.kubernetes} is a downgrade, "
                          "which a control plane does not take", f"keep kubernetesVersion \"{before.kubernetes}\"")
    if new > old + 1:
        raise CannotStage(("spec", "kubernetesVersion"), f"Kubernetes {before.kubernetes} -> {after.kubernetes} skips a minor; "
                          "a control plane is upgraded one minor at a time",
                          f"set kubernetesVersion \"1.{old + 1}\" first (its own pull request, after that upgrade), then \"1.{old + 2}\"")
    keep = "" if before.api_version == after.api_version else (
        f"; it keeps serving {before.api_version} (the version the running tree is written in) until this step is synced: "
        f"where {before.api_version} is a beta API the new minor serves only on request, start it with "
        f"--runtime-config={before.api_version}=true until then")
    # what the API server is started with meanwhile, as data: the running tree's beta version, served only on request
    serving = {"runtimeConfig": f"{before.api_version}=true"} if keep and "beta" in before.api_version else {}
    return [Step(0, f"Write the tree for Kubernetes {after.kubernetes}", None, answers=(KUBERNETES,),
                 before=[Check(f"the control plane runs Kubernetes {after.kubernetes} (`kubectl version`){keep}", "server-version",
                               {"minor": after.kubernetes, **serving}),
                         Check("the kubelets follow the control plane (they may lag it, never lead it): upgrade them after it",
                               "manual")],
                 done=_rendered_synced(after))]


def _plugin_restarted(after: Shape, pools: list[str]) -> list[Check]:
    """The DRA kubelet plugin publishes the MIG devices it found at start-up (facts/data/dra_driver.yaml
    kubeletPluginDaemonSet): once the MIG Manager has applied a new layout, it is restarted to publish the new ones.
    Without it the slices still name the old layout's devices, and new claims are allocated devices the GPU no longer has."""
    driver = after.driver
    if driver is None or not pools:
        return []
    nodes = [n for p in pools for n in after.pools[p].nodes]
    ds = f"daemonset/{driver.daemonset}"
    return [Check(f"the DRA kubelet plugin is restarted on {_nodes(nodes)} once the new layout is applied, so that it "
                  f"publishes the new MIG devices (it publishes those it found at start-up): `kubectl -n {driver.namespace} "
                  f"rollout restart {ds}`, then `kubectl -n {driver.namespace} rollout status {ds}`", "restarted",
                  {"namespace": driver.namespace, "daemonSet": driver.daemonset, "nodes": nodes})]


def _mig_relayout(before: Shape, after: Shape, hazard: Hazard, busy: dict[str, tuple[str, ...]]) -> list[Step]:
    nodes = [n for p in hazard.pools for n in after.pools[p].nodes]
    what = f"the nodes of pool(s) {', '.join(hazard.pools)}"
    pods = sorted({p for name in hazard.pools for p in busy.get(name, ())})
    return [Step(0, f"Repartition pool(s) {', '.join(hazard.pools)}", None, answers=(MIG_RELAYOUT,),
                 before=[_cordoned(nodes, what), _no_gpu_pods(nodes, what)],
                 disrupts=[f"the MIG devices of pool(s) {', '.join(hazard.pools)} until the MIG Manager has applied the new layout; "
                           f"the pods drained from them restart on the new layout or elsewhere: {', '.join(pods)}"],
                 done=[Check(f"{what} report the new layout applied", "node-label",
                             {"nodes": nodes, "label": gpu_operator()["migConfigLabel"] + ".state", "value": "success"}),
                       *_plugin_restarted(after, [p for p in hazard.pools if after.pools[p].allocation == "dra"]),
                       Check(f"ResourceSlices of {GPU_DRIVER} are published for each of {_nodes(nodes)}", "slices",
                             {"driver": GPU_DRIVER, "nodes": nodes}),
                       _uncordoned(nodes, what), *_rendered_synced(after)])]
