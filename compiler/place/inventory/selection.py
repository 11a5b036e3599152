"""Which devices of an inventory a CEL selector lets through, memoised per inventory.

For every cluster the selector check (check/selectors.py) and the allocator's candidate index
(place/allocator/candidates.py) filter the same devices through the same DeviceClass and request
selectors, one selector at a time over what the earlier ones let through. Each such step is
evaluated once per inventory and both read the result, instead of each walking every device.

Within a step, devices that share a template (Device.template: a synthesized pool's device at one
place on each of its nodes) share one outcome, unless the selector reads an attribute that differs
within a template (Inventory.varying, the UUIDs) or the whole device.
"""

from __future__ import annotations

from ...cel import CelEvaluationError, Selector
from ...cel.analysis import WHOLE_DEVICE
from .model import Device, Inventory

Step = tuple[tuple[int, ...], dict[int, str]]  # devices matched (inventory order), failures: device -> error text


def select(inventory: Inventory, selector: Selector, indices: tuple[int, ...]) -> Step:
    """The devices of `indices` (positions in inventory.devices) that `selector` matches, and those on
    which it fails, with the evaluation error; both in the order of `indices`."""
    key = (selector.text, indices)
    found = inventory.selections.get(key)
    if found is None:
        found = inventory.selections[key] = _evaluate(inventory, selector, indices)
    return found


def reads_only_shared(selector: Selector, varying: frozenset[tuple[str, str]]) -> bool:
    """Whether the selector's result is the same on every device of a template."""
    for ref in selector.analysis.refs:
        if ref.field == WHOLE_DEVICE:
            return False
        if ref.field == "attributes" and varying and (
                ref.domain is None or (ref.name is None and any(domain == ref.domain for domain, _ in varying))
                or (ref.domain, ref.name) in varying):
            return False
    return True


def _outcome(selector: Selector, device: Device) -> bool | str:
    try:
        return selector.matches(device)
    except CelEvaluationError as exc:
        return str(exc)


def _evaluate(inventory: Inventory, selector: Selector, indices: tuple[int, ...]) -> Step:
    devices = inventory.devices
    shared = reads_only_shared(selector, inventory.varying)
    by_template: dict[int, bool | str] = {}
    matched: list[int] = []
    failures: dict[int, str] = {}
    for i in indices:
        device = devices[i]
        template = device.template
        if shared and template >= 0:
            outcome = by_template.get(template)
            if outcome is None:
                outcome = by_template[template] = _outcome(selector, device)
        else:
            outcome = _outcome(selector, device)
        if outcome is True:
            matched.append(i)
        elif outcome is not False:
            failures[i] = outcome
    return tuple(matched), failures
