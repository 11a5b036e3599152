"""The shipped example fleet passes every check, through the CLI as users run it."""

from __future__ import annotations

import json

from check_support import crd_args, example_cluster, run_checks
from conftest import EXAMPLES, gpuc


def test_every_example_cluster_passes_every_check():
    for name in ("prod-east", "staging", "lab", "west"):
        findings = run_checks(example_cluster(name))
        assert [d for d in findings if d.severity == "error"] == [], name
        # Argo CD Applications are checked against gpuc's own schema of them; the operators' kinds against the CRDs
        assert [d for d in findings if "no CRD for" in d.message] == [], name


def test_validate_with_the_operators_crds_prints_no_warning():
    result = gpuc("validate", EXAMPLES, *crd_args(), "--output", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["checkedObjects"] == {"lab": 9, "prod-east": 27, "staging": 9, "west": 9}
    assert data["warnings"] == []


def test_without_crds_every_custom_resource_kind_is_reported_once_per_cluster(tmp_path, monkeypatch):
    """The example acknowledges its unchecked kinds; without that, one folded warning per cluster names them."""
    import shutil

    fleet = shutil.copytree(EXAMPLES, tmp_path / "fleet")
    for path in (fleet / "clusters").glob("*.yaml"):
        path.write_text(path.read_text().split("  acknowledge:")[0])
    # files are shown from the working directory (absolute when two or more levels up): from beside the fleet,
    # whether the checkout the tests run from sits near the temporary directory or far from it
    monkeypatch.chdir(tmp_path)
    result = gpuc("validate", fleet)
    assert result.code == 0, result.err
    lines = [line for line in result.err.splitlines() if "no CRD for" in line]
    assert [line.split(":")[0] for line in lines] == [f"fleet/clusters/{c}.yaml" for c in ("prod-east", "staging", "west")]
    for kind in ("NIMService", "NIMCache", "ComputeDomain", "ClusterPolicy"):
        assert f"{kind} (" in result.err, kind
    assert "Application" not in "\n".join(lines) and all(line.endswith("[unchecked-crds]") for line in lines)
    assert "spec.acknowledge: [{warning: unchecked-crds, kinds: [NIMCache, NIMService, ComputeDomain], reason: ...}]" in result.err


def test_require_crds_turns_a_missing_crd_into_an_error_even_when_acknowledged(tmp_path):
    result = gpuc("render", EXAMPLES, "-o", tmp_path / "out", "--require-crds")
    assert result.code == 1
    assert "error: spec.crds: no CRD for NIMCache (apps.nvidia.com/v1alpha1), NIMService" in result.err
    assert not (tmp_path / "out" / "prod-east").exists()


def test_render_checks_and_writes_the_example_fleet(tmp_path):
    result = gpuc("render", EXAMPLES, "-o", tmp_path / "out", *crd_args())
    assert result.code == 0, result.err
    assert (tmp_path / "out" / "prod-east" / "kustomization.yaml").is_file()
    # Rendering again over the same tree: the previous tree is the update base, nothing changed.
    again = gpuc("render", EXAMPLES, "-o", tmp_path / "out", *crd_args())
    assert again.code == 0, again.err
