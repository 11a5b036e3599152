"""One charts folder serves Argo CD, Pulumi and gpuc's checks: the CRDs of unpacked Helm charts (their crds/
folders, subcharts' included) are read by --crds and spec.crds; a chart's templates are Go templates and skipped."""

from __future__ import annotations

from pathlib import Path

import yaml

from compiler.check.crds import read_crd_dir

from conftest import EXAMPLES, REFERENCE, gpuc, writable_copy

CHARTS = REFERENCE.parent / "upstream" / "charts"  # ../shared/upstream/charts: the real charts, unpacked


def test_a_folder_of_unpacked_charts_is_a_crd_source():
    """The whole upstream collection (every release of every chart): each cluster gets the CRDs of the releases it
    pins, chosen by the `<chart>-<version>/` folder names `helm pull` + `mv` give."""
    for cluster in ("prod-east", "lab", "west"):
        result = gpuc("validate", EXAMPLES, "--cluster", cluster, "--crds", CHARTS)
        assert result.code == 0, result.err
        assert "unchecked" not in result.err and "Helm template" not in result.err, result.err


def test_a_cluster_that_names_no_version_is_told_to():
    """staging patches a ClusterPolicy another team installs and names no GPU Operator version: of eleven
    ClusterPolicy CRDs, gpuc cannot know which the cluster has, and says how to tell it."""
    result = gpuc("validate", EXAMPLES, "--cluster", "staging", "--crds", CHARTS)
    assert result.code == 2
    assert "different CRDs define ClusterPolicy.nvidia.com" in result.err
    assert "give the cluster the operator's version (spec.gpuOperator.version" in result.err


def test_only_crds_folders_are_read_inside_a_chart(tmp_path: Path):
    chart = tmp_path / "charts" / "gpu-operator-v26.7.0"
    writable_copy(CHARTS / "gpu-operator-v26.7.0", chart)
    crds = read_crd_dir(tmp_path / "charts", "charts")
    files = {Path(c.file).relative_to("charts").as_posix().split("/crds/")[0] for c in crds}
    assert files == {"gpu-operator-v26.7.0", "gpu-operator-v26.7.0/charts/node-feature-discovery"}
    kinds = {c.kind for c in crds}
    assert {"ClusterPolicy", "NVIDIADriver", "GPUCluster", "NodeFeatureRule"} <= kinds
    # A template mentioning a CRD is a Go template, never parsed as YAML (it would not parse)
    (chart / "templates" / "crd-upgrade.yaml").write_text(
        "{{- if .Values.x }}\nkind: CustomResourceDefinition\nmetadata: {name: {{ .Values.y }}}\n{{- end }}\n")
    assert len(read_crd_dir(tmp_path / "charts", "charts")) == len(crds)
    # Outside any chart, a plain YAML file still counts
    (tmp_path / "charts" / "extra.yaml").write_text(yaml.safe_dump(_crd("Extra")))
    assert len(read_crd_dir(tmp_path / "charts", "charts")) == len(crds) + 1


def _crd(kind: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.lower()}s.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": f"{kind.lower()}s"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
