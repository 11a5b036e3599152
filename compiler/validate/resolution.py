"""Stage 2b: each Cluster intent resolved against the facts it names (API version, driver line, GPU
catalog, MIG layouts), with the cluster's own rules. A resolved cluster is all that compiling it needs;
the rules that span workloads and clusters are in validate.rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..diagnostics import Findings, did_you_mean, one_of
from ..facts import VersionError, catalog
from ..facts.catalog import GpuModel
from ..facts.driver import DriverLine, capability, dynamic_mig, gates, gates_on, parse_driver_version
from ..facts.mig import fit_mix
from ..facts.platform import dra_gate_note, dra_gates, gpu_operator, parse_kubernetes_version, version_tuple
from .documents import Fleet, Intent
from .intents import Cluster, ClusterSpec, NodePool
from .resolved import ResolvedCluster, ResolvedPool


def resolve_clusters(fleet: Fleet, findings: Findings, extra_models: dict[str, GpuModel] | None = None,
                     detected: dict[str, str | None] | None = None) -> dict[str, ResolvedCluster]:
    """The clusters' own rules, and each valid cluster resolved: all that compiling a cluster needs.
    `extra_models`: GPUs outside the catalog that a running cluster's slices describe; `detected`: cluster ->
    the managed Kubernetes provider its state's nodes say it runs on (validate.state_models)."""
    clusters: dict[str, ResolvedCluster] = {}
    for name, intent in fleet.clusters.items():
        _check_paths(intent, fleet, findings)
        resolved = resolve_cluster(intent, findings, extra_models or {})
        found = (detected or {}).get(name)
        if resolved is not None and intent.model.spec.provider is None and found is not None:
            resolved = dataclasses.replace(resolved, provider=found, provider_detected=True)
        if resolved is not None:
            clusters[name] = resolved
    return clusters


def inside_fleet(fleet: Fleet, raw: str) -> bool:
    """Paths written in intents stay inside the fleet: a fleet from a pull request must not make gpuc
    read arbitrary files of the machine it runs on (CI runners hold credentials)."""
    path = Path(raw)
    if path.is_absolute():
        return False
    root = fleet.root.resolve()
    return (root / path).resolve().is_relative_to(root)


def _check_paths(intent: Intent[Cluster], fleet: Fleet, findings: Findings) -> None:
    crds = intent.model.spec.crds
    if crds is None:
        return
    if not inside_fleet(fleet, crds):
        findings.add(intent.error(("spec", "crds"), f"'{crds}' is outside the fleet directory",
                                  "use a path relative to the fleet (e.g. crds/prod-east), or pass --crds DIR on the command line"))
    elif not (fleet.root / crds).is_dir():
        findings.add(intent.error(("spec", "crds"), f"directory '{crds}' does not exist in the fleet",
                                  "create it with the CRD YAMLs of the operators this cluster runs, or drop spec.crds"))

# What placement holds in memory is about 1 KiB per synthesized device (20,000 8-GPU nodes: 250 MiB in all):
# this many keep a render under about 600 MiB, and cover a 65,000-node cluster of 8 GPUs each.
MAX_DEVICES = 524_288


