"""Stage 5, check: emitted objects validated the way the API server and the drivers would.

There is no kube-apiserver on a CI machine, so gpuc carries its checks: official schemas for
built-in kinds, the user's CRDs (with their CEL rules) for custom resources, DRA limits and formats,
and the NVIDIA driver's opaque config API. `gpuc render` refuses to write a tree with errors;
`gpuc validate` runs the same checks. Entry point: `run.check_clusters`.
"""
