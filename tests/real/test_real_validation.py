"""gpuc's checks that claim to mirror API-server validation (compiler/check/dra_limits.py, metadata.py,
selectors.py), each proved against a real kube-apiserver: one object is damaged the way a rule
describes; gpuc's checks refuse it, and the server refuses it too (HTTP 422, naming the field).

The objects are the example cluster `west` (Kubernetes 1.37, so the server runs as its own minor, with
every gate a 1.37 cluster has on).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from harness.kube import Kube, Rejection
from harness.servers import ControlPlanes

from check_support import claim_devices, example_cluster, find, run_checks

CLUSTER = "west"
TEMPLATE = "llama-70b-fp8"
Damage = Callable[[Any], Any]  # damages a compiled cluster in place, returns the object it damaged


def _template(c):
    return find(c, "ResourceClaimTemplate", TEMPLATE)


def _request(c) -> dict[str, Any]:
    return claim_devices(_template(c))["requests"][0]


def _exactly(c) -> dict[str, Any]:
    return _request(c)["exactly"]


def too_many_requests(c):
    devices = claim_devices(_template(c))
    devices["requests"] = [dict(copy.deepcopy(devices["requests"][0]), name=f"gpu-{i}") for i in range(33)]
    for r in devices["requests"]:
        r["exactly"]["count"] = 1
    return _template(c)


def request_name_not_a_dns_label(c):
    _request(c)["name"] = "GPU_0"
    return _template(c)


def duplicate_request_names(c):
    devices = claim_devices(_template(c))
    devices["requests"].append(copy.deepcopy(devices["requests"][0]))
    return _template(c)


def constraint_names_no_request(c):
    claim_devices(_template(c))["constraints"] = [{"requests": ["nope"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]
    return _template(c)


def match_attribute_not_qualified(c):
    claim_devices(_template(c))["constraints"] = [{"matchAttribute": "parentUUID"}]
    return _template(c)


def constraint_with_match_and_distinct(c):
    claim_devices(_template(c))["constraints"] = [{"matchAttribute": "gpu.nvidia.com/parentUUID", "distinctAttribute": "gpu.nvidia.com/uuid"}]
    return _template(c)


def exactly_and_first_available(c):
    request = _request(c)
    request["firstAvailable"] = [dict(copy.deepcopy(request["exactly"]), name="alt")]
    return _template(c)


def negative_count(c):
    _exactly(c)["count"] = -1
    return _template(c)


def all_mode_with_count(c):
    _exactly(c).update(allocationMode="All", count=2)
    return _template(c)


def unknown_allocation_mode(c):
    _exactly(c)["allocationMode"] = "Some"
    return _template(c)


def too_many_selectors(c):
    _exactly(c)["selectors"] = [{"cel": {"expression": f"device.driver == 'gpu.nvidia.com' || {i} == {i}"}} for i in range(33)]
    return _template(c)


def too_many_tolerations(c):
    _exactly(c)["tolerations"] = [{"key": f"k{i}", "operator": "Exists", "effect": "NoSchedule"} for i in range(17)]
    return _template(c)


def too_many_alternatives(c):
    request = _request(c)
    body = request.pop("exactly")
    request["firstAvailable"] = [dict(copy.deepcopy(body), name=f"alt-{i}") for i in range(9)]
    return _template(c)


def selector_over_10_kib(c):
    _exactly(c)["selectors"] = [{"cel": {"expression": "device.driver == '" + "x" * 10300 + "'"}}]
    return _template(c)


def selector_that_does_not_compile(c):
    _exactly(c)["selectors"] = [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName =="}}]
    return _template(c)


def opaque_parameters_over_10_kib(c):
    claim_devices(_template(c))["config"] = [{"requests": [_request(c)["name"]], "opaque": {
        "driver": "gpu.nvidia.com", "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "pad": "x" * 10300}}}]
    return _template(c)


def opaque_driver_not_a_dns_subdomain(c):
    claim_devices(_template(c))["config"] = [{"opaque": {"driver": "GPU_driver", "parameters": {}}}]
    return _template(c)


def class_name_not_a_dns_subdomain(c):
    _exactly(c)["deviceClassName"] = "Hopper_80g"
    return _template(c)


def label_key_invalid(c):
    obj = find(c, "DeviceClass")
    obj.manifest["metadata"].setdefault("labels", {})["bad key!"] = "x"
    return obj


def label_value_too_long(c):
    obj = find(c, "DeviceClass")
    obj.manifest["metadata"].setdefault("labels", {})["gpuc.dev/x"] = "v" * 64
    return obj


def annotations_over_256_kib(c):
    obj = find(c, "DeviceClass")
    obj.manifest["metadata"].setdefault("annotations", {})["gpuc.dev/big"] = "x" * (256 * 1024)
    return obj


def template_metadata_beyond_labels_and_annotations(c):
    _template(c).manifest["spec"]["metadata"] = {"finalizers": ["gpuc.dev/x"]}
    return _template(c)


RULES: list[tuple[Damage, str]] = [
    # (damage, what gpuc's finding says)
    (too_many_requests, "33 requests; a claim may have at most 32"),
    (request_name_not_a_dns_label, "must be a DNS label"),
    (duplicate_request_names, "duplicate request name"),
    (constraint_names_no_request, "no request named 'nope'"),
    (match_attribute_not_qualified, "must be fully qualified"),
    (exactly_and_first_available, "request has both `exactly` and firstAvailable"),
    (negative_count, "count must be greater than zero"),
    (all_mode_with_count, "allocationMode All takes no count"),
    (unknown_allocation_mode, "unknown allocationMode"),
    (too_many_selectors, "33 selectors"),
    (too_many_alternatives, "firstAvailable"),
    (selector_over_10_kib, "10240"),
    (selector_that_does_not_compile, "syntax error"),
    (opaque_parameters_over_10_kib, "10240"),
    (opaque_driver_not_a_dns_subdomain, "must be a DNS subdomain"),
    (class_name_not_a_dns_subdomain, "must be a DNS subdomain"),
    (label_key_invalid, "invalid label key"),
    (label_value_too_long, "invalid label value"),
    (annotations_over_256_kib, "annotations"),
    (template_metadata_beyond_labels_and_annotations, "spec.metadata of a ResourceClaimTemplate allows only labels and"),
]


# What the 1.37 API server takes although gpuc once refused it (the refusals were dropped when this test found it):
# a constraint with both matchAttribute and distinctAttribute, and more than 16 tolerations on a request.
SERVER_TAKES: list[Damage] = [constraint_with_match_and_distinct, too_many_tolerations]


@pytest.fixture(scope="module")
def kube(control_planes: ControlPlanes) -> Kube:
    k = Kube(control_planes.get(example_cluster(CLUSTER).cluster.api.kubernetes))
    for ns in ("nim-service",):
        k.ensure_namespace(ns)
    return k


def test_the_undamaged_objects_apply(kube: Kube) -> None:
    """The control: the objects every rule starts from are accepted, so a refusal below is the damage's."""
    c = example_cluster(CLUSTER)
    for obj in (_template(c), find(c, "DeviceClass")):
        probe = dict(obj.manifest, metadata=dict(obj.manifest["metadata"], name="probe-undamaged"))
        assert not isinstance(kube.apply(probe, dry_run=True), Rejection)


