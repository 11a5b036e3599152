"""Run the real stack program (stacks/__main__.py) under Pulumi mocks, and compare backends.

No Pulumi CLI, engine or cluster is involved: `pulumi.runtime.set_mocks` replaces the engine with an
in-process monitor. The monitor here records every RegisterResource request with the options the
engine would see (parent, provider, dependencies, replaceOnChanges, deleteBeforeReplace), and the
mocks echo inputs as outputs, as a successful apply would.

The comparison functions turn both sides into plain data and report every difference, so a failing
test says which object and which field drifted.
"""

from __future__ import annotations

import json
import logging
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks

from conftest import REPO

PROGRAM = REPO / "stacks" / "__main__.py"
PROVIDER_TYPE = "pulumi:providers:kubernetes"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"

Key = tuple[str, str, str]  # (kind, namespace, name); Helm releases use ("HelmRelease", namespace, name)


@dataclass
class Registered:
    urn: str
    type: str
    name: str
    parent: str
    provider: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: list[str]
    replace_on_changes: list[str]
    delete_before_replace: bool
    alias_names: list[str] = field(default_factory=list)  # the logical names of the resource's aliases


class EchoMocks(Mocks):
    """Every resource is created with its inputs as its state."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        return {}, None


class RecordingMonitor(MockMonitor):
    """The mock monitor, plus a record of the resource options each registration carried."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registered: dict[str, Registered] = {}

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            urn = response.urn
            self.registered[urn] = Registered(
                urn=urn, type=request.type, name=request.name, parent=request.parent, provider=request.provider,
                custom=request.custom, inputs=self.resources[urn].state, dependencies=list(request.dependencies),
                replace_on_changes=list(request.replaceOnChanges), delete_before_replace=request.deleteBeforeReplace,
                alias_names=[a.spec.name for a in request.aliases if a.HasField("spec") and a.spec.name])
        return response


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class StackRun:
    stack: str
    resources: list[Registered]
    outputs: dict[str, Any] = field(default_factory=dict)
    log: list[logging.LogRecord] = field(default_factory=list)

    def by_urn(self, urn: str) -> Registered:
        return next(r for r in self.resources if r.urn == urn)

    def of_type(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def kubernetes_objects(self) -> list[Registered]:
        """Custom resources that are Kubernetes objects (not the provider, not Helm releases)."""
        return [r for r in self.resources
                if r.custom and r.type.startswith("kubernetes:") and r.type != RELEASE_TYPE]

    def releases(self) -> list[Registered]:
        return self.of_type(RELEASE_TYPE)

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.log if r.levelno == logging.WARNING]


def stack_config(stack: str) -> dict[str, str]:
    """The `config:` block of stacks/Pulumi.<stack>.yaml, as the engine would hand it over."""
    doc = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return {key: str(value) for key, value in (doc.get("config") or {}).items()}


def run_stack(stack: str, config: dict[str, str], program: Path = PROGRAM,
              partial: list[Registered] | None = None) -> StackRun:
    """Run `program` as stack `stack` with `config`; raises whatever the program raises, after putting
    what it registered until then into `partial` (when given)."""
    pulumi.runtime.reset_options()  # a fresh root Stack: the runtime keeps globals between runs
    mocks = EchoMocks()
    monitor = RecordingMonitor(mocks)
    logger = logging.getLogger(f"tests.pulumi.{stack}")
    logger.propagate = False
    records = _Records()
    logger.addHandler(records)
    pulumi.runtime.set_mocks(mocks, project="gpuc", stack=stack, monitor=monitor, logger=logger)
    pulumi.runtime.set_all_config(dict(config), [])
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def execute():
        runpy.run_path(str(program), run_name="__main__")
        root = pulumi.runtime.settings.get_root_resource()
        return pulumi.Output.from_input(root.outputs).apply(outputs.update)

    try:
        execute()
    finally:
        logger.removeHandler(records)
        if partial is not None:
            partial.extend(monitor.registered.values())
    return StackRun(stack, list(monitor.registered.values()), outputs, records.records)


