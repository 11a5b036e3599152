"""Whether a toleration covers a pool's taint, as the scheduler decides it (k8s.io/api core/v1 toleration.go
`ToleratesTaint`), and what gpuc renders for a pool whose taint a chart's default tolerations do not cover.

A chart default that tolerates `nvidia.com/gpu` with effect NoSchedule does not tolerate the same key with effect
NoExecute: taken as covered, the taint gets no toleration of its own and the kubelet plugin, the GPU Operator's
operands and their Node Feature Discovery worker never run on (or are evicted from) the pool.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from compiler.lower.tolerations import tolerated

from conftest import NIM_SECRETS, cluster_doc, gpuc, nim_model, workload_doc

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def tolerates(toleration: dict[str, Any], taint: tuple[str, str, str]) -> bool:
    """The scheduler's rule, written out independently of gpuc's: effect, then key, then operator."""
    key, value, effect = taint
    if toleration.get("effect") and toleration["effect"] != effect:
        return False
    if toleration.get("key") and toleration["key"] != key:
        return False
    if toleration.get("operator", "") in ("", "Equal"):
        return toleration.get("value", "") == value
    return toleration["operator"] == "Exists"


def effect_cases() -> list:
    """Every toleration effect (empty: all of them) against every taint effect, for Equal and Exists."""
    cases = []
    for taint_effect in EFFECTS:
        for effect in ("", *EFFECTS):
            covered = effect in ("", taint_effect)
            for operator in ("Equal", "Exists"):
                toleration = {"key": "nvidia.com/gpu", "operator": operator, "value": "present" if operator == "Equal" else ""}
                if effect:
                    toleration["effect"] = effect
                cases.append(pytest.param(toleration, ("nvidia.com/gpu", "present", taint_effect), covered,
                                          id=f"{operator}-{effect or 'any'}-vs-{taint_effect}"))
    return cases


@pytest.mark.parametrize("toleration, taint, covered", [
    *effect_cases(),
    # Exists with an empty key tolerates every taint of its effect, whatever its key and value
    pytest.param({"operator": "Exists"}, ("dedicated", "inference", "NoExecute"), True, id="exists-no-key-no-effect"),
    pytest.param({"key": "", "operator": "Exists", "effect": "NoExecute"}, ("dedicated", "", "NoExecute"), True,
                 id="exists-empty-key"),
    pytest.param({"key": "", "operator": "Exists", "effect": ""}, ("dedicated", "", "PreferNoSchedule"), True,
                 id="exists-empty-key-empty-effect"),
    pytest.param({"key": "dedicated", "operator": "Equal", "value": "inference", "effect": ""}, ("dedicated", "inference", "NoExecute"),
                 True, id="equal-empty-effect"),
    pytest.param({"operator": "Exists", "effect": "NoSchedule"}, ("dedicated", "inference", "NoExecute"), False,
                 id="exists-no-key-other-effect"),
    # Exists ignores the value; Equal compares it, an empty value with an empty one only
    pytest.param({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, ("dedicated", "inference", "NoExecute"), True,
                 id="exists-any-value"),
    pytest.param({"key": "dedicated", "operator": "Exists", "value": "other", "effect": "NoExecute"},
                 ("dedicated", "inference", "NoExecute"), True, id="exists-ignores-a-value"),
    pytest.param({"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoExecute"},
                 ("dedicated", "inference", "NoExecute"), False, id="equal-value-mismatch"),
    pytest.param({"key": "dedicated", "operator": "Equal", "value": "", "effect": "NoExecute"},
                 ("dedicated", "inference", "NoExecute"), False, id="equal-empty-value-vs-value"),
    pytest.param({"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"},
                 ("dedicated", "", "NoExecute"), False, id="equal-value-vs-empty-value"),
    pytest.param({"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
                 ("node-role.kubernetes.io/control-plane", "", "NoSchedule"), True, id="equal-empty-values"),
    pytest.param({"key": "dedicated", "value": "inference", "effect": "NoExecute"}, ("dedicated", "inference", "NoExecute"), True,
                 id="no-operator-is-equal"),
    pytest.param({"key": "dedicated", "value": "training"}, ("dedicated", "inference", "NoExecute"), False,
                 id="no-operator-compares-the-value"),
    # the key
    pytest.param({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, ("dedicated", "", "NoExecute"), False,
                 id="exists-other-key"),
    pytest.param({"key": "nvidia.com/gpu", "operator": "Equal", "value": "x", "effect": "NoExecute"}, ("dedicated", "x", "NoExecute"),
                 False, id="equal-other-key"),
])
def test_tolerated_matches_the_schedulers_rule(toleration, taint, covered):
    assert tolerates(toleration, taint) is covered  # the table itself agrees with the scheduler's rule
    assert tolerated(toleration, taint) is covered


NO_EXECUTE = {"key": "nvidia.com/gpu", "effect": "NoExecute"}
WANT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}
# the charts' own defaults, which tolerate the key with effect NoSchedule only
DEFAULT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_a_no_execute_pool_beside_no_schedule_defaults_gets_its_own_toleration(fleet, tmp_path):
    """A pool tainted nvidia.com/gpu:NoExecute, where every chart gpuc configures tolerates that key for NoSchedule
    only: gpuc adds the NoExecute toleration to each (defaults written back, since setting the value replaces
    them), and the NIM and its caching Job, which tolerate nothing by themselves, get it too (README, Tainted GPU
    nodes). Rendered through the CLI and read back from the tree."""
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [NO_EXECUTE]}]
    chat = workload_doc("chat", "serving", model=nim_model("8B"), secrets=NIM_SECRETS, gpu={"count": 1})
    root = fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)], workloads={"w.yaml": [chat]})
    out = tmp_path / "out"
    result = gpuc("render", root, "-o", out)
    assert result.code == 0, result.err
    tree = out / "c1"
    driver = yaml.safe_load((tree / "values" / "dra-driver-nvidia-gpu.yaml").read_text())
    operator = yaml.safe_load((tree / "values" / "gpu-operator.yaml").read_text())
    nfd = operator["node-feature-discovery"]["worker"]["tolerations"]
    (cache,) = [yaml.safe_load(p.read_text()) for p in tree.glob("*-nimcache-*.yaml")]
    (service,) = [yaml.safe_load(p.read_text()) for p in tree.glob("*-nimservice-*.yaml")]
    assert driver["kubeletPlugin"]["tolerations"] == [DEFAULT, WANT]
    assert operator["daemonsets"]["tolerations"] == [DEFAULT, WANT]
    assert nfd[-2:] == [DEFAULT, WANT]
    assert cache["spec"]["tolerations"] == [WANT] and service["spec"]["tolerations"] == [WANT]
    for where in (driver["kubeletPlugin"]["tolerations"], operator["daemonsets"]["tolerations"], nfd, cache["spec"]["tolerations"],
                  service["spec"]["tolerations"]):
        assert any(tolerates(t, ("nvidia.com/gpu", "", "NoExecute")) for t in where), where


def test_a_no_schedule_pool_keeps_the_charts_defaults(fleet, tmp_path):
    """The control: the same pool tainted NoSchedule is covered by the defaults, so no chart value is set."""
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}, "taints": [{**NO_EXECUTE, "effect": "NoSchedule"}]}]
    root = fleet(clusters=[cluster_doc(kubernetes="1.36", driver="0.5.1", pools=pools)])
    out = tmp_path / "out"
    assert gpuc("render", root, "-o", out).code == 0
    driver = yaml.safe_load((out / "c1" / "values" / "dra-driver-nvidia-gpu.yaml").read_text())
    operator = yaml.safe_load((out / "c1" / "values" / "gpu-operator.yaml").read_text())
    assert "tolerations" not in (driver.get("kubeletPlugin") or {})
    assert "daemonsets" not in operator and "node-feature-discovery" not in operator
