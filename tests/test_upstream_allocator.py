"""gpuc's allocator against the upstream structured allocator's own test table (issue 25).

tests/upstream_allocator/cases.json holds every case of the table in k8s.io/dynamic-resource-allocation
v0.37.2 (Kubernetes 1.37), structured/internal/allocatortesting/{allocator_testing,lexicographical_testing}.go,
with the outcome the upstream allocator variant its feature set selects returns (see the file's header).
Each case named below runs through gpuc's allocator at the case's feature set (tests/upstream_table.py)
and must decide as upstream: error, does not fit, or the same devices per claim.

Every case of the table is listed here, none skipped (test_every_case_of_the_table_runs).
"""

from __future__ import annotations

import json
import time

import pytest
from upstream_table import CASES, agree, table

from compiler.place.allocator.features import AllocatorFeatures

# Agreed before issue 25 and still.
AGREED = (
    "admin-access-claims-device-allocating-for-non-admin-access", "admin-access-enabled", "all-devices-invalid-CEL",
    "all-devices-many", "all-devices-many-plus-another", "all-devices-many-plus-another-reversed",
    "all-devices-no-slices", "all-devices-no-slices-prioritized-list", "all-devices-no-solution",
    "all-devices-no-solution-reversed", "all-devices-of-the-incomplete-pool", "all-devices-plus-another",
    "all-devices-plus-another-reversed", "all-devices-single", "all-devices-slice-without-devices",
    "all-devices-slice-without-devices-prioritized-list", "all-devices-some-allocated",
    "all-devices-some-allocated-prioritized-list", "all-devices-with-consumed-counters",
    "allocation-mode-all-with-multi-host-resource-pool",
    "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
    "already-allocated-devices", "binding-conditions-without-feature-gate", "check-combinations-with-backtracking",
    "check-combinations-with-prioritized-list", "check-combinations-within-single-request-many-pools",
    "check-combinations-within-single-request-multiple-pools-multiple-slices",
    "check-combinations-within-single-request-single-pool-multiple-slices",
    "check-combinations-within-single-request-single-pool-single-slice",
    "claim-config-covering-all-requests-is-cleared", "claim-config-scoped-to-subrequests-of-one-request",
    "claim-with-device-config", "compatibility-groups-compatible",
    "compatibility-groups-compatible-with-allocated-peer", "compatibility-groups-multiple-claims",
    "compatibility-groups-multiple-counter-sets",
    "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
    "count-devices-some-allocated-admin-access", "derived-attributes-type-mismatch",
    "devices-split-across-different-slices", "different-resourceslices-in-pool-can-target-different-nodes",
    "duplicate-slice", "empty", "empty-class", "exact-count-sum-exactly-fills-claim-limit",
    "exact-count-sum-exceeds-claim-limit", "exact-count-total-overflows-claim-limit",
    "exact-count-total-would-wrap-to-zero", "invalid-CEL-all-devices", "invalid-CEL-one-device",
    "invalid-CEL-one-device-class", "invalid-pool-is-error-if-no-other-device-can-be-allocated",
    "lexicographical-sorting-pools", "lexicographical-sorting-slices",
    "list-attributes-match-constaint-scalar-string-values", "many-devices-okay", "many-network-attached-devices",
    "max-number-devices", "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
    "multi-host-resource-pool-with-stale-slice-for-current-node", "network-attached-device", "no-claims-to-allocate",
    "no-classes", "no-slices", "node-restriction", "not-enough-suitable-devices", "optional-node-operations",
    "other-node", "partitionable-all-mode-constraint-must-error-with-reserved-counter",
    "partitionable-consumable-capacity-backtrack-releases-counter",
    "partitionable-devices-constraint-releases-counter",
    "partitionable-devices-counter-cache-not-crossed-between-driver-schemas",
    "partitionable-devices-counter-cache-scoped-by-pool-ID",
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
    "partitionable-devices-devices-consume-counter-set-in-different-nodes",
    "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
    "partitionable-devices-multiple-capacity-pools", "partitionable-devices-multiple-counters",
    "partitionable-devices-multiple-devices", "partitionable-devices-multiple-pools",
    "partitionable-devices-no-capacity-available", "partitionable-devices-overallocated-capacity-pool",
    "partitionable-devices-per-device-node-selection-nodename", "partitionable-devices-prioritized-list",
    "partitionable-devices-same-counter-set-name-in-different-resource-slices",
    "partitionable-devices-single-device", "partitionable-devices-unused-counters-in-counter-set",
    "partitionable-devices-with-attribute-selector", "partitionable-devices-with-binding-conditions-and-taints",
    "prioritized-list-allocation-mode-all", "prioritized-list-allocation-mode-all-multiple-requests",
    "prioritized-list-allocation-mode-all-with-selectors",
    "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
    "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
    "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
    "prioritized-list-class-config", "prioritized-list-device-config", "prioritized-list-first-unavailable",
    "prioritized-list-max-allocation-allocation-mode-all", "prioritized-list-minimum-sum-exceeds-claim-limit",
    "prioritized-list-multi-request", "prioritized-list-non-available",
    "prioritized-list-overflowing-first-subrequest-is-pruned",
    "prioritized-list-subrequests-with-allocation-mode-all",
    "prioritized-list-subrequests-with-constraints-ref-parent-request",
    "prioritized-list-subrequests-with-constraints-ref-sub-request", "prioritized-list-subrequests-with-expressions",
    "prioritized-list-too-many-in-first-subrequest", "prioritized-list-with-backtracking",
    "separate-claims-share-device-admin-access", "several-different-drivers", "simple", "small-and-large",
    "small-and-large-backtrack-claims", "small-and-large-backtrack-requests", "tainted-admin-access-disabled",
    "tainted-all-devices-single-disabled", "tainted-disabled", "tainted-no-effect",
    "tainted-one-device-two-taints-both-tolerated", "tainted-prioritized-list-disabled",
    "too-many-devices-single-request", "too-many-devices-total", "unknown-allocation-mode", "unknown-class",
    "unknown-constraint", "unknown-selector", "unsuccessful-allocation-network-attached-device",
    "with-claim-config-for-two-requests", "with-class-device-config",
    "with-class-device-config-with-multiple-request-and-configs", "with-constraint", "with-constraint-for-request",
    "with-constraint-for-request-retry", "with-constraint-non-existent-attribute",
    "with-constraint-not-matching-bool-attribute", "with-constraint-not-matching-int-attribute",
    "with-constraint-not-matching-int-attribute-all-devices", "with-constraint-not-matching-string-attribute",
    "with-constraint-not-matching-version-attribute",
)

