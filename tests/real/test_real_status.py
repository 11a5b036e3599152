"""`gpuc status` against a real kube-apiserver: the live read (discovery, paging past 500 objects, a kind
RBAC forbids), drift the server really holds, and a `kubectl get ... -o yaml` export of the same server
giving the same verdicts as the live read.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compiler.cli import STATUS_EXPORT
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place import synthesize_for
from harness import components, controlplane
from harness.controlplane import VIEWER_TOKEN, ControlPlane
from harness.kube import Kube
from harness.scheduling import publish_classes, publish_inventory
from harness.servers import server_for
from harness.trees import apply_tree

from conftest import cluster_doc, gpuc, write_fleet
from real.reference import crds_of

FOREIGN_SLICES = 600  # more than one page of the live read (500): gpuc's own slices come after them in list order


def _fleet(root: Path) -> Path:
    workloads = [{"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": "train", "namespace": "research"},
                  "spec": {"clusters": ["c1"], "replicas": 2, "gpu": {"count": 2}}},
                 {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": "notebooks", "namespace": "research"},
                  "spec": {"clusters": ["c1"], "replicas": 3, "gpu": {"count": 1, "sharing": "Shared"}}}]
    cluster = cluster_doc("c1", kubernetes="1.37", driver="0.5.1",
                          acknowledge=[{"warning": "unchecked-crds", "reason": "no operator CRDs in this test fleet"}])
    return write_fleet(root, [cluster], {"w.yaml": workloads})


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ControlPlane]]:
    tmp = tmp_path_factory.mktemp("status")
    fleet = _fleet(tmp / "fleet")
    release, emulated = server_for("1.37")
    cp = controlplane.start(release, tmp / "cp", emulated_minor=emulated)
    try:
        kube = Kube(cp)
        compiled = compile_fleet(fleet, CompileOptions(only="c1")).clusters["c1"].compiled
        api_version = compiled.cluster.api.api_version
        for i in range(FOREIGN_SLICES):
            kube.apply({"apiVersion": api_version, "kind": "ResourceSlice", "metadata": {"name": f"a-foreign-{i:04d}"},
                        "spec": {"driver": "nic.example.com", "pool": {"name": f"p{i}", "generation": 1, "resourceSliceCount": 1},
                                 "nodeName": "h100-0", "devices": [{"name": "nic-0"}]}})
        publish_inventory(kube, synthesize_for(compiled), api_version)
        publish_classes(kube, compiled, api_version)
        assert gpuc("render", fleet, "-o", tmp / "out").code == 0
        rejected, _ = apply_tree(kube, tmp / "out" / "c1", crds_of(fleet, "c1"))
        assert rejected == []
        yield fleet, cp
    finally:
        cp.stop()


def _status(fleet: Path, *source: str) -> tuple[int, dict[str, Any]]:
    result = gpuc("status", fleet, "--cluster", "c1", *source, "--output", "json")
    assert result.code in (0, 1), result.err
    return result.code, json.loads(result.out)["clusters"][0]


def levels(report: dict[str, Any], check: str) -> list[tuple[str, str]]:
    return [(f["level"], f["message"]) for f in report["checks"] if f["check"] == check]


def test_a_live_read_of_a_real_server_pages_and_finds_the_cluster_healthy(live) -> None:
    fleet, cp = live
    code, report = _status(fleet, "--kubeconfig", str(cp.kubeconfig()))
    assert ("ok", "resource.k8s.io/v1 is served (what gpuc renders for kubernetesVersion 1.37)") in levels(report, "dra-api")
    # gpuc's slices sort after 600 foreign ones: found only if every page was read
    assert [lv for lv, _ in levels(report, "resource-slices")] == ["ok"], levels(report, "resource-slices")
    assert [lv for lv, _ in levels(report, "device-classes")] == ["ok"]
    assert not [m for lv, m in levels(report, "drift") if lv == "fail"], levels(report, "drift")


def test_drift_on_the_server_is_found(live) -> None:
    fleet, cp = live
    kube = Kube(cp)
    claim = next(c for c in kube.items("resource.k8s.io/v1", "ResourceClaim", "research"))
    before = json.loads(json.dumps(claim))
    try:
        kube.dyn.delete(kube.resource("resource.k8s.io/v1", "ResourceClaim"), name=claim["metadata"]["name"], namespace="research")
        code, report = _status(fleet, "--kubeconfig", str(cp.kubeconfig()))
        assert code == 1
        assert any(lv == "fail" and f"ResourceClaim research/{claim['metadata']['name']}" in m for lv, m in levels(report, "drift"))
    finally:
        for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            before["metadata"].pop(key, None)
        before.pop("status", None)
        kube.apply(before)


def test_a_kind_rbac_forbids_is_a_warning_naming_it(live) -> None:
    fleet, cp = live
    kube = Kube(cp)
    # RBAC only adds: grant every resource but resourceclaims, one by one
    resources = _all_resources_but(kube, "resourceclaims")
    kube.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "gpuc-status-no-claims"},
                "rules": resources})
    kube.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "gpuc-status-no-claims"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuc-status-no-claims"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}]})
    result = gpuc("status", fleet, "--cluster", "c1", "--kubeconfig", str(cp.kubeconfig(VIEWER_TOKEN, "viewer")), "--output", "json")
    assert result.code in (0, 1), result.err
    report = json.loads(result.out)["clusters"][0]
    access = levels(report, "access")
    assert [lv for lv, _ in access] == ["warn"] and "cannot list resourceclaims: 403 Forbidden" in access[0][1], access
    assert [lv for lv, _ in levels(report, "resource-slices")] == ["ok"]  # what it may list, it still reads


def _all_resources_but(kube: Kube, excluded: str) -> list[dict[str, Any]]:
    rules = []
    for group in kube.dyn.resources.search():
        if "list" in (group.verbs or []) and group.name != excluded and "/" not in group.name:
            rules.append({"apiGroups": [group.group], "resources": [group.name], "verbs": ["get", "list"]})
    rules.append({"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version"], "verbs": ["get"]})
    return rules


def test_a_kubectl_export_of_the_real_server_reads_as_the_live_cluster(live, tmp_path: Path) -> None:
    """The README's export command, run with a real kubectl against the real server, gives the live verdicts."""
    fleet, cp = live
    kubectl = components.binary(f"kubectl-{components.newest().version}")
    argv = STATUS_EXPORT.split(">")[0].split()
    export = subprocess.run([str(kubectl), "--kubeconfig", str(cp.kubeconfig()), *argv[1:]], capture_output=True, text=True, check=True)
    state = tmp_path / "state.yaml"
    state.write_text(export.stdout)
    _, from_export = _status(fleet, "--state", str(state))
    _, from_live = _status(fleet, "--kubeconfig", str(cp.kubeconfig()))

    def verdicts(report: dict[str, Any]) -> dict[str, list[str]]:
        return {check: [lv for lv, _ in levels(report, check)] for check in ("dra-api", "resource-slices", "device-classes", "claims", "drift")}

    assert verdicts(from_export) == verdicts(from_live)
