"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and, on request, kube-scheduler
and kube-controller-manager, built by harness/build.sh. No kubelet: a bound pod is the scheduler's
verdict. Everything listens on 127.0.0.1 with ports the kernel picks; certificates are the API
server's self-signed ones; clients authenticate with static tokens (an admin in system:masters and an
unprivileged user for RBAC tests).
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from . import components
from .components import Release
from .processes import ProcessOwner, free_port, stop_group

ADMIN_TOKEN = "gpuc-harness-admin"
VIEWER_TOKEN = "gpuc-harness-viewer"  # user "viewer": no group, so RBAC grants it nothing by default




class ControlPlaneError(RuntimeError):
    """A component did not start; the message ends with the tail of its log."""


@dataclass
class ControlPlane(ProcessOwner):
    release: Release
    workdir: Path
    emulated_minor: str | None = None
    port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    error = ControlPlaneError
    # how it was started, so that restart() starts the same processes again
    etcd_port: int = 0
    feature_gates: dict[str, bool] = field(default_factory=dict)
    runtime_config: str | None = None
    apiserver_args: tuple[str, ...] = ()
    scheduler: bool = False
    controllers: bool = False
    workload_controllers: bool = False

    @property
    def minor(self) -> str:
        """The Kubernetes minor this server behaves as."""
        return self.emulated_minor or self.release.minor

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "certs" / "apiserver.crt"

    def kubeconfig(self, token: str = ADMIN_TOKEN, name: str = "admin") -> Path:
        """A kubeconfig file for `token` (written once per user)."""
        path = self.workdir / f"kubeconfig-{name}"
        if not path.exists():
            cfg = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "harness", "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": name, "context": {"cluster": "harness", "user": name}}],
                "current-context": name,
            }
            path.write_text(json.dumps(cfg, indent=1))
        return path

    def get(self, path: str, token: str = ADMIN_TOKEN) -> tuple[int, bytes]:
        """GET a path of the API server; (status, body)."""
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {token}"})
        try:  # the context too: while the API server writes its certificate, the file can exist and be empty
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
            with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return 0, b""



# What an API server of an older minor needs before it serves resource.k8s.io at all: before 1.34
# DRA is a beta feature that is off by default, and its beta API group versions are off too.
_DRA_BETA_SWITCHES = {
    "1.32": ("resource.k8s.io/v1beta1=true", "DynamicResourceAllocation=true"),
    "1.33": ("resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true", "DynamicResourceAllocation=true"),
}


