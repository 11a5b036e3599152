"""The NVIDIA DRA driver's admission webhook and ComputeDomain controller, run against a harness control plane.

harness/build.d/dra-driver.sh builds both from ../shared/upstream/src/dra-driver-nvidia-gpu-<source> (one build per
source in versions.env DRA_DRIVER_SOURCES) into the cache, with a copy of each source tree beside them: the controller's
templates and the CRDs come from that copy. Neither binary needs a GPU (../shared/upstream/src/README.md).

- `start_webhook`: `webhook-<source>` on a free loopback port with a certificate for 127.0.0.1, registered with the
  API server by a ValidatingWebhookConfiguration (the chart's rules: resourceclaims and resourceclaimtemplates of
  resource.k8s.io, CREATE and UPDATE, failurePolicy Fail) for every resource.k8s.io version the server serves;
  it returns once the API server has refused a probe claim with the webhook's own verdict.
- `start_compute_domain_controller`: `compute-domain-controller-<source>` with its CRDs installed. It reads its
  templates from the fixed path /templates; the host's / is not touched: the controller runs chrooted into a tmpfs,
  in a private mount namespace, that bind-mounts every top-level entry of / and the source's templates/ at /templates
  (see _PRIVATE_ROOT).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import components
from .components import ComponentMissing
from .controlplane import ControlPlane
from .kube import Kube, Rejection
from .processes import free_port, stop_group

WEBHOOK_PATH = "/validate-resource-claim-parameters"
WEBHOOK_CONFIG = "gpuc-harness-nvidia-dra-driver"  # the ValidatingWebhookConfiguration's name
WEBHOOK_NAME = "gpu.nvidia.com"  # its webhook's name, as the chart names it
PROBE_NAMESPACE = "default"
_PROBE_FIELD = "gpucHarnessProbe"  # an unknown field: every build's strict decoder refuses it
_VERDICT = "configs failed to validate"  # how the webhook words a refusal (cmd/webhook/main.go)

# The build each driver line is tested with: the line's own source, else the closest one (no source of 25.3 or 25.8
# is in ../shared/upstream/src; 0.4 is served by main, the 0.5 line's branch, whose config API 0.4 shares).
_BUILD_FOR_LINE = {"25.12": "v25.12.0", "0.4": "main-9593204", "0.5": "main-9593204"}
_CLOSEST_FOR_LINE = {"25.3": "v25.12.0", "25.8": "v25.12.0"}


class DriverProcessError(RuntimeError):
    """The webhook or the controller did not start, or the API server did not call the webhook."""


# -- builds ------------------------------------------------------------------------------------------------------------


def sources() -> list[str]:
    """The driver sources versions.env builds (DRA_DRIVER_SOURCES)."""
    return components.pins()["DRA_DRIVER_SOURCES"].split()


def source_for_line(line: str) -> tuple[str, str | None]:
    """(the build to test driver line `line` with, None when it is the line's own, else why another)."""
    if line in _BUILD_FOR_LINE:
        return _BUILD_FOR_LINE[line], None
    if line in _CLOSEST_FOR_LINE:
        src = _CLOSEST_FOR_LINE[line]
        return src, f"no source of driver line {line} is built; the closest build, {src}, stands in for it"
    raise ComponentMissing(f"no DRA driver build serves driver line {line}")


def upstream_dir() -> Path:
    """../shared/upstream/src (GPUC_UPSTREAM_SRC overrides, then GPUC_SHARED/upstream/src): the nearest shared/ above
    the checkout, as build.sh finds it."""
    if os.environ.get("GPUC_UPSTREAM_SRC"):
        return Path(os.environ["GPUC_UPSTREAM_SRC"])
    if os.environ.get("GPUC_SHARED"):
        return Path(os.environ["GPUC_SHARED"]) / "upstream" / "src"
    here = components.HERE
    return next((p / "shared" / "upstream" / "src" for p in here.parents if (p / "shared" / "upstream" / "src").is_dir()),
                here.parent.parent / "shared" / "upstream" / "src")


def _tree_stamp(root: Path) -> str:
    """The stamp dra-driver.sh records: sha256sum of every file (./path, C order), hashed again, first 16 hex digits."""
    files = sorted((p for p in root.rglob("*") if p.is_file() and not p.is_symlink()), key=lambda p: ("./" + p.relative_to(root).as_posix()).encode())
    listing = "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  ./{f.relative_to(root).as_posix()}\n" for f in files)
    return hashlib.sha256(listing.encode()).hexdigest()[:16]


