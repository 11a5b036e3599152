"""What makes the change from one shape of a cluster to the next unsafe as one commit.

Argo CD applies a commit's new objects and prunes its old ones in one sync, and Pulumi creates before it deletes: for
a while both sides run. A change is safe as one commit when running both sides at once hands no device out twice and
takes no device from a running pod. Each hazard is a way that fails, found by comparing the two shapes; the tables of
tests/test_upgrade.py pin them one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

from .shape import Shape

# Kinds of hazard, in the order a plan stages them when one change has several (gpuc stages one kind per plan).
RELEASE_SWAP = "driver-release"  # the DRA driver's release changes identity: two kubelet plugins on every GPU node
POOL_HANDOVER = "pool-allocation"  # a pool goes from the device plugin to DRA (or back): both advertise its GPUs
OPERATOR_SWAP = "operator-resource"  # ClusterPolicy to GPUCluster (or back): the operator refuses the two together
KUBERNETES = "kubernetes-minor"  # the tree's API versions follow a control plane that must be upgraded first
MIG_RELAYOUT = "mig-layout"  # a pool's MIG layout changes under pods that hold its MIG devices

KINDS = (KUBERNETES, OPERATOR_SWAP, RELEASE_SWAP, POOL_HANDOVER, MIG_RELAYOUT)


@dataclass(frozen=True)
class Hazard:
    kind: str
    message: str  # why one commit is unsafe, in words for the reviewer
    field: tuple  # the intent field of the head whose change causes it (file:line of findings)
    pools: tuple[str, ...] = ()


def hazards(before: Shape, after: Shape, busy: dict[str, tuple[str, ...]] | None = None) -> list[Hazard]:
    """Every hazard of going from `before` to `after` in one commit; `busy` names the pods holding devices per pool
    on the `before` side (a MIG layout change on an idle pool is safe)."""
    out: list[Hazard] = []
    if before.kubernetes != after.kubernetes:
        out.append(Hazard(KUBERNETES, f"Kubernetes {before.kubernetes} -> {after.kubernetes}: the tree of {after.kubernetes} "
                                      f"(resource.k8s.io as {after.api_version}) needs the control plane upgraded first",
                          ("spec", "kubernetesVersion")))
    policies = (_policy(before), _policy(after))
    if all(policies) and policies[0] != policies[1]:
        out.append(Hazard(OPERATOR_SWAP, f"the GPU Operator's {policies[0]} becomes a {policies[1]}: the operator "
                                         "refuses one while the other exists, and its operands change hands",
                          ("spec", "gpuOperator", "mode")))
    old, new = before.driver, after.driver
    if old is not None and new is not None and old.identity != new.identity:
        out.append(Hazard(RELEASE_SWAP, f"the DRA driver release {old.namespace}/{old.name} (chart {old.chart} {old.version}) is "
                                        f"replaced by {new.namespace}/{new.name} (chart {new.chart} {new.version}): in one sync "
                                        f"both kubelet plugins serve gpu.nvidia.com on every GPU node, with one checkpoint "
                                        "between them", ("spec", "draDriver", "version")))
    elif ((old is None) != (new is None) and before.driver_runs and after.driver_runs
          and not any(h.kind == OPERATOR_SWAP for h in out)):
        mine = old or new
        assert mine is not None
        out.append(Hazard(RELEASE_SWAP, f"the DRA driver release {mine.namespace}/{mine.name} and the driver the GPUCluster "
                                        "installs change places: both kubelet plugins would serve every GPU node",
                          ("spec", "gpuOperator", "mode")))
    handed = [name for name in before.pools if name in after.pools and before.publisher(name) and after.publisher(name)
              and _kind(before.publisher(name)) != _kind(after.publisher(name))]
    if handed:
        first = after.pools[handed[0]]
        out.append(Hazard(POOL_HANDOVER, f"pool(s) {', '.join(handed)} change hands between the device plugin and the DRA driver: "
                                         "in one sync both advertise the same GPUs, and a pod of each may get one",
                          first.path + ("allocation",), tuple(handed)))
    relayout = [name for name in before.pools if name in after.pools and before.pools[name].mig != after.pools[name].mig
                and (busy or {}).get(name) and after.pools[name].allocation != "none"]
    if relayout:
        pods = sum(len((busy or {})[n]) for n in relayout)
        out.append(Hazard(MIG_RELAYOUT, f"pool(s) {', '.join(relayout)} change MIG layout while {pods} pod(s) hold MIG devices "
                                        "there: the MIG Manager repartitions each GPU, and the devices those pods hold are gone",
                          after.pools[relayout[0]].path + ("mig",), tuple(relayout)))
    return out


def _policy(shape: Shape) -> str:
    """The kind of the GPU Operator's custom resource on the cluster, gpuc's or not: a patched ClusterPolicy is another
    team's, and it still cannot coexist with a GPUCluster."""
    if shape.operator_mode == "patch":
        return "ClusterPolicy"
    return shape.operator


def _kind(publisher: str) -> str:
    return "device plugin" if publisher == "device plugin" else "dra"
