"""Stage 2b: rules that span fields and documents (DESIGN.md sections 3-4, issue #2).

Each check adds findings that point at the line a user must change, and says how to change it.
Nothing here raises: the caller decides after all rules have run, so one run reports every mistake.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ..diagnostics import Findings, did_you_mean, one_of
from ..facts import catalog
from ..facts.driver import (
    builtin_device_classes, capability, chart_keys, driver_lines, exclusive_gates, gate_requirements,
    gates, gates_on, logging_gates, parse_driver_version,
)
from ..facts.mig import fit_mix, fit_on_model
from ..facts.platform import gpu_operator, nim_operator, parse_kubernetes_version, version_tuple
from .documents import Fleet, Intent, target_clusters
from .features import cluster_features, derived_gates
from .intents import Cluster, GpuDeviceClass, GpuWorkload
from .resolved import ResolvedCluster, ResolvedPool

SHARED = ("Shared", "TimeSlicing", "MPS")


def resolve_clusters(fleet: Fleet, findings: Findings) -> dict[str, ResolvedCluster]:
    """The clusters' own rules, and each valid cluster resolved: all that compiling a cluster needs."""
    clusters: dict[str, ResolvedCluster] = {}
    for name, intent in fleet.clusters.items():
        _check_paths(intent, fleet, findings)
        resolved = resolve_cluster(intent, findings)
        if resolved is not None:
            clusters[name] = resolved
    return clusters


