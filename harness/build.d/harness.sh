# The harness's own Go programs (harness/cmd): etcd and the upstream allocator, at the versions harness/go.mod requires.
# Sourced by harness/build.sh after harness/lib.sh; never run.
# shellcheck shell=bash

# harness/go.mod must require what versions.env pins.
for pin in "k8s.io/dynamic-resource-allocation $DRA_LIBRARY_VERSION" "go.etcd.io/etcd/server/v3 $ETCD_VERSION"; do
  grep -Eq "^[[:space:]]*$pin( //.*)?$" "$here/go.mod" ||
    fail "harness/go.mod does not require '$pin' (versions.env pins it): cd harness && go get ${pin/ /@} && go mod tidy"
done

# The harness's own programs: a stamp of their sources, so an edit rebuilds them. harness/node is a module of its own
# (the kubelet-side DRA client, built and stamped by build.d/node.sh): its files are not this module's.
own="$(cd "$here" && cat go.mod go.sum $(find . -name '*.go' -not -path './node/*' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
build "etcd-$ETCD_VERSION" ./cmd/etcd "$here" "$own" -ldflags "-s -w"
build "allocref-$DRA_LIBRARY_VERSION" ./cmd/allocref "$here" "$own" -ldflags "-s -w"

