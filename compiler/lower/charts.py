"""Where each release's chart comes from: its public repository (the facts), or the Cluster's `charts`
(one mirror for all, overridden per release), so clusters and CI without internet access install the same
chart versions from an internal mirror or from charts unpacked in the GitOps repository. Every backend
reads the result from `HelmRelease.chart`: the Argo CD Application's source and the Pulumi Release alike."""

from __future__ import annotations

from dataclasses import replace

from ..validate.intents import Charts, ChartSource
from .graph import HelmRelease


def source_for(release: str, charts: Charts | None) -> ChartSource | None:
    """The source a release takes its chart from, or None for the chart's public repository."""
    if charts is None:
        return None
    return charts.releases.get(release, charts.mirror)


def apply_chart_sources(releases: list[HelmRelease], charts: Charts | None) -> None:
    for release in releases:
        source = source_for(release.name, charts)
        if source is None:
            continue
        if source.repository is not None:
            release.chart = replace(release.chart, repository=source.repository.rstrip("/"), directory="")
        else:
            assert source.directory is not None  # the model requires one of the two
            release.chart = replace(release.chart, repository="", directory=source.directory.rstrip("/"))