@pytest.mark.parametrize(("damage", "finding"), RULES, ids=[d.__name__ for d, _ in RULES])
def test_a_check_that_mirrors_the_api_server_refuses_what_the_server_refuses(kube: Kube, damage: Damage, finding: str) -> None:
    c = example_cluster(CLUSTER)
    obj = damage(c)
    errors = [d.message for d in run_checks(c) if d.severity == "error"]
    assert any(finding in m for m in errors), errors
    # A name no object has: the server judges the damage itself, never an update of an immutable object.
    probe = dict(obj.manifest, metadata=dict(obj.manifest["metadata"], name=f"probe-{damage.__name__.replace('_', '-')}"))
    answer = kube.apply(probe, dry_run=True)
    assert isinstance(answer, Rejection), f"the API server accepted what gpuc refuses ({finding})"
    assert answer.status == 422 and "immutable" not in answer.message, answer


@pytest.mark.parametrize("damage", SERVER_TAKES, ids=[d.__name__ for d in SERVER_TAKES])
def test_gpuc_does_not_refuse_what_the_api_server_takes(kube: Kube, damage: Damage) -> None:
    c = example_cluster(CLUSTER)
    obj = damage(c)
    probe = dict(obj.manifest, metadata=dict(obj.manifest["metadata"], name=f"probe-{damage.__name__.replace('_', '-')}"))
    assert not isinstance(kube.apply(probe, dry_run=True), Rejection)
    assert [d.message for d in run_checks(c) if d.severity == "error"] == []
