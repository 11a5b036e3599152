"""A stand-in for the GPU Operator's NVIDIA device plugin, as far as the node's `nvidia.com/gpu` goes.

No GPU Operator manager, device plugin or kubelet runs here. What the scheduler sees of a device plugin is the node's
allocatable `nvidia.com/gpu` (kubelet's device manager advertises what a registered plugin reports), and that is what
this plays. On each node it is given (with the node's GPU count), it decides whether the operator's device plugin
would run there from what the operator itself reads:

- a ClusterPolicy exists whose spec.devicePlugin.enabled is not false (the operator deploys the device plugin
  DaemonSet only then);
- the node carries `nvidia.com/gpu.present: "true"` (GPU Feature Discovery's label, which the operator's operands
  select; the test sets it when it registers a GPU node, as NFD and GFD would);
- the node does not carry the operand deploy label `nvidia.com/gpu.deploy.device-plugin: "false"`
  (compiler/facts/data/operators.yaml devicePluginDeployLabel: gpuc sets it where the device plugin must not run).

Where it would run, the node advertises its GPUs (capacity and allocatable); where it would not, allocatable drops
to 0 and capacity stays, as kubelet keeps a resource whose plugin went away. `DevicePluginStandIn(...)` starts it;
`stop()` ends it.
"""

from __future__ import annotations

from typing import Any

from .controlplane import ControlPlane
from .kube import Kube
from .poller import Poller

Obj = dict[str, Any]
RESOURCE = "nvidia.com/gpu"
GPU_PRESENT = "nvidia.com/gpu.present"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
CRD = "clusterpolicies.nvidia.com"


def would_run(policies: list[Obj], node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    enabled = any(((p.get("spec") or {}).get("devicePlugin") or {}).get("enabled", True) is not False for p in policies)
    return enabled and labels.get(GPU_PRESENT) == "true" and labels.get(DEPLOY_LABEL) != "false"


class DevicePluginStandIn(Poller):
    """Keeps each node of `gpus` (node name -> GPUs) advertising what the operator's device plugin would, polling
    every `interval` seconds (with a client of its own: the dynamic client's discovery is not shared across threads)."""

    def __init__(self, cp: ControlPlane, gpus: dict[str, int], interval: float = 0.3) -> None:
        self.kube = Kube(cp)
        self.gpus = dict(gpus)
        self.interval = interval
        self.changes: list[tuple[str, str]] = []  # (node, allocatable it set), in order
        self.start_polling("device-plugin-stand-in")

    def _policies(self) -> list[Obj]:
        """The ClusterPolicies, none before the GPU Operator chart's CRD is there (asked first: looking up a kind that
        is not served would make the client discover the whole API again, every round)."""
        if self.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD) is None:
            return []
        return self.kube.items("nvidia.com/v1", "ClusterPolicy")

    def round(self) -> None:
        policies = self._policies()
        for name, count in self.gpus.items():
            node = self.kube.get("v1", "Node", name)
            if node is None:
                continue
            want = str(count) if would_run(policies, node) else "0"
            status = node.get("status") or {}
            if (status.get("allocatable") or {}).get(RESOURCE, "0") == want and \
                    (want == "0" or (status.get("capacity") or {}).get(RESOURCE) == want):
                continue
            body: Obj = {"status": {"allocatable": {RESOURCE: want}}}
            if want != "0":
                body["status"]["capacity"] = {RESOURCE: want}
            path = self.kube.resource("v1", "Node").path(name=name) + "/status"
            self.kube.dyn.request("patch", path, body=body, content_type="application/merge-patch+json")
            self.changes.append((name, want))
