"""The real Argo CD, built by harness/build.sh (harness/build.d/argocd.sh), syncing git repositories into a
harness API server.

What runs is what Argo CD's own e2e setup (its Procfile) runs outside a cluster: redis, the repo server and
the application controller, each a process on loopback, from the one `argocd` binary (it becomes the
command $ARGOCD_BINARY_NAME names). No API server, UI, Dex or ApplicationSet controller: Applications are
objects the test applies, and the controller alone reconciles them. The repo server shells out to the
built helm and kustomize (a bin/ of symlinks first on its PATH) and to the system git, so a repository is a
local `file://` one (GitRepo).

Argo CD's configuration is what its install manifests and API server would have written: the CRDs (read
from manifests/crds of the source tree the binary was built from, the build's copy of
../shared/upstream/src/argo-cd-<version>), the `argocd`
namespace, argocd-cm and argocd-secret (labelled part-of=argocd, else Argo CD ignores them), the `default`
AppProject (the API server creates it on start; nothing else would) and a cluster Secret that names the
harness API server as the destination the Applications ask for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from kubernetes.dynamic.exceptions import ApiException

from . import components, helm
from .controlplane import ADMIN_TOKEN, ControlPlane
from .kube import FIELD_MANAGER, Kube, Obj
from .processes import ProcessOwner, free_port

ARGO_API = "argoproj.io/v1alpha1"
NAMESPACE = "argocd"
PART_OF = {"app.kubernetes.io/part-of": "argocd"}
# The field manager of the configuration this module installs; merge_config() applies under its own
# (gpuc's health checks, by default), so a partial ConfigMap never takes another manager's keys away.
INSTALL_MANAGER = "argocd-install"
REFRESH = "argocd.argoproj.io/refresh"


class ArgoCDError(RuntimeError):
    """A process did not start, or an Application did not reach the state a test waited for."""


def version() -> str:
    return components.pins()["ARGOCD_VERSION"]


def binaries() -> dict[str, Path]:
    """argocd, helm and kustomize, or ComponentMissing naming harness/build.sh."""
    pins = components.pins()
    return {
        "argocd": components.binary(f"argocd-{pins['ARGOCD_VERSION']}"),
        "helm": helm.binary(),
        "kustomize": components.binary(f"kustomize-{pins['KUSTOMIZE_VERSION']}"),
    }


@cache
def source_dir() -> Path:
    """The build's copy of the Argo CD source tree the binary was built from (harness/build.d/argocd.sh copies
    ../shared/upstream/src/argo-cd-<version> into the cache): the CRDs are read from there, never copied into
    this repository."""
    path = components.cache_dir() / "src" / f"argo-cd-{version()}"
    if not (path / "manifests" / "crds").is_dir():
        raise components.ComponentMissing(f"the Argo CD {version()} source is not copied to {path}: run harness/build.sh")
    return path


def crd_files() -> list[Path]:
    """Application, AppProject and ApplicationSet CRDs at the pinned version."""
    crds = source_dir() / "manifests" / "crds"
    return [crds / f"{name}-crd.yaml" for name in ("application", "appproject", "applicationset")]


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _redis_pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass(frozen=True)
class ResourceResult:
    """One entry of status.operationState.syncResult.resources, in the order Argo CD synced them (a later
    wave only starts once the earlier one is applied and healthy, so list order is wave order)."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str
    status: str  # Synced, SyncFailed, Pruned, PruneSkipped, "" for hooks
    message: str
    sync_phase: str  # PreSync, Sync, PostSync, SyncFail
    hook_phase: str  # Running, Succeeded, Failed, ...
    hook_type: str  # "" unless a hook

    @property
    def key(self) -> str:
        """`Kind/name` or `Kind/namespace/name`: what a test compares orders by."""
        return "/".join(x for x in (self.kind, self.namespace, self.name) if x)


