"""Is the platform ready for DRA? The checks of the troubleshooting guides, each from the objects the cluster holds.

DRA served in the version gpuc renders; the DeviceClasses the claims name; CDI on in the GPU Operator;
one ResourceSlice pool per GPU node of the DRA pools, with the GPUs the pool declares; no device plugin
advertising `nvidia.com/gpu` on a node whose GPUs DRA hands out; MIG layouts applied; tainted devices.
"""

from __future__ import annotations

from typing import Any

from ...facts.driver import builtin_device_classes
from ...facts.platform import gpu_operator, version_tuple
from .context import RESOURCE, StatusContext, names

DRIVER_HINT = "is the DRA driver installed and running? `kubectl get pods -n {ns} -o wide`"


def dra_api(ctx: StatusContext) -> None:
    api = ctx.compiled.cluster.api
    group, _, version = api.api_version.rpartition("/")
    setting = f"kubernetesVersion {api.kubernetes}"
    served = ctx.state.served
    if served is not None:
        versions = served.get(group, ())
        if version in versions:
            ctx.add("dra-api", "ok", f"{api.api_version} is served (what gpuc renders for {setting})")
        elif versions:
            ctx.add("dra-api", "fail", f"the API server serves {group} {', '.join(versions)}, not {version}, which gpuc renders for {setting}",
                    "set the Cluster's kubernetesVersion to the version the cluster runs")
        else:
            ctx.add("dra-api", "fail", f"the API server does not serve {group}: Dynamic Resource Allocation is off",
                    "DRA is on by default from Kubernetes 1.34; on 1.32-1.33 enable the DynamicResourceAllocation feature gate "
                    f"and --runtime-config={group}/v1beta1=true (and v1beta2 on 1.33)")
    else:
        exported = [o for o in ctx.state.objects if o.group == group]
        if not exported:
            ctx.skip("dra-api", "ResourceSlices")
        elif any(o.api_version == api.api_version for o in exported):
            ctx.add("dra-api", "ok", f"the export holds {api.api_version} objects (what gpuc renders for {setting})")
        else:
            other = exported[0]
            # kubectl prints the version the server prefers, the newest it serves
            ctx.add("dra-api", "fail", f"the export holds {other.api_version} objects: the cluster prefers it, and gpuc renders "
                    f"{api.api_version} for {setting}", "set the Cluster's kubernetesVersion to the version the cluster runs", other)
    _kubelets(ctx)


def _kubelets(ctx: StatusContext) -> None:
    want = ctx.compiled.cluster.api.kubernetes
    off, read = [], 0
    for node in ctx.nodes:
        running = str((node.status.get("nodeInfo") or {}).get("kubeletVersion", ""))
        read += bool(running)
        if running and ".".join(str(x) for x in version_tuple(running)[:2]) != want:
            off.append((node, running))
    if not ctx.nodes:
        ctx.skip("kubernetes-version", "Nodes")
    elif not read:
        ctx.add("kubernetes-version", "skip", "no Node in the cluster state reports status.nodeInfo.kubeletVersion",
                "export the Nodes with their status (`kubectl get nodes -o yaml`)")
    elif not off:
        ctx.add("kubernetes-version", "ok", f"the {read} node(s) run kubelet {want}, as the Cluster's kubernetesVersion says")
    if off:
        node, running = off[0]
        ctx.add("kubernetes-version", "warn", f"{len(off)} node(s) run kubelet {running} ({names([n.name for n, _ in off])}) while the "
                f"Cluster says kubernetesVersion {want}", "set kubernetesVersion to what the control plane runs, and upgrade "
                "the nodes to it (DRA features follow the older of the two)", node, ("status", "nodeInfo", "kubeletVersion"))


