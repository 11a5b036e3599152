"""DRA limits and formats the API server enforces beyond the schema (notes k8s-dra-api.md 1.1)."""

from __future__ import annotations

import copy
import shutil

from check_support import claim_devices, errors_after, find
from conftest import EXAMPLES, gpuc


def _request(c, name: str = "llama-8b-chat"):
    return claim_devices(find(c, "ResourceClaimTemplate", name))


def only(errors) -> str:
    assert len(errors) == 1, [d.message for d in errors]
    return errors[0].message


def test_33_requests():
    def damage(c):
        devices = _request(c)
        devices["requests"] = [dict(copy.deepcopy(devices["requests"][0]), name=f"gpu-{i}") for i in range(33)]
        for r in devices["requests"]:
            r["exactly"]["count"] = 1

    messages = [d.message for d in errors_after("prod-east", damage)]
    assert "ResourceClaimTemplate nim-service/llama-8b-chat-gpu-a20b1f63 spec.spec.devices.requests: 33 requests; a claim may have at most 32" in messages
    assert any("ask for 33 devices in total (sum of counts); a claim can be allocated at most 32" in m for m in messages)


def test_more_than_32_devices_in_one_claim():
    def damage(c):
        devices = _request(c, "notebooks")
        devices["requests"][0]["exactly"]["count"] = 31  # plus 2 x 1g.10gb
    assert only(errors_after("prod-east", damage)).endswith(
        "spec.spec.devices.requests: the requests ask for 33 devices in total (sum of counts); a claim can be allocated at most 32")


def test_exactly_the_limits_are_accepted():
    """The API server refuses more than its limits, not the limits themselves: 32 requests of 32 devices, a claim of
    32 devices in all, 8 alternatives of 32 selectors each."""
    def requests(c):
        devices = _request(c)
        devices["requests"] = [dict(copy.deepcopy(devices["requests"][0]), name=f"gpu-{i}") for i in range(32)]
        for r in devices["requests"]:
            r["exactly"]["count"] = 1

    def devices(c):
        _request(c, "notebooks")["requests"][0]["exactly"]["count"] = 30  # plus 2 x 1g.10gb

    def alternatives(c):
        request = _request(c)["requests"][0]
        body = request.pop("exactly")
        request["firstAvailable"] = [dict(copy.deepcopy(body), name=f"alt-{i}") for i in range(8)]
        request["firstAvailable"][0]["selectors"] = [{"cel": {"expression": "true"}}] * 32

    for damage in (requests, devices, alternatives):
        # 32 MIG devices per notebook pod go over the example's research budget: the budget check's finding
        # (tests/test_budgets.py), not a limit's
        messages = [d.message for d in errors_after("prod-east", damage) if "against a budget of" not in d.message]
        assert messages == [], damage.__name__


def test_request_names_must_be_unique_dns_labels_and_references_must_exist():
    def damage(c):
        devices = _request(c, "notebooks")
        devices["requests"][1]["name"] = "MIG_1g"
        devices["constraints"][0]["requests"] = ["mig-3g-40gb", "mig-1g-10gb"]

    messages = [d.message for d in errors_after("prod-east", damage)]
    assert any(m.endswith("requests[1].name: request name 'MIG_1g' must be a DNS label (lower-case letters, digits and '-', at most 63)") for m in messages)
    assert any(m.endswith("constraints[0].requests[1]: no request named 'mig-1g-10gb' in this claim (requests: mig-3g-40gb)") for m in messages)


def test_match_attribute_must_be_fully_qualified():
    def damage(c):
        _request(c, "notebooks")["constraints"][0]["matchAttribute"] = "parentUUID"
    error = errors_after("prod-east", damage)
    assert only(error).endswith("constraints[0].matchAttribute: 'parentUUID' must be fully qualified as <domain>/<name>, e.g. gpu.nvidia.com/parentUUID")
    assert (error[0].file, error[0].path) == ("workloads/research/batch.yaml", "spec.gpu.mig.sameGpu")


def test_first_available_alternatives_and_selectors_per_request():
    def damage(c):
        devices = _request(c)
        request = devices["requests"][0]
        body = request.pop("exactly")
        request["firstAvailable"] = [dict(copy.deepcopy(body), name=f"alt-{i}") for i in range(9)]
        request["firstAvailable"][0]["selectors"] = [{"cel": {"expression": "true"}}] * 33

    messages = [d.message for d in errors_after("prod-east", damage)]
    assert any(m.endswith("requests[0].firstAvailable: 9 firstAvailable alternatives; at most 8") for m in messages)
    assert any(m.endswith("requests[0].firstAvailable[0].selectors: 33 selectors; a request may have at most 32") for m in messages)


def test_zero_count_and_invalid_device_class_name():
    def damage(c):
        body = _request(c)["requests"][0]["exactly"]
        body["count"] = 0
        body["deviceClassName"] = "GPU Class"

    messages = [d.message for d in errors_after("prod-east", damage)]
    assert any(m.endswith("exactly.count: count must be greater than zero, got 0") for m in messages)
    assert any(m.endswith("exactly.deviceClassName: device class name 'GPU Class' must be a DNS subdomain") for m in messages)


def test_a_request_needs_exactly_one_of_exactly_and_first_available():
    def both(c):
        request = _request(c)["requests"][0]
        request["firstAvailable"] = [dict(copy.deepcopy(request["exactly"]), name="a")]

    def neither(c):
        _request(c)["requests"][0].pop("exactly")

    assert only(errors_after("prod-east", both)).endswith(
        "spec.spec.devices.requests[0]: request has both `exactly` and firstAvailable; the API server requires exactly one")
    assert only(errors_after("prod-east", neither)).endswith(
        "spec.spec.devices.requests[0]: request has neither `exactly` nor firstAvailable; the API server requires exactly one")


