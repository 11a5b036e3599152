"""Bad stack input ends as one clean `pulumi.RunError` naming file, line and field: never a traceback."""

from __future__ import annotations

import ast

import pulumi
import pytest

import modules.cluster
from compiler.load.yaml_source import SourceDoc
from compiler.lower.graph import KubeObject, Replacement, Wave
from modules.components import GpuWorkload, UnknownComponent, component_for
from modules.kinds import UnsupportedObject, object_factory
from modules.ordering import WaveBarrier, replacement_options

from conftest import REPO, cluster_doc, workload_doc
from pulumi_harness import Registered, run_stack, stack_config


def _error(stack: str, config: dict[str, str]) -> str:
    with pytest.raises(pulumi.RunError) as info:
        run_stack(stack, config)
    return str(info.value)


def test_stack_without_a_cluster_of_its_name():
    message = _error("prod-west", stack_config("prod-east"))
    assert message == (f"gpuc: stack 'prod-west' deploys the cluster of that name, but fleet {REPO / 'intents'} has no "
                       "cluster 'prod-west' (clusters: lab, prod-east, staging, west); select one with `pulumi stack select <cluster>`")


def test_fleet_with_an_input_error_names_file_line_and_field(fleet):
    bad = cluster_doc("c1")
    bad["spec"]["draDriver"]["versoin"] = bad["spec"]["draDriver"].pop("version")
    message = _error("c1", {"gpuc:fleet": str(fleet([bad]))})
    assert "has input errors" in message
    assert "clusters/c1.yaml:9: error: spec.draDriver.versoin: unknown field 'versoin'" in message
    assert "did you mean 'version'?" in message


def test_infeasible_fleet_says_so(fleet):
    workload = workload_doc("w1", "team", gpu={"count": 1, "require": {"productName": "NVIDIA B200"}})
    message = _error("c1", {"gpuc:fleet": str(fleet([cluster_doc("c1")], {"w.yaml": [workload]}))})
    assert "cannot be placed" in message
    assert "workloads/w.yaml:" in message and "spec.gpu: no node pool of cluster 'c1' can serve this workload" in message


def test_missing_fleet_directory(tmp_path):
    message = _error("c1", {"gpuc:fleet": str(tmp_path / "nowhere")})
    assert "fleet directory does not exist" in message


def test_missing_fleet_config():
    message = _error("prod-east", {})
    assert "gpuc:fleet" in message and "pulumi config set" in message


def test_fleet_path_is_relative_to_the_project_root(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # Pulumi may run the program from another directory
    run = run_stack("lab", {"gpuc:fleet": "intents"})
    assert run.kubernetes_objects()


def test_an_object_the_sdk_cannot_express_fails_before_anything_is_registered(monkeypatch):
    factory = modules.cluster.object_factory

    def unsupported(obj):
        if obj.kind == "NIMService":  # the last wave: everything before it would otherwise be applied
            raise UnsupportedObject("pulumi-kubernetes 4.0.0 has no NIMService")
        return factory(obj)

    monkeypatch.setattr(modules.cluster, "object_factory", unsupported)
    registered: list[Registered] = []
    with pytest.raises(pulumi.RunError) as info:
        run_stack("prod-east", stack_config("prod-east"), partial=registered)
    assert str(info.value) == "gpuc: stack 'prod-east': pulumi-kubernetes 4.0.0 has no NIMService"
    assert [r.type for r in registered] == ["pulumi:providers:kubernetes"]


def _object(manifest: dict, patch: bool = False) -> KubeObject:
    return KubeObject(manifest, Wave.CLAIMS, "workload/ns/w", SourceDoc("w.yaml", 0, {}), (), patch)


def test_unknown_api_version_is_unsupported():
    obj = _object({"apiVersion": "resource.k8s.io/v9", "kind": "DeviceClass", "metadata": {"name": "x"}, "spec": {}})
    with pytest.raises(UnsupportedObject, match=r"no DeviceClass for resource.k8s.io/v9; install a release that has it"):
        object_factory(obj)


def test_unknown_field_of_a_builtin_kind_is_unsupported():
    obj = _object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dataa": {}})
    with pytest.raises(UnsupportedObject, match="field 'dataa' has no ConfigMapArgs argument"):
        object_factory(obj)


def test_custom_kind_with_fields_beyond_spec_is_unsupported():
    obj = _object({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMCache", "metadata": {"name": "x"}, "status": {}})
    with pytest.raises(UnsupportedObject, match="status cannot be passed to apiextensions.CustomResource"):
        object_factory(obj)


def test_component_mapping():
    assert component_for("workload/research/trainer") == (GpuWorkload, "research/trainer")
    with pytest.raises(UnknownComponent, match="'gitops'"):
        component_for("gitops")
    with pytest.raises(UnknownComponent):
        component_for("workload/")


def test_wave_barrier_refuses_out_of_order_registration():
    barrier = WaveBarrier()
    barrier.add(Wave.CLAIMS, object())  # type: ignore[arg-type]
    assert barrier.dependencies(Wave.CLAIMS) == [] and len(barrier.dependencies(Wave.NIM_CACHE)) == 1
    with pytest.raises(ValueError, match="wave CHARTS added after wave CLAIMS"):
        barrier.add(Wave.CHARTS, object())  # type: ignore[arg-type]


def test_replacement_options_from_declared_replacements():
    keep = Replacement("spec", "new name", delete_first=False)
    recreate = Replacement("spec.draResources", "same name", delete_first=True)
    assert replacement_options(()) == {}
    assert replacement_options((keep,)) == {"replace_on_changes": ["spec"]}
    assert replacement_options((keep, recreate)) == {"replace_on_changes": ["spec", "spec.draResources"],
                                                     "delete_before_replace": True}


def test_modules_read_only_the_compiled_graph():
    """No second code path: modules/ may use the pipeline's entry point and graph, never a lowering stage."""
    allowed = {"compiler.pipeline", "compiler.lower.graph", "compiler.diagnostics"}
    for path in sorted((REPO / "modules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("compiler"):
                assert node.module in allowed, f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("compiler") and a.name not in allowed for a in node.names), path.name
