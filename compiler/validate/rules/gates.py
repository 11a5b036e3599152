"""The DRA driver's feature gates: what the workloads need, what the user set, what the driver refuses."""

from __future__ import annotations

from ...diagnostics import Findings, did_you_mean
from ...facts.driver import capability, capability_gates, dynamic_mig, exclusive_gates, gate_requirements, gates, gates_on, logging_gates
from ...facts.platform import dra_gate_note, dra_gates
from ..documents import Fleet
from ..features import cluster_features, derived_gates
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster


def check_gates(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cluster in clusters.values():
        _check_gates(cluster, [w.model for w in fleet.workloads_on(cluster.name)], fleet, findings)


def _check_gates(cluster: ResolvedCluster, workloads: list[GpuWorkload], fleet: Fleet, findings: Findings) -> None:
    intent = cluster.intent
    line = cluster.driver
    features = cluster_features(cluster, workloads)
    flavour = cluster.spec.dra_driver.fabric
    derived = derived_gates(line, features, flavour)
    user = cluster.spec.dra_driver.values.get("featureGates")
    gates_path = ("spec", "draDriver", "values", "featureGates")
    for cap in features.capabilities(flavour):
        since = capability(cap).get("since")
        if since and not line.at_least(since):
            why = capability(cap).get("why")
            findings.add(intent.error(("spec", "draDriver", "version"),
                                      f"this cluster uses {cap}, which needs driver {since} or newer" + (f" ({why})" if why else ""),
                                      "upgrade draDriver.version"))
    if not isinstance(user, dict):
        user = {}
    known = gates_on(line)
    for name, value in user.items():
        if name not in known and name not in logging_gates():
            hint = did_you_mean(name, list(known) + logging_gates())
            later = gates().get(name)
            if later:
                hint = f"{name} arrives with driver {later.since}"
            findings.add(intent.error(gates_path + (name,), f"driver {cluster.spec.dra_driver.version} has no feature gate '{name}'",
                                      hint or f"gates of this driver: {', '.join(known)}"))
        elif not isinstance(value, bool):
            findings.add(intent.error(gates_path + (name,), f"feature gate values are true or false, got {value!r}"))
        elif derived.get(name) and value is False:
            if derived_gates(line, cluster_features(cluster, []), flavour).get(name):  # needed by the pools themselves
                pools = [p.name for p in cluster.pools if (p.mig_dynamic and name in capability_gates("DynamicMIG"))
                         or (p.spec.passthrough and name in capability_gates("Passthrough"))]
                needs = "node pools of this cluster need it (" + ", ".join(pools) + ")"
            else:
                users = [w.metadata.name for w in workloads if derived_gates(line, cluster_features(cluster, [w]), flavour).get(name)]
                needs = f"workloads on this cluster need it ({', '.join(users)})"
            findings.add(intent.error(gates_path + (name,), f"{name} is set false, but {needs}",
                                      "remove the override; gpuc turns the gate on when a workload needs it"))
    effective = {n: g.default for n, g in known.items()}
    effective.update(derived)
    effective.update({k: v for k, v in user.items() if isinstance(v, bool)})
    for a, b in exclusive_gates():
        if effective.get(a) and effective.get(b):
            findings.add(intent.error(gates_path if user else ("spec", "draDriver"),
                                      f"the driver refuses feature gates {a} and {b} together",
                                      _gate_origin(a, b, derived)))
    for gate, needed in gate_requirements().items():
        if effective.get(gate) and gate in known and not effective.get(needed, False):
            findings.add(intent.error(gates_path + (needed,), f"feature gate {gate} needs {needed} enabled"))
    if effective.get("DynamicMIG"):
        _check_dynamic_mig_pools(cluster, "DynamicMIG" in user, findings)
    for name, fact in known.items():  # a driver gate whose output the cluster's scheduler must understand
        note = dra_gate_note(fact.kubernetes_gate, cluster.api.minor) if effective.get(name) and fact.kubernetes_gate else ""
        if note:
            missing = dra_gates()[fact.kubernetes_gate].stage(cluster.api.minor) is None
            where = gates_path + (name,) if name in user else ("spec", "draDriver")
            message = f"driver feature gate {name} needs the Kubernetes feature gate {fact.kubernetes_gate}: {note}"
            findings.add(intent.error(where, message, f"turn {name} off, or upgrade Kubernetes") if missing else
                         intent.warning(where, message, "or turn the driver gate off again"))


def _check_dynamic_mig_pools(cluster: ResolvedCluster, user_set: bool, findings: Findings) -> None:
    """Drivers before the fix of issue #1092 run DynamicMIG on every GPU: nodes whose GPUs have no MIG publish
    no ResourceSlice, so their GPUs vanish from DRA as soon as any pool turns the gate on."""
    since = dynamic_mig().skips_gpus_without_mig_since
    if cluster.driver.at_least(since):
        return
    why = ("set in draDriver.values.featureGates" if user_set else
           "on for pools " + ", ".join(p.name for p in cluster.pools if p.mig_dynamic))
    for pool in cluster.dra_pools:
        if pool.gpu.mig is None:
            findings.add(cluster.intent.error(
                pool.path + ("gpu", "model"),
                f"node pool '{pool.name}' has {pool.gpu.key} GPUs, which have no MIG; with the DynamicMIG gate ({why}) driver "
                f"{cluster.spec.dra_driver.version} publishes no GPUs of such nodes (driver issue #1092)",
                f"upgrade draDriver.version to {since} or newer (it skips GPUs without MIG), or set allocation: devicePlugin "
                "on this pool"))


def _gate_origin(a: str, b: str, derived: dict[str, bool]) -> str:
    parts = [f"{g} is {'derived from the workloads' if g in derived else 'set in draDriver.values.featureGates'}" for g in (a, b)]
    return "; ".join(parts) + "; drop one of them"