@dataclass
class ArgoCD(ProcessOwner):
    """Argo CD's processes against one control plane, and the helpers a test drives it with."""

    cp: ControlPlane
    workdir: Path
    destination: str
    namespace: str = NAMESPACE
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    kube: Kube = field(init=False)
    error = ArgoCDError

    def __post_init__(self) -> None:
        self.kube = Kube(self.cp)

    # -- processes -----------------------------------------------------------------------------

    def check_running(self) -> None:
        """Raise with the log tail of any Argo CD process that has exited (a crash mid-test)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise self._fail(name, f"exited with status {proc.returncode}")


    # -- configuration -------------------------------------------------------------------------

    def _ssa(self, obj: Obj, manager: str) -> Obj:
        """Server-side apply under `manager`, forcing conflicts (what `kubectl apply --server-side` users do)."""
        res = self.kube.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        try:
            out = self.kube.dyn.server_side_apply(res, body=obj, namespace=meta.get("namespace"), field_manager=manager, force_conflicts=True)
        except ApiException as exc:
            raise ArgoCDError(f"applying {obj['kind']} {meta.get('name')} was refused: HTTP {exc.status}: {exc.body}") from exc
        return out.to_dict()

    def apply(self, obj: Obj) -> Obj:
        """Server-side apply an Application (or any object); a refusal raises with the server's message.
        An Argo CD object without a namespace goes into Argo CD's namespace."""
        obj = json.loads(json.dumps(obj))
        if obj.get("apiVersion") == ARGO_API:
            obj.setdefault("metadata", {}).setdefault("namespace", self.namespace)
        return self._ssa(obj, FIELD_MANAGER)

    def config(self) -> dict[str, str]:
        """argocd-cm's data as Argo CD reads it."""
        cm = self.kube.get("v1", "ConfigMap", "argocd-cm", self.namespace) or {}
        return dict(cm.get("data") or {})

    def merge_config(self, data: dict[str, str] | Path, *, manager: str = "gpuc") -> dict[str, str]:
        """Merge keys into argocd-cm: a dict of keys, or a partial argocd-cm file (gpuc's
        argocd/argocd-cm-health.yaml), applied server-side as its header tells users to. The controller
        watches argocd-cm, so new health checks apply from its next reconcile (refresh() to hurry it)."""
        if isinstance(data, Path):
            doc = yaml.safe_load(data.read_text())
            if not (isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and doc.get("metadata", {}).get("name") == "argocd-cm"):
                raise ArgoCDError(f"{data} is not a partial argocd-cm ConfigMap")
            data = dict(doc.get("data") or {})
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": self.namespace, "labels": PART_OF},
                "data": data}
        return dict(self._ssa(body, manager).get("data") or {})

    def register_cluster(self, name: str) -> None:
        """A cluster Secret for the harness API server (admin token, its self-signed CA), so an Application's
        destination `name` (or the API server's URL) resolves to it."""
        config = {"bearerToken": ADMIN_TOKEN, "tlsClientConfig": {"caData": base64.b64encode(self.cp.ca_file.read_bytes()).decode()}}
        self._ssa({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"cluster-{name}", "namespace": self.namespace,
                         "labels": {"argocd.argoproj.io/secret-type": "cluster", **PART_OF}},
            "type": "Opaque",
            "stringData": {"name": name, "server": self.cp.server, "config": json.dumps(config)},
        }, INSTALL_MANAGER)

    # -- Applications --------------------------------------------------------------------------

    def application(self, name: str) -> Obj | None:
        return self.kube.get(ARGO_API, "Application", name, self.namespace)

    def refresh(self, name: str, hard: bool = False) -> None:
        """Ask the controller to compare again now (it also re-resolves the branch: a new commit is seen).
        The controller removes the annotation once done."""
        res = self.kube.resource(ARGO_API, "Application")
        body = {"metadata": {"annotations": {REFRESH: "hard" if hard else "normal"}}}
        self.kube.dyn.patch(res, name=name, namespace=self.namespace, body=body, content_type="application/merge-patch+json")

    def wait(self, name: str, *, sync: str | None = "Synced", health: str | None = "Healthy", revision: str | None = None,
             phase: str | None = "Succeeded", timeout: float = 120) -> Obj:
        """Wait until Application `name` reports `sync` and `health` (None: any) at `revision` (a commit SHA,
        None: any), with its last operation in `phase` (None: any; a manual app may have none). The error
        says where it stopped: the status, its conditions and the operation's message."""
        def at(revision: str, result: dict[str, Any]) -> bool:
            """`result` (status.sync, or the sync operation's result) is of `revision` (one of a multi-source app's)."""
            return result.get("revision") == revision or revision in (result.get("revisions") or [])

        def matches(app: Obj) -> bool:
            st = app.get("status") or {}
            op = st.get("operationState") or {}
            return ((sync is None or (st.get("sync") or {}).get("status") == sync)
                    and (health is None or (st.get("health") or {}).get("status") == health)
                    and (revision is None or at(revision, st.get("sync") or {}))
                    # the finished operation is the one that synced `revision`, not the one before it
                    and (phase is None or (op.get("phase") == phase and (revision is None or at(revision, op.get("syncResult") or {}))))
                    and not app.get("operation"))  # a requested operation the controller has not taken yet

        want = ", ".join(f"{k}={v}" for k, v in (("sync", sync), ("health", health), ("revision", revision), ("phase", phase)) if v)
        return self.wait_for(name, matches, want, timeout)

    def wait_for(self, name: str, predicate: Callable[[Obj], bool], what: str, timeout: float = 120) -> Obj:
        """Wait until `predicate(app)` holds; `what` names the state in the error."""
        deadline = time.monotonic() + timeout
        app: Obj | None = None
        while True:
            self.check_running()
            app = self.application(name)
            if app is not None and predicate(app):
                return app
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        raise ArgoCDError(f"Application {name} did not reach {what} within {timeout:.0f} s:\n{describe(app)}\n"
                          f"-- application controller log:\n{self.log_tail('application-controller', 15)}")

    def sync_result(self, name: str) -> list[ResourceResult]:
        """The last sync's resources, in the order they were synced."""
        app = self.application(name) or {}
        entries = (((app.get("status") or {}).get("operationState") or {}).get("syncResult") or {}).get("resources") or []
        return [ResourceResult(group=e.get("group", ""), version=e.get("version", ""), kind=e.get("kind", ""),
                               namespace=e.get("namespace", ""), name=e.get("name", ""), status=e.get("status", ""),
                               message=e.get("message", ""), sync_phase=e.get("syncPhase", ""), hook_phase=e.get("hookPhase", ""),
                               hook_type=e.get("hookType", "")) for e in entries]


