"""What the running cluster already holds: the devices of allocated ResourceClaims.

A plan against a running cluster starts from its allocated claims. gpuc's own claims (labelled by
gpuc: the shared ResourceClaims it renders and the claims pods made from its templates; or, without
the labels, matched by name, by spec, or by the pod that owns them) belong to pods that run: an
allocated claim cannot move without its pod restarting, so those made from what gpuc renders now keep
their devices and their pods stay where they are; only what is not allocated yet is planned. Those made
from an older version are replaced with their pods, which the plan says. Every other allocated claim
is capacity already taken, and a pod that no longer fits is told whose claims hold what it needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cel import Quantity, QuantityError
from ..diagnostics import Diagnostic
from ..load.state import ClusterState, StateObject, covers
from ..lower.claims import name_basis
from ..lower.graph import CompiledCluster
from ..lower.meta import MANAGED_BY, WORKLOAD
from .inventory import Inventory
from .inventory.capacity import Consumption

GROUP = "resource.k8s.io"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


@dataclass(frozen=True)
class HeldDevice:
    index: int  # into Inventory.devices
    taken: Consumption | None  # what it consumes of a device that allows multiple allocations
    admin: bool = False
    request: str = ""  # the claim's request the device was allocated for


@dataclass(frozen=True)
class HeldClaim:
    claim: str  # ns/name
    devices: tuple[HeldDevice, ...]


@dataclass(frozen=True)
class RunningClaim:
    """One of gpuc's claims allocated in the cluster, whose pod runs on its devices."""

    claim: str  # ns/name
    workload: str  # ns/name of the gpuc workload whose pod holds it
    shared: bool  # a ResourceClaim gpuc renders (every replica uses it), not one pod's instance of a template
    devices: tuple[HeldDevice, ...]


@dataclass(frozen=True)
class ClusterUse:
    """The allocated claims of the running cluster, split into gpuc's own and everybody else's."""

    foreign: tuple[HeldClaim, ...] = ()
    own: tuple[str, ...] = ()  # gpuc's claims found allocated
    running: tuple[RunningClaim, ...] = ()  # those of them made from what gpuc renders now: their pods stay put
    warnings: tuple[Diagnostic, ...] = ()
    live: bool = False  # read from a running cluster (NO_USE: an empty cluster)

    @property
    def devices(self) -> int:
        return sum(len(c.devices) for c in self.foreign)


NO_USE = ClusterUse()


class Ownership:
    """Which live claims gpuc's compiled objects produce."""

    def __init__(self, compiled: CompiledCluster) -> None:
        self.claims = {(o.namespace, o.name) for o in compiled.objects if o.kind == "ResourceClaim"}
        self.templates: dict[str, list[Any]] = {}
        for o in compiled.objects:
            if o.kind == "ResourceClaimTemplate":
                # in one request shape, as the claims read from the cluster are compared (whatever version wrote them)
                self.templates.setdefault(o.namespace, []).append(name_basis(o.manifest["spec"].get("spec", {})))
        self.workloads: dict[str, list[str]] = {}
        for p in compiled.plan.workloads:
            self.workloads.setdefault(p.namespace, []).append(p.name)
        # (ns, claim or template name) -> the workload that consumes it
        self.consumers = {(ref.namespace, ref.name): key for key, ref in compiled.claims.items()}
        self.template_specs = {(o.namespace, o.name): name_basis(o.manifest["spec"].get("spec", {}))
                               for o in compiled.objects if o.kind == "ResourceClaimTemplate"}

    def running(self, claim: StateObject) -> tuple[str, bool] | None:
        """(workload, shared) when `claim` is one gpuc renders now, or a pod's instance of the template gpuc renders
        now for that workload; None when it came from an older version (its pod is replaced)."""
        ns = claim.namespace
        if (ns, claim.name) in self.consumers:
            return self.consumers[(ns, claim.name)], True
        for (tns, name), spec in self.template_specs.items():
            if tns == ns and covers(spec, name_basis(claim.spec)):
                return self.consumers.get((ns, name), ""), False
        return None

    def owns(self, claim: StateObject) -> bool:
        ns = claim.namespace
        labels = claim.metadata.get("labels") or {}
        if labels.get(MANAGED_BY) == "gpuc" or WORKLOAD in labels:
            return True  # gpuc's shared claims, and claims made from its templates (any version of them)
        if (ns, claim.name) in self.claims:
            return True
        if POD_CLAIM_ANNOTATION not in (claim.metadata.get("annotations") or {}):
            return False  # written by hand or by another tool: a claim of the same spec is still somebody else's
        if any(covers(spec, name_basis(claim.spec)) for spec in self.templates.get(ns, [])):
            return True  # made from one of gpuc's templates (the template's spec, defaulted by the server)
        # made from a template for a pod of a gpuc workload: a template since changed (its pods are replaced)
        owners = [r.get("name", "") for r in claim.metadata.get("ownerReferences") or [] if r.get("kind") == "Pod"]
        return any(o.startswith(w + "-") for o in owners for w in self.workloads.get(ns, []))


