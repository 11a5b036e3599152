"""The real NIM Operator (harness/build.d/operators.sh, v3.1.2) reconciling every NIMCache and NIMService gpuc renders
(prod-east and west), and gpuc's Argo CD health checks read against the statuses the operator writes.

Per cluster: a fresh API server of the cluster's minor whose Service range is on loopback (127.1.0.0/24), so the
operator's HTTP GET of <ClusterIP>:<port>/v1/models reaches a stand-in NIM the test serves there; the cluster's
GPU nodes (Node Feature Discovery's, GPU Feature Discovery's and gpuc's labels: the operator picks cache profiles by
the nodes' nvidia.com/gpu.product); the secrets the workloads name; gpuc's objects applied with server-side apply in
sync-wave order. No kubelet, no Job or Deployment controller: the test drives, from outside, what those would:

- the manifest probe Pod never runs, so the test writes the ConfigMap <cache>-manifest the operator would extract
  from it: the NIM Operator repository's internal/controller/testdata/manifest_trtllm.yaml with one profile added
  that offers what the NIMCache asks (precision, tensor parallelism, engine, the cluster's GPU); the stock file
  alone offers no such profile, which is the failure case below;
- the cache Job's status (succeeded, or failed), and the NIMService Deployment's rollout status.

Checked: the cache PVC (size, access mode, storage class), the cache Job (secrets, tolerations, node selection,
the PVC), the NIMService Deployment (the pod resourceClaims from spec.draResources, tolerations, env, the cache
volume, no nvidia.com/gpu request), and gpuc's health Lua (compiler/lower/argocd_health/apps.nvidia.com_NIMCache.lua,
_NIMService.lua) giving Progressing before, Healthy once Ready and Degraded on failure for the statuses the operator
wrote.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_argocd_health import health

from harness import controlplane, operators, servers
from harness.controlplane import ControlPlane
from harness.kube import Kube, Rejection
from harness.trees import tree_objects

from conftest import EXAMPLES
from real.test_real_gpu_operator import fleet_nodes, register, selection_mismatch

Obj = dict[str, Any]
NIM = "apps.nvidia.com/v1alpha1"
SERVICE_RANGE = "127.1.0.0/24"  # ClusterIPs on loopback: the operator's GET of <ClusterIP>:<port>/v1/models lands here
APPLIED = ("Namespace", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "NIMCache", "NIMService")
# The registry the operator inspects a model puller's image in (NIMCache: the model-download protocol) is out of
# reach: a proxy that refuses at once makes it fall back to the legacy protocol without waiting on the network.
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}



@contextlib.contextmanager
def nim_cluster(tmp_path: Path, cluster: str, rendered: Path) -> Iterator[tuple[ControlPlane, Kube, operators.Operator]]:
    """A control plane of the cluster's minor with its GPU nodes and the workloads' secrets, and the NIM Operator."""
    minor = str(yaml.safe_load((EXAMPLES / "clusters" / f"{cluster}.yaml").read_text())["spec"]["kubernetesVersion"])
    release, emulated = servers.server_for(minor)
    cp = controlplane.start(release, tmp_path / "cp", emulated_minor=emulated, apiserver_args=(f"--service-cluster-ip-range={SERVICE_RANGE}",))
    try:
        kube = Kube(cp)
        register(kube, fleet_nodes(rendered, cluster))
        with operators.start_nim_operator(cp, tmp_path / "nim-operator", env=OFFLINE) as op:
            yield cp, kube, op
    finally:
        cp.stop()


def apply_workloads(kube: Kube, tree: Path) -> dict[str, list[Obj]]:
    """gpuc's namespaces, DRA objects, NIMCaches and NIMServices in sync-wave order (file order), with the secrets the
    NIM objects name as the cluster's owner would have made them; kind -> the objects."""
    objects = [obj for _, obj in tree_objects(tree) if obj["kind"] in APPLIED]
    by_kind: dict[str, list[Obj]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    secrets = set()
    for obj in objects:
        if obj["kind"] == "Namespace":
            kube.apply(obj)
        if obj["kind"] == "NIMCache":
            ngc = obj["spec"]["source"]["ngc"]
            secrets |= {(obj["metadata"]["namespace"], ngc["authSecret"], "auth"), (obj["metadata"]["namespace"], ngc["pullSecret"], "pull")}
    for ns, name, what in sorted(secrets):
        kube.ensure_namespace(ns)
        if what == "auth":
            secret = {"type": "Opaque", "stringData": {"NGC_API_KEY": "nvapi-test", "NGC_CLI_API_KEY": "nvapi-test"}}
        else:
            auth = base64.b64encode(b"$oauthtoken:nvapi-test").decode()
            secret = {"type": "kubernetes.io/dockerconfigjson",
                      "stringData": {".dockerconfigjson": json.dumps({"auths": {"nvcr.io": {"auth": auth}}})}}
        kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, **secret})
    for obj in objects:
        result = kube.apply(obj)
        assert not isinstance(result, Rejection), str(result)
    return by_kind


