"""semver() selectors (minDriverVersion, minComputeCapability, or written in require.cel) on clusters whose API
server refuses the function in a new selector (before 1.34; tests/real proves it against a real server)."""

from __future__ import annotations

import pytest

from conftest import cluster_doc, gpuc, write_fleet

CLASS = {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuDeviceClass", "metadata": {"name": "new-driver.gpuc.dev"},
         "spec": {"require": {"minDriverVersion": "550.0"}}}


def _workload(require: dict) -> dict:
    return {"apiVersion": "gpuc.dev/v1alpha1", "kind": "GpuWorkload", "metadata": {"name": "w", "namespace": "team"},
            "spec": {"gpu": {"count": 1, "require": require}}}


@pytest.mark.parametrize(("kubernetes", "driver"), [("1.32", "25.12.0"), ("1.33", "25.12.0")])
def test_a_semver_selector_is_refused_where_the_api_server_refuses_it(tmp_path, kubernetes, driver):
    root = write_fleet(tmp_path / "f", [cluster_doc(kubernetes=kubernetes, driver=driver)],
                       {"c.yaml": [CLASS], "w.yaml": [_workload({"minComputeCapability": "9.0"}),
                                                     dict(_workload({"cel": ["device.attributes['gpu.nvidia.com'].driverVersion"
                                                                             ".compareTo(semver('570.0.0')) >= 0"]}),
                                                          metadata={"name": "w2", "namespace": "team"})]})
    result = gpuc("validate", root)
    assert result.code == 2
    for where in ("c.yaml:7: error: spec.require.minDriverVersion: minDriverVersion compiles to a selector calling semver()",
                  "w.yaml:10: error: spec.gpu.require.minComputeCapability", "w.yaml:22: error: spec.gpu.require.cel[0]: this selector"):
        assert where in result.err, result.err
    assert f"the API server of Kubernetes {kubernetes} (cluster c1) refuses in a new selector: it arrives in 1.34" in result.err


def test_from_1_34_a_semver_selector_compiles(tmp_path):
    root = write_fleet(tmp_path / "f", [cluster_doc(kubernetes="1.34")], {"c.yaml": [CLASS], "w.yaml": [_workload({"minDriverVersion": "550.0"})]})
    result = gpuc("validate", root)
    assert result.code == 0 and "refuses in a new selector" not in result.err, result.err