def device_classes(ctx: StatusContext) -> None:
    wanted: dict[str, list[str]] = {}
    for obj in ctx.compiled.objects:
        if obj.kind in ("ResourceClaim", "ResourceClaimTemplate"):
            spec = obj.manifest["spec"]
            spec = spec.get("spec", {}) if obj.kind == "ResourceClaimTemplate" else spec
            for request in (spec.get("devices") or {}).get("requests") or []:
                for alternative in [request.get("exactly") or request, *(request.get("firstAvailable") or [])]:
                    if alternative.get("deviceClassName"):
                        wanted.setdefault(alternative["deviceClassName"], []).append(f"{obj.namespace}/{obj.name}")
    if not wanted:
        return
    if not ctx.state.has(RESOURCE, "DeviceClass"):
        ctx.skip("device-classes", "DeviceClasses")
        return
    present = {o.name for o in ctx.state.of(RESOURCE, "DeviceClass")}
    ours = {o.name for o in ctx.compiled.objects if o.kind == "DeviceClass"}
    missing = sorted(set(wanted) - present)
    if not missing:
        ctx.add("device-classes", "ok", f"the {len(wanted)} DeviceClass(es) the claims name exist: {names(sorted(wanted))}")
    for name in missing:
        users = wanted[name]
        if name in ours:
            fix = "gpuc renders it: sync the cluster's Argo CD application (or `pulumi up`)"
        elif name in builtin_device_classes():
            fix = ("the DRA driver's chart creates it: " + DRIVER_HINT.format(ns=ctx.compiled.cluster.spec.dra_driver.namespace)
                   + " (and is resources.gpus / computeDomains enabled in its values?)")
        else:
            fix = "create it, or name a class that exists in the workload intent"
        ctx.add("device-classes", "fail", f"DeviceClass {name} does not exist; {len(users)} claim(s) name it ({names(users)}): "
                "their pods stay Pending", fix)


def cdi(ctx: StatusContext) -> None:
    cluster = ctx.compiled.cluster
    if not cluster.dra_pools:
        return
    operator = cluster.spec.gpu_operator
    facts = gpu_operator()
    if operator.mode == "gpuCluster":
        if not ctx.state.has("nvidia.com", "GPUCluster"):
            ctx.skip("cdi", "GPUClusters")
        elif ctx.state.of("nvidia.com", "GPUCluster"):
            ctx.add("cdi", "ok", "the GPU Operator's GPUCluster installs the DRA driver, which generates CDI specs itself")
        else:
            ctx.add("cdi", "fail", "no GPUCluster resource: the GPU Operator has not installed the DRA driver",
                    "sync the cluster's Argo CD application (its GPU Operator release sets gpuCluster.deployCR)")
        return
    if not ctx.state.has("nvidia.com", "ClusterPolicy"):
        ctx.skip("cdi", "ClusterPolicies")
        return
    policies = ctx.state.of("nvidia.com", "ClusterPolicy")
    if not policies:
        if operator.mode == "none":
            ctx.add("cdi", "skip", "no ClusterPolicy, and gpuOperator.mode none: CDI is the node's container runtime's business",
                    "check the nvidia-container-toolkit on the nodes runs in CDI mode (nvidia-ctk config)")
        else:
            ctx.add("cdi", "fail", "no ClusterPolicy: the GPU Operator is not installed (or not reconciled yet)",
                    f"sync the cluster's Argo CD application; `kubectl get pods -n {operator.namespace}`")
        return
    policy = policies[0]
    settings = policy.spec.get("cdi") or {}
    needs_default = operator.version is not None and version_tuple(operator.version) < version_tuple(facts["cdiDefaultUntil"])
    if settings.get("enabled") is not True:
        ctx.add("cdi", "fail", f"ClusterPolicy {policy.name} has cdi.enabled {settings.get('enabled', 'unset')}: the DRA driver's "
                "devices reach no container (pods fail in ContainerCreating)",
                "set cdi.enabled: true in the GPU Operator values (gpuc renders it: sync the node configuration)",
                policy, ("spec", "cdi"))
    elif needs_default and settings.get("default") is not True:
        ctx.add("cdi", "fail", f"ClusterPolicy {policy.name} has cdi.default {settings.get('default', 'unset')}: GPU Operator "
                f"{operator.version} needs it for the runtime to use CDI", "set cdi.default: true (dropped in v25.10, needed before)",
                policy, ("spec", "cdi"))
    else:
        ctx.add("cdi", "ok", f"ClusterPolicy {policy.name} has CDI enabled")