# --- the two sides as plain data -------------------------------------------------------------------

def _key(manifest: dict[str, Any]) -> Key:
    meta = manifest.get("metadata") or {}
    return (manifest.get("kind", ""), meta.get("namespace", ""), meta.get("name", ""))


def _by_key(manifests: list[dict[str, Any]], side: str) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for manifest in manifests:
        key = _key(manifest)
        assert key not in out, f"{side} holds {key} twice"
        out[key] = manifest
    return out


def rendered_objects(tree: Path) -> dict[Key, dict[str, Any]]:
    """Every object the rendered tree applies: the files its kustomization.yaml lists."""
    kustomization = yaml.safe_load((tree / "kustomization.yaml").read_text())
    return _by_key([yaml.safe_load((tree / name).read_text()) for name in kustomization["resources"]], "the rendered tree")


def registered_objects(run: StackRun) -> dict[Key, dict[str, Any]]:
    """Every Kubernetes object the stack registers, as the manifest its inputs describe."""
    return _by_key([r.inputs for r in run.kubernetes_objects()], f"stack {run.stack}")


def rendered_releases(tree: Path) -> dict[Key, dict[str, Any]]:
    """Helm releases as Argo CD installs them: chart source of each Application plus its values file."""
    out: dict[Key, dict[str, Any]] = {}
    for path in sorted((tree / "argocd").glob("*.yaml")):
        app = yaml.safe_load(path.read_text())
        if app.get("kind") != "Application":
            continue
        spec = app["spec"]
        for source in spec.get("sources", []):
            if "chart" not in source:
                continue
            helm = source["helm"]
            # the comparison below knows releaseName and one values file: any other Helm setting Argo CD would
            # apply (valuesObject, parameters, skipCrds, a second values file) must fail here, not drift silently
            assert set(helm) == {"releaseName", "valueFiles"} and len(helm["valueFiles"]) == 1, (path.name, helm)
            values_file = helm["valueFiles"][0].split(f"/{tree.name}/", 1)[1]
            namespace = spec["destination"]["namespace"]
            out[("HelmRelease", namespace, source["helm"]["releaseName"])] = {
                "repository": source["repoURL"], "chart": source["chart"], "version": source["targetRevision"],
                "createNamespace": "CreateNamespace=true" in spec["syncPolicy"]["syncOptions"],
                "values": yaml.safe_load((tree / values_file).read_text()) or {},
            }
    return out


def registered_releases(run: StackRun) -> dict[Key, dict[str, Any]]:
    """Helm releases the stack registers, in the same shape (an OCI chart URL split into repository + chart)."""
    out: dict[Key, dict[str, Any]] = {}
    for r in run.releases():
        inputs = r.inputs
        chart = inputs["chart"]
        if chart.startswith("oci://"):
            repository, _, chart = chart.removeprefix("oci://").rpartition("/")
        else:
            repository = (inputs.get("repositoryOpts") or {}).get("repo", "")
        out[("HelmRelease", inputs["namespace"], inputs["name"])] = {
            "repository": repository, "chart": chart, "version": inputs["version"],
            "createNamespace": inputs.get("createNamespace", False), "values": inputs.get("values") or {},
        }
    return out


# --- comparison ------------------------------------------------------------------------------------

def _scalar(value: Any) -> str:
    """JSON text of a scalar; integral floats (the wire format of numbers) compare equal to ints."""
    if isinstance(value, float) and not isinstance(value, bool) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True)


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else _scalar(value)