def start(
    release: Release,
    workdir: Path,
    *,
    emulated_minor: str | None = None,
    feature_gates: dict[str, bool] | None = None,
    runtime_config: str | None = None,
    scheduler: bool = False,
    controllers: bool = False,
    apiserver_args: tuple[str, ...] = (),
    workload_controllers: bool = False,
) -> ControlPlane:
    """Start etcd and kube-apiserver (and the scheduler and controllers when asked), ready to serve.

    `emulated_minor` runs a newer binary as an older minor (--emulated-version); `feature_gates` and
    `runtime_config` add to what the minor needs to serve DRA; `apiserver_args` are more kube-apiserver flags
    (e.g. --allow-privileged=true, which the GPU Operator's DaemonSets need).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    cp = ControlPlane(release=release, workdir=workdir, emulated_minor=emulated_minor, feature_gates=dict(feature_gates or {}),
                      runtime_config=runtime_config, apiserver_args=apiserver_args, scheduler=scheduler,
                      controllers=controllers, workload_controllers=workload_controllers)
    try:
        _start_etcd(cp)
        _start_the_rest(cp)
    except BaseException:
        cp.stop()
        raise
    return cp


def _start_the_rest(cp: ControlPlane) -> None:
    """kube-apiserver on etcd, then the controllers and the scheduler the control plane was started with."""
    _start_apiserver(cp)
    if cp.controllers or cp.workload_controllers:
        _start_controllers(cp, workloads=cp.workload_controllers)
    if cp.scheduler:
        _start_scheduler(cp)


def restart(cp: ControlPlane, emulated_minor: str | None) -> None:
    """Stop the API server, the controllers and the scheduler and start them again behaving as `emulated_minor`
    (None: the binary's own), on the same etcd, port and certificates: what a cluster's control-plane upgrade does
    to it (one minor at a time, etcd kept). Clients keep their kubeconfig; their watches break and resume."""
    for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver"):
        if name in cp.procs:
            stop_group(cp.procs.pop(name))
    cp.emulated_minor = emulated_minor
    _start_the_rest(cp)


def _gates_flag(gates: dict[str, bool]) -> str:
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))


def _start_etcd(cp: ControlPlane) -> None:
    etcd_port, peer_port = free_port(), free_port()
    cp.etcd_port = etcd_port
    data = cp.workdir / "etcd"
    shutil.rmtree(data, ignore_errors=True)
    cp._spawn("etcd", [
        str(components.binary("etcd")), "--name", "harness", "--data-dir", str(data),
        "--listen-client-urls", f"http://127.0.0.1:{etcd_port}", "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer_port}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
        "--initial-cluster", f"harness=http://127.0.0.1:{peer_port}", "--unsafe-no-fsync", "--log-level", "warn",
    ])

    def etcd_ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{etcd_port}/health", timeout=2) as r:
                return b'"true"' in r.read()
        except (urllib.error.URLError, OSError):
            return False

    cp._wait("etcd", etcd_ready, 30)


def _start_apiserver(cp: ControlPlane) -> None:
    """kube-apiserver on the control plane's etcd, behaving as its minor; on a restart, at the same port with the
    same certificates and service-account key."""
    runtime_config, extra = cp.runtime_config, cp.apiserver_args
    certs = cp.workdir / "certs"
    certs.mkdir(exist_ok=True)
    sa_key = cp.workdir / "sa.key"
    if not sa_key.exists():
        subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
    tokens = cp.workdir / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},admin,1,"system:masters"\n{VIEWER_TOKEN},viewer,2\n')
    runtime = _DRA_BETA_SWITCHES.get(cp.minor, ("", ""))[0]
    cp.port = cp.port or free_port()
    argv = [
        str(components.binary(f"kube-apiserver-{cp.release.version}")),
        "--etcd-servers", f"http://127.0.0.1:{cp.etcd_port}",
        "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(cp.port),
        "--cert-dir", str(certs), "--token-auth-file", str(tokens), "--authorization-mode", "RBAC",
        "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file", str(sa_key), "--service-account-signing-key-file", str(sa_key),
        "--service-cluster-ip-range", "10.96.0.0/24", "--endpoint-reconciler-type", "none",
        "--enable-priority-and-fairness=false", "--profiling=false",
    ]
    runtime_all = ",".join(x for x in (runtime, runtime_config or "") if x)
    if runtime_all:
        argv += ["--runtime-config", runtime_all]
    argv += _gates_args(cp)
    if cp.emulated_minor:
        argv += ["--emulated-version", cp.emulated_minor]
    cp._spawn("kube-apiserver", [*argv, *extra])
    cp._wait("kube-apiserver", lambda: cp.ca_file.exists() and cp.get("/readyz")[0] == 200, 120)


# What turns a chart's Deployments, DaemonSets and Jobs into pods and counts them (Argo CD's health reads the counts).
WORKLOAD_CONTROLLERS = "deployment-controller,replicaset-controller,daemonset-controller,job-controller"


def _start_controllers(cp: ControlPlane, workloads: bool = False) -> None:
    """The resource-claim controller turns a pod's ResourceClaimTemplates into claims; the service
    account controller makes the `default` account pods are admitted with; the namespace controller
    empties and removes a deleted namespace (without it a deleted namespace stays Terminating), and the
    garbage collector finishes foreground deletions (pulumi-kubernetes deletes in the foreground: without
    it a deleted object keeps its foregroundDeletion finalizer and never goes); the resource-quota controller fills in a
    ResourceQuota's status, which quota admission and pulumi-kubernetes' readiness wait on (gpuc's team budgets are
    quotas). With `workloads`, the controllers
    of Deployments, ReplicaSets, DaemonSets and Jobs too (harness/kubelet.py reports their pods started)."""
    kubeconfig = str(cp.kubeconfig())
    cp._spawn("kube-controller-manager", [
        str(components.binary(f"kube-controller-manager-{_controllers_release(cp).version}")),
        "--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
        "--controllers", "resourceclaim-controller,serviceaccount-controller,namespace-controller,garbage-collector-controller,"
        "resourcequota-controller"
        + ("," + WORKLOAD_CONTROLLERS if workloads else ""),
        "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0", "--use-service-account-credentials=false",
        *_controller_emulation(cp), *_gates_args(cp),
    ])
    cp._wait("kube-controller-manager", lambda: cp.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, 60)


def _start_scheduler(cp: ControlPlane) -> None:
    kubeconfig = str(cp.kubeconfig())
    config = cp.workdir / "scheduler.yaml"
    # Leader election off; the client's rate limit raised so 1,000 binds are not throttled.
    config.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": kubeconfig, "qps": 500, "burst": 1000},
    }))
    port = free_port()
    argv = [
        str(components.binary(f"kube-scheduler-{_controllers_release(cp).version}")),
        "--config", str(config), "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
        "--bind-address", "127.0.0.1", "--secure-port", str(port), "--cert-dir", str(cp.workdir / "scheduler-certs"),
        *_controller_emulation(cp), *_gates_args(cp),
    ]
    cp._spawn("kube-scheduler", argv)
    # /readyz holds until the scheduler's informers have synced (always allowed without credentials)
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=insecure, timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    cp._wait("kube-scheduler", ready, 60)


def _controllers_release(cp: ControlPlane) -> Release:
    return components.controller_release(cp.minor, cp.release)


def _controller_emulation(cp: ControlPlane) -> list[str]:
    """The scheduler and the controllers behave as the control plane's minor where their release is newer (their gates
    default as that minor's)."""
    return ["--emulated-version", cp.minor] if _controllers_release(cp).minor != cp.minor else []


def _gates_args(cp: ControlPlane) -> list[str]:
    """--feature-gates of every component: the minor's DRA switch where DRA is beta and off (1.32, 1.33), which the
    scheduler and the resource-claim controller need as much as the API server, and the control plane's own."""
    gate = _DRA_BETA_SWITCHES.get(cp.minor, ("", ""))[1]
    gates = {k: v == "true" for k, v in (item.split("=") for item in gate.split(",") if item)} | cp.feature_gates
    return ["--feature-gates", _gates_flag(gates)] if gates else []
