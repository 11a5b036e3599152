"""gpuc: a declarative GitOps compiler from GPU intents to the Kubernetes DRA stack."""