def get(kube: Kube, api_version: str, kind: str, obj: Obj, name: str | None = None) -> Obj | None:
    return kube.get(api_version, kind, name or obj["metadata"]["name"], obj["metadata"]["namespace"])


def wait(op: operators.Operator, what: str, probe: Callable[[], Any], timeout: float = 90) -> Any:
    return op.wait_for(what, probe, timeout=timeout, interval=0.5)


def touch(kube: Kube, obj: Obj) -> None:
    """Make the operator reconcile `obj` now (it requeues a cache with a pending manifest Pod only every 30 s)."""
    kube.dyn.patch(kube.resource(obj["apiVersion"], obj["kind"]), name=obj["metadata"]["name"], namespace=obj["metadata"]["namespace"],
                   body={"metadata": {"annotations": {"gpuc.dev/test-nudge": str(time.monotonic())}}},
                   content_type="application/merge-patch+json")


# -- the model manifest the probe Pod would have printed ------------------------------------------------------------

def stock_manifest() -> Obj:
    """internal/controller/testdata/manifest_trtllm.yaml of the NIM Operator's source (profile hash -> profile)."""
    path = operators.source("nim-operator") / "internal" / "controller" / "testdata" / "manifest_trtllm.yaml"
    return dict(yaml.safe_load(path.read_text()))


def manifest_for(cache: Obj, gpu: str) -> tuple[Obj, str]:
    """The stock manifest plus one profile (shaped as its first) offering what `cache` asks on `gpu`; (manifest, its id)."""
    manifest = stock_manifest()
    ngc = cache["spec"]["source"]["ngc"]
    model = ngc.get("model") or {}
    image, _, tag = ngc["modelPuller"].rpartition(":")
    profile = copy.deepcopy(next(iter(manifest.values())))
    profile["model"] = image.removeprefix("nvcr.io/nim/")
    profile["release"] = tag
    profile["container_url"] = ngc["modelPuller"]
    profile["tags"].update({"precision": model.get("precision", "bf16"), "tp": str(model.get("tensorParallelism", "1")), "pp": "1",
                            "feat_lora": "false", "gpu": gpu, "llm_engine": model.get("engine") or "tensorrt_llm", "profile": "throughput"})
    pid = hashlib.sha256(json.dumps(profile, sort_keys=True).encode()).hexdigest()
    manifest[pid] = profile
    return manifest, pid


def put_manifest(kube: Kube, cache: Obj, manifest: Obj) -> None:
    meta = cache["metadata"]
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{meta['name']}-manifest", "namespace": meta["namespace"]},
                "data": {"model_manifest.yaml": yaml.safe_dump(manifest, sort_keys=False)}})


def finish_job(kube: Kube, job: Obj, succeeded: bool) -> None:
    """The Job's status as the Job controller writes it when its pod exits."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if succeeded:
        status = {"startTime": now, "completionTime": now, "succeeded": 1, "active": 0, "ready": 0, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": now, "lastProbeTime": now}]}
    else:
        status = {"startTime": now, "failed": 6, "active": 0, "ready": 0, "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": now, "lastProbeTime": now}]}
    kube.set_status({**job, "status": status})


def roll_out(kube: Kube, deployment: Obj) -> None:
    """The Deployment's status once every replica is updated and available."""
    n = deployment["spec"].get("replicas") or 1
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.set_status({**deployment, "status": {
        "observedGeneration": deployment["metadata"]["generation"], "replicas": n, "updatedReplicas": n, "readyReplicas": n,
        "availableReplicas": n, "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "lastUpdateTime": now, "lastTransitionTime": now},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastUpdateTime": now, "lastTransitionTime": now}]}})


@contextlib.contextmanager
def stand_in_nim(host: str, port: int, model: str) -> Iterator[None]:
    """A NIM's /v1/models on <ClusterIP>:<port> (loopback): what the operator reads the served model's name from."""
    body = json.dumps({"object": "list", "data": [{"id": model, "object": "model", "root": model, "owned_by": "system"}]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.rstrip("/") == "/v1/models"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if ok else b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def lua(kind: str, live: Obj | None) -> dict[str, str]:
    return health(f"apps.nvidia.com_{kind}", live or {})


def state(obj: Obj | None) -> str | None:
    return ((obj or {}).get("status") or {}).get("state")


# -- the expectations ---------------------------------------------------------------------------------------------

def check_pvc(pvc: Obj, cache: Obj) -> list[str]:
    want = cache["spec"]["storage"]["pvc"]
    spec, where = pvc["spec"], f"PVC {pvc['metadata']['namespace']}/{pvc['metadata']['name']}"
    out = []
    if spec["resources"]["requests"]["storage"] != want["size"]:
        out.append(f"{where}: size {spec['resources']['requests']['storage']}, gpuc asked {want['size']}")
    if spec["accessModes"] != [want["volumeAccessMode"]]:
        out.append(f"{where}: accessModes {spec['accessModes']}, gpuc asked [{want['volumeAccessMode']}]")
    if spec.get("storageClassName") != (want.get("storageClass") or None):
        out.append(f"{where}: storageClassName {spec.get('storageClassName')!r}, gpuc asked {want.get('storageClass')!r} "
                   "('' meaning the cluster's default class)")
    return out


def check_job(job: Obj, cache: Obj, nodes: dict[str, Obj]) -> list[str]:
    ngc, spec = cache["spec"]["source"]["ngc"], job["spec"]["template"]["spec"]
    where = f"Job {job['metadata']['namespace']}/{job['metadata']['name']}"
    out = []
    if [s["name"] for s in spec.get("imagePullSecrets") or []] != [ngc["pullSecret"]]:
        out.append(f"{where}: imagePullSecrets {spec.get('imagePullSecrets')}, gpuc named {ngc['pullSecret']}")
    env_from = [e.get("secretRef", {}).get("name") for c in spec["containers"] for e in c.get("envFrom") or []]
    if ngc["authSecret"] not in env_from:
        out.append(f"{where}: the containers take no env from {ngc['authSecret']} (envFrom {env_from})")
    if (spec.get("tolerations") or []) != (cache["spec"].get("tolerations") or []):
        out.append(f"{where}: tolerations {spec.get('tolerations')}, gpuc wrote {cache['spec'].get('tolerations')}")
    if (want := cache["spec"].get("nodeSelector")) is not None and spec.get("nodeSelector") != want:
        out.append(f"{where}: nodeSelector {spec.get('nodeSelector')}, gpuc wrote {want}")
    if not any(selection_mismatch(spec, n) is None for n in nodes.values()):
        out.append(f"{where}: its node selection ({spec.get('nodeSelector')}) matches none of the cluster's nodes")
    claims = [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v]
    if claims != [f"{cache['metadata']['name']}-pvc"]:
        out.append(f"{where}: mounts PVCs {claims}, not the cache's {cache['metadata']['name']}-pvc")
    return out


def check_deployment(deployment: Obj, service: Obj, cache_pvc: str) -> list[str]:
    spec = deployment["spec"]["template"]["spec"]
    where = f"Deployment {deployment['metadata']['namespace']}/{deployment['metadata']['name']}"
    out = []
    want = []
    for r in service["spec"].get("draResources") or []:
        if "resourceClaimName" in r:
            want.append(("resourceClaimName", r["resourceClaimName"]))
        elif "resourceClaimTemplateName" in r:
            want.append(("resourceClaimTemplateName", r["resourceClaimTemplateName"]))
    claims = spec.get("resourceClaims") or []
    got = [(k, c[k]) for c in claims for k in ("resourceClaimName", "resourceClaimTemplateName") if c.get(k)]
    if sorted(got) != sorted(want):
        out.append(f"{where}: pod resourceClaims {got}, gpuc's spec.draResources ask {want}")
    containers = [c for c in spec["containers"] if c["name"] == f"{service['metadata']['name']}-ctr"] or spec["containers"][:1]
    for c in containers:
        used = sorted(x["name"] for x in (c.get("resources") or {}).get("claims") or [])
        if used != sorted(x["name"] for x in claims):
            out.append(f"{where}: container {c['name']} uses claims {used} of the pod's {[x['name'] for x in claims]}")
        gpus = {k: v for part in ("requests", "limits") for k, v in ((c.get("resources") or {}).get(part) or {}).items() if k == "nvidia.com/gpu"}
        if gpus:
            out.append(f"{where}: container {c['name']} also asks the device plugin for {gpus} beside its DRA claims")
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        for e in service["spec"].get("env") or []:
            if env.get(e["name"]) != e.get("value"):
                out.append(f"{where}: env {e['name']}={env.get(e['name'])!r}, gpuc wrote {e.get('value')!r}")
        if c.get("image") != f"{service['spec']['image']['repository']}:{service['spec']['image']['tag']}":
            out.append(f"{where}: image {c.get('image')}")
    if (spec.get("tolerations") or []) != (service["spec"].get("tolerations") or []):
        out.append(f"{where}: tolerations {spec.get('tolerations')}, gpuc wrote {service['spec'].get('tolerations')}")
    pvcs = [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v]
    if pvcs != [cache_pvc]:
        out.append(f"{where}: mounts PVCs {pvcs}, not the NIMCache's {cache_pvc}")
    if [s["name"] for s in spec.get("imagePullSecrets") or []] != service["spec"]["image"].get("pullSecrets", []):
        out.append(f"{where}: imagePullSecrets {spec.get('imagePullSecrets')}, gpuc named {service['spec']['image'].get('pullSecrets')}")
    if deployment["spec"].get("replicas") != service["spec"].get("replicas", 1):
        out.append(f"{where}: replicas {deployment['spec'].get('replicas')}, gpuc wrote {service['spec'].get('replicas')}")
    return out


class Verdicts:
    """gpuc's health verdicts on the statuses the operator wrote, each kept (health.json in the test's folder) and
    compared with what Argo CD should show."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: list[Obj] = []
        self.problems: list[str] = []

    def expect(self, kind: str, obj: Obj | None, expected: str) -> None:
        got = lua(kind, obj)
        name = (obj or {}).get("metadata", {}).get("name")
        status = (obj or {}).get("status")
        self.seen.append({"kind": kind, "name": name, "expected": expected, "lua": got, "status": status})
        self.out.write_text(json.dumps(self.seen, indent=1, sort_keys=True))
        if got["status"] != expected:
            self.problems.append(f"{kind} {name}: gpuc's health Lua says {got} for the operator's status "
                                 f"{json.dumps(status, sort_keys=True)}; expected {expected}")


@pytest.mark.parametrize("cluster", ["prod-east", "west"])
def test_every_nim_gpuc_renders_reconciles_and_its_health_follows_the_operator(rendered: Path, tmp_path: Path, cluster: str) -> None:
    tree = rendered / cluster
    nodes = fleet_nodes(rendered, cluster)
    gpu = nodes[0].model.split("-")[0]  # the profile's `gpu` tag, as NIM manifests name GPUs (H100, H200)
    problems: list[str] = []
    verdicts = Verdicts(tmp_path / "health.json")
    made: list[Obj] = []  # what the operator made, kept in made.json beside health.json
    with nim_cluster(tmp_path, cluster, rendered) as (cp, kube, op):
        by_kind = apply_workloads(kube, tree)
        caches, services = by_kind.get("NIMCache", []), by_kind.get("NIMService", [])
        assert caches and services, f"{cluster}: gpuc rendered no NIM objects"

        # before: the operator made each cache's PVC and its manifest probe Pod, which never runs here
        for cache in caches:
            name = cache["metadata"]["name"]
            pvc = wait(op, f"PVC {name}-pvc", lambda c=cache, n=name: get(kube, "v1", "PersistentVolumeClaim", c, f"{n}-pvc"))
            problems += check_pvc(pvc, cache)
            made.append(pvc)
            wait(op, f"manifest Pod {name}-pod", lambda c=cache, n=name: get(kube, "v1", "Pod", c, f"{n}-pod"))
        # Progressing: nothing has failed. (The operator creates the probe Pod and reads it back from its informer at
        # once: when the informer lags it records NIM_CACHE_RECONCILE_FAILED 'Pod "<cache>-pod" not found' and, while
        # the Pod is pending, writes no status that clears it; seen in about one cache in four here.)
        time.sleep(2)
        for cache in caches:
            verdicts.expect("NIMCache", get(kube, NIM, "NIMCache", cache), "Progressing")
        for service in services:
            live = wait(op, f"NIMService {service['metadata']['name']} status", lambda s=service: state(get(kube, NIM, "NIMService", s)) and
                        get(kube, NIM, "NIMService", s))
            verdicts.expect("NIMService", live, "Progressing")

        # the manifest each probe would have printed: the cache Job follows
        profiles = {}
        for cache in caches:
            manifest, pid = manifest_for(cache, gpu)
            profiles[cache["metadata"]["name"]] = pid
            put_manifest(kube, cache, manifest)
            touch(kube, cache)
        node_objs = {n["metadata"]["name"]: n for n in kube.items("v1", "Node")}
        jobs = {}
        for cache in caches:
            name = cache["metadata"]["name"]
            job = wait(op, f"Job {name}-job", lambda c=cache, n=name: get(kube, "batch/v1", "Job", c, f"{n}-job"))
            jobs[name] = job
            made.append(job)
            problems += check_job(job, cache, node_objs)
            args = job["spec"]["template"]["spec"]["containers"][0].get("args") or []
            if args != ["--profiles", profiles[name]]:
                problems.append(f"Job {name}-job caches {args}, not the one profile offering what NIMCache {name} asks ({profiles[name]})")
            live = wait(op, f"NIMCache {name} state", lambda c=cache: state(get(kube, NIM, "NIMCache", c)) and get(kube, NIM, "NIMCache", c))
            verdicts.expect("NIMCache", live, "Progressing")

        # the Jobs succeed: each cache is Ready with its PVC and profile
        for cache in caches:
            finish_job(kube, jobs[cache["metadata"]["name"]], succeeded=True)
        for cache in caches:
            name = cache["metadata"]["name"]
            live = wait(op, f"NIMCache {name} Ready", lambda c=cache: state(get(kube, NIM, "NIMCache", c)) == "Ready" and get(kube, NIM, "NIMCache", c))
            if live["status"].get("pvc") != f"{name}-pvc":
                problems.append(f"NIMCache {name}: status.pvc {live['status'].get('pvc')!r}")
            if [p["name"] for p in live["status"].get("profiles") or []] != [profiles[name]]:
                problems.append(f"NIMCache {name}: status.profiles {live['status'].get('profiles')}")
            verdicts.expect("NIMCache", live, "Healthy")

        # each NIMService: its Deployment, Progressing while it rolls out, Healthy once Ready
        with contextlib.ExitStack() as stack:
            for service in services:
                name = service["metadata"]["name"]
                cache_name = service["spec"]["storage"]["nimCache"]["name"]
                deployment = wait(op, f"Deployment {name}", lambda s=service: get(kube, "apps/v1", "Deployment", s))
                problems += check_deployment(deployment, service, f"{cache_name}-pvc")
                made.append(deployment)
                live = wait(op, f"NIMService {name} waiting for its Deployment", lambda s=service: (
                    "deployment" in json.dumps((get(kube, NIM, "NIMService", s) or {}).get("status", {}).get("conditions", [])).lower()
                    and get(kube, NIM, "NIMService", s)))
                verdicts.expect("NIMService", live, "Progressing")
                svc = wait(op, f"Service {name}", lambda s=service: get(kube, "v1", "Service", s))
                port = service["spec"]["expose"]["service"]["port"]
                model = next(c for c in caches if c["metadata"]["name"] == cache_name)["spec"]["source"]["ngc"]["modelPuller"]
                stack.enter_context(stand_in_nim(svc["spec"]["clusterIP"], port, model.rpartition(":")[0].removeprefix("nvcr.io/nim/")))
                roll_out(kube, deployment)
            for service in services:
                name = service["metadata"]["name"]
                live = wait(op, f"NIMService {name} Ready", lambda s=service: state(get(kube, NIM, "NIMService", s)) == "Ready"
                            and get(kube, NIM, "NIMService", s), timeout=120)
                verdicts.expect("NIMService", live, "Healthy")
        op.check()
        (tmp_path / "made.json").write_text(json.dumps(made, indent=1, default=str))
    assert problems + verdicts.problems == [], "\n".join(problems + verdicts.problems)


def test_nim_failures_are_degraded_in_gpucs_health(rendered: Path, tmp_path: Path) -> None:
    """Two ways a cache fails, on copies of prod-east's first NIMCache and its NIMService: the NIM's manifest offers no
    profile for what the cache asks (the stock testdata manifest: the operator cannot build the Job), and the cache
    Job fails. gpuc's health Lua calls the first Progressing (the operator retries a reconcile failure, and most are
    transient), the failed Job Degraded, and the NIMService on the failed cache too."""
    tree = rendered / "prod-east"
    problems: list[str] = []
    verdicts = Verdicts(tmp_path / "health.json")
    with nim_cluster(tmp_path, "prod-east", rendered) as (cp, kube, op):
        by_kind = apply_workloads(kube, tree)
        # the copies: gpuc's own objects stay as they are
        cache = by_kind["NIMCache"][0]
        service = next(s for s in by_kind["NIMService"] if s["spec"]["storage"]["nimCache"]["name"] == cache["metadata"]["name"])
        nomatch, failing = copy.deepcopy(cache), copy.deepcopy(cache)
        nomatch["metadata"]["name"] = f"{cache['metadata']['name']}-x"
        failing["metadata"]["name"] = f"{cache['metadata']['name']}-f"
        on_failing = copy.deepcopy(service)
        on_failing["metadata"]["name"] = f"{service['metadata']['name']}-f"
        on_failing["spec"]["storage"]["nimCache"]["name"] = failing["metadata"]["name"]
        put_manifest(kube, nomatch, stock_manifest())
        put_manifest(kube, failing, manifest_for(failing, "H100")[0])
        for obj in (nomatch, failing, on_failing):
            result = kube.apply(obj)
            assert not isinstance(result, Rejection), str(result)

        # no profile matches: the operator reports a reconcile failure and retries it, which gpuc's Lua shows as
        # Progressing with the operator's message (the same status shape as the transient "Pod not found")
        live = wait(op, "NIMCache without a matching profile to fail", lambda: (
            any(c["type"] == "NIM_CACHE_RECONCILE_FAILED" and c["status"] == "True"
                for c in (get(kube, NIM, "NIMCache", nomatch) or {}).get("status", {}).get("conditions") or [])
            and get(kube, NIM, "NIMCache", nomatch)))
        verdicts.expect("NIMCache", live, "Progressing")
        if get(kube, "batch/v1", "Job", nomatch, f"{nomatch['metadata']['name']}-job") is not None:
            problems.append(f"NIMCache {nomatch['metadata']['name']}: a Job was made though no profile matches")

        # the Job fails
        job = wait(op, f"Job {failing['metadata']['name']}-job", lambda: get(kube, "batch/v1", "Job", failing, f"{failing['metadata']['name']}-job"))
        finish_job(kube, job, succeeded=False)
        live = wait(op, "the failed Job's NIMCache Failed", lambda: state(get(kube, NIM, "NIMCache", failing)) == "Failed"
                    and get(kube, NIM, "NIMCache", failing))
        verdicts.expect("NIMCache", live, "Degraded")
        touch(kube, on_failing)
        live = wait(op, "the NIMService on the failed cache Failed", lambda: state(get(kube, NIM, "NIMService", on_failing)) == "Failed"
                    and get(kube, NIM, "NIMService", on_failing))
        verdicts.expect("NIMService", live, "Degraded")

        op.check()
    assert problems + verdicts.problems == [], "\n".join(problems + verdicts.problems)
