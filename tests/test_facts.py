"""The data tables in compiler/facts/data agree with the upstream files in ../shared/reference."""

from __future__ import annotations

import re

import pytest
import yaml

from compiler.facts import catalog, load_table
from compiler.facts.driver import builtin_device_classes, chart_keys, driver_lines, dynamic_mig, mps_control_daemon, parse_driver_version
from compiler.facts.mig import fit_mix, fit_on_model
from compiler.facts.platform import gpu_operator
from harness.components import pins

from conftest import REFERENCE

CHART_DIRS = {"25.3": "v25.3.2", "25.8": "v25.8.1", "25.12": "v25.12.0", "0.4": "v0.4.1", "0.5": "main-0.5.0-dev"}
DRA = REFERENCE / "nvidia-dra-driver-gpu"


def _reference_leaves(values: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            out.update(_reference_leaves(value, path))
        else:
            out[path] = value
    return out


@pytest.mark.parametrize("line_id", sorted(CHART_DIRS))
def test_chart_keys_match_reference_values(line_id):
    reference = yaml.safe_load((DRA / CHART_DIRS[line_id] / "values.yaml").read_text())
    leaves = _reference_leaves(reference)
    ours = chart_keys(driver_lines()[line_id])
    maps = [k for k, v in ours.items() if v.kind == "map"]

    def covered(path: str) -> bool:
        return path in ours or any(path.startswith(m + ".") for m in maps)

    missing = sorted(p for p in leaves if not covered(p))
    assert not missing, f"chart keys of {line_id} missing from dra_chart_values.yaml: {missing}"
    extra = sorted(k for k in ours if k not in leaves and not any(p.startswith(k + ".") for p in leaves))
    assert not extra, f"dra_chart_values.yaml lists keys {line_id} does not have: {extra}"
    for path, key in ours.items():
        if path in leaves:
            value = leaves[path]
            expected = "list" if isinstance(value, list) else "map" if isinstance(value, dict) else None
            if expected:
                assert key.kind == expected, f"{path}: reference default is a {expected}"


@pytest.mark.parametrize("line_id", sorted(CHART_DIRS))
def test_chart_name_and_version_match_reference(line_id):
    chart = yaml.safe_load((DRA / CHART_DIRS[line_id] / "Chart.yaml").read_text())
    line = driver_lines()[line_id]
    assert chart["name"] == line.chart_name
    assert parse_driver_version(chart["version"]).id == line_id


def test_builtin_device_classes_match_chart_templates():
    names = set()
    for template in DRA.glob("*/templates/deviceclass-*.yaml"):
        match = re.search(r"^\s*name:\s*(\S+)", template.read_text(), re.M)
        names.add(match.group(1))
    assert names == set(builtin_device_classes())


def _filters(entry: dict) -> set[str]:
    raw = entry.get("device-filter", [])
    return {f.upper() for f in ([raw] if isinstance(raw, str) else raw)}  # A30's entry uses a bare string


def _default_mig_configs() -> dict:
    cm = yaml.safe_load((REFERENCE / "gpu-operator" / "default-mig-parted-config.yaml").read_text())
    return yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]


def test_mig_max_instances_match_gpu_operator_defaults():
    configs = _default_mig_configs()
    checked = 0
    for model in catalog.gpu_models().values():
        if model.mig is None:
            continue
        ids = {f"{i}10DE".upper() for i in model.pci_device_ids}
        for profile in model.mig.profiles.values():
            entries = configs.get("all-" + profile.name.replace("+", "."), [])
            for entry in entries:
                filters = _filters(entry)
                if filters and not filters & ids:
                    continue
                assert entry["mig-devices"][profile.name] == profile.max_instances, (model.key, profile.name)
                checked += 1
                break
    assert checked >= 30


def test_all_balanced_matches_gpu_operator_defaults():
    balanced = _default_mig_configs()["all-balanced"]
    for model in catalog.gpu_models().values():
        if model.mig is None:
            continue
        ids = {f"{i}10DE".upper() for i in model.pci_device_ids}
        entry = next(e for e in balanced if _filters(e) & ids)
        assert entry["mig-devices"] == model.mig.balanced, model.key
        assert fit_on_model(model, model.mig.balanced).fits, model.key


