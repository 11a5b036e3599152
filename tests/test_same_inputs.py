"""Every command that compiles takes the same inputs, so a warning can be answered where it appears: `--crds`
silences `unchecked-crds` in plan and explain as in render, and explain shows only what concerns its workload."""

from __future__ import annotations

import pytest

from compiler.cli import build_parser

from check_support import NIM_CRDS
from conftest import NIM_SECRETS, SLICES_FIXTURE, SLICES_FIXTURE_POOLS, cluster_doc, gpuc, nim_model, workload_doc, write_fleet

COMPILING = ["validate", "render -o out", "plan", "explain w", "inventory --cluster c1", "diff --base main", "status --cluster c1"]


@pytest.mark.parametrize("command", COMPILING)
def test_each_compiling_command_takes_the_check_inputs(command):
    words = command.split()
    args = build_parser().parse_args([words[0], "fleet", *words[1:], "--crds", "a", "--crds", "b", "--require-crds",
                                      "--allow-replace"])
    assert args.crds == ["a", "b"] and args.require_crds and args.allow_replace


@pytest.mark.parametrize("command", ["validate", "render -o out", "plan", "explain w", "diff --base main", "status --cluster c1"])
def test_each_compiling_command_reads_the_running_cluster(command):
    words = command.split()
    args = build_parser().parse_args([words[0], "fleet", *words[1:], "--state", "s.yaml"])
    assert args.state == ["s.yaml"]


@pytest.fixture
def nim_fleet(tmp_path):
    return write_fleet(tmp_path / "fleet", [cluster_doc(gpuOperator={"version": "v26.7.0"})], {
        "chat.yaml": [workload_doc("chat", "serving", model=nim_model(), secrets=NIM_SECRETS, gpu={"count": "auto"})],
        "train.yaml": [workload_doc("train", "research", gpu={"count": 2})]})


def test_crds_silence_the_unchecked_warning_in_plan_and_explain(nim_fleet):
    for command in (["plan", nim_fleet], ["explain", nim_fleet, "serving/chat"]):
        assert "[unchecked-crds]" in gpuc(*command).err
        given = gpuc(*command, "--crds", NIM_CRDS)
        assert given.code == 0 and "[unchecked-crds]" not in given.err, given.err


def test_explain_shows_the_warnings_of_its_workload_only(nim_fleet):
    train = gpuc("explain", nim_fleet, "research/train")
    assert train.code == 0 and train.err == ""  # the cluster's unchecked NIM kinds are chat's business
    assert "NIMCache" in gpuc("explain", nim_fleet, "serving/chat").err


def test_explain_on_the_running_cluster(tmp_path):
    """--state with --cluster: the workload explained against the cluster as it runs."""
    fleet = write_fleet(tmp_path / "fleet", [cluster_doc(pools=SLICES_FIXTURE_POOLS)],
                        {"train.yaml": [workload_doc("train", "research", gpu={"count": 2})]})
    result = gpuc("explain", fleet, "research/train", "--cluster", "c1", "--state", SLICES_FIXTURE)
    assert result.code == 0, result.err
    assert "research/train" in result.out and "c1" in result.out
    several = write_fleet(tmp_path / "two", [cluster_doc(pools=SLICES_FIXTURE_POOLS), cluster_doc("c2")],
                          {"train.yaml": [workload_doc("train", "research", gpu={"count": 2})]})
    assert "a cluster state describes one cluster" in gpuc("explain", several, "train", "--state", SLICES_FIXTURE).err