def resolve_cluster(intent: Intent[Cluster], findings: Findings, extra_models: dict[str, GpuModel] | None = None) -> ResolvedCluster | None:
    spec = intent.model.spec
    ok = True
    try:
        api = parse_kubernetes_version(spec.kubernetes_version)
    except VersionError as exc:
        findings.add(intent.error(("spec", "kubernetesVersion"), str(exc), exc.hint))
        ok = False
    try:
        line = parse_driver_version(spec.dra_driver.version)
    except VersionError as exc:
        findings.add(intent.error(("spec", "draDriver", "version"), str(exc), exc.hint))
        ok = False
    if spec.dra_driver.namespace == "default":
        findings.add(intent.error(("spec", "draDriver", "namespace"), "the DRA driver chart refuses to install into 'default'",
                                  "use a namespace of its own, e.g. nvidia-dra-driver-gpu"))
    if spec.gpu_operator.mode == "helm" and not spec.gpu_operator.version:
        findings.add(intent.error(("spec", "gpuOperator"), "gpuOperator.mode 'helm' needs gpuOperator.version (the chart version to install)",
                                  "add e.g. `version: v25.10.1`, or use mode 'patch' when the operator is installed elsewhere"))
    if spec.gitops and not (bool(spec.gitops.destination.name) ^ bool(spec.gitops.destination.server)):
        findings.add(intent.error(("spec", "gitops", "destination"), "set exactly one of destination.name and destination.server",
                                  "name is the cluster's name in Argo CD; server is its API URL"))
    pools = []
    names: dict[str, int] = {}
    node_names: dict[str, NodePool] = {}
    for index, pool in enumerate(spec.node_pools):
        path = ("spec", "nodePools", index)
        if pool.name in names:
            findings.add(intent.error(path + ("name",), f"duplicate node pool '{pool.name}'", "pool names must be unique in a cluster"))
        names[pool.name] = index
        for n in pool.node_names or []:
            other = node_names.get(n)
            if other is not None and set(other.node_names or []) != set(pool.node_names or []):
                findings.add(intent.error(path + ("nodeNames",), f"node '{n}' is also listed in pool '{other.name}'",
                                          "pools on the same nodes (one per GPU model of a node) list the same nodeNames"))
            node_names.setdefault(n, pool)
        if pool.node_names is not None and len(pool.node_names) != pool.nodes:
            findings.add(intent.error(path + ("nodeNames",), f"lists {len(pool.node_names)} names for {pool.nodes} nodes",
                                      "list one name per node, or drop nodeNames"))
        resolved = _resolve_pool(intent, pool, index, line if ok else None, api if ok else None, findings, extra_models or {})
        if resolved is None:
            ok = False
        else:
            pools.append(resolved)
    if spec.dra_driver.fabric == "partitionAttributes" and ok and not line.at_least(capability("partitionAttributes")["since"]):
        findings.add(intent.error(("spec", "draDriver", "fabric"),
                                  f"fabric 'partitionAttributes' needs driver 0.5 or newer (gate FabricManagerPartitioning); "
                                  f"driver {spec.dra_driver.version} does not publish partition<N> attributes",
                                  "upgrade draDriver.version to 0.5.1, or use fabric none: on NVSwitch nodes (H100, H200, B200 HGX) "
                                  "any GPUs of a node are NVLink-connected, and gpuc asks for that many GPUs of one node"))
    if spec.dra_driver.fabric == "topologyConfig" and ok and not spec.acknowledged("driver-fork"):
        build = gates()["FabricTopologySupport"].build
        warning = intent.warning(("spec", "draDriver", "fabric"),
                                 f"fabric 'topologyConfig' (GpuConfig.fabricTopologyConfig, gate FabricTopologySupport) exists only in the "
                                 f"driver fork {build}; upstream releases reject the field",
                                 "run a driver image built from that branch, or use 'partitionAttributes' on driver 0.5+; if the "
                                 "cluster runs the fork, say so: spec.acknowledge: [{warning: driver-fork, reason: ...}]")
        findings.add(dataclasses.replace(warning, code="driver-fork"))
    dynamic = ok and dynamic_mig_gate(spec, line, pools)
    if dynamic:
        pools = [_partitioned(p, line) for p in pools]
    devices = sum(p.devices for p in pools)
    if devices > MAX_DEVICES:
        largest = max(pools, key=lambda p: p.devices)
        findings.add(intent.error(largest.path + ("nodes",),
                                  f"the cluster's pools publish {devices:,} devices; gpuc plans up to {MAX_DEVICES:,} per cluster "
                                  f"(pool '{largest.name}': {largest.spec.nodes:,} nodes, {largest.devices:,} devices)",
                                  "check the pools' node counts (a digit too many?): the largest managed Kubernetes clusters run "
                                  "about 65,000 nodes"))
        ok = False
    if not ok:
        return None
    step = spec.transition
    if step is not None:
        _check_transition(intent, step, {p.name for p in spec.node_pools}, findings)
    return ResolvedCluster(intent, api, line, tuple(pools), provider=spec.provider, dynamic_mig=dynamic,
                           driver_installed=not (step and step.dra_driver and not step.dra_driver.installed),
                           operator_resource=not (step and step.gpu_operator))


