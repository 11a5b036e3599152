"""Rules of a cluster's team budgets: one budget per namespace, only DeviceClasses the cluster has, and a namespace
some workload of the fleet runs in.

A quota key for a class nothing defines is accepted by the API server and limits nothing: the budget a
reviewer reads would not be the one enforced (a typo of mig.nvidia.com leaves MIG slices unlimited). A budget on a
namespace no workload uses is most often a misspelt namespace, which leaves the team it meant unlimited; a team whose
own pods claim there (extended resources, claims attached by hand) acknowledges it.
"""

from __future__ import annotations

import dataclasses

from ...diagnostics import Findings, did_you_mean, one_of
from ...facts.driver import builtin_classes
from ..documents import Fleet, target_clusters
from ..resolved import ResolvedCluster


def cluster_class_names(cluster: ResolvedCluster, fleet: Fleet) -> set[str]:
    """DeviceClasses a budget of `cluster` may name: the driver chart's, the fleet's GpuDeviceClasses on it, and the
    NIC classes of its pools (another driver's chart creates those)."""
    names = set(builtin_classes(cluster.driver))
    names |= {c.model.metadata.name for c in fleet.classes.values() if cluster.name in target_clusters(c.model, fleet)}
    names |= {p.spec.nics.device_class for p in cluster.pools if p.spec.nics is not None}
    return names


def check_budgets(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        budgets = cluster.spec.budgets
        if not budgets:
            continue
        known = cluster_class_names(cluster, fleet)
        seen: dict[str, int] = {}
        for i, budget in enumerate(budgets):
            where = ("spec", "budgets", i)
            if budget.namespace in seen:
                findings.add(cluster.intent.error(where + ("namespace",), f"namespace '{budget.namespace}' has a budget already "
                                                  f"(spec.budgets[{seen[budget.namespace]}])", "merge the two into one budget"))
            seen.setdefault(budget.namespace, i)
            _check_used(cluster, fleet, budget.namespace, where, findings)
            for name in budget.devices:
                if name not in known:
                    findings.add(cluster.intent.error(
                        where + ("devices", name), f"no DeviceClass '{name}' on cluster '{cluster.name}': a quota on it would limit nothing",
                        did_you_mean(name, known) or f"DeviceClasses of this cluster: {one_of(sorted(known))}"))


UNUSED = "unused-budget"


def _check_used(cluster: ResolvedCluster, fleet: Fleet, namespace: str, where: tuple, findings: Findings) -> None:
    used = sorted({w.model.metadata.namespace for w in fleet.workloads_on(cluster.name)})
    if namespace in used or namespace in fleet.incomplete or "*" in fleet.incomplete \
            or cluster.spec.acknowledged(UNUSED, namespace=namespace):
        return
    close = did_you_mean(namespace, used)
    fix = (f"{close} Fix the namespace; if" if close else "If") + f" the team's own pods claim GPUs in '{namespace}' (extended " \
        f"resources, claims attached by hand), say so: spec.acknowledge: [{{warning: {UNUSED}, namespaces: [{namespace}], reason: ...}}]"
    findings.add(dataclasses.replace(cluster.intent.warning(
        where + ("namespace",), f"no workload of this fleet runs in namespace '{namespace}' on cluster '{cluster.name}'"
        + (f" (namespaces with workloads here: {one_of(used)})" if used else ""), fix), code=UNUSED))
