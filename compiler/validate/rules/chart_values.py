"""The DRA driver chart values a user writes: real keys of that chart version, nested, of the right type,
and not switching off what the workloads need."""

from __future__ import annotations

from typing import Any

from ...diagnostics import Findings, did_you_mean
from ...facts.driver import chart_keys, driver_lines
from ..documents import Fleet
from ..features import cluster_features
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster


def check_chart_values(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        _check_chart_values(cluster, findings)
        _check_derived_values(cluster, [w.model for w in fleet.workloads_on(cluster.name)], findings)


# Values gpuc derives that the user's `values` must not turn off while the workloads depend on them:
# (dotted key, the feature that needs it, why it must stay on).
_DERIVED_VALUES = (
    ("gpuResourcesEnabledOverride", "gpu_resources",
     "the chart refuses resources.gpus.enabled without this acknowledgement (templates/validation.yaml)"),
    ("resources.gpus.enabled", "gpu_resources", "node pools of this cluster are allocated through DRA"),
    ("resources.computeDomains.enabled", "compute_domains", "multi-node workloads on this cluster need ComputeDomains"),
)


def _check_derived_values(cluster: ResolvedCluster, workloads: list[GpuWorkload], findings: Findings) -> None:
    features = cluster_features(cluster, workloads)
    for dotted, feature, why in _DERIVED_VALUES:
        value: Any = cluster.spec.dra_driver.values
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is False and getattr(features, feature):
            findings.add(cluster.intent.error(("spec", "draDriver", "values", *dotted.split(".")),
                                              f"{dotted} is set false, but {why}",
                                              "remove it from draDriver.values: gpuc sets it to true"))

def _check_chart_values(cluster: ResolvedCluster, findings: Findings) -> None:
    keys = chart_keys(cluster.driver)
    intermediate = {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 1)}
    base = ("spec", "draDriver", "values")

    def walk(value: Any, prefix: str, path: tuple) -> None:
        for key, child in value.items():
            full = f"{prefix}.{key}" if prefix else key
            here = path + (key,)
            if "." in key:
                findings.add(cluster.intent.error(here, f"'{key}' is a dotted key; Helm values are nested maps (dots are `--set` syntax)",
                                                  "write it nested:\n" + _nested(key, child)))
                continue
            if child is None and (full in keys or full in intermediate):
                continue  # Helm's way to drop a chart default (`controller.affinity: null`)
            if full in keys:
                kind = keys[full].kind
                if kind == "leaf" and isinstance(child, (dict, list)):
                    findings.add(cluster.intent.error(here, f"chart value {full} is a single value, not a {type(child).__name__}"))
                elif kind == "list" and not isinstance(child, list):
                    findings.add(cluster.intent.error(here, f"chart value {full} is a list"))
                elif kind == "map" and not isinstance(child, dict):
                    findings.add(cluster.intent.error(here, f"chart value {full} is a map"))
                elif kind == "leaf" and child in ("true", "false"):
                    findings.add(cluster.intent.error(here, f"'{child}' is a string; Helm treats any non-empty string as true",
                                                      f"write the boolean without quotes: {key}: {child}"))
            elif full in intermediate:
                if not isinstance(child, dict):
                    findings.add(cluster.intent.error(here, f"chart value {full} is a map of settings, not a single value"))
                else:
                    walk(child, full, here)
            else:
                siblings = sorted({k[len(prefix) + 1:].split(".")[0] if prefix else k.split(".")[0]
                                   for k in list(keys) + list(intermediate) if not prefix or k.startswith(prefix + ".")})
                in_later = [l.id for l in driver_lines().values() if l.order > cluster.driver.order and full in chart_keys(l)]
                hint = did_you_mean(key, siblings)
                if in_later:
                    hint = f"{full} arrives with driver {in_later[0]}"
                findings.add(cluster.intent.error(here, f"'{full}' is not a value of chart {cluster.driver.chart_name} {cluster.spec.dra_driver.version}",
                                                  hint or f"keys here: {', '.join(siblings)}"))

    walk(cluster.spec.dra_driver.values, "", base)


def _nested(dotted: str, value: Any) -> str:
    lines = []
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        lines.append("  " * depth + part + ":" + ("" if depth < len(parts) - 1 else f" {_yaml_scalar(value)}"))
    return "\n".join(lines)


def _yaml_scalar(value: Any) -> str:
    if value in ("true", "false"):
        return value  # the classic: "true" as a string; the nested form wants a real boolean
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)
