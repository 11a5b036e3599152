"""`gpuc diff`: what an intent change does to each cluster, for pull-request review."""
