"""Stage 2c: rules that span fields and documents (DESIGN.md sections 3-4), one module per subject.

Each rule adds findings that point at the line a user must change, and says how to change it. Rules
only add findings: nothing here changes what a cluster compiles to, and nothing raises, so one run
reports every mistake. A new rule joins by appending itself to RULES (like check.run.CHECKERS).
"""

from __future__ import annotations

from collections.abc import Callable

from ...diagnostics import Findings
from ..documents import Fleet
from ..resolved import ResolvedCluster
from .budgets import check_budgets
from .cel_versions import check_cel_versions
from .chart_values import check_chart_values
from .charts import check_chart_sources
from .classes import check_classes
from .dra_features import check_dra_features
from .driver_chart import check_driver_chart
from .gates import check_gates
from .operators import check_operator_modes
from .passthrough import check_passthrough
from .providers import check_providers
from .releases import check_releases
from .share_groups import check_share_groups
from .shared_nodes import check_shared_nodes
from .workloads import check_workloads

Rule = Callable[[Fleet, dict[str, ResolvedCluster], Findings], None]

RULES: list[Rule] = [check_classes, check_workloads, check_dra_features, check_share_groups, check_gates, check_chart_values,
                     check_operator_modes, check_providers,
                     check_passthrough, check_shared_nodes, check_driver_chart, check_releases, check_cel_versions,
                     check_chart_sources, check_budgets]


def check_intents(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    """Every rule over the validated fleet and its resolved clusters."""
    for rule in RULES:
        start = len(findings)
        rule(fleet, clusters, findings)
        findings.tag_since(start, "rules/" + rule.__name__.removeprefix("check_").replace("_", "-"))