def test_a_subrequest_reference_must_name_an_existing_subrequest():
    def damage(c):
        devices = _request(c, "notebooks")
        devices["constraints"][0]["requests"] = [devices["requests"][0]["name"] + "/x"]

    assert only(errors_after("prod-east", damage)).endswith(
        "constraints[0].requests[0]: request 'mig-3g-40gb' has no subrequests (it is not a firstAvailable list); "
        "refer to it as 'mig-3g-40gb'")

    def missing_sub(c):
        request = _request(c)["requests"][0]
        request["firstAvailable"] = [dict(request.pop("exactly"), name="large")]
        _request(c)["constraints"] = [{"requests": ["gpu/small"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]

    assert any(m.endswith("constraints[0].requests[0]: request 'gpu' has no subrequest 'small' (subrequests: large)")
               for m in [d.message for d in errors_after("prod-east", missing_sub)])


def test_a_selector_without_cel_is_refused():
    def damage(c):
        _request(c)["requests"][0]["exactly"]["selectors"] = [{}]

    assert only(errors_after("prod-east", damage)).endswith(
        "exactly.selectors[0]: a selector needs `cel: {expression: ...}`; it is the only kind of DeviceSelector")


def test_claim_template_metadata_allows_only_labels_and_annotations():
    def damage(c):
        find(c, "ResourceClaimTemplate", "llama-8b-chat").manifest["spec"]["metadata"] = {"name": "x", "labels": {"a": "b"}}

    assert only(errors_after("prod-east", damage)).endswith(
        "spec.metadata.name: spec.metadata of a ResourceClaimTemplate allows only labels and annotations, not 'name'")


def test_opaque_parameters_over_10_kib():
    def damage(c):
        params = claim_devices(find(c, "ResourceClaim", "batch-embeddings"))["config"][0]["opaque"]["parameters"]
        params["sharing"]["mpsConfig"]["defaultPerDevicePinnedMemoryLimit"] = {f"GPU-{i:036d}": "1Gi" for i in range(300)}

    messages = [d.message for d in errors_after("prod-east", damage)]
    assert any("config[0].opaque.parameters: opaque parameters are" in m and "bytes of JSON; the API server accepts at most 10240 (10 KiB)" in m
               for m in messages)


def test_cel_and_opaque_limits_count_bytes_not_characters():
    """The API server measures a CEL expression and opaque parameters in bytes (Go's len of a UTF-8 string): a
    product name of 5,100 'é' is 5,100 characters but 10,200 bytes."""
    name = "é" * 5100
    prefix = "device.attributes['gpu.nvidia.com'].productName != '"

    def cel(text):
        def damage(c):
            _request(c)["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": text}}]
        return damage

    def opaque(c):
        params = claim_devices(find(c, "ResourceClaim", "batch-embeddings"))["config"][0]["opaque"]["parameters"]
        params["sharing"]["mpsConfig"]["defaultPerDevicePinnedMemoryLimit"] = {f"GPU-{name}": "1Gi"}

    at_limit = prefix + "x" * (10240 - len(prefix) - 1) + "'"
    assert [d.message for d in errors_after("prod-east", cel(at_limit))] == []
    assert only(errors_after("prod-east", cel(at_limit + " "))).endswith(
        "CEL expression is 10241 bytes; the API server accepts at most 10240 (10 KiB)")
    wide = prefix + name + "'"
    assert len(wide) < 10240 < len(wide.encode())
    assert only(errors_after("prod-east", cel(wide))).endswith(
        f"CEL expression is {len(wide.encode())} bytes; the API server accepts at most 10240 (10 KiB)")
    messages = [d.message for d in errors_after("prod-east", opaque)]
    assert any("config[0].opaque.parameters: opaque parameters are" in m and "bytes of JSON; the API server accepts at most 10240" in m
               for m in messages), messages


def test_a_deeply_nested_but_valid_selector_validates_without_a_traceback(tmp_path):
    fleet = tmp_path / "fleet"
    shutil.copytree(EXAMPLES, fleet)
    path = fleet / "workloads" / "platform" / "device-classes.yaml"
    deep = "device.attributes['gpu.nvidia.com'].type == 'gpu' && (" + " || ".join(["true"] * 600) + ")"
    path.write_text(path.read_text() + f'    cel: ["{deep}"]\n')
    result = gpuc("validate", fleet)
    assert result.code == 0 and "Traceback" not in result.err and "ok: " in result.out + result.err


def test_too_long_cel_expression_from_the_intent_is_reported_at_its_line(tmp_path):
    fleet = tmp_path / "fleet"
    shutil.copytree(EXAMPLES, fleet)
    path = fleet / "workloads" / "platform" / "device-classes.yaml"
    long_cel = " || ".join(f"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3 variant {i:04d}'" for i in range(130))
    path.write_text(path.read_text() + f'    cel: ["{long_cel}"]\n')
    out = tmp_path / "out"
    result = gpuc("render", fleet, "-o", out)
    assert result.code == 1
    assert ("workloads/platform/device-classes.yaml:11: error: spec.require.cel[0]: DeviceClass hopper-80g.gpuc.dev "
            "spec.selectors[4].cel.expression: CEL expression is ") in result.err
    assert "bytes; the API server accepts at most 10240 (10 KiB)" in result.err
    assert "nothing was written" in result.err
    assert not (out / "prod-east").exists()
