"""The real GPU Operator (harness/build.d/operators.sh, v26.7.0) against the example fleet's rendering.

Per cluster whose GPU Operator gpuc configures (mode helm: prod-east, lab; mode patch: staging): a fresh API server
of the cluster's minor (--allow-privileged=true), fake GPU nodes carrying Node Feature Discovery's labels, GPU
Feature Discovery's and the labels gpuc renders (node-labels.yaml; the Node patch files 1-node-*.yaml applied
with server-side apply, as Argo CD does), the ClusterPolicy the real chart renders under Helm with gpuc's values
file (--kube-version and --api-versions from the API server's discovery, as Argo CD's repo server passes them),
and the operator running until the ClusterPolicy is ready. Its node-labelling pass then rewrites the nodes'
nvidia.com/gpu.deploy.* labels, and the test evaluates each DaemonSet's node selection against the labels the
nodes carry after it:

- the DaemonSets gpuc keeps off DRA nodes (the device plugin and its MPS control daemon, through
  devicePlugin.enabled=false or the node label nvidia.com/gpu.deploy.device-plugin=false) select no DRA node;
- the MIG Manager selects no dynamic-MIG node (gpuc's nvidia.com/gpu.deploy.mig-manager=false);
- the DRA kubelet plugin, as the DRA driver chart renders it with gpuc's values (kubeletPlugin.nodeSelector and
  the chart's default affinity), still selects every DRA node.

Cluster west (gpuOperator.mode gpuCluster) runs the same way with the chart's GPUCluster: there the operator
itself renders the DRA kubelet plugin.

No kubelet and no DaemonSet controller run: DaemonSets have no pods, and the operator counts a DaemonSet with
nothing desired as ready. The GPU Operator and DRA charts come from ../shared/upstream/charts; lab asks for DRA
driver 0.5.1, which has no chart anywhere: the nearest, 0.5.0-dev (main 9593204), stands in for it.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import components, controlplane, operators, servers
from harness.controlplane import ControlPlane
from harness.kube import Kube, Rejection

from conftest import EXAMPLES, SHARED

Obj = dict[str, Any]

UPSTREAM = SHARED / "upstream"
CHARTS = UPSTREAM / "charts"
NAMESPACE = operators.GPU_OPERATOR_NAMESPACE

DRA_LABEL = "nvidia.com/gpu.dra"
DRA_DRIVER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"
# The operator's DaemonSets that hand out GPUs through the device plugin API (assets state-device-plugin and
# state-mps-control-daemon): gpuc keeps both off DRA nodes.
DEVICE_PLUGIN_DAEMONSETS = ("nvidia-device-plugin-daemonset", "nvidia-device-plugin-mps-control-daemon")
MIG_MANAGER_DAEMONSET = "nvidia-mig-manager"

# What GPU Feature Discovery labels a node of each model with (nvidia.com/gpu.product, nvidia.com/mig.capable):
# on a running cluster GFD has labelled every GPU node before gpuc's labels matter.
GFD = {
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", "true"),
    "H200-141GB": ("NVIDIA-H200", "true"),
    "A100-80GB": ("NVIDIA-A100-SXM4-80GB", "true"),
    "GB200-186GB": ("NVIDIA-GB200", "true"),
    "L40S-48GB": ("NVIDIA-L40S", "false"),
}
NFD = {
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
    "feature.node.kubernetes.io/kernel-version.full": "6.8.0-60-generic",
}
NODE_INFO = {
    "machineID": "0", "systemUUID": "0", "bootID": "0", "kernelVersion": "6.8.0-60-generic", "osImage": "Ubuntu 24.04.2 LTS",
    "containerRuntimeVersion": "containerd://2.0.5", "kubeletVersion": "v1.34.0", "kubeProxyVersion": "", "operatingSystem": "linux",
    "architecture": "amd64",
}


def helm() -> Path:
    return components.binary(f"helm-{components.pins()['HELM_VERSION']}")


def served_api_versions(cp: ControlPlane) -> list[str]:
    """Every group/version and group/version/Kind the API server serves: what Argo CD passes as --api-versions."""
    out: list[str] = []
    status, body = cp.get("/api")
    assert status == 200, body
    versions = list(json.loads(body)["versions"])
    status, body = cp.get("/apis")
    assert status == 200, body
    versions += [v["groupVersion"] for g in json.loads(body)["groups"] for v in g["versions"]]
    for gv in versions:
        out.append(gv)
        status, body = cp.get(f"/api/{gv}" if "/" not in gv else f"/apis/{gv}")
        if status == 200:
            out += sorted({f"{gv}/{r['kind']}" for r in json.loads(body)["resources"] if "/" not in r["name"]})
    return out


def helm_template(chart: Path, release: str, namespace: str, values: Path | None, cp: ControlPlane) -> list[Obj]:
    """`helm template` as Argo CD's repo server runs it: the cluster's version and served API versions."""
    argv = [str(helm()), "template", release, str(chart), "--namespace", namespace, "--kube-version", f"v{cp.minor}.0"]
    for version in served_api_versions(cp):
        argv += ["--api-versions", version]
    if values is not None:
        argv += ["--values", str(values)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"helm template {chart.name} failed:\n{result.stderr}"
    return [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict)]


# -- node selection, as the scheduler's NodeAffinity filter evaluates it --------------------------------------------

def _expression_mismatch(expr: Obj, labels: dict[str, str]) -> str | None:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    has, value = key in labels, labels.get(key)
    if op in ("Gt", "Lt"):
        ok = has and str(value).lstrip("-").isdigit() and (int(str(value)) > int(values[0])) == (op == "Gt") and int(str(value)) != int(values[0])
    else:
        ok = {"In": has and value in values, "NotIn": not has or value not in values, "Exists": has, "DoesNotExist": not has}[op]
    return None if ok else f"{key} {op} {values} (node has {key}={value!r})" if has else f"{key} {op} {values} (node lacks {key})"


def selection_mismatch(pod_spec: Obj, node: Obj) -> str | None:
    """Why a pod with `pod_spec` cannot land on `node` by its nodeSelector and required node affinity (taints aside:
    the fake nodes carry none); None when it can."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} (node has {labels.get(key)!r})"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    reasons = []
    for term in required.get("nodeSelectorTerms") or []:
        fields = {"metadata.name": node["metadata"]["name"]}
        why = [w for e in term.get("matchExpressions") or [] if (w := _expression_mismatch(e, labels))]
        why += [w for e in term.get("matchFields") or [] if (w := _expression_mismatch(e, fields))]
        if not why:
            return None
        reasons.append(" and ".join(why))
    return "required node affinity: no term matches: " + "; ".join(reasons)