def slice_pools(ctx: StatusContext) -> None:
    dra = {p.name for p in ctx.compiled.cluster.dra_pools}
    if not dra:
        return
    step = ctx.compiled.cluster.transition
    if step is not None and not ctx.compiled.cluster.driver_runs:
        ctx.add("resource-slices", "ok", f"no DRA driver runs during step {step.step} of {step.steps} ({step.change}): the DRA pools "
                "publish nothing until a later step installs it")
        return
    if not ctx.state.has(RESOURCE, "ResourceSlice"):
        ctx.skip("resource-slices", "ResourceSlices")
        return
    if not ctx.nodes:
        ctx.skip("resource-slices", "Nodes")
        return
    nodes = [n for n in ctx.nodes if n.name in ctx.pool_of and ctx.pool_of[n.name].name in dra]
    silent = [n for n in nodes if not ctx.gpu_slices.get(n.name)]
    short: list[str] = []
    for n in nodes:
        pool = ctx.pool_of[n.name]
        slices = ctx.gpu_slices.get(n.name, [])
        pool_names = {str((s.spec.get("pool") or {}).get("name")) for s in slices}
        if len(pool_names) > 1:
            ctx.add("resource-slices", "warn", f"node {n.name} publishes {len(pool_names)} {ctx.driver} pools ({names(sorted(pool_names))})",
                    "one kubelet plugin per node publishes one pool named after the node: look for a second DRA driver "
                    "install (`helm list -A`)", slices[1])
        mates = ctx.compiled.cluster.node_mates(pool)  # the pools on this node, one per GPU model
        if all(p.mig_layout is None and not p.dynamic_partitions for p in mates):
            gpus = sum(1 for s in slices for d in s.spec.get("devices") or []
                       if ((d.get("attributes") or {}).get("type") or {}).get("string") == "gpu")
            declared = sum(p.spec.gpu.count for p in mates)
            if slices and gpus != declared:
                short.append(f"{n.name} ({gpus} of {declared})")
    ns = ctx.compiled.cluster.spec.dra_driver.namespace
    if silent:
        ctx.add("resource-slices", "fail", f"{len(silent)} of {len(nodes)} GPU node(s) of the DRA pools publish no {ctx.driver} "
                f"ResourceSlice: {names([n.name for n in silent])}",
                f"the DRA kubelet plugin is not running there: `kubectl get pods -n {ns} -o wide --field-selector "
                f"spec.nodeName={silent[0].name}` (check the node's {gpu_operator()['draNodeLabel']} label and taints)", silent[0])
    if short:
        ctx.add("resource-slices", "warn", f"node(s) publish another number of GPUs than their pool declares: {names(short)}",
                "run nvidia-smi on the node (a GPU fallen off the bus, XID errors), or correct nodePools[].gpu.count")
    if nodes and not silent and not short:
        ctx.add("resource-slices", "ok", f"each of the {len(nodes)} GPU node(s) of the DRA pools publishes one {ctx.driver} pool")
    elif not nodes:
        ctx.add("resource-slices", "warn", f"no node of the cluster state belongs to a DRA pool ({', '.join(sorted(dra))})",
                "list the nodes in nodePools[].nodeNames, or label them with the GPU product (GPU Feature Discovery)")


