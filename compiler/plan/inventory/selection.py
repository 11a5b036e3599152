"""Which devices of an inventory a CEL selector lets through, memoised per inventory.

For every cluster the selector check (check/selectors.py) and the allocator's candidate index
(plan/allocator/candidates.py) filter the same devices through the same DeviceClass and request
selectors, one selector at a time over what the earlier ones let through. Each such step is
evaluated once per inventory and both read the result, instead of each walking every device.
"""

from __future__ import annotations

from ...cel import CelEvaluationError, Selector
from .model import Inventory

Step = tuple[tuple[int, ...], dict[int, str]]  # devices matched (inventory order), failures: device -> error text


def select(inventory: Inventory, selector: Selector, indices: tuple[int, ...]) -> Step:
    """The devices of `indices` (positions in inventory.devices) that `selector` matches, and those on
    which it fails, with the evaluation error; both in the order of `indices`."""
    key = (selector.text, indices)
    found = inventory.selections.get(key)
    if found is None:
        found = inventory.selections[key] = _evaluate(inventory, selector, indices)
    return found


def _evaluate(inventory: Inventory, selector: Selector, indices: tuple[int, ...]) -> Step:
    devices = inventory.devices
    matched: list[int] = []
    failures: dict[int, str] = {}
    for i in indices:
        try:
            if selector.matches(devices[i]):
                matched.append(i)
        except CelEvaluationError as exc:
            failures[i] = str(exc)
    return tuple(matched), failures
