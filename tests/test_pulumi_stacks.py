"""The Pulumi stacks apply exactly what `gpuc render` writes, in wave order, replacing immutable objects.

Each example cluster's stack program runs under Pulumi mocks with the config of its committed
stacks/Pulumi.<cluster>.yaml; what it registers is compared with the tree `gpuc render` wrote to disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pulumi.runtime import rpc

from conftest import EXAMPLES, gpuc
from pulumi_harness import (
    IMMUTABLE,
    PROVIDER_TYPE,
    StackRun,
    differences,
    registered_objects,
    registered_releases,
    rendered_objects,
    rendered_releases,
    rendered_waves,
    replacement_violations,
    run_stack,
    stack_config,
    wave_violations,
)

CLUSTERS = sorted(yaml.safe_load(p.read_text())["metadata"]["name"] for p in (EXAMPLES / "clusters").glob("*.yaml"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    result = gpuc("render", EXAMPLES, "-o", out)
    assert result.code == 0, result.err
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, StackRun]:
    return {cluster: run_stack(cluster, stack_config(cluster)) for cluster in CLUSTERS}


def test_example_fleet_has_clusters():
    assert CLUSTERS == ["lab", "prod-east", "staging", "west"]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_registered_objects_equal_rendered_tree(cluster, rendered, runs):
    tree = rendered_objects(rendered / cluster)
    assert tree, "the rendered tree has objects"
    assert differences(tree, registered_objects(runs[cluster])) == []


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_helm_releases_equal_argocd_applications_and_values_files(cluster, rendered, runs):
    tree = rendered_releases(rendered / cluster)
    assert tree, "the rendered tree has chart Applications"
    assert differences(tree, registered_releases(runs[cluster])) == []


def test_oci_chart_is_a_full_url_and_https_chart_uses_repository_opts(runs):
    lab_driver = next(r.inputs for r in runs["lab"].releases() if r.inputs["name"] == "dra-driver-nvidia-gpu")
    assert lab_driver["chart"] == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    assert "repositoryOpts" not in lab_driver
    prod_driver = next(r.inputs for r in runs["prod-east"].releases() if r.inputs["name"] == "nvidia-dra-driver-gpu")
    assert prod_driver["chart"] == "nvidia-dra-driver-gpu"
    assert prod_driver["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}


def test_a_gpu_cluster_stack_installs_the_dra_driver_through_the_gpu_operator(runs):
    """gpuOperator.mode gpuCluster: no Helm release of the DRA driver; the GPU Operator's values carry it."""
    releases = {r.inputs["name"]: r.inputs for r in runs["west"].releases()}
    assert sorted(releases) == ["gpu-operator", "nim-operator"]
    values = releases["gpu-operator"]["values"]
    assert values["gpuCluster"] == {"deployCR": True} and values["clusterPolicy"] == {"deployCR": False}
    assert values["draDriver"]["version"] == "v0.5.1"


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_dependencies_follow_sync_waves(cluster, rendered, runs):
    waves = rendered_waves(runs[cluster], rendered / cluster)
    assert len(set(waves.values())) >= 4, "the example clusters span several waves"
    assert wave_violations(runs[cluster], rendered / cluster) == []


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_replacement_options_on_immutable_kinds(cluster, runs):
    objects = runs[cluster].kubernetes_objects()
    assert replacement_violations(runs[cluster]) == []
    assert {r.inputs["kind"] for r in objects} & set(IMMUTABLE), "each example cluster has immutable objects"


def test_prod_east_covers_every_immutable_kind(runs):
    assert set(IMMUTABLE) <= {r.inputs["kind"] for r in runs["prod-east"].kubernetes_objects()}


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_resource_api_version_follows_the_cluster(cluster, runs):
    expected = {"prod-east": "resource.k8s.io/v1", "lab": "resource.k8s.io/v1", "staging": "resource.k8s.io/v1",
                "west": "resource.k8s.io/v1"}
    dra_kinds = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
    dra = [r for r in runs[cluster].kubernetes_objects() if r.inputs["kind"] in dra_kinds]
    assert dra
    for r in dra:
        assert r.type == f"kubernetes:{expected[cluster]}:{r.inputs['kind']}"


