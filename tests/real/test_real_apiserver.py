"""Rendered trees against a real kube-apiserver (harness/build.sh), of the cluster's own minor: every
object applies with server-side apply, with --dry-run=server and for real, and the server stores what
gpuc wrote (it may add defaults, never drop or change a field).

Not applied: Argo CD Applications (Argo CD's CRD cannot be fetched here; gpuc checks them against its
own schema of the Application, compiler/facts/data/argocd.yaml) and Helm values files (the charts
render them, not the API server).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from compiler.diagnostics import InputError
from compiler.pipeline import compile_fleet
from harness.kube import Kube, Rejection
from harness.servers import ControlPlanes
from harness.trees import apply_tree

from conftest import EXAMPLES, gpuc, write_fleet
from real.reference import crds_of
from test_properties import fleets


@pytest.fixture(scope="module")
def example_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    result = gpuc("render", EXAMPLES, "-o", out)
    assert result.code == 0, result.err
    return out


@pytest.mark.parametrize("cluster", ["prod-east", "staging", "lab", "west"])
def test_the_example_fleet_applies_to_its_minor_and_is_stored_as_written(control_planes: ControlPlanes, example_tree: Path,
                                                                        cluster: str) -> None:
    minor = yaml.safe_load((EXAMPLES / "clusters" / f"{cluster}.yaml").read_text())["spec"]["kubernetesVersion"]
    kube = Kube(control_planes.get(minor))
    rejected, lost = apply_tree(kube, example_tree / cluster, crds_of(EXAMPLES, cluster))
    assert [str(r) for r in rejected] == []
    assert lost == []


def _strip_semver(fleet: Path) -> None:
    """Drop the intents' minDriverVersion/minComputeCapability (they compile to semver(), which 1.32/1.33 refuse)."""
    for f in (fleet / "workloads").rglob("*.yaml"):
        docs = list(yaml.safe_load_all(f.read_text()))
        for doc in docs:
            for require in (doc["spec"].get("require"), doc["spec"].get("gpu", {}).get("require")):
                for key in ("minDriverVersion", "minComputeCapability"):
                    (require or {}).pop(key, None)
        f.write_text(yaml.safe_dump_all(docs, sort_keys=False))


@pytest.mark.parametrize(("cluster", "minor"), [("staging", "1.32"), ("staging", "1.33"), ("prod-east", "1.37"), ("lab", "1.37")])
def test_example_clusters_moved_to_the_oldest_and_newest_minor_apply_there(control_planes: ControlPlanes, tmp_path: Path,
                                                                          cluster: str, minor: str) -> None:
    """An example cluster moved to the oldest or the newest supported minor renders its objects in that minor's
    resource.k8s.io version, and that minor's API server takes them. On 1.32 and 1.33 the server refuses the semver()
    selectors minDriverVersion and minComputeCapability compile to: gpuc refuses those intents first."""
    fleet = tmp_path / "fleet"
    shutil.copytree(EXAMPLES, fleet)
    path = fleet / "clusters" / f"{cluster}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["kubernetesVersion"] = minor
    if minor in ("1.32", "1.33"):  # DRA is a beta to switch on there, and this 25.8 chart renders v1 classes under Helm 3.19+
        doc["spec"]["acknowledge"] += [{"warning": w, "reason": "the test's control plane switches DRA on and renders no chart"}
                                       for w in ("dra-beta", "helm-capabilities")]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    result = gpuc("render", fleet, "-o", out, "--cluster", cluster)
    if minor in ("1.32", "1.33"):
        assert result.code == 2 and "refuses in a new selector: it arrives in 1.34" in result.err, result.err
        _strip_semver(fleet)
        result = gpuc("render", fleet, "-o", out, "--cluster", cluster)
    assert result.code == 0, result.err
    rejected, lost = apply_tree(Kube(control_planes.get(minor)), out / cluster, crds_of(fleet, cluster))
    assert [str(r) for r in rejected] == []
    assert lost == []


def test_the_api_server_refuses_semver_in_a_new_selector_before_1_34(control_planes: ControlPlanes) -> None:
    """The fact behind gpuc's refusal (kubernetes.yaml celFunctionsInNewSelectors), held against the real servers."""
    selector = "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"
    for minor, version, accepted in (("1.33", "v1beta2", False), ("1.34", "v1", True)):
        answer = Kube(control_planes.get(minor)).apply({"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceClass",
                                                        "metadata": {"name": "semver-probe"},
                                                        "spec": {"selectors": [{"cel": {"expression": selector}}]}}, dry_run=True)
        assert isinstance(answer, Rejection) != accepted, (minor, answer)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fleets())
def test_generated_fleets_that_render_apply_to_their_minor(control_planes: ControlPlanes, fleet_spec) -> None:
    clusters, workloads = fleet_spec
    with tempfile.TemporaryDirectory() as tmp:
        root = write_fleet(Path(tmp) / "f", clusters, {"w.yaml": workloads} if workloads else {})
        try:
            compiled = compile_fleet(root)
        except InputError:
            return
        out = Path(tmp) / "out"
        if gpuc("render", root, "-o", out).code != 0 or compiled.failure() is not None:
            return
        for doc in clusters:
            kube = Kube(control_planes.get(doc["spec"]["kubernetesVersion"]))
            rejected, lost = apply_tree(kube, out / doc["metadata"]["name"], crds_of(root, doc["metadata"]["name"]))
            assert [str(r) for r in rejected] == []
            assert lost == []