def check_intents(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    """The rules of device classes and workloads, alone and against the clusters they target. They only
    add findings: nothing here changes what a cluster compiles to."""
    for cls in fleet.classes.values():
        _check_class(cls, fleet, findings)
    for workload in fleet.workloads:
        _check_workload(workload, fleet, clusters, findings)
    _check_share_groups(fleet, findings)
    for cluster in clusters.values():
        members = [w.model for w in fleet.workloads_on(cluster.name)]
        _check_gates(cluster, members, fleet, findings)
        _check_chart_values(cluster, findings)
        _check_derived_values(cluster, members, findings)
        _check_operator_mode(cluster, findings)


# ------------------------------------------------------------------------------------------ clusters

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

def _check_operator_mode(cluster: ResolvedCluster, findings: Findings) -> None:
    """With mode none another tool runs the GPU Operator: gpuc's mig-parted ConfigMap and MIG labels do
    nothing until that install's migManager reads the ConfigMap."""
    op = cluster.spec.gpu_operator
    if op.mode == "none" and any(p.mig_layout is not None or p.mig_dynamic for p in cluster.pools):
        name = gpu_operator()["migConfigMapName"]
        findings.add(cluster.intent.warning(("spec", "gpuOperator", "mode"),
                                            f"MIG pools need the GPU Operator's migManager to read gpuc's ConfigMap '{name}' "
                                            f"(namespace {op.namespace}); with mode none gpuc cannot set that",
                                            f"set migManager.config.name={name} in the GPU Operator you run, or use mode patch"))


def resolve_cluster(intent: Intent[Cluster], findings: Findings) -> ResolvedCluster | None:
    spec = intent.model.spec
    ok = True
    try:
        api = parse_kubernetes_version(spec.kubernetes_version)
    except ValueError as exc:
        findings.add(intent.error(("spec", "kubernetesVersion"), str(exc)))
        ok = False
    try:
        line = parse_driver_version(spec.dra_driver.version)
    except ValueError as exc:
        findings.add(intent.error(("spec", "draDriver", "version"), str(exc)))
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
    node_names: dict[str, str] = {}
    for index, pool in enumerate(spec.node_pools):
        path = ("spec", "nodePools", index)
        if pool.name in names:
            findings.add(intent.error(path + ("name",), f"duplicate node pool '{pool.name}'", "pool names must be unique in a cluster"))
        names[pool.name] = index
        for n in pool.node_names or []:
            if n in node_names:
                findings.add(intent.error(path + ("nodeNames",), f"node '{n}' is also listed in pool '{node_names[n]}'"))
            node_names[n] = pool.name
        if pool.node_names is not None and len(pool.node_names) != pool.nodes:
            findings.add(intent.error(path + ("nodeNames",), f"lists {len(pool.node_names)} names for {pool.nodes} nodes",
                                      "list one name per node, or drop nodeNames"))
        resolved = _resolve_pool(intent, pool, index, line if ok else None, api if ok else None, findings)
        if resolved is None:
            ok = False
        else:
            pools.append(resolved)
    if spec.dra_driver.fabric == "partitionAttributes" and ok and not line.at_least(capability("partitionAttributes")["since"]):
        findings.add(intent.error(("spec", "draDriver", "fabric"),
                                  f"fabric 'partitionAttributes' needs driver 0.5 or newer (gate FabricManagerPartitioning); "
                                  f"driver {spec.dra_driver.version} does not publish partition<N> attributes",
                                  "upgrade draDriver.version, or use fabric 'none'"))
    if spec.dra_driver.fabric == "topologyConfig" and ok:
        build = gates()["FabricTopologySupport"].build
        findings.add(intent.warning(("spec", "draDriver", "fabric"),
                                    f"fabric 'topologyConfig' (GpuConfig.fabricTopologyConfig, gate FabricTopologySupport) exists only in the "
                                    f"driver fork {build}; upstream releases reject the field",
                                    "run a driver image built from that branch, or use 'partitionAttributes' on driver 0.5+"))
    if not ok:
        return None
    return ResolvedCluster(intent, api, line, tuple(pools))


def _resolve_pool(intent, pool, index, line, api, findings) -> ResolvedPool | None:
    path = ("spec", "nodePools", index)
    models = catalog.gpu_models()
    if pool.gpu.model not in models:
        findings.add(intent.error(path + ("gpu", "model"), f"unknown GPU model '{pool.gpu.model}'",
                                  did_you_mean(pool.gpu.model, models) or f"catalog models: {', '.join(models)}"))
        return None
    gpu = models[pool.gpu.model]
    if pool.nvlink:
        for size in pool.nvlink.partitions:
            if size > pool.gpu.count:
                findings.add(intent.error(path + ("nvlink", "partitions"),
                                          f"partition size {size} is larger than the pool's {pool.gpu.count} GPUs per node"))
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
            if api is not None and api.minor < 33:
                findings.add(intent.error(mig_path, "dynamic MIG needs partitionable devices (Kubernetes 1.33+, gate DRAPartitionableDevices)"))
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
            layout, config = tuple(sorted(mix.items())), f"gpuc-{pool.name}"
    return ResolvedPool(pool, index, gpu, layout, dynamic, config)


def _mix_text(mix: dict[str, int]) -> str:
    return " + ".join(f"{c}x {p}" for p, c in sorted(mix.items()))


# ----------------------------------------------------------------------------------- device classes

def _check_cluster_refs(intent: Intent, listed: list[str] | None, fleet: Fleet, findings: Findings) -> None:
    for i, name in enumerate(listed or []):
        if name not in fleet.clusters:
            findings.add(intent.error(("spec", "clusters", i), f"unknown cluster '{name}'",
                                      did_you_mean(name, fleet.clusters) or f"clusters of this fleet: {one_of(fleet.clusters)}"))
    twice = sorted({name for name in listed or [] if listed.count(name) > 1})
    if twice:
        findings.add(intent.error(("spec", "clusters"), f"cluster {one_of(twice)} is listed twice", "list each cluster once"))


def _check_class(cls: Intent[GpuDeviceClass], fleet: Fleet, findings: Findings) -> None:
    name = cls.model.metadata.name
    _check_cluster_refs(cls, cls.model.spec.clusters, fleet, findings)
    if name in builtin_device_classes():
        findings.add(cls.error(("metadata", "name"), f"'{name}' is a DeviceClass the DRA driver chart creates",
                               "pick a name of your own, e.g. 'high-memory.example.com'"))
    _check_require(cls, ("spec", "require"), cls.model.spec.require, findings)
    if cls.model.spec.mig:
        profiles = {p.name for m in catalog.gpu_models().values() if m.mig for p in m.mig.profiles.values()}
        for i, s in enumerate(cls.model.spec.mig.slices):
            if s.profile not in profiles:
                findings.add(cls.error(("spec", "mig", "slices", i, "profile"), f"no catalog GPU has MIG profile '{s.profile}'",
                                       did_you_mean(s.profile, profiles)))


def _check_require(intent: Intent, path: tuple, require, findings: Findings) -> None:
    if require is None:
        return
    known = catalog.architectures()
    for i, arch in enumerate(require.architecture or []):
        if arch not in known:
            findings.add(intent.error(path + ("architecture", i), f"unknown architecture '{arch}'",
                                      did_you_mean(arch, known) or f"architectures the driver reports: {one_of(known)}"))
    products = sorted({m.product_name for m in catalog.gpu_models().values()}) if require.product_name else []
    if require.product_name and require.product_name not in products:
        findings.add(intent.warning(path + ("productName",), f"no catalog GPU reports productName '{require.product_name}'",
                                    did_you_mean(require.product_name, products) or "product names are matched exactly as NVML reports them"))
    for i, expr in enumerate(require.cel):
        if not expr.strip():
            findings.add(intent.error(path + ("cel", i), "empty CEL expression"))


# ---------------------------------------------------------------------------------------- workloads

def _check_workload(w: Intent[GpuWorkload], fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    spec = w.model.spec
    gpu = spec.gpu
    _check_cluster_refs(w, spec.clusters, fleet, findings)
    if gpu.class_ is not None and gpu.class_ not in fleet.classes:
        hint = ("that is the driver's built-in class, which gpuc uses by default; remove `class`"
                if gpu.class_ in builtin_device_classes() else did_you_mean(gpu.class_, fleet.classes)
                or "declare it as a `kind: GpuDeviceClass` document under workloads/")
        findings.add(w.error(("spec", "gpu", "class"), f"unknown device class '{gpu.class_}'", hint))
    _check_require(w, ("spec", "gpu", "require"), gpu.require, findings)
    _check_sharing(w, findings)
    _check_model(w, findings)
    if gpu.class_ in fleet.classes:
        cls = fleet.classes[gpu.class_].model.spec
        missing = [c for c in target_clusters(w.model, fleet)
                   if c in fleet.clusters and c not in target_clusters(fleet.classes[gpu.class_].model, fleet)]
        if missing:
            findings.add(w.error(("spec", "gpu", "class"), f"device class '{gpu.class_}' is not on cluster {one_of(missing)}",
                                 f"add {one_of(missing)} to the class's spec.clusters, or list this workload's clusters"))
        if bool(cls.mig) != bool(gpu.mig):
            findings.add(w.error(("spec", "gpu", "class"),
                                 f"device class '{gpu.class_}' selects {'MIG devices' if cls.mig else 'full GPUs'} but this workload asks for "
                                 f"{'MIG slices' if gpu.mig else 'full GPUs'}"))
        elif cls.mig and gpu.mig:
            allowed = {s.profile for s in cls.mig.slices}
            for i, s in enumerate(gpu.mig.slices):
                if s.profile not in allowed:
                    findings.add(w.error(("spec", "gpu", "mig", "slices", i, "profile"),
                                         f"device class '{gpu.class_}' only selects {one_of(sorted(allowed))}"))
    for name in target_clusters(w.model, fleet):
        if name in clusters:
            _check_on_cluster(w, clusters[name], findings)


def _check_sharing(w: Intent[GpuWorkload], findings: Findings) -> None:
    gpu = w.model.spec.gpu
    path = ("spec", "gpu")
    if gpu.sharing == "Exclusive" and gpu.share_group:
        findings.add(w.error(path + ("shareGroup",), "shareGroup only applies to sharing Shared, TimeSlicing or MPS",
                             "remove shareGroup, or choose a sharing strategy"))
    if gpu.time_slicing is not None and gpu.sharing != "TimeSlicing":
        findings.add(w.error(path + ("timeSlicing",), f"timeSlicing settings need sharing: TimeSlicing (sharing is {gpu.sharing})",
                             "the driver rejects a timeSlicingConfig on any other strategy"))
    if gpu.mps is not None and gpu.sharing != "MPS":
        findings.add(w.error(path + ("mps",), f"mps settings need sharing: MPS (sharing is {gpu.sharing})",
                             "the driver rejects an mpsConfig on any other strategy"))
    if gpu.mps and gpu.mps.pinned_memory_limit is not None and gpu.mps.pinned_memory_limit.bytes < 1024 * 1024:
        findings.add(w.error(path + ("mps", "pinnedMemoryLimit"), "pinned memory limits must be at least 1Mi"))
    if gpu.mig is not None:
        if gpu.time_slicing is not None:
            findings.add(w.error(path + ("timeSlicing",), "MIG devices take no time-slicing interval: MigDeviceConfig has no timeSlicingConfig",
                                 "drop timeSlicing; TimeSlicing on MIG uses the driver's fixed behaviour"))
        if gpu.count is not None:
            findings.add(w.error(path + ("count",), "count applies to full GPUs; a MIG mix gives each slice its own count",
                                 "remove count and set gpu.mig.slices[].count"))
        if gpu.fabric is not None:
            findings.add(w.error(path + ("fabric",), "NVLink partitions are made of full GPUs, not MIG slices"))
        if gpu.multi_node is not None:
            findings.add(w.error(path + ("multiNode",), "multi-node NVLink (ComputeDomain) needs full GPUs, not MIG slices"))
        seen: dict[str, int] = {}
        for i, s in enumerate(gpu.mig.slices):
            if s.profile in seen:
                findings.add(w.error(path + ("mig", "slices", i, "profile"), f"profile '{s.profile}' is listed twice",
                                     "list each profile once with its count"))
            seen[s.profile] = i
    if gpu.multi_node is not None and gpu.sharing != "Exclusive":
        findings.add(w.error(path + ("multiNode",), "a multi-node workload needs sharing: Exclusive (a shared claim lives on one node)"))
    if gpu.count == "auto" and w.model.spec.model is None:
        findings.add(w.error(path + ("count",), "count: auto sizes from spec.model, which this workload does not have",
                             "set a number of GPUs, or describe the model"))
    if gpu.fabric is not None:
        _check_fabric_options(w, findings)


def _check_fabric_options(w: Intent[GpuWorkload], findings: Findings) -> None:
    gpu = w.model.spec.gpu
    fabric = gpu.fabric
    path = ("spec", "gpu", "fabric")
    if fabric.strategy == "Manual":
        if not fabric.partition_ids:
            findings.add(w.error(path + ("strategy",), "strategy Manual needs partitionIDs", "list the fabric partition IDs to use"))
        if fabric.partition_size is not None:
            findings.add(w.error(path + ("partitionSize",), "strategy Manual takes partitionIDs, not partitionSize", "remove partitionSize"))
        elif not isinstance(gpu.count, int):
            findings.add(w.error(("spec", "gpu", "count"), "strategy Manual names partitions but not how many GPUs they span",
                                 "set gpu.count to the number of GPUs of the listed partitions"))
    elif fabric.partition_ids:
        findings.add(w.error(path + ("partitionIDs",), f"partitionIDs are only allowed with strategy Manual (strategy is {fabric.strategy})"))
    if fabric.strategy == "Disabled" and fabric.partition_size is not None:
        findings.add(w.error(path + ("partitionSize",), "strategy Disabled takes no partitionSize"))
    if fabric.strategy == "Auto" and fabric.partition_size is None:
        findings.add(w.error(path + ("partitionSize",), "strategy Auto needs partitionSize (2, 4 or 8)"))
    if gpu.sharing == "MPS" and fabric.strategy != "Disabled":
        findings.add(w.error(path + ("strategy",), "MPS cannot be combined with a fabric topology unless strategy is Disabled",
                             "the driver rejects MPS with an active fabricTopologyConfig"))
    if isinstance(gpu.count, int) and fabric.partition_size is not None and gpu.count != fabric.partition_size:
        findings.add(w.error(("spec", "gpu", "count"), f"count {gpu.count} differs from fabric.partitionSize {fabric.partition_size}",
                             "a partition is allocated whole: set count to the partition size, or drop count"))


def _check_model(w: Intent[GpuWorkload], findings: Findings) -> None:
    spec = w.model.spec
    if spec.model is None:
        return
    image = spec.model.image
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.endswith(":") or "@" in image:
        findings.add(w.error(("spec", "model", "image"), f"image '{image}' needs an explicit tag (repository:tag)",
                             "NIM images are versioned; pin one, e.g. nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.3"))
    elif last.endswith(":latest"):
        findings.add(w.warning(("spec", "model", "image"), "':latest' makes renders non-reproducible", "pin a NIM version"))
    if not spec.secrets.ngc_api_key:
        findings.add(w.error(("spec", "secrets"), "a NIM model needs secrets.ngcApiKey (the name of the Secret holding NGC_API_KEY)",
                             "create the Secret out of band and set `secrets: {ngcApiKey: ngc-api-secret}`"))
    gpu = spec.gpu
    shared_claim = gpu.sharing in SHARED
    if shared_claim and spec.replicas > 1:
        findings.add(w.error(("spec", "replicas"),
                             f"NIM rejects a shared ResourceClaim (resourceClaimName) with replicas > 1; sharing is {gpu.sharing}",
                             "use replicas: 1, or sharing: Exclusive so each replica gets its own claim from a template"))


def _check_on_cluster(w: Intent[GpuWorkload], cluster: ResolvedCluster, findings: Findings) -> None:
    spec = w.model.spec
    gpu = spec.gpu
    cname = cluster.name
    if not cluster.dra_pools:
        findings.add(w.error(("spec", "clusters"), f"cluster '{cname}' has no node pool with allocation: dra",
                             "add a DRA pool to the cluster, or target another cluster"))
        return
    if spec.model is not None:
        nim = nim_operator()
        if cluster.api.minor < int(nim["draMinKubernetes"].split(".")[1]):
            findings.add(w.error(("spec", "model"),
                                 f"NIM's DRA support needs Kubernetes >= {nim['draMinKubernetes']}; cluster '{cname}' runs {cluster.api.kubernetes}",
                                 "target a 1.34+ cluster, or drop spec.model and attach the claim to your own pods"))
        op = cluster.spec.nim_operator
        if op is None:
            findings.add(w.error(("spec", "model"), f"cluster '{cname}' has no nimOperator",
                                 "add `nimOperator: {version: \"3.1.2\"}` to the cluster"))
        elif version_tuple(op.version) < version_tuple(nim["draResourcesSince"]):
            findings.add(cluster.intent.error(("spec", "nimOperator", "version"),
                                              f"NIM Operator {op.version} predates resource.k8s.io/v1 draResources (3.1.0); "
                                              f"workload {w.model.metadata.name} needs them"))
    if gpu.fabric is not None:
        flavour = cluster.spec.dra_driver.fabric
        if flavour == "none":
            findings.add(w.error(("spec", "gpu", "fabric"), f"cluster '{cname}' has draDriver.fabric: none",
                                 "set draDriver.fabric to partitionAttributes or topologyConfig on the cluster"))
        else:
            if flavour == "partitionAttributes":
                if gpu.fabric.partition_size is None:
                    findings.add(w.error(("spec", "gpu", "fabric", "partitionSize"),
                                         f"cluster '{cname}' selects partitions by attribute: partitionSize is required"))
                for field in ("strategy", "partitionIDs", "virtualizationModel", "minBandwidth", "maxLatency"):
                    if _is_set(gpu.fabric, field):
                        findings.add(w.error(("spec", "gpu", "fabric", field),
                                             f"'{field}' belongs to fabric topologyConfig; cluster '{cname}' uses partitionAttributes"))
            size = gpu.fabric.partition_size
            if size is not None and not any(size in p.partitions for p in cluster.dra_pools):
                offered = sorted({s for p in cluster.dra_pools for s in p.partitions})
                findings.add(w.error(("spec", "gpu", "fabric", "partitionSize"),
                                     f"no DRA pool of cluster '{cname}' offers NVLink partitions of size {size}"
                                     + (f" (offered: {offered})" if offered else ""),
                                     "add the size to a pool's nvlink.partitions, or pick an offered size"))
    if gpu.mig is not None:
        _check_mig_on_cluster(w, cluster, findings)


def _is_set(model, alias: str) -> bool:
    for name, info in type(model).model_fields.items():
        if (info.alias or name) == alias:
            return name in model.model_fields_set
    return False


def _check_mig_on_cluster(w: Intent[GpuWorkload], cluster: ResolvedCluster, findings: Findings) -> None:
    mix = {s.profile: s.count for s in w.model.spec.gpu.mig.slices}
    mig_pools = [p for p in cluster.dra_pools if p.gpu.mig is not None and (p.mig_layout or p.mig_dynamic)]
    if not mig_pools:
        findings.add(w.error(("spec", "gpu", "mig"), f"cluster '{cluster.name}' has no DRA pool with MIG enabled",
                             "give a pool a `mig.layout`"))
        return
    missing = [(i, s.profile) for i, s in enumerate(w.model.spec.gpu.mig.slices)
               if not any(s.profile in p.mig_profiles for p in mig_pools)]
    unknown = [(i, profile) for i, profile in missing if not any(profile in p.gpu.mig.profiles for p in mig_pools)]
    if unknown:
        i, profile = unknown[0]
        offered = sorted({n for p in mig_pools for n in p.mig_profiles})
        models = sorted({p.gpu.key for p in mig_pools})
        findings.add(w.error(("spec", "gpu", "mig", "slices", i, "profile"),
                             f"no MIG pool of cluster '{cluster.name}' provides profile '{profile}' ({', '.join(models)})",
                             " ".join(filter(None, (did_you_mean(profile, offered), f"profiles offered: {', '.join(offered)}")))))
        return
    if missing:
        return  # the GPUs have the profile but no pool's layout offers it: the plan stage reports that as infeasible (exit 1)
    if w.model.spec.gpu.mig.same_gpu:
        reasons = []
        for pool in mig_pools:
            if pool.mig_dynamic:
                fit = fit_on_model(pool.gpu, mix)
                if fit.fits:
                    return
                reasons.append(f"{pool.name}: {fit.reason}")
            else:
                have = dict(pool.mig_layout or ())
                short = [f"{c}x {p} (a GPU has {have.get(p, 0)})" for p, c in mix.items() if have.get(p, 0) < c]
                if not short:
                    return
                reasons.append(f"{pool.name} ({pool.mig_config}): lacks {', '.join(short)}")
        geometry = [fit_on_model(p.gpu, mix) for p in mig_pools if not p.mig_dynamic]  # dynamic pools said why above
        why = next((f.reason for f in geometry if not f.fits), "")
        findings.add(w.error(("spec", "gpu", "mig"),
                             f"this MIG mix cannot fit one GPU of cluster '{cluster.name}': " + "; ".join(reasons)
                             + (f" ({why})" if why else ""),
                             "change the pool's layout to include the mix, or set sameGpu: false"))


# ----------------------------------------------------------------------------------- share groups

def share_group_of(w: GpuWorkload) -> str | None:
    if w.spec.gpu.sharing not in SHARED:
        return None
    return w.spec.gpu.share_group or w.metadata.name


def _check_share_groups(fleet: Fleet, findings: Findings) -> None:
    groups: dict[str, list[Intent[GpuWorkload]]] = defaultdict(list)
    for w in fleet.workloads:
        if w.model.spec.gpu.share_group and w.model.spec.gpu.sharing in SHARED:
            groups[w.model.spec.gpu.share_group].append(w)
    for name, members in groups.items():
        first = members[0]
        for other in members[1:]:
            fm, om = first.model, other.model
            if om.metadata.namespace == fm.metadata.namespace and om.spec.gpu.model_dump(exclude={"share_group"}) == \
                    fm.spec.gpu.model_dump(exclude={"share_group"}):
                continue  # the common case: nothing to report, no line lookup
            where = f"{first.source.file}:{first.source.line_of(('spec', 'gpu', 'shareGroup'))}"
            if om.metadata.namespace != fm.metadata.namespace:
                findings.add(other.error(("metadata", "namespace"),
                                         f"shareGroup '{name}' spans namespaces: '{om.metadata.namespace}' here, '{fm.metadata.namespace}' in {fm.metadata.name} ({where})",
                                         "a ResourceClaim is namespaced; put the members in one namespace"))
                continue
            if om.spec.gpu.sharing != fm.spec.gpu.sharing:
                findings.add(other.error(("spec", "gpu", "sharing"),
                                         f"shareGroup '{name}' mixes sharing {om.spec.gpu.sharing} with {fm.spec.gpu.sharing} ({fm.metadata.name}, {where})",
                                         "members share one claim, so one strategy"))
                continue
            if (om.spec.gpu.mig is None) != (fm.spec.gpu.mig is None):
                findings.add(other.error(("spec", "gpu", "mig"),
                                         f"shareGroup '{name}' mixes MIG slices and full GPUs (see {fm.metadata.name}, {where})"))
                continue
            mine = om.spec.gpu.model_dump(by_alias=True, exclude={"share_group"})
            theirs = fm.spec.gpu.model_dump(by_alias=True, exclude={"share_group"})
            for key in sorted(mine):
                if mine[key] != theirs[key]:
                    findings.add(other.error(("spec", "gpu", key),
                                             f"shareGroup '{name}' members disagree on gpu.{key} (see {fm.metadata.name}, {where})",
                                             "members share one claim; give them the same gpu settings"))
                    break


# ----------------------------------------------------------------------------------- driver gates

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
            findings.add(intent.error(("spec", "draDriver", "version"),
                                      f"workloads on this cluster use {cap}, which needs driver {since} or newer",
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
                needs = "node pools of this cluster need it (" + ", ".join(p.name for p in cluster.pools if p.mig_dynamic) + ")"
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


def _gate_origin(a: str, b: str, derived: dict[str, bool]) -> str:
    parts = [f"{g} is {'derived from the workloads' if g in derived else 'set in draDriver.values.featureGates'}" for g in (a, b)]
    return "; ".join(parts) + "; drop one of them"


# ------------------------------------------------------------------------------------ chart values

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