def describe(app: Obj | None) -> str:
    """An Application's state for an error message: sync, health, revision, conditions, last operation."""
    if app is None:
        return "  (no such Application)"
    st = app.get("status") or {}
    op = st.get("operationState") or {}
    lines = [f"  sync: {(st.get('sync') or {}).get('status')} at {(st.get('sync') or {}).get('revision')}",
             f"  health: {(st.get('health') or {}).get('status')} {(st.get('health') or {}).get('message') or ''}".rstrip(),
             f"  operationState: {op.get('phase')}: {op.get('message')}"]
    lines += [f"  condition {c.get('type')}: {c.get('message')}" for c in st.get("conditions") or []]
    for r in st.get("resources") or []:
        health = r.get("health") or {}
        if r.get("status") != "Synced" or health.get("status") not in (None, "Healthy"):
            lines.append(f"  resource {r.get('kind')}/{r.get('name')}: {r.get('status')} {health.get('status', '')} {health.get('message', '')}".rstrip())
    for r in ((op.get("syncResult") or {}).get("resources")) or []:
        if r.get("status") not in (None, "Synced", "Pruned"):
            lines.append(f"  sync result {r.get('kind')}/{r.get('name')}: {r.get('status')}: {r.get('message')}")
    return "\n".join(lines)


