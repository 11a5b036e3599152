"""Rules of managed Kubernetes providers and pool labels: a DRA pool on a provider whose own device plugin
is turned off by a node label must carry that label, and a pool's labels must not take gpuc's own keys."""

from __future__ import annotations

from ...diagnostics import Findings, one_of
from ...facts.platform import gpu_operator
from ...facts.providers import providers
from ..documents import Fleet
from ..resolved import ResolvedCluster

GPUC_LABELS = ("draNodeLabel", "devicePluginDeployLabel", "migConfigLabel")  # facts/data/operators.yaml keys


def check_providers(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    owned = {gpu_operator()[key] for key in GPUC_LABELS}
    for cluster in clusters.values():
        intent = cluster.intent
        for pool in cluster.pools:
            for key in sorted(owned & set(pool.spec.labels)):
                findings.add(intent.error(pool.path + ("labels", key), f"'{key}' is a label gpuc sets itself from the pool's "
                                          "allocation and MIG layout", "drop it from labels"))
        provider = providers().get(cluster.provider or "")
        if provider is None or not provider.dra_node_labels:
            continue
        how = " (recognised from the nodes' labels in --state)" if cluster.provider_detected else ""
        for pool in cluster.dra_pools:
            missing = [(k, v) for k, v in provider.dra_node_labels if pool.spec.labels.get(k) != v]
            if not missing:
                continue
            wanted = ", ".join(f'{k}: "{v}"' for k, v in missing)
            where = pool.path + ("labels",) if pool.spec.labels else pool.path
            findings.add(intent.warning(where, f"DRA pool '{pool.name}' on {provider.name}{how} lacks the node label(s) "
                                        f"{one_of(k for k, _ in missing)}: without them the provider runs its own NVIDIA device "
                                        f"plugin beside the DRA driver, and two pods get one GPU ({provider.docs})",
                                        f"add `labels: {{{wanted}}}` to the pool, and create the provider's node pool with them"))