def test_mig_geometry_accepts_real_mixes_and_rejects_impossible_ones():
    a100 = catalog.gpu_models()["A100-80GB"].mig
    assert fit_mix(a100, {"4g.40gb": 1, "3g.40gb": 1}).fits
    assert fit_mix(a100, {"3g.40gb": 1, "2g.20gb": 2}).fits  # the 3g must sit at offset 4
    placements = dict((p, s) for p, s in fit_mix(a100, {"3g.40gb": 1, "2g.20gb": 2}).placements if p == "3g.40gb")
    assert placements["3g.40gb"] == 4
    assert fit_mix(a100, {"1g.10gb": 7}).fits
    assert not fit_mix(a100, {"4g.40gb": 2}).fits
    assert "compute slices" in fit_mix(a100, {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}).reason
    assert "at most 4" in fit_mix(a100, {"1g.20gb": 5}).reason
    # memory slices, not compute, are what run out here: 2 x 3g (8 memory slices) + a 1g
    assert not fit_mix(a100, {"3g.40gb": 2, "1g.10gb": 1}).fits


def test_driver_versions_parse_to_lines():
    assert parse_driver_version("25.12.0").id == "25.12"
    assert parse_driver_version("v25.3.2").id == "25.3"
    assert parse_driver_version("0.5.0-dev").id == "0.5"
    with pytest.raises(ValueError, match="gpuc supports the lines 25.3.x, 25.8.x, 25.12.x, 0.4.x, 0.5.x"):
        parse_driver_version("26.1.0")
    with pytest.raises(ValueError, match="not a DRA driver version"):
        parse_driver_version("latest")


# -- facts read from the DRA driver's sources (../shared/upstream/src at v25.12.0 and main 9593204, the 0.5 line) ----

SOURCES = REFERENCE.parent / "upstream" / "src"
V2512, MAIN = SOURCES / "dra-driver-nvidia-gpu-v25.12.0", SOURCES / "dra-driver-nvidia-gpu-main-9593204"


def _source(root, path: str) -> str:
    assert root.is_dir(), f"the driver's sources are not at {root}: these facts are checked against them"
    return (root / path).read_text()


def test_the_mps_daemon_chroots_into_the_driver_root_up_to_25_12():
    """The 25.x daemon needs `sh` in the driver root; main (and 0.4.0, PR #889) runs without one."""
    facts = mps_control_daemon()
    template = "templates/mps-control-daemon.tmpl.yaml"
    assert "command: [chroot, /driver-root, sh, -c]" in _source(V2512, template)
    fixed = _source(MAIN, template)
    assert "command: [sh, -c]" in fixed and "if [ -x /driver-root/bin/sh ] || [ -x /driver-root/usr/bin/sh ]; then" in fixed
    assert facts.chroot_shell_until == "25.12" and not driver_lines()["0.4"].at_most(facts.chroot_shell_until)
    assert "/home/kubernetes/bin/nvidia" in facts.shellless and "/home/kubernetes/bin/nvidia" not in facts.shell_roots


def test_the_dcgm_operands_select_the_deploy_labels_gpuc_turns_off_on_passthrough_nodes():
    """GPU Operator v26.7.0: each DCGM DaemonSet selects its label "true", and the labelling pass keeps a value a node
    already has (addGPUStateLabels, updateGPUClusterStateLabels): "false" keeps the operand off."""
    operator = SOURCES / "gpu-operator-v26.7.0"
    off = gpu_operator()["passthroughOperandsOff"]
    selectors = {"assets/state-dcgm-exporter/0800_daemonset.yaml": off["clusterPolicy"][0],
                 "assets/state-dcgm/0400_dcgm.yml": off["clusterPolicy"][1],
                 "manifests/state-dcgm-exporter/0700_daemonset.yaml": off["gpuCluster"][0],
                 "manifests/state-dcgm/0500_daemonset.yaml": off["gpuCluster"][1]}
    for path, label in selectors.items():
        assert re.search(rf"nodeSelector:\n\s+{re.escape(label)}: \"true\"", _source(operator, path)), path
    assert "if v, ok := labels[key]; !ok || v == \"\" {" in _source(operator, "controllers/state_manager.go")
    assert "if v, ok := labels[key]; !ok || v == \"\" {" in _source(operator, "controllers/nodelabeling_controller.go")


