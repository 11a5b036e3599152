"""GPU sizing for `count: auto` (DESIGN.md section 5).

need = parameters x bytes(precision) x overhead + KV cache, where
KV cache = per-token bytes x contextLength x concurrency and
per-token bytes = 2 x layers x kvHeads x headDim x bytes(KV element).
The chosen count is the smallest of 1, 2, 4, 8 whose per-GPU share fits the GPU memory of a pool
that can serve the workload and has that many GPUs on one node. A multi-node replica spreads the
model over count x nodes GPUs (tensor parallelism within a node, pipeline parallelism across them),
so its share is need / (count x nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..cel.quantity import Quantity
from ..facts.platform import ModelShape, nearest_shape, sizing_table
from ..validate.intents import ModelSpec
from .matching import PoolMatch

GIB = 1024**3


@dataclass(frozen=True)
class Sizing:
    parameters: float
    precision: str
    weight_bytes_per_param: float
    overhead: float
    weights: int
    shape: ModelShape
    kv_element_bytes: int
    kv_per_token: int
    context_length: int
    concurrency: int
    kv_cache: int
    need: int
    candidates: tuple[tuple[str, int, int], ...]  # (pool, GPU memory bytes, GPUs per node)
    count: int | None  # chosen / requested GPUs per pod (per node of a replica); None when nothing fits
    auto: bool
    nodes: int = 1  # nodes (pods) per replica: multiNode.nodes
    shared_with: tuple[tuple[str, int], ...] = ()  # other members of the share group and their need
    steps: tuple[str, ...] = field(default=())  # one line per count tried, for `gpuc explain`

    @property
    def total_need(self) -> int:
        """What must fit on the claim's GPUs: this model plus the models it shares them with."""
        return self.need + sum(n for _, n in self.shared_with)

    @property
    def gpus_per_replica(self) -> int | None:
        return self.count * self.nodes if self.count else None

    @property
    def per_gpu(self) -> int:
        gpus = self.gpus_per_replica
        return math.ceil(self.total_need / gpus) if gpus else self.total_need


MIB = 1024**2


def memory_floor(share: int, gpu_memory: list[int] | tuple[int, ...] = ()) -> int:
    """The per-GPU memory floor (bytes) sizing adds as a selector for `share` bytes: whole GiB, rounded up,
    unless that would shut out a GPU the share fits (79.5 GiB on an 80 GB H100 of 79.6 GiB), then whole MiB."""
    whole = math.ceil(share / GIB) * GIB
    exact = math.ceil(share / MIB) * MIB
    return exact if any(exact <= m < whole for m in gpu_memory) else whole


def floor_text(floor: int) -> str:
    """A memory floor as a selector writes it: "45Gi", or "81408Mi" when it is not whole GiB."""
    return str(Quantity.of_bytes(floor))


def model_need(model: ModelSpec) -> tuple[ModelShape, dict]:
    table = sizing_table()
    shape = nearest_shape(model.parameters)
    bpp = float(table["precisionBytes"][model.precision])
    overhead = float(table["overhead"])
    weights = math.ceil(model.parameters * bpp * overhead)
    kv_elem = int(table["kvCacheBytes"][model.precision])
    kv_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * kv_elem
    kv = kv_token * model.context_length * model.concurrency
    return shape, {"bpp": bpp, "overhead": overhead, "weights": weights, "kv_elem": kv_elem, "kv_token": kv_token, "kv": kv}


def size_model(model: ModelSpec, matches: list[PoolMatch], requested: int | None, fixed: int | None = None,
               shared_with: tuple[tuple[str, int], ...] = (), nodes: int = 1) -> Sizing:
    """Size a model against the pools that can serve it.

    `requested` is an explicit gpu.count (sizing then only reports the arithmetic); `fixed` is a count
    another rule imposes (an NVLink partition is allocated whole); `shared_with` lists the models of
    the same share group, whose memory lands on the same GPUs; `nodes` is multiNode.nodes.
    """
    shape, n = model_need(model)
    need = n["weights"] + n["kv"]
    total = need + sum(other for _, other in shared_with)
    candidates = tuple(sorted(((m.pool.name, m.pool.full_gpu_memory_bytes, m.pool.spec.gpu.count) for m in matches if m.ok),
                              key=lambda c: (-c[1], c[0])))
    steps: list[str] = []
    count: int | None
    if requested is not None or fixed is not None:
        count = fixed if fixed is not None else requested
    else:
        count = None
        across = f" x {nodes} nodes" if nodes > 1 else ""
        for tries in sizing_table()["autoCounts"]:
            share = math.ceil(total / (tries * nodes))
            # the claim will select GPUs with at least the share's floor (memory_floor): fit on that
            floor = memory_floor(share, [c[1] for c in candidates])
            fitting = [c for c in candidates if c[1] >= floor and c[2] >= tries]
            if fitting:
                steps.append(f"{tries} GPU(s){across}: {share / GIB:.1f} GiB each -> fits pool {fitting[0][0]} "
                             f"({fitting[0][1] / GIB:.1f} GiB x {fitting[0][2]} per node)")
                count = tries
                break
            largest = max(candidates, key=lambda c: c[1]) if candidates else None
            steps.append(f"{tries} GPU(s){across}: {share / GIB:.1f} GiB each -> "
                         + (f"too big for the largest GPU ({largest[1] / GIB:.1f} GiB, pool {largest[0]})"
                            if largest and largest[1] < floor else
                            "no pool has that many GPUs per node" if largest else "no pool can serve the workload"))
    return Sizing(
        parameters=model.parameters, precision=model.precision, weight_bytes_per_param=n["bpp"], overhead=n["overhead"],
        weights=n["weights"], shape=shape, kv_element_bytes=n["kv_elem"], kv_per_token=n["kv_token"],
        context_length=model.context_length, concurrency=model.concurrency, kv_cache=n["kv"], need=need,
        candidates=candidates, count=count, auto=requested is None and fixed is None, nodes=nodes, steps=tuple(steps),
        shared_with=shared_with,
    )


@dataclass(frozen=True)
class CacheSize:
    """The NIMCache volume: what the model's files take, and what gpuc asks for."""

    files: int  # bytes: parameters x bytes per weight, once per tensor-parallel profile
    profiles: int
    size: int  # bytes requested
    text: str  # as rendered, e.g. "190Gi"
    default: bool  # derived from the model (no cache.size in the intent)
    headroom: float

    def lines(self) -> list[str]:
        files = f"files = {self.files / self.profiles / GIB:.1f} GiB" + (f" x {self.profiles} profiles" if self.profiles > 1 else "")
        if self.default:
            return [f"cache: {self.text} (default: {files}, x {self.headroom:g} headroom, rounded up)"]
        return [f"cache: {self.text} (set in the intent; {files})"]


def cache_size(model: ModelSpec, profiles: int, explicit: Quantity | None) -> CacheSize:
    table = sizing_table()
    rules = table["cache"]
    files = math.ceil(model.parameters * float(table["precisionBytes"][model.precision])) * profiles
    if explicit is not None:
        return CacheSize(files, profiles, explicit.bytes, explicit.text, False, float(rules["headroom"]))
    step = int(rules["roundGiB"])
    gib = max(int(rules["minimumGiB"]), -(-math.ceil(files * float(rules["headroom"]) / GIB) // step) * step)
    return CacheSize(files, profiles, gib * GIB, f"{gib}Gi", True, float(rules["headroom"]))


def model_bytes(model: ModelSpec) -> int:
    _, n = model_need(model)
    return n["weights"] + n["kv"]
