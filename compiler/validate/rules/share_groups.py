"""Share groups: the workloads of one group on one cluster, in one namespace, use one ResourceClaim, so
they must agree on how it is shaped. The group is what lowering builds (lower.claims): groups of the
same name in other namespaces or on other clusters are other claims."""

from __future__ import annotations

from collections import defaultdict

from ...diagnostics import Findings
from ..documents import Fleet, Intent
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster


def check_share_groups(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    reported: set[tuple[int, str]] = set()  # (document, field): a pair disagreeing on several clusters is said once
    for cluster in fleet.clusters:
        groups: dict[tuple[str, str], list[Intent[GpuWorkload]]] = defaultdict(list)
        for w in fleet.workloads_on(cluster):
            if w.model.spec.gpu.share_group and (group := w.model.share_group) is not None:
                groups[(w.model.metadata.namespace, group)].append(w)
        for (_, name), members in groups.items():
            for other in members[1:]:
                finding = _disagreement(name, members[0], other)
                if finding is not None and (id(other), finding[0]) not in reported:
                    reported.add((id(other), finding[0]))
                    findings.add(other.error(("spec", "gpu", finding[0]), finding[1], finding[2]))


def _disagreement(name: str, first: Intent[GpuWorkload], other: Intent[GpuWorkload]) -> tuple[str, str, str] | None:
    """(gpu field, message, hint) where `other` disagrees with the group's first member, or None."""
    fm, om = first.model, other.model
    mine = om.spec.gpu.model_dump(by_alias=True, exclude={"share_group"})
    theirs = fm.spec.gpu.model_dump(by_alias=True, exclude={"share_group"})
    if mine == theirs:
        return None  # the common case: nothing to report, no line lookup
    where = f"{first.source.file}:{first.source.line_of(('spec', 'gpu', 'shareGroup'))}"
    if om.spec.gpu.sharing != fm.spec.gpu.sharing:
        return ("sharing", f"shareGroup '{name}' mixes sharing {om.spec.gpu.sharing} with {fm.spec.gpu.sharing} ({fm.metadata.name}, {where})",
                "members share one claim, so one strategy")
    if (om.spec.gpu.mig is None) != (fm.spec.gpu.mig is None):
        return ("mig", f"shareGroup '{name}' mixes MIG slices and full GPUs (see {fm.metadata.name}, {where})", "")
    key = next(k for k in sorted(mine) if mine[k] != theirs.get(k))
    return (key, f"shareGroup '{name}' members disagree on gpu.{key} (see {fm.metadata.name}, {where})",
            "members share one claim; give them the same gpu settings")