_BUILD = "harness/build.sh (its block harness/build.d/dra-driver.sh builds the DRA driver; it reuses what is built)"


def source_dir(source: str) -> Path:
    """The cache's copy of the source tree `source` was built from."""
    path = components.cache_dir() / "src" / f"dra-driver-nvidia-gpu-{source}"
    if not (path / "go.mod").is_file():
        raise ComponentMissing(f"the DRA driver source {source} is not copied to {path}: run {_BUILD}")
    return path


def driver_binary(command: str, source: str) -> Path:
    """`compute-domain-controller` or `webhook` of `source`; a build from other sources than ../shared/upstream/src's is missing."""
    path = components.binary(f"{command}-{source}")
    stamp_file = path.parent / f"{path.name}.stamp"
    built = stamp_file.read_text().split()[0] if stamp_file.is_file() else ""
    original = upstream_dir() / f"dra-driver-nvidia-gpu-{source}"
    if original.is_dir() and built != _stamp_of(original):
        raise ComponentMissing(f"{path.name} in {path.parent} was built from other sources than {original}: run {_BUILD}")
    return path


_stamps: dict[Path, str] = {}


def _stamp_of(root: Path) -> str:
    if root not in _stamps:
        _stamps[root] = _tree_stamp(root)
    return _stamps[root]


def crd_files(source: str) -> list[Path]:
    """computedomains and computedomaincliques, from the chart of the same source (the controller needs its own)."""
    found = sorted((source_dir(source) / "deployments" / "helm").glob("*/crds/resource.nvidia.com_*.yaml"))
    if not found:
        raise ComponentMissing(f"no CRDs under {source_dir(source)}/deployments/helm/*/crds")
    return found


def templates_dir(source: str) -> Path:
    return source_dir(source) / "templates"


def known_feature_gates(source: str) -> dict[str, bool]:
    """The gates the build of `source` accepts in --feature-gates, with their defaults (its own --help lists them)."""
    out = subprocess.run([str(driver_binary("webhook", source)), "--help"], capture_output=True, text=True, timeout=60)
    gates = dict(re.findall(r"\b([A-Za-z0-9]+)=true\|false \([A-Z]+ - default=(true|false)\)", out.stdout + out.stderr))
    if not gates:
        raise DriverProcessError(f"webhook-{source} --help lists no feature gates:\n{out.stdout}{out.stderr}")
    return {name: default == "true" for name, default in gates.items()}


def gates_flag(gates: dict[str, bool]) -> str:
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))


# -- processes ---------------------------------------------------------------------------------------------------------