def test_driver_install_dir_is_a_value_of_every_gpu_operator_chart_from_its_first_release():
    """facts operators.yaml driverInstallDir: the chart value, and the ClusterPolicy field it fills, from v24.6.0 on."""
    fact = gpu_operator()["driverInstallDir"]
    charts = sorted((c for c in (REFERENCE.parent / "upstream" / "charts").glob("gpu-operator-v*")),
                    key=lambda c: tuple(int(x) for x in c.name.removeprefix("gpu-operator-v").split(".")))
    assert charts, "no GPU Operator charts under ../shared/upstream/charts"
    for chart in charts:
        version = chart.name.removeprefix("gpu-operator-")
        values = yaml.safe_load((chart / "values.yaml").read_text())
        has = "driverInstallDir" in (values.get("hostPaths") or {})
        template = (chart / "templates" / "clusterpolicy.yaml").read_text()
        assert has == (tuple(map(int, version[1:].split("."))) >= tuple(map(int, fact["since"][1:].split(".")))), version
        assert has == (".Values.hostPaths.driverInstallDir" in template), version
    validator = _source(SOURCES / "gpu-operator-v26.7.0", "cmd/nvidia-validator/main.go")
    assert "return getDriverInfo(false, hostRootFlag, driverInstallDirFlag, driverInstallDirCtrPathFlag), nil" in validator


def test_which_gpus_the_dynamic_mig_gate_partitions_is_the_driver_s_own_rule():
    """The mock NVML of issue 45 supports no MIG, so only the sources can show this: 25.12 partitions every GPU;
    main (and 0.4.1) partitions MIG-capable GPUs, Hopper and newer whatever their MIG mode, older ones only in MIG
    mode and then without the full GPU; and the plugin turns MIG mode off on Hopper+ GPUs without MIG devices."""
    facts = dynamic_mig()
    old = _source(V2512, "cmd/gpu-kubelet-plugin/nvlib.go")
    assert "isDynamicMIGCapable" not in old and "// Announce the full physical GPU." in old
    new = _source(MAIN, "cmd/gpu-kubelet-plugin/nvlib.go")
    assert "return arch >= nvml.DEVICE_ARCH_HOPPER" in new
    assert "if !gpuInfo.migEnabled || supportsMIGModeToggle(d) {\n\t\t\t\t\tthisGPUAllocatable[gpuInfo.CanonicalName()] = parentdev" in new
    assert "if !supportsMIGModeToggle(nvmldev) {" in new and "nvmldev.SetMigMode(nvml.DEVICE_MIG_DISABLE)" in new
    known = set(catalog.architectures())
    assert facts.mig_mode_toggle == {"Hopper", "Blackwell"} and facts.mig_mode_toggle <= known
    assert {m.architecture for m in catalog.gpu_models().values() if m.mig} - facts.mig_mode_toggle == {"Ampere"}
    line = driver_lines()
    assert facts.partitions(line["25.12"], "Ampere", mig_mode_on=False) == (True, True)
    assert facts.partitions(line["0.4"], "Hopper", mig_mode_on=False) == (True, True)
    assert facts.partitions(line["0.5"], "Ampere", mig_mode_on=True) == (True, False)
    assert facts.partitions(line["0.5"], "Ampere", mig_mode_on=False) == (False, True)



def test_the_argo_cd_the_tests_sync_with_is_the_one_the_facts_name_and_within_the_supported_range():
    """The supported range says which release the GitOps tests proved the tree on: moving the harness's Argo CD
    (versions.env) without the fact, or below the minimum the output's features need, fails here."""
    versions = load_table("argocd")["versions"]
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.lstrip("v").split("."))
    assert pins()["ARGOCD_VERSION"] == versions["tested"]
    assert key(versions["minimum"]) <= key(versions["tested"])
