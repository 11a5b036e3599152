"""Consumable capacity (KEP-5075, DRAConsumableCapacity): what a request takes of a device's capacities.

The scheduler's rules, as k8s.io/dynamic-resource-allocation computes them: a capacity a request names
is rounded up by the capacity's request policy (to the range's minimum and step, or the next valid
value) and must stay within its maximum; a capacity it does not name consumes the policy's default, or
all of it when there is no policy. A device that allows multiple allocations holds claims while the sum
of what they consume stays within each capacity; any other device is a filter: every amount requested
must fit its capacity, and the claim takes it whole. Requests name capacities without a domain for the
device's driver.

The scheduler computes in int64: a negative amount, or a rounding by a range's step of an amount above
int64 or to one above it, is an error that aborts the pod's scheduling (CapacityError), not "does not fit".
"""

from __future__ import annotations

from fractions import Fraction

from ...cel import Quantity
from .model import Device, RequestPolicy

Amount = int | Fraction
Consumption = dict[tuple[str, str], Amount]  # (domain, capacity name) -> amount
MAX_INT64 = 2**63 - 1


class CapacityError(ValueError):
    """A capacity request the scheduler cannot compute with (k8s.io/dynamic-resource-allocation v0.37.2 aborts)."""


def requested(device: Device, requests: tuple[tuple[str, Quantity], ...]) -> dict[tuple[str, str], Amount] | None:
    """The request's amounts by qualified name, or None when it names a capacity the device lacks."""
    out = {}
    for name, quantity in requests:
        domain, _, ident = name.rpartition("/")
        key = (domain or device.driver, ident)
        if ident not in device.capacity.get(key[0], {}):
            return None
        out[key] = quantity.value
    return out


def _rounded(name: str, amount: Amount, policy: RequestPolicy) -> Amount:
    if policy.minimum is not None:
        low = policy.minimum.value
        if amount < low:
            return low
        if policy.step is not None and policy.step.value:
            if amount > MAX_INT64:
                raise CapacityError(f'capacity "{name}": capacity request cannot be represented in the device\'s range '
                                    f"arithmetic: request {amount} exceeds MaxInt64")
            step = policy.step.value
            steps = -((low - amount) // step)  # ceil((amount - low) / step)
            rounded = low + steps * step
            if rounded > MAX_INT64:
                raise CapacityError(f'capacity "{name}": capacity request cannot be represented in the device\'s range '
                                    f"arithmetic: rounding request {amount} up to the next step passes MaxInt64")
            return rounded
        return amount
    for value in policy.valid_values:
        if amount <= value.value:
            return value.value
    return amount


def _violates(amount: Amount, policy: RequestPolicy) -> bool:
    if policy.default is not None and amount == policy.default.value:
        return False
    if policy.minimum is not None:
        if policy.maximum is not None and amount > policy.maximum.value:
            return True
        return bool(policy.step is not None and policy.step.value and (amount - policy.minimum.value) % policy.step.value)
    if policy.valid_values:
        return all(amount != v.value for v in policy.valid_values)
    return False


def consumption(device: Device, requests: tuple[tuple[str, Quantity], ...]) -> Consumption | None:
    """What one allocation of `device` for a request with these capacity requests takes, or None when the
    request cannot be satisfied by it (a capacity it lacks, or an amount the policy refuses); CapacityError
    when the scheduler could not compute it."""
    asked = requested(device, requests)
    if asked is None:
        return None
    for (_, name), amount in asked.items():
        if amount < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
    if not device.multi:
        for (domain, name), amount in asked.items():
            if amount > device.capacity[domain][name].value:
                return None
        return {}
    out: Consumption = {}
    policies = device.policies or {}
    for domain, capacities in device.capacity.items():
        for name, total in capacities.items():
            policy = policies.get(domain, {}).get(name)
            wanted = asked.get((domain, name))
            taken: Amount
            if wanted is None:
                taken = policy.default.value if policy is not None and policy.default is not None else total.value
            else:
                taken = _rounded(name, wanted, policy) if policy is not None else wanted
            if policy is not None and _violates(taken, policy):
                return None
            if taken > total.value:
                return None
            out[(domain, name)] = taken
    return out


def fits(device: Device, taken: Consumption, *already: Consumption | None) -> bool:
    """Whether `taken` fits the device's capacities next to what is already consumed."""
    for (domain, name), amount in taken.items():
        used = sum((a.get((domain, name), 0) for a in already if a), 0)
        if used + amount > device.capacity[domain][name].value:
            return False
    return True


__all__ = ["CapacityError", "Consumption", "RequestPolicy", "consumption", "fits", "requested"]