# -- the fleet --------------------------------------------------------------------------------------------------------

@dataclass
class FakeNode:
    name: str
    pool: str
    model: str
    dra: bool
    dynamic_mig: bool
    labels: dict[str, str]  # gpuc's labels for its pool
    patch: Path | None  # gpuc's Node patch file, when the pool lists nodeNames


def fleet_nodes(rendered: Path, cluster: str) -> list[FakeNode]:
    intent = yaml.safe_load((EXAMPLES / "clusters" / f"{cluster}.yaml").read_text())
    pool_labels = yaml.safe_load((rendered / cluster / "node-labels.yaml").read_text()) or {}
    nodes = []
    for pool in intent["spec"]["nodePools"]:
        labels = {k: str(v) for k, v in (pool_labels.get(pool["name"]) or {}).items()}
        names = pool.get("nodeNames") or [f"{pool['name']}-{i}" for i in range(pool["nodes"])]
        for name in names:
            patch = rendered / cluster / f"1-node-{name}.yaml"
            nodes.append(FakeNode(name, pool["name"], pool["gpu"]["model"], labels.get(DRA_LABEL) == "true",
                                  (pool.get("mig") or {}).get("layout") == "dynamic", labels, patch if patch.is_file() else None))
    return nodes


def register(kube: Kube, nodes: list[FakeNode]) -> None:
    """Create the nodes as a kubelet registers them (NFD's and GFD's labels, the provisioner's labels from gpuc's
    node-labels.yaml where gpuc writes no Node patch), then apply gpuc's Node patches as Argo CD does."""
    for n in nodes:
        product, mig = GFD[n.model]
        labels = {**NFD, "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "nvidia.com/gpu.product": product,
                  "nvidia.com/mig.capable": mig, **({} if n.patch else n.labels)}
        kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": labels}})
        kube.set_status({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name}, "status": {
            "nodeInfo": NODE_INFO, "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake"}]}})
        if n.patch:
            result = kube.apply(yaml.safe_load(n.patch.read_text()))
            assert not isinstance(result, Rejection), str(result)


def node_labels(kube: Kube) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in kube.items("v1", "Node")}


