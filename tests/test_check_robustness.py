"""Any damage to any emitted object yields findings, never a traceback (the checkers read untrusted shapes)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiler.check.cel_rules  # noqa: F401  (cel-python raises the recursion limit on import; do it before hypothesis runs)
from check_support import damageable, example_cluster, run_checks

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, path + (i,))


# What make_object always sets and the object graph itself indexes (KubeObject.name, .namespace, .kind).
IDENTITY = (("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace"))
CLUSTERS = {name: example_cluster(name) for name in ("prod-east", "staging")}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), pick=st.integers(0, 10**6), where=st.integers(0, 10**6),
       value=json_values, delete=st.booleans())
def test_damaged_objects_are_reported_not_crashed_on(cluster, pick, where, value, delete):
    compiled = damageable(CLUSTERS[cluster])
    objects = compiled.objects + compiled.gitops
    obj = objects[pick % len(objects)]
    paths = [p for p in _paths(obj.manifest) if p and p not in IDENTITY]
    path = paths[where % len(paths)]
    parent = obj.manifest
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    findings = run_checks(compiled)
    assert all(d.file and d.message for d in findings)