def _check_transition(intent: Intent[Cluster], step, pools: set[str], findings: Findings) -> None:
    """A step names pools the cluster has and holds back only what the cluster deploys."""
    for name in step.node_pools:
        if name not in pools:
            findings.add(intent.error(("spec", "transition", "nodePools", name), f"no node pool '{name}' in this cluster",
                                      did_you_mean(name, pools) or f"pools: {', '.join(sorted(pools))}"))
    operator = intent.model.spec.gpu_operator
    since = gpu_operator()["clusterPolicyDeployCRSince"]
    if step.gpu_operator and operator.mode == "helm" and operator.version and version_tuple(operator.version) < version_tuple(since):
        findings.add(intent.error(("spec", "transition", "gpuOperator"),
                                  f"the GPU Operator chart {operator.version} always deploys its ClusterPolicy (clusterPolicy.deployCR "
                                  f"arrived in {since}), so a step cannot hold it back", f"set gpuOperator.version to {since} or newer"))
    if step.gpu_operator and intent.model.spec.gpu_operator.mode not in ("helm", "gpuCluster"):
        findings.add(intent.error(("spec", "transition", "gpuOperator"),
                                  f"gpuOperator.mode {intent.model.spec.gpu_operator.mode} deploys no GPU Operator chart whose "
                                  "custom resource a step could hold back", "remove spec.transition.gpuOperator"))


def dynamic_mig_gate(spec: ClusterSpec, line: DriverLine, pools: list[ResolvedPool]) -> bool:
    """Whether the driver runs with gate DynamicMIG: draDriver.values say so, or a DRA pool asks for dynamic MIG (gpuc
    derives the gate then). One gate for the whole driver: every kubelet plugin of the cluster runs with it."""
    gate = capability("DynamicMIG")["gate"]
    if gate not in gates_on(line):
        return False
    user = spec.dra_driver.values.get("featureGates")
    value = user.get(gate) if isinstance(user, dict) else None
    if isinstance(value, bool):
        return value
    return any(p.mig_dynamic and p.dra for p in pools)


def _partitioned(pool: ResolvedPool, line: DriverLine) -> ResolvedPool:
    """A DRA pool as the driver publishes it with DynamicMIG on (facts dynamicMig): MIG-capable GPUs of lines that
    partition every GPU, or of architectures that toggle MIG mode themselves, or in MIG mode when the plugin starts
    (a pool that asks for dynamic MIG has it on; another is left off by the MIG Manager's all-disabled)."""
    if not pool.dra or pool.gpu.mig is None or pool.mig_layout is not None:
        return pool  # static MIG beside the gate is refused (rules.operators), GPUs without MIG are left alone (or refused)
    partitions, full = dynamic_mig().partitions(line, pool.gpu.architecture, mig_mode_on=pool.mig_dynamic)
    return dataclasses.replace(pool, dynamic_partitions=partitions, dynamic_full_gpu=full)