def _diff(rendered: Any, registered: Any, path: str, out: list[str]) -> None:
    if isinstance(rendered, dict) and isinstance(registered, dict):
        for key in sorted(set(rendered) | set(registered), key=str):
            sub = f"{path}.{key}"
            if key not in registered:
                out.append(f"{sub}: rendered {_show(rendered[key])}, missing in Pulumi")
            elif key not in rendered:
                out.append(f"{sub}: Pulumi {_show(registered[key])}, not rendered")
            else:
                _diff(rendered[key], registered[key], sub, out)
    elif isinstance(rendered, list) and isinstance(registered, list) and len(rendered) == len(registered):
        for i, (a, b) in enumerate(zip(rendered, registered, strict=True)):
            _diff(a, b, f"{path}[{i}]", out)
    elif _show(rendered) != _show(registered):
        out.append(f"{path}: rendered {_show(rendered)}, Pulumi {_show(registered)}")


def differences(rendered: dict[Key, Any], registered: dict[Key, Any]) -> list[str]:
    """Every way the two sides differ: objects only on one side, and field by field for the rest."""
    out: list[str] = []
    for key in sorted(set(rendered) | set(registered)):
        label = "{} {}".format(key[0], "/".join(p for p in key[1:] if p))
        if key not in registered:
            out.append(f"{label}: rendered, not registered by the stack")
        elif key not in rendered:
            out.append(f"{label}: registered by the stack, not rendered")
        else:
            found: list[str] = []
            _diff(rendered[key], registered[key], "", found)
            out.extend(f"{label}: {d.lstrip('.')}" for d in found)
    return out


# --- apply order and replacement -------------------------------------------------------------------

# What the API server refuses to change in place (DESIGN.md section 7), stated independently of the
# compiler: kind -> (replace_on_changes, delete_before_replace).
IMMUTABLE = {
    "ResourceClaim": (["spec"], False),
    "ResourceClaimTemplate": (["spec"], False),
    "ComputeDomain": (["spec"], False),
    "NIMService": (["spec.draResources"], True),
    "NIMCache": (["spec.source"], False),  # the NIM Operator CRD makes its model puller immutable; hash-named
}


def rendered_waves(run: StackRun, tree: Path) -> dict[str, int]:
    """URN -> sync wave as the rendered tree states it (the object's annotation, or its chart Application's)."""
    app_waves: dict[str, int] = {}
    for path in (tree / "argocd").glob("*.yaml"):
        app = yaml.safe_load(path.read_text())
        for source in app["spec"].get("sources", []) if app.get("kind") == "Application" else []:
            if "helm" in source:
                app_waves[source["helm"]["releaseName"]] = int(app["metadata"]["annotations"][WAVE_ANNOTATION])
    waves = {r.urn: app_waves[r.inputs["name"]] for r in run.releases()}
    waves.update({r.urn: int(r.inputs["metadata"]["annotations"][WAVE_ANNOTATION]) for r in run.kubernetes_objects()})
    return waves


def wave_violations(run: StackRun, tree: Path) -> list[str]:
    """Each resource must depend only on earlier waves, and (transitively) on all of them, as Argo CD waits."""
    waves = rendered_waves(run, tree)
    out: list[str] = []
    for urn, wave in waves.items():
        r = run.by_urn(urn)
        for dep in r.dependencies:
            if dep not in waves:
                out.append(f"{r.name}: depends on {dep}, which is not an applied object")
            elif waves[dep] >= wave:
                out.append(f"{r.name} (wave {wave}): depends on {run.by_urn(dep).name} (wave {waves[dep]})")
        closure: set[str] = set()
        todo = list(r.dependencies)
        while todo:
            dep = todo.pop()
            if dep not in closure:
                closure.add(dep)
                todo.extend(run.by_urn(dep).dependencies)
        missing = sorted(run.by_urn(u).name for u, w in waves.items() if w < wave and u not in closure)
        if missing:
            out.append(f"{r.name} (wave {wave}): does not wait for {', '.join(missing)}")
    return out


def replacement_violations(run: StackRun) -> list[str]:
    out = []
    for r in run.kubernetes_objects():
        expected = IMMUTABLE.get(r.inputs["kind"], ([], False))
        actual = (r.replace_on_changes, r.delete_before_replace)
        if actual != expected:
            out.append(f"{r.inputs['kind']} {r.name}: replace_on_changes/delete_before_replace {actual}, expected {expected}")
    return out
