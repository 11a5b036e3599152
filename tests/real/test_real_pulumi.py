"""`pulumi preview / up / up / destroy` of the example stacks with the real engine and Kubernetes provider
(harness/build.sh builds both) against a real kube-apiserver of each cluster's minor.

Each stack runs stacks/Pulumi.<cluster>.yaml as committed, plus the harness's kubeconfig and
`gpuc:charts: external`: the NVIDIA charts cannot be fetched here, so the cluster is prepared as the tool
that installs them would leave it (their CRDs, namespaces, and the objects gpuc's patches land on), and
every gpuc-rendered object goes through the engine. The chart path itself is proved with a small chart
the test makes, installed from a `charts: {mirror: {directory: ...}}` source.
State is a file:// backend in the test's directory; secrets use a passphrase; plugin downloads are off.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.automation.errors import CommandError

from compiler.pipeline import CompileOptions, compile_fleet
from harness import components, controlplane, servers
from harness.controlplane import ControlPlane
from harness.kube import Kube, missing
from harness.pulumi import Run, Stack
from harness.trees import crd_files, prepare, tree_objects, what_the_owner_made
from modules.kinds import resource_name
from modules.program import deploy

from conftest import EXAMPLES, REPO, gpuc
from real.reference import chart_values, crds_of

CLUSTERS = ["prod-east", "staging", "lab", "west"]
Obj = dict[str, Any]


def minor_of(fleet: Path, cluster: str) -> str:
    return str(yaml.safe_load((fleet / "clusters" / f"{cluster}.yaml").read_text())["spec"]["kubernetesVersion"])


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A fresh API server (with the namespace controller, so a destroyed Namespace goes away) of the minor the test
    names through `pytest.mark.parametrize("cluster", ...)`."""
    cluster = request.node.callspec.params["cluster"]
    release, emulated = servers.server_for(minor_of(EXAMPLES, cluster), newest=True)  # the controllers are of the newest
    cp = controlplane.start(release, tmp_path / "server", emulated_minor=emulated, controllers=True)
    yield cp
    cp.stop()


def render(fleet: Path, out: Path, cluster: str, *extra: str) -> Path:
    result = gpuc("render", fleet, "-o", out, "--cluster", cluster, *extra)
    assert result.code == 0, result.err
    return out / cluster


Key = tuple[str, str]  # (resource type's last part, logical name), as the engine names a resource


def compiled_objects(fleet: Path, cluster: str, tree: Path) -> dict[Key, Obj]:
    """What the stack registers, keyed as the engine names it: the compiled objects (compile_fleet, as render and
    the stack program run it), which are exactly the rendered tree's objects less Argo CD's own."""
    compiled = compile_fleet(fleet, CompileOptions(only=cluster, missing_ok=True)).clusters[cluster].compiled
    assert compiled is not None
    out = {(o.kind + ("Patch" if o.patch else ""), resource_name(o)): o.manifest for o in compiled.objects}
    written = sorted(_ref(obj) for f, obj in tree_objects(tree) if "/argocd/" not in f)
    assert sorted(_ref(m) for m in out.values()) == written, "the compiled objects are not the rendered tree's"
    return out


def _ref(obj: Obj) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def is_patch(obj: Obj) -> bool:
    return obj["metadata"].get("annotations", {}).get("pulumi.com/patchForce") == "true"


def steps_by_object(run: Run) -> dict[Key, set[str]]:
    """(kind, logical name) -> ops, for the Kubernetes objects (not the provider, not the Helm releases)."""
    out: dict[Key, set[str]] = {}
    for (type_, name), ops in run.ops().items():
        if type_.startswith("kubernetes:") and ":helm.sh/" not in type_:
            out[(type_.rsplit(":", 1)[1], name)] = ops
    return out


def stored(kube: Kube, obj: Obj) -> Obj | None:
    meta = obj["metadata"]
    return kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def versions(kube: Kube, objects: dict[Key, Obj]) -> dict[Key, str | None]:
    """Each object's resourceVersion on the server (None: absent): any write changes it."""
    return {k: ((stored(kube, o) or {}).get("metadata") or {}).get("resourceVersion") for k, o in objects.items()}


def make_stack(tmp_path: Path, cp: ControlPlane, cluster: str, root: Path = REPO, **config: str) -> Stack:
    """The committed stack file of `cluster`, pointed at the harness's API server; the program is the stack
    program's `deploy` with `root` as its project root (where gpuc:fleet and chart folders are)."""
    settings = {"gpuc:kubeconfig": (str(cp.kubeconfig()), True), "gpuc:charts": ("external", False)}
    settings |= {k: (v, False) for k, v in config.items()}
    return Stack(cluster, lambda: deploy(root), tmp_path / "pulumi", REPO / "Pulumi.yaml",
                 REPO / "stacks" / f"Pulumi.{cluster}.yaml", settings)


