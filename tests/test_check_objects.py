"""Built-in kinds against the official schemas, custom resources against their CRDs (one defect each)."""

from __future__ import annotations

import re

import pytest

from check_support import DRA_CRDS, GPU_OPERATOR_CRDS, NIM_CRDS, claim_devices, errors_after, example_cluster, find, previous_of, run_checks
from conftest import cluster_doc, compile_single, workload_doc


def messages(diagnostics) -> list[str]:
    return [d.message for d in diagnostics]


# ------------------------------------------------------------------------------------ built-in kinds

def test_unknown_field_in_a_device_class_names_the_class_document():
    errors = errors_after("prod-east", lambda c: find(c, "DeviceClass").manifest["spec"].update(selector=[]))
    assert messages(errors) == ["DeviceClass hopper-80g.gpuc.dev spec.selector: unknown field 'selector'"]
    assert (errors[0].file, errors[0].path, errors[0].hint) == ("workloads/platform/device-classes.yaml", "spec", "did you mean 'selectors'?")


def test_a_v1beta1_shaped_request_under_v1_is_caught_field_by_field():
    def flatten(c):
        request = claim_devices(find(c, "ResourceClaimTemplate", "llama-8b-chat"))["requests"][0]
        request.update(request.pop("exactly"))

    errors = errors_after("prod-east", flatten)
    assert "ResourceClaimTemplate nim-service/llama-8b-chat-gpu-a20b1f63 spec.spec.devices.requests[0].deviceClassName: unknown field 'deviceClassName'" in messages(errors)
    assert {d.hint for d in errors} == {f"'{f}' is a field of 'exactly' here: nest it under `exactly:`"
                                        for f in ("deviceClassName", "allocationMode", "count", "selectors")}
    assert {d.file for d in errors} == {"workloads/inference/llama.yaml"}


def test_a_v1_shaped_request_under_v1beta1_is_caught(fleet):
    root = fleet([cluster_doc(kubernetes="1.32", driver="25.8.1", nimOperator=None)],
                 {"w.yaml": [workload_doc(gpu={"count": 1})]})
    compiled = compile_single(root)
    request = claim_devices(find(compiled, "ResourceClaimTemplate"))["requests"][0]
    request["exactly"] = {"deviceClassName": request.pop("deviceClassName"), "count": request.pop("count")}
    errors = [d for d in run_checks(compiled, fleet_root=root) if d.severity == "error"]
    name = find(compiled, "ResourceClaimTemplate").name
    assert [d.message for d in errors] == [
        f"ResourceClaimTemplate team/{name} spec.spec.devices.requests[0].exactly: unknown field 'exactly'",
        f"ResourceClaimTemplate team/{name} spec.spec.devices.requests[0]: required field 'deviceClassName' is missing"]
    assert errors[0].hint == "'exactly' does not exist here: its fields (count, deviceClassName) belong directly on this object"


def test_an_api_version_the_cluster_does_not_serve(fleet):
    root = fleet([cluster_doc(kubernetes="1.33", driver="25.8.1", nimOperator=None)], {"w.yaml": [workload_doc(gpu={"count": 1})]})
    compiled = compile_single(root)
    find(compiled, "ResourceClaimTemplate").manifest["apiVersion"] = "resource.k8s.io/v1"
    errors = [d for d in run_checks(compiled, fleet_root=root) if d.severity == "error"]
    assert len(errors) == 1
    assert errors[0].message.endswith("apiVersion: Kubernetes 1.33 does not serve ResourceClaimTemplate in resource.k8s.io/v1 "
                                      "(it serves resource.k8s.io/v1alpha3, resource.k8s.io/v1beta1, resource.k8s.io/v1beta2)")


def test_wrong_types_and_scope_of_built_in_objects():
    def damage(c):
        find(c, "ConfigMap").manifest["data"]["config.yaml"] = {"version": "v1"}
        find(c, "DeviceClass").manifest["metadata"]["namespace"] = "research"

    found = messages(errors_after("prod-east", damage))
    assert "ConfigMap gpu-operator/gpuc-mig-parted-config data.config.yaml: must be a string, got object {'version': 'v1'}" in found
    assert "DeviceClass research/hopper-80g.gpuc.dev metadata.namespace: DeviceClass is cluster-scoped: it takes no metadata.namespace" in found


