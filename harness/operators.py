"""The real NVIDIA GPU Operator and NIM Operator managers against a harness control plane.

harness/build.d/operators.sh builds them (from ../shared/upstream/src, copied into the cache) into
$cache/bin/gpu-operator-<v> and nim-operator-<v>, and keeps the copied source in $cache/src/: the CRDs
are installed from there, and the files each manager reads from a fixed path are mounted from there.

Fixed paths: the GPU Operator reads its assets from /opt/gpu-operator/<state> and /opt/gpu-operator/manifests,
the NIM Operator its templates from /manifests; neither is configurable. Each manager runs in a private
mount namespace (unshare -m --propagation private) whose root is an overlay of / with its upper layer on
a tmpfs, with the source folders bound at those paths and /proc, /dev, /sys and the harness's folders bound
through, then chroot: the machine's root filesystem is never written, and the namespace (with its tmpfs)
goes when the manager exits. As root this needs nothing else; otherwise unshare also maps the user to root
in a new user namespace (-r), which needs unprivileged user namespaces.

No kubelet runs: the operators create DaemonSets, Jobs and Deployments that never get pods; a test writes
the statuses a kubelet and the workload controllers would (Kube.set_status).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from . import components
from .controlplane import ControlPlane
from .kube import Kube
from .processes import free_port, stop_group

GPU_OPERATOR_NAMESPACE = "gpu-operator"
NIM_OPERATOR_NAMESPACE = "nim-operator"
# The kube-apiserver flag the GPU Operator's DaemonSets need (driver, toolkit, validator run privileged).
GPU_OPERATOR_APISERVER_ARGS = ("--allow-privileged=true",)

T = TypeVar("T")


class OperatorError(RuntimeError):
    """An operator did not start, exited, or did not reach a state in time; the message ends with its log's tail."""


def version(which: str) -> str:
    """The pinned version of 'gpu-operator' or 'nim-operator' (harness/versions.env)."""
    return components.pins()[{"gpu-operator": "GPU_OPERATOR_VERSION", "nim-operator": "NIM_OPERATOR_VERSION"}[which]]


def source(which: str) -> Path:
    """The operator's source as harness/build.d/operators.sh copied it into the cache (CRDs, assets, manifests)."""
    name = {"gpu-operator": "gpu-operator", "nim-operator": "k8s-nim-operator"}[which]
    path = components.cache_dir() / "src" / f"{name}-{version(which)}"
    if not (path / "go.mod").is_file():
        raise components.ComponentMissing(f"{path} is missing: harness/build.sh (its block harness/build.d/operators.sh) copies it there")
    return path


def crd_dir(which: str) -> Path:
    """config/crd/bases of the operator's source: the CRDs the manager serves (GPU Operator: clusterpolicies,
    nvidiadrivers, gpuclusters; NIM Operator: its nine apps.nvidia.com kinds)."""
    return source(which) / "config" / "crd" / "bases"


def gpu_operator_crds() -> list[Path]:
    return sorted(crd_dir("gpu-operator").glob("nvidia.com_*.yaml"))


def nim_operator_crds() -> list[Path]:
    return sorted(crd_dir("nim-operator").glob("apps.nvidia.com_*.yaml"))


def private_root(argv: list[str], scratch: Path, mounts: Mapping[str, Path], through: Iterable[Path] = ()) -> list[str]:
    """`argv` run where each key of `mounts` (an absolute path, e.g. /manifests) shows its folder (read-only),
    in a private mount namespace: the root is an overlay of / (upper layer on a tmpfs mounted at `scratch`,
    an empty folder), /proc, /dev, /sys and each folder of `through` are bound at their own paths (read-write:
    what the process writes there reaches the machine), then chroot. The command runs with the caller's
    environment; its working directory is /."""
    lines = [
        "set -eu",
        f"s={shlex.quote(str(scratch))}",
        'mount -t tmpfs gpuc-harness "$s"',
        'mkdir "$s/upper" "$s/work" "$s/root"',
        'mount -t overlay overlay -o lowerdir=/,upperdir="$s/upper",workdir="$s/work" "$s/root"',
        'for m in /proc /dev /sys; do mount --rbind "$m" "$s/root$m"; done',
    ]
    for path in dict.fromkeys(str(Path(p).resolve()) for p in through):
        q = shlex.quote(path)
        lines.append(f'mkdir -p "$s/root"{q} && mount --bind {q} "$s/root"{q}')
    for target, folder in mounts.items():
        t, f = shlex.quote(target), shlex.quote(str(Path(folder).resolve()))
        lines.append(f'mkdir -p "$s/root"{t} && mount --bind {f} "$s/root"{t} && mount -o remount,bind,ro "$s/root"{t}')
    lines.append('exec chroot "$s/root" "$@"')
    user = [] if os.geteuid() == 0 else ["-r"]
    return ["unshare", "-m", *user, "--propagation", "private", "sh", "-c", "\n".join(lines), "gpuc-harness-root", *argv]


