"""The node in the loop (issue 45): the NVIDIA DRA driver's kubelet plugins, run as plain processes against NVIDIA's
mock NVML and a mock driver root, publishing ResourceSlices to a harness API server, and the kubelet's side of DRA.

harness/build.d/node.sh builds what runs here: the mock NVML library (k8s-test-infra pkg/gpu/mocknvml, as its
Makefile builds it), the fake PCI sysfs renderer and the fake IMEX daemon of the same source, `gpu-kubelet-plugin`
and `compute-domain-kubelet-plugin` of each DRA driver source, and `kubelet-dra` (harness/node/cmd/kubelet-dra: the
kubelet's DRA gRPC client). Nothing touches the machine's /dev, /run, /sys or /etc:

- `MockDriverRoot`: a driver root under the work directory per GPU profile, GPU count and driver version, laid out as
  the DRA driver's CPU-only CI lays it out (hack/ci/mock-nvml/setup-mock-gpu.sh): usr/lib64/libnvidia-ml.so.<driver>
  (the mock) with its .so.1 and .so links, config/config.yaml (the profile, with the GPU count and the driver version
  written in as the script writes them), the device nodes under dev/ (mknod; root only), a recording `nvidia-smi`
  (harness/node/cmd/nvidia-smi: appends its arguments to $GPUC_NVIDIA_SMI_LOG and succeeds; static, so the plugin's
  LD_PRELOAD of the mock library does not load into it), a placeholder `nvidia-cdi-hook`, an empty
  libcuda.so.<driver> (v25.12.0's CDI generation needs one to find the driver's libraries), the IMEX channel device
  nodes and a /proc/devices that lists them (for the compute-domain plugin), and the profile's fake PCI sysfs tree
  (rendered by the mock's own render-pci-sysfs: the plugin reads a GPU's PCIe root from /sys/bus/pci/devices).
- `KubeletPlugin`: one plugin process of one node, run as the driver's chart runs it (its container's environment:
  NODE_NAME, NAMESPACE, NVIDIA_DRIVER_ROOT, FEATURE_GATES, IMAGE_NAME, CDI_ROOT, the kubelet directories, ...) with
  the paths of a node under the work directory: the driver root is mounted at /driver-root as the chart mounts it
  (the container driver root), the host's path of the driver root is what gpuc configured (NVIDIA_DRIVER_ROOT, the
  path the CDI specs name), /templates holds the source's templates (MPS control daemons), /host-root is an empty
  folder (PassthroughSupport only checks it exists; nothing can reach the machine through it), /sys is the fake PCI
  tree and, for the compute-domain plugin, /proc/devices and /proc/driver the mock's. Each runs chrooted into a tmpfs
  in a private mount namespace (as harness/dra_driver.py runs the ComputeDomain controller): its mounts (and the tmpfs
  the MPS manager mounts for a daemon's /dev/shm) go with it. The node's kubelet folders and CDI specs are under a
  short temporary folder (/tmp/gpuc-nodes-*, removed at stop: a unix socket's path holds 107 bytes, a pytest work
  directory's nests too deep), its logs under the work directory. `start()` returns once kubelet's registration went
  through and the plugin's ResourceSlices are on the API server; `stop()` is SIGTERM to its process group.
- `KubeletDRA`: the kubelet-dra process and its line protocol: register, health, NodePrepareResources and
  NodeUnprepareResources of DRA gRPC API v1 or v1beta1.
- `DraKubelet`: the kubelet's DRA part for the mock nodes of a control plane: for every pod the real scheduler binds
  on a mock node it prepares the pod's claims with that node's plugins, as kubelet does (a claim reserved for the pod,
  one NodePrepareResources per driver, a claim already prepared on the node not prepared again), records the CDI
  devices each container would get and what they resolve to in the plugin's CDI specs (`records`, and the pod
  annotation RECORD_ANNOTATION), and unprepares a claim once no pod on the node uses it any more (the pod deleted).
  It decides when a pod may start: harness/kubelet.py's stand-in reports a pod on a mock node Running only once its
  claims are prepared. A failed prepare is retried, as kubelet retries, and recorded (`failures`), as is an answer
  that leaves a claim out (kubelet: "skipped N ResourceClaims").
- `ComputeDomainDaemons`: the part of a ComputeDomain's daemons no process plays here (their clique entries).
- `MockNodes`: the mock nodes of one control plane, one way to start (`add`) and stop (`remove`, `stop`) them, with
  kubelet's DRA part and the stand-in.

What is still played: container start (no runtime: harness/kubelet.py writes the status a kubelet writes once the
containers run), and with it the readiness of what the plugins start as pods: the MPS control daemon's Deployment
(the plugin waits for its pod to be Ready) and the ComputeDomain daemons (the IMEX daemons whose status the
compute-domain plugin waits for). The mock has no MIG: the plugins publish whole GPUs only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import components, dra_driver
from .components import ComponentMissing
from .controlplane import ControlPlane
from .kube import Kube
from .processes import stop_group

Obj = dict[str, Any]
GPU_DRIVER = "gpu.nvidia.com"
CD_DRIVER = "compute-domain.nvidia.com"
RECORD_ANNOTATION = "gpuc.dev/harness-cdi-devices"  # on a pod: {container: [CDI device IDs]}
_BUILD = "harness/build.sh (its blocks mock-nvml.sh, dra-driver.sh and node.sh in harness/build.d build the node's components; it reuses what is built)"
MIB = 1 << 20


class NodeError(RuntimeError):
    """A node component did not start, or kubelet's side of DRA failed; the message ends with the log's tail."""


# -- builds ------------------------------------------------------------------------------------------------------------


def mock_source_name() -> str:
    return f"k8s-test-infra-{components.pins()['K8S_TEST_INFRA_SOURCE']}"


def mock_source() -> Path:
    """The cache's copy of ../shared/upstream/src/k8s-test-infra-<K8S_TEST_INFRA_SOURCE> the mock was built from."""
    path = components.cache_dir() / "src" / mock_source_name()
    if not (path / "pkg" / "gpu" / "mocknvml" / "configs").is_dir():
        raise ComponentMissing(f"the mock NVML source is not copied to {path}: run {_BUILD}")
    return path


def _built(name: str, original: Path) -> Path:
    """bin/<name>, refused when its stamp says it was built from other sources than `original` (../shared/upstream/src)."""
    path = components.cache_dir() / "bin" / name
    if not path.is_file():
        raise ComponentMissing(f"{name} is not built in {path.parent}: run {_BUILD}")
    stamp = path.with_name(f"{path.name}.stamp")
    built = stamp.read_text().split()[0] if stamp.is_file() else ""
    if original.is_dir() and built != dra_driver._stamp_of(original):
        raise ComponentMissing(f"{name} in {path.parent} was built from other sources than {original}: run {_BUILD}")
    return path


