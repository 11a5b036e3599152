"""A stand-in for the GPU Operator's MIG Manager, as far as a node's MIG layout and its state label go.

No MIG Manager, mig-parted or GPU runs here. What the rest of the cluster sees of the MIG Manager is the node label it
reads (nvidia.com/mig.config: the layout wanted) and the one it writes (nvidia.com/mig.config.state: pending, then
success or failed), and, through the DRA kubelet plugin stand-in (harness/dra_plugin.py), which devices the node has:
the layout applied. For each node it is given, it starts from the layout the node has (its mig.config label when it
is registered, applied before the cluster was synced); when the label asks for another, it writes `pending`, and
applies it only once no pod on the node holds a GPU (a ResourceClaim or nvidia.com/gpu: mig-parted cannot repartition
a GPU a process holds), writing `failed` while one does and `success` once applied. It never restarts the DRA kubelet
plugin: the plugin goes on publishing the devices it found at start-up, as the driver's documentation warns.
`MigManagerStandIn(...)` starts it; `stop()` ends it.
"""

from __future__ import annotations

import time
from typing import Any

from .controlplane import ControlPlane
from .kube import Kube
from .poller import Poller

Obj = dict[str, Any]
CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


def holds_gpu(pod: Obj) -> bool:
    limits = [c.get("resources", {}).get("limits", {}) for c in pod["spec"].get("containers", [])]
    return bool(pod["spec"].get("resourceClaims")) or any("nvidia.com/gpu" in lim for lim in limits)


class MigManagerStandIn(Poller):
    """Applies the MIG layout each node of `nodes` asks for, polling every `interval` seconds; `applied` is the
    layout each node has now, `log` what it did: (time.monotonic(), node, state, config)."""

    def __init__(self, cp: ControlPlane, nodes: list[str], interval: float = 0.3) -> None:
        self.kube = kube = Kube(cp)  # its own client: the dynamic client's discovery is not shared across threads
        self.applied: dict[str, str] = {}
        for name in nodes:
            node = kube.get("v1", "Node", name)
            assert node is not None, f"node {name} is not registered"
            self.applied[name] = (node["metadata"].get("labels") or {}).get(CONFIG, "")
        self.interval = interval
        self.log: list[tuple[float, str, str, str]] = []
        self.start_polling("mig-manager-stand-in")

    def _label(self, node: str, state: str, config: str) -> None:
        self.kube.dyn.patch(self.kube.resource("v1", "Node"), name=node, body={"metadata": {"labels": {STATE: state}}},
                            content_type="application/merge-patch+json")
        self.log.append((time.monotonic(), node, state, config))

    def round(self) -> None:
        for name, applied in list(self.applied.items()):
            node = self.kube.get("v1", "Node", name)
            if node is None:
                continue
            labels = node["metadata"].get("labels") or {}
            wanted = labels.get(CONFIG, "")
            if wanted == applied:
                continue
            busy = [p for p in self.kube.items("v1", "Pod") if p["spec"].get("nodeName") == name and holds_gpu(p)]
            if busy:
                if labels.get(STATE) != "failed":
                    self._label(name, "failed", wanted)
                continue
            if labels.get(STATE) != "pending":
                self._label(name, "pending", wanted)
                continue  # the next round repartitions
            self.applied[name] = wanted
            self._label(name, "success", wanted)
