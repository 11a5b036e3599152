"""The built-in GPU catalog (data/gpu_catalog.yaml) as typed records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from . import load_table

MIB = 1024 * 1024


@dataclass(frozen=True)
class MigProfile:
    name: str
    shape: str
    compute_slices: int
    memory_slices: int
    placements: tuple[int, ...]
    max_instances: int
    gi_profile_id: int
    memory_mib: int
    capacities: tuple[tuple[str, int], ...]  # multiprocessors, copyEngines, ... (memory is separate)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB


@dataclass(frozen=True)
class MigGeometry:
    name: str
    compute_slices: int
    memory_slices: int
    profiles: dict[str, MigProfile]
    balanced: dict[str, int]


PROVENANCE_KINDS = ("measured", "documented", "observed", "estimated")  # data/gpu_catalog.yaml header


@dataclass(frozen=True)
class Provenance:
    """Where a model's facts come from: per group (`memory`, `mig`) a kind and its source."""

    kinds: tuple[tuple[str, str, str], ...]  # (group, kind, source)
    estimated: tuple[str, ...] = ()  # MIG profiles whose values are estimates within an otherwise sourced group

    def kind(self, group: str) -> str:
        return next((k for g, k, _ in self.kinds if g == group), "estimated")


@dataclass(frozen=True)
class GpuModel:
    key: str
    product_name: str
    architecture: str
    brand: str
    compute_capability: str
    memory_mib: int
    multiprocessors: int
    pci_device_ids: tuple[str, ...]
    mig: MigGeometry | None
    nvlink: str = "none"  # nvswitch | mnnvl | none (see data/gpu_catalog.yaml)
    provenance: Provenance = Provenance(())

    @property
    def nvlink_within_node(self) -> bool:
        """Every GPU of a node is NVLink-connected to every other (NVSwitch)."""
        return self.nvlink in ("nvswitch", "mnnvl")

    @property
    def multi_node_nvlink(self) -> bool:
        """NVLink reaches across nodes (an NVL72 domain): what a ComputeDomain needs."""
        return self.nvlink == "mnnvl"

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    def named_layouts(self) -> dict[str, dict[str, int]]:
        """mig-parted named configs that apply to this model: all-balanced and all-<profile>."""
        if self.mig is None:
            return {}
        layouts = {"all-balanced": dict(self.mig.balanced)}
        for profile in self.mig.profiles.values():
            layouts["all-" + profile.name.replace("+", ".")] = {profile.name: profile.max_instances}
        return layouts


def _max_instances(placements: tuple[int, ...], size: int) -> int:
    used: set[int] = set()
    count = 0
    for start in placements:
        span = set(range(start, start + size))
        if not span & used:
            used |= span
            count += 1
    return count


def _geometry(data: dict, shapes: dict) -> MigGeometry:
    shape_table = shapes[data["geometry"]]
    profiles = {}
    for name, p in data["profiles"].items():
        shape = shape_table["shapes"][p["shape"]]
        placements = tuple(shape["placements"])
        caps = tuple((k, int(p[k])) for k in ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"))
        profiles[name] = MigProfile(
            name=name,
            shape=p["shape"],
            compute_slices=shape["computeSlices"],
            memory_slices=shape["memorySlices"],
            placements=placements,
            max_instances=p.get("maxInstances", _max_instances(placements, shape["memorySlices"])),
            gi_profile_id=shape["giProfileId"],
            memory_mib=p["memoryMiB"],
            capacities=caps,
        )
    return MigGeometry(data["geometry"], shape_table["computeSlices"], shape_table["memorySlices"], profiles, dict(data["balanced"]))


def _provenance(key: str, data: dict) -> Provenance:
    kinds = tuple((group, str(v["kind"]), str(v["source"])) for group, v in data.items() if group != "estimated")
    bad = [k for _, k, _ in kinds if k not in PROVENANCE_KINDS]
    if bad:
        raise ValueError(f"gpu_catalog.yaml {key}: provenance kind {bad[0]!r} is not one of {', '.join(PROVENANCE_KINDS)}")
    return Provenance(kinds, tuple(data.get("estimated") or ()))


@cache
def gpu_models() -> dict[str, GpuModel]:
    table = load_table("gpu_catalog")
    models = {}
    for key, m in table["models"].items():
        models[key] = GpuModel(
            key=key,
            product_name=m["productName"],
            architecture=m["architecture"],
            brand=m["brand"],
            compute_capability=str(m["cudaComputeCapability"]),
            memory_mib=m["memoryMiB"],
            multiprocessors=m["multiprocessors"],
            pci_device_ids=tuple(m["pciDeviceIds"]),
            mig=_geometry(m["mig"], table["migShapes"]) if "mig" in m else None,
            nvlink=m.get("nvlink", "none"),
            provenance=_provenance(key, m.get("provenance") or {}),
        )
    return models


@cache
def architectures() -> tuple[str, ...]:
    return tuple(sorted({m.architecture for m in gpu_models().values()}))


def host_defaults() -> dict[str, Any]:
    return dict(load_table("gpu_catalog")["hostDefaults"])
