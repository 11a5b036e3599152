"""DRA driver release facts (data/dra_driver.yaml, data/dra_chart_values.yaml) as typed records."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from functools import cache

from . import VersionError, load_table

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")


@dataclass(frozen=True)
class ChartRef:
    name: str
    repository: str  # https://... Helm repo or oci://... registry path; "" for a chart unpacked in a directory
    version: str
    directory: str = ""  # a folder of the GitOps repository holding the chart unpacked (Cluster spec.charts)

    @property
    def is_oci(self) -> bool:
        return self.repository.startswith("oci://")

    @property
    def path(self) -> str:
        """The unpacked chart's folder, relative to the GitOps repository root: <directory>/<chart>-<version>."""
        return f"{self.directory.rstrip('/')}/{self.name}-{self.version}" if self.directory else ""

    @property
    def location(self) -> str:
        """Where the chart comes from, in words for file headers and reports."""
        return self.path or self.repository


@dataclass(frozen=True)
class DriverLine:
    id: str
    order: int
    versions: str
    releases: tuple[str, ...]  # the tags gpuc knows of this line
    chart_name: str
    chart_repository: str
    image: str
    has_feature_gates: bool
    numnodes_required: bool
    mig_device_name: str
    project: str = ""  # the repository the line is developed in
    numbering: str = ""  # calendar (year.month) or semver

    def at_least(self, line_id: str) -> bool:
        return self.order >= line_order(line_id)

    def at_most(self, line_id: str) -> bool:
        return self.order <= line_order(line_id)


@dataclass(frozen=True)
class GateFact:
    name: str
    since: str
    default: bool
    stage: str
    build: str = ""  # non-empty when only a fork build has the gate
    kubernetes_gate: str = ""  # a Kubernetes DRA gate (data/kubernetes.yaml) the cluster needs on for this one


@cache
def driver_lines() -> dict[str, DriverLine]:
    lines = {}
    for entry in load_table("dra_driver")["lines"]:
        lines[entry["id"]] = DriverLine(
            id=entry["id"],
            order=entry["order"],
            versions=entry["versions"],
            releases=tuple(entry["releases"]),
            chart_name=entry["chart"]["name"],
            chart_repository=entry["chart"]["repository"],
            image=entry["image"],
            has_feature_gates=entry["featureGates"],
            numnodes_required=entry["computeDomainNumNodes"] == "required",
            mig_device_name=entry["migDeviceName"],
            project=entry["project"],
            numbering=entry["numbering"],
        )
    return lines


def line_order(line_id: str) -> int:
    return driver_lines()[line_id].order


def parse_driver_version(version: str) -> DriverLine:
    """`25.12.0` -> the 25.12 line. Raises ValueError with the supported list on anything else."""
    match = _VERSION.match(version.strip())
    lines = sorted(driver_lines().values(), key=lambda line: line.order)
    newest = lines[-1].releases[-1]
    order = [(a, b) for a, b in zip(lines, lines[1:]) if a.numbering != b.numbering]
    supported = f"gpuc supports the lines {', '.join(line.versions for line in lines)}" + \
        "".join(f" (in release order: {b.id} follows {a.id})" for a, b in order)
    if not match:
        raise VersionError(f"'{version}' is not a DRA driver version: {supported}",
                           f'write a release, quoted, e.g. version: "{newest}" (the newest gpuc knows)')
    line_id = f"{int(match.group(1))}.{int(match.group(2))}"
    if line_id not in driver_lines():
        semver = int(match.group(1)) == 0
        if semver and int(match.group(2)) > int(lines[-1].id.split(".")[1]):
            raise VersionError(f"DRA driver {version} is of a line newer than this gpuc knows: {supported}",
                               f"upgrade gpuc to a release that knows the {line_id} line, or run {newest}, the newest it knows")
        raise VersionError(f"DRA driver {version} is not of a release line gpuc knows: {supported}",
                           f'check the version for a typo; a new cluster takes "{newest}" (gpuc catalog --new-cluster says why)')
    return driver_lines()[line_id]


def chart_for(version: str) -> ChartRef:
    line = parse_driver_version(version)
    return ChartRef(line.chart_name, line.chart_repository, version.lstrip("v"))


@cache
def gates() -> dict[str, GateFact]:
    return {
        name: GateFact(name, str(g["since"]), bool(g["default"]), g["stage"], g.get("build", ""), g.get("kubernetesGate", ""))
        for name, g in load_table("dra_driver")["gates"].items()
    }


