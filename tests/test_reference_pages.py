"""The reference pages generated from gpuc itself: the intent format from the pydantic models, the platform matrix
from compiling every combination. The checked-in pages must be what gpuc generates now."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO, gpuc


def _page(name: str) -> str:
    return (REPO / "docs" / "reference" / name).read_text()


def test_the_intent_format_page_is_what_the_models_generate():
    from compiler.emit.reference import REGENERATE

    generated = gpuc("schema", "--markdown")
    assert generated.code == 0, generated.err
    assert _page("intent-format.md") == generated.out, f"docs/reference/intent-format.md is stale: run `{REGENERATE}`"


def test_the_intent_format_page_lists_every_field_of_every_kind():
    """Every property of every definition `gpuc schema` gives appears as a row, under the path users write."""
    import json

    schema = json.loads(gpuc("schema").out)
    page = _page("intent-format.md")
    for kind in ("Cluster", "GpuWorkload", "GpuDeviceClass"):
        assert f"\n## {kind}\n" in page
    for path in ("spec.nodePools[].host.numaNodes", "spec.charts.releases.<key>.directory", "spec.gpu.nics",
                 "spec.gpu.alternatives[].require.minMemory", "spec.nodePools[].mig.layout[].profile", "spec.mig.slices[].profile"):
        assert f"| `{path}` |" in page, path
    names = {field for d in schema["$defs"].values() for field in (d.get("properties") or {})}
    assert all(f".{name}` |" in page or f"| `{name}` |" in page for name in names)
    assert "| `spec.gpu.sharing` | string | `Exclusive` | `Exclusive`, `Shared`, `TimeSlicing`, `MPS`, `Fractional` |" in page
    assert "| `spec.replicas` | integer | `1` | 0 to 10000 |" in page


def test_every_kind_has_an_example_that_its_model_accepts():
    from compiler.emit.reference import EXAMPLES, check_examples, intent_reference
    from compiler.emit.schema import input_schema
    from compiler.validate.intents import KINDS

    assert set(EXAMPLES) == set(KINDS)
    check_examples()
    broken = dict(EXAMPLES, GpuWorkload=EXAMPLES["GpuWorkload"].replace("replicas: 2", "replicas: many"))
    with pytest.raises(ValueError, match="replicas"):
        check_examples(broken)
    with pytest.raises(ValueError, match="no example for kind GpuDeviceClass"):
        intent_reference(input_schema(), {k: v for k, v in EXAMPLES.items() if k != "GpuDeviceClass"})
    assert all(yaml.safe_load(text)["kind"] == kind for kind, text in EXAMPLES.items())


def test_the_platform_matrix_page_is_what_compiling_gives():
    from compiler.emit.platform_matrix import REGENERATE

    generated = gpuc("catalog", "--matrix")
    assert generated.code == 0, generated.err
    assert _page("platform-matrix.md") == generated.out, f"docs/reference/platform-matrix.md is stale: run `{REGENERATE}`"


def test_the_platform_matrix_says_what_gpuc_refuses_and_why():
    """Known pairings (the facts' own): the 25.3/25.8 charts on 1.32/1.33 are refused, gpuCluster mode needs GPU
    Operator v26.7.0, each NIM Operator line reads one resource.k8s.io version; a reason follows each table."""
    from compiler.emit.platform_matrix import Case
    from compiler.matrix import judge

    cases = [Case("driver", "1.33", "25.8.1", "v26.7.2", "helm"), Case("driver", "1.34", "25.8.1", "v26.7.2", "helm"),
             Case("operator", "1.36", "0.5.1", "v26.3.3", "gpuCluster"), Case("operator", "1.36", "0.5.1", "v26.7.0", "gpuCluster"),
             Case("nim", "1.34", "25.12.0", "v26.7.2", "helm", "3.0.0")]
    verdicts = judge(cases)
    assert list(verdicts) == cases
    assert verdicts[cases[0]].errors and "25.8.x driver chart" in verdicts[cases[0]].errors[0]
    assert verdicts[cases[1]].errors == () and verdicts[cases[1]].warnings == ()
    assert verdicts[cases[2]].errors == ("spec.gpuOperator.version: GPU Operator <its version> cannot install the DRA driver: "
                                         "the GPUCluster resource arrived in v26.7.0",)
    assert verdicts[cases[3]].errors == ()
    assert "reads claims as resource.k8s.io/v1beta2" in verdicts[cases[4]].errors[0]
    page = _page("platform-matrix.md")
    assert "| 1.33 | **refused** (4) | **refused** (5) | warns (6) |" in page


def test_the_new_cluster_page_is_what_gpuc_generates():
    from compiler.emit.new_cluster import REGENERATE

    generated = gpuc("catalog", "--new-cluster")
    assert generated.code == 0, generated.err
    page = (REPO / "docs" / "how-to" / "new-cluster.md").read_text()
    assert page == generated.out, f"docs/how-to/new-cluster.md is stale: run `{REGENERATE}`"


def test_init_the_new_cluster_page_and_the_readme_take_the_same_versions(tmp_path):
    """Issue 46: README and most how-tos used 25.12.0, `gpuc init` and the tutorial 0.5.1, and no page said which a new cluster
    takes. The choice is the newest line at its newest release (by release order, not by number), the newest GPU Operator
    release in mode helm; `gpuc init`, the page's snippet and the README's cluster all say it."""
    from compiler.facts.driver import driver_lines
    from compiler.facts.new_cluster import new_cluster
    from compiler.facts.platform import gpu_operator

    choice = new_cluster()
    newest = max(driver_lines().values(), key=lambda line: line.order)
    assert (choice.line, choice.driver, choice.operator, choice.mode) == (newest, newest.releases[-1], gpu_operator()["releases"][-1], "helm")
    assert choice.driver == "0.5.1", "0.5 follows 25.12 in release order"
    assert gpuc("init", tmp_path / "fleet", "--cluster", "c1").code == 0
    spec = yaml.safe_load((tmp_path / "fleet" / "clusters" / "c1.yaml").read_text())["spec"]
    wanted = {"kubernetesVersion": choice.kubernetes, "draDriver": {"version": choice.driver, "nvidiaDriverRoot": choice.driver_root},
              "gpuOperator": {"mode": choice.mode, "version": choice.operator}}
    assert {k: spec[k] for k in wanted} == wanted
    page = (REPO / "docs" / "how-to" / "new-cluster.md").read_text()
    assert yaml.safe_load(page.split("```yaml\n")[1].split("```")[0])["spec"] == wanted
    readme = (REPO / "README.md").read_text()
    cluster = next(d for block in readme.split("```yaml\n")[1:] for d in [yaml.safe_load(block.split("```")[0])] if d.get("kind") == "Cluster")
    assert cluster["spec"]["draDriver"]["version"] == choice.driver and cluster["spec"]["gpuOperator"]["version"] == choice.operator
    assert "how-to/new-cluster.md" in readme


def test_the_commands_page_is_what_the_parser_generates():
    """docs/reference/commands.md was hand-written and missed flags (issue 46): it is now the CLI's parser, every option."""
    from compiler.cli import build_parser
    from compiler.emit.commands import REGENERATE, commands_page

    parser = build_parser()
    page = _page("commands.md")
    assert page == commands_page(parser), f"docs/reference/commands.md is stale: run `{REGENERATE}`"
    every = {o for action in parser._subparsers._group_actions for sub in action.choices.values()  # type: ignore[union-attr]
             for a in sub._actions for o in a.option_strings if o not in ("-h", "--help")}
    assert {"--fail-on", "--allow-infeasible", "--no-cache", "--repo-url", "--ci", "--new-cluster", "--previous"} <= every
    assert all(f"`{option}`" in page for option in every)
