"""Where the tests against real components find the upstream CRDs a cluster needs (../shared/reference)."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import REFERENCE

# The CRD directory of each DRA driver release gpuc targets, in ../shared/reference (0.5 from the release line's branch).
DRIVER_CRDS = {"25.3": "v25.3.2", "25.8": "v25.8.1", "25.12": "v25.12.0", "0.4": "v0.4.1", "0.5": "main-0.5.0-dev"}


def crds_of(fleet: Path, name: str) -> list[Path]:
    """The CRDs of the operators a cluster runs, at the releases it runs."""
    cluster = yaml.safe_load((fleet / "clusters" / f"{name}.yaml").read_text())
    line = ".".join(cluster["spec"]["draDriver"]["version"].split(".")[:2])
    return [REFERENCE / "nvidia-dra-driver-gpu" / DRIVER_CRDS[line] / "crds", REFERENCE / "nim-operator",
            REFERENCE / "gpu-operator" / "nvidia.com_clusterpolicies.yaml", REFERENCE / "gpu-operator" / "nvidia.com_gpuclusters.yaml"]


def chart_values() -> dict[str, dict]:
    """Kind -> the values of the chart that creates the objects of that kind gpuc patches: the GPU Operator's
    ClusterPolicy (values of v26.7.0, the release the example fleet's GPU Operator clusters run)."""
    return {"ClusterPolicy": yaml.safe_load((REFERENCE / "gpu-operator" / "values-v26.7.0.yaml").read_text())}
