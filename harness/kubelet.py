"""A stand-in for the kubelets of a harness cluster: the pod status a kubelet reports once containers run.

No kubelet runs here (no container runtime, no NVIDIA images), so a chart's Deployment never becomes
available and Argo CD, whose health of a Deployment waits for available replicas, would hold every later
sync wave. A test that needs workloads to count as running starts this: for each pod the real scheduler
bound to a node, it writes what the kubelet writes when the containers start (Running and Ready), and for
a Job's pod what it writes when they exit 0 (Succeeded). It decides nothing else: the scheduler binds, the
controllers count replicas and completions, Argo CD judges health. Pods that were never bound (a
DaemonSet with no matching node, a pod the scheduler refused) stay as they are.

It also finishes a bound pod's deletion, as a kubelet does: the API server only marks a pod on a node deleted
(deletionTimestamp) and waits for that node's kubelet to stop the containers and delete it for good (grace period
0). Here the containers stop at once, or with `full_grace`, when the pod's grace period ends (its deletionTimestamp:
the longest a kubelet waits for containers that do not exit on SIGTERM, the timing an order that holds only when
deletion is quick fails under); then the `on_stop` hooks run (what kubelet does as a container goes: a DRA kubelet
plugin unregisters, and kubelet wipes its ResourceSlices; harness/dra_plugin.py) and the pod is deleted for good.
Without that, a pod of a deleted DaemonSet stays Terminating, and a foreground deletion of the DaemonSet (Argo CD's
resources finalizer, Pulumi's delete) never finishes.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

from .kube import Kube
from .poller import Poller

Obj = dict[str, Any]
NODE_CAPACITY = {"cpu": "128", "memory": "1Ti", "pods": "250"}


def add_node(kube: Kube, name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None) -> None:
    """A Ready Node, as a kubelet registers it (room for pods: only devices should decide, and the labels a node
    pool gets). The TaintNodesByCondition admission plugin taints a new Node not-ready; the node lifecycle
    controller, which would lift it once the Node is Ready, does not run here: its taints are set to `taints`."""
    own = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}  # a kubelet's own
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**own, **(labels or {})}}})
    kube.set_status({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                     "status": {"capacity": NODE_CAPACITY, "allocatable": NODE_CAPACITY,
                                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "harness"}]}})
    kube.dyn.patch(kube.resource("v1", "Node"), name=name, body={"spec": {"taints": taints or []}},
                   content_type="application/merge-patch+json")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _owned_by_job(pod: Obj) -> bool:
    return any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or [])


def started_status(pod: Obj) -> Obj:
    """The status a kubelet writes for `pod`: Running and Ready, or Succeeded for a Job's pod."""
    now = _now()
    done = _owned_by_job(pod)
    containers = []
    for c in pod["spec"].get("containers", []):
        state = ({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}
                 if done else {"running": {"startedAt": now}})
        containers.append({"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": not done,
                           "started": not done, "restartCount": 0, "state": state})
    ready = "False" if done else "True"
    conditions = [{"type": t, "status": s, "lastTransitionTime": now}
                  for t, s in (("PodScheduled", "True"), ("Initialized", "True"), ("ContainersReady", ready), ("Ready", ready))]
    if done:
        for cond in conditions[2:]:
            cond["reason"] = "PodCompleted"
    return {"phase": "Succeeded" if done else "Running", "conditions": conditions, "containerStatuses": containers,
            "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "startTime": now}


def _stopping(pod: Obj) -> bool:
    """A pod on a node that the API server marked deleted: its kubelet stops it and deletes it for good."""
    return bool(pod["spec"].get("nodeName") and pod["metadata"].get("deletionTimestamp"))


def _grace_over(pod: Obj) -> bool:
    """The pod's grace period has ended: the API server set deletionTimestamp to the deletion's time plus it."""
    ends = calendar.timegm(time.strptime(pod["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    return time.time() >= ends


def _needs_status(pod: Obj) -> bool:
    if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
        return False
    return pod.get("status", {}).get("phase") not in ("Running", "Succeeded", "Failed")


class KubeletStandIn(Poller):
    """Polls the cluster's pods, reports bound ones as started and deletes for good those marked deleted; `stop()`
    ends it. `on_stop` hooks get each pod whose containers it stops, before the pod is deleted; with `full_grace`
    they stop when the pod's grace period ends, else at once. `may_start` (a pod -> whether its containers may start)
    holds a pod back, as kubelet holds one whose claims are not prepared yet (harness/node.py DraKubelet.may_start)."""

    def __init__(self, kube: Kube, interval: float = 0.3, full_grace: bool = False,
                 may_start: Callable[[Obj], bool] | None = None) -> None:
        self.kube = kube
        self.interval = interval
        self.full_grace = full_grace
        self.may_start = may_start
        self.started: list[str] = []  # namespace/name of every pod it reported, in order
        self.deleted: list[str] = []  # namespace/name of every pod whose deletion it finished, in order
        self.on_stop: list[Callable[[Obj], None]] = []
        self.start_polling("kubelet-stand-in")

    def round(self) -> None:
        for pod in self.kube.items("v1", "Pod"):  # raising (the API server restarting under it): the next round
            if _stopping(pod):
                if not self.full_grace or _grace_over(pod):
                    self._finish_deletion(pod)
            elif _needs_status(pod) and (self.may_start is None or self.may_start(pod)):
                meta = pod["metadata"]
                try:
                    self.kube.set_status({"apiVersion": "v1", "kind": "Pod",
                                          "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                                          "status": started_status(pod)})
                except Exception:  # deleted meanwhile, or a conflict: the next round sees it again
                    continue
                self.started.append(f"{meta['namespace']}/{meta['name']}")

    def _finish_deletion(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            for hook in self.on_stop:
                hook(pod)
        except Exception:  # a hook could not reach the API server: the pod stays until a round where it can
            return
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        try:  # the pod as this round saw it, not one recreated under its name meanwhile
            self.kube.dyn.delete(self.kube.resource("v1", "Pod"), name=meta["name"], namespace=meta["namespace"], body=body)
        except Exception:  # gone already, recreated (the precondition) or the API server restarting: the next round sees
            return
        self.deleted.append(f"{meta['namespace']}/{meta['name']}")
