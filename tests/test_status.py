"""`gpuc status`: each troubleshooting check on kubectl-shaped exports, healthy and broken, and drift."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import kubectl
import pytest

from compiler.facts.driver import builtin_device_classes
from compiler.facts.platform import state_kinds
from compiler.place import synthesize_for
from compiler.place.inventory.codec import inventory_list

from conftest import NIM_SECRETS, cluster_doc, compile_single, gpuc, nim_model, workload_doc, write_fleet

GPU = "gpu.nvidia.com"
POOLS = [
    {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}},
    {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-balanced"}},
    {"name": "gb200", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}},
]
PRODUCTS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB", "gb200": "NVIDIA-GB200"}
WORKLOADS = {
    "chat.yaml": [workload_doc("chat", "serving", model=nim_model("8B"), secrets=NIM_SECRETS, gpu={"count": 1})],
    "train.yaml": [workload_doc("trainer", "research", gpu={"count": 4, "multiNode": {"nodes": 2}, "require": {"productName": "NVIDIA GB200"}})],
    "nb.yaml": [workload_doc("notebook", "research", gpu={"mig": {"slices": [{"profile": "1g.10gb"}]}})],
}
READY = {"lastTransitionTime": kubectl.STAMP, "message": "", "reason": "Ready", "status": "True", "type": "Ready"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = write_fleet(tmp_path_factory.mktemp("status") / "fleet", [cluster_doc(pools=POOLS)], WORKLOADS)
    return root, compile_single(root)


def healthy(compiled) -> list[dict]:
    """A cluster where everything gpuc renders runs as it should."""
    inventory = synthesize_for(compiled)
    mig = {p.name: p.mig_config for p in compiled.cluster.pools if p.mig_config}
    items = []
    for n in inventory.nodes:
        labels = {**compiled.node_labels.get(n.pool, {}), "nvidia.com/gpu.product": PRODUCTS[n.pool], "nvidia.com/gpu.present": "true"}
        if n.pool in mig:
            labels["nvidia.com/mig.config.state"] = "success"
        items.append(kubectl.node(n.name, labels))
    items += kubectl.slices(inventory_list(inventory))
    present = {o.name for o in compiled.objects if o.kind == "DeviceClass"}
    items += [kubectl.obj("resource.k8s.io/v1", "DeviceClass", name, spec={"selectors": [{"cel": {"expression": f"device.driver == '{GPU}'"}}]},
                          manager="helm") for name in builtin_device_classes() if name not in present]
    items.append(kubectl.obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", spec={"cdi": {"enabled": True, "default": False}},
                             status={"state": "ready"}, manager="gpu-operator"))
    for o in compiled.objects:
        status = None
        if o.kind == "NIMService":
            template = next(x for x in compiled.objects if x.kind == "ResourceClaimTemplate" and x.namespace == o.namespace)
            status = {"state": "Ready", "availableReplicas": 1, "conditions": [READY], "draResourceStatuses": [
                {"name": "gpu", "resourceClaimTemplateStatus": {"name": template.name, "resourceClaimStatuses": [
                    {"name": "chat-0-gpu-x7k2p", "state": "allocated,reserved"}]}}]}
        elif o.kind == "NIMCache":
            status = {"state": "Ready", "pvc": f"{o.name}-pvc", "conditions": [READY]}
        elif o.kind == "ComputeDomain":
            status = {"status": "Ready", "nodes": [{"name": f"gb200-{i}", "cliqueID": "c1.0", "ipAddress": f"10.0.3.{i}",
                                                    "status": "Ready"} for i in range(2)]}
        items.append(kubectl.from_manifest(o.manifest, status))
    template = next(x for x in compiled.objects if x.kind == "ResourceClaimTemplate" and x.namespace == "serving")
    items.append(kubectl.allocated_claim(
        "chat-0-gpu-x7k2p", "serving", [(GPU, "h100-0", "gpu-0")], node_name="h100-0", pod="chat-0",
        labels=template.manifest["spec"]["metadata"]["labels"], spec=template.manifest["spec"]["spec"],
        annotations={"resource.kubernetes.io/pod-claim-name": "gpu"},
        owners=[{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True, "kind": "Pod", "name": "chat-0", "uid": "u"}]))
    return items


def status(root: Path, items: list[dict], tmp_path: Path, *extra: str):
    state = tmp_path / "state.yaml"
    state.write_text(kubectl.yaml_export(items))
    result = gpuc("status", root, "--cluster", "c1", "--state", state, "--output", "json", *extra)
    assert result.code in (0, 1), result.err
    return result.code, json.loads(result.out)["clusters"][0]


def levels(report: dict, check: str) -> list[tuple[str, str]]:
    return [(f["level"], f["message"]) for f in report["checks"] if f["check"] == check]


def test_a_healthy_cluster_is_all_ok(cluster, tmp_path):
    root, compiled = cluster
    code, report = status(root, healthy(compiled), tmp_path)
    bad = [f for f in report["checks"] if f["level"] != "ok"]
    assert code == 0 and not bad, bad
    checks = {f["check"] for f in report["checks"]}
    assert checks == {"dra-api", "kubernetes-version", "device-classes", "cdi", "resource-slices", "device-plugin", "mig-config",
                      "claims", "nim", "compute-domains", "placement", "drift"}  # every check says something, ok included
    assert levels(report, "kubernetes-version") == [("ok", "the 5 node(s) run kubelet 1.34, as the Cluster's kubernetesVersion says")]
    text = gpuc("status", root, "--cluster", "c1", "--state", tmp_path / "state.yaml")
    assert text.code == 0
    assert "  ok    cdi                 ClusterPolicy cluster-policy has CDI enabled" in text.out
    assert text.out.rstrip().endswith(f"  {len(report['checks'])} ok")


def _find(items: list[dict], kind: str, name: str | None = None, pred: Callable[[dict], bool] | None = None) -> dict:
    return next(i for i in items if i["kind"] == kind and (name is None or i["metadata"]["name"] == name) and (pred is None or pred(i)))


def _node(items, name):
    return _find(items, "Node", name)


def drop_kind(kind):
    def change(items):
        items[:] = [i for i in items if i["kind"] != kind]
    return change


def break_dra_api(items):
    for i in items:
        if i["apiVersion"] == "resource.k8s.io/v1":
            i["apiVersion"] = "resource.k8s.io/v1beta2"


def old_kubelet(items):
    _node(items, "h100-1")["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.5"


def no_gpu_class(items):
    items.remove(_find(items, "DeviceClass", GPU))


def cdi_off(items):
    _find(items, "ClusterPolicy")["spec"]["cdi"]["enabled"] = False


def silent_node(items):
    items.remove(_find(items, "ResourceSlice", pred=lambda i: i["spec"].get("nodeName") == "h100-1" and i["spec"]["driver"] == GPU))


def lost_gpu(items):
    s = _find(items, "ResourceSlice", pred=lambda i: i["spec"].get("nodeName") == "h100-0" and i["spec"]["driver"] == GPU)
    s["spec"]["devices"].pop()


def device_plugin_too(items):
    node = _node(items, "h100-0")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    node["status"]["capacity"]["nvidia.com/gpu"] = "8"


def pending_claim(items):
    del _find(items, "ResourceClaim")["status"]


def nim_pending(items):
    nim = _find(items, "NIMService")
    nim["status"]["state"] = "NotReady"
    nim["status"]["draResourceStatuses"][0]["resourceClaimTemplateStatus"]["resourceClaimStatuses"][0]["state"] = "pending"


def nim_failed(items):
    """The conditions k8s-nim-operator v3.1.2 sets (internal/controller/nimcache_controller.go): a failure is a
    condition that is True and carries the error; a step not reached is one that is False."""
    nim = _find(items, "NIMCache")
    nim["status"] = {"state": "Failed", "conditions": [
        {**READY, "type": "NIM_CACHE_JOB_PENDING", "status": "True", "reason": "JobPending", "message": "The Job to cache NIM is in pending state"},
        {**READY, "type": "NIM_CACHE_RECONCILE_FAILED", "status": "True", "reason": "ReconcileFailed",
         "message": "failed to get model manifest: 401 Unauthorized"},
        {**READY, "type": "NIM_CACHE_JOB_COMPLETED", "status": "False", "reason": "JobFailed", "message": "The Job to cache NIM has failed"}]}


def domain_not_ready(items):
    cd = _find(items, "ComputeDomain")
    cd["status"]["status"] = "NotReady"
    cd["status"]["nodes"][1]["status"] = "NotReady"


def mig_failed(items):
    _node(items, "a100-0")["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"


def mig_unlabelled(items):
    del _node(items, "a100-0")["metadata"]["labels"]["nvidia.com/mig.config"]


def tainted(items):
    s = _find(items, "ResourceSlice", pred=lambda i: i["spec"].get("nodeName") == "h100-0" and i["spec"]["driver"] == GPU)
    s["spec"]["devices"][3]["taints"] = [{"effect": "NoSchedule", "key": "gpu.nvidia.com/xid", "value": "79", "timeAdded": kubectl.STAMP}]


def all_gpus_held(items):
    """Somebody else's claims hold every GB200 the trainer needs (the running chat-0 keeps its H100: it does not move)."""
    for node in ("gb200-0", "gb200-1"):
        items.append(kubectl.allocated_claim(f"batch-{node}", "batch", [(GPU, node, f"gpu-{i}") for i in range(4)], node_name=node))


