"""gpuc's Helm values against the real NVIDIA charts (../shared/upstream/charts), rendered by the real Helm
(harness/build.d/helm.sh) the way Argo CD's repo server renders them: release name and namespace of the
Application, `--kube-version` of the cluster's minor and `--api-versions` as Argo CD passes them for that minor
(harness/helm.py: Argo CD's cluster cache keeps the preferred version of each resource, and passes each
group/version and group/version/Kind).

a. Every release of every example cluster (`gpuc render intents/`, and the same fleet with a taint on every pool,
   which makes gpuc write the tolerations values) renders on the chart at the version the cluster pins, and the
   objects carry what gpuc set: the DRA driver's kubelet plugin (nodeSelector, tolerations, feature gates, driver
   root, image), its DeviceClasses (the set gpuc expects, at the cluster's resource.k8s.io version), the GPU
   Operator's ClusterPolicy (cdi, driver, devicePlugin, toolkit env, mig, migManager, daemonsets.tolerations) or
   GPUCluster (draDriver, hostPaths, daemonsets), the Node Feature Discovery worker's tolerations; every object is
   of an API the cluster serves (or a CRD one of its charts brings), and none is also one of gpuc's own manifests.
   Where gpuc leaves a tolerations value to the chart, the chart's default is what gpuc's facts say it is.
   DRA driver 0.5.x clusters (lab asks for 0.5.1) use dra-driver-nvidia-gpu-0.5.0-dev, the nearest chart there is
   (main 9593204, 12 days before v0.5.0: no 0.5.x tag exists); the NIM Operator 3.1.2 chart as in (c).
b. The charts' own `fail` rules against gpuc's model of them: each GPU Operator `chartFails` fact
   (compiler/facts/data/operators.yaml) makes the real v26.7.0 chart fail with the same message, and
   `chart_failures` agrees, a control passing both; the chart's fifth check (gpuCluster.deployCR needs a
   resource.k8s.io DeviceClass among the API versions) fails a bare `helm template` and passes with the cluster's;
   v26.3.x charts carry one of the rules already (gpuc's facts start at v26.7.0) and gpuc's values render there.
   The DRA driver charts' templates/validation.yaml (and 0.5's IMEX check): gpuc's gpuResourcesEnabledOverride,
   and for the other rules, values a user may put in draDriver.values: gpuc refuses them, or the chart renders.
c. NIM Operator 3.1.2 declares two dependency charts (dynamo-platform 0.9.0-post1 as `dynamo`, dynamo-crds 0.9.0,
   both `condition: dynamo.enabled`, false by default and never set by gpuc) that the unpacked folder lacks, so
   Helm refuses it before rendering anything ("found in Chart.yaml, but missing in charts/ directory"). The tests
   render a copy in a temporary folder whose Chart.yaml lists no dependencies: with the condition false Helm drops
   the subcharts (templates and CRDs) anyway, which `test_nim_operator_312_dependencies` shows by rendering a
   copy with stand-in dependency charts in charts/ to the same objects. The chart Argo CD pulls from the Helm
   repository is the packaged one, which holds both (`helm package` refuses a chart whose dependencies are missing).
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from harness import controlplane, helm
from harness.helm import HelmFailed
from harness.servers import server_for

from conftest import EXAMPLES, SHARED, cluster_doc, gpuc, writable_copy

Doc = dict[str, Any]

UPSTREAM = SHARED / "upstream"
CHARTS = UPSTREAM / "charts"
DEV_CHART = "dra-driver-nvidia-gpu-0.5.0-dev"  # stands in for 0.5.0 and 0.5.1 (no 0.5.x tag exists)
NIM_WITH_DEPS = "k8s-nim-operator-3.1.2"
CLUSTERS = sorted(p.stem for p in (EXAMPLES / "clusters").glob("*.yaml"))
TAINT = {"key": "example.com/dedicated", "value": "gpu", "effect": "NoSchedule"}


# -- the fleet, rendered by gpuc ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Release:
    """One Helm release gpuc renders: its values file and where the Application says to install it."""

    cluster: str
    minor: str
    name: str
    namespace: str
    chart: str
    version: str
    values_file: Path

    @property
    def values(self) -> Doc:
        return yaml.safe_load(self.values_file.read_text()) or {}


def chart_dir(chart: str, version: str, tmp: Path) -> Path:
    """The unpacked chart for a release: 0.5.x of the DRA driver is the 0.5.0-dev chart, NIM 3.1.2 a copy without
    its missing (disabled) dependencies."""
    if chart == "dra-driver-nvidia-gpu" and version.startswith("0.5."):
        return CHARTS / DEV_CHART
    folder = CHARTS / f"{chart}-{version}"
    assert folder.is_dir(), f"no unpacked chart {folder.name} in {CHARTS} (README.md there lists what is)"
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    if meta.get("dependencies") and not (folder / "charts").is_dir():
        return without_dependencies(folder, tmp)
    return folder


def without_dependencies(folder: Path, tmp: Path) -> Path:
    copy_dir = tmp / "charts-without-dependencies" / folder.name
    if not copy_dir.is_dir():
        writable_copy(folder, copy_dir)
        meta = yaml.safe_load((copy_dir / "Chart.yaml").read_text())
        values = yaml.safe_load((copy_dir / "values.yaml").read_text())
        for dep in meta.pop("dependencies"):
            cond = dep.get("condition", "")
            assert _dig(values, cond) is False, f"{folder.name}: dependency {dep['name']} is on by default ({cond})"
        (copy_dir / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return copy_dir


def _dig(doc: Any, dotted: str, default: Any = None) -> Any:
    for part in dotted.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return default
        doc = doc[part]
    return doc


def render_fleet(fleet: Path, out: Path) -> Path:
    result = gpuc("render", str(fleet), "-o", str(out))
    assert result.code == 0, result.out + result.err
    return out


def releases_of(tree: Path, cluster: str, minor: str) -> list[Release]:
    """The Helm releases in a rendered cluster, from its Argo CD Applications (what the repo server is asked to
    render) and checked against the values files' headers."""
    out = []
    for app_file in sorted((tree / "argocd").glob("*.yaml")):
        app = yaml.safe_load(app_file.read_text())
        if not isinstance(app, dict) or app.get("kind") != "Application":
            continue
        chart_sources = [s for s in app["spec"].get("sources", [app["spec"].get("source")]) if s and s.get("helm")]
        for src in chart_sources:
            (values_ref,) = src["helm"]["valueFiles"]
            values_file = tree / "values" / Path(values_ref).name
            header = values_file.read_text().splitlines()[:3]
            m = re.match(r"# chart (\S+) (\S+) from (\S+)", header[2])
            assert m, header
            chart, version = m.group(1), m.group(2)
            assert (src.get("chart"), src.get("targetRevision")) in ((chart, version), (chart, "v" + version), (None, None)), src
            release = src["helm"].get("releaseName") or app["metadata"]["name"]
            namespace = app["spec"]["destination"]["namespace"]
            assert header[1] == f"# Helm values for release {release} in namespace {namespace}:", header
            out.append(Release(cluster, minor, release, namespace, chart, version, values_file))
    return out


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example fleet rendered as is ("plain") and with a taint on every pool ("tainted")."""
    root = tmp_path_factory.mktemp("charts-fleet")
    tainted = root / "tainted-intents"
    shutil.copytree(EXAMPLES, tainted)
    for path in (tainted / "clusters").glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        for pool in doc["spec"]["nodePools"]:
            pool["taints"] = [dict(TAINT)]
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return {"plain": render_fleet(EXAMPLES, root / "plain"), "tainted": render_fleet(tainted, root / "tainted")}


def cluster_minor(name: str) -> str:
    return str(yaml.safe_load((EXAMPLES / "clusters" / f"{name}.yaml").read_text())["spec"]["kubernetesVersion"])


# -- what a cluster serves --------------------------------------------------------------------------------------------

@cache
def crd_kinds(name: str) -> frozenset[str]:
    """group/version/Kind of every CRD the unpacked chart `name` (and its subcharts) ships in crds/."""
    out = set()
    for f in sorted((CHARTS / name).rglob("crds/*.yaml")):
        for d in yaml.load_all(f.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition":
                spec = d["spec"]
                out |= {f"{spec['group']}/{v['name']}/{spec['names']['kind']}" for v in spec["versions"]}
    return frozenset(out)


def served(doc: Doc, apis: set[str]) -> bool:
    return f"{doc['apiVersion']}/{doc['kind']}" in apis


def key(doc: Doc) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace", "")


def gpuc_objects(tree: Path) -> list[Doc]:
    out = []
    for f in tree.glob("*.yaml"):
        for d in yaml.safe_load_all(f.read_text()):
            if isinstance(d, dict) and "kind" in d and d["kind"] != "Kustomization":
                out.append(d)
    return out


# -- the objects' fields ----------------------------------------------------------------------------------------------

def only(docs: list[Doc], kind: str, name_suffix: str = "") -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{len(found)} {kind} named *{name_suffix}: {[d['metadata']['name'] for d in found]}"
    return found[0]


def pod_spec(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def env_of(container: Doc) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def gates_of(value: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in value.split(",") if item)


def expected_device_classes(values: Doc, chart: Path) -> set[str]:
    """The DeviceClasses the DRA driver chart creates for gpuc's values (templates/deviceclass-*.yaml: the GPU
    classes with resources.gpus, vfio from 25.12 on, the ComputeDomain classes with resources.computeDomains)."""
    out = set()
    if _dig(values, "resources.gpus.enabled"):
        out |= {"gpu.nvidia.com", "mig.nvidia.com"}
        if (chart / "templates" / "deviceclass-vfio-gpu.yaml").is_file():
            out.add("vfio.gpu.nvidia.com")
    if _dig(values, "resources.computeDomains.enabled"):
        out.add("compute-domain-default-channel.nvidia.com")
        if _dig(values, "resources.computeDomains.imex.mode") != "hostManaged":
            out.add("compute-domain-daemon.nvidia.com")
    return out


def check_dra_driver(rel: Release, docs: list[Doc], chart: Path) -> None:
    from compiler.facts.driver import kubelet_plugin_tolerations, parse_driver_version
    from compiler.facts.platform import parse_kubernetes_version

    v = rel.values
    plugin = only(docs, "DaemonSet", "kubelet-plugin")
    spec = pod_spec(plugin)
    assert spec.get("nodeSelector") == (_dig(v, "kubeletPlugin.nodeSelector") or None), spec.get("nodeSelector")
    want_tolerations = _dig(v, "kubeletPlugin.tolerations")
    if want_tolerations is None:  # gpuc leaves the chart's default, which its facts must know
        want_tolerations = kubelet_plugin_tolerations(parse_driver_version(rel.version))
    assert (spec.get("tolerations") or []) == want_tolerations
    containers = spec["containers"]
    for c in containers:
        env = env_of(c)
        assert env.get("NVIDIA_DRIVER_ROOT") == v["nvidiaDriverRoot"], c["name"]
        if "featureGates" in v:
            assert gates_of(env["FEATURE_GATES"]) == {k: str(x).lower() for k, x in v["featureGates"].items()}, c["name"]
        else:
            assert "FEATURE_GATES" not in env, c["name"]
        if "logVerbosity" in v:
            assert env.get("LOG_VERBOSITY") == str(v["logVerbosity"]), c["name"]
        if "image" in v:
            assert c["image"] == f"{v['image']['repository']}:{v['image']['tag']}", c["name"]
    gpu_plugin = [c for c in containers if "CONSUMABLE_SHARES" in env_of(c) or c["name"] == "gpus"]
    if "consumableShares" in v:
        assert gpu_plugin and all(env_of(c).get("CONSUMABLE_SHARES") == v["consumableShares"] for c in gpu_plugin)
    classes = [d for d in docs if d["kind"] == "DeviceClass"]
    assert {d["metadata"]["name"] for d in classes} == expected_device_classes(v, chart)
    api = parse_kubernetes_version(rel.minor).api_version
    assert {d["apiVersion"] for d in classes} <= {api}, f"DeviceClasses at {[d['apiVersion'] for d in classes]}, cluster serves {api}"
    names = {c["name"] for c in containers}
    assert ("gpus" in names) == bool(_dig(v, "resources.gpus.enabled")), names
    assert ("compute-domains" in names) == bool(_dig(v, "resources.computeDomains.enabled")), names


def check_nfd_worker(rel: Release, docs: list[Doc], chart: Path) -> None:
    from compiler.facts.platform import gpu_operator, version_tuple

    worker = only(docs, "DaemonSet", "node-feature-discovery-worker")
    want = _dig(rel.values, "node-feature-discovery.worker.tolerations")
    if want is None:  # the chart's default, per gpuc's facts (nfdWorkerTolerations)
        table = gpu_operator()["nfdWorkerTolerations"]
        since = max((k for k in table if version_tuple(k) <= version_tuple(rel.version)), key=version_tuple)
        want = table[since]
    assert pod_spec(worker).get("tolerations") == want


def check_gpu_operator(rel: Release, docs: list[Doc], chart: Path) -> None:
    from compiler.facts.platform import gpu_operator

    v = rel.values
    facts = gpu_operator()
    tolerations = _dig(v, "daemonsets.tolerations", facts["daemonsetTolerations"])
    check_nfd_worker(rel, docs, chart)
    assert not any(d["kind"] == "NVIDIADriver" for d in docs) or _dig(v, "driver.nvidiaDriverCRD.enabled")
    if _dig(v, "gpuCluster.deployCR"):
        assert not any(d["kind"] == "ClusterPolicy" for d in docs)
        spec = only(docs, "GPUCluster")["spec"]
        dra = spec["draDriver"]
        assert dra["version"] == v["draDriver"]["version"]
        assert dra.get("featureGates") == _dig(v, "draDriver.featureGates")
        assert dra["computeDomains"]["enabled"] == v["draDriver"]["computeDomains"]["enabled"]
        assert _dig(dra, "gpus.kubeletPlugin") == _dig(v, "draDriver.gpus.kubeletPlugin")
        assert spec["hostPaths"]["driverInstallDir"] == v["hostPaths"]["driverInstallDir"]
        assert spec["daemonsets"]["tolerations"] == tolerations
        return
    assert not any(d["kind"] == "GPUCluster" for d in docs)
    spec = only(docs, "ClusterPolicy")["spec"]
    assert spec["cdi"]["enabled"] is v["cdi"]["enabled"] is True
    assert spec["driver"]["enabled"] == v["driver"]["enabled"]
    assert spec["devicePlugin"]["enabled"] == v["devicePlugin"]["enabled"]
    assert spec["toolkit"].get("env") == _dig(v, "toolkit.env")
    assert spec["daemonsets"]["tolerations"] == tolerations
    if "mig" in v:
        assert spec["mig"]["strategy"] == v["mig"]["strategy"]
    if "migManager" in v:
        assert spec["migManager"]["enabled"] == v["migManager"]["enabled"]
        assert spec["migManager"]["config"] == {"name": v["migManager"]["config"]["name"],
                                                "default": v["migManager"]["config"]["default"]}


def check_nim_operator(rel: Release, docs: list[Doc], chart: Path) -> None:
    assert _dig(rel.values, "dynamo.enabled") in (None, False)
    deployment = only(docs, "Deployment")
    assert pod_spec(deployment)["containers"], deployment["metadata"]["name"]


CHECKS = {"nvidia-dra-driver-gpu": check_dra_driver, "dra-driver-nvidia-gpu": check_dra_driver,
          "gpu-operator": check_gpu_operator, "k8s-nim-operator": check_nim_operator}


# -- a. the example fleet on the real charts -------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["plain", "tainted"])
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_fleet_releases_render_on_the_real_charts(fleets: dict[str, Path], cluster: str, variant: str,
                                                   tmp_path: Path) -> None:
    tree = fleets[variant] / cluster
    minor = cluster_minor(cluster)
    releases = releases_of(tree, cluster, minor)
    assert releases, f"{cluster} installs no chart"
    apis = set(helm.api_versions(minor))
    charts = {rel: chart_dir(rel.chart, rel.version, tmp_path) for rel in releases}
    for chart in charts.values():
        apis |= crd_kinds(chart.name)
    own = {key(d) for d in gpuc_objects(tree)}
    for rel, chart in charts.items():
        docs = helm.render(chart, release=rel.name, namespace=rel.namespace, values=[rel.values_file],
                           kube_version=minor, api_versions=helm.api_versions(minor))
        assert docs, f"{chart.name} rendered nothing"
        unserved = sorted(f"{d['apiVersion']}/{d['kind']} {d['metadata']['name']}" for d in docs if not served(d, apis))
        assert not unserved, f"{chart.name}: objects of APIs a {minor} cluster does not serve: {unserved}"
        clashes = sorted(own & {key(d) for d in docs})
        assert not clashes, f"{chart.name} renders objects gpuc also writes: {clashes}"
        CHECKS[rel.chart](rel, docs, chart)
    if variant == "tainted":  # gpuc wrote the pools' toleration into each tolerations value the chart has
        toleration = {"key": TAINT["key"], "operator": "Equal", "value": TAINT["value"], "effect": TAINT["effect"]}
        for rel in releases:
            v = rel.values
            wanted = {"gpu-operator": ["daemonsets.tolerations", "node-feature-discovery.worker.tolerations"]}.get(
                rel.chart, ["kubeletPlugin.tolerations"] if rel.chart in ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu") else [])
            for dotted in wanted:
                assert toleration in (_dig(v, dotted) or []), f"{rel.values_file.name}: {dotted} lacks the pools' taint"


def test_builtin_api_versions_match_discovery(tmp_path: Path) -> None:
    """The lists harness/helm.py carries per minor are what Argo CD would pass for a real API server of that minor
    (each example cluster's minor), on servers of the test's own: a shared one holds the CRDs other tests installed."""
    for minor in sorted({cluster_minor(c) for c in CLUSTERS}):
        release, emulated = server_for(minor)
        with controlplane.start(release, tmp_path / minor, emulated_minor=emulated) as cp:
            assert helm.api_versions(minor) == helm.api_versions(minor, cp), minor


# -- b. the charts' own refusals ---------------------------------------------------------------------------------------

GPU_OPERATOR = CHARTS / "gpu-operator-v26.7.0"


def _breaking(want: Any, default: Any) -> Any:
    """A value for which a rule condition `want` does not hold (`default`: the chart's, for its type)."""
    if want == "empty":
        return {"x": "y"} if isinstance(default, dict) else "x"
    assert isinstance(want, bool), want
    return not want


def _nested(flat: dict[str, Any]) -> Doc:
    out: Doc = {}
    for dotted, value in flat.items():
        *parents, last = dotted.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = {} if value == "empty" else value
    return out


def rule_values(index: int) -> dict[str, Any]:
    """Values (dotted) under which the `index`th chartFails rule holds and no other does, by gpuc's model."""
    from compiler.check.operator_chart import chart_failures
    from compiler.facts.platform import gpu_operator

    rules = gpu_operator()["chartFails"]["rules"]
    flat = dict(rules[index]["when"])
    for other in rules[:index] + rules[index + 1:]:
        if chart_failures(_nested(flat), "v26.7.0").count(other["message"]):
            free = [k for k in other["when"] if k not in flat]
            assert free, f"rule {index} cannot hold without rule {other['message']!r}"
            flat[free[0]] = _breaking(other["when"][free[0]], gpu_operator()["chartFails"]["defaults"].get(free[0]))
    return flat


def gpu_operator_rules() -> list[Doc]:
    from compiler.facts.platform import gpu_operator

    return list(gpu_operator()["chartFails"]["rules"])


@pytest.mark.parametrize("index", range(len(gpu_operator_rules())), ids=[r["message"][:40] for r in gpu_operator_rules()])
def test_gpu_operator_chart_fails_as_gpuc_says(index: int) -> None:
    from compiler.check.operator_chart import chart_failures

    rule = gpu_operator_rules()[index]
    values = _nested(rule_values(index))
    assert chart_failures(values, "v26.7.0") == [rule["message"]]
    with pytest.raises(HelmFailed) as failed:
        helm.render(GPU_OPERATOR, release="gpu-operator", namespace="gpu-operator", values=[values],
                    kube_version="1.37", api_versions=helm.api_versions("1.37"))
    assert (failed.value.template or "").startswith("gpu-operator/templates/validations.yaml:")
    assert failed.value.message == rule["message"]


def test_gpu_operator_chart_rules_are_the_facts() -> None:
    """Every `fail` of the v26.7.0 chart's validations.yaml is a chartFails rule or the API check (tested below)."""
    text = (GPU_OPERATOR / "templates" / "validations.yaml").read_text()
    messages = re.findall(r'fail "([^"]*)"', text)
    facts = [r["message"] for r in gpu_operator_rules()]
    assert messages[:len(facts)] == facts
    assert len(messages) == len(facts) + 1 and messages[-1].startswith("gpuCluster.deployCR=true requires")


def test_gpu_operator_chart_control_passes() -> None:
    """The chart's defaults, and each example cluster's GPU Operator values, pass both the chart and gpuc's model."""
    from compiler.check.operator_chart import chart_failures

    assert chart_failures({}, "v26.7.0") == []
    assert helm.render(GPU_OPERATOR, release="gpu-operator", namespace="gpu-operator", kube_version="1.34",
                       api_versions=helm.api_versions("1.34"))


def test_gpu_cluster_needs_a_device_class_api(fleets: dict[str, Path]) -> None:
    """west's values (gpuCluster.deployCR): a bare `helm template` fails the chart's fifth check, Argo CD's API
    versions for the cluster pass it; every minor gpuc supports serves a resource.k8s.io DeviceClass."""
    from compiler.check.operator_chart import chart_failures

    (rel,) = [r for r in releases_of(fleets["plain"] / "west", "west", cluster_minor("west")) if r.chart == "gpu-operator"]
    assert rel.values["gpuCluster"]["deployCR"] is True
    assert chart_failures(rel.values, rel.version) == []
    with pytest.raises(HelmFailed) as failed:
        helm.render(GPU_OPERATOR, release=rel.name, namespace=rel.namespace, values=[rel.values_file], kube_version=rel.minor)
    assert failed.value.message.startswith("gpuCluster.deployCR=true requires a Kubernetes cluster that supports Dynamic Resource Allocation")
    assert helm.render(GPU_OPERATOR, release=rel.name, namespace=rel.namespace, values=[rel.values_file],
                       kube_version=rel.minor, api_versions=helm.api_versions(rel.minor))
    for minor in helm.BUILTIN_API_VERSIONS:
        apis = helm.api_versions(minor)
        assert any(re.fullmatch(r"resource\.k8s\.io/v1(beta[12])?/DeviceClass", a) for a in apis), minor


@pytest.mark.parametrize("version", ["v26.3.0", "v26.3.1", "v26.3.2", "v26.3.3"])
def test_gpu_operator_26_3_rules(version: str, fleet, tmp_path: Path) -> None:
    """v26.3.x already fails on the NRI plugin without CDI, a rule gpuc's facts date from v26.7.0 (chart_failures
    returns nothing before it). gpuc always writes cdi.enabled true and never nriPluginEnabled, so its values
    cannot trip it: a DRA cluster on that release renders."""
    from compiler.check.operator_chart import chart_failures

    chart = CHARTS / f"gpu-operator-{version}"
    values = {"cdi": {"enabled": False, "nriPluginEnabled": True}}
    with pytest.raises(HelmFailed) as failed:
        helm.render(chart, release="gpu-operator", namespace="gpu-operator", values=[values], kube_version="1.34")
    assert failed.value.message == "the NRI Plugin cannot be enabled when CDI is disabled"
    assert chart_failures(values, version) == []  # the gap: harmless while gpuc's own values keep CDI on
    out = render_fleet(fleet([cluster_doc(gpuOperator={"mode": "helm", "version": version})]), tmp_path / "out")
    (rel,) = [r for r in releases_of(out / "c1", "c1", "1.34") if r.chart == "gpu-operator"]
    assert rel.values["cdi"]["enabled"] is True and "nriPluginEnabled" not in rel.values["cdi"]
    docs = helm.render(chart, release=rel.name, namespace=rel.namespace, values=[rel.values_file], kube_version="1.34",
                       api_versions=helm.api_versions("1.34"))
    assert only(docs, "ClusterPolicy")["spec"]["cdi"] == {"enabled": True}


GPU_OPERATOR_CHARTS = sorted((p.name for p in CHARTS.glob("gpu-operator-v*")), key=lambda n: tuple(map(int, n.split("-v")[1].split("."))))


@pytest.mark.parametrize("chart", GPU_OPERATOR_CHARTS)
def test_gpu_operator_defaults_gpuc_writes_back(chart: str) -> None:
    """Setting a tolerations value replaces the chart's list, so gpuc writes the chart's defaults back beside the
    pools' taints (compiler/lower/node_config.py): its facts must be each release's values.yaml defaults, the
    operands' (daemonsets.tolerations) and the Node Feature Discovery worker's (which the worker DaemonSet gets
    unchanged: test_fleet_releases_render_on_the_real_charts renders it). Read from values.yaml, no render."""
    from compiler.facts.platform import gpu_operator, version_tuple
    from compiler.lower.node_config import _nfd_worker_defaults

    version = chart.split("-", 2)[2]
    values = yaml.safe_load((CHARTS / chart / "values.yaml").read_text())
    facts = gpu_operator()
    assert values["daemonsets"]["tolerations"] == facts["daemonsetTolerations"]
    cluster: Any = SimpleNamespace(spec=SimpleNamespace(gpu_operator=SimpleNamespace(version=version)))
    gpuc_default = _nfd_worker_defaults(cluster)  # what gpuc takes for the chart's default at this release
    chart_default = values["node-feature-discovery"]["worker"]["tolerations"]
    assert gpuc_default == chart_default, f"gpuc's nfdWorkerTolerations for {version} are not the chart's default"
    if version_tuple(version) >= version_tuple(facts["chartFails"]["since"]):
        for dotted, default in facts["chartFails"]["defaults"].items():
            assert _dig(values, dotted, "<missing>") == default, dotted


DRA_CHARTS = sorted(p.name for p in CHARTS.glob("*dra-driver-nvidia-gpu-*"))


@pytest.mark.parametrize("chart", DRA_CHARTS)
def test_dra_kubelet_plugin_default_tolerations(chart: str) -> None:
    """gpuc writes the chart's default kubeletPlugin.tolerations back beside the pools' (data/dra_driver.yaml
    kubeletPluginTolerations): they are what each chart's kubelet plugin DaemonSet gets without the value."""
    from compiler.facts.driver import kubelet_plugin_tolerations, parse_driver_version

    version = chart.rsplit("-", 1)[1] if not chart.endswith("-dev") else "0.5.0"
    docs = helm.render(CHARTS / chart, release="dra", namespace="dra", values=[{"gpuResourcesEnabledOverride": True}],
                       kube_version="1.34", api_versions=helm.api_versions("1.34"))
    plugin = only(docs, "DaemonSet", "kubelet-plugin")
    assert (pod_spec(plugin).get("tolerations") or []) == kubelet_plugin_tolerations(parse_driver_version(version))


@pytest.mark.parametrize("chart", DRA_CHARTS)
def test_dra_chart_refuses_gpus_without_override(chart: str) -> None:
    """Every DRA driver chart fails on resources.gpus.enabled without gpuResourcesEnabledOverride, and passes with
    it: the value gpuc writes whenever it turns GPUs on (compiler/lower/dra_driver.py)."""
    values = {"resources": {"gpus": {"enabled": True}}}
    with pytest.raises(HelmFailed) as failed:
        helm.render(CHARTS / chart, release="dra", namespace="dra", values=[values], kube_version="1.34",
                    api_versions=helm.api_versions("1.34"))
    assert "gpuResourcesEnabledOverride" in failed.value.message and failed.value.template
    assert failed.value.template.split("/", 1)[1].startswith("templates/validation.yaml")
    helm.render(CHARTS / chart, release="dra", namespace="dra", values=[values, {"gpuResourcesEnabledOverride": True}],
                kube_version="1.34", api_versions=helm.api_versions("1.34"))


# draDriver.values a user may write that the charts' own checks refuse: (id, driver, values, message start, pools).
L40S_ONLY = [{"name": "l40s", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}, "allocation": "devicePlugin"}]
USER_VALUES = [
    ("gpus-on-without-dra-pools", "25.12.0", {"resources": {"gpus": {"enabled": True}}}, "--set 'gpuResourcesEnabledOverride=true'", L40S_ONLY),
    ("webhook-tls-mode", "25.12.0", {"webhook": {"enabled": True, "tls": {"mode": "bogus"}}}, "Invalid webhook TLS mode", None),
    ("webhook-tls-null", "25.12.0", {"webhook": {"enabled": True, "tls": None}}, "nil pointer evaluating interface {}.mode", None),
    ("webhook-issuer-name", "25.12.0", {"webhook": {"enabled": True, "tls": {"certManager": {"issuerType": "issuer"}}}},
     "Cert-manager issuer name is required", None),
    ("imex-host-managed", "0.5.1", {"resources": {"computeDomains": {"enabled": True, "imex": {"mode": "hostManaged"}}}},
     "resources.computeDomains.imex.mode=hostManaged requires", None),
    ("imex-isolation", "0.5.1", {"resources": {"computeDomains": {"enabled": True, "imex": {"isolation": "channel"}}}},
     "resources.computeDomains.imex.isolation=channel is not supported", None),
]


@pytest.mark.parametrize(("driver", "values", "message", "pools"), [u[1:] for u in USER_VALUES], ids=[u[0] for u in USER_VALUES])
def test_dra_chart_rules_on_user_values(driver: str, values: Doc, message: str, pools: list | None, fleet,
                                        tmp_path: Path) -> None:
    """A cluster whose draDriver.values would trip one of the chart's checks: gpuc refuses the intent, or the real
    chart renders the values gpuc writes. `message` is part of the chart's error for the values alone (with webhook.tls
    null the webhook Deployment's template stops on a nil pointer before validation.yaml's `fail` is reached)."""
    minor = "1.36" if driver.startswith("0.5") else "1.34"
    chart = chart_dir("dra-driver-nvidia-gpu" if driver.startswith("0.") else "nvidia-dra-driver-gpu", driver, tmp_path)
    base = {"gpuResourcesEnabledOverride": True} if "gpus" not in str(values) else {}
    with pytest.raises(HelmFailed) as failed:  # the chart's rule, on the user's values alone
        helm.render(chart, release="dra", namespace="dra", values=[base, values], kube_version=minor,
                    api_versions=helm.api_versions(minor))
    assert message in failed.value.message, failed.value.message
    spec: Doc = {"draDriver": {"version": driver, "values": copy.deepcopy(values)}}
    doc = cluster_doc(kubernetes=minor, driver=driver, pools=pools, **spec)
    out = tmp_path / "out"
    result = gpuc("render", str(fleet([doc])), "-o", str(out))
    if result.code != 0:
        assert "error" in result.err, result.err
        return  # gpuc refuses it
    (rel,) = [r for r in releases_of(out / "c1", "c1", minor) if r.chart in ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")]
    try:
        docs = helm.render(chart, release=rel.name, namespace=rel.namespace, values=[rel.values_file], kube_version=minor,
                           api_versions=helm.api_versions(minor))
    except HelmFailed as e:
        pytest.fail(f"gpuc accepted draDriver.values {values} and wrote values the real chart {chart.name} refuses: {e.message}")
    check_dra_driver(rel, docs, chart)


# -- c. NIM Operator 3.1.2 and its missing dependencies ---------------------------------------------------------------

def test_nim_operator_312_dependencies(tmp_path: Path) -> None:
    """The unpacked 3.1.2 folder is refused before rendering; the copy without dependencies renders the same objects
    as a copy whose charts/ holds stand-ins named and versioned as the two dependencies (disabled by dynamo.enabled,
    so their contents never matter): what Argo CD renders from the packaged chart, which holds the real ones."""
    folder = CHARTS / NIM_WITH_DEPS
    with pytest.raises(HelmFailed) as failed:
        helm.render(folder, release="nim-operator", namespace="nim-operator", kube_version="1.34")
    assert failed.value.template is None
    assert failed.value.message.endswith("found in Chart.yaml, but missing in charts/ directory: dynamo-platform, dynamo-crds")
    stripped = helm.render(chart_dir("k8s-nim-operator", "3.1.2", tmp_path), release="nim-operator",
                           namespace="nim-operator", kube_version="1.34", api_versions=helm.api_versions("1.34"))
    stubbed = tmp_path / "stubbed" / folder.name
    writable_copy(folder, stubbed)
    for dep in yaml.safe_load((folder / "Chart.yaml").read_text())["dependencies"]:
        sub = stubbed / "charts" / dep["name"]
        (sub / "templates").mkdir(parents=True)
        (sub / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": dep["name"], "version": dep["version"]}))
        (sub / "templates" / "never.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: never-rendered}\n")
    with_stubs = helm.render(stubbed, release="nim-operator", namespace="nim-operator", kube_version="1.34",
                             api_versions=helm.api_versions("1.34"))
    assert with_stubs == stripped
    assert len(stripped) >= 10, [key(d) for d in stripped]


@pytest.fixture(scope="module", autouse=True)
def _helm_built() -> Iterator[None]:
    helm.binary()  # ComponentMissing (with the build command) before any test runs without it
    yield
