"""Rules of GPU passthrough (vfio-pci, driver 25.12+ gate PassthroughSupport).

A VM's claim carries the VfioDeviceConfig KubeVirt needs (the API device /dev/vfio/vfio), and gate DeviceMetadata
goes on with PassthroughSupport (the VM's PCI address in a metadata file): facts capabilities.Passthrough.

With the gate on, the driver publishes every GPU without MIG devices twice: as `gpu-<i>` and as `gpu-vfio-<i>`.
Preparing one removes the other from the slice, but nothing tells the scheduler they are one GPU, so two claims
can be allocated both. gpuc therefore keeps the two apart by GPU model: passthrough pools and the other DRA
pools have different PCI device ids (a vfio claim selects by deviceID, since a vfio device's productName is the
PCI database's name), and no ordinary workload may select a passthrough pool's GPUs.
"""

from __future__ import annotations

from ...diagnostics import Findings
from ..documents import Fleet, Intent
from ..intents import GpuWorkload
from ..resolved import ResolvedCluster


def check_passthrough(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for w in fleet.workloads:
        if w.model.spec.gpu.passthrough:
            _check_workload(w, findings)
    for cluster in clusters.values():
        _check_pools(cluster, findings)


def _check_workload(w: Intent[GpuWorkload], findings: Findings) -> None:
    spec = w.model.spec
    gpu = spec.gpu
    path = ("spec", "gpu")
    if spec.model is not None:
        findings.add(w.error(("spec", "model"), "a passthrough GPU is bound to vfio-pci for a VM; a NIM cannot use it",
                             "drop spec.model and attach the claim to the VM (KubeVirt), or drop passthrough"))
    if gpu.count == "auto":
        findings.add(w.error(path + ("count",), "count: auto sizes a model; say how many GPUs the VM gets", "set a number"))
    if gpu.sharing != "Exclusive":
        findings.add(w.error(path + ("sharing",), f"a VM owns its passthrough GPUs; sharing {gpu.sharing} is not possible", "drop sharing"))
    combined = [f for f, given in (("require", gpu.require), ("class", gpu.class_), ("mig", gpu.mig), ("alternatives", gpu.alternatives),
                                   ("fabric", gpu.fabric), ("multiNode", gpu.multi_node), ("nics", gpu.nics),
                                   ("adminAccess", gpu.admin_access)) if given]
    for field in combined:
        hint = ("a vfio device publishes no architecture, memory or driver version: gpuc selects the passthrough pools' GPU "
                "models by PCI device id" if field in ("require", "class") else f"drop gpu.{field}")
        findings.add(w.error(path + (field,), f"passthrough does not combine with gpu.{field}", hint))


def _check_pools(cluster: ResolvedCluster, findings: Findings) -> None:
    intent = cluster.intent
    passthrough = [p for p in cluster.pools if p.spec.passthrough]
    for pool in passthrough:
        here = pool.path + ("passthrough",)
        if pool.spec.allocation != "dra":
            findings.add(intent.error(here, f"node pool '{pool.name}' is allocated by the device plugin; passthrough GPUs come "
                                            "from the DRA driver", "set allocation: dra, or drop passthrough"))
        if pool.spec.mig is not None:
            findings.add(intent.error(here, f"node pool '{pool.name}' has MIG; the driver hands only GPUs without MIG devices "
                                            "to vfio-pci", "drop mig, or drop passthrough"))
        if not pool.gpu.pci_device_ids:
            findings.add(intent.error(here, f"gpuc knows no PCI device id of {pool.gpu.key}, the only attribute a vfio claim "
                                            "can select its GPU model by", "use a catalog GPU (`gpuc catalog`)"))
    webhook = cluster.spec.dra_driver.values.get("webhook")
    if passthrough and isinstance(webhook, dict) and webhook.get("enabled") is True:
        findings.add(intent.error(
            ("spec", "draDriver", "values", "webhook", "enabled"),
            f"passthrough pool(s) {', '.join(repr(p.name) for p in passthrough)}: a VM's vfio claim carries a VfioDeviceConfig "
            "(enableAPIDevice, without which virt-launcher gets no /dev/vfio/vfio), and the driver's admission webhook "
            "refuses every VfioDeviceConfig",
            "turn the webhook off (webhook.enabled: false) on clusters with passthrough pools, or move them to a cluster without it"))
    ids = {i: p for p in passthrough for i in p.gpu.pci_device_ids}
    for pool in cluster.dra_pools:
        if pool.spec.passthrough or not pool.publishes_full_gpus:
            continue  # static MIG GPUs get no vfio twin
        shared = sorted(set(pool.gpu.pci_device_ids) & set(ids))
        if shared:
            other = ids[shared[0]]
            findings.add(intent.error(
                other.path + ("passthrough",),
                f"passthrough pool '{other.name}' and DRA pool '{pool.name}' have the same GPUs ({pool.gpu.key}), and the driver "
                f"publishes every GPU of both as a regular and as a vfio device: a VM's claim could take a GPU of '{pool.name}' "
                "that a pod also holds", f"give passthrough its own GPU model, or set allocation: devicePlugin on '{pool.name}'"))

