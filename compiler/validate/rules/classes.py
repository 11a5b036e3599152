"""Rules of GpuDeviceClass documents, and of `require` blocks wherever they appear."""

from __future__ import annotations

from ...diagnostics import Findings, did_you_mean, one_of
from ...facts import catalog
from ...facts.driver import builtin_device_classes
from ..documents import Fleet, Intent
from ..intents import GpuDeviceClass
from ..resolved import ResolvedCluster


def check_classes(fleet: Fleet, clusters: dict[str, ResolvedCluster], findings: Findings) -> None:
    for cls in fleet.classes.values():
        _check_class(cls, fleet, findings)


def check_cluster_refs(intent: Intent, listed: list[str] | None, fleet: Fleet, findings: Findings) -> None:
    for i, name in enumerate(listed or []):
        if name not in fleet.clusters:
            findings.add(intent.error(("spec", "clusters", i), f"unknown cluster '{name}'",
                                      did_you_mean(name, fleet.clusters) or f"clusters of this fleet: {one_of(fleet.clusters)}"))
    names = listed or []
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        findings.add(intent.error(("spec", "clusters"), f"cluster {one_of(twice)} is listed twice", "list each cluster once"))


def _check_class(cls: Intent[GpuDeviceClass], fleet: Fleet, findings: Findings) -> None:
    name = cls.model.metadata.name
    check_cluster_refs(cls, cls.model.spec.clusters, fleet, findings)
    if name in builtin_device_classes():
        findings.add(cls.error(("metadata", "name"), f"'{name}' is a DeviceClass the DRA driver chart creates",
                               "pick a name of your own, e.g. 'high-memory.example.com'"))
    check_require(cls, ("spec", "require"), cls.model.spec.require, findings)
    if cls.model.spec.mig:
        profiles = {p.name for m in catalog.gpu_models().values() if m.mig for p in m.mig.profiles.values()}
        for i, s in enumerate(cls.model.spec.mig.slices):
            if s.profile not in profiles:
                findings.add(cls.error(("spec", "mig", "slices", i, "profile"), f"no catalog GPU has MIG profile '{s.profile}'",
                                       did_you_mean(s.profile, profiles)))


def check_require(intent: Intent, path: tuple, require, findings: Findings) -> None:
    if require is None:
        return
    known = catalog.architectures()
    for i, arch in enumerate(require.architecture or []):
        if arch not in known:
            findings.add(intent.error(path + ("architecture", i), f"unknown architecture '{arch}'",
                                      did_you_mean(arch, known) or f"architectures the driver reports: {one_of(known)}"))
    products = sorted({m.product_name for m in catalog.gpu_models().values()}) if require.product_name else []
    if require.product_name and require.product_name not in products:
        findings.add(intent.warning(path + ("productName",), f"no catalog GPU reports productName '{require.product_name}'",
                                    did_you_mean(require.product_name, products) or "product names are matched exactly as NVML reports them"))
    for i, expr in enumerate(require.cel):
        if not expr.strip():
            findings.add(intent.error(path + ("cel", i), "empty CEL expression"))