def test_node_patches_are_partial_but_still_strict():
    ok = run_checks(example_cluster("prod-east"))
    assert not [d for d in ok if d.severity == "error" and "Node" in d.message]  # no spec, no status: fine for a patch
    errors = errors_after("prod-east", lambda c: find(c, "Node", "gpu-a100-0").manifest.update(spec={"unschedulable": "yes"}))
    assert messages(errors) == ["Node gpu-a100-0 spec.unschedulable: must be a boolean (true or false), got string 'yes'"]
    assert (errors[0].file, errors[0].path) == ("clusters/prod-east.yaml", "spec.nodePools[1].nodeNames")  # the pool of that node


def test_metadata_names_and_labels_follow_the_api_server():
    def damage(c):
        find(c, "Namespace", "research").manifest["metadata"]["name"] = "Research.Team"
        find(c, "ResourceClaim", "small-models").manifest["metadata"]["labels"]["gpuc.dev/share-group"] = "x" * 64

    found = messages(errors_after("prod-east", damage))
    assert "Namespace Research.Team metadata.name: name 'Research.Team' is not a DNS label (at most 63 lower-case letters, digits and '-')" in found
    assert any(m.startswith("ResourceClaim nim-service/small-models-09eb43f3 metadata.labels.gpuc.dev/share-group: invalid label value") for m in found)


def test_a_changed_claim_spec_under_the_same_name_is_an_immutable_update():
    base = example_cluster("prod-east")
    previous = previous_of(base)
    claim_devices(find(base, "ResourceClaim", "batch-embeddings"))["requests"][0]["exactly"]["count"] = 2
    errors = [d for d in run_checks(base, previous=previous) if d.severity == "error"]
    assert messages(errors) == ["ResourceClaim research/batch-embeddings-6af7ab02 spec: spec is immutable: the API server refuses "
                                "to change it on the existing ResourceClaim"]


# ---------------------------------------------------------------------------------- custom resources

def test_nimservice_with_both_a_claim_name_and_a_claim_creation_spec():
    errors = errors_after("prod-east", lambda c: find(c, "NIMService", "llama-70b").manifest["spec"]["draResources"][0]
                          .update(claimCreationSpec={"devices": [{"name": "gpu"}]}))
    assert messages(errors) == ["NIMService nim-service/llama-70b spec.draResources[0]: exactly one of spec.resourceClaimName, "
                                "spec.resourceClaimTemplateName, or spec.claimCreationSpec must be set."]
    assert (errors[0].file, errors[0].path) == ("workloads/inference/llama.yaml", "spec.gpu")
    assert errors[0].hint.startswith("the CRD's rule: (has(self.resourceClaimName) ? 1 : 0)")


def test_nimcache_tensor_parallelism_must_be_a_string():
    errors = errors_after("prod-east", lambda c: find(c, "NIMCache", "llama-70b").manifest["spec"]["source"]["ngc"]["model"]
                          .update(tensorParallelism=2))
    (message,) = messages(errors)
    assert re.fullmatch(r"NIMCache nim-service/llama-70b-[0-9a-f]{8} spec.source.ngc.model.tensorParallelism: must be a string, got integer 2", message)
    assert errors[0].hint == 'quote it: "2"'


def test_unknown_field_in_a_custom_resource_would_be_pruned():
    errors = errors_after("prod-east", lambda c: find(c, "NIMService", "llama-8b").manifest["spec"].update(gpus=1))
    assert messages(errors) == ["NIMService nim-service/llama-8b-chat spec.gpus: unknown field 'gpus'"]


def test_computedomain_numnodes_is_required_by_the_25_12_crd_but_not_by_0_4():
    def drop(c):
        del find(c, "ComputeDomain").manifest["spec"]["numNodes"]

    assert messages(errors_after("prod-east", drop)) == ["ComputeDomain research/trainer-0ae4ab2f spec: required field 'numNodes' is missing"]
    newer = (NIM_CRDS, GPU_OPERATOR_CRDS, DRA_CRDS / "v0.4.1" / "crds")
    assert errors_after("prod-east", drop, crds=newer) == []


