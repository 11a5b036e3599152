"""The platform as it ships in November 2026 (issue 13): Kubernetes 1.36/1.37, DRA driver 0.5.x released,
GPU Operator 26.7 installing the DRA driver itself (gpuOperator.mode gpuCluster)."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from compiler.facts.driver import chart_for, parse_driver_version
from compiler.facts.platform import dra_gates, gpu_operator, parse_kubernetes_version
from compiler.lower.node_config import gpu_cluster_values

from conftest import (
    EXAMPLES,
    NIM_SECRETS,
    REFERENCE,
    REPO,
    cluster_doc,
    compile_single,
    deep_update,
    gpuc,
    nim_model,
    objects_of,
    workload_doc,
)
from test_input_errors import render_rejected

GPU_OPERATOR = REFERENCE / "gpu-operator"
H200 = {"name": "h200", "nodes": 2, "gpu": {"model": "H200-141GB", "count": 8}}


def gpu_cluster_doc(name: str = "c1", pools: list | None = None, **spec) -> dict:
    """A Kubernetes 1.37 cluster whose GPU Operator installs DRA driver 0.5.1 (`spec` deep-merged over it)."""
    doc = cluster_doc(name, kubernetes="1.37", driver="0.5.1", pools=pools or [dict(H200)])
    doc["spec"]["gpuOperator"] = {"mode": "gpuCluster", "version": "v26.7.0"}
    doc["spec"]["draDriver"]["nvidiaDriverRoot"] = "/"
    return deep_update(doc, {"spec": spec})


# ------------------------------------------------------------------------------------ Kubernetes

@pytest.mark.parametrize("version", ["1.36", "1.37"])
def test_kubernetes_136_and_137_are_supported_with_resource_v1(version):
    assert parse_kubernetes_version(version).api_version == "resource.k8s.io/v1"


@pytest.mark.parametrize(("version", "says", "fix"), [
    ("1.31", "Kubernetes 1.31 is older than DRA with structured parameters: gpuc supports Kubernetes 1.32 to 1.37",
     "upgrade the cluster to Kubernetes 1.32 or newer"),
    ("1.38", "Kubernetes 1.38 is newer than this gpuc knows: gpuc supports Kubernetes 1.32 to 1.37",
     'upgrade gpuc to a release that knows 1.38 (`gpuc catalog` lists what this one knows); until then, kubernetesVersion: "1.37"'),
])
def test_versions_outside_the_known_range_say_the_range_and_what_to_do(version, says, fix, fleet):
    """Issue 46: 1.38 was refused with "needs 1.32 or newer"; the error says the supported range, and the hint what to do."""
    err = render_rejected(fleet(clusters=[cluster_doc(kubernetes=version)]), "spec.kubernetesVersion")
    assert says in err and f"hint: {fix}" in err, err


def test_dra_gate_table_follows_the_release_notes():
    gates = dra_gates()
    for gate in gates.values():  # stages come in order
        stages = [s for s in (gate.alpha, gate.beta, gate.ga) if s is not None]
        assert stages == sorted(stages), gate
    assert gates["DRAPrioritizedList"].stage(36) == "GA" and gates["DRAPrioritizedList"].on_by_default(34)
    assert gates["DRAAdminAccess"].stage(36) == "GA"
    for name in ("DRAPartitionableDevices", "DRAConsumableCapacity", "DRADeviceTaints"):
        assert gates[name].stage(36) == "beta" and gates[name].on_by_default(36), name
        assert not gates[name].on_by_default(35), name
    for name in ("DRAExtendedResource", "DRADeviceTaints", "DRAResourceClaimDeviceStatus"):
        assert gates[name].stage(37) == "GA", name
    assert gates["DRAListTypeAttributes"].stage(36) == "alpha" and gates["DRAListTypeAttributes"].stage(35) is None


def test_gate_table_names_the_upstream_dra_gates():
    """Every gate the table knows appears in the Kubernetes OpenAPI descriptions or the platform notes."""
    notes = (REFERENCE / "notes" / "platform-2026-11.md").read_text() + (REFERENCE / "notes" / "k8s-dra-api.md").read_text()
    for name in dra_gates():
        assert name in notes, name


@pytest.mark.parametrize("kubernetes", ["1.36", "1.37"])
def test_output_passes_the_136_and_137_schemas(kubernetes, fleet):
    workloads = [
        workload_doc("nim", "ai", model=nim_model(), gpu={"count": "auto"}, secrets=NIM_SECRETS),
        workload_doc("shared", "ai", gpu={"count": 1, "sharing": "TimeSlicing", "timeSlicing": {"interval": "Long"}}),
        workload_doc("mps", "ai", gpu={"count": 1, "sharing": "MPS", "mps": {"activeThreadPercentage": 50}}),
        workload_doc("mig", "ai", gpu={"mig": {"slices": [{"profile": "1g.18gb", "count": 2}]}}),
        workload_doc("part", "ai", gpu={"fabric": {"partitionSize": 4}}),
    ]
    pools = [dict(H200, nvlink={"partitions": [2, 4, 8]}),
             {"name": "mig", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}, "mig": {"layout": "all-balanced"}}]
    cluster = cluster_doc(kubernetes=kubernetes, driver="0.5.1", pools=pools, draDriver={"fabric": "partitionAttributes"})
    result = gpuc("validate", fleet(clusters=[cluster], workloads={"w.yaml": workloads}), "--output", "json")
    assert result.code == 0, result.out + result.err
    assert json.loads(result.out)["checkedObjects"]["c1"] > 10


# ------------------------------------------------------------------------------------ driver 0.5

def test_driver_05_is_a_released_line_from_the_oci_chart():
    line = parse_driver_version("0.5.1")
    assert line.versions == "0.5.x"
    chart = chart_for("0.5.1")
    assert (chart.name, chart.repository, chart.version) == ("dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts", "0.5.1")


def test_nothing_calls_driver_05_unreleased():
    paths = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "compiler").rglob("*.py")), *sorted((REPO / "compiler" / "facts" / "data").glob("*.yaml")),
             *sorted(EXAMPLES.rglob("*.yaml"))]
    for path in paths:
        text = path.read_text().lower()
        assert "unreleased" not in text and "0.5.0-dev" not in text, path


def test_list_type_attributes_need_the_kubernetes_gate(fleet):
    gates = {"featureGates": {"DRAListTypeAttributes": True}}
    render_rejected(fleet(clusters=[cluster_doc(kubernetes="1.35", driver="0.5.1", draDriver={"values": gates})]),
                    "spec.draDriver.values.featureGates.DRAListTypeAttributes",
                    "Kubernetes 1.35 does not have the DRAListTypeAttributes feature gate")
    result = gpuc("validate", fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", draDriver={"values": gates})]))
    assert result.code == 0 and "DRAListTypeAttributes" in result.err and "alpha and off by default" in result.err


def test_dynamic_mig_says_when_partitionable_devices_must_be_enabled(fleet):
    pools = [{"name": "dyn", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "mig": {"layout": "dynamic"}}]
    result = gpuc("validate", fleet(clusters=[cluster_doc(kubernetes="1.35", driver="0.5.1", pools=pools)]))
    assert result.code == 0 and "DRAPartitionableDevices" in result.err and "upgrade to 1.36" in result.err
    quiet = gpuc("validate", fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)]))
    assert quiet.code == 0 and "DRAPartitionableDevices" not in quiet.err
    render_rejected(fleet(clusters=[cluster_doc(kubernetes="1.32", driver="25.12.0", pools=pools)]),
                    "Kubernetes 1.32 does not have the DRAPartitionableDevices feature gate")


# ------------------------------------------------------------------------------ gpuCluster mode

def test_gpu_cluster_mode_installs_the_driver_through_the_gpu_operator(fleet):
    workloads = {"w.yaml": [workload_doc("w", "ai", gpu={"count": 1, "sharing": "TimeSlicing"}),
                            workload_doc("t", "ai", gpu={"count": 4, "multiNode": {"nodes": 2}})]}
    pools = [{"name": "gb", "nodes": 2, "gpu": {"model": "GB200-186GB", "count": 4}}]
    compiled = compile_single(fleet(clusters=[gpu_cluster_doc(pools=pools)], workloads=workloads))
    assert [r.name for r in compiled.releases] == ["gpu-operator", "nim-operator"]
    values = next(r for r in compiled.releases if r.name == "gpu-operator").values
    assert values == {"clusterPolicy": {"deployCR": False}, "gpuCluster": {"deployCR": True},
                      "draDriver": {"version": "v0.5.1", "featureGates": {"TimeSlicingSettings": True},
                                    "computeDomains": {"enabled": True}},
                      "hostPaths": {"driverInstallDir": "/"}, "driver": {"enabled": False}}
    assert not [a for a in compiled.gitops if "dra-driver" in a.name]
    assert objects_of(compiled, "ComputeDomain")  # the driver the operator installs serves ComputeDomains


def test_gpu_cluster_values_are_keys_of_the_gpu_operator_chart():
    reference = yaml.safe_load((GPU_OPERATOR / "values-v26.7.0.yaml").read_text())
    facts = gpu_operator()["gpuCluster"]
    for dotted in facts["values"]:
        node = reference
        for part in dotted.split("."):
            assert isinstance(node, dict) and part in node, f"{dotted} is not a value of GPU Operator v26.7.0"
            node = node[part]
    assert reference["gpuCluster"] == {"deployCR": False} and reference["clusterPolicy"] == {"deployCR": True}


def test_gpu_cluster_values_are_what_the_gpucluster_resource_takes():
    crd = yaml.safe_load((GPU_OPERATOR / "nvidia.com_gpuclusters.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    template = (GPU_OPERATOR / "v26.7.0_gpucluster.yaml").read_text()
    for key in ("version", "featureGates"):
        assert key in spec["draDriver"]["properties"] and f".Values.draDriver.{key}" in template
    assert "enabled" in spec["draDriver"]["properties"]["computeDomains"]["properties"]
    assert ".Values.hostPaths.driverInstallDir" in template and "driverInstallDir" in spec["hostPaths"]["properties"]


def test_gpu_cluster_values_follow_the_derived_gates():
    from compiler.validate.resolved import ResolvedCluster  # noqa: F401  (type of the compiled cluster below)

    values = {"resources": {"computeDomains": {"enabled": False}}, "featureGates": {"DynamicMIG": True}}

    class _Spec:  # the fields gpu_cluster_values reads
        class dra_driver:
            version = "0.5.1"
            nvidia_driver_root = "/run/nvidia/driver"

        class gpu_operator:
            version = "v26.7.0"

    class _Cluster:
        spec = _Spec
        pools = ()  # no taints: no operand tolerations
        operator_resource = True  # no staged change holds the GPUCluster back

    out = gpu_cluster_values(_Cluster, values)  # type: ignore[arg-type]
    assert out["draDriver"] == {"version": "v0.5.1", "featureGates": {"DynamicMIG": True}, "computeDomains": {"enabled": False}}
    assert out["hostPaths"] == {"driverInstallDir": "/run/nvidia/driver"}


def test_a_static_mig_layout_in_gpu_cluster_mode_names_the_line(fleet, monkeypatch):
    pools = [{"name": "mig", "nodes": 1, "gpu": {"model": "H200-141GB", "count": 8}, "mig": {"layout": "all-balanced"}}]
    root = fleet(clusters=[gpu_cluster_doc(pools=pools)])
    monkeypatch.chdir(root.parent)
    err = render_rejected(root, "spec.nodePools[0].mig.layout", "no MIG Manager", "layout: dynamic")
    assert err.startswith(f"{root.name}/clusters/c1.yaml:") and ": error: spec.nodePools[0].mig.layout:" in err


@pytest.mark.parametrize("change, fragments", [
    (lambda d: d["spec"]["gpuOperator"].update(version="v25.10.1"), ["spec.gpuOperator.version", "arrived in v26.7.0"]),
    (lambda d: d["spec"]["gpuOperator"].pop("version"), ["needs gpuOperator.version"]),
    (lambda d: d["spec"]["draDriver"].update(version="25.12.0"), ["spec.draDriver.version", "from 0.4 on"]),
    (lambda d: d["spec"]["nodePools"].append({"name": "legacy", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4},
                                              "allocation": "devicePlugin"}),
     ["spec.nodePools[1].allocation", "a GPUCluster does not run"]),
    (lambda d: d["spec"]["draDriver"].update(values={"consumableShares": "memory"}),
     ["spec.draDriver.values.consumableShares", "takes only featureGates"]),
    (lambda d: d["spec"]["draDriver"].update(namespace="dra"), ["spec.draDriver.namespace", "GPU Operator's namespace"]),
    (lambda d: d["spec"]["draDriver"].update(fabric="topologyConfig", version="0.5.1"), ["spec.draDriver.fabric", "driver fork"]),
])
def test_what_gpu_cluster_mode_cannot_do_is_refused_with_the_fix(fleet, change, fragments):
    doc = gpu_cluster_doc()
    change(doc)
    render_rejected(fleet(clusters=[doc]), *fragments)


def test_gpu_cluster_mode_passes_feature_gates_and_warns_about_what_it_does_not_install(fleet):
    doc = gpu_cluster_doc(draDriver={"values": {"featureGates": {"NVMLDeviceHealthCheck": True}},
                                     "nvidiaDriverRoot": "/opt/nvidia/driver"})
    path = fleet(clusters=[doc])
    compiled = compile_single(path)
    values = next(r for r in compiled.releases if r.name == "gpu-operator").values
    assert values["draDriver"]["featureGates"] == {"NVMLDeviceHealthCheck": True}
    result = gpuc("validate", path)
    assert result.code == 0 and "install a GPU driver under /opt/nvidia/driver" in result.err


def test_switching_to_gpu_cluster_mode_is_a_disruption_in_the_diff(fleet, tmp_path):
    repo = tmp_path / "repo"
    path = fleet(clusters=[cluster_doc(kubernetes="1.37", driver="0.5.1", pools=[dict(H200)], gpuOperator={"version": "v26.7.0"})],
                 workloads={"w.yaml": [workload_doc("w", "ai", gpu={"count": 1})]})
    subprocess.run(["cp", "-r", str(path), str(repo)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "helm mode"]):
        subprocess.run(git + args, check=True)
    cluster = yaml.safe_load((repo / "clusters" / "c1.yaml").read_text())
    cluster["spec"]["gpuOperator"]["mode"] = "gpuCluster"
    cluster["spec"]["draDriver"]["nvidiaDriverRoot"] = "/"
    (repo / "clusters" / "c1.yaml").write_text(yaml.safe_dump(cluster))
    result = gpuc("diff", repo, "--base", "HEAD", "--fail-on", "replacement")
    assert result.code == 1, result.out + result.err
    assert "gpuOperator.mode helm -> gpuCluster" in result.out and "changes owner" in result.out
    assert "dra-driver-nvidia-gpu removed" in result.out