@dataclass
class GitRepo:
    """A local git repository Argo CD reads through a file:// URL; commits go to `branch`."""

    path: Path
    branch: str = "main"

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def git(self, *args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "gpuc", "GIT_AUTHOR_EMAIL": "gpuc@example.invalid",
               "GIT_COMMITTER_NAME": "gpuc", "GIT_COMMITTER_EMAIL": "gpuc@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null"}
        out = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} in {self.path} failed: {out.stderr.strip()}")
        return out.stdout.strip()

    @classmethod
    def init(cls, path: Path, branch: str = "main") -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path, branch)
        repo.git("init", "-q", "-b", branch)
        return repo

    def write(self, files: dict[str, str | Obj | list[Obj]]) -> None:
        """Write files (text, or objects as YAML documents) at paths relative to the repository."""
        for rel, content in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                target.write_text(content)
            else:
                docs = content if isinstance(content, list) else [content]
                target.write_text(yaml.safe_dump_all(docs, sort_keys=False))

    def copy_tree(self, src: Path, dest: str) -> None:
        """Copy a directory (a rendered gpuc tree) into the repo at `dest`, replacing what was there."""
        target = self.path / dest
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(src, target)

    def remove(self, rel: str) -> None:
        self.git("rm", "-r", "-q", rel)

    def commit(self, message: str) -> str:
        """Commit everything in the work tree; the new commit's SHA (what Argo CD reports as revision)."""
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


def start(cp: ControlPlane, workdir: Path, *, destination: str = "harness", config: dict[str, str] | None = None,
          resync_s: int = 10, self_heal_s: int = 5) -> ArgoCD:
    """Install Argo CD's CRDs and configuration into `cp`, register `cp` as cluster `destination`, and
    start redis, the repo server and the application controller (logs in `workdir`).

    `config` adds argocd-cm keys at install (merge_config() adds more later). The controller re-reads every
    Application's git source each `resync_s` seconds (Argo CD's default is 120 s plus up to 60 s jitter:
    too slow for a test that commits and waits), and reports repo server errors at once (no grace period).
    Pruning needs the control plane's garbage collector (ControlPlanes.get(minor, scheduler=True) runs it):
    Argo CD deletes in the foreground, and without it a pruned object keeps its foregroundDeletion finalizer.
    A self-heal (selfHeal: true re-syncing the revision it already synced) waits `self_heal_s` seconds after
    the last operation. Argo CD's default (an exponential backoff starting at 0 s) re-syncs at once when the
    comparison right after a sync still sees the last wave's objects missing from its cache, and that partial
    sync's result then replaces the full one in operationState; waiting lets the cache catch up first.
    """
    bins = binaries()
    crds = crd_files()
    if shutil.which("redis-server") is None:
        raise components.ComponentMissing("redis-server is not installed: apt-get install -y redis-server (Argo CD's cache)")
    workdir.mkdir(parents=True, exist_ok=True)
    argo = ArgoCD(cp=cp, workdir=workdir, destination=destination)
    try:
        _install(argo, crds, config or {}, resync_s)
        _start_redis(argo)
        _start_repo_server(argo, bins, resync_s)
        _start_controller(argo, bins["argocd"], resync_s, self_heal_s)
    except BaseException:
        argo.stop()
        raise
    return argo


