"""Test tooling that runs gpuc's output through the real Kubernetes components (built by build.sh).

Product code never imports this package; the tests under tests/real/ do.
"""