def wait_for_labelling(op: operators.Operator, kube: Kube, nodes: list[FakeNode], state_key: str) -> dict[str, Obj]:
    """The nodes once the operator has labelled every one (nvidia.com/gpu.present and `state_key`) and the labels
    have held still for three seconds."""
    last: dict[str, dict[str, str]] = {}
    since = time.monotonic()

    def settled() -> dict[str, Obj] | None:
        nonlocal last, since
        now = node_labels(kube)
        done = all(now[n.name].get("nvidia.com/gpu.present") == "true" and state_key in now[n.name] for n in nodes)
        if now != last or not done:
            last, since = now, time.monotonic()
            return None
        if time.monotonic() - since < 3:
            return None
        return {n["metadata"]["name"]: n for n in kube.items("v1", "Node")}

    return op.wait_for(f"a settled labelling pass ({state_key} on every GPU node)", settled, timeout=120)


def cr_state(kube: Kube, api_version: str, kind: str, name: str) -> str | None:
    obj = kube.get(api_version, kind, name)
    return ((obj or {}).get("status") or {}).get("state")



@contextlib.contextmanager
def gpu_control_plane(tmp_path: Path, cluster: str) -> Iterator[ControlPlane]:
    """A fresh control plane of the cluster's minor per test (the operator labels nodes, its ClusterPolicy is a
    singleton), with --allow-privileged=true for the operator's DaemonSets."""
    release, emulated = servers.server_for(_minor(cluster))
    cp = controlplane.start(release, tmp_path / "cp", emulated_minor=emulated, apiserver_args=operators.GPU_OPERATOR_APISERVER_ARGS)
    try:
        yield cp
    finally:
        cp.stop()


def _minor(cluster: str) -> str:
    return str(yaml.safe_load((EXAMPLES / "clusters" / f"{cluster}.yaml").read_text())["spec"]["kubernetesVersion"])


def _values_header(values: Path) -> tuple[str, str, str, str]:
    """(release, namespace, chart, version) from the comment gpuc writes atop a values file."""
    text = values.read_text()
    release = re.search(r"release (\S+) in namespace (\S+):", text)
    chart = re.search(r"# chart (\S+) (\S+) from", text)
    assert release and chart, f"{values}: no release/chart header"
    return release.group(1), release.group(2).rstrip(":"), chart.group(1), chart.group(2)


def dra_chart(chart: str, version: str) -> Path:
    path = CHARTS / f"{chart}-{version}"
    if not path.is_dir() and chart == "dra-driver-nvidia-gpu" and version.startswith("0.5."):
        path = CHARTS / "dra-driver-nvidia-gpu-0.5.0-dev"  # no 0.5.x chart exists: main 9593204 is the nearest
    assert path.is_dir(), f"no upstream chart {chart} {version} in {CHARTS}"
    return path


def kubelet_plugin(objects: list[Obj]) -> Obj:
    plugins = [o for o in objects if o.get("kind") == "DaemonSet" and "kubelet-plugin" in o["metadata"]["name"]]
    assert len(plugins) == 1, [o["metadata"]["name"] for o in plugins]
    return plugins[0]


def operator_env(chart_objects: list[Obj]) -> dict[str, str]:
    """The literal env of the chart's operator container (DRIVER_MANAGER_IMAGE, VALIDATOR_IMAGE, ...)."""
    deployment = next(o for o in chart_objects if o.get("kind") == "Deployment" and o["metadata"]["name"] == "gpu-operator")
    container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "gpu-operator")
    return {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}


def _start(cp: ControlPlane, chart_objects: list[Obj], tmp_path: Path) -> operators.Operator:
    return operators.start_gpu_operator(cp, tmp_path / "gpu-operator", env=operator_env(chart_objects))


@pytest.mark.parametrize("cluster", ["prod-east", "lab", "staging"])
def test_the_gpu_operator_keeps_what_gpuc_meant_on_and_off_the_dra_nodes(rendered: Path, tmp_path: Path, cluster: str) -> None:
    with gpu_control_plane(tmp_path, cluster) as cp:
        check_clusterpolicy_mode(rendered, cp, tmp_path, cluster)


