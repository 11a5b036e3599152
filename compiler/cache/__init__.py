"""The incremental build's cache: digests of what a cluster's output depends on (keys) and the JSON files
that remember each cluster's last build (store). The orchestration is compiler.incremental."""