def edited_template(items):
    t = _find(items, "ResourceClaimTemplate", pred=lambda i: i["metadata"]["name"].startswith("trainer-"))
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2


def deleted_template(items):
    items.remove(_find(items, "ResourceClaimTemplate", pred=lambda i: i["metadata"]["name"].startswith("notebook-")))


def orphan(items):
    items.append(kubectl.obj("resource.k8s.io/v1", "ResourceClaimTemplate", "old-gpu-1a2b3c4d", "research",
                             spec={"spec": {"devices": {"requests": []}}}, labels={"app.kubernetes.io/managed-by": "gpuc"}))


# (change, check, level, words the finding must hold): one per troubleshooting finding
BROKEN = [
    (break_dra_api, "dra-api", "fail", "the export holds resource.k8s.io/v1beta2 objects"),
    (old_kubelet, "kubernetes-version", "warn", "1 node(s) run kubelet v1.33.5 (h100-1)"),
    (no_gpu_class, "device-classes", "fail", "DeviceClass gpu.nvidia.com does not exist"),
    (cdi_off, "cdi", "fail", "cdi.enabled False"),
    (silent_node, "resource-slices", "fail", "publish no gpu.nvidia.com ResourceSlice: h100-1"),
    (lost_gpu, "resource-slices", "warn", "h100-0 (7 of 8)"),
    (device_plugin_too, "device-plugin", "fail", "both hand out the same GPUs: h100-0 (8)"),
    (pending_claim, "claims", "fail", "1 of gpuc's 1 claim(s) are pending"),
    (nim_pending, "nim", "fail", "NIMService serving/chat is NotReady: its claims are chat-0-gpu-x7k2p pending"),
    (nim_failed, "nim", "fail", "is Failed (ReconcileFailed: failed to get model manifest: 401 Unauthorized; "
                                "JobFailed: The Job to cache NIM has failed)"),
    (domain_not_ready, "compute-domains", "fail", "node(s) gb200-1 NotReady"),
    (mig_failed, "mig-config", "fail", "the MIG Manager failed to apply the layout on a100-0"),
    (mig_unlabelled, "mig-config", "fail", "a100-0 (unset)"),
    (tainted, "device-taints", "warn", "h100-0/gpu-3 (gpu.nvidia.com/xid=79:NoSchedule)"),
    (all_gpus_held, "placement", "fail", "do not fit the running cluster: research/trainer"),
    (edited_template, "drift", "fail", "changed in the cluster: spec.spec.devices.requests[0].exactly.count: 2 (gpuc: 4)"),
    (deleted_template, "drift", "fail", "are not in the cluster: ResourceClaimTemplate research/notebook-gpu-"),
    (orphan, "drift", "warn", "no intent produces any more: ResourceClaimTemplate research/old-gpu-1a2b3c4d"),
]


