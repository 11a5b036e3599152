"""A stand-in for the kubelets of a harness cluster: the pod status a kubelet reports once containers run.

No kubelet runs here (no container runtime, no NVIDIA images), so a chart's Deployment never becomes
available and Argo CD, whose health of a Deployment waits for available replicas, would hold every later
sync wave. A test that needs workloads to count as running starts this: for each pod the real scheduler
bound to a node, it writes what the kubelet writes when the containers start (Running and Ready), and for
a Job's pod what it writes when they exit 0 (Succeeded). It decides nothing else: the scheduler binds, the
controllers count replicas and completions, Argo CD judges health. Pods that were never bound (a
DaemonSet with no matching node, a pod the scheduler refused) stay as they are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .kube import Kube

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


def _needs_status(pod: Obj) -> bool:
    if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
        return False
    return pod.get("status", {}).get("phase") not in ("Running", "Succeeded", "Failed")


class KubeletStandIn:
    """Polls the cluster's pods and reports bound ones as started; `stop()` ends it. `may_start` (a pod -> whether
    its containers may start) holds a pod back, as kubelet holds one whose claims are not prepared yet
    (harness/node.py DraKubelet.may_start)."""

    def __init__(self, kube: Kube, interval: float = 0.3, may_start: Callable[[Obj], bool] | None = None) -> None:
        self.kube = kube
        self.interval = interval
        self.may_start = may_start
        self.started: list[str] = []  # namespace/name of every pod it reported, in order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet-stand-in", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                pods = self.kube.items("v1", "Pod")
            except Exception:  # the API server restarting or stopping under it: try again next round
                continue
            for pod in pods:
                if _needs_status(pod) and (self.may_start is None or self.may_start(pod)):
                    meta = pod["metadata"]
                    try:
                        self.kube.set_status({"apiVersion": "v1", "kind": "Pod",
                                              "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                                              "status": started_status(pod)})
                    except Exception:  # deleted meanwhile, or a conflict: the next round sees it again
                        continue
                    self.started.append(f"{meta['namespace']}/{meta['name']}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
