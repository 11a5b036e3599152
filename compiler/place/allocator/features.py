"""Which DRA features the allocator honours: the cluster's feature gates, as the scheduler passes them.

Kubernetes hands its structured allocator a feature set built from the gates (DRAAdminAccess,
DRAPrioritizedList, ...) and picks the implementation - stable, incubating or experimental - that
supports all of them (data/kubernetes.yaml `allocatorVariants`). A request, device or constraint that
needs a gate that is off is treated as the scheduler treats it on that version: not allocatable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from ...facts.platform import allocator_variants, dra_gates, pools_skipped_from

# The gates upstream's Features struct pairs into one feature (Features.Set names it "A+B").
PAIRED = ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus")


NEWEST = 37  # the minor of the allocator gpuc follows when no cluster version is given (the upstream table's)


@dataclass(frozen=True)
class AllocatorFeatures:
    gates: frozenset[str]
    minor: int = NEWEST  # behaviour that changed between minors without a gate follows this minor

    @classmethod
    def of(cls, names: Iterable[str], minor: int = NEWEST) -> AllocatorFeatures:
        """From gate names; upstream's paired "DRADeviceBindingConditions+DRAResourceClaimDeviceStatus" too."""
        return cls(frozenset(part for name in names for part in name.split("+")), minor)

    @classmethod
    @cache
    def for_minor(cls, minor: int) -> AllocatorFeatures:
        """The gates Kubernetes 1.<minor> turns on by default."""
        return cls(frozenset(name for name, gate in dra_gates().items() if gate.on_by_default(minor)), minor)

    def on(self, gate: str) -> bool:
        return gate in self.gates

    @property
    def binding(self) -> bool:
        """Binding conditions are one feature upstream: both gates must be on."""
        return all(g in self.gates for g in PAIRED)

    @property
    def skips_unusable_pools(self) -> bool:
        """Incomplete and invalid pools are skipped (not used, not fatal): data/kubernetes.yaml allocatorPools."""
        return self.minor >= pools_skipped_from()

    @property
    def variant(self) -> str:
        """The upstream implementation the scheduler runs with these gates (the allocator's own gates only)."""
        variants = allocator_variants()
        known = {g for gates in variants.values() for g in gates}
        wanted = self.gates & known
        if not self.binding:
            wanted -= set(PAIRED)  # one feature upstream: on only with both gates
        return next((name for name, gates in variants.items() if wanted <= gates), "experimental")


ALL = AllocatorFeatures.of(g for gates in allocator_variants().values() for g in gates)