def test_the_plugin_pin_is_what_the_python_package_asks_for() -> None:
    """versions.env installs the provider under the version pulumi-kubernetes asks for: were they to differ, the
    engine would look for another plugin (and, with downloads off, fail)."""
    plugin = json.loads(resources.files("pulumi_kubernetes").joinpath("pulumi-plugin.json").read_text())
    assert plugin["name"] == "kubernetes"
    assert components.pins()["PULUMI_KUBERNETES_PLUGIN_VERSION"] == plugin["version"]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_preview_up_up_destroy(tmp_path: Path, server: ControlPlane, cluster: str) -> None:
    tree = render(EXAMPLES, tmp_path / "rendered", cluster)
    objects = compiled_objects(EXAMPLES, cluster, tree)
    kube = Kube(server)
    prepare(kube, tree_objects(tree), crds_of(EXAMPLES, cluster), namespaces=False, chart_values=chart_values())
    stack = make_stack(tmp_path, server, cluster)

    preview = stack.preview()
    assert steps_by_object(preview) == {k: {"create"} for k in objects}, "the preview is not the rendered tree, object for object"
    planned = {(s.type.rsplit(":", 1)[1], s.name): s.inputs for s in preview.steps}
    for k, obj in objects.items():
        assert missing(obj, planned[k]) == [], f"{k}: the preview plans other fields than gpuc rendered"

    first = stack.up()
    assert steps_by_object(first) == {k: {"create"} for k in objects}
    for k, obj in objects.items():
        assert missing(obj, stored(kube, obj) or {}) == [], f"{k} is not stored as gpuc rendered it"
    before = versions(kube, objects)

    second = stack.up()
    assert set(second.summary) == {"same"}, f"a second up changed something: {second.summary}"
    assert versions(kube, objects) == before, "a second up wrote to the server"

    stack.destroy()
    for k, obj in objects.items():
        left = stored(kube, obj)
        if is_patch(obj):  # a patch gives its fields back: the owner's object stays, without what gpuc set on it
            assert left is not None
            owner = what_the_owner_made(obj, crd_files(crds_of(EXAMPLES, cluster)), chart_values())
            assert missing(untouched(owner, obj), left) == [], f"{k}: destroy took fields the owner set and gpuc left alone"
            assert "gpuc.dev/source" not in (left["metadata"].get("annotations") or {}), f"{k} keeps gpuc's patch"
            assert not set(obj["metadata"].get("labels") or {}) & set(left["metadata"].get("labels") or {}), f"{k} keeps gpuc's labels"
        else:
            assert left is None, f"{k} outlived pulumi destroy"


def untouched(owner: Obj, patch: Obj) -> Obj:
    """The owner's object less every field gpuc's patch sets to another value (those go with the patch: server-side
    apply moved them to gpuc's field manager, and relinquishing its fields removes them)."""
    out: Obj = {}
    for key, value in owner.items():
        if key not in patch or patch[key] == value:
            out[key] = value
        elif isinstance(value, dict) and isinstance(patch[key], dict):
            out[key] = untouched(value, patch[key])
    return out


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args], check=True, capture_output=True)


def project(tmp_path: Path) -> Path:
    """A project root of its own (the example fleet under intents/, in a git repository for `gpuc diff --base`)."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root / "intents")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} has no {old!r}"
    path.write_text(text.replace(old, new, 1))


def diff_statuses(fleet: Path, cluster: str) -> tuple[dict[tuple[str, str, str], str], list[dict[str, Any]]]:
    """`gpuc diff --base HEAD` of one cluster: (kind, namespace, name) -> status, and the changes that renamed an object."""
    result = gpuc("diff", fleet, "--base", "HEAD", "--cluster", cluster, "--output", "json")
    assert result.code == 0, result.err
    diff = next(c for c in json.loads(result.out)["clusters"] if c["cluster"] == cluster)
    return {(o["kind"], o["namespace"], o["name"]): o["status"] for o in diff["objects"]}, [o for o in diff["objects"] if o.get("oldName")]


def expected_steps(objects: dict[Key, Obj], statuses: dict[tuple[str, str, str], str]) -> dict[Key, set[str]]:
    """The engine's steps for what `gpuc diff` reports: changed -> update, replaced -> a replacement, else the same."""
    ops = {"changed": {"update"}, "replaced": {"create-replacement", "replace", "delete-replaced"}}
    return {k: ops[statuses[_ref(o)]] if _ref(o) in statuses else {"same"} for k, o in objects.items()}