@dataclass
class Operator:
    """A running operator manager; stop() (or the with-block) ends it and with it its mount namespace."""

    name: str
    cp: ControlPlane
    workdir: Path
    namespace: str
    argv: list[str]
    env: dict[str, str]
    health_port: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(text[-lines:])

    def fail(self, what: str) -> OperatorError:
        return OperatorError(f"{self.name} {what} (log {self.log}):\n{self.tail()}")

    def check(self) -> None:
        """Raise when the manager has exited."""
        if self.proc is None or self.proc.poll() is not None:
            raise self.fail(f"exited with status {self.proc.returncode if self.proc else None}")

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 120, interval: float = 0.5) -> T:
        """Poll `probe` until it returns something other than None or False; raise with the log tail when the
        manager exits or `timeout` passes first. `what` names the awaited state in the message."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            value = probe()
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                raise self.fail(f"did not reach {what} within {timeout:.0f} s")
            time.sleep(interval)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _start(self, timeout: float) -> Operator:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, start_new_session=True)
        try:
            self.wait_for("readiness (/readyz)", self.ready, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_group(self.proc, grace=15)

    def __enter__(self) -> Operator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _prepare(cp: ControlPlane, crds: list[Path], namespace: str) -> None:
    kube = Kube(cp)
    kube.install_crds(crds)
    kube.ensure_namespace(namespace)


def _operator(name: str, cp: ControlPlane, workdir: Path | None, namespace: str, binary: Path, args: list[str],
              env: Mapping[str, str], mounts: Mapping[str, Path]) -> Operator:
    workdir = workdir or cp.workdir / name
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = workdir / "root"
    scratch.mkdir(exist_ok=True)
    port = free_port()
    kubeconfig = cp.kubeconfig()
    argv = [str(binary), f"--kubeconfig={kubeconfig}", f"--health-probe-bind-address=127.0.0.1:{port}", *args]
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TZ", "LANG")}
    full_env = base | {"OPERATOR_NAMESPACE": namespace, "WATCH_NAMESPACE": ""} | dict(env)
    through = [cp.workdir, workdir, binary.parent]
    return Operator(name=name, cp=cp, workdir=workdir, namespace=namespace, env=full_env, health_port=port,
                    argv=private_root(argv, scratch, mounts, through))


def start_gpu_operator(cp: ControlPlane, workdir: Path | None = None, *, namespace: str = GPU_OPERATOR_NAMESPACE,
                       env: Mapping[str, str] | None = None, args: Iterable[str] = (), timeout: float = 120) -> Operator:
    """Install the GPU Operator's CRDs from its source, create `namespace` and start the manager as the chart's
    Deployment runs it (OPERATOR_NAMESPACE, WATCH_NAMESPACE=""; no leader election, no metrics), with its assets
    at /opt/gpu-operator/<state> and its manifests at /opt/gpu-operator/manifests; returns once /readyz answers.
    The API server needs --allow-privileged=true (GPU_OPERATOR_APISERVER_ARGS) for the DaemonSets to be admitted.
    `env` adds to the environment (the chart's DRIVER_MANAGER_IMAGE, VALIDATOR_IMAGE, ...)."""
    src = source("gpu-operator")
    _prepare(cp, gpu_operator_crds(), namespace)
    mounts = {f"/opt/gpu-operator/{d.name}": d for d in sorted((src / "assets").iterdir()) if d.is_dir()}
    mounts["/opt/gpu-operator/manifests"] = src / "manifests"
    op = _operator("gpu-operator", cp, workdir, namespace, components.binary(f"gpu-operator-{version('gpu-operator')}"),
                   ["--metrics-bind-address=0", *args], env or {}, mounts)
    return op._start(timeout)


def start_nim_operator(cp: ControlPlane, workdir: Path | None = None, *, namespace: str = NIM_OPERATOR_NAMESPACE,
                       env: Mapping[str, str] | None = None, args: Iterable[str] = (), timeout: float = 120) -> Operator:
    """Install the NIM Operator's CRDs (the nine apps.nvidia.com kinds) from its source, create `namespace` and
    start the manager as the chart's Deployment runs it (OPERATOR_NAMESPACE, WATCH_NAMESPACE="", webhooks off:
    ENABLE_WEBHOOKS=false; metrics and leader election off by default), with its templates at /manifests;
    returns once /readyz answers."""
    src = source("nim-operator")
    _prepare(cp, nim_operator_crds(), namespace)
    op = _operator("nim-operator", cp, workdir, namespace, components.binary(f"nim-operator-{version('nim-operator')}"),
                   list(args), {"ENABLE_WEBHOOKS": "false", **(env or {})}, {"/manifests": src / "manifests"})
    return op._start(timeout)
