"""Stage 3, plan: per cluster, which pools serve each workload and how many GPUs each replica gets.

Inputs are validated intents; outputs are plain records the lowering stage turns into objects.
A plan finding is not bad input but an intent the cluster cannot satisfy (exit code 1).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..diagnostics import Findings, one_of
from ..validate.documents import Fleet, Intent
from ..validate.intents import GpuWorkload, Require
from ..validate.resolved import ResolvedCluster
from .matching import PoolMatch, match_pools, require_mismatch
from .sizing import GIB, CacheSize, Sizing, cache_size, memory_floor, model_bytes, size_model


@dataclass(frozen=True)
class AlternativePlan:
    """One of gpu.alternatives sized on the pools that can serve it (a firstAvailable subrequest)."""

    index: int
    matches: tuple[PoolMatch, ...]
    gpus: int | None  # None when no pool can serve it
    sizing: Sizing | None
    min_memory: int | None

    @property
    def viable(self) -> bool:
        return self.gpus is not None and any(m.ok for m in self.matches)


@dataclass(frozen=True)
class WorkloadPlan:
    intent: Intent[GpuWorkload]
    matches: tuple[PoolMatch, ...]
    gpus: int | None  # full GPUs per pod (per node for multi-node; the first alternative's); None for a MIG mix
    sizing: Sizing | None
    min_memory: int | None  # per-GPU memory floor (bytes) sizing adds as a selector
    share_group: str | None
    alternatives: tuple[AlternativePlan, ...] = ()  # gpu.alternatives, in order
    # multi-node over NVLink (a ComputeDomain): only on multi-node NVLink hardware; a multi-node workload
    # on other pools runs its nodes' pods without one (NCCL over the network)
    compute_domain: bool = False
    cache: CacheSize | None = None  # the NIMCache volume of a model

    @property
    def device_plugin(self) -> bool:
        """Its GPUs come from the device plugin (nvidia.com/gpu limits), only its ComputeDomain channel from DRA."""
        serving = [m for m in self.matches if m.ok]
        return bool(serving) and all(m.pool.spec.allocation == "devicePlugin" for m in serving)

    @property
    def workload(self) -> GpuWorkload:
        return self.intent.model

    @property
    def name(self) -> str:
        return self.workload.metadata.name

    @property
    def namespace(self) -> str:
        return self.workload.metadata.namespace

    @property
    def tensor_parallelism(self) -> int | None:
        """GPUs a model is split over; None when the alternatives give it different counts (the NIM then
        picks the profile matching the GPUs it got)."""
        counts = {a.gpus for a in self.alternatives if a.viable}
        if len(counts) > 1:
            return None
        return self.gpus or 1


@dataclass(frozen=True)
class ClusterPlan:
    cluster: ResolvedCluster
    workloads: tuple[WorkloadPlan, ...]


def class_require(fleet: Fleet, workload: GpuWorkload) -> Require | None:
    cls = fleet.classes.get(workload.spec.gpu.class_ or "")
    return cls.model.spec.require if cls else None


def plan_workload(cluster: ResolvedCluster, intent: Intent[GpuWorkload], fleet: Fleet, findings: Findings,
                  shared_with: tuple[tuple[str, int], ...] = ()) -> WorkloadPlan:
    w = intent.model
    gpu = w.spec.gpu
    matches = tuple(match_pools(cluster, w, class_require(fleet, w)))
    serving = [m for m in matches if m.ok]
    if not serving:
        reasons = "; ".join(f"{m.pool.name}: {m.reason}" for m in matches)
        findings.add(intent.error(("spec", "gpu"), f"no node pool of cluster '{cluster.name}' can serve this workload ({reasons})",
                                  "relax gpu.require, or add a matching pool to the cluster"))
    _check_channel_only(intent, cluster, serving, findings)
    _check_nics(intent, serving, findings)
    _check_off_passthrough(intent, cluster, class_require(fleet, w), findings)
    group = w.share_group
    if gpu.alternatives is not None:
        return _plan_alternatives(cluster, intent, fleet, findings, shared_with)
    if gpu.fractional:
        if w.spec.model is not None and gpu.memory is not None:
            _check_fraction_holds_model(intent, gpu.memory.bytes, findings)
        return WorkloadPlan(intent, matches, 1, None, None, group)
    if gpu.mig is not None:
        if w.spec.model is not None and serving:
            _check_mig_holds_model(intent, serving, findings)
        return WorkloadPlan(intent, matches, None, None, None, group)
    fixed = gpu.fabric.partition_size if gpu.fabric and gpu.fabric.strategy == "Auto" else None
    requested = gpu.count if isinstance(gpu.count, int) else None
    if gpu.count is None and w.spec.model is None:
        requested = 1
    nodes = gpu.multi_node.nodes if gpu.multi_node is not None else 1
    sizing = size_model(w.spec.model, list(matches), requested, fixed, shared_with, nodes) if w.spec.model is not None else None
    count = sizing.count if sizing is not None else (fixed or requested)
    min_memory = None
    if sizing is not None and serving:
        if count is None:
            findings.add(intent.error(("spec", "model"),
                                      f"the model needs {sizing.total_need / GIB:.1f} GiB and does not fit 8 GPUs "
                                      f"{'per node ' if nodes > 1 else ''}of any pool of cluster '{cluster.name}'",
                                      "use a lower precision, a shorter contextLength or concurrency, or bigger GPUs"))
        elif sizing.auto:
            min_memory = memory_floor(sizing.per_gpu, [c[1] for c in sizing.candidates])
        elif sizing.per_gpu > max(c[1] for c in sizing.candidates):
            findings.add(intent.warning(("spec", "gpu", "count"),
                                        f"the model needs {sizing.per_gpu / GIB:.1f} GiB per GPU at {count} GPU(s); the largest GPU "
                                        f"that can serve it has {max(c[1] for c in sizing.candidates) / GIB:.1f} GiB",
                                        "use count: auto to size from the model"))
    if count is not None and serving and count > max(m.pool.spec.gpu.count for m in serving):
        most = max(m.pool.spec.gpu.count for m in serving)
        total = count * nodes  # GPUs per replica: count is per pod, and a multi-node replica has one pod per node
        split = f"count: {most} with multiNode.nodes: {math.ceil(total / most)}"
        findings.add(intent.error(("spec", "gpu", "count"),
                                  f"{count} GPUs per pod, but the pools that can serve it have at most {most} GPUs per node",
                                  f"count is GPUs per pod and a pod runs on one node (with multiNode, each of the replica's "
                                  f"{nodes} pods on its own node): for {total} GPUs per replica use {split}"
                                  if gpu.multi_node is not None else
                                  f"a pod's claims are allocated on one node; for {total} GPUs per replica use {split}"))
    domain = gpu.multi_node is not None and _multi_node_nvlink(intent, cluster, serving, findings)
    return WorkloadPlan(intent, matches, count, sizing, min_memory, group, compute_domain=domain)


def _check_off_passthrough(intent: Intent[GpuWorkload], cluster: ResolvedCluster, cls: Require | None, findings: Findings) -> None:
    """The driver publishes a passthrough pool's GPUs as regular GPUs too, also while VMs hold them: an ordinary
    full-GPU workload whose selectors match them could be given one (admin access allocates nothing)."""
    gpu = intent.model.spec.gpu
    if gpu.passthrough or gpu.admin_access or gpu.mig is not None:
        return
    pools = [p.name for p in cluster.pools if p.spec.passthrough and p.dra and not require_mismatch(p, gpu.require)
             and not require_mismatch(p, cls) and not any(require_mismatch(p, a.require) for a in gpu.alternatives or [])]
    if pools:
        findings.add(intent.error(("spec", "gpu"), f"this workload's GPUs could also be allocated on passthrough pool(s) "
                                  f"{one_of(pools)} of cluster '{cluster.name}', whose GPUs the driver also publishes as regular "
                                  "GPUs while VMs hold them", "narrow gpu.require (productName, architecture) or gpu.class to the "
                                  "other pools' GPUs"))


def _check_nics(intent: Intent[GpuWorkload], serving: list[PoolMatch], findings: Findings) -> None:
    """NICs aligned with each GPU by matchAttribute pcieRoot, one request pair and one constraint per GPU: a
    constraint covers every device of the requests it names, so one over all GPUs would need them all on one root."""
    gpu = intent.model.spec.gpu
    if gpu.nics is None:
        return
    if not isinstance(gpu.count, int) or gpu.mig is not None or gpu.alternatives is not None or gpu.multi_node is not None or gpu.shared:
        findings.add(intent.error(("spec", "gpu", "nics"), "NIC alignment pairs each whole GPU of a pod with NICs on its PCIe root "
                                  "(a request pair per GPU, matchAttribute resource.kubernetes.io/pcieRoot)",
                                  "set gpu.count to a number of exclusive whole GPUs"))
    classes = {m.pool.spec.nics.device_class for m in serving if m.pool.spec.nics is not None}
    if len(classes) > 1:
        findings.add(intent.error(("spec", "gpu", "nics"), f"the serving pools name different NIC classes ({', '.join(sorted(classes))})",
                                  "narrow gpu.require to pools with one NIC class"))


def nic_class(plan: WorkloadPlan) -> str | None:
    """The DeviceClass of the NICs a workload aligns with its GPU (its serving pools agree on it)."""
    if plan.workload.spec.gpu.nics is None:
        return None
    return next((m.pool.spec.nics.device_class for m in plan.matches if m.ok and m.pool.spec.nics is not None), None)


def _check_channel_only(intent: Intent[GpuWorkload], cluster: ResolvedCluster, serving: list[PoolMatch], findings: Findings) -> None:
    """GPUs on the device plugin with channels through DRA need the DRA driver with GPUs off: one kubelet plugin
    serves a node, so a cluster that also hands out GPUs through DRA cannot run both on its device-plugin nodes."""
    plugin = [m.pool.name for m in serving if m.pool.spec.allocation == "devicePlugin"]
    if not plugin:
        return
    if any(m.pool.spec.allocation == "dra" for m in serving):
        findings.add(intent.error(("spec", "gpu"), f"pools {', '.join(m.pool.name for m in serving)} of cluster '{cluster.name}' "
                                  "serve this multi-node workload, some through DRA and some through the device plugin",
                                  "narrow gpu.require to one kind of pool (e.g. productName)"))
    elif cluster.dra_pools:
        findings.add(intent.error(("spec", "gpu"), f"pool {plugin[0]} of cluster '{cluster.name}' is on the device plugin, so this "
                                  "multi-node workload would take its GPUs as nvidia.com/gpu and only its ComputeDomain channel "
                                  f"through DRA; that needs the DRA driver with GPUs off, but pools "
                                  f"{', '.join(p.name for p in cluster.dra_pools)} allocate GPUs through DRA",
                                  f"move pool {plugin[0]} to allocation: dra, or run this workload on a cluster whose GPUs all stay on "
                                  "the device plugin"))


def _multi_node_nvlink(intent: Intent[GpuWorkload], cluster: ResolvedCluster, serving: list[PoolMatch], findings: Findings) -> bool:
    """Whether a multi-node workload gets a ComputeDomain: IMEX channels only work across the nodes of a
    multi-node NVLink domain (GB200/GB300 NVL72); on other hardware the ComputeDomain never becomes Ready.
    Elsewhere the nodes of a replica talk over the network, which needs no ComputeDomain."""
    mnnvl = sorted({m.pool.name for m in serving if m.pool.gpu.multi_node_nvlink})
    other = sorted({m.pool.name for m in serving if not m.pool.gpu.multi_node_nvlink})
    if mnnvl and other:
        models = sorted({m.pool.gpu.key for m in serving if m.pool.gpu.multi_node_nvlink})
        findings.add(intent.error(("spec", "gpu", "multiNode"),
                                  f"pools {', '.join(mnnvl)} (multi-node NVLink) and {', '.join(other)} (no NVLink across nodes) both "
                                  f"serve this multi-node workload on cluster '{cluster.name}'; a ComputeDomain only works on the first",
                                  f"narrow gpu.require to the multi-node NVLink GPUs ({', '.join(models)}, e.g. productName), "
                                  "or to the others to run over the network without a ComputeDomain"))
    return bool(mnnvl)


def _plan_alternatives(cluster: ResolvedCluster, intent: Intent[GpuWorkload], fleet: Fleet, findings: Findings,
                       shared_with: tuple[tuple[str, int], ...]) -> WorkloadPlan:
    """Each alternative matched and sized on its own pools: the scheduler tries them in order, so one no
    pool can serve is skipped (a warning), and only none at all is an error."""
    w = intent.model
    alternatives = []
    for i, alt in enumerate(w.spec.gpu.alternatives or ()):
        path = ("spec", "gpu", "alternatives", i)
        cls = fleet.classes.get(alt.class_ or "")
        matches = tuple(match_pools(cluster, w, cls.model.spec.require if cls else None, alt.require))
        serving = [m for m in matches if m.ok]
        requested = alt.count if isinstance(alt.count, int) else None
        sizing = None
        count: int | None = requested if requested is not None else (1 if w.spec.model is None else None)
        if w.spec.model is not None and serving:
            sizing = size_model(w.spec.model, list(matches), requested, None, shared_with)
            count = sizing.count
        if count is not None and serving and count > max(m.pool.spec.gpu.count for m in serving):
            count = None
        satisfiable = bool(serving) and count is not None
        if not satisfiable:
            why = ("; ".join(f"{m.pool.name}: {m.reason}" for m in matches if not m.ok) if not serving
                   else "the model does not fit the GPUs of the pools that match it")
            findings.add(intent.warning(path, f"alternative {i + 1} cannot be satisfied on cluster '{cluster.name}' ({why}); "
                                              "the scheduler skips it and tries the next", "relax its require or count"))
        floor = (memory_floor(sizing.per_gpu, [c[1] for c in sizing.candidates])
                 if sizing is not None and sizing.auto and count is not None else None)
        alternatives.append(AlternativePlan(i, matches, count if satisfiable else None, sizing, floor))
    viable = [a for a in alternatives if a.viable]
    if not viable:
        findings.add(intent.error(("spec", "gpu", "alternatives"),
                                  f"no alternative can be satisfied by a node pool of cluster '{cluster.name}'",
                                  "relax an alternative's require or count, or add a matching pool"))
    # a pool serves the workload when it serves some alternative
    by_pool = {m.pool.name: m for a in reversed(alternatives) for m in a.matches}
    by_pool.update({m.pool.name: m for a in alternatives for m in a.matches if m.ok})
    matches = tuple(by_pool[p.name] for p in cluster.pools if p.name in by_pool)
    first = viable[0] if viable else None
    return WorkloadPlan(intent, matches, first.gpus if first else None, first.sizing if first else None,
                        first.min_memory if first else None, w.share_group, tuple(alternatives))


def _check_fraction_holds_model(intent: Intent[GpuWorkload], memory: int, findings: Findings) -> None:
    """A fractional claim is sized by the user; a model that does not fit it runs out of memory at start."""
    model = intent.model.spec.model
    assert model is not None
    need = model_bytes(model)
    if need > memory:
        findings.add(intent.error(("spec", "gpu", "memory"),
                                  f"the model needs {need / GIB:.1f} GiB (weights and KV cache), more than the "
                                  f"{intent.model.spec.gpu.memory} of GPU memory each replica gets",
                                  f"raise gpu.memory to at least {-(-need // GIB)}Gi, or lower precision, contextLength or concurrency"))


def _mig_memory(pool: PoolMatch, slices) -> int:
    profiles = {p.name: p for p in pool.pool.gpu.mig.profiles.values()} if pool.pool.gpu.mig else {}
    return sum(profiles[s.profile].memory_bytes * s.count for s in slices if s.profile in profiles)


def _check_mig_holds_model(intent: Intent[GpuWorkload], serving: list[PoolMatch], findings: Findings) -> None:
    """A model on MIG slices is not sized (the mix is the user's), but a mix too small for it is a mistake."""
    w = intent.model
    assert w.spec.model is not None and w.spec.gpu.mig is not None
    need = model_bytes(w.spec.model)
    held = max(_mig_memory(m, w.spec.gpu.mig.slices) for m in serving)
    if held and need > held:
        findings.add(intent.warning(("spec", "gpu", "mig", "slices"),
                                    f"the model needs {need / GIB:.1f} GiB, but these MIG slices hold {held / GIB:.1f} GiB",
                                    "add or enlarge slices, lower precision / contextLength / concurrency, or use full GPUs "
                                    "with count: auto"))


def with_cache(plan: WorkloadPlan, findings: Findings) -> WorkloadPlan:
    """A model's NIMCache volume: from the model unless the intent sizes it; a size the files do not fit is refused."""
    w = plan.workload
    if w.spec.model is None:
        return plan
    profiles = len({a.gpus for a in plan.alternatives if a.viable}) if plan.tensor_parallelism is None else 1
    cache = cache_size(w.spec.model, max(profiles, 1), w.spec.cache.size)
    if not cache.default and cache.size < cache.files:
        need = -(-cache.files // GIB)
        findings.add(plan.intent.error(("spec", "cache", "size"),
                                       f"the model's files take {cache.files / GIB:.1f} GiB "
                                       f"({w.spec.model.parameters / 1e9:g}B parameters at {w.spec.model.precision}"
                                       + (f", {profiles} tensor-parallel profiles" if profiles > 1 else "")
                                       + f"), more than the {cache.text} cache: the download would fail and the NIM never start",
                                       f"set cache.size to at least {need}Gi (gpuc's default, with headroom, when you leave it out)"))
    return dataclasses.replace(plan, cache=cache)


def plan_cluster(cluster: ResolvedCluster, fleet: Fleet, findings: Findings) -> ClusterPlan:
    workloads = fleet.workloads_on(cluster.name)
    needs: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (namespace, share group) -> what each member needs
    for w in workloads:
        group = w.model.share_group
        if group and w.model.spec.model is not None:
            needs.setdefault((w.model.metadata.namespace, group), []).append((w.model.metadata.name, model_bytes(w.model.spec.model)))
    plans = []
    for w in workloads:
        key = (w.model.metadata.namespace, w.model.share_group or "")
        others = tuple(n for n in needs.get(key, []) if n[0] != w.model.metadata.name)
        plans.append(with_cache(plan_workload(cluster, w, fleet, findings, others), findings))
    return ClusterPlan(cluster, tuple(plans))