def assert_applied(kube: Kube, objects: dict[Key, Obj], renamed: list[dict[str, Any]]) -> None:
    """The server holds every object as gpuc rendered it, and no object under a name it had before the change."""
    for k, obj in objects.items():
        assert missing(obj, stored(kube, obj) or {}) == [], f"{k} is not stored as gpuc rendered it after the change"
    for o in renamed:
        assert kube.get(*_api(objects, o), o["oldName"], o["namespace"] or None) is None, f"{o['kind']} {o['oldName']} was left behind"


@pytest.mark.parametrize("cluster", ["prod-east"])
def test_an_intent_change_updates_exactly_what_gpuc_diff_names(tmp_path: Path, server: ControlPlane, cluster: str) -> None:
    """Two changes, each previewed and applied as `gpuc diff` reports it, object for object, every other object left alone.

    A NIM image bump: the NIMCache is named after what it caches, so the preview creates the new cache and deletes the
    old one (a replacement under one logical name), and the NIMService is updated in place to use it.
    A GPU count change: a claim template renamed by its spec hash, a new NIMCache (another tensor-parallel profile),
    and the NIMService whose draResources name the template, which the NIM Operator's CRD makes immutable: a
    replacement under the same name, deleted first. The Kubernetes provider cannot preview that one (its dry run of
    the new NIMService is an update of the old, which the CRD refuses, and it retries under another name only for the
    built-in "field is immutable" message), so the preview fails saying so, as gpuc's hint warns, and
    `pulumi up --skip-preview` (what the Automation API's up runs) applies it."""
    root = project(tmp_path)
    fleet = root / "intents"
    base = render(fleet, tmp_path / "base", cluster).parent
    kube = Kube(server)
    prepare(kube, tree_objects(base / cluster), crds_of(fleet, cluster), namespaces=False, chart_values=chart_values())
    stack = make_stack(tmp_path, server, cluster, root)
    stack.up()

    edit(fleet / "workloads" / "inference" / "small-models.yaml", "llama-3.2-1b-instruct:1.12.0", "llama-3.2-1b-instruct:1.12.1")
    statuses, renamed = diff_statuses(fleet, cluster)
    assert sorted(statuses.items()) == [(("NIMCache", "nim-service", next(o["name"] for o in renamed)), "replaced"),
                                        (("NIMService", "nim-service", "llama-1b-guard"), "changed")]
    after = compiled_objects(fleet, cluster, render(fleet, tmp_path / "image", cluster))
    stack.set_config("gpuc:previous", str(base))
    assert steps_by_object(stack.preview()) == expected_steps(after, statuses)
    stack.up()
    assert_applied(kube, after, renamed)
    assert set(stack.up().summary) == {"same"}
    git(root, "commit", "-qam", "image bump")

    edit(fleet / "workloads" / "inference" / "llama.yaml", "    count: auto\n", "    count: 2\n")
    statuses, renamed = diff_statuses(fleet, cluster)
    assert statuses[("NIMService", "nim-service", "llama-8b-chat")] == "replaced" and len(renamed) == 2, statuses
    tree = render(fleet, tmp_path / "count", cluster, "--allow-replace")
    after = compiled_objects(fleet, cluster, tree)
    stack.set_config("gpuc:previous", str(tmp_path / "image"))
    stack.set_config("gpuc:allowReplace", "true")  # render refuses a NIMService replacement unless allowed; so does the stack
    with pytest.raises(CommandError) as refused:
        stack.preview()
    said = str(refused.value)
    assert 'NIMService.apps.nvidia.com "llama-8b-chat" is invalid: spec: Invalid value: spec.draResources is immutable' in said
    assert "`pulumi up --skip-preview`" in said  # gpuc's accepted-replacement warning says what to run
    stack.up()
    assert_applied(kube, after, renamed)
    assert set(stack.up().summary) == {"same"}


def _api(objects: dict[Key, Obj], change: dict[str, Any]) -> tuple[str, str]:
    obj = next(o for o in objects.values() if _ref(o) == (change["kind"], change["namespace"], change["name"]))
    return obj["apiVersion"], obj["kind"]


