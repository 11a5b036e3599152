"""check_selectors: every emitted selector and raw require.cel compiles, reads published attributes, matches a device."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.check.selectors import check_selectors
from compiler.pipeline import compile_fleet
from compiler.place import place_cluster, synthesize_for

from check_support import damage, damageable, json_values, manifest_paths
from conftest import EXAMPLES, cluster_doc, compile_single, workload_doc

CEL_FILE = "workloads/w.yaml"
W = "w.yaml"


def findings(fleet, workloads, **cluster):
    compiled = compile_single(fleet(clusters=[cluster_doc(**cluster)], workloads=workloads))
    return check_selectors(compiled, synthesize_for(compiled))


def cel_workload(*expressions, **gpu):
    return {W: [workload_doc("w", gpu={"count": 1, "require": {"cel": list(expressions)}, **gpu})]}


def line_of(fleet_path, needle):
    text = (fleet_path / CEL_FILE).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(text) if needle in line)


@pytest.mark.parametrize("cluster", ["prod-east", "staging", "lab"])
def test_the_example_fleet_has_no_findings(cluster):
    compiled = compile_fleet(EXAMPLES).compiled[cluster]
    assert check_selectors(compiled, synthesize_for(compiled)) == []


def test_an_attribute_the_driver_no_longer_publishes(fleet):
    path = fleet(clusters=[cluster_doc()], workloads=cel_workload("device.attributes['gpu.nvidia.com'].index == 0"))
    compiled = compile_single(path)
    (d,) = check_selectors(compiled, synthesize_for(compiled))
    assert (d.file, d.path, d.severity) == (CEL_FILE, "spec.gpu.require.cel[0]", "error")
    assert d.line == line_of(path, "index == 0")
    assert "attribute gpu.nvidia.com/index is not published by this driver version" in d.message
    assert d.hint == "gpu.nvidia.com/index is published by driver 25.3; this cluster runs 25.12.0"


def test_the_same_attribute_is_fine_on_the_driver_that_publishes_it(fleet):
    assert findings(fleet, cel_workload("device.attributes['gpu.nvidia.com'].index == 0"),
                    driver="25.3.2", kubernetes="1.33", nimOperator=None) == []


def test_a_selector_that_does_not_compile(fleet):
    (d,) = findings(fleet, cel_workload("device.attributes['gpu.nvidia.com'].architecture =="))
    assert d.path == "spec.gpu.require.cel[0]" and "syntax error" in d.message


def test_a_selector_that_matches_no_device_says_what_devices_have(fleet):
    (d,) = findings(fleet, cel_workload("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 PCIe'"))
    assert d.message.endswith("selector productName == 'NVIDIA H100 PCIe' matches none of the 16 devices of cluster 'c1' "
                              "that get this far; devices have productName NVIDIA H100 80GB HBM3 (16)")


def test_a_version_compared_as_a_string(fleet):
    (d,) = findings(fleet, cel_workload("device.attributes['gpu.nvidia.com'].driverVersion >= '550.0.0'"))
    assert "is a version" in d.message and "semver" in d.message


def test_an_unknown_domain_gets_a_suggestion(fleet):
    (d,) = findings(fleet, cel_workload("device.attributes['gpu.nvidia.con'].type == 'gpu'"))
    assert "no driver of this cluster publishes attributes in domain 'gpu.nvidia.con'" in d.message
    assert d.hint == "did you mean 'gpu.nvidia.com'?"


def test_device_class_selectors_point_at_the_class_document(fleet):
    cls = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "pcie.example.com"},
           "spec": {"require": {"cel": ["device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:99'"]}}}
    workloads = {"classes.yaml": [cls], W: [workload_doc("w", gpu={"count": 1, "class": "pcie.example.com"})]}
    result = findings(fleet, workloads)
    assert [(d.file, d.path) for d in result] == [("workloads/classes.yaml", "spec.require.cel[0]")]
    assert "DeviceClass pcie.example.com: selector resource.kubernetes.io/pcieRoot == 'pci0000:99' matches none" in result[0].message


def test_a_selector_on_what_only_pre_created_mig_devices_have(fleet):
    """Pre-created MIG devices have a MIG UUID; DynamicMIG placements have none until a claim creates them. (The two
    kinds no longer meet in one cluster: a dynamic-MIG pool beside a static one is refused, test_real_cluster.py.)"""
    workloads = {W: [workload_doc("w", gpu={"mig": {"slices": [{"profile": "1g.10gb"}]},
                                            "require": {"cel": ["device.attributes['gpu.nvidia.com'].uuid.startsWith('MIG-')"]}})]}
    static = [{"name": "static", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 1}, "mig": {"layout": "all-balanced"}}]
    assert findings(fleet, workloads, pools=static) == []
    dynamic = [{"name": "dynamic", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 1}, "mig": {"layout": "dynamic"}}]
    (d,) = findings(fleet, workloads, pools=dynamic, kubernetes="1.36", driver="0.5.1",
                    acknowledge=[{"warning": "mig-mode", "reason": "the node image enables MIG mode"}])
    assert d.path == "spec.gpu.require.cel[0]"
    assert "fails on every one of the 7 devices gpu.nvidia.com/gpu-0-mig-1g10gb-19-0: no such key: 'uuid'" in d.message


def test_mig_profile_selectors_are_checked_on_mig_devices(fleet):
    pools = [{"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 1}, "mig": {"layout": "all-balanced"}}]
    workloads = {W: [workload_doc("w", gpu={"mig": {"slices": [{"profile": "3g.40gb"}]},
                                                   "require": {"cel": ["device.capacity['gpu.nvidia.com'].memorySlice0.compareTo(quantity('1')) == 0"]}})]}
    (d,) = findings(fleet, workloads, pools=pools)
    assert d.path == "spec.gpu.require.cel[0]"
    # the 3g.40gb sits at memory slices 4-7: it has no memorySlice0 capacity, and reading it is an error
    assert "fails on every one of the 1 devices gpu.nvidia.com/gpu-0-mig-3g40gb-9-4: no such key: 'memorySlice0'" in d.message


PROD = compile_fleet(EXAMPLES).compiled["prod-east"]
# cel-python raises the recursion limit when its environment is first built: do that before hypothesis runs.
assert check_selectors(PROD, synthesize_for(PROD)) == []
DRA_OBJECTS = [i for i, o in enumerate(PROD.objects) if o.kind in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pick=st.integers(0, 10**6), where=st.integers(0, 10**6), value=json_values(40), delete=st.booleans())
def test_damaged_claims_and_classes_never_crash_the_check_or_the_plan(pick, where, value, delete):
    compiled = damageable(PROD)
    obj = compiled.objects[DRA_OBJECTS[pick % len(DRA_OBJECTS)]]
    paths = [p for p in manifest_paths(obj.manifest.get("spec")) if p]
    damage(obj.manifest, ("spec",) + paths[where % len(paths)], value, delete)
    inventory = synthesize_for(compiled)
    assert all(d.file and d.message for d in check_selectors(compiled, inventory))
    plan = place_cluster(compiled, inventory)
    assert all(p.placed or p.reason for p in plan.pods)


def test_a_selector_reading_a_whole_domain_and_one_of_its_names(fleet):
    """`'x' in device.attributes[d]` next to `device.attributes[d].x`: sorting the two references raised a
    TypeError (a traceback for a valid selector) before Ref got its own ordering."""
    from conftest import gpuc

    text = "'architecture' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"
    path = fleet(clusters=[cluster_doc()], workloads=cel_workload(text))
    assert findings(fleet, cel_workload(text)) == []
    result = gpuc("validate", path)
    assert result.code == 0 and "Traceback" not in result.err, result.err


HOST_SELECTOR = "device.attributes['gpu.nvidia.com'].addressingMode == 'HMM'"
NUMA_SELECTOR = "device.attributes['resource.kubernetes.io'].numaNode == 0"


def h100(**host):
    return [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 4}, **({"host": host} if host else {})}]


@pytest.mark.parametrize("selector, pools, expected", [
    # undeclared: gpuc would otherwise decide it on an assumption, so it refuses and says what to declare
    (HOST_SELECTOR, h100(), "host.addressingMode"),
    (NUMA_SELECTOR, h100(), "host.numaNodes"),
    (NUMA_SELECTOR, h100(addressingMode="HMM"), "host.numaNodes"),
    # declared: decided on what the pool says its hosts publish
    (HOST_SELECTOR, h100(addressingMode="HMM"), None),
    (NUMA_SELECTOR, h100(numaNodes=2), None),
    ("device.attributes['gpu.nvidia.com'].addressingMode == 'ATS'", h100(addressingMode="HMM"), "matches none of the 4 devices"),
    # declared as none published (a virtual machine): the real driver publishes none either, and the read fails there too
    (NUMA_SELECTOR, h100(numaNodes=0), "fails on every one of the 4 devices"),
    # guarded with has(): the selector decides nothing on the host's value when it is absent... but it still reads it
    ("!has(device.attributes['gpu.nvidia.com'].addressingMode) || device.attributes['gpu.nvidia.com'].addressingMode != 'None'",
     h100(), "host.addressingMode"),
])
def test_a_selector_on_a_host_attribute_is_decided_only_where_the_pool_declares_it(fleet, selector, pools, expected):
    found = findings(fleet, cel_workload(selector), driver="0.5.0-dev", kubernetes="1.35", pools=pools)
    if expected is None:
        assert found == []
        return
    (d,) = found
    assert d.severity == "error" and d.path == "spec.gpu.require.cel[0]"
    assert expected in d.message + d.hint
    if expected.startswith("host."):
        assert "pool(s) h100 of cluster 'c1' do not declare it" in d.message
        assert d.hint.startswith(f"declare what those nodes publish in nodePools[].{expected}")


def test_a_host_attribute_read_from_a_cluster_export_is_decided_on_its_slices(fleet):
    """--state: the real slices say what the hosts publish, so there is nothing to declare."""
    compiled = compile_single(fleet(clusters=[cluster_doc(driver="0.5.0-dev", kubernetes="1.35", pools=h100())],
                                    workloads=cel_workload(HOST_SELECTOR)))
    inventory = synthesize_for(compiled)
    exported = dataclasses.replace(inventory, source="state.yaml")
    (d,) = check_selectors(compiled, exported)
    assert "fails on every one of the 4 devices" in d.message  # read from slices that lack it, as the cluster would
