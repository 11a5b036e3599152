"""What a driver line can ever publish: the vocabulary static CEL checks hold selectors against.

Derived from the same facts the synthesizer uses, so "the driver publishes X" means the same to
`gpuc inventory` and to the selector checks.
"""

from __future__ import annotations

from ...cel import Published
from ...facts.driver import (
    DriverLine,
    compute_domain_devices,
    device_attributes,
    device_capacities,
    gpu_driver,
    static_mig_memory_slice,
)
from .codec import ATTRIBUTE_TYPES

GPU_DRIVER = gpu_driver()


def published(line: DriverLine) -> Published:
    attributes: dict[str, dict[str, str]] = {}
    for device_type in ("gpu", "mig"):
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
    return Published({d: dict(sorted(a.items())) for d, a in sorted(attributes.items())}, {GPU_DRIVER: frozenset(capacities)})
