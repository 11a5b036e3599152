#!/usr/bin/env bash
# Builds the real components gpuc is tested against from the Go module proxy (and the sources in
# ../shared/upstream/src) into a cache outside the source tree, and reuses what is already there. Each
# component is one block in harness/build.d/, sourced in the order below; versions: harness/versions.env.
#
#   harness/build.sh            build what is missing, print one line per component and the total
#   harness/build.sh --dir      print the cache directory and exit
#
# The cache is ${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}; Go's own module
# and build caches (go env GOMODCACHE GOCACHE) make a rebuild after a version bump incremental.
#
# The blocks resolve their modules one after another (network) while the compiles they queue run beside them,
# GPUC_BUILD_JOBS (default 2) at a time, one at a time per module directory (lib.sh build, queue, schedule).
set -euo pipefail
if [ "${1:-}" = "--dir" ]; then
  echo "${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}"; exit 0
fi
# shellcheck source=harness/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

started=$SECONDS
rm -rf "$jobs_dir" && mkdir -p "$jobs_dir"
schedule & scheduler=$!
# On a failure while resolving: start no more compiles, let the running ones end (they are valid builds).
trap 'if [ -n "${scheduler:-}" ]; then : >"$jobs_dir/.abort"; wait "$scheduler" || true; rm -rf "$jobs_dir"; fi' EXIT

# The largest first, so the longest compiles start early. Kubernetes first (every other test needs an API server).
# GPUC_BUILD_PARTS names others (some of these blocks: what a quick check of one block builds).
for part in ${GPUC_BUILD_PARTS:-kubernetes pulumi argocd harness helm dra-driver operators mock-nvml node}; do
  # shellcheck source=/dev/null
  . "$here/build.d/$part.sh"
done
: >"$jobs_dir/.queued"
status=0
wait "$scheduler" || status=$?
scheduler=""
[ "$status" = 0 ] || { rm -rf "$jobs_dir"; fail "a build failed (its log is named above)"; }
budget_line "$(find "$jobs_dir" -name '*.job' | wc -l)" "$((SECONDS - started))"
rm -rf "$jobs_dir"