def test_clusterpolicy_patch_may_omit_required_fields_but_not_invent_ones():
    assert errors_after("staging", lambda c: None) == []
    errors = errors_after("staging", lambda c: find(c, "ClusterPolicy").manifest["spec"].update(cdi={"enabled": "true"}))
    assert messages(errors) == ["ClusterPolicy cluster-policy spec.cdi.enabled: must be a boolean (true or false), got string 'true'"]
    assert (errors[0].file, errors[0].path) == ("clusters/staging.yaml", "spec.gpuOperator")


def test_a_version_the_crd_does_not_serve():
    errors = errors_after("prod-east", lambda c: find(c, "NIMCache", "llama-70b").manifest.update(apiVersion="apps.nvidia.com/v1"))
    assert len(errors) == 1
    assert "apiVersion: the nimcaches.apps.nvidia.com CRD" in errors[0].message and errors[0].message.endswith("serves v1alpha1, not v1")


def test_changed_nimservice_dra_resources_against_the_previous_tree():
    base = example_cluster("prod-east")
    previous = previous_of(base)
    find(base, "NIMService", "llama-70b").manifest["spec"]["draResources"][0]["resourceClaimTemplateName"] = "llama-70b-gpu-00000000"
    errors = [d for d in run_checks(base, previous=previous) if d.severity == "error"]
    assert messages(errors) == ["NIMService nim-service/llama-70b spec.draResources: spec.draResources is immutable"]
    assert (errors[0].file, errors[0].path) == ("workloads/inference/llama.yaml", "spec.gpu")
    assert "render again with --allow-replace, then delete NIMService nim-service/llama-70b" in errors[0].hint
    accepted = [d for d in run_checks(base, previous=previous, allow_replace=True) if "draResources" in d.message]
    assert [d.severity for d in accepted] == ["warning"]
    assert accepted[0].hint.startswith("accepted with --allow-replace: spec.draResources is immutable: the NIMService is deleted")
    # The same tree as before is a valid update.
    assert [d for d in run_checks(example_cluster("prod-east"), previous=previous) if d.severity == "error"] == []


def test_a_tree_of_releases_gives_each_cluster_its_version(tmp_path):
    """The driver's CRDs of five releases, one directory each: prod-east (25.12.0) gets v25.12.0's; a version
    without its own directory takes its line's (0.5.1 -> main-0.5.0-dev); none at all is refused."""
    from compiler.check.crds import build_catalog, read_crd_dir
    from compiler.diagnostics import InputError

    tree = read_crd_dir(DRA_CRDS, str(DRA_CRDS))
    pick = build_catalog([("dra", tree)], {"resource.nvidia.com": "25.12.0"}).find("resource.nvidia.com", "ComputeDomain")
    assert pick is not None and "/v25.12.0/" in pick.file
    line = build_catalog([("dra", tree)], {"resource.nvidia.com": "0.5.1"}).find("resource.nvidia.com", "ComputeDomain")
    assert line is not None and "/main-0.5.0-dev/" in line.file
    assert [d for d in run_checks(example_cluster("prod-east"), crds=(DRA_CRDS,)) if d.severity == "error"] == []
    with pytest.raises(InputError) as info:
        build_catalog([("dra", tree)], {"resource.nvidia.com": "26.1.0"}).find("resource.nvidia.com", "ComputeDomain")
    (d,) = info.value.diagnostics
    assert "different CRDs define ComputeDomain.resource.nvidia.com (none under a directory named 26.1.0): " in d.message
    assert "point --crds (or spec.crds) at the CRDs of the operator versions this cluster runs" in d.hint
    with pytest.raises(InputError):
        build_catalog([("dra", tree)]).find("resource.nvidia.com", "ComputeDomain")  # no version to choose by


def test_a_cluster_spec_crds_directory_wins_over_crds_flags(fleet, tmp_path):
    import shutil

    root = fleet([cluster_doc(crds="crds", pools=[{"name": "gb", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}])],
                 {"w.yaml": [workload_doc(gpu={"count": 4, "multiNode": {"nodes": 2}})]})
    (root / "crds").mkdir()
    shutil.copy(DRA_CRDS / "v0.4.1" / "crds" / "resource.nvidia.com_computedomains.yaml", root / "crds")
    compiled = compile_single(root)
    del find(compiled, "ComputeDomain").manifest["spec"]["numNodes"]
    # --crds has the 25.12 CRD (numNodes required); the cluster's own 0.4.1 CRD (optional) is the one used.
    assert [d for d in run_checks(compiled, fleet_root=root) if d.severity == "error"] == []
