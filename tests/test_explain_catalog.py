"""What explain says of pools that cannot serve a MIG workload, and the patch releases the catalog knows."""

from __future__ import annotations

from conftest import cluster_doc, gpuc, workload_doc, write_fleet


def test_explain_tells_a_pool_not_in_mig_mode_from_a_gpu_without_mig(tmp_path):
    pools = [{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}},
             {"name": "l40s", "nodes": 1, "gpu": {"model": "L40S-48GB", "count": 4}},
             {"name": "a100", "nodes": 1, "gpu": {"model": "A100-80GB", "count": 8}, "mig": {"layout": "all-3g.40gb"}}]
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc(pools=pools)],
                        {"w.yaml": [workload_doc("nb", gpu={"mig": {"slices": [{"profile": "3g.40gb"}]}})]})
    out = gpuc("explain", fleet, "nb").out
    assert "  - h100: not in MIG mode (set nodePools[].mig to give it MIG devices)\n" in out  # not "no MIG 3g.40gb"
    assert "  - l40s: L40S-48GB GPUs have no MIG\n" in out
    assert "  + a100\n" in out


def test_the_catalog_lists_the_patch_releases_gpuc_knows():
    out = gpuc("catalog").out
    assert "  25.12  25.12.x  releases 25.12.0; chart" in out and "  0.5    0.5.x    releases 0.5.0, 0.5.1; chart" in out
    assert "v25.10.0, v25.10.1, v26.3.0" in out


def test_an_unknown_patch_release_is_a_warning_that_names_the_known_ones(tmp_path):
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc(driver="25.12.3", gpuOperator={"version": "v25.10.7"})], {})
    result = gpuc("validate", fleet)
    assert result.code == 0
    assert ("spec.draDriver.version: DRA driver 25.12.3 is not a 25.12.x release gpuc knows (known: 25.12.0) "
            "[unknown-release]") in result.err
    assert "GPU Operator v25.10.7 is not a release gpuc knows (known: v25.10.0, v25.10.1)" in result.err
    accepted = write_fleet(tmp_path / "newer", [cluster_doc(driver="25.12.3", gpuOperator={"version": "v25.10.7"}, acknowledge=[
        {"warning": "unknown-release", "reason": "25.12.3 shipped after gpuc's facts"}])], {})
    quiet = gpuc("validate", accepted)
    assert quiet.code == 0 and "unknown-release" not in quiet.err, quiet.err
