"""Rules of one GpuWorkload: its fields together, and against each cluster it targets."""

from __future__ import annotations

from ...diagnostics import Findings, did_you_mean, one_of
from ...facts.driver import builtin_device_classes, mps_control_daemon
from ...facts.mig import fit_on_model
from ...facts.platform import nim_name_limit, nim_operator, version_tuple
from ..documents import Fleet, Intent, target_clusters
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster, channel_only
from .classes import check_cluster_refs, check_require


def check_workloads(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for workload in fleet.workloads:
        _check_workload(workload, fleet, clusters, findings)


def _check_workload(w: Intent[GpuWorkload], fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    spec = w.model.spec
    gpu = spec.gpu
    check_cluster_refs(w, spec.clusters, fleet, findings)
    if gpu.class_ is not None and gpu.class_ not in fleet.classes:
        hint = ("that is the driver's built-in class, which gpuc uses by default; remove `class`"
                if gpu.class_ in builtin_device_classes() else did_you_mean(gpu.class_, fleet.classes)
                or "declare it as a `kind: GpuDeviceClass` document under workloads/")
        findings.add(w.error(("spec", "gpu", "class"), f"unknown device class '{gpu.class_}'", hint))
    check_require(w, ("spec", "gpu", "require"), gpu.require, findings)
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


def _check_nim_dra(w: Intent[GpuWorkload], cluster: ResolvedCluster, findings: Findings) -> None:
    """A NIM's claim comes through NIMService draResources: the operator line must read claims in the resource.k8s.io
    version gpuc emits for the cluster (3.0: v1beta2, Kubernetes 1.33; 3.1+: v1, 1.34+)."""
    lines = nim_operator()["draLines"]
    cname, op = cluster.name, cluster.spec.nim_operator
    wanted = next((line for line in lines if line["resourceApi"] == cluster.api.api_version), None)
    if wanted is None:
        findings.add(w.error(("spec", "model"), f"no NIM Operator release reads claims of {cluster.api.api_version}, the "
                             f"resource.k8s.io version of cluster '{cname}' (Kubernetes {cluster.api.kubernetes}): NIM's DRA support "
                             f"starts with Kubernetes {lines[0]['kubernetes']} (NIM Operator 3.0, resource.k8s.io/v1beta2)",
                             "target a 1.33+ cluster, or drop spec.model and attach the claim to your own pods"))
        return
    if op is None:
        findings.add(w.error(("spec", "model"), f"cluster '{cname}' has no nimOperator",
                             f"add `nimOperator: {{version: \"{'3.1.2' if wanted is lines[-1] else '3.0.2'}\"}}` to the cluster"))
        return
    have = max((line for line in lines if version_tuple(op.version) >= version_tuple(line["since"])),
               key=lambda line: version_tuple(line["since"]), default=None)
    if have is wanted:
        return
    following = lines[lines.index(wanted) + 1] if wanted is not lines[-1] else None
    if have is None:
        why = f"NIM Operator {op.version} has no draResources (they arrive in {lines[0]['since']})"
    else:
        why = (f"NIM Operator {op.version} reads claims as {have['resourceApi']} (its line starts on Kubernetes {have['kubernetes']}); "
               f"on cluster '{cname}' (Kubernetes {cluster.api.kubernetes}) gpuc emits {cluster.api.api_version}")
    target = f"{wanted['since'].rsplit('.', 1)[0]}.x" + (f" (before {following['since']})" if following else " or newer")
    findings.add(cluster.intent.error(("spec", "nimOperator", "version"), f"{why}; workload {w.model.metadata.name} serves a model "
                                      "through draResources", f"use NIM Operator {target} on this cluster"))


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
    assert fabric is not None
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
    limit = nim_name_limit("NIMService")
    name = w.model.metadata.name
    if len(name) > limit:
        findings.add(w.error(("metadata", "name"), f"'{name}' is {len(name)} characters: a model's NIMService takes the "
                             f"workload's name, and the NIM Operator names its container '<name>-ctr', which must fit 63",
                             f"shorten metadata.name to at most {limit} characters"))
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
    if gpu.shared and spec.replicas > 1:
        findings.add(w.error(("spec", "replicas"),
                             f"NIM rejects a shared ResourceClaim (resourceClaimName) with replicas > 1; sharing is {gpu.sharing}",
                             "use replicas: 1, or sharing: Exclusive so each replica gets its own claim from a template"))


def _check_on_cluster(w: Intent[GpuWorkload], cluster: ResolvedCluster, findings: Findings) -> None:
    spec = w.model.spec
    gpu = spec.gpu
    cname = cluster.name
    if not cluster.dra_pools and not any(channel_only(p, gpu) for p in cluster.pools):
        findings.add(w.error(("spec", "clusters"), f"cluster '{cname}' has no node pool with allocation: dra",
                             "add a DRA pool to the cluster, or target another cluster (a multi-node workload can also run "
                             "on device-plugin pools of multi-node NVLink GPUs, GB200/GB300, with its channel through DRA)"))
        return
    if spec.model is not None:
        _check_nim_dra(w, cluster, findings)
    if gpu.fabric is not None:
        flavour = cluster.spec.dra_driver.fabric
        if flavour == "none":
            # No Fabric Manager partitioning: on NVSwitch nodes any GPUs of one node are NVLink-connected, so
            # partitionSize N asks for N GPUs of one such node (plan.matching keeps only NVSwitch pools).
            for field in ("strategy", "partitionIDs", "virtualizationModel", "minBandwidth", "maxLatency"):
                if _is_set(gpu.fabric, field):
                    findings.add(w.error(("spec", "gpu", "fabric", field),
                                         f"'{field}' belongs to Fabric Manager partitions (draDriver.fabric topologyConfig, a driver "
                                         f"fork); cluster '{cname}' has fabric none, where partitionSize asks for that many GPUs of one "
                                         "NVSwitch node",
                                         "drop it; on NVSwitch nodes any GPUs of one node are NVLink-connected"))
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
    if gpu.driver_sharing == "MPS":
        _check_mps_driver_root(w, cluster, findings)


def _is_set(model, alias: str) -> bool:
    for name, info in type(model).model_fields.items():
        if (info.alias or name) == alias:
            return name in model.model_fields_set
    return False


def _check_mig_on_cluster(w: Intent[GpuWorkload], cluster: ResolvedCluster, findings: Findings) -> None:
    wanted = w.model.spec.gpu.mig
    assert wanted is not None
    mix = {s.profile: s.count for s in wanted.slices}
    mig_pools = [p for p in cluster.dra_pools if p.gpu.mig is not None and (p.mig_layout or p.dynamic_partitions)]
    if not mig_pools:
        findings.add(w.error(("spec", "gpu", "mig"), f"cluster '{cluster.name}' has no DRA pool with MIG enabled",
                             "give a pool a `mig.layout`"))
        return
    missing = [(i, s.profile) for i, s in enumerate(wanted.slices)
               if not any(s.profile in p.mig_profiles for p in mig_pools)]
    unknown = [(i, profile) for i, profile in missing if not any(p.gpu.mig and profile in p.gpu.mig.profiles for p in mig_pools)]
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
    if wanted.same_gpu:
        reasons = []
        for pool in mig_pools:
            if pool.dynamic_partitions:
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
        geometry = [fit_on_model(p.gpu, mix) for p in mig_pools if not p.dynamic_partitions]  # dynamic pools said why above
        why = next((f.reason for f in geometry if not f.fits), "")
        findings.add(w.error(("spec", "gpu", "mig"),
                             f"this MIG mix cannot fit one GPU of cluster '{cluster.name}': " + "; ".join(reasons)
                             + (f" ({why})" if why else ""),
                             "change the pool's layout to include the mix, or set sameGpu: false"))


def _check_mps_driver_root(w: Intent[GpuWorkload], cluster: ResolvedCluster, findings: Findings) -> None:
    """Up to driver 25.12 the MPS control daemon runs `chroot <nvidiaDriverRoot> sh`: a driver root that is not a whole
    root file system has no shell, the daemon never starts, and the claim is never prepared (facts mpsControlDaemon)."""
    facts = mps_control_daemon()
    root = cluster.spec.dra_driver.nvidia_driver_root
    if not cluster.driver.at_most(facts.chroot_shell_until) or root in facts.shell_roots:
        return
    message = (f"the MPS control daemon of driver {cluster.spec.dra_driver.version} runs `chroot {root} sh`, and "
               + (f"{root} ({facts.shellless[root]}) holds no shell" if root in facts.shellless else
                  f"a driver root other than {' or '.join(facts.shell_roots)} usually holds the driver's files only")
               + f" (cluster '{cluster.name}'): the daemon does not start and the claim is never prepared")
    hint = "upgrade draDriver.version to 0.4.0 or newer (its daemon runs without a shell in the driver root), or use sharing TimeSlicing"
    if root in facts.shellless:
        findings.add(w.error(("spec", "gpu", "sharing"), message, hint))
    else:
        findings.add(w.warning(("spec", "gpu", "sharing"), message, hint + f"; or make sure {root}/bin/sh exists on the nodes"))