def mock_library() -> Path:
    """bin/mock-nvml-<source>/libnvidia-ml.so.<version> (build.d/mock-nvml.sh)."""
    library = components.mock_nvml_library()
    return _built(library.relative_to(library.parent.parent).as_posix(), dra_driver.upstream_dir() / mock_source_name())


def mock_tool(name: str) -> Path:
    """fake-imex, fake-imex-ctl or render-pci-sysfs of the mock's source (bin/<name>-<K8S_TEST_INFRA_SOURCE>)."""
    return _built(f"{name}-{components.pins()['K8S_TEST_INFRA_SOURCE']}", dra_driver.upstream_dir() / mock_source_name())


def plugin_binary(kind: str, source: str) -> Path:
    """`gpu-kubelet-plugin-<source>` (kind "gpu") or `compute-domain-kubelet-plugin-<source>` (kind "compute-domain")."""
    return _built(f"{kind}-kubelet-plugin-{source}", dra_driver.upstream_dir() / f"dra-driver-nvidia-gpu-{source}")


def node_module_stamp() -> str:
    """The stamp build.d/node.sh records for kubelet-dra: go.mod, go.sum and the *.go of harness/node, in C order."""
    here = components.HERE / "node"
    h = hashlib.sha256()
    for f in [here / "go.mod", here / "go.sum"] + sorted(here.rglob("*.go"), key=lambda p: "./" + p.relative_to(here).as_posix()):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def node_program(name: str) -> Path:
    """`kubelet-dra` or `nvidia-smi-recorder`, built from this checkout's harness/node."""
    path = components.cache_dir() / "bin" / name
    if not path.is_file():
        raise ComponentMissing(f"{name} is not built in {path.parent}: run {_BUILD}")
    stamp = path.parent / f"{name}.stamp"
    built = (stamp.read_text().split() or [""])[0] if stamp.is_file() else ""
    if built != node_module_stamp():
        raise ComponentMissing(f"{name} in {path.parent} was built from other sources than harness/node: run {_BUILD}")
    return path


def kubelet_dra_binary() -> Path:
    return node_program("kubelet-dra")


# -- GPU profiles ------------------------------------------------------------------------------------------------------

HARDWARE = dra_driver.upstream_dir().parent.parent / "reference" / "hardware"  # ../shared/reference/hardware


@dataclass(frozen=True)
class Profile:
    """A mock GPU profile: the mock's configs/mock-nvml-config-<base>.yaml with `changes` written in."""

    name: str
    base: str  # the mock's profile
    changes: tuple[tuple[str, Any, str], ...] = ()  # (dotted path in the config, value, where the value comes from)

    def config(self) -> Obj:
        doc: Obj = yaml.safe_load((mock_source() / "pkg" / "gpu" / "mocknvml" / "configs" / f"mock-nvml-config-{self.base}.yaml").read_text())
        for path, value, _ in self.changes:
            *parents, last = path.split(".")
            node = doc
            for p in parents:
                node = node.setdefault(p, {})
            node[last] = value
        return doc


def _memory(mib: int, source: str) -> tuple[tuple[str, Any, str], ...]:
    """The framebuffer NVML reports, and the free memory at idle that goes with it (the mock's reserved left as is)."""
    return (("device_defaults.memory.total_bytes", mib * MIB, source),
            ("device_defaults.memory.free_bytes", mib * MIB - 1073741824, source))


_H100_REF = "../shared/reference/hardware/h100-80gb-hbm3/nvidia-smi-query.csv"
_H200_REF = "../shared/reference/hardware/h200/nvidia-smi-query.csv"

# gpuc's GPU models (compiler/facts/data/gpu_catalog.yaml) -> the mock profile a mock node of that model runs. The mock's
# profiles as they are, but where ../shared/reference/hardware measured the model: there its memory is the measured
# one (the mock's H100 says 80 GiB, NVML on a real one 81559 MiB), so that what a selector decides on the mock node is
# what it decides on the hardware. H200 has no profile of the mock: the harness's is the mock's h100 (the same GH100
# die, Hopper, 9.0) with the H200's name, memory and PCI device ID as measured.
MODEL_PROFILES: dict[str, Profile] = {
    "H100-80GB": Profile("h100", "h100", _memory(81559, _H100_REF)),
    "H200-141GB": Profile("h200", "h100", (("device_defaults.name", "NVIDIA H200", _H200_REF),
                                           ("device_defaults.pci.device_id", 0x233510DE, _H200_REF), *_memory(143771, _H200_REF))),
    "A100-40GB": Profile("a100", "a100"),
    "B200-180GB": Profile("b200", "b200"),
    "GB200-186GB": Profile("gb200", "gb200"),
    "L40S-48GB": Profile("l40s", "l40s"),
}
# gpuc's models no mock profile stands for, and why.
NO_PROFILE: dict[str, str] = {
    "A100-80GB": "the mock's a100 profile is the A100-SXM4-40GB (its name and memory); it has no 80 GB profile",
    "A30-24GB": "the mock has no A30 profile",
    "L4-24GB": "the mock has no L4 profile",
}
MOCK_GPUS_MAX = 8  # the mock's maximum (its README: Limitations)


def profile_for(model: str) -> tuple[Profile | None, str]:
    """(the profile a mock node of `model` runs, or None and why there is none)."""
    if model in MODEL_PROFILES:
        return MODEL_PROFILES[model], ""
    return None, NO_PROFILE.get(model, f"no mock profile stands for {model}")


def nvml_version_string(version: str) -> str:
    """A driver version as NVML reports it: 580.95.5 -> 580.95.05 (the third part has two digits)."""
    parts = version.split(".")
    return ".".join(parts[:2] + [f"{int(parts[2]):02d}"]) if len(parts) == 3 else version


# -- the mock driver root ----------------------------------------------------------------------------------------------

NVIDIA_CDI_HOOK = """#!/bin/sh
# A placeholder for nvidia-cdi-hook: the CDI specs name it as the hook a container runtime would run; nothing runs it here.
exit 0
"""
IMEX_MAJOR = 235  # setup-mock-gpu.sh's major for nvidia-caps-imex-channels
IMEX_CHANNELS = 2048  # the compute-domain plugin's getImexChannelCount()


