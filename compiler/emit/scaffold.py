"""`gpuc init`: a new fleet that validates, with a comment on every line a team changes first."""

from __future__ import annotations

CLUSTER = """\
# A cluster gpuc compiles for: its platform versions and GPU node pools. `gpuc catalog` lists what each
# field may name; `gpuc schema > gpuc-schema.json` gives editors completion.
apiVersion: gpuc.dev/v1alpha1
kind: Cluster
metadata:
  name: {cluster}                            # also the Pulumi stack name and the rendered/<name>/ directory
spec:
  kubernetesVersion: "{kubernetes}"              # quoted: YAML reads 1.30 as the number 1.3
  draDriver:
    version: "{driver}"                     # the NVIDIA DRA driver release the cluster runs
    nvidiaDriverRoot: /run/nvidia/driver      # where the GPU Operator's driver container puts it; "/" when the
                                              # hosts carry the driver (gpuCluster mode installs none)
  gpuOperator:
    mode: helm                                # helm | patch | gpuCluster (v26.7+: set nvidiaDriverRoot too) | none
    version: {operator}
  # crds: crds                                # a directory of the operators' CRDs: the output checks use them
  nodePools:
  - name: {pool}
    nodes: 2
    gpu: {{model: {model}, count: 8}}
  gitops:
    repoURL: https://git.example.com/platform/gpu-fleet.git   # the repository Argo CD reads rendered/ from
    targetRevision: main
    path: rendered/{cluster}
    destination: {{name: {cluster}}}             # the cluster's name in Argo CD
  acknowledge:                                # warnings this team has decided on, each with its reason
  - warning: driver-upgrade                   # the GPU Operator upgrades the GPU driver under the DRA kubelet plugin,
    reason: drain the GPU nodes before every GPU driver upgrade   # which only a drain restarts: make it your runbook
"""

WORKLOAD = """\
# A workload: what it needs, not how DRA spells it. `gpuc explain {fleet} {name}` shows what it compiles to.
apiVersion: gpuc.dev/v1alpha1
kind: GpuWorkload
metadata:
  name: {name}
  namespace: research
spec:
  clusters: [{cluster}]
  replicas: 1
  gpu:
    count: 1                                  # or: mig, sharing, memory, alternatives, multiNode (gpuc's docs/how-to)
"""

GITIGNORE = "rendered/\n"  # the incremental build's cache lives outside the fleet ($XDG_CACHE_HOME/gpuc)


def scaffold(fleet: str, cluster: str, kubernetes: str, driver: str, operator: str, pool: str, model: str) -> dict[str, str]:
    """Relative path -> text of a new fleet."""
    return {
        f"clusters/{cluster}.yaml": CLUSTER.format(cluster=cluster, kubernetes=kubernetes, driver=driver, operator=operator,
                                                   pool=pool, model=model),
        "workloads/example.yaml": WORKLOAD.format(fleet=fleet, name="example", cluster=cluster),
        ".gitignore": GITIGNORE,
    }