@pytest.mark.parametrize(("change", "check", "level", "words"), BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_each_check_finds_its_problem(cluster, tmp_path, change, check, level, words):
    root, compiled = cluster
    items = copy.deepcopy(healthy(compiled))
    change(items)
    code, report = status(root, items, tmp_path)
    found = levels(report, check)
    assert any(lv == level and words in message for lv, message in found), found
    assert code == (1 if level == "fail" else 0)
    finding = next(f for f in report["checks"] if f["check"] == check and f["level"] == level)
    assert finding["fix"]


def test_kinds_left_out_of_an_export_are_skipped_not_missing(cluster, tmp_path):
    root, compiled = cluster
    items = [i for i in healthy(compiled) if i["kind"] in ("Node", "ResourceSlice")]
    code, report = status(root, items, tmp_path)
    assert code == 0
    skipped = {f["check"] for f in report["checks"] if f["level"] == "skip"}
    assert {"device-classes", "cdi", "claims", "nim", "compute-domains", "drift"} <= skipped
    assert not levels(report, "drift")[0][1].count("missing")


def test_findings_point_at_the_line_of_the_export(cluster, tmp_path):
    root, compiled = cluster
    items = copy.deepcopy(healthy(compiled))
    cdi_off(items)
    _, report = status(root, items, tmp_path)
    finding = next(f for f in report["checks"] if f["check"] == "cdi")
    file, line = finding["where"].rsplit(":", 1)
    assert file == str(tmp_path / "state.yaml")
    assert (tmp_path / "state.yaml").read_text().splitlines()[int(line) - 1].strip().startswith("cdi:")


def test_gpu_cluster_mode_and_operator_before_v25_10(tmp_path):
    old = write_fleet(tmp_path / "old", [cluster_doc(gpuOperator={"version": "v25.3.4"})], {})
    compiled = compile_single(old)
    policy = kubectl.obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", spec={"cdi": {"enabled": True}})
    items = [*kubectl.slices(inventory_list(synthesize_for(compiled))), policy]
    _, report = status(old, items, tmp_path)
    assert levels(report, "cdi") == [("fail", "ClusterPolicy cluster-policy has cdi.default unset: GPU Operator v25.3.4 needs it "
                                               "for the runtime to use CDI")]
    new = write_fleet(tmp_path / "new", [cluster_doc(driver="0.5.1", kubernetes="1.36", gpuOperator={"mode": "gpuCluster", "version": "v26.7.0"})], {})
    compiled = compile_single(new)
    items = kubectl.slices(inventory_list(synthesize_for(compiled)))
    assert levels(status(new, [*items, policy], tmp_path)[1], "cdi")[0][0] == "skip"  # no GPUCluster exported
    gpu_cluster = kubectl.obj("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", spec={"draDriver": {"version": "v0.5.1"}})
    assert levels(status(new, [*items, gpu_cluster], tmp_path)[1], "cdi")[0][0] == "ok"


def test_live_status_knows_what_is_absent(cluster, tmp_path):
    """A live read lists every kind: a NIMCache that is not there is missing, not unexported; DRA served is asked of discovery."""
    root, compiled = cluster
    items = [i for i in healthy(compiled) if i["kind"] != "NIMCache"]
    with kubectl.ApiServer(items) as server:
        result = gpuc("status", root, "--cluster", "c1", "--kubeconfig", server.kubeconfig(tmp_path / "kc"), "--output", "json")
    assert result.code == 1, result.err
    report = json.loads(result.out)["clusters"][0]
    assert ("ok", "resource.k8s.io/v1 is served (what gpuc renders for kubernetesVersion 1.34)") in levels(report, "dra-api")
    assert any(lv == "fail" and "not in the cluster: NIMCache serving/chat" in m for lv, m in levels(report, "drift"))


def test_status_needs_a_state_and_a_cluster(cluster):
    root, _ = cluster
    result = gpuc("status", root, "--cluster", "c1")
    assert result.code == 2 and "gpuc status needs the running cluster" in result.err and "kubectl get nodes,resourceslices" in result.err


def test_the_export_command_names_every_kind_gpuc_reads():
    from compiler.cli import STATUS_EXPORT

    listed = STATUS_EXPORT.split()[2].split(",")
    assert sorted(listed) == sorted(k.plural for k in state_kinds())  # drift compares the mig-parted ConfigMap too


def test_an_object_no_api_server_would_return_is_a_warning_not_a_crash(cluster, tmp_path):
    root, compiled = cluster
    items = copy.deepcopy(healthy(compiled))
    _node(items, "h100-0")["status"]["allocatable"] = "lots"
    _find(items, "ComputeDomain")["status"]["nodes"] = "two"  # read around: not a list of nodes
    code, report = status(root, items, tmp_path)
    broken = [f for f in report["checks"] if "this check cannot read" in f["message"]]
    assert [(f["check"], f["level"]) for f in broken] == [("device-plugin", "warn")]
    assert levels(report, "compute-domains")[0][0] == "ok"


def test_nodes_gpuc_only_patches_are_not_missing_objects_and_no_slices_means_no_placement_verdict(tmp_path):
    pools = [{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, "nodeNames": ["gpu-a", "gpu-b"]}]
    root = write_fleet(tmp_path / "fleet", [cluster_doc(pools=pools)], {"w.yaml": [workload_doc("llm", gpu={"count": 1})]})
    code, report = status(root, [kubectl.node("gpu-a", {"nvidia.com/gpu.dra": "true"})], tmp_path)
    assert ("warn", "1 object(s) gpuc patches do not exist in the cluster: Node gpu-b") in levels(report, "drift")
    assert not any("not in the cluster" in m for _, m in levels(report, "drift"))
    assert [lv for lv, _ in levels(report, "placement")] == ["skip"]  # planned on synthesized devices: no verdict


def test_mig_pools_without_nodes_in_the_state_are_a_skip_not_silence(cluster, tmp_path):
    root, compiled = cluster
    items = [i for i in healthy(compiled) if not (i["kind"] == "Node" and i["metadata"]["name"].startswith("a100"))]
    _, report = status(root, items, tmp_path)
    assert levels(report, "mig-config") == [("skip", "no node of the MIG pools (a100) is in the cluster state")]


MALFORMED = {
    "attributes as a list": lambda items: _find(items, "ResourceSlice")["spec"]["devices"][0].__setitem__("attributes", [1, 2]),
    "capacity as a list": lambda items: _find(items, "ResourceSlice")["spec"]["devices"][0].__setitem__("capacity", ["80Gi"]),
    "an attribute as a string": lambda items: _find(items, "ResourceSlice")["spec"]["devices"][0]["attributes"].__setitem__(
        "productName", "H100"),
    "devices as a mapping": lambda items: _find(items, "ResourceSlice")["spec"].__setitem__("devices", {"gpu-0": {}}),
    "labels as a list": lambda items: _node(items, "h100-0")["metadata"].__setitem__("labels", ["a=b"]),
    "annotations as a list": lambda items: _find(items, "ResourceClaim")["metadata"].__setitem__("annotations", ["x"]),
    "spec as a list": lambda items: _find(items, "ResourceClaim").__setitem__("spec", ["x"]),
    "allocation results as a mapping": lambda items: _find(items, "ResourceClaim")["status"]["allocation"]["devices"].__setitem__(
        "results", {"a": 1}),
    "taints as a mapping": lambda items: _node(items, "h100-0").setdefault("spec", {}).__setitem__("taints", {"a": 1}),
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
def test_a_malformed_export_is_a_finding_not_a_crash(cluster, tmp_path, what):
    root, compiled = cluster
    items = copy.deepcopy(healthy(compiled))
    MALFORMED[what](items)
    state = tmp_path / "state.yaml"
    state.write_text(kubectl.yaml_export(items))
    for command in (["status", root, "--cluster", "c1"], ["plan", root, "--cluster", "c1"]):
        result = gpuc(*command, "--state", state)
        assert "internal error" not in result.err and "Traceback" not in result.err, (what, command[0], result.err)
        assert result.code in (0, 1, 2)


def test_a_step_that_holds_the_driver_back_expects_no_slices(cluster, tmp_path):
    """Step 1 of a driver-line change renders no DRA driver: the DRA pools' nodes publishing nothing is what the step
    does, not a failure; the same export without the step is one."""
    root, compiled = cluster
    items = [i for i in healthy(compiled) if not (i["kind"] == "ResourceSlice" and i["spec"]["driver"] == GPU)]  # the CD plugin's stay
    _, report = status(root, items, tmp_path)
    assert [level for level, _ in levels(report, "resource-slices")] == ["fail"]
    held = write_fleet(tmp_path / "held", [cluster_doc(pools=POOLS, transition={
        "step": 1, "steps": 2, "change": "DRA driver 25.12.0 -> 0.5.1", "draDriver": {"installed": False}})], WORKLOADS)
    _, report = status(held, items, tmp_path)
    assert levels(report, "resource-slices") == [("ok", "no DRA driver runs during step 1 of 2 (DRA driver 25.12.0 -> 0.5.1): the DRA "
                                                        "pools publish nothing until a later step installs it")]
