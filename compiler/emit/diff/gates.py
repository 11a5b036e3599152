"""Conditions `gpuc diff --fail-on` can gate a pull request on (kept import-light for the CLI parser)."""

GATES = ("any", "replacement", "gpu-increase", "infeasible", "budget", "cluster-removed", "staged")