def device_plugin(ctx: StatusContext) -> None:
    if not ctx.compiled.cluster.dra_pools:
        return
    if not ctx.nodes:
        ctx.skip("device-plugin", "Nodes")
        return
    both = []
    for node in ctx.nodes:
        pool = ctx.pool_of.get(node.name)
        if not (ctx.gpu_slices.get(node.name) or (pool is not None and pool.dra)):
            continue
        advertised = str((node.status.get("allocatable") or {}).get("nvidia.com/gpu", "0"))
        if advertised not in ("0", ""):
            both.append((node, advertised))
    if not both:
        ctx.add("device-plugin", "ok", "no node whose GPUs DRA hands out advertises nvidia.com/gpu")
        return
    node, count = both[0]
    label = gpu_operator()["devicePluginDeployLabel"]
    fix = (f"label the nodes {label}=false (gpuc's node labels for DRA pools do) and restart the device plugin pods there"
           if ctx.compiled.cluster.spec.gpu_operator.mode != "none"
           else "gpuOperator.mode none: give the standalone device plugin chart a node affinity that keeps it off DRA nodes")
    ctx.add("device-plugin", "fail", f"{len(both)} node(s) advertise nvidia.com/gpu through the device plugin and publish their GPUs "
            f"through DRA, so both hand out the same GPUs: {names([f'{n.name} ({c})' for n, c in both])}", fix, node,
            ("status", "allocatable"))


def mig_config(ctx: StatusContext) -> None:
    pools = {p.name: p for p in ctx.compiled.cluster.pools if p.mig_config}
    if not pools:
        return
    if not ctx.nodes:
        ctx.skip("mig-config", "Nodes")
        return
    facts = gpu_operator()
    wrong, failed, waiting, done = [], [], [], 0
    for node in ctx.nodes:
        pool = ctx.pool_of.get(node.name)
        if pool is None or pool.name not in pools:
            continue
        labels = ctx.labels(node)
        state = labels.get(facts["migConfigStateLabel"])
        if labels.get(facts["migConfigLabel"]) != pool.mig_config:
            wrong.append((node, labels.get(facts["migConfigLabel"]), pool.mig_config))
        elif state == "failed":
            failed.append(node)
        elif state != "success":
            waiting.append((node, state))
        else:
            done += 1
    if wrong:
        node, has, want = wrong[0]
        ctx.add("mig-config", "fail", f"{len(wrong)} node(s) carry another {facts['migConfigLabel']} than their pool's {want}: "
                + names([f"{n.name} ({h or 'unset'})" for n, h, _ in wrong]),
                "apply gpuc's node labels (rendered per pool); the MIG Manager then repartitions the GPUs", node, ("metadata", "labels"))
    if failed:
        ctx.add("mig-config", "fail", f"the MIG Manager failed to apply the layout on {names([n.name for n in failed])}",
                f"`kubectl logs -n {ctx.compiled.cluster.spec.gpu_operator.namespace} -l app=nvidia-mig-manager`: GPUs in use by "
                "a process, or a layout the GPU does not support", failed[0], ("metadata", "labels"))
    if waiting:
        ctx.add("mig-config", "warn", "MIG layout not applied yet on " + names([f"{n.name} ({s or 'no state'})" for n, s in waiting]),
                "wait for the MIG Manager (it drains GPU pods and may reboot); check again")
    if done and not (wrong or failed or waiting):
        ctx.add("mig-config", "ok", f"the MIG layout is applied on the {done} node(s) of the MIG pools")
    if not (done or wrong or failed or waiting):
        ctx.add("mig-config", "skip", f"no node of the MIG pools ({', '.join(sorted(pools))}) is in the cluster state",
                "export every GPU node (`kubectl get nodes -o yaml`), or list the pools' nodes in nodePools[].nodeNames")


def device_taints(ctx: StatusContext) -> None:
    tainted: list[tuple[Any, str]] = []
    for s in ctx.slices:
        for d in s.spec.get("devices") or []:
            for t in (d.get("taints") or []) if isinstance(d, dict) else []:
                tainted.append((s, f"{s.spec.get('pool', {}).get('name')}/{d.get('name')} ({t.get('key')}={t.get('value', '')}:{t.get('effect')})"))
    if tainted:
        ctx.add("device-taints", "warn", f"{len(tainted)} device(s) carry a taint, so no claim gets them without a toleration: "
                f"{names([t for _, t in tainted])}", "a driver taints a device it finds unhealthy: check the GPU (nvidia-smi, XID "
                "errors); a DeviceTaintRule an administrator wrote is removed with `kubectl delete devicetaintrule`", tainted[0][0])


CHECKS = (dra_api, device_classes, cdi, slice_pools, device_plugin, mig_config, device_taints)
