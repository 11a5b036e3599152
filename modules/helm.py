"""One compiled HelmRelease -> a `helm.v3.Release`, the Pulumi twin of the Argo CD chart Application.

`helm.v3.Release` is used rather than `helm.v4.Chart` because it installs a real Helm release (hooks,
release history, `helm list`), the same thing Argo CD's Helm source and the operators' docs assume.
The release name is fixed to the compiled one: Pulumi's default would append a random suffix, and
the name is part of the chart's object names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from compiler.lower.graph import HelmRelease


def chart_args(release: HelmRelease) -> dict[str, Any]:
    """Chart location: an https repository goes to repository_opts; an OCI chart is its full oci:// URL."""
    chart = release.chart
    if chart.is_oci:
        return {"chart": f"{chart.repository.rstrip('/')}/{chart.name}"}
    return {"chart": chart.name, "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository)}


def release_resource_name(release: HelmRelease) -> str:
    return f"{release.namespace}/{release.name}"


def release_factory(release: HelmRelease) -> Callable[[pulumi.ResourceOptions], k8s.helm.v3.Release]:
    """How to register the release with exactly the compiled chart, version, namespace and values."""
    return lambda opts: k8s.helm.v3.Release(
        release_resource_name(release),
        name=release.name,
        namespace=release.namespace,
        create_namespace=release.create_namespace,
        version=release.chart.version,
        values=release.values,
        opts=opts,
        **chart_args(release),
    )
