"""Broken YAML and schema mistakes: exit 2, file:line:field in the message, a fix, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compiler.diagnostics import InputError
from compiler.load.yaml_source import MAX_FILE_BYTES, parse_documents

from conftest import NIM_SECRETS, cluster_doc, gpuc, nim_model, workload_doc


def render_rejected(fleet_path: Path, *fragments: str, code: int = 2) -> str:
    out = fleet_path.parent / (fleet_path.name + "-out")
    result = gpuc("render", fleet_path, "-o", out)
    assert result.code == code, result.err + result.out
    for fragment in fragments:
        assert fragment in result.err, f"{fragment!r} not in:\n{result.err}"
    assert "Traceback" not in result.err
    assert not out.exists(), "a rejected render must not write anything"
    return result.err


def test_line_numbers_point_at_each_key():
    doc = parse_documents("a: 1\nb:\n  c:\n    - x\n    - y: 2\n", "f.yaml")[0]
    assert doc.line_of(("b", "c", 1, "y")) == 5
    assert doc.line_of(("b", "c", 0)) == 4
    assert doc.line_of(("b", "missing", "deeper")) == 2  # nearest existing ancestor


def test_unknown_field_suggests_the_right_one(fleet):
    path = fleet(workloads={"w.yaml": [workload_doc(gpu={"sharng": "MPS"})]})
    render_rejected(path, "workloads/w.yaml:8: error: spec.gpu.sharng: unknown field 'sharng'", "did you mean 'sharing'?")


def test_wrong_enum_value_suggests_the_closest(fleet):
    path = fleet(workloads={"w.yaml": [workload_doc(gpu={"sharing": "TimeSlice", "shareGroup": "g"})]})
    render_rejected(path, "spec.gpu.sharing: must be one of", "did you mean 'TimeSlicing'?")


def test_missing_required_field(fleet):
    doc = cluster_doc()
    del doc["spec"]["draDriver"]["version"]
    render_rejected(fleet(clusters=[doc]), "clusters/c1.yaml:", "spec.draDriver.version: required field 'version' is missing")


@pytest.mark.parametrize("value,fragment", [
    ("40GiB", 'did you mean "40Gi"?'),
    ("-1Gi", "must be greater than zero"),
    ("lots", "is not a Kubernetes quantity"),
])
def test_bad_quantities(fleet, value, fragment):
    path = fleet(workloads={"w.yaml": [workload_doc(gpu={"require": {"minMemory": value}})]})
    render_rejected(path, "spec.gpu.require.minMemory", fragment)


def test_unquoted_kubernetes_version_is_explained(fleet):
    doc = cluster_doc()
    text = yaml.safe_dump(doc, sort_keys=False).replace("kubernetesVersion: '1.34'", "kubernetesVersion: 1.30")
    path = fleet()
    (path / "clusters" / "c1.yaml").write_text(text)
    render_rejected(path, "spec.kubernetesVersion", "YAML reads 1.30 as the number 1.3")


def test_bad_gpu_count(fleet):
    path = fleet(workloads={"w.yaml": [workload_doc(gpu={"count": "many"})]})
    render_rejected(path, "spec.gpu.count: must be 'auto' or a whole number of GPUs from 1 to 32")


def test_bad_model_size(fleet):
    path = fleet(workloads={"w.yaml": [workload_doc(model=nim_model("huge"), secrets=NIM_SECRETS)]})
    render_rejected(path, "spec.model.parameters", "is not a model size")


def test_dns_names_are_checked(fleet):
    path = fleet(workloads={"w.yaml": [workload_doc(name="Llama_8B")]})
    render_rejected(path, "metadata.name: 'Llama_8B' is not a valid DNS label", "e.g. 'llama-8b'")


def test_tabs_are_explained(fleet):
    path = fleet(workloads={"w.yaml": "apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata:\n\tname: x\n"})
    render_rejected(path, "workloads/w.yaml:4:", "indentation must use spaces, not tabs")


def test_duplicate_keys_are_refused(fleet):
    text = "apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: a}\nspec:\n  replicas: 1\n  replicas: 2\n"
    render_rejected(fleet(workloads={"w.yaml": text}), "workloads/w.yaml:6:", "duplicate key 'replicas' (first at line 5)")


def test_empty_file(fleet):
    render_rejected(fleet(workloads={"w.yaml": "# nothing here\n"}), "workloads/w.yaml:1:", "file holds no YAML document")


def test_document_that_is_a_list(fleet):
    render_rejected(fleet(workloads={"w.yaml": "- apiVersion: gpuc.dev/v1alpha1\n  kind: GpuWorkload\n"}),
                    "document is a list", "remove a leading '- '")


def test_non_utf8_bytes(fleet):
    path = fleet()
    (path / "workloads" / "w.yaml").write_bytes(b"apiVersion: gpuc.dev/v1alpha1\nkind: \xff\n")
    render_rejected(path, "workloads/w.yaml:2:", "not UTF-8")


def test_alias_bomb_is_bounded():
    layers = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        layers.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(InputError, match="anchors and aliases"):
        parse_documents("\n".join(layers) + "\n", "bomb.yaml")


def test_oversized_file(fleet):
    path = fleet()
    (path / "workloads" / "big.yaml").write_bytes(b"# " + b"x" * (MAX_FILE_BYTES + 10) + b"\n")
    render_rejected(path, "workloads/big.yaml", "gpuc reads intent files up to")


def test_wrong_api_version_and_kind(fleet):
    doc = workload_doc()
    doc["apiVersion"] = "gpuc.dev/v1"
    render_rejected(fleet(workloads={"w.yaml": [doc]}), "apiVersion must be 'gpuc.dev/v1alpha1'")
    doc = workload_doc()
    doc["kind"] = "GpuWorkLoad"
    render_rejected(fleet(workloads={"w.yaml": [doc]}), "kind 'GpuWorkLoad' is not allowed", "did you mean 'GpuWorkload'?")


def test_cluster_document_in_workloads_dir(fleet):
    render_rejected(fleet(workloads={"c.yaml": [cluster_doc("c2")]}), "Cluster documents belong in clusters/")


def test_all_errors_are_reported_in_one_run(fleet):
    path = fleet(workloads={"a.yaml": [workload_doc("a", gpu={"sharng": "MPS"})],
                            "b.yaml": [workload_doc("b", replicas="two")]})
    err = render_rejected(path)
    assert "a.yaml" in err and "b.yaml" in err


def test_fleet_without_clusters(tmp_path):
    (tmp_path / "f" / "workloads").mkdir(parents=True)
    render_rejected(tmp_path / "f", "fleet has no clusters/*.yaml")


def test_missing_fleet_directory(tmp_path):
    render_rejected(tmp_path / "nope", "fleet directory does not exist")


def test_yaml_gpuc_would_not_read_is_named(fleet, monkeypatch):
    """A typo in a folder name must not make workloads vanish from the render (Argo CD would prune them)."""
    path = fleet(workloads={"w.yaml": [workload_doc()]})
    monkeypatch.chdir(path)
    (path / "workload").mkdir()
    (path / "workload" / "new.yaml").write_text("kind: GpuWorkload\n")
    (path / "extra.yaml").write_text("kind: GpuWorkload\n")
    (path / "clusters" / "old").mkdir()
    (path / "clusters" / "old" / "c9.yaml").write_text("kind: Cluster\n")
    (path / "crds").mkdir()
    (path / "crds" / "x.yaml").write_text("kind: CustomResourceDefinition\n")  # a spec.crds folder: not a typo
    (path / "clusters" / "crds").mkdir()  # nor CRDs kept under clusters/ for spec.crds
    (path / "clusters" / "crds" / "nim.yaml").write_text("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n")
    (path / "users").mkdir()  # merely alike, not a typo
    (path / "users" / "u.yaml").write_text("a: 1\n")
    (path / ".pre-commit-config.yaml").write_text("repos: []\n")
    (path / "cluster").symlink_to("/usr")  # never walked: a pull request must not make gpuc list the CI machine
    result = gpuc("validate", path)
    assert result.code == 0, result.err
    assert "workload/: warning: (directory): not read: gpuc reads clusters/ and workloads/\n    hint: did you mean 'workloads'? Rename the folder" in result.err
    assert "extra.yaml: warning: (file): not read: intents live in clusters/ and workloads/" in result.err
    assert "clusters/old/c9.yaml: warning: (file): not read: Cluster files sit directly in clusters/" in result.err
    assert "crds/" not in result.err and "users/" not in result.err and "pre-commit" not in result.err
    assert "cluster/" not in result.err


def test_symlinks_out_of_the_fleet_are_refused(fleet, tmp_path):
    outside = tmp_path / "outside.yaml"
    outside.write_text(yaml.safe_dump(workload_doc("w9")))
    path = fleet(workloads={"w.yaml": [workload_doc()]})
    (path / "workloads" / "linked.yaml").symlink_to(outside)
    result = gpuc("render", path, "-o", tmp_path / "out")
    assert result.code == 2
    assert "workloads/linked.yaml: error: (file): is a symbolic link to a file outside the fleet directory" in result.err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("field, value, message, hint", [
    ("nodes", True, "spec.nodePools[0].nodes: input should be a valid integer, got True", "write a number: YAML read this value as a boolean"),
    ("nodes", "2", "spec.nodePools[0].nodes: input should be a valid integer, got '2'", "write the number without quotes"),
    ("name", True, "spec.nodePools[0].name: expected a DNS label string, got true", "quote the name"),
    ("driverVersion", 550.90, "spec.nodePools[0].driverVersion: a version must be quoted: YAML reads 550.9 as a number", "e.g. \"550.90\""),
])
def test_yaml_coercions_are_mistakes_with_a_fix(fleet, field, value, message, hint):
    """`nodes: true` (1) or `replicas: "2"` would be silently coerced by a lax model; `name: on` is YAML 1.1's true."""
    pool = {"name": "h100", "nodes": 2, "gpu": {"model": "H100-80GB", "count": 8}, field: value}
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=[pool])]))
    assert result.code == 2 and message in result.err and hint in result.err, result.err