def test_partial_objects_are_server_side_apply_patches(runs):
    types = {(r.inputs["kind"], r.type) for run in runs.values() for r in run.kubernetes_objects()}
    assert ("Node", "kubernetes:core/v1:NodePatch") in types
    assert ("ClusterPolicy", "kubernetes:nvidia.com/v1:ClusterPolicyPatch") in types  # apiextensions.CustomResourcePatch
    assert not any(kind in ("Node", "ClusterPolicy") and not t.endswith("Patch") for kind, t in types)


def test_custom_kinds_are_custom_resources_and_builtin_kinds_are_typed(runs):
    run = runs["prod-east"]
    by_kind = {r.inputs["kind"]: r.type for r in run.kubernetes_objects()}
    assert by_kind["NIMCache"] == "kubernetes:apps.nvidia.com/v1alpha1:NIMCache"
    assert by_kind["NIMService"] == "kubernetes:apps.nvidia.com/v1alpha1:NIMService"
    assert by_kind["ComputeDomain"] == "kubernetes:resource.nvidia.com/v1beta1:ComputeDomain"
    assert by_kind["ConfigMap"] == "kubernetes:core/v1:ConfigMap"
    assert by_kind["Namespace"] == "kubernetes:core/v1:Namespace"


# compiled component -> (type token, Pulumi name) every object of it must be parented by
def _expected_parent(component: str) -> tuple[str, str]:
    fixed = {"dra-driver": ("gpuc:index:DraDriver", "dra-driver"),
             "gpu-operator": ("gpuc:index:GpuNodeConfig", "node-config"),
             "node-config": ("gpuc:index:GpuNodeConfig", "node-config"),
             "nim-operator": ("gpuc:index:NimOperator", "nim-operator"),
             "namespaces": ("gpuc:index:WorkloadNamespaces", "namespaces"),
             "budgets": ("gpuc:index:TeamBudgets", "budgets"),
             "device-classes": ("gpuc:index:DeviceClasses", "device-classes"),
             "extended-resources": ("gpuc:index:DeviceClasses", "device-classes"),
             "extended-resources-guard": ("gpuc:index:DeviceClasses", "device-classes")}
    if component in fixed:
        return fixed[component]
    head, _, rest = component.partition("/")
    return {"workload": "gpuc:index:GpuWorkload", "share-group": "gpuc:index:GpuShareGroup"}[head], rest


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_components_group_the_compiled_objects(cluster, runs):
    from compiler.pipeline import CompileOptions, compile_fleet

    compiled = compile_fleet(EXAMPLES, CompileOptions(only=cluster)).compiled[cluster]
    run = runs[cluster]
    root = next(r for r in run.resources if r.type == "gpuc:index:GpuCluster")
    assert root.name == cluster and root.parent.endswith("pulumi:pulumi:Stack::gpuc-" + cluster)
    components = [r for r in run.resources if r.type.startswith("gpuc:index:") and r is not root]
    assert all(c.parent == root.urn for c in components)
    by_key = {(r.inputs["kind"], r.inputs["metadata"].get("namespace", ""), r.inputs["metadata"]["name"]): r
              for r in run.kubernetes_objects()}
    by_key.update({("HelmRelease", r.inputs["namespace"], r.inputs["name"]): r for r in run.releases()})
    items = [(o.key, o.component) for o in compiled.objects] + \
            [(("HelmRelease", r.namespace, r.name), r.component) for r in compiled.releases]
    for key, component in items:
        parent = run.by_urn(by_key[key].parent)
        assert (parent.type, parent.name) == _expected_parent(component), key


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_argocd_applications_are_not_registered(cluster, runs):
    assert not [r for r in runs[cluster].resources if "argoproj.io" in r.type]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_resource_uses_the_stack_provider(cluster, runs):
    run = runs[cluster]
    (provider,) = run.of_type(PROVIDER_TYPE)
    assert provider.name == cluster
    assert provider.inputs.get("enableServerSideApply") == "true"
    applied = run.kubernetes_objects() + run.releases()
    assert applied and all(r.provider == f"{provider.urn}::{provider.name}-id" for r in applied)
    assert any("gpuc:kubeconfig and gpuc:context are not set" in w for w in run.warnings())


