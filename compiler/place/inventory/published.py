"""What a driver line can ever publish: the vocabulary static CEL checks hold selectors against.

Derived from the same facts the synthesizer uses, so "the driver publishes X" means the same to
`gpuc inventory` and to the selector checks.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...cel import Published
from ...facts.driver import (
    DriverLine,
    capability,
    compute_domain_devices,
    device_attributes,
    device_capacities,
    gpu_driver,
    static_mig_memory_slice,
)
from ...validate.resolved import ResolvedPool
from .codec import ATTRIBUTE_TYPES

GPU_DRIVER = gpu_driver()


def with_nics(base: Published, pools: Iterable[ResolvedPool]) -> Published:
    """`base` plus the attributes the pools say their NIC drivers publish (nodePools[].nics.attributes)."""
    extra: dict[str, dict[str, str]] = {}
    for pool in pools:
        nics = pool.spec.nics
        if nics is None:
            continue
        for name, value in nics.attributes.items():
            kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
            extra.setdefault(nics.driver, {})[name] = kind
    if not extra:
        return base
    attributes = {d: dict(a) for d, a in base.attributes.items()}
    for domain, names in extra.items():
        attributes.setdefault(domain, {}).update(names)
    return Published(attributes, base.capacities)


def published(line: DriverLine) -> Published:
    attributes: dict[str, dict[str, str]] = {}
    vfio = line.at_least(capability("Passthrough")["since"])  # gpu-vfio-<i> devices (gate PassthroughSupport)
    for device_type in ("gpu", "mig", "vfio") if vfio else ("gpu", "mig"):
        for fact in device_attributes(line, device_type).values():
            domain, ident = fact.qualified
            attributes.setdefault(domain, {})[ident] = fact.type
    cd_driver, devices = compute_domain_devices()
    for attrs in devices.values():
        for name, typed in attrs.items():
            (kind,) = typed
            assert kind in ATTRIBUTE_TYPES
            attributes.setdefault(cd_driver, {})[name] = kind
    capacities = set(device_capacities("gpu")) | set(device_capacities("gpuDynamicMig")) | set(device_capacities("mig"))
    capacities.add(static_mig_memory_slice().replace("{i}", "*"))
    if vfio:
        capacities |= set(device_capacities("vfio"))
    return Published({d: dict(sorted(a.items())) for d, a in sorted(attributes.items())}, {GPU_DRIVER: frozenset(capacities)})


def undeclared_host_attributes(line: DriverLine, pools: Iterable[ResolvedPool]) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
    """(domain, name) of each attribute whose value is the host's -> (the nodePools[].host field declaring it, the
    DRA pools that leave it undeclared). The synthesized inventory does not publish such an attribute on those
    pools, so what a selector reading it decides there is not known offline."""
    out: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
    for device_type in ("gpu", "mig", "vfio"):
        for fact in device_attributes(line, device_type).values():
            if not fact.host:
                continue
            missing = tuple(p.name for p in pools if p.spec.host is None or p.spec.host.model_dump(by_alias=True)[fact.host] is None)
            if missing:
                out[fact.qualified] = (fact.host, missing)
    return out

