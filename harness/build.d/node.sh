# The harness's own programs for the node (issue 45), from harness/node, a Go module of its own: bin/kubelet-dra,
# kubelet's DRA gRPC client (registration, health, NodePrepareResources and NodeUnprepareResources of API v1 and
# v1beta1), and bin/nvidia-smi-recorder, the mock driver root's nvidia-smi, static (the plugin runs it with the mock
# library preloaded), which records how the plugin calls it. What else runs on a mock node is built by its own block:
# the mock NVML library and its tools (mock-nvml.sh), the kubelet plugins (dra-driver.sh). harness/node.py runs them.
# Sourced after harness/lib.sh ($cache, $here, say, fail, build); never run.
#
# Reused while the stamp (go.mod, go.sum and the *.go of harness/node, in C order; harness/node.py
# node_module_stamp) is unchanged: a change to it rebuilds these two alone, and the harness module keeps its stamp.
# shellcheck shell=bash

node_own="$(cd "$here/node" && cat go.mod go.sum $(find . -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
build kubelet-dra ./cmd/kubelet-dra "$here/node" "$node_own" -ldflags "-s -w"
build nvidia-smi-recorder ./cmd/nvidia-smi "$here/node" "$node_own static" CGO_ENABLED=0 -ldflags "-s -w"
unset node_own
