# ==== The node (issue 45) ===========================================================================
# What runs on a GPU node, without GPUs: NVIDIA's mock NVML library and fake IMEX daemon (k8s-test-infra, the mock
# the DRA driver's own CPU-only CI runs its kubelet plugin on), the DRA driver's two kubelet plugins of each source,
# and the harness's kubelet-side DRA client (harness/node, a Go module of its own). harness/node.py runs them.
# Sourced after harness/lib.sh ($cache, $here, say, fail, build, upstream_source); never run.
#
# Builds:
# - bin/libnvidia-ml-mock-<K8S_TEST_INFRA_SOURCE>.so: ../shared/upstream/src/k8s-test-infra-<src>/pkg/gpu/mocknvml/bridge
#   as its Makefile builds it without padding (`-tags nopadding -buildmode=c-shared`, CGO_LDFLAGS with the Makefile's
#   --defsym aliases of the versioned NVML symbols and its soname libnvidia-ml.so.1, CGO_LDFLAGS_ALLOW for them). One
#   library serves every GPU profile: the profile is the config.yaml the library reads at run time.
# - bin/fake-imex, bin/fake-imex-ctl: cmd/fake-imex/daemon and ctl of the same source; bin/render-pci-sysfs: its
#   cmd/render-pci-sysfs, which writes the fake PCI sysfs tree of a profile (the plugin reads a GPU's PCIe root there).
# - bin/gpu-kubelet-plugin-<src>, bin/compute-domain-kubelet-plugin-<src> for each of DRA_DRIVER_SOURCES, in the copy
#   of the source dra-driver.sh builds in, with the version ldflags and CGO_LDFLAGS_ALLOW of the driver's Makefile
#   (go-nvml's `-Wl,--unresolved-symbols=ignore-in-object-files`).
# - bin/kubelet-dra: the kubelet-side DRA client (harness/node/cmd/kubelet-dra); bin/nvidia-smi-recorder: the mock driver
#   root's nvidia-smi (harness/node/cmd/nvidia-smi), which records how the plugin calls it.
# Each is reused while its stamp (the source tree's hash, the version, the flags) is unchanged.
# shellcheck shell=bash

# -- the mock NVML library and the fake IMEX daemon ---------------------------------------------------------------------
node_copy="$(upstream_source "k8s-test-infra-$K8S_TEST_INFRA_SOURCE")"
node_tree="$(cat "$node_copy/.gpuc-stamp")"
node_mk="$node_copy/pkg/gpu/mocknvml/Makefile"
# The Makefile's VERSION_ALIASES (one -Wl,--defsym,... per line) and SONAME_FLAG, read from it.
node_ldflags="$(sed -n 's/^[[:space:]]*\(-Wl,--defsym,[^[:space:]\\]*\).*/\1/p' "$node_mk" | tr '\n' ' ')"
node_soname="$(sed -n 's/^LIB_NAME[[:space:]]*:=[[:space:]]*\([^[:space:]]*\).*/\1/p' "$node_mk").1"
[[ "$node_ldflags" == *--defsym* && "$node_soname" == libnvidia-ml.so.1 ]] ||
  fail "$node_mk no longer names the --defsym aliases and the soname libnvidia-ml.so.1 this block reads"
node_ldflags="$node_ldflags-Wl,-soname,$node_soname"
CGO_LDFLAGS_ALLOW='--defsym|-soname' CGO_LDFLAGS="$node_ldflags" \
  build "libnvidia-ml-mock-$K8S_TEST_INFRA_SOURCE.so" ./pkg/gpu/mocknvml/bridge "$node_copy" "$node_tree $node_ldflags" \
  -mod=mod -tags nopadding -buildmode=c-shared
# go build writes a c-shared library without the executable bits build() reuses a binary by; and a C header beside it
chmod 755 "$cache/bin/libnvidia-ml-mock-$K8S_TEST_INFRA_SOURCE.so" && rm -f "$cache/bin/libnvidia-ml-mock-$K8S_TEST_INFRA_SOURCE.so.h"
build fake-imex ./cmd/fake-imex/daemon "$node_copy" "$node_tree" -mod=mod -ldflags "-s -w"
build fake-imex-ctl ./cmd/fake-imex/ctl "$node_copy" "$node_tree" -mod=mod -ldflags "-s -w"
build render-pci-sysfs ./cmd/render-pci-sysfs "$node_copy" "$node_tree" -mod=mod -ldflags "-s -w"

# -- the DRA driver's kubelet plugins -----------------------------------------------------------------------------------
for node_src in $DRA_DRIVER_SOURCES; do
  node_copy="$(upstream_source "dra-driver-nvidia-gpu-$node_src")"
  node_tree="$(cat "$node_copy/.gpuc-stamp")"
  if [ -f "$node_copy/VERSION" ]; then  # as dra-driver.sh reads it
    node_version="$(tr -d '[:space:]' <"$node_copy/VERSION")"
  else
    node_version="$(sed -n 's/^VERSION[[:space:]]*?=[[:space:]]*\(v[^[:space:]]*\).*/\1/p' "$node_copy/versions.mk" | head -n1)"
  fi
  node_module="$(sed -n 's/^module[[:space:]]*\([^[:space:]]*\).*/\1/p' "$node_copy/go.mod")"
  for node_cmd in gpu-kubelet-plugin compute-domain-kubelet-plugin; do
    CGO_ENABLED=1 CGO_LDFLAGS_ALLOW='-Wl,--unresolved-symbols=ignore-in-object-files' \
      build "$node_cmd-$node_src" "./cmd/$node_cmd" "$node_copy" "$node_tree $node_version cgo" -mod=mod \
      -ldflags "-s -w -X $node_module/internal/info.version=$node_version"
  done
done

# -- the kubelet-side DRA client ----------------------------------------------------------------------------------------
# Its own module (harness/node): a change to it rebuilds it alone, and the harness module's programs keep their stamp.
node_own="$(cd "$here/node" && cat go.mod go.sum $(find . -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
build kubelet-dra ./cmd/kubelet-dra "$here/node" "$node_own" -ldflags "-s -w"
# the mock driver root's recording nvidia-smi, static: the plugin runs it with the mock library preloaded
CGO_ENABLED=0 build nvidia-smi-recorder ./cmd/nvidia-smi "$here/node" "$node_own static" -ldflags "-s -w"
unset node_copy node_tree node_mk node_ldflags node_soname node_src node_version node_module node_cmd node_own
# ==== end the node ====================================================================================