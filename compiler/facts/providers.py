"""Managed Kubernetes providers (data/providers.yaml): the node labels a DRA pool needs there, and whether the
DRA driver's critical pods need a ResourceQuota to be admitted outside kube-system."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from . import load_table


@dataclass(frozen=True)
class Provider:
    key: str
    name: str
    dra_node_labels: tuple[tuple[str, str], ...]
    node_setup: str
    critical_pods_quota: bool
    detect_node_label: str
    docs: str
    source: str


@dataclass(frozen=True)
class CriticalPodsQuota:
    name: str
    priority_classes: tuple[str, ...]
    pods: str


@cache
def providers() -> dict[str, Provider]:
    return {key: Provider(key, p["name"], tuple(sorted(p["draNodeLabels"].items())), p.get("nodeSetup", ""),
                          bool(p["criticalPodsQuota"]), p["detectNodeLabel"], p["docs"], " ".join(p["source"].split()))
            for key, p in load_table("providers")["providers"].items()}


def critical_pods_quota() -> CriticalPodsQuota:
    q = load_table("providers")["criticalPodsQuota"]
    return CriticalPodsQuota(q["name"], tuple(q["priorityClasses"]), str(q["pods"]))


def detect_provider(node_labels: list[dict[str, str]]) -> Provider | None:
    """The provider whose detect label every node carries (None when none, or the nodes disagree)."""
    found = {p.key for labels in node_labels for p in providers().values() if p.detect_node_label in labels}
    return providers()[found.pop()] if len(found) == 1 and node_labels else None
