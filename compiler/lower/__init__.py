"""Stage 4, lower: a planned cluster -> its compiled object graph (DESIGN.md section 4, items 1-8)."""

from __future__ import annotations

from ..facts.driver import ChartRef
from ..facts.platform import nim_operator
from ..plan import ClusterPlan, WorkloadPlan
from ..validate.documents import RESERVED_NAMESPACES, Fleet, target_clusters
from ..validate.features import cluster_features
from .argocd import lower_argocd
from .charts import apply_chart_sources
from .claims import lower_claims
from .dra_driver import lower_dra_driver
from .extended_resources import extended_resource_classes
from .graph import CompiledCluster, HelmRelease, Wave
from .node_config import DEVICE_PLUGIN_VALUES, device_plugin_values, lower_node_config
from .quotas import budget_quotas, critical_pod_quotas
from .workload_objects import compute_domain, lower_device_class, namespace_object, nim_objects


def lower_cluster(plan: ClusterPlan, fleet: Fleet) -> CompiledCluster:
    cluster = plan.cluster
    compiled = CompiledCluster(cluster, plan)
    plans = list(plan.workloads)
    features = cluster_features(cluster, [p.workload for p in plans])

    driver, compiled.driver_values = lower_dra_driver(cluster, features)
    if driver is not None and cluster.driver_installed:
        compiled.releases.append(driver)
    releases, objects, labels = lower_node_config(cluster, compiled.driver_values)
    compiled.releases.extend(releases)
    compiled.objects.extend(objects)
    compiled.node_labels = labels
    if cluster.spec.gpu_operator.mode == "none" and cluster.dra_pools:
        compiled.advice[DEVICE_PLUGIN_VALUES] = device_plugin_values(cluster)
    if cluster.spec.nim_operator is not None:
        facts = nim_operator()
        op = cluster.spec.nim_operator
        compiled.releases.append(HelmRelease(
            name=facts["releaseName"], namespace=op.namespace,
            chart=ChartRef(facts["chart"]["name"], facts["chart"]["repository"], op.version),
            values={}, wave=Wave.CHARTS, component="nim-operator", origin=cluster.intent.source))

    compiled.objects.extend(critical_pod_quotas(cluster, compiled.releases))
    chart_namespaces = {r.namespace for r in compiled.releases}
    first_in: dict[str, WorkloadPlan] = {}  # namespace -> its alphabetically first workload, the Namespace's source
    for p in sorted(plans, key=lambda p: p.name):
        first_in.setdefault(p.namespace, p)
    admin: dict[str, WorkloadPlan] = {}  # namespace -> its first admin-access workload, the source of its label
    for p in sorted(plans, key=lambda p: p.name):
        if p.workload.spec.gpu.admin_access:
            admin.setdefault(p.namespace, p)
    for namespace in sorted(set(first_in) - RESERVED_NAMESPACES - chart_namespaces):
        origin = admin.get(namespace, first_in[namespace]).intent.source
        compiled.objects.append(namespace_object(cluster, namespace, origin, namespace in admin))
    # a budgeted namespace no workload uses yet still gets its quota: the Namespace must exist for it
    budgeted = {b.namespace for b in cluster.spec.budgets} - set(first_in) - RESERVED_NAMESPACES - chart_namespaces
    compiled.objects.extend(namespace_object(cluster, ns, cluster.intent.source) for ns in sorted(budgeted))

    for cls in fleet.classes.values():
        if cluster.name in target_clusters(cls.model, fleet):
            compiled.objects.append(lower_device_class(cluster, cls))
    compiled.objects.extend(extended_resource_classes(cluster))
    compiled.objects.extend(budget_quotas(cluster, compiled.objects))  # every class that selects what a budget caps

    # a workload whose GPUs come from the device plugin has no GPU claim: only its ComputeDomain channel is DRA's
    claim_objects, refs = lower_claims(cluster, [p for p in plans if not p.device_plugin])
    compiled.objects.extend(claim_objects)
    compiled.claims = refs
    for p in plans:
        cd_name = None
        if p.compute_domain:
            cd, channel = compute_domain(cluster, p)
            compiled.objects.append(cd)
            compiled.channels[f"{p.namespace}/{p.name}"] = channel
            cd_name = cd.name
        if p.workload.spec.model is not None:
            compiled.objects.extend(nim_objects(p, refs.get(f"{p.namespace}/{p.name}"), cd_name))

    compiled.objects.sort(key=lambda o: o.sort_key())
    compiled.releases.sort(key=lambda r: r.name)
    apply_chart_sources(compiled.releases, cluster.spec.charts)
    compiled.gitops = lower_argocd(compiled)
    return compiled
