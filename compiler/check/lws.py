"""Multi-node NIMs need the LeaderWorkerSet controller, which neither gpuc nor the NIM Operator installs.

A NIMService with `spec.multiNode` (backendType lws) is run by a LeaderWorkerSet; on a cluster without the LWS
CRD and controller the NIM Operator cannot create it and the NIM never gets pods. gpuc cannot see the cluster at
render time, so it checks the CRDs the cluster declares (spec.crds, --crds) and otherwise says what to install.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..facts.platform import nim_operator
from .model import ClusterContext, Finding


def check_leader_worker_set(ctx: ClusterContext) -> Iterable[Finding]:
    lws = nim_operator()["leaderWorkerSet"]
    if ctx.crds.find(lws["group"], lws["kind"]) is not None:
        return
    for obj in ctx.objects:
        if obj.kind == "NIMService" and isinstance(obj.manifest.get("spec"), dict) and "multiNode" in obj.manifest["spec"]:
            yield Finding(obj, ("spec", "multiNode"),
                          f"a multi-node NIM runs as a {lws['kind']} ({lws['group']}), whose controller neither gpuc nor the "
                          "NIM Operator installs; without it the NIMService never gets pods",
                          f"install LeaderWorkerSet on the cluster ({lws['install']}) and add its CRD to the cluster's "
                          "spec.crds (or --crds), which also tells gpuc it is there", "warning")
