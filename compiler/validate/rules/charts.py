"""Chart sources (Cluster spec.charts): a per-release source must name a release the cluster installs."""

from __future__ import annotations

from ...diagnostics import Findings, did_you_mean
from ...facts.platform import gpu_operator, nim_operator
from ..documents import Fleet
from ..resolved import ResolvedCluster


def cluster_releases(cluster: ResolvedCluster) -> list[str]:
    """The Helm releases gpuc installs on the cluster, by release name (as the rendered values/ files name them)."""
    spec = cluster.spec
    names = []
    if spec.gpu_operator.mode != "gpuCluster":  # there the GPU Operator installs the DRA driver
        names.append(cluster.driver.chart_name)
    if spec.gpu_operator.mode in ("helm", "gpuCluster"):
        names.append(gpu_operator()["releaseName"])
    if spec.nim_operator is not None:
        names.append(nim_operator()["releaseName"])
    return sorted(names)


def check_chart_sources(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        charts = cluster.spec.charts
        if charts is None:
            continue
        releases = cluster_releases(cluster)
        for name in charts.releases:
            if name not in releases:
                hint = did_you_mean(name, releases) or f"name one of: {', '.join(releases) or '(none: this cluster installs no chart)'}"
                findings.add(cluster.intent.error(("spec", "charts", "releases", name),
                                                  f"'{name}' is not a release of cluster '{cluster.name}' "
                                                  f"(it installs {', '.join(releases) or 'no chart'})", hint))