# Agreed since the fixes of issue 25: feature gates per case (admin access, prioritized lists, consumable
# capacity refused when off; binding conditions, per-device node selection, counters hidden when off),
# device.allowMultipleAllocations in CEL, devices allowing multiple allocations shared across requests and
# claims with their counters charged once and never when held dedicated, allocationMode All with capacity
# requests, device taints and request tolerations, distinctAttribute, the per-claim limit pruning
# firstAvailable alternatives, "E" (exa) quantities, and the 1.35+ pool rules (incomplete and invalid pools,
# bad counter references included, skipped; a node where nothing fits beside an invalid pool is an error);
# list-typed attributes (matchAttribute a common element, distinctAttribute disjoint, the values as CEL lists; with
# the gate off a list value satisfies no constraint past its first device), an attribute without a value refused;
# compatibility groups (devices drawing from one counter set share a group; pools declaring groups skipped with
# the gate off) and derived attributes (a request's CEL-computed attribute read by its constraints); capacity
# amounts the scheduler cannot compute in int64 (negative, or past MaxInt64 in range rounding) are errors; a node
# keeps its own complete older generation of a pool whose newer generation is on other nodes; devices of slices
# skipping node operations only on nodes that declare DRAOptionalNodeOperations; a node's devices in the
# scheduler's pool order (by driver and pool name, network-attached pools among the node's own, pools with
# binding conditions last).
FIXED = (
    "admin-access-disabled", "all-devices-some-allocated-admin-access", "all-devices-some-allocating-admin-access",
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
    "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
    "allow-multiple-allocations-with-partitionable-device",
    "allow-multiple-allocations-with-shared-device-counter-cross-cycle", "binding-conditions-multiple-devices",
    "binding-conditions-with-and-without", "check-combinations-with-backtracking-across-slices-and-pools",
    "compatibility-groups-disabled-skips-grouped-pool",
    "compatibility-groups-disabled-skips-ungrouped-device-in-grouped-pool", "compatibility-groups-incompatible",
    "compatibility-groups-incompatible-with-allocated-peer", "compatibility-groups-multiple-claims-incompatible",
    "compatibility-groups-multiple-counter-sets-spanning-device", "compatibility-groups-taint-rollback",
    "compatibility-groups-with-consumable-capacity", "compatibility-groups-with-prioritized-list",
    "consumable-capacity-dedicated-device-with-consumable-capacity-request", "consumable-capacity-disabled-feature",
    "consumable-capacity-disabled-feature-with-prioritized-list", "consumable-capacity-fractional-range-gate-disabled",
    "consumable-capacity-fractional-range-gate-enabled-round-up",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
    "consumable-capacity-multi-allocatable-device-with-range-policy-step",
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
    "consumable-capacity-multi-allocatable-device-with-subrequest",
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
    "consumable-capacity-negative-request-aborts",
    "consumable-capacity-range-policy-allocation-mode-all-overflow-aborts",
    "consumable-capacity-range-policy-overflow-aborts-not-skip",
    "consumable-capacity-range-policy-request-above-int64-rejected",
    "consumable-capacity-range-policy-rounded-value-overflow-rejected",
    "consumable-capacity-rejection-rolls-back-constraints", "consumable-capacity-requests-are-not-modified",
    "consumable-capacity-with-multi-allocatable-device-backtrack",
    "consumable-capacity-with-partitionable-device-multiple-capacity-pools", "derived-attributes",
    "derived-attributes-cel-missing-attribute", "derived-attributes-override",
    "derived-attributes-with-prioritized-list", "device-binding-conditions",
    "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
    "distinct-constraint-single-request-count-3-all-distinct",
    "distinct-constraint-single-request-count-3-not-distinct",
    "distinct-constraint-single-request-multiple-devices-attribute-not-set",
    "distinct-constraint-single-request-multiple-devices-attribute-set",
    "distinct-constraint-single-request-not-enough-distinct-values",
    "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
    "distinct-constraint-two-requests-with-count-not-distinct",
    "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
    "lexicographical-sorting-pools-with-binding-conditions", "lexicographical-sorting-slices-with-binding-conditions",
    "list-attributes-disabled-distinct-constraint-with-lists", "list-attributes-disabled-match-constraint-with-lists",
    "list-attributes-distinct-constaint-with-empty-or-unknown-type",
    "list-attributes-distinct-constraint-backtrack-needs-remove",
    "list-attributes-distinct-constraint-list-of-bool-values-all-distinct",
    "list-attributes-distinct-constraint-list-of-int-values-all-distinct",
    "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
    "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
    "list-attributes-distinct-constraint-list-of-version-values-all-distinct",
    "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
    "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
    "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
    "list-attributes-distinct-constraint-scalar-string-values-not-distinct",
    "list-attributes-distinct-constraint-single-request-count-3-all-distinct",
    "list-attributes-distinct-constraint-single-request-count-3-not-distinct",
    "list-attributes-match-constaint-list-of-bool-values-with-common-elements",
    "list-attributes-match-constaint-list-of-int-values-with-common-elements",
    "list-attributes-match-constaint-list-of-string-values-with-common-elements",
    "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
    "list-attributes-match-constaint-list-of-string-values-without-common-elements",
    "list-attributes-match-constaint-list-of-version-values-with-common-elements",
    "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
    "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
    "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-without-common-elements",
    "list-attributes-match-constaint-with-empty-or-unknown-type",
    "list-attributes-match-constraint-backtrack-needs-intersection-restore", "local-and-network-attached-devices",
    "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
    "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
    "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1", "no-allocation-from-incomplete-pools",
    "numanode-matchattribute-disjoint-lists-are-not-allocated",
    "numanode-matchattribute-overlapping-lists-are-co-placed", "obsolete-slice",
    "optional-node-operations-missing-feature", "partitionable-consumable-capacity-shared-device-counter-not-recharged",
    "partitionable-devices-counter-quantities-are-not-modified",
    "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
    "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
    "partitionable-devices-disabled-device-consumes-counters",
    "partitionable-devices-disabled-other-device-do-not-consume-counters",
    "partitionable-devices-disabled-per-device-node-selection",
    "partitionable-devices-per-device-node-selection-node-selector",
    "partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
    "partitionable-devices-taint-releases-counter", "partitionable-devices-validation-error-on-non-targeting-slice",
    "partitionable-devices-with-binding-conditions",
    "partitionable-devices-with-binding-conditions-and-taints-tolerated",
    "partitionable-devices-with-binding-conditions-multi-slices",
    "partitionable-devices-with-binding-conditions-multiple",
    "partitionable-devices-with-binding-conditions-some-devices-no-conditions",
    "partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership", "prioritized-list-disabled",
    "prioritized-list-max-allocation-limit-request", "tainted-admin-access", "tainted-all-devices-single",
    "tainted-one-device-two-taints", "tainted-prioritized-list", "tainted-two-devices",
    "tainted-two-devices-prioritized-list-tolerated", "tainted-two-devices-tolerated", "with-distinct-constraints",
    "with-distinct-constraints-attribute-not-set", "with-distinct-constraints-unknown-type-attribute",
    "with-distinct-constraints-with-subrequests",
)