@dataclass
class _Process:
    name: str
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def spawn(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=env)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def fail(self, what: str) -> DriverProcessError:
        tail = self.log.read_text(errors="replace").splitlines()[-25:] if self.log.exists() else []
        return DriverProcessError(f"{self.name} {what} (log {self.log}):\n" + "\n".join(tail))

    def wait(self, ready: Any, timeout: float, what: str = "was not ready") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise self.fail(f"exited with status {self.proc.returncode if self.proc else '?'} while starting")
            if ready():
                return
            time.sleep(0.2)
        raise self.fail(f"{what} after {timeout:.0f} s")

    def stop(self) -> None:
        stop_group(self.proc)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _https_ok(url: str, cafile: Path) -> bool:
    try:
        with urllib.request.urlopen(url, context=ssl.create_default_context(cafile=str(cafile)), timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def served_versions(cp: ControlPlane, group: str = "resource.k8s.io") -> list[str]:
    status, body = cp.get(f"/apis/{group}")
    if status != 200:
        raise DriverProcessError(f"the API server at {cp.server} serves no {group} (HTTP {status})")
    return [v["version"] for v in json.loads(body)["versions"]]


# -- the admission webhook ---------------------------------------------------------------------------------------------


@dataclass
class Webhook:
    """A running webhook registered with `cp`'s API server; stop() unregisters it, then stops it."""

    cp: ControlPlane
    source: str
    feature_gates: dict[str, bool]
    port: int
    versions: list[str]
    process: _Process
    kube: Kube

    @property
    def probe_version(self) -> str:
        return "v1" if "v1" in self.versions else self.versions[0]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}{WEBHOOK_PATH}"

    def stop(self) -> None:
        try:
            self.kube.dyn.delete(self.kube.resource("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"), name=WEBHOOK_CONFIG)
        except Exception:  # already gone, or the API server is gone with it
            pass
        self.process.stop()
        # the API server drops a deleted configuration asynchronously: wait until it writes claims without asking
        api = self.cp.procs.get("kube-apiserver")
        deadline = time.monotonic() + 30
        while api is not None and api.poll() is None and time.monotonic() < deadline:
            if _probe_refused(self.kube, self.probe_version)[1] == "admitted":
                break
            time.sleep(0.2)

    def log(self) -> str:
        return self.process.log_text()

    def __enter__(self) -> Webhook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _certificate(workdir: Path) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for IP 127.0.0.1."""
    crt, key = workdir / "webhook.crt", workdir / "webhook.key"
    if not crt.exists():
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                        "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
    return crt, key


def _probe_claim() -> dict[str, Any]:
    """A claim with one opaque GpuConfig carrying an unknown field: no requests, so it is one shape in every version."""
    return {"metadata": {"name": "gpuc-harness-webhook-probe", "namespace": PROBE_NAMESPACE},
            "spec": {"devices": {"config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", _PROBE_FIELD: True}}}]}}}


def _probe_refused(kube: Kube, version: str = "v1") -> tuple[bool, str]:
    """(whether the API server refused the probe claim with the webhook's verdict, its answer)."""
    probe = {"apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaim", **_probe_claim()}
    answer = kube.apply(probe, dry_run=True)
    if isinstance(answer, Rejection):
        return _VERDICT in answer.message and _PROBE_FIELD in answer.message, answer.message
    return False, "admitted"


def start_webhook(cp: ControlPlane, source: str, workdir: Path, feature_gates: dict[str, bool] | None = None,
                  *, timeout: float = 90) -> Webhook:
    """Start `webhook-<source>` with `feature_gates`, register it with `cp` and return once the API server calls it.

    One webhook per API server: a second start replaces the first's registration (stop the first before).
    """
    gates = dict(feature_gates or {})
    binary = driver_binary("webhook", source)
    workdir.mkdir(parents=True, exist_ok=True)
    crt, key = _certificate(workdir)
    port = free_port()
    process = _Process(f"webhook-{source}", workdir / f"webhook-{source}-{port}.log")
    argv = [str(binary), "--tls-cert-file", str(crt), "--tls-private-key-file", str(key), "--port", str(port)]
    if gates:
        argv += ["--feature-gates", gates_flag(gates)]
    process.spawn(argv)
    kube = Kube(cp)
    versions = served_versions(cp)
    hook = Webhook(cp, source, gates, port, versions, process, kube)
    try:
        process.wait(lambda: _https_ok(f"https://127.0.0.1:{port}/readyz", crt), 30)
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIG, "labels": {"app.kubernetes.io/managed-by": "gpuc-harness"}},
            "webhooks": [{
                "name": WEBHOOK_NAME,
                "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": versions, "operations": ["CREATE", "UPDATE"],
                           "resources": ["resourceclaims", "resourceclaimtemplates"], "scope": "Namespaced"}],
                "clientConfig": {"url": hook.url, "caBundle": base64.b64encode(crt.read_bytes()).decode()},
                "failurePolicy": "Fail", "matchPolicy": "Equivalent", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
            }],
        }
        answer = kube.apply(config)
        if isinstance(answer, Rejection):
            raise DriverProcessError(f"the API server refused the webhook's registration: {answer}")
        last = ""

        def called() -> bool:
            nonlocal last
            refused, last = _probe_refused(kube, hook.probe_version)
            return refused

        process.wait(called, timeout, what=f"was not called by the API server (last answer to the probe: {last})")
    except BaseException:
        hook.stop()
        raise
    return hook


