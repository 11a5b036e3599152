"""Release versions: a DRA driver or GPU Operator version that no release gpuc knows has is most often a typo
(25.12.3 for 25.12.0), sometimes a release newer than gpuc's facts. Either way the user should hear it, with
the releases gpuc knows, and can acknowledge the second case (facts: dra_driver.yaml, operators.yaml)."""

from __future__ import annotations

import dataclasses

from ...diagnostics import Findings
from ...facts.platform import gpu_operator
from ..documents import Fleet
from ..resolved import ResolvedCluster

CODE = "unknown-release"
HINT = ("check the version for a typo; if it is a release newer than gpuc knows, say so: "
        "spec.acknowledge: [{warning: unknown-release, reason: ...}]")


def check_releases(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        spec = cluster.spec
        if spec.acknowledged(CODE):
            continue
        driver = spec.dra_driver.version.strip().removeprefix("v")
        line = cluster.driver
        if driver not in line.releases:
            findings.add(dataclasses.replace(cluster.intent.warning(
                ("spec", "draDriver", "version"),
                f"DRA driver {spec.dra_driver.version} is not a {line.versions} release gpuc knows (known: {', '.join(line.releases)})",
                HINT), code=CODE))
        operator = spec.gpu_operator
        known = gpu_operator()["releases"]
        if operator.mode != "none" and operator.version and "v" + operator.version.strip().removeprefix("v") not in known:
            minor = ".".join(("v" + operator.version.strip().removeprefix("v")).split(".")[:2]) + "."
            same = [r for r in known if r.startswith(minor)]
            findings.add(dataclasses.replace(cluster.intent.warning(
                ("spec", "gpuOperator", "version"),
                f"GPU Operator {operator.version} is not a release gpuc knows (known: {', '.join(same or known)})", HINT), code=CODE))