def gates_on(line: DriverLine) -> dict[str, GateFact]:
    return {n: g for n, g in gates().items() if line.has_feature_gates and line.at_least(g.since)}


def logging_gates() -> list[str]:
    return list(load_table("dra_driver")["loggingGates"])


def exclusive_gates() -> list[tuple[str, str]]:
    return [(a, b) for a, b in load_table("dra_driver")["exclusiveGates"]]


def consumable_shares_exclude() -> frozenset[str]:
    """Sharing strategies the driver refuses while consumable shares are on."""
    return frozenset(load_table("dra_driver")["consumableSharesExclude"])


def gate_requirements() -> dict[str, str]:
    return dict(load_table("dra_driver")["gateRequires"])


def capability(name: str) -> dict:
    return dict(load_table("dra_driver")["capabilities"][name])


def capability_gates(name: str) -> list[str]:
    """The driver gates a capability needs on: its own, then those it also needs (`alsoGates`)."""
    cap = capability(name)
    return [cap["gate"], *cap.get("alsoGates", [])]


def passthrough_config() -> dict:
    """The opaque VfioDeviceConfig a KubeVirt VM's vfio claim needs (data/dra_driver.yaml capabilities.Passthrough)."""
    return copy.deepcopy(dict(capability("Passthrough")["config"]))


@dataclass(frozen=True)
class MpsDaemonFacts:
    chroot_shell_until: str  # the last line whose MPS control daemon runs `chroot <driver root> sh`
    shell_roots: tuple[str, ...]  # driver roots that are whole root file systems, with a shell
    shellless: dict[str, str]  # driver root -> whose: roots known to hold no shell


def mps_control_daemon() -> MpsDaemonFacts:
    d = load_table("dra_driver")["mpsControlDaemon"]
    return MpsDaemonFacts(str(d["chrootShellUntil"]), tuple(d["shellRoots"]), dict(d["shellless"]))


def gpu_driver() -> str:
    """The driver's DRA name: the domain of its attributes and capacities, `opaque.driver` of its configs."""
    return str(load_table("dra_driver")["driver"])


def config_api_version() -> str:
    """The apiVersion of the driver's opaque configs (GpuConfig, MigDeviceConfig) and of ComputeDomain."""
    return str(load_table("dra_driver")["configApiVersion"])


def builtin_device_classes() -> list[str]:
    return sorted(load_table("dra_driver")["builtinDeviceClasses"])


def builtin_class_for(device_type: str) -> str:
    """The chart's DeviceClass for devices of `device_type` (gpu -> gpu.nvidia.com, mig -> mig.nvidia.com)."""
    return next(name for name, t in sorted(builtin_class_device_types().items()) if t == device_type)


def builtin_class_device_types() -> dict[str, str]:
    """Built-in DeviceClass name -> the device type it selects (gpu, mig, vfio, channel, daemon)."""
    return {name: c["deviceType"] for name, c in load_table("dra_driver")["builtinDeviceClasses"].items()}


@dataclass(frozen=True)
class AttributeFact:
    name: str  # as published: unqualified (driver domain) or domain/name
    type: str  # string | int | bool | version
    when: str = ""  # gate that must be on for the attribute to appear
    unless: str = ""  # gate that, when on, keeps the attribute off this line's devices
    host: str = ""  # nodePools[].host.<field> declaring it: the value is the host's (NVML, kernel), not the GPU model's

    @property
    def qualified(self) -> tuple[str, str]:
        """(domain, id) as CEL sees it: device.attributes[domain].id."""
        if "/" in self.name:
            domain, ident = self.name.split("/", 1)
            return domain, ident
        return gpu_driver(), self.name


def device_attributes(line: DriverLine, device_type: str) -> dict[str, AttributeFact]:
    """Attributes a `gpu` or `mig` device publishes on this driver line."""
    out = {}
    for name, a in load_table("dra_driver")["attributes"][device_type].items():
        if "since" in a and not line.at_least(str(a["since"])):
            continue
        if "until" in a and not line.at_most(str(a["until"])):
            continue
        absent = a.get("absentWith") or {}
        unless = absent["gate"] if absent and line.at_most(str(absent["until"])) else ""
        out[name] = AttributeFact(name, a["type"], a.get("when", ""), unless, str(a.get("host", "")))
    return out


def vfio_device_name(index: int) -> str:
    """`gpu-vfio-<index>`: the name the driver publishes a GPU under for vfio-pci (PassthroughSupport)."""
    return str(load_table("dra_driver")["vfioDeviceName"]).format(index=index)