def _install(argo: ArgoCD, crds: list[Path], config: dict[str, str], resync_s: int) -> None:
    """What Argo CD's install manifests and its API server would have put in the cluster."""
    argo.kube.install_crds(crds)
    argo.kube.ensure_namespace(argo.namespace)
    meta = {"namespace": argo.namespace, "labels": PART_OF}
    # timeout.reconciliation is what the install's controller reads its resync period from (an env var
    # sourced from argocd-cm); the processes here get it as a flag, this keeps argocd-cm telling the truth
    argo._ssa({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", **meta},
               "data": {"timeout.reconciliation": f"{resync_s}s", **config}}, INSTALL_MANAGER)
    # server.secretkey: the API server generates it on first start; without it Argo CD logs its settings
    # as incomplete on every read
    argo._ssa({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "argocd-secret", **meta}, "type": "Opaque",
               "stringData": {"server.secretkey": secrets.token_urlsafe(32)}}, INSTALL_MANAGER)
    argo._ssa({"apiVersion": ARGO_API, "kind": "AppProject", "metadata": {"name": "default", "namespace": argo.namespace},
                "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*", "name": "*"}],
                         "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}}, INSTALL_MANAGER)
    argo.register_cluster(argo.destination)


def _start_redis(argo: ArgoCD) -> None:
    port = argo.ports["redis"] = free_port()
    argo._spawn("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", str(argo.workdir), "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"])
    argo._wait("redis", lambda: _redis_pong(port), 20)