def check_clusterpolicy_mode(rendered: Path, cp: ControlPlane, tmp_path: Path, cluster: str) -> None:
    kube = Kube(cp)
    tree = rendered / cluster
    intent = yaml.safe_load((EXAMPLES / "clusters" / f"{cluster}.yaml").read_text())["spec"]
    mode = intent["gpuOperator"]["mode"]
    operators_crds = operators.gpu_operator_crds()
    kube.install_crds(operators_crds)  # before discovery, so --api-versions lists nvidia.com/v1 as on a real cluster
    kube.ensure_namespace(NAMESPACE)
    chart = CHARTS / f"gpu-operator-{operators.version('gpu-operator')}"

    # the ClusterPolicy: the chart rendered with gpuc's values (mode helm), or the chart as another team installed
    # it and gpuc's ClusterPolicy patch applied over it with server-side apply (mode patch)
    if mode == "helm":
        chart_objects = helm_template(chart, "gpu-operator", NAMESPACE, tree / "values" / "gpu-operator.yaml", cp)
    else:
        chart_objects = helm_template(chart, "gpu-operator", NAMESPACE, None, cp)
    policies = [o for o in chart_objects if o["kind"] == "ClusterPolicy"]
    assert len(policies) == 1, "the chart rendered no ClusterPolicy"
    kube.create(policies[0])  # the chart's own fields stay the chart's (another field manager than gpuc's patch)
    for f in sorted(tree.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        if doc.get("kind") == "ClusterPolicy" or (doc.get("kind") == "ConfigMap" and doc["metadata"].get("namespace") == NAMESPACE):
            result = kube.apply(doc)  # the MIG Manager's config gpuc renders; the ClusterPolicy patch in mode patch
            assert not isinstance(result, Rejection), str(result)

    nodes = fleet_nodes(rendered, cluster)
    register(kube, nodes)
    before = node_labels(kube)
    with _start(cp, chart_objects, tmp_path) as op:
        op.wait_for("ClusterPolicy ready", lambda: cr_state(kube, "nvidia.com/v1", "ClusterPolicy", policies[0]["metadata"]["name"]) == "ready",
                    timeout=240)
        after = wait_for_labelling(op, kube, nodes, "nvidia.com/gpu.deploy.operator-validator")
        daemonsets = {d["metadata"]["name"]: d for d in kube.items("apps/v1", "DaemonSet", NAMESPACE)}
        op.check()

    assert "nvidia-operator-validator" in daemonsets, f"the operator rendered no validator DaemonSet: {sorted(daemonsets)}"
    dra = [n for n in nodes if n.dra]
    assert dra, f"{cluster}: no DRA pool"

    # 1. the device plugin (and its MPS daemon) stays off every DRA node
    wrong = [f"DaemonSet {NAMESPACE}/{ds} selects DRA node {n.name} (pool {n.pool})"
             for ds in DEVICE_PLUGIN_DAEMONSETS if ds in daemonsets for n in dra
             if selection_mismatch(daemonsets[ds]["spec"]["template"]["spec"], after[n.name]) is None]
    assert wrong == [], "\n".join(wrong)
    devicepool = [n for n in nodes if not n.dra]
    if devicepool:  # a mixed cluster keeps the device plugin for its other pools
        ds = daemonsets.get(DEVICE_PLUGIN_DAEMONSETS[0])
        assert ds, f"{cluster} has device-plugin pools but the operator rendered no {DEVICE_PLUGIN_DAEMONSETS[0]}"
        off = {n.name: why for n in devicepool if (why := selection_mismatch(ds["spec"]["template"]["spec"], after[n.name]))}
        assert off == {}, f"the device plugin does not reach the device-plugin pools: {off}"

    # 2. the MIG Manager stays off dynamic-MIG nodes
    mig = daemonsets.get(MIG_MANAGER_DAEMONSET)
    wrong = [f"DaemonSet {NAMESPACE}/{MIG_MANAGER_DAEMONSET} selects dynamic-MIG node {n.name} (pool {n.pool})"
             for n in nodes if n.dynamic_mig and mig and selection_mismatch(mig["spec"]["template"]["spec"], after[n.name]) is None]
    assert wrong == [], "\n".join(wrong)
    # ... and reaches every other node gpuc gives a MIG layout (nvidia.com/mig.config), which it is there to apply
    layout = [n for n in nodes if not n.dynamic_mig and "nvidia.com/mig.config" in n.labels]
    if layout:
        assert mig, f"gpuc gives {[n.name for n in layout]} a MIG layout but the operator rendered no {MIG_MANAGER_DAEMONSET}"
        off = {n.name: why for n in layout if (why := selection_mismatch(mig["spec"]["template"]["spec"], after[n.name]))}
        assert off == {}, f"the MIG Manager does not reach the nodes gpuc gives a MIG layout: {off}"

    # 3. the DRA kubelet plugin, as the DRA driver chart renders it with gpuc's values, still selects every DRA node
    values = next(p for p in (tree / "values").glob("*.yaml") if p.name not in ("gpu-operator.yaml", "nim-operator.yaml"))
    release, namespace, chart_name, chart_version = _values_header(values)
    chart_dir = dra_chart(chart_name, chart_version)
    plugin = kubelet_plugin(helm_template(chart_dir, release, namespace, values, cp))
    spec = plugin["spec"]["template"]["spec"]
    selector = (yaml.safe_load(values.read_text()).get("kubeletPlugin") or {}).get("nodeSelector") or {}
    problems = []
    for n in dra:
        if (why := selection_mismatch(spec, {"metadata": {"name": n.name, "labels": before[n.name]}})) is not None:
            problems.append(f"  {n.name} (pool {n.pool}) carries gpuc's labels and still does not match: {why}")
        elif (why := selection_mismatch(spec, after[n.name])) is not None:
            removed = sorted(set(before[n.name]) - set(after[n.name]["metadata"].get("labels") or {}))
            problems.append(f"  {n.name} (pool {n.pool}) no longer matches after the GPU Operator's labelling pass: {why}; "
                            f"the operator removed {removed}")
    culprit = ""
    if DRA_DRIVER_DEPLOY_LABEL in selector and any(DRA_DRIVER_DEPLOY_LABEL not in (after[n.name]["metadata"].get("labels") or {}) for n in dra):
        culprit = (f"\ngpuc's {values.relative_to(rendered)} sets kubeletPlugin.nodeSelector {DRA_DRIVER_DEPLOY_LABEL}="
                   f"{selector[DRA_DRIVER_DEPLOY_LABEL]!r}, but GPU Operator {operators.version('gpu-operator')} in ClusterPolicy mode deletes "
                   f"that label from every GPU node (controllers/state_manager.go removeGPUStateLabels: it belongs to the "
                   f"GPUCluster stack's gpuClusterStateLabels), so the kubelet plugin leaves every DRA node")
    header = f"the DRA kubelet plugin {namespace}/{plugin['metadata']['name']} (chart {chart_dir.name} for {chart_name} {chart_version}, gpuc's values) misses DRA nodes:\n"
    assert problems == [], header + "\n".join(problems) + culprit


def test_gpucluster_mode_keeps_the_operators_dra_kubelet_plugin_on_every_dra_node(rendered: Path, tmp_path: Path) -> None:
    """West: the chart renders a GPUCluster (with --api-versions resource.k8s.io/v1/DeviceClass from the server), the
    operator labels the nodes for the DRA stack and renders the DRA kubelet plugin itself: it must select every node
    of gpuc's DRA pools, and no ClusterPolicy-only operand (device plugin, MIG Manager) may appear."""
    with gpu_control_plane(tmp_path, "west") as cp:
        check_gpucluster_mode(rendered, cp, tmp_path)


def check_gpucluster_mode(rendered: Path, cp: ControlPlane, tmp_path: Path) -> None:
    kube = Kube(cp)
    tree = rendered / "west"
    kube.install_crds(operators.gpu_operator_crds())
    kube.ensure_namespace(NAMESPACE)
    chart = CHARTS / f"gpu-operator-{operators.version('gpu-operator')}"
    chart_objects = helm_template(chart, "gpu-operator", NAMESPACE, tree / "values" / "gpu-operator.yaml", cp)
    assert not [o for o in chart_objects if o["kind"] == "ClusterPolicy"], "gpuCluster mode rendered a ClusterPolicy"
    clusters = [o for o in chart_objects if o["kind"] == "GPUCluster"]
    assert len(clusters) == 1, "the chart rendered no GPUCluster"
    for o in chart_objects:
        if o["kind"] in ("GPUCluster", "NVIDIADriver"):
            kube.create(o)
    nodes = fleet_nodes(rendered, "west")
    register(kube, nodes)
    name = clusters[0]["metadata"]["name"]
    with _start(cp, chart_objects, tmp_path) as op:
        after = wait_for_labelling(op, kube, nodes, DRA_DRIVER_DEPLOY_LABEL)

        def plugin() -> Obj | None:
            return next((d for d in kube.items("apps/v1", "DaemonSet", NAMESPACE) if "kubelet-plugin" in d["metadata"]["name"]), None)

        ds = op.wait_for("the DRA kubelet plugin DaemonSet", plugin, timeout=120)
        state = op.wait_for("a GPUCluster status", lambda: cr_state(kube, "nvidia.com/v1alpha1", "GPUCluster", name), timeout=120)
        daemonsets = sorted(d["metadata"]["name"] for d in kube.items("apps/v1", "DaemonSet", NAMESPACE))
        op.check()
    spec = ds["spec"]["template"]["spec"]
    off = {n.name: why for n in nodes if n.dra and (why := selection_mismatch(spec, after[n.name]))}
    assert off == {}, f"the operator's DRA kubelet plugin {ds['metadata']['name']} misses DRA nodes: {off}"
    assert not set(daemonsets) & {*DEVICE_PLUGIN_DAEMONSETS, MIG_MANAGER_DAEMONSET}, daemonsets
    assert state in ("ready", "notReady"), f"GPUCluster {name} state {state!r}"
