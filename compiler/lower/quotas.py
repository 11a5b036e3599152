"""ResourceQuotas that admit the charts' critical pods on providers that restrict the system-*-critical priority
classes to namespaces holding a quota for them (GKE Standard: facts/data/providers.yaml).

The DRA driver's controller and kubelet plugin, and the GPU Operator's operator and operands, run at
system-node-critical. Without a matching quota in their namespace the API server refuses those pods, and the
DaemonSets stay at zero pods with only a FailedCreate event to say why. Each quota is synced with the release
whose pods it admits (KubeObject.release): Argo CD's kind order applies a ResourceQuota before the chart's
workloads within a wave (gitops-engine pkg/sync/sync_tasks.go kindOrder), after CreateNamespace made the namespace.
"""

from __future__ import annotations

import dataclasses

from ..facts.platform import device_quota
from ..facts.providers import critical_pods_quota, providers
from ..validate.resolved import ResolvedCluster
from .budget_limits import CLAIMS, cluster_budget_limits
from .graph import HelmRelease, KubeObject, Wave
from .meta import make_object

BUDGET_QUOTA = "gpuc-gpu-budget"  # the ResourceQuota of a team's budget, one per budgeted namespace
# releases whose pods run at a system-*-critical priority class (chart values priorityClassName)
CRITICAL_COMPONENTS = ("dra-driver", "gpu-operator")


def critical_pod_quotas(cluster: ResolvedCluster, releases: list[HelmRelease]) -> list[KubeObject]:
    provider = providers().get(cluster.provider or "")
    if provider is None or not provider.critical_pods_quota:
        return []
    quota = critical_pods_quota()
    source = ("spec.provider",)
    out: list[KubeObject] = []
    for release in sorted(releases, key=lambda r: r.namespace):
        if release.component not in CRITICAL_COMPONENTS or any(o.namespace == release.namespace for o in out):
            continue
        spec = {"hard": {"pods": quota.pods},
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                        "values": list(quota.priority_classes)}]}}
        obj = make_object("v1", "ResourceQuota", quota.name, namespace=release.namespace, wave=Wave.CHARTS,
                          component=release.component, origin=cluster.intent.source, body={"spec": spec},
                          sources={"": source})
        out.append(dataclasses.replace(obj, release=release.name))
    return out


def budget_quotas(cluster: ResolvedCluster, objects: list[KubeObject]) -> list[KubeObject]:
    """Each team budget as the ResourceQuota the API server's quota admission enforces on the namespace's claims: every
    class that selects devices of a type the budget caps is in it, those the budget does not list at 0 (budget_limits).
    `objects`: the cluster's compiled objects so far, its DeviceClasses among them."""
    keys = device_quota()
    out: list[KubeObject] = []
    for i, (budget, limits) in enumerate(cluster_budget_limits(cluster, objects)):
        hard = {keys.claims_key if limit.key == CLAIMS else keys.devices(limit.key): str(limit.limit) for limit in limits}
        where = f"spec.budgets[{i}]"
        sources = {"": (where,), "spec.hard": (f"{where}.devices", where)}
        out.append(make_object("v1", "ResourceQuota", BUDGET_QUOTA, namespace=budget.namespace, wave=Wave.NODE_CONFIG,
                               component="budgets", origin=cluster.intent.source, body={"spec": {"hard": dict(sorted(hard.items()))}},
                               sources=sources))
    return out
