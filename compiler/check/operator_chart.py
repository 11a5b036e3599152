"""The GPU Operator chart's own refusals, judged on the values gpuc writes for it.

The chart `fail`s a render on some combinations of values (templates/validations.yaml); Argo CD then shows a
sync error and installs nothing. The rules are facts (data/operators.yaml `chartFails`), evaluated over the
emitted values with the chart's defaults filling what gpuc does not write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..diagnostics import Diagnostic
from ..facts.platform import gpu_operator, version_tuple
from .model import ClusterContext, value_at

_MISSING = object()


def _holds(expected: Any, actual: Any) -> bool:
    if expected == "empty":  # Helm's `empty`: nil, false, 0, "" and empty collections
        return not actual
    return bool(actual == expected)


def chart_failures(values: dict[str, Any], version: str | None) -> list[str]:
    """The messages the chart at `version` fails with on `values` (no version: the newest rules apply)."""
    facts = gpu_operator()["chartFails"]
    if version is not None and version_tuple(version) < version_tuple(facts["since"]):
        return []
    out = []
    for rule in facts["rules"]:
        def actual(dotted: str) -> Any:
            found = value_at(values, tuple(dotted.split(".")), _MISSING)
            return facts["defaults"].get(dotted) if found is _MISSING else found
        if all(_holds(want, actual(dotted)) for dotted, want in rule["when"].items()):
            out.append(rule["message"])
    return out


def check_operator_chart(ctx: ClusterContext) -> Iterable[Diagnostic]:
    cluster = ctx.cluster
    op = cluster.spec.gpu_operator
    name = gpu_operator()["releaseName"]
    for release in ctx.compiled.releases:
        if release.name != name:
            continue
        for message in chart_failures(release.values, op.version):
            yield cluster.intent.error(("spec", "gpuOperator"),
                                       f"the GPU Operator chart {op.version} refuses the values gpuc writes for it: {message}",
                                       "this is a gpuc bug; report it with the cluster intent (the chart would fail in Argo CD)")
