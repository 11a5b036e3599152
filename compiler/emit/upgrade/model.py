"""The plan `gpuc upgrade` writes: ordered steps, each one commit, with what must hold before it, what it disrupts
and how to tell it finished. Checks are sentences for people and conditions a program can test against the cluster
(the tests drive every step through the real Argo CD and API server and evaluate them there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    """A condition on the running cluster, in words (`text`) and as data (`kind` and its `target`):

    - absent: no object {apiVersion, kind, namespace, name}
    - no-pods: no pod owned by {namespace, daemonSet} is left
    - application: the Argo CD Application {namespace, name} is Synced and Healthy
    - slices / no-slices: ResourceSlices of {driver} are published (or none is) for every node of {nodes}
    - no-gpu-pods: no pod on {nodes} holds a GPU (nvidia.com/gpu, or an allocated ResourceClaim)
    - allocatable: every node of {nodes} advertises {resource}: {count}
    - node-label: every node of {nodes} carries {label}: {value}
    - node-labels: every node of {nodes} carries {labels} (a null value: the label is absent)
    - server-version: the API server reports Kubernetes {minor}, started with --runtime-config {runtimeConfig} where
      the target has one (the running tree's beta resource.k8s.io version, until the step is synced)
    - ready: the custom resource {apiVersion, kind, name} reports status.state {state}
    - cordoned / uncordoned: the nodes of {nodes} are unschedulable (or schedulable again); a step's own action
    - deleted: the object {apiVersion, kind, name} is deleted by hand (background propagation) once the step is deployed;
      a step's own action
    - restarted: the pods of DaemonSet {namespace, daemonSet} on {nodes} were replaced after the checks before it held
      (`kubectl rollout restart`, then `rollout status`); a step's own action
    """

    text: str
    kind: str
    target: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "target": self.target}


@dataclass
class PodFate:
    """What a step does to one pod of a gpuc workload."""

    pod: str  # ns/name
    workload: str  # ns/name
    fate: str  # kept | restarted | waiting | placed
    why: str = ""
    node: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "workload": self.workload, "fate": self.fate, "why": self.why, "node": self.node}


@dataclass
class Step:
    number: int
    title: str
    transition: dict[str, Any] | None  # spec.transition of the step, as written in the Cluster intent; None: the change itself
    # the Cluster fields the step sets on the intent as it runs (the base), dotted paths under the document: a step
    # is the base plus these plus its transition; the last step (transition None) is the change itself
    intent: dict[str, Any] = field(default_factory=dict)
    before: list[Check] = field(default_factory=list)  # what must be true before the step is committed
    disrupts: list[str] = field(default_factory=list)  # what the step takes away, and until when
    done: list[Check] = field(default_factory=list)  # what says the step has finished
    files: dict[str, str] = field(default_factory=dict)  # the cluster's rendered tree at this step
    pods: list[PodFate] = field(default_factory=list)  # gpuc's pods after the step, by fate
    changes: list[str] = field(default_factory=list)  # the objects the step changes (gpuc diff's lines)
    warnings: list[str] = field(default_factory=list)
    # hazards between the previous step and this one that its preconditions answer (the control plane upgraded first,
    # the pool drained first, a ClusterPolicy removed by its owner first): every other hazard the plan must have held back
    answers: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.number, "title": self.title, "intent": self.intent, "transition": self.transition,
                "before": [c.as_dict() for c in self.before], "disrupts": self.disrupts, "done": [c.as_dict() for c in self.done],
                "pods": [p.as_dict() for p in self.pods], "changes": self.changes, "files": sorted(self.files),
                "warnings": self.warnings}


@dataclass
class ClusterPlan:
    cluster: str
    kinds: tuple[str, ...]  # what the change is (upgrade.hazards KINDS); () for a change one commit takes
    why: list[str]  # the hazards of applying it as one commit
    steps: list[Step] = field(default_factory=list)
    base: str = ""  # the git ref the plan starts from

    @property
    def staged(self) -> bool:
        return bool(self.kinds)

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "base": self.base, "staged": self.staged, "kinds": list(self.kinds), "why": self.why,
                "steps": [s.as_dict() for s in self.steps]}
