#!/usr/bin/env bash
# Builds the real components gpuc is tested against from the Go module proxy (and the operators' sources in
# ../shared/upstream/src) into a cache outside the source tree, and reuses what is already there. Each
# component is one block in harness/build.d/, sourced in the order below; versions: harness/versions.env.
#
#   harness/build.sh            build what is missing, print one line per component
#   harness/build.sh --dir      print the cache directory and exit
#
# The cache is ${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}; Go's own module
# and build caches (go env GOMODCACHE GOCACHE) make a rebuild after a version bump incremental.
set -euo pipefail
if [ "${1:-}" = "--dir" ]; then
  echo "${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}"; exit 0
fi
# shellcheck source=harness/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# Kubernetes first (every other test needs an API server); helm before Argo CD, whose repo server runs it.
for part in kubernetes harness pulumi helm argocd dra-driver operators node; do
  # shellcheck source=/dev/null
  . "$here/build.d/$part.sh"
done
