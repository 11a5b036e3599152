"""Opaque driver configs checked against the config API of the cluster's driver line."""

from __future__ import annotations

from check_support import claim_devices, errors_after, example_cluster, find, run_checks

MIG_CONFIG = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}


def _params(c, kind: str = "ResourceClaim", name: str = "small-models", index: int = 0) -> dict:
    return claim_devices(find(c, kind, name))["config"][index]["opaque"]["parameters"]


def _mps(c) -> dict:
    return _params(c, name="batch-embeddings")["sharing"]["mpsConfig"]


def _notebooks_config(c, parameters: dict, requests: list[str] | None = None) -> None:
    entry: dict = {"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}
    if requests is not None:
        entry["requests"] = requests
    claim_devices(find(c, "ResourceClaimTemplate", "notebooks"))["config"] = [entry]


def only(errors):
    assert len(errors) == 1, [d.message for d in errors]
    return errors[0]


def test_mig_device_config_has_no_time_slicing_config():
    error = only(errors_after("prod-east", lambda c: _notebooks_config(
        c, {**MIG_CONFIG, "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})))
    assert error.message == ("ResourceClaimTemplate research/notebooks-gpu-d1eef3b6 "
                             "spec.spec.devices.config[0].opaque.parameters.sharing.timeSlicingConfig: unknown field 'timeSlicingConfig'")
    assert error.hint.startswith("MigDeviceConfig has no timeSlicingConfig")
    assert errors_after("prod-east", lambda c: _notebooks_config(c, MIG_CONFIG)) == []


def test_config_kind_must_match_the_device_type_of_the_request():
    error = only(errors_after("prod-east", lambda c: _notebooks_config(
        c, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing",
            "timeSlicingConfig": {"interval": "Short"}}}, ["mig-1g-10gb"])))
    assert error.message.endswith("config[0].requests[0]: GpuConfig applies only to gpu devices; request 'mig-1g-10gb' asks for mig "
                                  "devices (class mig.nvidia.com): the driver fails to prepare the claim")
    assert error.hint == "use MigDeviceConfig for this request"


def test_strategy_must_match_its_config_field():
    def damage(c):
        _params(c)["sharing"]["strategy"] = "MPS"

    error = only(errors_after("prod-east", damage))
    assert error.message.endswith("opaque.parameters.sharing.timeSlicingConfig: timeSlicingConfig only goes with strategy TimeSlicing")
    assert (error.file, error.path) == ("workloads/inference/small-models.yaml", "spec.gpu.timeSlicing")


def test_interval_values_and_an_explicit_interval():
    def bad(c):
        _params(c)["sharing"]["timeSlicingConfig"]["interval"] = "long"

    error = only(errors_after("prod-east", bad))
    assert error.message.endswith("timeSlicingConfig.interval: must be one of 'Default', 'Short', 'Medium', 'Long'; got 'long'")
    assert error.hint == "did you mean 'Long'?"

    def missing(c):
        _params(c)["sharing"]["timeSlicingConfig"] = {}

    assert only(errors_after("prod-east", missing)).message.endswith("sharing.timeSlicingConfig: required field 'interval' is missing")


def test_mps_thread_percentage_and_memory_limits():
    def damage(c):
        _mps(c).update(defaultActiveThreadPercentage=101, defaultPinnedDeviceMemoryLimit="512Ki")

    found = {d.message.rsplit("mpsConfig.", 1)[1]: d for d in errors_after("prod-east", damage)}
    assert set(found) == {"defaultActiveThreadPercentage: must be at most 100, got 101",
                          "defaultPinnedDeviceMemoryLimit: must be at least 1Mi, got '512Ki'"}
    assert found["defaultActiveThreadPercentage: must be at most 100, got 101"].path == "spec.gpu.mps.activeThreadPercentage"
    assert found["defaultPinnedDeviceMemoryLimit: must be at least 1Mi, got '512Ki'"].path == "spec.gpu.mps.pinnedMemoryLimit"


def test_unknown_config_kind_and_api_version():
    def kind(c):
        _params(c)["kind"] = "GPUConfig"

    error = only(errors_after("prod-east", kind))
    assert error.message.endswith("opaque.parameters.kind: driver 25.12 has no config kind 'GPUConfig'")
    assert error.hint == "config kinds of driver 25.12: GpuConfig, MigDeviceConfig, VfioDeviceConfig, ComputeDomainChannelConfig, ComputeDomainDaemonConfig"

    def api(c):
        _params(c)["apiVersion"] = "nvidia.com/v1beta1"

    assert only(errors_after("prod-east", api)).message.endswith(
        "opaque.parameters.apiVersion: the gpu.nvidia.com driver decodes apiVersion resource.nvidia.com/v1beta1, got 'nvidia.com/v1beta1'")


def test_fields_that_only_some_driver_lines_have():
    def multi_user(c):
        _mps(c)["multiUser"] = True

    error = only(errors_after("prod-east", multi_user))
    assert error.message.endswith("mpsConfig.multiUser: unknown field 'multiUser'")
    assert error.hint == "multiUser exists on driver lines 0.5, not on 25.12"

    def topology(c):
        _params(c)["fabricTopologyConfig"] = {"strategy": "Auto", "partitionSize": 4}

    error = only(errors_after("prod-east", topology))
    assert error.message.endswith("opaque.parameters.fabricTopologyConfig: unknown field 'fabricTopologyConfig'")
    assert "exists only in the driver fork fabiendupont/k8s-dra-driver-gpu" in error.hint


def test_fabric_topology_config_rules_on_the_fork_line():
    def fabric(c) -> dict:
        return _params(c, "ResourceClaimTemplate", "nccl-allreduce")["fabricTopologyConfig"]

    def manual(c):
        fabric(c)["strategy"] = "Manual"

    found = sorted(d.message.split("fabricTopologyConfig", 1)[1] for d in errors_after("staging", manual))
    assert found == [".partitionSize: strategy Manual takes partitionIds, not partitionSize",
                     ": strategy Manual needs a non-empty partitionIds"]

    def wrong_key(c):
        fabric(c)["partitionIDs"] = ["a"]

    error = only(errors_after("staging", wrong_key))
    assert error.message.endswith("fabricTopologyConfig.partitionIDs: unknown field 'partitionIDs'")
    assert error.hint.startswith("the driver's JSON key is partitionIds")

    def mps(c):
        _params(c, "ResourceClaimTemplate", "nccl-allreduce")["sharing"] = {"strategy": "MPS"}

    error = only(errors_after("staging", mps))
    assert error.message.endswith("opaque.parameters.fabricTopologyConfig: the driver rejects MPS sharing together with an active "
                                  "fabric topology (strategy must be Disabled)")


def test_a_sharing_strategy_needs_its_driver_feature_gate():
    def gate_off(c):
        c.driver_values["featureGates"]["TimeSlicingSettings"] = False

    error = only(errors_after("prod-east", gate_off))
    assert error.message.endswith("opaque.parameters.sharing.strategy: the driver refuses strategy TimeSlicing unless feature gate "
                                  "TimeSlicingSettings is on, and the chart values leave it off")


def test_an_untargeted_config_of_the_wrong_kind_is_ignored_by_the_driver():
    compiled = example_cluster("prod-east")
    _notebooks_config(compiled, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"})
    (warning,) = [d for d in run_checks(compiled) if "GpuConfig configures" in d.message]
    assert warning.severity == "warning"
    assert warning.message.endswith("GpuConfig configures gpu devices, but every request here is for mig devices: the driver ignores it")


def _findings_after(damage) -> list:
    c = example_cluster("prod-east")
    damage(c)
    return [d for d in run_checks(c) if "opaque" in d.message or "config" in d.message]


def test_null_is_no_value_as_the_driver_decodes_it():
    """Go's decoder leaves a null field unset: the real webhook admits `sharing: null` and the plugin fills the
    defaults (tests/real/test_real_dra_driver.py); gpuc neither refuses nor warns."""
    def null_sharing(c):
        _params(c)["sharing"] = None

    def null_interval_config(c):
        _params(c)["sharing"]["timeSlicingConfig"] = None

    for damage in (null_sharing, null_interval_config):
        assert errors_after("prod-east", damage) == []


def test_what_the_driver_takes_and_ignores_is_a_warning():
    def mps_on_time_sliced_mig(c):
        _notebooks_config(c, {**MIG_CONFIG, "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}}})

    def gpu_config_under_the_channel_driver(c):
        claim_devices(find(c, "ResourceClaimTemplate", "notebooks"))["config"] = [
            {"opaque": {"driver": "compute-domain.nvidia.com", "parameters": MIG_CONFIG}}]

    for damage, text in ((mps_on_time_sliced_mig, "the driver ignores it on a time-sliced MIG device"),
                         (gpu_config_under_the_channel_driver, "the compute-domain.nvidia.com driver ignores it")):
        found = [d for d in _findings_after(damage) if text in d.message]
        assert [d.severity for d in found] == ["warning"], damage.__name__
        assert errors_after("prod-east", damage) == []


def test_a_vfio_config_is_refused_only_where_the_webhook_runs():
    """The driver's admission webhook (off by default) refuses every VfioDeviceConfig; without it the kubelet plugin
    applies one, and a KubeVirt VM needs it (/dev/vfio/vfio): gpuc writes one for passthrough workloads, so the
    config itself is no finding unless the cluster's chart values turn the webhook on."""
    def vfio(c):
        _notebooks_config(c, {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig"})

    def vfio_with_webhook(c):
        vfio(c)
        c.driver_values["webhook"] = {"enabled": True}

    def refused(damage):
        return [d for d in _findings_after(damage) if "admission webhook knows no VfioDeviceConfig" in d.message]

    assert refused(vfio) == []
    (error,) = refused(vfio_with_webhook)
    assert error.severity == "error" and error.message.endswith("refuses the claim when it is enabled, and draDriver.values turn it on")
    assert error.hint.startswith("turn the webhook off (webhook.enabled: false)")