def test_kubeconfig_and_context_configure_the_provider():
    run = run_stack("lab", {**stack_config("lab"), "gpuc:kubeconfig": "/etc/gpuc/lab.kubeconfig", "gpuc:context": "lab-admin"})
    (provider,) = run.of_type(PROVIDER_TYPE)
    assert provider.inputs["context"] == "lab-admin"
    # kubeconfig may hold credentials: it reaches the engine as a secret, so state stores it encrypted
    assert provider.inputs["kubeconfig"] == {rpc._special_sig_key: rpc._special_secret_sig, "value": "/etc/gpuc/lab.kubeconfig"}
    assert all(r.provider.startswith(provider.urn + "::") for r in run.kubernetes_objects() + run.releases())
    assert not any("are not set" in w for w in run.warnings())


def test_compiler_warnings_reach_pulumi(tmp_path):
    """The example acknowledges its warnings; without the acknowledgement the driver-fork warning reaches the engine's log."""
    import shutil

    fleet = shutil.copytree(EXAMPLES, tmp_path / "fleet")
    staging = fleet / "clusters" / "staging.yaml"
    staging.write_text(staging.read_text().split("  acknowledge:")[0])
    run = run_stack("staging", {**stack_config("staging"), "gpuc:fleet": str(fleet)})
    assert any("clusters/staging.yaml:15: warning: spec.draDriver.fabric" in w and "[driver-fork]" in w for w in run.warnings())


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_node_labels_are_exported(cluster, rendered, runs):
    assert runs[cluster].outputs["cluster"] == cluster
    assert runs[cluster].outputs["nodeLabels"] == yaml.safe_load((rendered / cluster / "node-labels.yaml").read_text())


def test_a_crd_setting_answers_the_unchecked_crds_warning(tmp_path):
    """gpuc:crds is render's --crds: without the example's acknowledgement the warning appears, and the operators'
    CRDs answer it (as one directory, or as a list); a directory that is not there stops the run."""
    import shutil

    from check_support import DRA_CRDS, GPU_OPERATOR_CRDS, NIM_CRDS

    fleet = shutil.copytree(EXAMPLES, tmp_path / "fleet")
    prod = fleet / "clusters" / "prod-east.yaml"
    prod.write_text(prod.read_text().split("  acknowledge:")[0])
    config = {**stack_config("prod-east"), "gpuc:fleet": str(fleet)}
    assert any("[unchecked-crds]" in w for w in run_stack("prod-east", config).warnings())
    every = json.dumps([str(NIM_CRDS), str(GPU_OPERATOR_CRDS), str(DRA_CRDS)])
    assert not any("[unchecked-crds]" in w for w in run_stack("prod-east", {**config, "gpuc:crds": every}).warnings())
    one = [w for w in run_stack("prod-east", {**config, "gpuc:crds": str(NIM_CRDS)}).warnings() if "[unchecked-crds]" in w]
    assert one and "NIMCache" not in one[0]  # NIM's kinds are checked now; ComputeDomain still is not
    with pytest.raises(Exception, match="gpuc:crds .*nowhere is not a directory"):
        run_stack("prod-east", {**config, "gpuc:crds": str(tmp_path / "nowhere")})


def test_hash_named_objects_keep_one_logical_name_across_spec_changes(runs):
    """Claims, claim templates and ComputeDomains carry a spec hash in their name; Pulumi names them by the name
    without it, so a spec change is a replacement of one resource, and aliases the hashed name that stacks deployed
    before used, so their state is adopted."""
    hashed = [r for r in runs["prod-east"].kubernetes_objects() if r.inputs["metadata"]["name"] != r.name.rpartition("/")[2]]
    assert {r.type.rsplit(":", 1)[1] for r in hashed} >= {"ResourceClaimTemplate", "ComputeDomain"}
    for r in hashed:
        meta = r.inputs["metadata"]
        assert meta["name"].startswith(r.name.rpartition("/")[2] + "-")
        assert r.alias_names == [f"{meta['namespace']}/{meta['name']}"]
    assert all(r.alias_names == [] for r in runs["prod-east"].kubernetes_objects() if r not in hashed)