def device_capacities(device_type: str) -> list[str]:
    return list(load_table("dra_driver")["capacities"][device_type])


@dataclass(frozen=True)
class ChartKey:
    path: str
    kind: str  # leaf | list | map


def kubelet_plugin_daemonset(chart_name: str, values: dict) -> str:
    """The name of the driver chart's kubelet plugin DaemonSet (data/dra_driver.yaml `kubeletPluginDaemonSet`)."""
    name = values.get("nameOverride") or chart_name
    return str(load_table("dra_driver")["kubeletPluginDaemonSet"]).format(name=name)


def kubelet_plugin_tolerations(line: DriverLine) -> list[dict]:
    """The chart's default kubeletPlugin.tolerations on `line` (data/dra_driver.yaml `kubeletPluginTolerations`)."""
    table = load_table("dra_driver")["kubeletPluginTolerations"]
    since = max((k for k in table if line.at_least(k)), key=line_order)
    return [dict(t) for t in table[since]]


def fabric_manager_partitioning() -> dict:
    """What gate FabricManagerPartitioning does to every node and claim (data/dra_driver.yaml)."""
    return dict(load_table("dra_driver")["fabricManagerPartitioning"])


def chart_api_version() -> dict[str, str]:
    """How the driver chart picks its DeviceClasses' API version (data/dra_driver.yaml `chartApiVersion`)."""
    return dict(load_table("dra_driver")["chartApiVersion"])


def chart_keys(line: DriverLine) -> dict[str, ChartKey]:
    keys = {}
    for path, k in load_table("dra_chart_values")["keys"].items():
        if line.at_least(str(k["since"])) and ("until" not in k or line.at_most(str(k["until"]))):
            keys[path] = ChartKey(path, k["kind"])
    return keys


@dataclass(frozen=True)
class BuiltinClass:
    name: str
    resources: str  # chart switch resources.<resources>.enabled that creates it: gpus | computeDomains
    selector: str  # the chart template's CEL, verbatim


def builtin_classes(line: DriverLine) -> dict[str, BuiltinClass]:
    """The DeviceClasses the chart of this line creates (when their resources are enabled)."""
    return {
        name: BuiltinClass(name, c["resources"], c["selector"])
        for name, c in load_table("dra_driver")["builtinDeviceClasses"].items()
        if line.at_least(str(c["since"]))
    }


@dataclass(frozen=True)
class DynamicMigFacts:
    counter_set: str  # format with minor=
    counters: dict[str, str]  # capacity name -> counter name
    memory_slice_counter: str  # format with i=
    skips_gpus_without_mig_since: str  # driver line from which the gate leaves GPUs without MIG alone
    every_gpu_until: str  # the last line whose gate partitions every GPU, whatever its architecture and MIG mode
    mig_mode_toggle: frozenset[str]  # architectures whose MIG mode toggles without a GPU reset (Hopper and newer)

    def partitions(self, line: DriverLine, architecture: str, mig_mode_on: bool) -> tuple[bool, bool]:
        """With the gate on, (whether a MIG-capable GPU is published as DynamicMIG partitions, whether its full GPU
        is published beside them). `mig_mode_on`: MIG mode is on when the kubelet plugin starts."""
        if line.at_most(self.every_gpu_until) or architecture in self.mig_mode_toggle:
            return True, True
        return (True, False) if mig_mode_on else (False, True)


def dynamic_mig() -> DynamicMigFacts:
    d = load_table("dra_driver")["dynamicMig"]
    return DynamicMigFacts(d["counterSet"], dict(d["counters"]), d["memorySliceCounter"], d["skipsGpusWithoutMigSince"],
                           str(d["everyGpuUntil"]), frozenset(d["migModeToggle"]))


def static_mig_memory_slice() -> str:
    """Capacity name format (with i=) of the memory slices a static MIG device occupies."""
    return load_table("dra_driver")["staticMigMemorySlice"]


def compute_domain_devices() -> tuple[str, dict[str, dict[str, dict]]]:
    """(driver, device name -> attributes in the API's typed form {name: {string|int|bool|version: v}})."""
    cd = load_table("dra_driver")["computeDomain"]
    return cd["driver"], {name: dict(attrs) for name, attrs in cd["devices"].items()}


def compute_domain_channel_request() -> tuple[str, str]:
    """(request name, DeviceClass) of the channel claim the ComputeDomain controller's template makes."""
    req = load_table("dra_driver")["computeDomain"]["channelRequest"]
    return req["name"], req["deviceClassName"]
