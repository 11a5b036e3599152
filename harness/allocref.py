"""A client of harness/cmd/allocref: Kubernetes' structured allocator, one process per test session."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from . import components


@dataclass(frozen=True)
class NodeAnswer:
    node: str
    satisfiable: bool
    results: list[dict[str, Any]]  # one AllocationResult per claim, in claim order
    error: str


@dataclass(frozen=True)
class Answer:
    allocator: str  # which upstream implementation the feature set selected: stable, incubating, experimental
    nodes: list[NodeAnswer]


class AllocrefError(RuntimeError):
    """allocref could not read the request (a bug in the test's translation, not an allocation answer)."""


class Allocref:
    def __init__(self) -> None:
        self._proc = subprocess.Popen([str(components.binary("allocref"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def allocate(
        self,
        *,
        gates: dict[str, bool],
        nodes: list[dict[str, Any]],
        slices: list[dict[str, Any]],
        classes: list[dict[str, Any]],
        claims: list[dict[str, Any]],
        allocated_claims: list[dict[str, Any]] = (),  # type: ignore[assignment]
    ) -> Answer:
        req = {"gates": gates, "nodes": nodes, "slices": slices, "classes": classes, "claims": claims, "allocatedClaims": list(allocated_claims)}
        assert self._proc.stdin and self._proc.stdout
        self._proc.stdin.write(json.dumps(req) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise AllocrefError(f"allocref exited with status {self._proc.wait()}")
        resp = json.loads(line)
        if resp.get("requestError"):
            raise AllocrefError(resp["requestError"])
        return Answer(
            allocator=resp.get("allocator", ""),
            nodes=[NodeAnswer(n["node"], n.get("satisfiable", False), n.get("results") or [], n.get("error", "")) for n in resp.get("nodes") or []],
        )

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)
