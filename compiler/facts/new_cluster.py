"""What a new cluster should take, from the facts alone: `gpuc init` writes it, and the page that says why
(docs/how-to/new-cluster.md, emit.new_cluster) is generated from it. The newest DRA driver line at its newest release
(lines are ordered by `order`, not by their numbers: 0.5 follows 25.12), the newest GPU Operator release, installed
by gpuc (mode helm: gpuCluster is a technology preview that manages none of the operands MIG layouts and
device-plugin pools need), the GPU driver installed by the operator's driver container, and the newest Kubernetes
minor gpuc knows."""

from __future__ import annotations

from dataclasses import dataclass

from . import load_table
from .driver import DriverLine, driver_lines, gates
from .platform import gpu_operator


@dataclass(frozen=True)
class NewCluster:
    kubernetes: str
    line: DriverLine
    operator: str
    mode: str
    driver_root: str

    @property
    def driver(self) -> str:
        return self.line.releases[-1]

    @property
    def own_gates(self) -> list[str]:
        """The driver's feature gates that arrive with this line (none of the older lines has them)."""
        return sorted(name for name, g in gates().items() if g.since == self.line.id and not g.build)


def kubernetes_minors() -> list[str]:
    return list(load_table("kubernetes")["resourceApi"])


def lines_in_order() -> list[DriverLine]:
    return sorted(driver_lines().values(), key=lambda line: line.order)


def new_cluster() -> NewCluster:
    operator = gpu_operator()
    return NewCluster(kubernetes_minors()[-1], lines_in_order()[-1], operator["releases"][-1], "helm", operator["driverRoot"])