def _consumed(raw: Any, driver: str) -> Consumption | None:
    if not isinstance(raw, dict) or not raw:
        return None
    out: Consumption = {}
    for name, value in raw.items():
        domain, _, ident = str(name).rpartition("/")
        try:
            out[(domain or driver, ident)] = Quantity.parse(value).value
        except QuantityError:
            continue
    return out


def cluster_use(compiled: CompiledCluster, state: ClusterState, inventory: Inventory) -> ClusterUse:
    """The allocated claims of `state`, resolved to devices of `inventory`."""
    ownership = Ownership(compiled)
    by_name = {(inventory.slices[d.slice_index].driver, inventory.slices[d.slice_index].pool, d.name): d.index
               for d in inventory.devices}
    foreign: list[HeldClaim] = []
    own: list[str] = []
    running: list[RunningClaim] = []
    warnings: list[Diagnostic] = []
    for claim in state.of(GROUP, "ResourceClaim"):
        allocation = claim.status.get("allocation")
        results = ((allocation or {}).get("devices") or {}).get("results") if isinstance(allocation, dict) else None
        if not isinstance(results, list) or not results:
            continue
        key = f"{claim.namespace}/{claim.name}"
        mine, current = ownership.owns(claim), None
        if mine:
            own.append(key)
            current = ownership.running(claim)
            if current is None:
                warnings.append(claim.diagnostic(
                    f"ResourceClaim {key} was made from an older version of a gpuc claim: the change replaces the pod "
                    "that holds it, and the plan places that pod anew (its devices are free once the old pod is gone)",
                    "roll the change out when the workload may restart", "warning", ("spec",)))
                continue
        devices, unknown = [], []
        for i, r in enumerate(results):
            if not isinstance(r, dict):
                continue
            index = by_name.get((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))))
            if index is None:
                unknown.append((i, f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"))
                continue
            consumed = _consumed(r.get("consumedCapacity"), str(r.get("driver")))
            if consumed is None and r.get("shareID"):
                consumed = {}  # a share of a device that allows multiple allocations, not a dedicated allocation
            devices.append(HeldDevice(index, consumed, r.get("adminAccess") is True, str(r.get("request") or "")))
        if mine and current is not None:  # a running pod's claim: it stays where it is
            if devices and not unknown:
                running.append(RunningClaim(key, current[0], current[1], tuple(devices)))
            continue
        if unknown:
            i, name = unknown[0]
            more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
            warnings.append(claim.diagnostic(
                f"ResourceClaim {key} holds device {name}{more}, which the inventory planned on does not have: not counted",
                "export the cluster's ResourceSlices with its claims (the same `kubectl get` run)", "warning",
                ("status", "allocation", "devices", "results", i)))
        if devices:
            foreign.append(HeldClaim(key, tuple(devices)))
    return ClusterUse(tuple(foreign), tuple(own), tuple(running), tuple(warnings), live=True)
