# The NVIDIA DRA driver's admission webhook, ComputeDomain controller and its two kubelet plugins (the GPU plugin
# and the ComputeDomain plugin, issue 45), one build per source named in DRA_DRIVER_SOURCES (harness/versions.env),
# from ../shared/upstream/src/dra-driver-nvidia-gpu-<src> (git archives without vendor/; their README says how each
# builds and runs without GPUs).
# Sourced after harness/lib.sh ($cache, $here, say, fail, build, source_module); never run.
#
# Each source is copied to $cache/src/dra-driver-nvidia-gpu-<src> (lib.sh upstream_source); the tests also
# take the controller's templates/ and the CRDs from that copy (harness/dra_driver.py). The main source builds in
# the shared graph of the sources on Kubernetes 0.36 (lib.sh shared_graph_sources), v25.12.0 in its own copy.
# Builds: bin/<command>-<src> for compute-domain-controller, webhook, gpu-kubelet-plugin and
# compute-domain-kubelet-plugin, reused while the stamp (a hash of the source tree, the version string and the
# build configuration) is unchanged. The plugins link go-nvml through cgo, as the Makefile builds them
# (CGO_ENABLED=1, its CGO_LDFLAGS_ALLOW: lib.sh).
# shellcheck shell=bash

for src in $DRA_DRIVER_SOURCES; do
  copy="$(upstream_source "dra-driver-nvidia-gpu-$src")"
  tree="$(cat "$copy/.gpuc-stamp")"
  # The version the Makefile stamps: VERSION (main) or `VERSION ?=` in versions.mk (release tags);
  # without it the controller panics at start (could not parse "unknown" as version).
  if [ -f "$copy/VERSION" ]; then
    version="$(tr -d '[:space:]' <"$copy/VERSION")"
  else
    version="$(sed -n 's/^VERSION[[:space:]]*?=[[:space:]]*\(v[^[:space:]]*\).*/\1/p' "$copy/versions.mk" | head -n1)"
  fi
  [ -n "$version" ] || fail "no VERSION in $copy (neither VERSION nor versions.mk names one)"
  module="$(sed -n 's/^module[[:space:]]*\([^[:space:]]*\).*/\1/p' "$copy/go.mod")"
  dir="$(source_module "dra-driver-nvidia-gpu-$src")"
  for cmd in compute-domain-controller webhook gpu-kubelet-plugin compute-domain-kubelet-plugin; do
    build "$cmd-$src" "$module/cmd/$cmd" "$dir" "$tree $version" -mod=mod \
      -ldflags "-s -w -X $module/internal/info.version=$version"
  done
done
unset src tree copy version module cmd dir
