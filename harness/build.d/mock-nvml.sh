# NVIDIA's mock NVML library and the fake IMEX and fabric manager daemons (issue 45), from
# ../shared/upstream/src/k8s-test-infra-<K8S_TEST_INFRA_SOURCE> (a git archive of the parts the DRA driver's CPU-only
# CI uses; its README there), in the shared graph of the sources on Kubernetes 0.36 (lib.sh shared_graph_sources).
# Sourced after harness/lib.sh ($cache, $here, say, fail, build, queue, source_module); never run.
#
# The library is built as pkg/gpu/mocknvml/Makefile builds it without padding (`-tags nopadding
# -buildmode=c-shared` of ./bridge, CGO_LDFLAGS with its --defsym aliases of the versioned NVML symbols and its
# soname) into bin/mock-nvml-<src>/libnvidia-ml.so.<LIB_VERSION>, with the Makefile's links libnvidia-ml.so.1
# and libnvidia-ml.so beside it. cmd/fake-imex and cmd/fake-fabricmanager each hold a daemon and a ctl:
# bin/fake-imex-<src>, fake-imex-ctl-<src>, fake-fabricmanager-<src>, fake-fabricmanager-ctl-<src>. bin/render-pci-sysfs-<src>
# (its cmd/render-pci-sysfs) writes the fake PCI sysfs tree of a profile: the plugin reads a GPU's PCIe root there.
# shellcheck shell=bash

mock_src="k8s-test-infra-$K8S_TEST_INFRA_SOURCE"
copy="$(upstream_source "$mock_src")"
tree="$(cat "$copy/.gpuc-stamp")"
dir="$(source_module "$mock_src")"
mock_mk="$copy/pkg/gpu/mocknvml/Makefile"
mock_lib_version="$(sed -n 's/^LIB_VERSION[[:space:]]*?=[[:space:]]*\([0-9.]*\).*/\1/p' "$mock_mk" | head -n1)"
[ -n "$mock_lib_version" ] || fail "no LIB_VERSION in $mock_mk"
# The Makefile's VERSION_ALIASES and SONAME_FLAG, read from it (one -Wl,... per line of the alias list).
mock_ldflags="$(sed -n 's/^[[:space:]]*\(-Wl,--defsym,[^[:space:]\\]*\).*/\1/p' "$mock_mk" | tr '\n' ' ')-Wl,-soname,libnvidia-ml.so.1"
[[ "$mock_ldflags" == *--defsym* ]] || fail "no --defsym aliases in $mock_mk"
mock_lib="mock-nvml-$K8S_TEST_INFRA_SOURCE/libnvidia-ml.so.$mock_lib_version"
build "$mock_lib" github.com/NVIDIA/k8s-test-infra/pkg/gpu/mocknvml/bridge "$dir" "$tree $mock_lib_version" \
  "CGO_LDFLAGS=$mock_ldflags" -mod=mod -tags nopadding -buildmode=c-shared
mkdir -p "$cache/bin/mock-nvml-$K8S_TEST_INFRA_SOURCE"
for link in libnvidia-ml.so.1 libnvidia-ml.so; do
  ln -sfn "libnvidia-ml.so.$mock_lib_version" "$cache/bin/mock-nvml-$K8S_TEST_INFRA_SOURCE/$link"
done
for fake in fake-imex fake-fabricmanager; do
  build "$fake-$K8S_TEST_INFRA_SOURCE" "github.com/NVIDIA/k8s-test-infra/cmd/$fake/daemon" "$dir" "$tree" -mod=mod -ldflags "-s -w"
  build "$fake-ctl-$K8S_TEST_INFRA_SOURCE" "github.com/NVIDIA/k8s-test-infra/cmd/$fake/ctl" "$dir" "$tree" -mod=mod -ldflags "-s -w"
done
build "render-pci-sysfs-$K8S_TEST_INFRA_SOURCE" github.com/NVIDIA/k8s-test-infra/cmd/render-pci-sysfs "$dir" "$tree" -mod=mod -ldflags "-s -w"
unset mock_src copy tree dir mock_mk mock_lib_version mock_ldflags mock_lib link fake
