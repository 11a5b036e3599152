"""Apply order and replacement behaviour, both read from the compiled graph.

Ordering mirrors Argo CD's sync waves: a wave starts only when the previous one is done. Each
resource therefore depends on every resource of the nearest earlier wave that has any (earlier waves
follow transitively), so `pulumi up` creates and `pulumi destroy` deletes in the same order as an
Argo CD sync: charts < node config < DeviceClasses < claims < NIMCache < NIMService.

Replacement options come from `KubeObject.replacements`, which the compiler declares for fields the
API server refuses to change in place; nothing here decides which fields those are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from compiler.lower.graph import Replacement, Wave


class WaveBarrier:
    """Hands out `depends_on` lists; resources must be added in non-decreasing wave order."""

    def __init__(self) -> None:
        self._by_wave: dict[Wave, list[pulumi.Resource]] = {}
        self._current: Wave | None = None

    def dependencies(self, wave: Wave) -> list[pulumi.Resource]:
        earlier = [w for w in self._by_wave if w < wave]
        return list(self._by_wave[max(earlier)]) if earlier else []

    def add(self, wave: Wave, resource: pulumi.Resource) -> None:
        if self._current is not None and wave < self._current:
            raise ValueError(f"wave {wave.name} added after wave {self._current.name}: register in wave order")
        self._current = wave
        self._by_wave.setdefault(wave, []).append(resource)


def replacement_options(replacements: Sequence[Replacement]) -> dict[str, Any]:
    """`replace_on_changes` for every immutable path; `delete_before_replace` when old and new cannot coexist."""
    if not replacements:
        return {}
    options: dict[str, Any] = {"replace_on_changes": [r.path for r in replacements]}
    if any(r.delete_first for r in replacements):
        options["delete_before_replace"] = True
    return options
