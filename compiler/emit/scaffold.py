"""`gpuc init`: a new fleet that validates, with a comment on every line a team changes first. Its platform versions are
what a new cluster should take (facts.new_cluster, explained by docs/how-to/new-cluster.md), and it is laid out as the
root of a fleet repository: `rendered/` beside the intents, committed, since Argo CD syncs it from there."""

from __future__ import annotations

from importlib import resources

from ..facts.new_cluster import NewCluster

PLACEHOLDER_REPO = "https://git.example.com/platform/gpu-fleet.git"

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
    version: "{driver}"                     # the DRA driver release; why this line: gpuc catalog --new-cluster
    nvidiaDriverRoot: {driver_root}      # where the GPU Operator's driver container puts it; "/" when the
                                              # hosts carry the driver (gpuCluster mode installs none)
  gpuOperator:
    mode: {mode}                                # helm | patch | gpuCluster (v26.7+: set nvidiaDriverRoot too) | none
    version: {operator}
  # crds: crds                                # a directory of the operators' CRDs: the output checks use them
  nodePools:
  - name: {pool}
    nodes: 2
    gpu: {{model: {model}, count: 8}}
  gitops:
    repoURL: {repo_url}{repo_comment}
    targetRevision: main
    path: rendered/{cluster}                  # `gpuc render . -o rendered` at the repository's root writes it
    destination: {{name: {cluster}}}             # the cluster's name in Argo CD
  acknowledge:                                # warnings this team has decided on, each with its reason
  - warning: driver-upgrade                   # the GPU Operator upgrades the GPU driver under the DRA kubelet plugin,
    reason: drain the GPU nodes before every GPU driver upgrade   # which only a drain restarts: make it your runbook
"""

WORKLOAD = """\
# A workload: what it needs, not how DRA spells it. `gpuc explain . {name}` shows what it compiles to.
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

# rendered/ is not ignored: it is committed. The incremental build's cache lives outside ($XDG_CACHE_HOME/gpuc).
GITIGNORE = """\
# rendered/ is committed: Argo CD syncs it from this repository (gpuc render . -o rendered).
# What gpuc writes that is not: capacity reports (gpuc plan . --html capacity.html).
/capacity.html
"""


CI = ("github",)


def workflows() -> dict[str, str]:
    """The GitHub Actions workflows of a fleet repository (examples/ci/github holds the same files)."""
    folder = resources.files(__package__) / "workflows"
    return {f".github/workflows/{name}": (folder / name).read_text(encoding="utf-8") for name in ("gpuc-diff.yaml", "gpuc-render.yaml")}


def scaffold(cluster: str, choice: NewCluster, repo_url: str | None = None, ci: str | None = None) -> dict[str, str]:
    """Relative path -> text of a new fleet, laid out as the root of its repository (with `ci`, its CI workflows)."""
    return {
        **(workflows() if ci == "github" else {}),
        f"clusters/{cluster}.yaml": CLUSTER.format(
            cluster=cluster, kubernetes=choice.kubernetes, driver=choice.driver, driver_root=choice.driver_root, mode=choice.mode,
            operator=choice.operator, pool="h100", model="H100-80GB", repo_url=repo_url or PLACEHOLDER_REPO,
            repo_comment="" if repo_url else "   # this repository's URL: Argo CD reads rendered/ from it"),
        "workloads/example.yaml": WORKLOAD.format(name="example", cluster=cluster),
        ".gitignore": GITIGNORE,
    }
