"""The committed Pulumi project: Pulumi.yaml and one stack file per example cluster, pointing at the fleet."""

from __future__ import annotations

import yaml

from conftest import EXAMPLES, REPO
from pulumi_harness import stack_config

ALLOWED_KEYS = {"gpuc:fleet", "gpuc:kubeconfig", "gpuc:context"}


def _example_clusters() -> set[str]:
    return {yaml.safe_load(p.read_text())["metadata"]["name"] for p in (EXAMPLES / "clusters").glob("*.yaml")}


def test_project_file():
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["name"] == "gpuc"
    assert project["runtime"]["name"] == "python"
    assert project["main"] == "stacks/"
    assert project["stackConfigDir"] == "stacks"
    assert (REPO / project["main"] / "__main__.py").is_file()


def test_one_stack_file_per_example_cluster():
    stacks = {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (REPO / "stacks").glob("Pulumi.*.yaml")}
    assert stacks == _example_clusters()


def test_stack_config_points_at_the_fleet():
    for cluster in sorted(_example_clusters()):
        config = stack_config(cluster)
        assert set(config) <= ALLOWED_KEYS, f"Pulumi.{cluster}.yaml: unknown keys {set(config) - ALLOWED_KEYS}"
        assert (REPO / config["gpuc:fleet"]).resolve() == EXAMPLES.resolve(), cluster
