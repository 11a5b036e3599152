# ==== The operators (issue 34) ======================================================================
# The real NVIDIA GPU Operator and NIM Operator managers, built from the git archives of their tags in
# ../shared/upstream/src (the Go module proxy does not serve these two modules; it serves every module
# they depend on: the archives lack the committed vendor/, hence -mod=mod). Each builds from a copy in
# $cache/src/ (lib.sh upstream_source). The copy also holds
# what the managers read at run time from fixed paths (harness/operators.py mounts them there):
# gpu-operator's assets/ and manifests/ (/opt/gpu-operator) and nim-operator's manifests/ (/manifests).
# Sourced by harness/build.sh after harness/lib.sh ($cache, $here, say, fail, build).
# shellcheck shell=bash

# The GPU Operator's manager; the version the Makefile stamps (internal/info, as its BUILD_FLAGS do).
# Built in the shared graph of the sources on Kubernetes 0.36 (lib.sh shared_graph_sources).
copy="$(upstream_source "gpu-operator-$GPU_OPERATOR_VERSION")"
dir="$(source_module "gpu-operator-$GPU_OPERATOR_VERSION")"
build "gpu-operator-$GPU_OPERATOR_VERSION" github.com/NVIDIA/gpu-operator/cmd/gpu-operator "$dir" "$GPU_OPERATOR_VERSION $(cat "$copy/.gpuc-stamp")" -mod=mod \
  -ldflags "-s -w -X github.com/NVIDIA/gpu-operator/internal/info.version=$GPU_OPERATOR_VERSION"

# The NIM Operator's manager (./cmd); its Makefile stamps the DRA driver library it links with that
# library's version (versions.mk NVIDIA_DRA_DRIVER_GPU_VERSION, the go.mod requirement).
dir="$(upstream_source "k8s-nim-operator-$NIM_OPERATOR_VERSION")"
nim_dra="$(sed -n 's#^[[:space:]]*sigs.k8s.io/dra-driver-nvidia-gpu \(v[^ ]*\).*#\1#p' "$dir/go.mod" | head -n1)"
[ -n "$nim_dra" ] || fail "$dir/go.mod does not require sigs.k8s.io/dra-driver-nvidia-gpu"
build "nim-operator-$NIM_OPERATOR_VERSION" ./cmd "$dir" "$NIM_OPERATOR_VERSION $(cat "$dir/.gpuc-stamp")" -mod=mod \
  -ldflags "-s -w -X sigs.k8s.io/dra-driver-nvidia-gpu/internal/info.version=$nim_dra"
unset copy dir nim_dra
# ==== end operators ==================================================================================