def _resolve_pool(intent, pool, index, line, api, findings, extra_models: dict[str, GpuModel]) -> ResolvedPool | None:
    path = ("spec", "nodePools", index)
    models = {**catalog.gpu_models(), **extra_models}
    if pool.gpu.model not in models:
        findings.add(intent.error(path + ("gpu", "model"), f"unknown GPU model '{pool.gpu.model}'",
                                  did_you_mean(pool.gpu.model, models) or
                                  f"catalog models: {', '.join(catalog.gpu_models())} (`gpuc catalog`); for a GPU outside the "
                                  "catalog, pass the cluster's ResourceSlices with --state (Pulumi: stack config gpuc:state) and name the "
                                  "model by the productName they publish"))
        return None
    gpu = models[pool.gpu.model]
    if pool.nvlink:
        for size in pool.nvlink.partitions:
            if size > pool.gpu.count:
                findings.add(intent.error(path + ("nvlink", "partitions"),
                                          f"partition size {size} is larger than the pool's {pool.gpu.count} GPUs per node"))
        if not gpu.nvlink_within_node:
            findings.add(intent.error(path + ("nvlink",), f"{gpu.key} GPUs have no NVSwitch: there is no NVLink fabric to partition",
                                      "remove nvlink from this pool"))
        elif intent.model.spec.dra_driver.fabric == "none":
            findings.add(intent.warning(path + ("nvlink",),
                                        "nvlink.partitions are the Fabric Manager partitions of the pool's NVSwitch fabric, which "
                                        "only draDriver.fabric partitionAttributes or topologyConfig use; with fabric none any GPUs "
                                        "of a node are NVLink-connected already",
                                        "remove nvlink from this pool, or set draDriver.fabric"))
    layout, dynamic, config = None, False, None
    if pool.mig is not None:
        mig_path = path + ("mig", "layout")
        if gpu.mig is None:
            findings.add(intent.error(path + ("mig",), f"{gpu.key} does not support MIG", "remove mig from this pool"))
            return None
        raw = pool.mig.layout
        if raw == "dynamic":
            dynamic = True
            if line is not None and not line.at_least(capability("DynamicMIG")["since"]):
                findings.add(intent.error(mig_path, f"dynamic MIG needs driver 25.12 or newer (gate DynamicMIG); this cluster runs {line.versions}"))
            note = dra_gate_note("DRAPartitionableDevices", api.minor) if api is not None else ""
            if note and api is not None:
                missing = dra_gates()["DRAPartitionableDevices"].stage(api.minor) is None
                findings.add(intent.error(mig_path, f"dynamic MIG needs partitionable devices: {note}") if missing else
                             intent.warning(mig_path, f"dynamic MIG needs partitionable devices: {note}"))
            if pool.allocation != "dra":
                findings.add(intent.error(mig_path, "dynamic MIG is a DRA driver feature; the pool is allocated by the device plugin"))
        elif isinstance(raw, str):
            named = gpu.named_layouts()
            if raw not in named:
                findings.add(intent.error(mig_path, f"'{raw}' is not a mig-parted config for {gpu.key}",
                                          did_you_mean(raw, named) or f"use one of {one_of(sorted(named))}, `dynamic`, or a list of profiles"))
                return None
            layout, config = tuple(sorted(named[raw].items())), raw
        else:
            mix: dict[str, int] = {}
            for i, s in enumerate(raw):
                if s.profile not in gpu.mig.profiles:
                    findings.add(intent.error(mig_path + (i, "profile"), f"{gpu.key} has no MIG profile '{s.profile}'",
                                              did_you_mean(s.profile, gpu.mig.profiles) or f"profiles of {gpu.key}: {', '.join(gpu.mig.profiles)}"))
                    return None
                if s.profile in mix:
                    findings.add(intent.error(mig_path + (i, "profile"), f"profile '{s.profile}' is listed twice", "list each profile once with its count"))
                mix[s.profile] = mix.get(s.profile, 0) + s.count
            fit = fit_mix(gpu.mig, mix)
            if not fit.fits:
                findings.add(intent.error(mig_path, f"this MIG layout does not fit one {gpu.key}: {fit.reason}",
                                          f"a GPU has {gpu.mig.compute_slices} compute and {gpu.mig.memory_slices} memory slices; "
                                          f"'all-balanced' on this model is {_mix_text(gpu.mig.balanced)}"))
                return None
            # the mix of a named layout is that layout: the same mig-parted config and node label, so writing
            # it out (or back) does not repartition the GPUs
            same = sorted(name for name, named_mix in gpu.named_layouts().items() if dict(named_mix) == mix)
            layout, config = tuple(sorted(mix.items())), same[0] if same else f"gpuc-{pool.name}"
    held = intent.model.spec.transition.node_pools.get(pool.name) if intent.model.spec.transition else None
    return ResolvedPool(pool, index, gpu, layout, dynamic, config, allocation=held.allocation if held else pool.allocation)


def _mix_text(mix: dict[str, int]) -> str:
    return " + ".join(f"{c}x {p}" for p, c in sorted(mix.items()))
