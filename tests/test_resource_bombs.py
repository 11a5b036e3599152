"""Small inputs that ask for unbounded memory or depth: refused with the limit and the field, never a MemoryError
or a RecursionError."""

from __future__ import annotations

import contextlib
import resource

import pytest

from compiler.diagnostics import InputError
from compiler.load.yaml_source import parse_documents

from conftest import cluster_doc, gpuc, workload_doc


def merge_bomb(levels: int = 40) -> str:
    """Each level merges the one before it twice: a few hundred bytes whose paths double per level."""
    lines = ["a0: &a0 {x: 1, y: 2}"]
    lines += [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def memory_cap():
    """At most 1 GiB more address space inside the block (an exponential line map would take it all); running out
    is a test failure, reported once the limit is lifted again."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 30), hard))
    exhausted = False
    try:
        yield
    except MemoryError:
        exhausted = True
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    if exhausted:
        pytest.fail("ran out of memory")


def test_a_merge_key_bomb_does_not_exhaust_the_line_map():
    text = merge_bomb()
    assert len(text) < 1200
    doc = parse_documents(text, "bomb.yaml")[0]
    with memory_cap():
        lines = (doc.line_of(("a39", "x")), doc.line_of(("a2",)))
    assert lines == (40, 3)  # the nearest mapped ancestor's line


def test_a_merge_key_bomb_in_an_intent_is_a_finding_with_a_line(fleet):
    body = merge_bomb(30).replace("\n", "\n  ")
    text = ("apiVersion: gpuc.dev/v1alpha1\nkind: GpuWorkload\nmetadata: {name: w, namespace: t}\nspec:\n  gpu: {count: 1}\n"
            f"  bomb:\n  {body}")
    path = fleet(workloads={"w.yaml": text})
    with memory_cap():
        result = gpuc("validate", path)
    assert result.code == 2 and "w.yaml:6: error: spec.bomb: unknown field" in result.err


def test_a_pool_of_a_hundred_thousand_nodes_is_refused_with_the_limit_and_the_field(fleet):
    pools = [{"name": "h100", "nodes": 100_000, "gpu": {"model": "H100-80GB", "count": 8}}]
    result = gpuc("validate", fleet(clusters=[cluster_doc(pools=pools)], workloads={"w.yaml": [workload_doc(gpu={"count": 1})]}))
    assert result.code == 2
    assert "spec.nodePools[0].nodes: the cluster's pools publish 800,000 devices; gpuc plans up to 524,288 per cluster" in result.err


def test_the_largest_cluster_gpuc_plans_is_accepted_by_validation():
    from compiler.diagnostics import Findings
    from compiler.load.yaml_source import SourceDoc
    from compiler.validate.documents import Intent
    from compiler.validate.intents import Cluster
    from compiler.validate.resolution import MAX_DEVICES, resolve_cluster

    def resolve(nodes: int):
        raw = cluster_doc(pools=[{"name": "h100", "nodes": nodes, "gpu": {"model": "H100-80GB", "count": 8}}])
        findings = Findings()
        return resolve_cluster(Intent(Cluster.model_validate(raw), SourceDoc("c.yaml", 0, raw)), findings), findings

    assert resolve(MAX_DEVICES // 8)[0] is not None
    cluster, findings = resolve(MAX_DEVICES // 8 + 1)
    assert cluster is None and "gpuc plans up to" in findings.errors[0].message


@pytest.mark.parametrize("depth,message", [(100, "nested more than 64 levels"), (600, "nested more than 64 levels"),
                                           (3000, "nesting depth")])
def test_the_nesting_limit_holds_for_large_state_exports(tmp_path, depth, message):
    from compiler.load.state import TRACKED_BYTES, read_state

    deep = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: deep}\n  data:\n"
            + "".join(" " * (i + 3) + f"k{i}:\n" for i in range(1, depth)) + " " * (depth + 3) + "v: 1\n")
    path = tmp_path / "state.yaml"
    path.write_text(deep + "#" * TRACKED_BYTES)  # large: read by the fast loaders
    with pytest.raises(InputError) as err:
        read_state([str(path)])
    assert message in err.value.diagnostics[0].message and err.value.diagnostics[0].line > 60
