"""`gpuc render` refuses to write a tree the cluster would reject; `gpuc validate` checks the same."""

from __future__ import annotations

import json

from check_support import NIM_CRDS, crd_args
from conftest import NIM_SECRETS, cluster_doc, gpuc, nim_model, workload_doc, write_fleet


def _nim_fleet(root, count: int):
    return write_fleet(root, [cluster_doc()], {"llm.yaml": [workload_doc(
        "llm", "serving", model=nim_model(), gpu={"count": count}, secrets=NIM_SECRETS)]})


def _tree(out) -> dict:
    return {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_changed_nimservice_claim_is_refused_until_the_replacement_is_accepted(tmp_path):
    out = tmp_path / "out"
    first = gpuc("render", _nim_fleet(tmp_path / "a", 1), "-o", out, *crd_args())
    assert first.code == 0, first.err
    before = _tree(out)

    changed = _nim_fleet(tmp_path / "b", 2)  # a new claim template, so the NIMService's draResources change
    refused = gpuc("render", changed, "-o", out, *crd_args())
    assert refused.code == 1
    assert "workloads/llm.yaml:" in refused.err and "NIMService serving/llm spec.draResources: spec.draResources is immutable" in refused.err
    assert "render again with --allow-replace" in refused.err
    assert "nothing was written" in refused.err
    assert _tree(out) == before

    validated = gpuc("validate", changed, *crd_args(), "--previous", out)
    assert validated.code == 1 and "spec.draResources is immutable" in validated.err
    assert gpuc("validate", changed, *crd_args()).code == 0  # without a previous tree there is no update to judge

    accepted = gpuc("render", changed, "-o", out, *crd_args(), "--allow-replace")
    assert accepted.code == 0, accepted.err
    assert "warning: spec.gpu: NIMService serving/llm spec.draResources: spec.draResources is immutable" in accepted.err
    assert _tree(out) != before


def test_refusal_in_json_names_file_line_and_field(tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert gpuc("render", _nim_fleet(tmp_path / "a", 1), "-o", out, *crd_args()).code == 0
    fleet_b = _nim_fleet(tmp_path / "b", 2)
    monkeypatch.chdir(fleet_b)  # paths are printed relative to the working directory
    result = gpuc("render", ".", "-o", out, *crd_args(), "--output", "json")
    data = json.loads(result.out)
    assert (result.code, data["ok"], data["exitCode"]) == (1, False, 1)
    (error,) = [d for d in data["diagnostics"] if d["severity"] == "error"]
    assert (error["file"], error["path"]) == ("workloads/llm.yaml", "spec.gpu")
    assert error["line"] > 0


def test_bad_check_inputs_are_exit_2(tmp_path):
    fleet = _nim_fleet(tmp_path / "a", 1)
    missing = gpuc("validate", fleet, "--crds", tmp_path / "nope")
    assert missing.code == 2 and "--crds: CRD directory" in missing.err and "does not exist" in missing.err
    assert gpuc("validate", fleet, "--previous", tmp_path / "nope").code == 2

    broken = tmp_path / "crds"
    broken.mkdir()
    (broken / "bad.yaml").write_text("kind: CustomResourceDefinition\nspec: [unclosed\n")
    result = gpuc("validate", fleet, "--crds", broken)
    assert result.code == 2
    assert "bad.yaml:3: error: (file): invalid YAML in CRD file" in result.err

    (broken / "bad.yaml").write_text("apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nspec: {}\n")
    assert "CustomResourceDefinitions were removed in Kubernetes 1.22" in gpuc("validate", fleet, "--crds", broken).err


def test_cluster_spec_crds_must_exist(tmp_path):
    fleet = write_fleet(tmp_path / "f", [cluster_doc(crds="crds/c1")], {})
    result = gpuc("validate", fleet)
    assert result.code == 2
    assert "clusters/c1.yaml:" in result.err and "spec.crds: directory 'crds/c1' does not exist in the fleet" in result.err


def test_crds_from_spec_crds_are_used(tmp_path):
    import shutil

    fleet = _nim_fleet(tmp_path / "a", 1)
    shutil.copytree(NIM_CRDS, fleet / "crds")
    (fleet / "clusters" / "c1.yaml").write_text((fleet / "clusters" / "c1.yaml").read_text() + "  crds: crds\n")
    result = gpuc("validate", fleet)
    assert result.code == 0, result.err
    assert "no CRD for" not in result.err  # NIM from crds/, the Argo CD Applications from gpuc's own schema


def test_a_changed_nimservice_claim_is_refused_without_the_nim_crd_too(tmp_path):
    """gpuc declares spec.draResources replaced on change itself: the guard must not depend on --crds."""
    out = tmp_path / "out"
    assert gpuc("render", _nim_fleet(tmp_path / "a", 1), "-o", out).code == 0
    before = _tree(out)
    refused = gpuc("render", _nim_fleet(tmp_path / "b", 2), "-o", out)
    assert refused.code == 1
    assert "NIMService serving/llm spec.draResources: spec.draResources is immutable: the NIMService cannot be updated in place" in refused.err
    assert "render again with --allow-replace" in refused.err and _tree(out) == before
    assert gpuc("render", _nim_fleet(tmp_path / "b", 2), "-o", out, "--allow-replace").code == 0
