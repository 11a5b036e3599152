"""GPU models a running cluster publishes that the catalog does not know (GH200, V100, ...).

A pool may name such a GPU by the productName its DRA driver publishes when the cluster's ResourceSlices
are given with --state: the model's facts (memory, architecture, compute capability) are read from the
devices themselves. Nothing is assumed that the slices do not say: no MIG geometry, no NVLink across
GPUs, no PCI device IDs; a pool that needs those needs a catalog entry.
"""

from __future__ import annotations

from typing import Any

from ..facts import catalog
from ..facts.catalog import MIB, GpuModel
from ..facts.driver import gpu_driver
from ..facts.providers import detect_provider
from ..load.state import ClusterState
from .types import quantity_value


def _value(attrs: dict[str, Any], name: str) -> Any:
    raw = attrs.get(name)
    return next(iter(raw.values()), None) if isinstance(raw, dict) and len(raw) == 1 else None


def provider_from_state(state: ClusterState | None) -> str | None:
    """The managed Kubernetes provider the state's Nodes say the cluster runs on (a label all its nodes carry)."""
    if state is None:
        return None
    nodes = [obj.metadata.get("labels") or {} for obj in state.of("", "Node")]
    found = detect_provider(nodes)
    return found.key if found else None


def models_from_state(state: ClusterState | None) -> dict[str, GpuModel]:
    """productName -> model, for every full GPU of the state's slices whose product the catalog lacks."""
    if state is None:
        return {}
    known = {m.product_name for m in catalog.gpu_models().values()}
    driver = gpu_driver()
    found: dict[str, GpuModel] = {}
    for obj in state.of("resource.k8s.io", "ResourceSlice"):
        if obj.spec.get("driver") != driver:
            continue
        for device in obj.spec.get("devices") or []:
            body = device.get("basic", device) if isinstance(device, dict) else {}  # v1beta1 nests the fields
            attrs = body.get("attributes") or {}
            product, kind = _value(attrs, "productName"), _value(attrs, "type")
            if not isinstance(product, str) or product in known or product in found or kind not in (None, "gpu"):
                continue
            amount = quantity_value(_value(body.get("capacity") or {}, "memory"))
            mib = int(amount) // MIB if amount is not None else 0
            if mib <= 0:
                continue
            found[product] = GpuModel(
                key=product, product_name=product, architecture=str(_value(attrs, "architecture") or "unknown"),
                brand=str(_value(attrs, "brand") or "unknown"),
                compute_capability=".".join(str(_value(attrs, "cudaComputeCapability") or "0.0").split(".")[:2]),
                memory_mib=mib, multiprocessors=0, pci_device_ids=(), mig=None)
    return found