# -- the ComputeDomain controller --------------------------------------------------------------------------------------

# Run as: unshare -m --propagation private sh -ec _PRIVATE_ROOT gpuc-private-root ROOT TEMPLATES COMMAND...
# In a mount namespace of its own, a tmpfs on ROOT (an empty directory) gets every top-level entry of / (directories
# and files bind-mounted recursively, symbolic links copied) and TEMPLATES read-only at ROOT/templates; then COMMAND
# runs chrooted there with the same view of the machine plus /templates. The namespace, and with it every mount,
# goes when the process exits; the host's / and ROOT stay as they were.
_PRIVATE_ROOT = r"""
root="$1" templates="$2"; shift 2
mount -t tmpfs -o mode=755 gpuc-private-root "$root"
for entry in /* /.[!.]*; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  target="$root/${entry#/}"
  if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$target"
  elif [ -d "$entry" ]; then mkdir "$target" && mount --rbind "$entry" "$target"
  else : >"$target" && mount --bind "$entry" "$target"; fi
done
mkdir "$root/templates" && mount --bind -o ro "$templates" "$root/templates"
exec chroot "$root" "$@"
"""


@dataclass
class ComputeDomainController:
    """A running compute-domain-controller; `namespace` is the driver's (where it puts DaemonSets and cliques)."""

    cp: ControlPlane
    source: str
    namespace: str
    feature_gates: dict[str, bool]
    process: _Process
    metrics_port: int
    argv: list[str] = field(default_factory=list)

    def stop(self) -> None:
        self.process.stop()

    def log(self) -> str:
        return self.process.log_text()

    def __enter__(self) -> ComputeDomainController:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_compute_domain_controller(cp: ControlPlane, source: str, workdir: Path, *, namespace: str = "nvidia-dra-driver-gpu",
                                    feature_gates: dict[str, bool] | None = None, image: str | None = None,
                                    verbosity: int = 4, timeout: float = 60) -> ComputeDomainController:
    """Install the ComputeDomain CRDs of `source`, make `namespace` and start the controller of `source` against `cp`.

    Returns once its metrics endpoint answers: its informers start with it, so what it does to ComputeDomains is for
    the caller to wait for.
    """
    gates = dict(feature_gates or {})
    binary = driver_binary("compute-domain-controller", source)
    templates = templates_dir(source)
    kube = Kube(cp)
    kube.install_crds(crd_files(source))
    kube.ensure_namespace(namespace)
    workdir.mkdir(parents=True, exist_ok=True)
    root = workdir / f"cd-controller-{source}-root"
    root.mkdir(exist_ok=True)
    port = free_port()
    process = _Process(f"compute-domain-controller-{source}", workdir / f"compute-domain-controller-{source}.log")
    command = [str(binary), "--kubeconfig", str(cp.kubeconfig()), "--http-endpoint", f"127.0.0.1:{port}", "-v", str(verbosity)]
    if gates:
        command += ["--feature-gates", gates_flag(gates)]
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-ec", _PRIVATE_ROOT, "gpuc-private-root", str(root), str(templates), *command]
    env = dict(os.environ, POD_NAME=f"compute-domain-controller-{source}", NAMESPACE=namespace,
               IMAGE_NAME=image or f"registry.example.com/dra-driver-nvidia-gpu:{source}", LOG_VERBOSITY_CD_DAEMON="4")
    process.spawn(argv, env)
    controller = ComputeDomainController(cp, source, namespace, gates, process, port, argv)

    def metrics() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    try:
        process.wait(metrics, timeout)
    except BaseException:
        controller.stop()
        raise
    return controller
