"""The whole GitOps path for real: gpuc's rendered tree, the real NVIDIA charts and the real Argo CD.

gpuc renders an example cluster into a git repository holding the real charts (spec.charts directory mode), the
app-of-apps under rendered/<cluster>/argocd is applied as users do, and the real Argo CD (its application
controller, repo server with the real Helm and kustomize, and redis) syncs everything into a real API server with
the real scheduler and workload controllers. What is asserted is Argo CD's own state: every Application Synced,
the sync waves held (a NIMService is not applied while its cache is Progressing), health through gpuc's Lua, and
the charts' objects on the server with the values gpuc set. Not run: kubelets (harness/kubelet.py reports bound
pods as started: container start is played), NVIDIA images, GPUs and the operators (the test writes the status fields
they write); no claim is prepared here (the workers are plain nodes): gpuc's claims are prepared by the real DRA kubelet
plugins on mock GPU nodes in test_real_kubelet_plugin.py, where the stand-in still plays container start and the MPS
control daemon's readiness.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.argocd import REFRESH, ArgoCDError

from conftest import cluster_doc, workload_doc, write_fleet
from real.gitops import GitOpsRun, gpuc

NIM = "apps.nvidia.com/v1alpha1"
SYNC_TIMEOUT = 420  # three charts and six waves on a shared 2-core machine


def _nim_objects(run: GitOpsRun, kind: str) -> list[dict]:
    return [o for o in run.rendered_objects() if o["kind"] == kind]


def _wait_resource(run: GitOpsRun, app: str, kind: str, health: str, timeout: float = SYNC_TIMEOUT) -> dict:
    return run.argo.wait_for(app, lambda a: any(
        r.get("kind") == kind and (r.get("health") or {}).get("status") == health for r in (a.get("status") or {}).get("resources") or []),
        f"a {kind} {health}", timeout)


def test_prod_east_syncs_through_argocd_in_gpucs_waves_with_the_real_charts(tmp_path: Path) -> None:
    nodes = {"worker-0": {}, "gpu-a100-0": {}, "gpu-a100-1": {}}  # the a100-mig pool lists its nodeNames
    with GitOpsRun.start(tmp_path, "prod-east", nodes=nodes) as run:
        revision = run.render()
        root = run.sync_app_of_apps()
        apps = {f"prod-east-{n}" for n in ("gpu-operator", "nvidia-dra-driver-gpu", "nim-operator", "gpuc")}

        # The charts (wave 0) become Healthy through the real Helm render; the rendered tree (wave 1) syncs
        # until its NIMCaches (wave 4), which no operator reconciles: Progressing with gpuc's message
        for name in sorted(apps - {"prod-east-gpuc"}):
            run.argo.wait(name, revision=revision, timeout=SYNC_TIMEOUT)
        _wait_resource(run, "prod-east-gpuc", "NIMCache", "Progressing")
        caches = run.resource_health("prod-east-gpuc", "NIMCache")
        assert {m for _, h, m in caches} == {"waiting for the NIM Operator to start caching"}, caches
        # the waves hold: no NIMService is applied while the caches it mounts are not Healthy
        assert run.kube.items(NIM, "NIMService", "nim-service") == []

        # The NIM Operator's part: each cache Ready (its status fields: state, pvc)
        for cache in _nim_objects(run, "NIMCache"):
            run.write_status(cache, {"state": "Ready", "pvc": f"{cache['metadata']['name']}-pvc"})
        _wait_resource(run, "prod-east-gpuc", "NIMService", "Progressing")
        for service in _nim_objects(run, "NIMService"):
            run.write_status(service, {"state": "Ready", "availableReplicas": service["spec"].get("replicas", 1),
                                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                                       "lastTransitionTime": "2026-11-26T00:00:00Z"}]})
        run.argo.wait("prod-east-gpuc", revision=revision, timeout=SYNC_TIMEOUT)
        run.argo.wait(root, timeout=SYNC_TIMEOUT)  # the app-of-apps: every child Synced and Healthy (gpuc's Lua)
        assert apps <= set(run.applications())

        # The rendered tree's sync, in Argo CD's order: waves 1 (node config) .. 5 (NIMService)
        order = [r.key for r in run.argo.sync_result("prod-east-gpuc")]
        waves = {r: int(o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for o in run.rendered_objects()
                 for r in ["/".join(x for x in (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) if x)]}
        synced = [waves[k] for k in order if k in waves]
        assert synced == sorted(synced) and set(waves) <= set(order), order

        # Each chart's objects on the server with what gpuc set: the kubelet plugin (no deploy label the GPU
        # Operator sweeps), the chart's DeviceClasses, the ClusterPolicy gpuc's values make
        values = yaml.safe_load((run.tree / "values" / "nvidia-dra-driver-gpu.yaml").read_text())
        plugin = run.kube.get("apps/v1", "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin", "nvidia-dra-driver-gpu")
        assert plugin is not None
        selector = plugin["spec"]["template"]["spec"].get("nodeSelector") or {}
        assert selector == (values.get("kubeletPlugin") or {}).get("nodeSelector", {}) and \
            "nvidia.com/gpu.deploy.dra-driver" not in selector
        classes = {c["metadata"]["name"] for c in run.kube.items("resource.k8s.io/v1", "DeviceClass")}
        assert {"gpu.nvidia.com", "mig.nvidia.com", "hopper-80g.gpuc.dev"} <= classes, classes
        policy = run.kube.get("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
        assert policy is not None and policy["spec"]["devicePlugin"]["enabled"] is False
        assert policy["spec"]["cdi"]["enabled"] is True
        assert run.kube.get("v1", "Node", "gpu-a100-0")["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"

        # Degraded as Argo CD computes it through gpuc's Lua, with the operator's own failure fields
        cache = _nim_objects(run, "NIMCache")[0]
        run.write_status(cache, {"state": "Failed", "conditions": [{
            "type": "NIM_CACHE_JOB_COMPLETED", "status": "False", "reason": "JobFailed", "message": "model download failed: 401",
            "lastTransitionTime": "2026-11-26T00:00:00Z"}]})
        run.argo.refresh("prod-east-gpuc")
        app = run.argo.wait_for("prod-east-gpuc", lambda a: (a.get("status") or {}).get("health", {}).get("status") == "Degraded",
                                "Degraded", 120)
        failed = [m for n, h, m in run.resource_health("prod-east-gpuc", "NIMCache") if h == "Degraded"]
        assert failed == ["caching failed: model download failed: 401"], app["status"].get("resources")


@pytest.mark.parametrize("cluster", ["lab", "west"])
def test_the_other_example_clusters_sync_to_the_end(tmp_path: Path, cluster: str) -> None:
    """lab (Kubernetes 1.36, DRA driver 0.5.1 from its own chart, dynamic MIG, GPU Operator beside it) and west
    (1.37, the DRA driver installed by the GPU Operator's GPUCluster, a NIM): every Application Synced and Healthy
    through gpuc's Lua, with the NIM Operator's status written as the caches and services appear. The 0.5 chart is
    the main branch's 0.5.0-dev (no 0.5 tag exists)."""
    with GitOpsRun.start(tmp_path, cluster) as run:
        run.render()
        root = run.sync_app_of_apps()
        run.sync_everything(root, SYNC_TIMEOUT)
        apps = run.applications()
        rendered = {yaml.safe_load(f.read_text())["metadata"]["name"] for f in (run.tree / "argocd").glob(f"{cluster}-*.yaml")}
        assert rendered <= set(apps), (rendered, set(apps))
        assert run.stand_ins == ([] if cluster == "west" else ["dra-driver-nvidia-gpu 0.5.1 is rendered from "
                                                               "dra-driver-nvidia-gpu-0.5.0-dev, the nearest chart there is"])


def test_a_gke_shaped_cluster_syncs_to_the_end(tmp_path: Path) -> None:
    """GKE admits system-node-critical pods outside kube-system only under a ResourceQuota naming that priority
    class. The quota gpuc emits for it is synced with each chart's own Application (rendered/<c>/releases/<name>/):
    in the rendered tree's Application, a later wave, it waited for charts whose operator pods it alone admits,
    and the app-of-apps never finished. Here the API server's quota admission is configured as GKE's is."""
    fleet = write_fleet(tmp_path / "given", [cluster_doc(
        "gke", provider="gke", gpuOperator={"version": "v26.7.0"},
        pools=[{"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8},
                "labels": {"gke-no-default-nvidia-gpu-device-plugin": "true"}}])],
        {"w.yaml": [workload_doc("train", "research", gpu={"count": 8})]})
    with GitOpsRun.start(tmp_path / "run", "gke", fleet, gke=True) as run:
        revision = run.render()
        root = run.sync_app_of_apps()
        run.argo.wait(root, timeout=SYNC_TIMEOUT)
        for name in ("gke-gpu-operator", "gke-nvidia-dra-driver-gpu", "gke-gpuc"):
            run.argo.wait(name, revision=revision, timeout=SYNC_TIMEOUT)
        # the operator's pod was admitted under the quota its chart's Application synced first
        pods = run.kube.items("v1", "Pod", "gpu-operator")
        assert [p for p in pods if p["spec"].get("priorityClassName") == "system-node-critical"], [p["metadata"]["name"] for p in pods]
        quota = run.kube.get("v1", "ResourceQuota", "gpuc-critical-pods", "gpu-operator")
        assert quota is not None and quota["status"]["used"]["pods"] != "0"
        managed = {(r["kind"], r.get("namespace"), r["name"]): r.get("status")
                   for r in (run.argo.application("gke-gpu-operator") or {})["status"]["resources"]}
        assert managed.get(("ResourceQuota", "gpu-operator", "gpuc-critical-pods")) == "Synced", managed


def test_what_gpuc_diff_reports_is_what_argocd_finds_out_of_sync_and_prunes(tmp_path: Path) -> None:
    """A pull request's intent change, reviewed with `gpuc diff`, then synced by Argo CD: the objects gpuc diff
    lists (added, changed, replaced, removed) are exactly those Argo CD reports OutOfSync before the sync, and the
    ones it prunes are the removed ones and the old names of the replaced ones (claim specs are immutable: a
    changed claim gets a new hashed name). The replacement syncs with no manual step."""
    workloads = {"w.yaml": [workload_doc("train", "research", gpu={"count": 2}),
                            workload_doc("notebooks", "research", gpu={"count": 1, "sharing": "TimeSlicing"}),
                            workload_doc("batch", "research", gpu={"count": 1})]}
    given = write_fleet(tmp_path / "given", [cluster_doc("review", gpuOperator={"mode": "none"})], workloads)
    with GitOpsRun.start(tmp_path / "run", "review", given) as run:
        run.repo.copy_tree(run.fleet, "fleet")  # the fleet lives in the repository too: gpuc diff reads its history
        run.fleet = run.repo.path / "fleet"
        base = run.render("base")
        root = run.sync_app_of_apps()
        run.argo.wait(root, timeout=SYNC_TIMEOUT)
        # review mode: no automated sync (the root first, or it would put the child's back), so the change can be
        # seen before it is applied
        for name in (root, "review-gpuc"):
            _merge_patch(run, name, {"spec": {"syncPolicy": {"automated": None}}})

        # the change: a GPU count (claim replaced), a sharing change (config changed), a workload removed, one added
        docs = [workload_doc("train", "research", gpu={"count": 4}),
                workload_doc("notebooks", "research", gpu={"count": 1, "sharing": "MPS"}),
                workload_doc("serve", "research", gpu={"count": 1})]
        (run.fleet / "workloads" / "w.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
        head = run.render("the change")
        report = json.loads(gpuc_out("diff", run.fleet, "--base", base, "--output", "json"))
        cluster = next(c for c in report["clusters"] if c["cluster"] == "review")
        diffed = {_key(o) for o in cluster["objects"]}
        removed = {_key(o) for o in cluster["objects"] if o["status"] == "removed"}
        replaced_old = {_key(o, old=True) for o in cluster["objects"] if o["status"] == "replaced" and o.get("oldName")}

        assert removed and replaced_old and {"added", "replaced", "removed"} <= {o["status"] for o in cluster["objects"]}, cluster["objects"]
        run.argo.refresh("review-gpuc")
        app = run.argo.wait("review-gpuc", sync="OutOfSync", health=None, revision=head, phase=None, timeout=SYNC_TIMEOUT)
        # Argo CD's comparisons at head converge: on a loaded machine the first one seen at head may list the objects
        # to prune before the new ones (seen once on Argo CD 3.5.1 at load 8). Wait for the refresh asked for to end
        # and the list to settle on what gpuc diff said; a list that never does fails below with both sides.
        def out_of_sync(app: dict) -> set[tuple[str, str, str]]:
            return {_key(r) for r in (app.get("status") or {}).get("resources") or [] if r.get("status") == "OutOfSync"}
        try:
            app = run.argo.wait_for("review-gpuc", lambda a: REFRESH not in (a["metadata"].get("annotations") or {})
                                    and out_of_sync(a) == diffed | replaced_old, "OutOfSync on what gpuc diff lists", timeout=60)
        except ArgoCDError:
            app = run.argo.application("review-gpuc") or app
        assert out_of_sync(app) == diffed | replaced_old, f"gpuc diff: {sorted(diffed)}\nArgo CD OutOfSync: {sorted(out_of_sync(app))}"

        _merge_patch(run, "review-gpuc", {"operation": {"sync": {"revision": head, "prune": True}}})  # `argocd app sync --prune`
        run.argo.wait("review-gpuc", revision=head, timeout=SYNC_TIMEOUT)
        pruned = {r.key for r in run.argo.sync_result("review-gpuc") if r.status == "Pruned"}
        assert pruned == {_result_key(k) for k in removed | replaced_old}, pruned


def _merge_patch(run: GitOpsRun, app: str, body: dict) -> None:
    run.kube.dyn.patch(run.kube.resource("argoproj.io/v1alpha1", "Application"), name=app, namespace="argocd", body=body,
                       content_type="application/merge-patch+json")


def _key(obj: dict, old: bool = False) -> tuple[str, str, str]:
    """(kind, namespace, name) of a gpuc diff entry or an Argo CD resource status."""
    name = obj["oldName"] if old else obj["name"]
    return (obj["kind"], obj.get("namespace") or "", name)


def _result_key(key: tuple[str, str, str]) -> str:
    return "/".join(x for x in key if x)


def gpuc_out(*args: str | Path) -> str:
    result = gpuc(*args)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout
