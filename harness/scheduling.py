"""A gpuc plan against the real kube-scheduler: the cluster's Nodes and ResourceSlices (what gpuc
synthesizes, as kubelets and the DRA driver would publish them), its DeviceClasses and rendered
claims, then the plan's pods one by one in gpuc's placement order.

A pod gpuc places on node N is created with a node affinity to N: the scheduler must bind it there,
allocating its claims on N's devices next to everything bound before it. A pod gpuc cannot place is
created without one: the scheduler must find no node for it (PodScheduled=False, Unschedulable).
There is no kubelet: the binding (spec.nodeName) is the verdict. The resource-claim controller makes
each pod's claims from its templates, as in a cluster.

`schedule_plan` waits for each pod's verdict before creating the next (a verdict per pod, but its rate
is the harness's loop); `schedule_batch` hands the scheduler every pod at once and times it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from compiler.place.allocator import cluster_pods, placement_order
from compiler.place.allocator.result import AllocationPlan
from compiler.place.inventory import Inventory
from compiler.place.inventory.codec import inventory_list

from .kube import Kube, Rejection
from .kubelet import add_node
from .replay import device_classes

Obj = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"  # never pulled: there is no kubelet


@dataclass
class Verdicts:
    bound: dict[str, str] = field(default_factory=dict)  # pod -> node
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod -> the scheduler's message
    differences: list[str] = field(default_factory=list)
    timing: BatchTiming | None = None  # schedule_batch's


@dataclass(frozen=True)
class BatchTiming:
    """Seconds of a batch: creating the gated pods until the claim controller made all their claims, then
    from the first pod released to the scheduler until the last release, the last bind and the last verdict."""

    created_s: float
    released_s: float
    last_bind_s: float
    last_verdict_s: float
    scheduler_cpu_s: float | None = None  # the scheduler process's CPU from the first release to the last verdict


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def publish_inventory(kube: Kube, inventory: Inventory, api_version: str) -> None:
    """Nodes (with room for pods: only devices should decide) and the ResourceSlices of `inventory`."""
    for n in inventory.nodes:
        add_node(kube, n.name, dict(n.labels))
    for s in inventory_list(inventory)["items"]:
        s["apiVersion"] = api_version
        _must(kube.apply(s))


def publish_classes(kube: Kube, compiled: Any, api_version: str) -> None:
    """The driver chart's DeviceClasses (gpuc's own are in the rendered tree)."""
    own = {o.name for o in compiled.objects if o.kind == "DeviceClass"}
    for c in device_classes(compiled):
        if c["metadata"]["name"] not in own:
            _must(kube.apply({"apiVersion": api_version, "kind": "DeviceClass", **c}))


def _must(result: Obj | Rejection) -> Obj:
    if isinstance(result, Rejection):
        raise AssertionError(f"the API server refused the harness's own object: {result}")
    return result


def _pod(pod: Any, channel_template: str | None, node: str | None) -> Obj:
    claims, refs = [], []
    for c in pod.claims:
        ns, name = c.key.split("/", 1)
        if c.label == "channel":
            claims.append({"name": "channel", "resourceClaimTemplateName": channel_template})
        elif c.shared:
            claims.append({"name": c.label, "resourceClaimName": name})
        else:
            claims.append({"name": c.label, "resourceClaimTemplateName": c.source.split("/", 1)[1]})
        refs.append({"name": c.label})
    spec: Obj = {"containers": [{"name": "main", "image": PAUSE, "resources": {"claims": refs}}], "resourceClaims": claims,
                 "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 0}
    if node is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    ns = pod.workload.split("/")[0]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name, "namespace": ns, "labels": {"gpuc.dev/harness": "true"}},
            "spec": spec}


def verdict(kube: Kube, ns: str, name: str, timeout: float) -> tuple[str | None, str]:
    """(node it is bound to, or None and the scheduler's Unschedulable message)."""
    deadline = time.monotonic() + timeout
    while True:
        pod = kube.get("v1", "Pod", name, ns) or {}
        node = pod.get("spec", {}).get("nodeName")
        if node:
            return node, ""
        for cond in pod.get("status", {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                return None, cond.get("message", "")
        if time.monotonic() > deadline:
            return None, f"no verdict from the scheduler after {timeout:.0f} s"
        time.sleep(0.05)


def schedule_plan(kube: Kube, compiled: Any, plan: AllocationPlan, channel_templates: dict[str, str] | None = None,
                  timeout: float = 60) -> Verdicts:
    """Create the plan's pods in placement order, each after the previous one has its verdict."""
    pods = cluster_pods(compiled)
    outcomes = {(o.workload, o.pod): o for o in plan.pods}
    out = Verdicts()
    for i in placement_order(pods):
        pod = pods[i]
        outcome = outcomes[(pod.workload, pod.name)]
        ns = pod.workload.split("/")[0]
        _must(kube.apply(_pod(pod, (channel_templates or {}).get(pod.workload), outcome.node)))
        _judge(out, pod, outcome, *verdict(kube, ns, pod.name, timeout))
    return out


def _judge(out: Verdicts, pod: Any, outcome: Any, node: str | None, why: str) -> None:
    """Record the scheduler's verdict on `pod` and any difference from gpuc's `outcome`."""
    who = f"{pod.workload} pod {pod.name}"
    if node is not None:
        out.bound[pod.name] = node
        if outcome.node is None:
            out.differences.append(f"{who}: gpuc cannot place it ({outcome.reason}); the scheduler bound it to {node}")
    else:
        out.unschedulable[pod.name] = why
        if outcome.node is not None:
            out.differences.append(f"{who}: gpuc places it on {outcome.node}; the scheduler did not bind it: {why}")


GATE = "gpuc.dev/batch"  # a scheduling gate: the scheduler leaves a gated pod alone
HARNESS_PODS = "gpuc.dev/harness=true"


def _state(pod: Obj) -> tuple[str | None, str | None]:
    """(node it is bound to, the scheduler's Unschedulable message): None where the scheduler has not said."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return node, None
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            return None, cond.get("message", "")
    return None, None


def _harness_pods(core: Any) -> tuple[dict[tuple[str, str], Obj], str]:
    """The harness's pods by (namespace, name), and the list's resourceVersion to watch from."""
    listed = json.loads(core.list_pod_for_all_namespaces(label_selector=HARNESS_PODS, _preload_content=False).data)
    return {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in listed["items"]}, listed["metadata"]["resourceVersion"]


class _Raw:
    """Requests of pre-encoded JSON on the client's connection pool: a thousand pods through the client's models
    spend more of the two cores than the API server does, and the release must not starve the scheduler."""

    def __init__(self, kube: Kube) -> None:
        config = kube.api.configuration
        self.pool, self.host = kube.api.rest_client.pool_manager, config.host
        self.headers = {"Authorization": config.auth_settings()["BearerToken"]["value"], "Accept": "application/json"}

    def __call__(self, method: str, path: str, body: Any, content_type: str = "application/json") -> None:
        r = self.pool.request(method, self.host + path, body=json.dumps(body).encode(),
                              headers={**self.headers, "Content-Type": content_type})
        if r.status >= 300:
            raise AssertionError(f"{method} {path}: HTTP {r.status}: {r.data[:500].decode(errors='replace')}")


def _claims_made(pod: Obj) -> bool:
    """Whether the claim controller has made every claim `pod` asks for from a template."""
    templated = {c["name"] for c in pod["spec"].get("resourceClaims") or [] if c.get("resourceClaimTemplateName")}
    made = {s["name"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [] if s.get("resourceClaimName")}
    return templated <= made


class _Watcher(threading.Thread):
    """Notes when each of `wanted` pods first has a verdict (bound, or Unschedulable), from a watch."""

    def __init__(self, core: k8s.CoreV1Api, wanted: set[tuple[str, str]], resource_version: str) -> None:
        super().__init__(daemon=True)
        self.core, self.wanted, self.rv = core, wanted, resource_version
        self.bound: dict[tuple[str, str], float] = {}
        self.decided: dict[tuple[str, str], float] = {}
        self.done = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.done.is_set() and not self.stop.is_set():
                stream = k8s_watch.Watch()
                for event in stream.stream(self.core.list_pod_for_all_namespaces, label_selector=HARNESS_PODS, resource_version=self.rv,
                                           timeout_seconds=5, deserialize=False):
                    pod = event["object"]
                    self.rv = pod["metadata"]["resourceVersion"]
                    key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                    node, why = _state(pod)
                    now = time.perf_counter()
                    if node is not None:
                        self.bound.setdefault(key, now)
                    if node is not None or why is not None:
                        self.decided.setdefault(key, now)
                    if len(self.decided) == len(self.wanted) or self.stop.is_set():
                        self.done.set()
                        stream.stop()
        except BaseException as exc:  # reported by schedule_batch, not lost in a thread
            self.error = exc
            self.done.set()


def schedule_batch(kube: Kube, compiled: Any, plan: AllocationPlan, channel_templates: dict[str, str] | None = None,
                   timeout: float = 300, scheduler: subprocess.Popen[bytes] | None = None) -> Verdicts:
    """Every pod of the plan at once. The pods are created held by a scheduling gate, in placement order, until
    the claim controller has made all their claims; then released in placement order as fast as the API server
    takes it, and the scheduler works through its queue: at one priority it pops the pod first added to it
    (kube-scheduler keeps a gated pod's queue timestamp when it is released), so in gpuc's order, and the same
    order gives the same devices, hence the same nodes. The timing starts at the first release: the scheduler
    binding a queue of pods, not the client creating them. Given the `scheduler`'s process, it is paused
    (SIGSTOP) while the pods are released and the timing starts when it resumes: on two shared cores the release
    would otherwise bound the rate it measures."""
    pods = cluster_pods(compiled)
    outcomes = {(o.workload, o.pod): o for o in plan.pods}
    order = [pods[i] for i in placement_order(pods)]
    keys = [(p.workload.split("/")[0], p.name) for p in order]
    core: Any = k8s.CoreV1Api(kube.api)  # lists and the watch read raw JSON too
    raw = _Raw(kube)
    start = time.perf_counter()
    for pod, (ns, _) in zip(order, keys, strict=True):
        body = _pod(pod, (channel_templates or {}).get(pod.workload), outcomes[(pod.workload, pod.name)].node)
        body["spec"]["schedulingGates"] = [{"name": GATE}]
        raw("POST", f"/api/v1/namespaces/{ns}/pods", body)
    deadline = time.monotonic() + timeout
    while True:
        listed, rv = _harness_pods(core)
        waiting = [k for k in keys if not _claims_made(listed[k])]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the claim controller made no claims for {len(waiting)} pod(s) in {timeout:.0f} s, e.g. {waiting[0]}")
        time.sleep(0.2)
    created = time.perf_counter() - start
    watcher = _Watcher(core, set(keys), rv)
    watcher.start()
    ungate = [{"op": "remove", "path": "/spec/schedulingGates"}]
    if scheduler is not None:
        scheduler.send_signal(signal.SIGSTOP)
    try:
        first = time.perf_counter()
        for ns, name in keys:  # one at a time, in order: the scheduler may start on the first before the last is released
            raw("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", ungate, "application/json-patch+json")
        released = time.perf_counter() - first
    finally:
        if scheduler is not None:
            cpu = _cpu_seconds(scheduler.pid)
            first = time.perf_counter()
            scheduler.send_signal(signal.SIGCONT)
    watcher.done.wait(max(1.0, deadline - time.monotonic()))
    watcher.stop.set()
    scheduler_cpu = _cpu_seconds(scheduler.pid) - cpu if scheduler is not None else None
    if watcher.error is not None:
        raise AssertionError(f"watching the pods failed: {watcher.error}") from watcher.error
    final, _ = _harness_pods(core)  # the verdicts as they stand now, not as first seen
    out = Verdicts()
    for pod, key in zip(order, keys, strict=True):
        node, why = _state(final[key])
        if node is None and why is None:
            why = f"no verdict from the scheduler after {timeout:.0f} s"
        _judge(out, pod, outcomes[(pod.workload, pod.name)], node, why or "")
    since = lambda times: max(times.values(), default=first) - first
    out.timing = BatchTiming(created, released, since(watcher.bound), since(watcher.decided), scheduler_cpu)
    return out