def test_the_table_is_whole_and_names_its_source() -> None:
    doc = json.loads(CASES.read_text())
    assert doc["source"]["version"] == "v0.37.2" and doc["source"]["kubernetes"] == "1.37"
    assert len(table()) == 279
    assert set(AGREED) | set(FIXED) <= set(table()) and not set(AGREED) & set(FIXED)


def test_every_case_of_the_table_runs() -> None:
    assert set(AGREED) | set(FIXED) == set(table())


@pytest.mark.parametrize("name", AGREED + FIXED)
def test_gpuc_allocates_as_the_upstream_allocator(name: str) -> None:
    same, want, got = agree(table()[name])
    assert same, f"upstream {want}, gpuc {got}"


def test_a_claim_at_the_32_device_limit_is_decided_in_under_a_second() -> None:
    """Two requests of 32-or-16 devices out of 64: the 32-device alternative leaves no room for the second
    request, and is pruned before its 1.8e18 combinations are searched."""
    case = table()["prioritized-list-max-allocation-limit-request"]
    start = time.perf_counter()
    same, want, got = agree(case)
    assert same, f"upstream {want}, gpuc {got}"
    assert time.perf_counter() - start < 1.0


def test_the_variant_follows_the_feature_set_as_upstream_selects_it() -> None:
    order = ["stable", "incubating", "experimental"]
    for case in table().values():
        selected = AllocatorFeatures.of(case["features"]).variant
        if case["file"].endswith("lexicographical_testing.go"):  # upstream runs these on incubating and later only
            assert order.index(selected) <= order.index(case["allocator"]), case["name"]
        else:
            assert selected == case["allocator"], case["name"]
    assert AllocatorFeatures.for_minor(34).variant == "stable"  # one gate of the binding pair alone selects nothing
    assert AllocatorFeatures.for_minor(36).variant == "incubating"
