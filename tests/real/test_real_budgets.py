"""Team budgets (issue 37) against the real API server of every supported minor: the ResourceQuota gpuc renders
makes quota admission charge the claims of the workloads exactly as gpuc counts them (templates nothing, a claim
from a template or a shared claim its devices, firstAvailable its largest alternative, adminAccess like any
request), accept them all within the budget, and refuse the next claim over it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from compiler.check.budgets import CLAIMS, namespace_charges
from compiler.facts.platform import device_quota
from compiler.pipeline import CompileOptions, compile_fleet
from compiler.place.allocator import cluster_pods
from harness.kube import Kube, Rejection
from harness.servers import ControlPlanes

from conftest import cluster_doc, gpuc, workload_doc, write_fleet

NS = "team-budget"
MINORS = ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]


def _workloads(minor: str) -> list[dict]:
    docs = [workload_doc("trainer", NS, replicas=2, gpu={"count": 1}),  # a template: one claim per pod
            workload_doc("sandbox", NS, replicas=3, gpu={"count": 2, "sharing": "Shared"})]  # one claim for the three pods
    if int(minor.split(".")[1]) >= 34:  # firstAvailable and adminAccess are on by default from 1.34
        docs += [workload_doc("flex", NS, gpu={"alternatives": [{"count": 1}, {"count": 3}]}),
                 workload_doc("monitor", NS, gpu={"count": 1, "adminAccess": True})]
    return docs


def _fleet(root: Path, minor: str, budget: dict[str, Any]) -> Path:
    cluster = cluster_doc(kubernetes=minor, budgets=[{"namespace": NS, **budget}])
    return write_fleet(root, [cluster], {"team.yaml": _workloads(minor)})


def _charges(fleet: Path) -> dict[str, int]:
    compiled = compile_fleet(fleet, CompileOptions()).clusters["c1"].compiled
    assert compiled is not None
    return namespace_charges(cluster_pods(compiled))[NS].total


def _objects(tree: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for f in sorted(tree.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        if isinstance(doc, dict) and "metadata" in doc and doc.get("kind") != "Kustomization" and doc["metadata"].get("namespace", NS) == NS:
            out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def _used(kube: Kube) -> dict[str, int]:
    quota = kube.get("v1", "ResourceQuota", "gpuc-gpu-budget", NS)
    assert quota is not None
    return {k: int(v) for k, v in (quota.get("status") or {}).get("used", {}).items()}


def _must_apply(kube: Kube, obj: dict) -> None:
    result = kube.apply(obj)
    assert not isinstance(result, Rejection), str(result)


def _instance(template: dict, name: str) -> dict:
    """The claim the resource-claim controller makes from a template for a pod."""
    return {"apiVersion": template["apiVersion"], "kind": "ResourceClaim", "metadata": {"name": name, "namespace": NS},
            "spec": template["spec"]["spec"]}


@pytest.mark.parametrize("minor", MINORS)
def test_the_budget_quota_charges_as_gpuc_counts_accepts_within_and_refuses_over(control_planes: ControlPlanes, tmp_path: Path,
                                                                                 minor: str) -> None:
    keys = device_quota()
    gpu_key = keys.devices("gpu.nvidia.com")
    # first pass: what gpuc charges the workloads; the budget is then exactly that, so one claim more is over it
    counted = _charges(_fleet(tmp_path / "probe", minor, {"claims": 100}))
    fleet = _fleet(tmp_path / "fleet", minor, {"devices": {"gpu.nvidia.com": counted["gpu.nvidia.com"]}, "claims": counted[CLAIMS]})
    out = tmp_path / "out"
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 0, result.err
    objects = _objects(out / "c1")
    quota = objects[("ResourceQuota", "gpuc-gpu-budget")]
    assert quota["spec"]["hard"] == {keys.claims_key: str(counted[CLAIMS]), gpu_key: str(counted["gpu.nvidia.com"])}

    kube = Kube(control_planes.get(minor))
    _must_apply(kube, objects[("Namespace", NS)])
    _must_apply(kube, quota)
    # what the resource-quota controller writes first (hard from spec, nothing used): admission refuses every claim of a
    # namespace whose quota has no status yet, and charges each admitted claim into status.used itself
    stored = kube.get("v1", "ResourceQuota", "gpuc-gpu-budget", NS)
    kube.set_status({**stored, "status": {"hard": quota["spec"]["hard"], "used": {k: "0" for k in quota["spec"]["hard"]}}})

    templates = [o for (kind, _), o in sorted(objects.items()) if kind == "ResourceClaimTemplate"]
    for template in templates:
        _must_apply(kube, template)
    assert set(_used(kube).values()) == {0}, "a ResourceClaimTemplate is charged nothing"

    for (kind, _), obj in sorted(objects.items()):
        if kind == "ResourceClaim":
            _must_apply(kube, obj)  # the shared claim, once
    compiled = compile_fleet(fleet, CompileOptions()).clusters["c1"].compiled
    assert compiled is not None
    by_template = {t["metadata"]["name"]: t for t in templates}
    for pod in cluster_pods(compiled):
        for claim in pod.claims:
            if not claim.shared:
                template = by_template[claim.source.split("/")[-1]]
                _must_apply(kube, _instance(template, claim.key.split("/")[1]))
    assert _used(kube) == {keys.claims_key: counted[CLAIMS], gpu_key: counted["gpu.nvidia.com"]}, \
        "the API server charges the claims exactly as gpuc counts them"

    trainer = next(t for t in templates if t["metadata"]["name"].startswith("trainer"))
    over = kube.apply(_instance(trainer, "trainer-2-gpu"))
    assert isinstance(over, Rejection) and over.status == 403 and "exceeded quota: gpuc-gpu-budget" in over.message, over
    assert gpu_key in over.message and keys.claims_key in over.message
