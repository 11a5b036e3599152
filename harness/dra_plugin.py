"""A stand-in for the NVIDIA DRA driver's kubelet plugin, as far as the ResourceSlices it publishes go.

No kubelet plugin runs here: no GPU, no NVML, no kubelet for it to register with. What the scheduler sees of a
running plugin is its ResourceSlices, and that is what this plays. It watches the kubelet-plugin DaemonSets it is
told of (the DRA driver chart's `<name>-kubelet-plugin` in the release's namespace: compiler/facts/data/dra_driver.yaml
kubeletPluginDaemonSet), and:

- for each of their pods that is Running on a node (the kubelet stand-in reports a bound pod Running), it publishes
  the ResourceSlices `devices(daemon_set, node)` gives for that node, once, when the pod starts: the plugin publishes
  the devices it finds at start-up (a MIG layout applied later is not seen until it restarts). The caller gives gpuc's
  own model of the node's hardware (`gpuc inventory FLEET --cluster C`, the slices gpuc synthesizes for its nodes
  `<pool>-<i>` or nodeNames): no device here was found on any hardware. Each slice is named as the driver's are
  (generateName `<node>-gpu.nvidia.com-`), owned by its Node, and marked with the pod that published it
  (PUBLISHER_POD annotation, PUBLISHER_UID label);
- when such a pod stops, it deletes that pod's slices, as kubelet wipes a plugin's slices when the plugin
  unregisters: from the kubelet stand-in's on_stop hook (the containers stop, then the pod is deleted for good), or
  on its next round for a pod that is gone without it (force-deleted).

Two plugin pods on one node publish two sets of slices for one driver, as two real plugins would each publish theirs
(sharing a checkpoint and a pool name): a test watching the slices sees two publishers there.
`SlicePublisher(...)` starts it; `stop()` ends it (the slices stay, as they do when a kubelet stops).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .controlplane import ControlPlane
from .kube import Kube
from .kubelet import KubeletStandIn
from .poller import Poller

Obj = dict[str, Any]
PUBLISHER_POD = "harness.gpuc.dev/published-by"  # annotation: namespace/name of the plugin pod that published the slice
PUBLISHER_UID = "harness.gpuc.dev/publisher-uid"  # label: that pod's UID (what the slices are listed and wiped by)
Devices = Callable[[tuple[str, str], Obj], list[Obj]]  # (daemon set namespace, name), Node -> ResourceSlices


@dataclass(frozen=True)
class Publication:
    """What the stand-in did, in order: `published` or `wiped` the slices of `pod` on `node`."""

    at: float  # time.monotonic()
    what: str
    pod: str  # namespace/name
    node: str
    slices: int


def owner_daemon_set(pod: Obj) -> str:
    return next((r.get("name", "") for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "DaemonSet"), "")


class SlicePublisher(Poller):
    """Publishes and wipes the ResourceSlices of the pods of `plugins` ((namespace, DaemonSet name) pairs), polling
    every `interval` seconds and hooked into `kubelet`'s pod deletions."""

    def __init__(self, cp: ControlPlane, kubelet: KubeletStandIn, plugins: Iterable[tuple[str, str]], devices: Devices,
                 interval: float = 0.3) -> None:
        self.kube = Kube(cp)  # its own client: the dynamic client's discovery is not shared across threads
        self.plugins = set(plugins)
        self.devices = devices
        self.interval = interval
        self.log: list[Publication] = []
        self._published: dict[str, tuple[str, str]] = {}  # pod UID -> (namespace/name, node)
        self._stopped: set[str] = set()  # pod UIDs whose containers stopped: never published again
        self._lock = threading.Lock()
        kubelet.on_stop.append(self._unregister)
        self.start_polling("dra-kubelet-plugin-stand-in")

    def _plugin_pod(self, pod: Obj) -> bool:
        return (pod["metadata"]["namespace"], owner_daemon_set(pod)) in self.plugins

    def round(self) -> None:
        with self._lock:  # one thread at a time on the client: this one, or the kubelet stand-in's hook
            pods = [p for p in self.kube.items("v1", "Pod") if self._plugin_pod(p)]
            for pod in pods:
                meta = pod["metadata"]
                running = (pod.get("status") or {}).get("phase") == "Running" and pod["spec"].get("nodeName") \
                    and not meta.get("deletionTimestamp")
                if running and meta["uid"] not in self._published and meta["uid"] not in self._stopped:
                    self._publish(pod)
            alive = {p["metadata"]["uid"] for p in pods}
            for uid in [u for u in self._published if u not in alive]:
                self._wipe(uid)

    def _publish(self, pod: Obj) -> None:
        meta = pod["metadata"]
        node = self.kube.get("v1", "Node", pod["spec"]["nodeName"])
        if node is None:
            return
        slices = self.devices((meta["namespace"], owner_daemon_set(pod)), node)
        ref = f"{meta['namespace']}/{meta['name']}"
        owner = {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"],
                 "controller": True}
        self._published[meta["uid"]] = (ref, node["metadata"]["name"])
        try:
            for s in slices:
                obj = copy.deepcopy(s)
                obj["metadata"] = {"generateName": f"{node['metadata']['name']}-{obj['spec']['driver']}-",
                                   "labels": {PUBLISHER_UID: meta["uid"]}, "annotations": {PUBLISHER_POD: ref},
                                   "ownerReferences": [owner]}
                self.kube.create(obj)
        except Exception:
            self._wipe(meta["uid"])  # all or nothing: the next round publishes again
            raise
        self.log.append(Publication(time.monotonic(), "published", ref, node["metadata"]["name"], len(slices)))

    def _wipe(self, uid: str) -> None:
        ref, node = self._published[uid]
        # the version served now: a control-plane upgrade since the slices were published may have changed it
        res = self.kube.resource(self.kube.preferred("resource.k8s.io"), "ResourceSlice")
        listed = self.kube.dyn.get(res, label_selector=f"{PUBLISHER_UID}={uid}").items
        for s in listed:
            self.kube.dyn.delete(res, name=s.metadata.name)
        del self._published[uid]
        self.log.append(Publication(time.monotonic(), "wiped", ref, node, len(listed)))

    def _unregister(self, pod: Obj) -> None:
        """The kubelet stand-in stops `pod`'s containers: a plugin's slices go with it (raises, and the pod stays,
        when they cannot be deleted yet)."""
        if not self._plugin_pod(pod):
            return
        uid = pod["metadata"]["uid"]
        with self._lock:
            self._stopped.add(uid)
            if uid in self._published:
                self._wipe(uid)