@dataclass(frozen=True)
class MockDriverRoot:
    """A mock driver root at `path` (see the module's docstring)."""

    path: Path
    profile: Profile
    gpus: int
    driver_version: str  # as NVML reports it, e.g. 580.95.05
    cuda_version: str  # e.g. 13.0

    @property
    def sys(self) -> Path:
        """The fake sysfs root the plugin sees as /sys."""
        return self.path.parent / f"{self.path.name}-sysfs" / "sys"

    @property
    def proc_devices(self) -> Path:
        return self.path.parent / f"{self.path.name}-proc-devices"

    @classmethod
    def create(cls, path: Path, profile: Profile, gpus: int, driver_version: str, cuda_version: str) -> MockDriverRoot:
        if not 0 < gpus <= MOCK_GPUS_MAX:
            raise NodeError(f"the mock simulates 1 to {MOCK_GPUS_MAX} GPUs, not {gpus}")
        if os.geteuid() != 0:
            raise NodeError("a mock driver root needs root: its device nodes are made with mknod (as setup-mock-gpu.sh does)")
        root = cls(path, profile, gpus, nvml_version_string(driver_version), cuda_version)
        if (path / ".gpuc-done").exists():
            return root
        shutil.rmtree(path, ignore_errors=True)
        lib, bin_, conf, dev = path / "usr" / "lib64", path / "usr" / "bin", path / "config", path / "dev"
        for d in (lib, bin_, conf, dev, path / "proc" / "driver" / "nvidia" / "capabilities"):
            d.mkdir(parents=True, exist_ok=True)
        so = lib / f"libnvidia-ml.so.{root.driver_version}"
        try:
            os.link(mock_library(), so)  # a regular file inside the root: the plugin resolves the library's links
        except OSError:
            shutil.copyfile(mock_library(), so)
        (lib / "libnvidia-ml.so.1").symlink_to(so.name)
        (lib / "libnvidia-ml.so").symlink_to("libnvidia-ml.so.1")
        (lib / f"libcuda.so.{root.driver_version}").touch()
        config = profile.config()
        system = config.setdefault("system", {})
        major, minor = (cuda_version.split(".") + ["0"])[:2]
        system.update(num_devices=gpus, driver_version=root.driver_version, nvml_version=f"12.{root.driver_version}",
                      cuda_version=f"{major}.{minor}", cuda_version_major=int(major), cuda_version_minor=int(minor))
        (conf / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        shutil.copyfile(node_program("nvidia-smi-recorder"), bin_ / "nvidia-smi")  # records each call, succeeds
        (bin_ / "nvidia-cdi-hook").write_text(NVIDIA_CDI_HOOK)
        for name in ("nvidia-smi", "nvidia-cdi-hook"):
            (bin_ / name).chmod(0o755)
        char = stat.S_IFCHR | 0o666
        for i in range(gpus):
            os.mknod(dev / f"nvidia{i}", char, os.makedev(195, i))
        for name, major_minor in (("nvidiactl", (195, 255)), ("nvidia-uvm", (510, 0)), ("nvidia-uvm-tools", (510, 1))):
            os.mknod(dev / name, char, os.makedev(*major_minor))
        channels = dev / "nvidia-caps-imex-channels"
        channels.mkdir()
        for i in range(IMEX_CHANNELS):
            os.mknod(channels / f"channel{i}", char, os.makedev(IMEX_MAJOR, i))
        nv = path / "proc" / "driver" / "nvidia"
        (nv / "version").write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {root.driver_version}\n")
        (nv / "capabilities" / "fabric-imex-mgmt").write_text("DeviceFileMinor: 512\nDeviceFileMode: 438\nDeviceFileModify: 0\n")
        # /proc/devices as setup-mock-gpu.sh writes it: the machine's character devices and the IMEX ones
        real = Path("/proc/devices").read_text()
        chars, _, blocks = real.partition("Block devices:")
        root.proc_devices.write_text(f"{chars.rstrip()}\n{IMEX_MAJOR} nvidia-caps-imex-channels\n236 nvidia-caps\n\nBlock devices:{blocks}")
        # The profile's PCI sysfs tree, by the mock's own renderer (a flat single-root layout when the profile
        # declares no pcie_topology), cut to the GPUs the root simulates
        sysfs = root.sys.parent
        shutil.rmtree(sysfs, ignore_errors=True)
        trimmed = path.parent / f"{path.name}-pci.yaml"
        kept = (config.get("devices") or [])[:gpus]
        pci_doc = dict(config, devices=kept)
        if config.get("pcie_topology"):
            ids = {str((d.get("pci") or {}).get("bus_id", "")).lower() for d in kept}
            complexes = [dict(rc, devices=[b for b in rc.get("devices") or [] if str(b).lower() in ids])
                         for rc in config["pcie_topology"].get("root_complexes") or []]
            pci_doc["pcie_topology"] = dict(config["pcie_topology"], root_complexes=[rc for rc in complexes if rc["devices"]])
        trimmed.write_text(yaml.safe_dump(pci_doc, sort_keys=False))
        run = subprocess.run([str(mock_tool("render-pci-sysfs")), "--config", str(trimmed), "--output", str(sysfs)],
                             capture_output=True, text=True, timeout=60)
        if run.returncode != 0 or not (root.sys / "bus" / "pci" / "devices").is_dir():
            raise NodeError(f"render-pci-sysfs failed for {profile.name}: {run.stdout}{run.stderr}")
        (path / ".gpuc-done").touch()
        return root


# -- running a plugin --------------------------------------------------------------------------------------------------

# Run as: unshare -m --propagation private sh -ec _PRIVATE_ROOT gpuc-node ROOT [TARGET SOURCE]... -- COMMAND...
# A tmpfs on ROOT gets every top-level entry of / bound (links copied) but those a TARGET replaces; then each SOURCE is
# bound at its TARGET (a top-level folder, or a file that exists under one: /proc/devices), and COMMAND runs chrooted
# there. The namespace and every mount in it go when the command exits; the machine's / and ROOT stay as they were.
_PRIVATE_ROOT = r"""
root="$1"; shift
mount -t tmpfs -o mode=755 gpuc-node-root "$root"
replaced=" "
n=0; for a in "$@"; do [ "$a" = -- ] && break; n=$((n+1)); [ $((n % 2)) = 1 ] && replaced="$replaced$a "; done
for entry in /* /.[!.]*; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  case "$replaced" in *" $entry "*) continue ;; esac
  target="$root/${entry#/}"
  if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$target"
  elif [ -d "$entry" ]; then mkdir "$target" && mount --rbind "$entry" "$target"
  else : >"$target" && mount --bind "$entry" "$target"; fi
done
while [ "$1" != -- ]; do
  target="$root$1" source="$2"; shift 2
  if [ -d "$source" ]; then mkdir -p "$target" && mount --rbind "$source" "$target"
  else [ -e "$target" ] || : >"$target"; mount --bind "$source" "$target"; fi
done
shift
exec chroot "$root" "$@"
"""

KUBELET_PLUGINS = "plugins"  # <node>/kubelet/plugins (kubelet's /var/lib/kubelet/plugins)
KUBELET_REGISTRY = "plugins_registry"  # <node>/kubelet/plugins_registry


@dataclass
class NodeSetup:
    """What gpuc configured for the driver on a cluster's nodes, from its rendered values: the DRA chart's (the
    kubelet plugins' container environment comes from these values), or the GPU Operator's draDriver for a GPUCluster
    (driver root: hostPaths.driverInstallDir, which the operator's validator hands the plugins)."""

    namespace: str
    driver_root: str  # the host's path of the driver root (NVIDIA_DRIVER_ROOT): what the CDI specs name
    gates: dict[str, bool]
    image: str
    gpus: bool = True
    compute_domains: bool = True
    consumable_shares: str = ""
    log_verbosity: int = 4

    @classmethod
    def from_values(cls, values_dir: Path, namespace: str, image: str) -> NodeSetup:
        chart = sorted(f for f in values_dir.glob("*.yaml") if "dra-driver" in f.name)
        if chart:
            v = yaml.safe_load(chart[0].read_text()) or {}
            res = v.get("resources") or {}
            return cls(namespace, str(v.get("nvidiaDriverRoot", "/")), dict(v.get("featureGates") or {}), image,
                       (res.get("gpus") or {}).get("enabled", True) is True, (res.get("computeDomains") or {}).get("enabled", True) is True,
                       str(v.get("consumableShares") or ""), max(4, int(v.get("logVerbosity", 4))))
        op = yaml.safe_load((values_dir / "gpu-operator.yaml").read_text()) or {}
        dra = op.get("draDriver") or {}
        return cls(namespace, str((op.get("hostPaths") or {}).get("driverInstallDir", "/")), dict(dra.get("featureGates") or {}), image,
                   True, (dra.get("computeDomains") or {}).get("enabled", True) is True)


@dataclass
class KubeletPlugin:
    """One kubelet plugin process of one node (see the module's docstring)."""

    kind: str  # "gpu" or "compute-domain"
    node: str
    source: str
    root: MockDriverRoot
    setup: NodeSetup
    workdir: Path  # the node's folder: the plugin's log, nvidia-smi's record
    state: Path  # the node's kubelet folders, CDI specs and private root: a short path (a unix socket's is at most 107 bytes)
    cp: ControlPlane
    proc: subprocess.Popen[bytes] | None = None
    info: Obj = field(default_factory=dict)  # what GetInfo answered

    @property
    def driver(self) -> str:
        return GPU_DRIVER if self.kind == "gpu" else CD_DRIVER

    @property
    def plugins_dir(self) -> Path:
        return self.state / "kubelet" / KUBELET_PLUGINS

    @property
    def registry_dir(self) -> Path:
        return self.state / "kubelet" / KUBELET_REGISTRY

    @property
    def endpoint(self) -> Path:
        return self.plugins_dir / self.driver / "dra.sock"

    @property
    def registration(self) -> Path:
        return self.registry_dir / f"{self.driver}-reg.sock"

    @property
    def cdi_dir(self) -> Path:
        return self.state / "cdi"

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.kind}-kubelet-plugin.log"

    @property
    def nvidia_smi_log(self) -> Path:
        return self.workdir / "nvidia-smi.log"

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def nvidia_smi_calls(self) -> list[str]:
        return self.nvidia_smi_log.read_text().splitlines() if self.nvidia_smi_log.exists() else []

    def environment(self) -> dict[str, str]:
        """The container's environment as the driver's chart sets it (templates/kubeletplugin.yaml), with the node's
        paths; no health-check port and no metrics endpoint (both would listen on every interface)."""
        s = self.setup
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "HOME": "/root",
               "NODE_NAME": self.node, "NAMESPACE": s.namespace, "NVIDIA_DRIVER_ROOT": s.driver_root,
               "NVIDIA_VISIBLE_DEVICES": "void", "CDI_ROOT": str(self.cdi_dir), "IMAGE_NAME": s.image,
               "KUBELET_REGISTRAR_DIRECTORY_PATH": str(self.registry_dir), "KUBELET_PLUGINS_DIRECTORY_PATH": str(self.plugins_dir),
               "NVIDIA_CDI_HOOK_PATH": str(self.plugins_dir / self.driver / "nvidia-cdi-hook"), "HEALTHCHECK_PORT": "-1",
               "SERVICE_ACCOUNT_NAME": "default", "GPUC_NVIDIA_SMI_LOG": str(self.nvidia_smi_log), "KUBECONFIG": str(self.cp.kubeconfig())}
        if s.gates:
            env["FEATURE_GATES"] = dra_driver.gates_flag(s.gates)
        if self.kind == "gpu":
            env["NVIDIA_MIG_CONFIG_DEVICES"] = "all"
            if s.gates.get("PassthroughSupport"):
                env["HOST_ROOT"] = "/host-root"
            if s.consumable_shares:
                env["CONSUMABLE_SHARES"] = s.consumable_shares
        return env

    def start(self, client: KubeletDRA, kube: Kube, timeout: float = 90) -> KubeletPlugin:
        binary = plugin_binary(self.kind, self.source)
        for d in (self.plugins_dir / self.driver, self.registry_dir, self.cdi_dir):
            d.mkdir(parents=True, exist_ok=True)
        # what the plugin does itself without NVIDIA_CDI_HOOK_PATH: its image's nvidia-cdi-hook copied to its plugin folder
        hook = self.plugins_dir / self.driver / "nvidia-cdi-hook"
        shutil.copyfile(self.root.path / "usr" / "bin" / "nvidia-cdi-hook", hook)
        hook.chmod(0o755)
        if max(len(str(self.endpoint)), len(str(self.registration))) > 107:
            raise NodeError(f"the sockets of {self.node} would be longer than a unix socket's path may be: {self.registration}")
        host_root = self.state / "host-root"
        host_root.mkdir(exist_ok=True)
        private = self.state / f"{self.kind}-root"
        private.mkdir(exist_ok=True)
        mounts = ["/driver-root", str(self.root.path), "/host-root", str(host_root),
                  "/templates", str(dra_driver.templates_dir(self.source)), "/sys", str(self.root.sys)]
        if self.kind == "compute-domain":  # the IMEX channels' major, and fabric-imex-mgmt (a daemon's IMEX device)
            mounts += ["/proc/devices", str(self.root.proc_devices), "/proc/driver", str(self.root.path / "proc" / "driver")]
        command = [str(binary), "-v", str(self.setup.log_verbosity)]
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-ec", _PRIVATE_ROOT, "gpuc-node", str(private), *mounts, "--", *command]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=self.environment())
        try:
            self._wait("its registration socket", self.registration.exists, timeout)
            self.info = client.register(self)
            self._wait("its ResourceSlices on the API server", lambda: pool_complete(self.slices(kube)), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise NodeError(f"{self.kind}-kubelet-plugin-{self.source} of node {self.node} exited "
                                f"({self.proc.returncode if self.proc else '?'}) before {what} (log {self.log}):\n{self.log_tail()}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise NodeError(f"{self.kind}-kubelet-plugin-{self.source} of node {self.node}: no {what} after {timeout:.0f} s "
                                f"(log {self.log}):\n{self.log_tail()}")
            time.sleep(0.1)

    def slices(self, kube: Kube) -> list[Obj]:
        """The ResourceSlices this plugin published (its driver, its node)."""
        return [s for s in kube.items("resource.k8s.io/v1", "ResourceSlice")
                if s["spec"]["driver"] == self.driver and s["spec"].get("nodeName") == self.node]

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        stop_group(self.proc)


def pool_complete(slices: list[Obj]) -> bool:
    """Every slice of the pool's newest generation is on the API server: a plugin publishes its pool in several slices
    (on Kubernetes 1.35+ its counters apart from its devices, seen with DynamicMIG), so the first one alone is part of it."""
    if not slices:
        return False
    newest = max(s["spec"]["pool"]["generation"] for s in slices)
    current = [s for s in slices if s["spec"]["pool"]["generation"] == newest]
    return len(current) == current[0]["spec"]["pool"]["resourceSliceCount"]


# -- kubelet's gRPC client ---------------------------------------------------------------------------------------------


class KubeletDRA:
    """The kubelet-dra process (harness/node/cmd/kubelet-dra): a request line per call, its answer line when the call
    returns. Calls from several threads run side by side, as kubelet's calls for different pods do (the
    compute-domain plugin's prepare of a workload's channel waits for a daemon claim prepared meanwhile)."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "kubelet-dra.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([str(kubelet_dra_binary())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         start_new_session=True)
        self._lock = threading.Lock()
        self._id = 0
        self._waiting: dict[int, Future[Obj]] = {}
        self._reader = threading.Thread(target=self._read, name="kubelet-dra-answers", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            answer: Obj = json.loads(line)
            with self._lock:
                waiting = self._waiting.pop(int(answer.get("id", 0)), None)
            if waiting is not None:
                waiting.set_result(answer)
        with self._lock:  # the process ended: nobody answers the rest
            for waiting in self._waiting.values():
                waiting.set_exception(NodeError(f"kubelet-dra exited ({self.proc.poll()}); log {self.log}"))
            self._waiting.clear()

    def call(self, request: Obj) -> Obj:
        answer: Future[Obj] = Future()
        with self._lock:
            assert self.proc.stdin is not None
            if self.proc.poll() is not None:
                raise NodeError(f"kubelet-dra exited ({self.proc.poll()}); log {self.log}")
            self._id += 1
            self._waiting[self._id] = answer
            self.proc.stdin.write((json.dumps({**request, "id": self._id}) + "\n").encode())
            self.proc.stdin.flush()
        return answer.result(timeout=float(request.get("timeoutSeconds", 45)) + 15)

    def register(self, plugin: KubeletPlugin) -> Obj:
        answer = self.call({"op": "register", "registrar": str(plugin.registration)})
        if answer.get("error"):
            raise NodeError(f"registering {plugin.driver} of node {plugin.node}: {answer['error']}\n{plugin.log_tail()}")
        info: Obj = answer["info"]
        return info

    def health(self, plugin: KubeletPlugin, version: str) -> str:
        """'' when the plugin answers GetInfo and an empty NodePrepareResources of `version`, else the error."""
        return str(self.call({"op": "health", "registrar": str(plugin.registration), "endpoint": str(plugin.endpoint),
                              "version": version}).get("error", ""))

    def prepare(self, plugin: KubeletPlugin, claims: list[Obj], version: str, timeout: float = 45) -> Obj:
        return self.call({"op": "prepare", "endpoint": str(plugin.endpoint), "version": version, "claims": claims, "timeoutSeconds": timeout})

    def unprepare(self, plugin: KubeletPlugin, claims: list[Obj], version: str, timeout: float = 45) -> Obj:
        return self.call({"op": "unprepare", "endpoint": str(plugin.endpoint), "version": version, "claims": claims, "timeoutSeconds": timeout})

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with self._lock:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)  # the calls under way end within their timeout
            except subprocess.TimeoutExpired:
                stop_group(self.proc)
        self._reader.join(timeout=10)


# -- CDI ---------------------------------------------------------------------------------------------------------------


def resolve_cdi(cdi_dirs: Iterable[Path], device_ids: Iterable[str]) -> Obj:
    """What a container runtime injects for `device_ids` (vendor/class=name) from the CDI specs in `cdi_dirs`: each
    device's containerEdits and its spec's, merged as the CDI library merges them (device nodes, mounts, env, hooks);
    `missing` lists IDs no spec defines."""
    specs = []
    for d in cdi_dirs:
        for f in sorted(Path(d).glob("*.yaml")) + sorted(Path(d).glob("*.json")):
            specs.append(yaml.safe_load(f.read_text()))
    out: Obj = {"deviceNodes": [], "mounts": [], "env": [], "hooks": [], "missing": []}
    used_specs: list[int] = []
    for ident in device_ids:
        kind, _, name = ident.partition("=")
        found = next(((i, s, d) for i, s in enumerate(specs) if s.get("kind") == kind
                      for d in s.get("devices") or [] if d.get("name") == name), None)
        if found is None:
            out["missing"].append(ident)
            continue
        i, spec, device = found
        edits = [device.get("containerEdits") or {}]
        if i not in used_specs:
            used_specs.append(i)
            edits.insert(0, spec.get("containerEdits") or {})
        for e in edits:
            out["deviceNodes"] += e.get("deviceNodes") or []
            out["mounts"] += e.get("mounts") or []
            out["env"] += e.get("env") or []
            out["hooks"] += e.get("hooks") or []
    return out


# -- kubelet's DRA part ------------------------------------------------------------------------------------------------


@dataclass
class ClaimRecord:
    """A claim of a pod as kubelet's DRA part prepared it: one NodePrepareResources per driver of its allocation."""

    namespace: str
    name: str
    uid: str
    drivers: list[str]  # the drivers of its allocated devices, each a plugin it is prepared with
    devices: list[Obj] = field(default_factory=list)  # [{driver, requestNames, poolName, deviceName, cdiDeviceIDs}]
    error: str = ""


@dataclass
class PodRecord:
    """What kubelet's DRA part did for a pod: its claims as prepared, and per container the CDI device IDs kubelet
    passes to the runtime and what they resolve to in the plugins' CDI specs at that moment."""

    namespace: str
    name: str
    uid: str
    node: str
    claims: dict[str, ClaimRecord] = field(default_factory=dict)  # the pod's claim name (spec.resourceClaims[].name) ->
    containers: dict[str, list[str]] = field(default_factory=dict)
    edits: dict[str, Obj] = field(default_factory=dict)  # container -> resolve_cdi(...)
    prepared: bool = False
    unprepared: bool = False


@dataclass
class MockNode:
    name: str
    plugins: dict[str, KubeletPlugin]  # driver -> its plugin
    api_version: str = "v1"  # the DRA gRPC API kubelet speaks to the plugins (v1 from Kubernetes 1.34)
    call_timeout: float = 45  # kubelet's (pkg/kubelet/cm/dra/plugin: PluginClientTimeout)


class DraKubelet:
    """kubelet's DRA part for the mock nodes of one control plane (see the module's docstring)."""

    def __init__(self, cp: ControlPlane, client: KubeletDRA, interval: float = 0.2) -> None:
        self.kube = Kube(cp)
        self.client = client
        self.nodes: dict[str, MockNode] = {}
        self.records: dict[tuple[str, str], PodRecord] = {}
        self.failures: dict[tuple[str, str], list[str]] = {}  # (namespace, pod) -> each failed prepare's message
        self.prepared_claims: dict[tuple[str, str], set[str]] = {}  # (node, claim uid) -> pod uids using it
        self._lock = threading.Lock()
        self._inflight: dict[tuple[str, str], Future[None]] = {}
        self._retry_at: dict[tuple[str, str], float] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dra-kubelet")
        self._stop = threading.Event()
        self.interval = interval
        self._thread = threading.Thread(target=self._run, name="dra-kubelet", daemon=True)
        self._thread.start()

    # the stand-in asks this before it reports a pod started
    def may_start(self, pod: Obj) -> bool:
        node = pod["spec"].get("nodeName")
        if node not in self.nodes:
            return True
        record = self.records.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        return record is not None and record.prepared and record.uid == pod["metadata"]["uid"]

    def add(self, node: MockNode) -> None:
        self.nodes[node.name] = node

    def remove(self, name: str) -> None:
        self.nodes.pop(name, None)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                pods = self.kube.items("v1", "Pod")
            except Exception:  # the API server restarting or stopping under it: next round
                continue
            seen = set()
            for pod in pods:
                meta = pod["metadata"]
                key = (meta["namespace"], meta["name"])
                seen.add(key)
                if pod["spec"].get("nodeName") not in self.nodes or key in self._inflight:
                    continue
                record = self.records.get(key)
                if record is not None and record.uid != meta["uid"]:  # a new pod of the same name
                    self._submit(key, self._unprepare, record, False)
                    continue
                if meta.get("deletionTimestamp"):
                    if record is not None and not record.unprepared:
                        self._submit(key, self._unprepare, record, True)
                    elif record is None or record.unprepared:
                        self._submit(key, self._force_delete, pod)
                elif (record is None or not record.prepared) and time.monotonic() >= self._retry_at.get(key, 0):
                    self._submit(key, self._prepare, pod)
            for key, record in list(self.records.items()):  # deleted at once (no grace): unprepare what it held
                if key not in seen and not record.unprepared and key not in self._inflight:
                    self._submit(key, self._unprepare, record, False)

    def _submit(self, key: tuple[str, str], fn: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            try:
                fn(*args)
            except Exception as exc:  # recorded, not lost in the pool: the tests read `failures`
                self.failures.setdefault(key, []).append(f"harness: {fn.__name__}: {type(exc).__name__}: {exc}")
                self._retry_at[key] = time.monotonic() + 2

        future = self._pool.submit(run)
        self._inflight[key] = future
        future.add_done_callback(lambda _: self._inflight.pop(key, None))

    def _claims_of(self, pod: Obj) -> list[tuple[str, str]] | None:
        """(the pod's claim name, the ResourceClaim's name) for each of its claims; None while the claim controller
        has not made one from its template yet."""
        made = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        out = []
        for c in pod["spec"].get("resourceClaims") or []:
            if c.get("resourceClaimName"):
                out.append((c["name"], c["resourceClaimName"]))
            elif c["name"] in made:
                if made[c["name"]] is None:
                    continue  # the template made no claim for this pod (nothing to prepare)
                out.append((c["name"], str(made[c["name"]])))
            else:
                return None
        return out

    def _prepare(self, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        node = self.nodes[pod["spec"]["nodeName"]]
        claims = self._claims_of(pod)
        if claims is None:
            return
        record = PodRecord(meta["namespace"], meta["name"], meta["uid"], node.name)
        by_driver: dict[str, list[ClaimRecord]] = {}
        for pod_claim, claim_name in claims:
            claim = self.kube.get("resource.k8s.io/v1", "ResourceClaim", claim_name, meta["namespace"])
            if claim is None:
                return
            status = claim.get("status") or {}
            if not any(r.get("uid") == meta["uid"] for r in status.get("reservedFor") or []):
                return  # kubelet prepares only a claim reserved for the pod
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            rec = ClaimRecord(meta["namespace"], claim_name, claim["metadata"]["uid"], sorted({r["driver"] for r in results}))
            record.claims[pod_claim] = rec
            for driver in rec.drivers:
                by_driver.setdefault(driver, []).append(rec)
        errors = []
        for driver, recs in by_driver.items():
            plugin = node.plugins.get(driver)
            if plugin is None:
                errors.append(f"no plugin of driver {driver} runs on node {node.name}")
                continue
            refs = [{"namespace": r.namespace, "name": r.name, "uid": r.uid} for r in recs]
            answer = self.client.prepare(plugin, refs, node.api_version, node.call_timeout)
            if answer.get("error"):
                errors.append(f"{driver}: {answer['error']}")
                for r in recs:
                    with self._lock:
                        self.prepared_claims.setdefault((node.name, r.uid), set()).add(meta["uid"])
                continue
            answered = answer.get("claims") or {}
            for r in recs:
                with self._lock:  # prepared or tried: unprepared when the last pod using it goes
                    self.prepared_claims.setdefault((node.name, r.uid), set()).add(meta["uid"])
                if r.uid not in answered:
                    continue
                got = answered[r.uid]
                r.devices = [d for d in r.devices if d["driver"] != driver] + [{"driver": driver, **d} for d in got.get("devices") or []]
                if got.get("error"):  # kubelet's words (pkg/kubelet/cm/dra/manager.go)
                    r.error = "; ".join(x for x in (r.error, f"{driver}: {got['error']}") if x)
                    errors.append(f"{driver}: NodePrepareResources failed for ResourceClaim {r.name}: {got['error']}")
            skipped = sum(r.uid not in answered for r in recs)
            if skipped:  # an answer without a claim is no success (kubelet: "skipped N ResourceClaims")
                errors.append(f"{driver}: NodePrepareResources skipped {skipped} ResourceClaims")
        # per container, the CDI devices of the claims (or the claim's request) it names, as kubelet hands them over
        cdi_dirs = [p.cdi_dir for p in node.plugins.values()]
        for container in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
            ids: list[str] = []
            for ref in (container.get("resources") or {}).get("claims") or []:
                held = record.claims.get(ref["name"])
                for dev in held.devices if held else []:
                    if not ref.get("request") or ref["request"] in dev.get("requestNames", []):
                        ids += [i for i in dev.get("cdiDeviceIDs") or [] if i not in ids]
            record.containers[container["name"]] = ids
            record.edits[container["name"]] = resolve_cdi(cdi_dirs, ids)
        self.records[key] = record
        if errors:
            self.failures.setdefault(key, []).append("; ".join(errors))
            tries = len(self.failures[key])
            self._retry_at[key] = time.monotonic() + min(10.0, 0.5 * 2 ** tries)
            return
        self._annotate(pod, record)  # before `prepared`: whoever sees the pod prepared finds the annotation
        record.prepared = True

    def _annotate(self, pod: Obj, record: PodRecord) -> None:
        try:
            self.kube.dyn.patch(self.kube.resource("v1", "Pod"), name=record.name, namespace=record.namespace,
                                body={"metadata": {"annotations": {RECORD_ANNOTATION: json.dumps(record.containers, sort_keys=True)}}},
                                content_type="application/merge-patch+json")
        except Exception:  # deleted meanwhile
            pass

    def _unprepare(self, record: PodRecord, then_delete: bool) -> None:
        """What kubelet does for a pod that is gone (deleted at once) or being deleted (then it removes the pod): each
        claim no other pod on the node uses is unprepared; the record goes."""
        if record.unprepared:
            return
        node = self.nodes.get(record.node)
        for rec in record.claims.values():
            if node is None:
                continue
            with self._lock:
                users = self.prepared_claims.get((record.node, rec.uid), set())
                users.discard(record.uid)
                last = not users
                if last:
                    self.prepared_claims.pop((record.node, rec.uid), None)
            for driver in rec.drivers if last else []:
                plugin = node.plugins.get(driver)
                if plugin is None:
                    continue
                answer = self.client.unprepare(plugin, [{"namespace": rec.namespace, "name": rec.name, "uid": rec.uid}], node.api_version)
                answered = answer.get("claims") or {}
                err = answer.get("error") or (answered.get(rec.uid) or {}).get("error") or \
                    ("NodeUnprepareResources skipped 1 ResourceClaims" if rec.uid not in answered else "")
                if err:
                    self.failures.setdefault((record.namespace, record.name), []).append(f"unprepare {rec.name} ({driver}): {err}")
        record.unprepared = True
        if then_delete:
            self._force_delete({"metadata": {"namespace": record.namespace, "name": record.name, "uid": record.uid}})
        if self.records.get((record.namespace, record.name)) is record:
            del self.records[(record.namespace, record.name)]

    def _force_delete(self, pod: Obj) -> None:
        """What kubelet does once a deleted pod's containers are gone and its claims unprepared."""
        meta = pod["metadata"]
        try:
            self.kube.dyn.delete(self.kube.resource("v1", "Pod"), name=meta["name"], namespace=meta["namespace"],
                                 body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        except Exception:  # already gone
            pass

    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self._inflight and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=True, cancel_futures=True)


# -- mock nodes of a control plane -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    """A mock node: its name and labels, the GPUs its driver root simulates, the driver build and what gpuc set."""

    name: str
    profile: Profile
    gpus: int
    source: str
    setup: NodeSetup
    labels: tuple[tuple[str, str], ...] = ()
    driver_version: str = "580.95.05"
    cuda_version: str = "13.0"
    compute_domains: bool = False  # run the compute-domain plugin too
    api_version: str = "v1"  # the DRA gRPC API kubelet speaks to the plugins
    call_timeout: float = 45  # how long kubelet waits for a plugin's answer (kubelet: 45 s)


class ComputeDomainDaemons:
    """What a ComputeDomain's daemon does once its pod runs on a node, played: the daemon (cmd/compute-domain-daemon)
    starts the node's IMEX daemon and, once that is ready, joins its domain's ComputeDomainClique `<domain uid>.<clique
    ID>` with its node, pod IP and status Ready (the clique ID is the node's NVLink fabric's: the GPUs' cluster UUID and
    clique, from the mock profile's fabric section, as the compute-domain plugin reads them from NVML). No daemon runs
    here; the rest is real: the ComputeDomain controller's DaemonSet, the DaemonSet controller's pods on the nodes the
    compute-domain plugin labelled, the scheduler allocating their daemon claims, the plugin preparing them. This also
    creates the ServiceAccount the daemons run as, which the driver's chart installs (rbac-compute-domain-daemon.yaml)."""

    API = "resource.nvidia.com/v1beta1"
    PREFIX = "computedomain-daemon-"

    def __init__(self, nodes: MockNodes, namespace: str, interval: float = 0.2) -> None:
        self.nodes, self.namespace = nodes, namespace
        self.kube = Kube(nodes.cp)
        self.joined: list[tuple[str, str]] = []  # (domain uid, node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="compute-domain-daemons", daemon=True)
        self._thread.start()

    def clique_id(self, node: str) -> str:
        fabric = (self.nodes.root(self.nodes.specs[node]).profile.config().get("device_defaults") or {}).get("fabric") or {}
        return f"{fabric.get('cluster_uuid', '')}.{fabric.get('clique_id', 0)}"

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self._round()
            except Exception:  # the API server stopping under it, a conflict: next round
                continue

    def _round(self) -> None:
        for ds in self.kube.items("apps/v1", "DaemonSet", self.namespace):
            if ds["metadata"]["name"].startswith(self.PREFIX):
                account = ds["spec"]["template"]["spec"].get("serviceAccountName")
                if account and self.kube.get("v1", "ServiceAccount", account, self.namespace) is None:
                    self.kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": self.namespace}})
        for pod in self.kube.items("v1", "Pod", self.namespace):
            owner = next((o["name"] for o in pod["metadata"].get("ownerReferences") or [] if o.get("kind") == "DaemonSet"), "")
            node = pod["spec"].get("nodeName")
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])
            if not owner.startswith(self.PREFIX) or node not in self.nodes.specs or not ready or pod["metadata"].get("deletionTimestamp"):
                continue
            uid = owner[len(self.PREFIX):]
            if (uid, node) not in self.joined:
                self._join(uid, node)
                self.joined.append((uid, node))

    def _join(self, uid: str, node: str) -> None:
        clique = self.clique_id(node)
        name = f"{uid}.{clique}"
        current = self.kube.get(self.API, "ComputeDomainClique", name, self.namespace)
        daemons = [d for d in (current or {}).get("daemons") or [] if d.get("nodeName") != node]
        ip = f"10.244.{len(daemons)}.{sorted(self.nodes.specs).index(node) + 2}"
        daemons.append({"nodeName": node, "ipAddress": ip, "cliqueID": clique, "index": len(daemons), "status": "Ready"})
        body: Obj = {"apiVersion": self.API, "kind": "ComputeDomainClique",
                "metadata": {"name": name, "namespace": self.namespace,
                             "labels": {"resource.nvidia.com/computeDomain": uid, "resource.nvidia.com/computeDomain.cliqueID": clique}},
                "daemons": daemons}
        if current is None:
            self.kube.create(body)
        else:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.kube.dyn.replace(self.kube.resource(self.API, "ComputeDomainClique"), body=body, namespace=self.namespace)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class MockNodes:
    """The mock nodes of one control plane and kubelet's part on them: Nodes registered as a kubelet registers them,
    their plugins started (the driver roots shared by nodes of one profile, GPU count and driver version), the DRA
    kubelet and the kubelet stand-in (harness/kubelet.py, holding each pod on a mock node until its claims are
    prepared). `stop()` ends every process; `remove(name)` one node (its plugins stopped, the Node and its slices deleted)."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        from .kubelet import KubeletStandIn

        self.cp, self.workdir = cp, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kube = Kube(cp)
        self.client = KubeletDRA(workdir)
        self.state = Path(tempfile.mkdtemp(prefix="gpuc-nodes-"))  # kubelet's folders: unix sockets need short paths
        self.kubelet = DraKubelet(cp, self.client)
        self.stand_in = KubeletStandIn(Kube(cp), may_start=self.kubelet.may_start)
        self.specs: dict[str, NodeSpec] = {}

    def root(self, spec: NodeSpec) -> MockDriverRoot:
        name = f"{spec.profile.name}-{spec.gpus}-{nvml_version_string(spec.driver_version)}"
        return MockDriverRoot.create(self.workdir / "driver-roots" / name, spec.profile, spec.gpus, spec.driver_version, spec.cuda_version)

    def add(self, spec: NodeSpec) -> MockNode:
        """Register the Node (a kubelet's labels and `spec.labels`) and start its plugins: returns once kubelet's
        registration went through and their slices are published."""
        from .kubelet import add_node

        if spec.name in self.kubelet.nodes:
            raise NodeError(f"mock node {spec.name} is already running")
        root = self.root(spec)
        workdir, state = self.workdir / "nodes" / spec.name, self.state / spec.name
        for d in (workdir, state):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        if self.kube.get("v1", "Node", spec.name) is None:
            add_node(self.kube, spec.name, dict(spec.labels))
        self.kube.ensure_namespace(spec.setup.namespace)
        kinds = (["gpu"] if spec.setup.gpus else []) + (["compute-domain"] if spec.compute_domains else [])
        # the compute-domain plugin watches ComputeDomains before it publishes: the chart installs their CRDs (those of
        # its own build; a ComputeDomain controller started before may have installed another build's, which stay)
        if spec.compute_domains and self.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "computedomains.resource.nvidia.com") is None:
            self.kube.install_crds(dra_driver.crd_files(spec.source))
        plugins: dict[str, KubeletPlugin] = {}
        try:
            for kind in kinds:
                plugin = KubeletPlugin(kind, spec.name, spec.source, root, spec.setup, workdir, state, self.cp)
                plugins[plugin.driver] = plugin.start(self.client, self.kube)
        except BaseException:
            for p in plugins.values():
                p.stop()
            raise
        node = MockNode(spec.name, plugins, spec.api_version, spec.call_timeout)
        self.specs[spec.name] = spec
        self.kubelet.add(node)
        return node

    def node(self, name: str) -> MockNode:
        return self.kubelet.nodes[name]

    def remove(self, name: str) -> None:
        node = self.kubelet.nodes.get(name)
        if node is None:
            return
        self.kubelet.remove(name)
        for p in node.plugins.values():
            p.stop()
        self.specs.pop(name, None)
        self.delete_node(name)

    def delete_node(self, name: str) -> None:
        """The Node and the slices published for it (whoever published them)."""
        for s in self.kube.items("resource.k8s.io/v1", "ResourceSlice"):
            if s["spec"].get("nodeName") == name:
                try:
                    self.kube.dyn.delete(self.kube.resource("resource.k8s.io/v1", "ResourceSlice"), name=s["metadata"]["name"])
                except Exception:  # its owner's deletion took it already
                    pass
        try:
            self.kube.dyn.delete(self.kube.resource("v1", "Node"), name=name)
        except Exception:  # never registered
            pass

    def stop(self) -> None:
        self.stand_in.stop()
        self.kubelet.stop()
        for name in list(self.kubelet.nodes):
            for p in self.kubelet.nodes[name].plugins.values():
                p.stop()
        self.client.stop()
        shutil.rmtree(self.state, ignore_errors=True)
