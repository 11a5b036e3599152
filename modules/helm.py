"""One compiled HelmRelease -> a `helm.v3.Release`, the Pulumi twin of the Argo CD chart Application.

`helm.v3.Release` is used rather than `helm.v4.Chart` because it installs a real Helm release (hooks,
release history, `helm list`), the same thing Argo CD's Helm source and the operators' docs assume.
The release name is fixed to the compiled one: Pulumi's default would append a random suffix, and
the name is part of the chart's object names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from compiler.lower.graph import HelmRelease


class ChartNotFound(Exception):
    """A chart the Cluster's `charts.directory` points at is not there, or is another version."""


def local_chart(release: HelmRelease, root: Path) -> Path:
    """The unpacked chart of a directory source, checked to be the version the release pins (Helm itself
    installs whatever version a local chart folder holds)."""
    chart = release.chart
    folder = root / chart.path
    meta = folder / "Chart.yaml"
    unpack = (f"helm pull <repository>/{chart.name} --version {chart.version} --untar --untardir /tmp/c && "
              f"mv /tmp/c/{chart.name} {chart.path}")
    if not meta.is_file():
        raise ChartNotFound(f"release {release.name}: chart folder {folder} has no Chart.yaml; unpack the chart there ({unpack})")
    found = str((yaml.safe_load(meta.read_text()) or {}).get("version", ""))
    if found.lstrip("v") != chart.version.lstrip("v"):
        raise ChartNotFound(f"release {release.name}: {meta} is version {found or '(none)'}, the cluster pins {chart.version}; "
                            f"unpack {chart.version} there ({unpack})")
    return folder


def chart_args(release: HelmRelease, root: Path) -> dict[str, Any]:
    """Chart location: an https repository goes to repository_opts; an OCI chart is its full oci:// URL; a
    chart unpacked in the repository (Cluster spec.charts directory) is its folder under `root`."""
    chart = release.chart
    if chart.path:
        return {"chart": str(local_chart(release, root))}
    if chart.is_oci:
        return {"chart": f"{chart.repository.rstrip('/')}/{chart.name}", "version": chart.version}
    return {"chart": chart.name, "version": chart.version, "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository)}


def release_resource_name(release: HelmRelease) -> str:
    return f"{release.namespace}/{release.name}"


def release_options(release: HelmRelease) -> dict[str, Any]:
    """The DRA driver's release under another line's chart name (25.x `nvidia-dra-driver-gpu`, 0.4+ `dra-driver-nvidia-gpu`)
    is the same release to Pulumi, replaced by deleting the old one first: Pulumi creates a resource of a new name
    before it deletes the old one, which would run two kubelet plugins on every GPU node during the update."""
    if not release.formerly:
        return {}
    return {"aliases": [pulumi.Alias(name=release_resource_name(dataclasses.replace(release, name=n))) for n in release.formerly],
            "replace_on_changes": ["name"], "delete_before_replace": True}


def release_factory(release: HelmRelease, root: Path) -> Callable[[pulumi.ResourceOptions], k8s.helm.v3.Release]:
    """How to register the release with exactly the compiled chart, version, namespace and values; `root` is
    where chart folders of a directory source are (the project root). Raises ChartNotFound up front."""
    args = chart_args(release, root)
    return lambda opts: k8s.helm.v3.Release(
        release_resource_name(release),
        name=release.name,
        namespace=release.namespace,
        create_namespace=release.create_namespace,
        values=release.values,
        opts=opts,
        **args,
    )
