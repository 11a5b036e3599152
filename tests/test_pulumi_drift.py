"""The backend comparisons catch drift: each check is shown failing on a deliberately broken side.

Some tests edit one side's data; the end-to-end ones break the stack program itself (monkeypatching
the modules package) and show the same checks the stack tests rely on reporting it.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

import modules.cluster

from conftest import EXAMPLES, gpuc
from pulumi_harness import (
    differences,
    registered_objects,
    registered_releases,
    rendered_objects,
    rendered_releases,
    replacement_violations,
    run_stack,
    stack_config,
    wave_violations,
)

CLUSTER = "prod-east"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    assert gpuc("render", EXAMPLES, "-o", out, "--cluster", CLUSTER).code == 0
    return out / CLUSTER


@pytest.fixture(scope="module")
def run():
    return run_stack(CLUSTER, stack_config(CLUSTER))


def test_changed_spec_field_is_reported(tree, run):
    rendered = rendered_objects(tree)
    changed = copy.deepcopy(rendered)
    changed[("NIMService", "nim-service", "llama-70b")]["spec"]["replicas"] = 3
    assert differences(rendered, registered_objects(run)) == []
    assert differences(changed, registered_objects(run)) == [
        "NIMService nim-service/llama-70b: spec.replicas: rendered 3, Pulumi 1"]


def test_changed_label_and_annotation_are_reported(tree, run):
    registered = copy.deepcopy(registered_objects(run))
    meta = registered[("DeviceClass", "", "hopper-80g.gpuc.dev")]["metadata"]
    del meta["labels"]["app.kubernetes.io/managed-by"]
    meta["annotations"]["gpuc.dev/source"] = "elsewhere.yaml#0"
    assert differences(rendered_objects(tree), registered) == [
        "DeviceClass hopper-80g.gpuc.dev: metadata.annotations.gpuc.dev/source: "
        "rendered \"workloads/platform/device-classes.yaml#0\", Pulumi \"elsewhere.yaml#0\"",
        "DeviceClass hopper-80g.gpuc.dev: metadata.labels.app.kubernetes.io/managed-by: rendered \"gpuc\", missing in Pulumi",
    ]


def test_objects_on_one_side_only_are_reported(tree, run):
    rendered = rendered_objects(tree)
    registered = copy.deepcopy(registered_objects(run))
    node = registered.pop(("Node", "", "gpu-a100-0"))
    registered[("Node", "", "gpu-a100-9")] = {**node, "metadata": {**node["metadata"], "name": "gpu-a100-9"}}
    assert differences(rendered, registered) == [
        "Node gpu-a100-0: rendered, not registered by the stack",
        "Node gpu-a100-9: registered by the stack, not rendered",
    ]


def test_type_changes_are_reported_even_when_python_equality_would_hide_them(tree, run):
    registered = copy.deepcopy(registered_objects(run))
    claim = next(k for k in registered if k[0] == "ResourceClaimTemplate" and k[2].startswith("trainer-gpu-"))
    registered[claim]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] = 3  # the number, not the string "3"
    rendered = rendered_objects(tree)
    rendered[("NIMService", "nim-service", "llama-70b")]["spec"]["replicas"] = True  # True == 1 in Python
    assert differences(rendered, registered) == [
        "NIMService nim-service/llama-70b: spec.replicas: rendered true, Pulumi 1",
        f"ResourceClaimTemplate research/{claim[2]}: metadata.annotations.argocd.argoproj.io/sync-wave: "
        "rendered \"3\", Pulumi 3",
    ]


def test_release_values_and_chart_drift_are_reported(tree, run):
    registered = copy.deepcopy(registered_releases(run))
    driver = registered[("HelmRelease", "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")]
    driver["values"]["featureGates"]["MPSSupport"] = False
    driver["version"] = "25.8.1"
    assert differences(rendered_releases(tree), registered) == [
        "HelmRelease nvidia-dra-driver-gpu/nvidia-dra-driver-gpu: values.featureGates.MPSSupport: rendered true, Pulumi false",
        "HelmRelease nvidia-dra-driver-gpu/nvidia-dra-driver-gpu: version: rendered \"25.12.0\", Pulumi \"25.8.1\"",
    ]


def test_a_stack_program_that_rewrites_a_manifest_fails_the_comparison(tree, monkeypatch):
    factory = modules.cluster.object_factory

    def rederive(obj):  # what a second code path would do: build the spec again, slightly differently
        if obj.kind == "DeviceClass":
            obj = dataclasses.replace(obj, manifest={**obj.manifest, "spec": {"selectors": []}})
        return factory(obj)

    monkeypatch.setattr(modules.cluster, "object_factory", rederive)
    diffs = differences(rendered_objects(tree), registered_objects(run_stack(CLUSTER, stack_config(CLUSTER))))
    assert len(diffs) == 1 and diffs[0].startswith("DeviceClass hopper-80g.gpuc.dev: spec.selectors: rendered [{")


def test_a_stack_program_without_wave_dependencies_fails_the_order_check(tree, monkeypatch):
    monkeypatch.setattr(modules.cluster.WaveBarrier, "dependencies", lambda self, wave: [])
    violations = wave_violations(run_stack(CLUSTER, stack_config(CLUSTER)), tree)
    assert "nim-service/llama-70b (wave 5): does not wait for" in "\n".join(violations)
    assert len(violations) == 22  # every object after the charts (wave 0) of prod-east's 22 objects


def test_a_stack_program_without_replacement_options_fails_the_replacement_check(monkeypatch):
    monkeypatch.setattr(modules.cluster, "replacement_options", lambda replacements: {})
    violations = replacement_violations(run_stack(CLUSTER, stack_config(CLUSTER)))
    assert len(violations) == 15  # 6 claims and claim templates, 1 ComputeDomain, 4 NIMServices, 4 NIMCaches
