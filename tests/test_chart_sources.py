"""Charts without the internet: a Cluster's `charts` (one mirror, per-release sources) reaches the Argo CD
Applications and the Pulumi Releases alike; a stack can leave the charts to another tool."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
import yaml

from compiler.lower.graph import HelmRelease
from modules.helm import ChartNotFound, chart_args

from conftest import cluster_doc, compile_single, gpuc
from pulumi_harness import run_stack, stack_config

OCI_MIRROR = "oci://harbor.internal/helm"


def applications(fleet_path: Path, out: Path) -> dict[str, dict]:
    result = gpuc("render", fleet_path, "-o", out)
    assert result.code == 0, result.err
    return {f.stem: yaml.safe_load(f.read_text()) for f in (out / "c1" / "argocd").glob("c1-*.yaml") if f.stem != "c1-gpuc"}


def chart_source(app: dict) -> dict:
    return app["spec"]["sources"][0]


def test_without_charts_the_public_repositories_stay(fleet, tmp_path):
    apps = applications(fleet([cluster_doc()]), tmp_path / "out")
    assert chart_source(apps["c1-nvidia-dra-driver-gpu"])["repoURL"] == "https://helm.ngc.nvidia.com/nvidia"


def test_one_mirror_serves_every_chart_at_its_pinned_version(fleet, tmp_path):
    apps = applications(fleet([cluster_doc(charts={"mirror": {"repository": OCI_MIRROR + "/"}})]), tmp_path / "out")
    assert set(apps) == {"c1-nvidia-dra-driver-gpu", "c1-gpu-operator", "c1-nim-operator"}
    for app in apps.values():
        source = chart_source(app)
        assert source["repoURL"] == "harbor.internal/helm"  # Argo CD names OCI repositories without the scheme
    assert chart_source(apps["c1-gpu-operator"])["chart"] == "gpu-operator"
    assert chart_source(apps["c1-gpu-operator"])["targetRevision"] == "v25.10.1"


def test_a_release_source_overrides_the_mirror_and_a_directory_is_a_git_path(fleet, tmp_path):
    charts = {"mirror": {"repository": OCI_MIRROR}, "releases": {"nvidia-dra-driver-gpu": {"directory": "vendor/charts/"}}}
    out = tmp_path / "out"
    apps = applications(fleet([cluster_doc(charts=charts)]), out)
    driver = chart_source(apps["c1-nvidia-dra-driver-gpu"])
    assert driver == {"repoURL": "https://git.example.com/fleet.git", "targetRevision": "main",
                      "path": "vendor/charts/nvidia-dra-driver-gpu-25.12.0",
                      "helm": {"releaseName": "nvidia-dra-driver-gpu",
                               "valueFiles": ["$values/rendered/c1/values/nvidia-dra-driver-gpu.yaml"]}}
    assert chart_source(apps["c1-nim-operator"])["repoURL"] == "harbor.internal/helm"
    header = (out / "c1" / "values" / "nvidia-dra-driver-gpu.yaml").read_text().splitlines()[2]
    assert header == "# chart nvidia-dra-driver-gpu 25.12.0 from vendor/charts/nvidia-dra-driver-gpu-25.12.0"


@pytest.mark.parametrize(("charts", "line", "message"), [
    ({"mirror": {"repository": OCI_MIRROR, "directory": "charts"}}, "spec.charts.mirror",
     "give exactly one of repository (oci:// or https:// mirror) and directory"),
    ({"mirror": {}}, "spec.charts.mirror", "give exactly one of repository"),
    ({"mirror": {"directory": "/srv/charts"}}, "spec.charts.mirror", "directory '/srv/charts' must be relative"),
    ({"mirror": {"directory": "charts/../../x"}}, "spec.charts.mirror", "must be relative to the GitOps repository's root"),
    ({"mirror": {"repository": "harbor.internal/helm"}}, "spec.charts.mirror.repository", "should match pattern"),
    ({"releases": {"gpu-operater": {"directory": "charts"}}}, "spec.charts.releases.gpu-operater",
     "'gpu-operater' is not a release of cluster 'c1' (it installs gpu-operator, nim-operator, nvidia-dra-driver-gpu)"),
])
def test_bad_chart_sources_name_file_line_and_field(fleet, tmp_path, charts, line, message):
    result = gpuc("render", fleet([cluster_doc(charts=charts)]), "-o", tmp_path / "out")
    assert result.code == 2  # input errors
    assert "clusters/c1.yaml:" in result.err and f"error: {line}" in result.err
    assert message in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "out").exists()


def test_a_misspelt_release_gets_a_suggestion(fleet, tmp_path):
    result = gpuc("render", fleet([cluster_doc(charts={"releases": {"gpu-operater": {"directory": "c"}}})]), "-o", tmp_path / "o")
    assert "did you mean 'gpu-operator'?" in result.err


# --- Pulumi ---------------------------------------------------------------------------------------

def _driver_release(fleet_path: Path) -> HelmRelease:
    compiled = compile_single(fleet_path)
    return next(r for r in compiled.releases if r.component == "dra-driver")


def _chart_dir(root: Path, name: str, version: str) -> Path:
    folder = root / "charts" / f"{name}-{version}"
    folder.mkdir(parents=True)
    (folder / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    return folder


def test_pulumi_takes_a_directory_chart_from_the_project_root(fleet, tmp_path):
    release = _driver_release(fleet([cluster_doc(charts={"mirror": {"directory": "charts"}})]))
    folder = _chart_dir(tmp_path, "nvidia-dra-driver-gpu", "25.12.0")
    assert chart_args(release, tmp_path) == {"chart": str(folder)}


def test_pulumi_refuses_a_missing_chart_folder_or_another_version(fleet, tmp_path):
    release = _driver_release(fleet([cluster_doc(charts={"mirror": {"directory": "charts"}})]))
    with pytest.raises(ChartNotFound, match="nvidia-dra-driver-gpu-25.12.0 has no Chart.yaml; unpack the chart there"):
        chart_args(release, tmp_path)
    folder = _chart_dir(tmp_path, "nvidia-dra-driver-gpu", "25.12.0")
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: nvidia-dra-driver-gpu\nversion: 25.8.1\n")
    with pytest.raises(ChartNotFound, match="is version 25.8.1, the cluster pins 25.12.0"):
        chart_args(release, tmp_path)


def test_a_stack_registers_releases_from_the_mirror(fleet):
    path = fleet([cluster_doc(charts={"mirror": {"repository": OCI_MIRROR}})])
    run = run_stack("c1", {"gpuc:fleet": str(path)})
    charts = sorted(r.inputs["chart"] for r in run.releases())
    assert charts == [f"{OCI_MIRROR}/gpu-operator", f"{OCI_MIRROR}/k8s-nim-operator", f"{OCI_MIRROR}/nvidia-dra-driver-gpu"]


def test_a_stack_stops_when_a_directory_chart_is_missing(fleet):
    path = fleet([cluster_doc(charts={"releases": {"nim-operator": {"directory": "no-such-charts"}}})])
    with pytest.raises(pulumi.RunError, match="gpuc: stack 'c1': release nim-operator: chart folder .*no-such-charts/"):
        run_stack("c1", {"gpuc:fleet": str(path)})


def test_a_stack_leaves_the_charts_to_another_tool(fleet):
    path = fleet([cluster_doc()])
    with_charts = run_stack("c1", {"gpuc:fleet": str(path)})
    without = run_stack("c1", {"gpuc:fleet": str(path), "gpuc:charts": "external"})
    assert len(with_charts.releases()) == 3
    assert without.releases() == []
    assert [r.inputs for r in without.kubernetes_objects()] == [r.inputs for r in with_charts.kubernetes_objects()]


def test_gpuc_charts_takes_only_install_or_external():
    with pytest.raises(pulumi.RunError, match="gpuc:charts is 'skip'; set it to install .* or external"):
        run_stack("lab", stack_config("lab") | {"gpuc:charts": "skip"})


def test_the_example_stacks_install_their_charts_by_default():
    assert all(run_stack(c, stack_config(c)).releases() for c in ("lab", "prod-east"))
