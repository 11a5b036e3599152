"""Any damage to any emitted object yields findings, never a traceback (the checkers read untrusted shapes)."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import compiler.check.cel_rules  # noqa: F401  (cel-python raises the recursion limit on import; do it before hypothesis runs)

from check_support import damage, damageable, example_cluster, json_values, manifest_paths, run_checks

# What make_object always sets and the object graph itself indexes (KubeObject.name, .namespace, .kind).
IDENTITY = (("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace"))
CLUSTERS = {name: example_cluster(name) for name in ("prod-east", "staging")}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), pick=st.integers(0, 10**6), where=st.integers(0, 10**6),
       value=json_values(), delete=st.booleans())
# found by a CI run: a DeviceClass's spec set to null crashed the budgets' class reading (compiler/lower/budget_limits.py)
@example(cluster="prod-east", pick=24765, where=24762, value=None, delete=False)
def test_damaged_objects_are_reported_not_crashed_on(cluster, pick, where, value, delete):
    compiled = damageable(CLUSTERS[cluster])
    objects = compiled.objects + compiled.gitops
    obj = objects[pick % len(objects)]
    paths = [p for p in manifest_paths(obj.manifest) if p and p not in IDENTITY]
    damage(obj.manifest, paths[where % len(paths)], value, delete)
    findings = run_checks(compiled)
    assert all(d.file and d.message for d in findings)