@pytest.mark.parametrize("cluster", ["west"])
def test_a_fleet_render_refuses_stops_the_program_and_leaves_the_server_alone(tmp_path: Path, server: ControlPlane,
                                                                              cluster: str) -> None:
    root = project(tmp_path)
    fleet = root / "intents"
    tree = render(fleet, tmp_path / "rendered", cluster)
    objects = compiled_objects(fleet, cluster, tree)
    kube = Kube(server)
    prepare(kube, tree_objects(tree), crds_of(fleet, cluster), namespaces=False, chart_values=chart_values())
    stack = make_stack(tmp_path, server, cluster, root)
    stack.up()
    before = versions(kube, objects)

    cluster_file = fleet / "clusters" / f"{cluster}.yaml"
    text = cluster_file.read_text()
    edit(cluster_file, "nodePools:", "nodePool:")  # a misspelt field: render refuses the fleet
    refused = gpuc("render", fleet, "-o", tmp_path / "refused", "--cluster", cluster)
    assert refused.code == 2
    diagnostic = next(line for line in refused.err.splitlines() if ": error: " in line)
    for run in (stack.preview, stack.up):
        with pytest.raises(CommandError) as info:
            run()
        said = str(info.value)
        assert f"gpuc: fleet {fleet} has input errors (stack '{cluster}')" in said
        assert diagnostic.split(": error: ")[1] in said and f"clusters/{cluster}.yaml:" in said
        assert "Traceback" not in said
    assert versions(kube, objects) == before, "the refused fleet changed the server"
    cluster_file.write_text(text)
    assert set(stack.up().summary) == {"same"}


VALUES_CHART = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-values
  namespace: {{ .Release.Namespace }}
data:
  values.json: {{ toJson .Values | quote }}
"""


@pytest.mark.parametrize("cluster", ["staging"])
def test_a_chart_unpacked_in_the_repository_is_installed_with_gpucs_values(tmp_path: Path, server: ControlPlane,
                                                                          cluster: str) -> None:
    """`charts: {mirror: {directory: charts}}`: the Release installs the chart from the project's charts/ folder
    (a chart the test makes: one ConfigMap holding the values it was given), with the values gpuc rendered,
    together with every gpuc object; destroy uninstalls it."""
    root = project(tmp_path)
    fleet = root / "intents"
    edit(fleet / "clusters" / f"{cluster}.yaml", "  gitops:\n", "  charts:\n    mirror: {directory: charts}\n  gitops:\n")
    tree = render(fleet, tmp_path / "rendered", cluster)
    values_files = sorted((tree / "values").glob("*.yaml"))
    assert [f.stem for f in values_files] == ["nvidia-dra-driver-gpu"]
    values = yaml.safe_load(values_files[0].read_text())
    version = yaml.safe_load((fleet / "clusters" / f"{cluster}.yaml").read_text())["spec"]["draDriver"]["version"]
    chart = root / "charts" / f"nvidia-dra-driver-gpu-{version}"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: nvidia-dra-driver-gpu\nversion: {version}\n")
    (chart / "templates" / "values.yaml").write_text(VALUES_CHART)
    app = yaml.safe_load((tree / "argocd" / f"{cluster}-nvidia-dra-driver-gpu.yaml").read_text())
    assert app["spec"]["sources"][0]["path"] == f"charts/nvidia-dra-driver-gpu-{version}"  # Argo CD reads the same folder

    objects = compiled_objects(fleet, cluster, tree)
    kube = Kube(server)
    prepare(kube, tree_objects(tree), crds_of(fleet, cluster), namespaces=False, chart_values=chart_values())
    stack = make_stack(tmp_path, server, cluster, root, **{"gpuc:charts": "install"})
    preview = stack.preview()
    releases = {name: ops for (type_, name), ops in preview.ops().items() if type_ == "kubernetes:helm.sh/v3:Release"}
    assert releases == {"nvidia-dra-driver-gpu/nvidia-dra-driver-gpu": {"create"}}
    assert steps_by_object(preview) == {k: {"create"} for k in objects}

    stack.up()
    namespace = app["spec"]["destination"]["namespace"]
    installed = kube.get("v1", "ConfigMap", "nvidia-dra-driver-gpu-values", namespace)
    assert installed is not None, "the chart's ConfigMap is not on the server"
    assert json.loads(installed["data"]["values.json"]) == values
    assert kube.get("v1", "Secret", "sh.helm.release.v1.nvidia-dra-driver-gpu.v1", namespace) is not None  # a real Helm release
    for k, obj in objects.items():
        assert missing(obj, stored(kube, obj) or {}) == [], f"{k} is not stored as gpuc rendered it"
    assert set(stack.up().summary) == {"same"}

    stack.destroy()
    assert kube.get("v1", "ConfigMap", "nvidia-dra-driver-gpu-values", namespace) is None
    assert kube.get("v1", "Secret", "sh.helm.release.v1.nvidia-dra-driver-gpu.v1", namespace) is None