def _common_env(argo: ArgoCD, binary_name: str) -> dict[str, str]:
    """Paths Argo CD would find mounted from ConfigMaps in its pods, under the workdir (they must exist)."""
    data = argo.workdir / "app-config"
    for sub in ("tls", "ssh", "gpg/keys", "gpg/source"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    return {**os.environ, "ARGOCD_BINARY_NAME": binary_name, "ARGOCD_NAMESPACE": argo.namespace,
            "ARGOCD_TLS_DATA_PATH": str(data / "tls"), "ARGOCD_SSH_DATA_PATH": str(data / "ssh"),
            "ARGOCD_GNUPGHOME": str(data / "gpg/keys"), "ARGOCD_GPG_DATA_PATH": str(data / "gpg/source"),
            "ARGOCD_GPG_ENABLED": "false", "KUBECONFIG": str(argo.cp.kubeconfig())}


SOCKET_PATH_MAX = 100  # a unix socket's path holds 107 bytes (sun_path, less its NUL); a margin below


def _ask_pass_socket(workdir: Path) -> Path:
    """The askpass socket's path: in the workdir while it fits a unix socket's 107 bytes, else a short one named
    after the workdir under the temp dir (pytest-xdist's per-worker temp paths outgrow the limit), or under /tmp
    when TMPDIR is itself too long for it."""
    path = workdir / "reposerver-ask-pass.sock"
    if len(str(path).encode()) <= SOCKET_PATH_MAX:
        return path
    name = f"gpuc-argocd-{hashlib.sha256(str(workdir).encode()).hexdigest()[:16]}.sock"
    short = next(p for p in (Path(tempfile.gettempdir()) / name, Path("/tmp") / name) if len(str(p).encode()) <= SOCKET_PATH_MAX)
    short.unlink(missing_ok=True)  # left by a run that was killed
    return short


def _start_repo_server(argo: ArgoCD, bins: dict[str, Path], resync_s: int) -> None:
    """Plaintext gRPC on loopback; helm, kustomize and Argo CD's git-verify-wrapper.sh first on PATH; clones, the askpass
    socket (a fixed /tmp path by default: two repo servers would share it; _ask_pass_socket) and temp files in the workdir.
    The branch -> commit cache expires with the resync period, as the install's timeout.reconciliation makes
    it (its default is 3 minutes: a new commit would go unseen that long)."""
    tools = argo.workdir / "bin"
    tools.mkdir(exist_ok=True)
    # 3.5 runs git-verify-wrapper.sh (the image's /usr/local/bin copy of hack/) on every manifest generation, GPG on
    # or off (reposerver/repository/repository.go, VerifyCommitSignature, kept for API compatibility): without it
    # on PATH each generation fails with "permission denied"
    for name, target in (("helm", bins["helm"]), ("kustomize", bins["kustomize"]),
                         ("git-verify-wrapper.sh", source_dir() / "hack" / "git-verify-wrapper.sh")):
        link = tools / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    tmp = argo.workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    env = _common_env(argo, "argocd-repo-server") | {
        "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}", "TMPDIR": str(tmp),
        "ARGOCD_ASK_PASS_SOCK": str(_ask_pass_socket(argo.workdir)),
        "HELM_CACHE_HOME": str(argo.workdir / "helm/cache"), "HELM_CONFIG_HOME": str(argo.workdir / "helm/config"),
        "HELM_DATA_HOME": str(argo.workdir / "helm/data"),
    }
    port = argo.ports["repo-server"] = free_port()
    metrics = argo.ports["repo-server-metrics"] = free_port()
    argo._spawn("repo-server", [
        str(bins["argocd"]), "--address", "127.0.0.1", "--port", str(port), "--metrics-address", "127.0.0.1",
        # 3.5 refuses --disable-tls beside its default client CA path (/app/config/reposerver/mtls/client-ca.crt):
        # an empty one turns client-certificate checks off, as plaintext implies (an empty env variable does not)
        "--metrics-port", str(metrics), "--disable-tls", "--client-ca-path=", "--redis", f"127.0.0.1:{argo.ports['redis']}",
        "--revision-cache-expiration", f"{resync_s}s",
        "--logformat", "text", "--loglevel", "info",
    ], env)
    # ?full=true: the repo server dials its own gRPC port, so ready means serving
    argo._wait("repo-server", lambda: _http_ok(f"http://127.0.0.1:{metrics}/healthz?full=true"), 60)


def _start_controller(argo: ArgoCD, binary: Path, resync_s: int, self_heal_s: int) -> None:
    """The application controller talks to the API server as the harness admin (--kubeconfig), to the
    repo server in plaintext; few processors (a test has a handful of Applications)."""
    metrics = argo.ports["application-controller-metrics"] = free_port()
    argo._spawn("application-controller", [
        str(binary), "--kubeconfig", str(argo.cp.kubeconfig()), "--namespace", argo.namespace,
        "--redis", f"127.0.0.1:{argo.ports['redis']}",
        "--repo-server", f"127.0.0.1:{argo.ports['repo-server']}", "--repo-server-plaintext",
        "--app-resync", str(resync_s), "--app-resync-jitter", "0", "--repo-error-grace-period-seconds", "0",
        "--self-heal-timeout-seconds", str(self_heal_s), "--self-heal-backoff-timeout-seconds", "0",  # 0: no backoff, the timeout
        # Argo CD 3 keeps each resource's health in redis (the app tree) unless told to store it in the Application:
        # the tests read it there, as `argocd app get` shows it
        "--persist-resource-health",
        "--status-processors", "4", "--operation-processors", "4", "--metrics-port", str(metrics),
        "--logformat", "text", "--loglevel", "info",
    ], _common_env(argo, "argocd-application-controller"))
    argo._wait("application-controller", lambda: _http_ok(f"http://127.0.0.1:{metrics}/healthz"), 60)


def application(name: str, *, repo_url: str, path: str, destination: str, revision: str = "HEAD", namespace: str | None = None,
                automated: bool = True, sync_options: list[str] | None = None, project: str = "default",
                annotations: dict[str, str] | None = None) -> Obj:
    """An Application of a directory source (plain YAML, or kustomize when it holds a kustomization.yaml)."""
    spec: dict[str, Any] = {
        "project": project,
        "source": {"repoURL": repo_url, "path": path, "targetRevision": revision},
        "destination": {"name": destination, **({"namespace": namespace} if namespace else {})},
    }
    policy: dict[str, Any] = {}
    if automated:
        policy["automated"] = {"prune": True, "selfHeal": True}
    if sync_options:
        policy["syncOptions"] = list(sync_options)
    if policy:
        spec["syncPolicy"] = policy
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": ARGO_API, "kind": "Application", "metadata": meta, "spec": spec}
