"""CEL device selectors gpuc writes, in the forms the NVIDIA driver's attributes need.

Attributes are always fully qualified (`device.attributes['gpu.nvidia.com'].x`), versions are
compared with the DRA `semver()` helpers and memory with `quantity()` (string comparison of
"9.0.0" vs "10.0.0" or of byte counts would be wrong), exactly as notes/dra-driver.md section 9 asks.
"""

from __future__ import annotations

from ..facts.driver import gpu_driver
from ..validate.intents import Require

DRIVER = gpu_driver()


def literal(text: str) -> str:
    """A CEL single-quoted string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def attribute(name: str, domain: str = DRIVER) -> str:
    return f"device.attributes[{literal(domain)}].{name}"


def capacity(name: str, domain: str = DRIVER) -> str:
    return f"device.capacity[{literal(domain)}].{name}"


def driver_and_type(device_type: str) -> str:
    return f"device.driver == {literal(DRIVER)} && {attribute('type')} == {literal(device_type)}"


def min_memory(quantity_text: str) -> str:
    return f"{capacity('memory')}.compareTo(quantity({literal(quantity_text)})) >= 0"


def device_id_in(ids: list[str]) -> str:
    """A vfio device's PCI device id (`0x2330`): the one attribute that names its GPU model, since its
    productName is the PCI database's name, not NVML's."""
    return f"{attribute('deviceID')} in [{', '.join(literal(i.lower()) for i in ids)}]"  # the driver prints "0x%04x"


def profile_is(profile: str) -> str:
    return f"{attribute('profile')} == {literal(profile)}"


def profile_in(profiles: list[str]) -> str:
    if len(profiles) == 1:
        return profile_is(profiles[0])
    return f"{attribute('profile')} in [{', '.join(literal(p) for p in profiles)}]"


def require_selectors(require: Require | None) -> list[str]:
    """One selector per requirement, in a fixed order, so a change shows as one line in a diff."""
    return [expr for expr, _ in require_selector_fields(require)]


def require_selector_fields(require: Require | None) -> list[tuple[str, str]]:
    """require_selectors with the `require` field (dotted, under require) each selector comes from."""
    if require is None:
        return []
    out = []
    if require.architecture:
        archs = require.architecture
        out.append((f"{attribute('architecture')} == {literal(archs[0])}" if len(archs) == 1
                    else f"{attribute('architecture')} in [{', '.join(literal(a) for a in archs)}]", "architecture"))
    if require.product_name:
        out.append((f"{attribute('productName')} == {literal(require.product_name)}", "productName"))
    if require.min_memory is not None:
        out.append((min_memory(require.min_memory.text), "minMemory"))
    if require.min_compute_capability:
        out.append((f"{attribute('cudaComputeCapability')}.compareTo(semver({literal(require.min_compute_capability)})) >= 0",
                    "minComputeCapability"))
    if require.min_driver_version:
        out.append((f"{attribute('driverVersion')}.compareTo(semver({literal(require.min_driver_version)})) >= 0", "minDriverVersion"))
    out.extend((expr, f"cel[{i}]") for i, expr in enumerate(require.cel))
    return out


def selector_list(expressions: list[str]) -> list[dict]:
    return [{"cel": {"expression": e}} for e in expressions]
