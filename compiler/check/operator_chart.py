"""The NVIDIA charts' own refusals, judged on the values gpuc writes for them.

A chart `fail`s a render on some combinations of values (the GPU Operator's templates/validations.yaml, the DRA
driver's templates/validation.yaml and _helpers.tpl); Argo CD then shows a sync error and installs nothing. The
rules are facts (data/operators.yaml and data/dra_driver.yaml `chartFails`), evaluated over the emitted values with
the chart's defaults filling what gpuc does not write; tests/real/test_real_charts.py renders each rule through the
real chart with the real Helm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..diagnostics import Diagnostic
from ..facts import load_table
from ..facts.driver import DriverLine
from ..facts.platform import gpu_operator, version_tuple
from .model import ClusterContext, value_at

_MISSING = object()


def _holds(expected: Any, actual: Any) -> bool:
    if expected == "empty":  # Helm's `empty`: nil, false, 0, "" and empty collections
        return not actual
    if expected == "nonEmpty":
        return bool(actual)
    if isinstance(expected, dict) and "notIn" in expected:
        return actual not in expected["notIn"]
    return bool(actual == expected)


def _failures(values: dict[str, Any], table: dict[str, Any], applies: Callable[[dict[str, Any]], bool]) -> list[str]:
    out = []
    for rule in table["rules"]:
        if not applies(rule):
            continue

        def actual(dotted: str) -> Any:
            found = value_at(values, tuple(dotted.split(".")), _MISSING)
            return table["defaults"].get(dotted) if found is _MISSING else found
        if all(_holds(want, actual(dotted)) for dotted, want in rule["when"].items()):
            out.append(rule["message"])
    return out


def chart_failures(values: dict[str, Any], version: str | None) -> list[str]:
    """The messages the GPU Operator chart at `version` fails with on `values` (no version: the newest rules apply)."""
    facts = gpu_operator()["chartFails"]
    if version is not None and version_tuple(version) < version_tuple(facts["since"]):
        return []
    return _failures(values, facts, lambda rule: True)


def driver_chart_failures(values: dict[str, Any], line: DriverLine) -> list[str]:
    """The messages the DRA driver chart of `line` fails with on `values` (each rule has the lines that carry it)."""
    table = load_table("dra_driver")["chartFails"]
    return _failures(values, table, lambda rule: line.at_least(str(rule["since"])))


def check_operator_chart(ctx: ClusterContext) -> Iterable[Diagnostic]:
    cluster = ctx.cluster
    op = cluster.spec.gpu_operator
    name = gpu_operator()["releaseName"]
    for release in ctx.compiled.releases:
        if release.name == name:
            for message in chart_failures(release.values, op.version):
                yield cluster.intent.error(("spec", "gpuOperator"),
                                           f"the GPU Operator chart {op.version} refuses the values gpuc writes for it: {message}",
                                           "this is a gpuc bug; report it with the cluster intent (the chart would fail in Argo CD)")
        elif release.component == "dra-driver":
            for message in driver_chart_failures(release.values, cluster.driver):
                yield cluster.intent.error(("spec", "draDriver", "values"),
                                           f"the DRA driver chart {release.chart.version} refuses these values: {message}",
                                           "change draDriver.values as the chart's message says (Argo CD would show this "
                                           "as a sync error and install nothing)")
