#!/usr/bin/env bash
# Builds the real components gpuc is tested against (kube-apiserver, kube-scheduler,
# kube-controller-manager, etcd, the upstream allocator) from the Go module proxy into a cache
# outside the source tree, and reuses what is already there. Versions: harness/versions.env.
#
#   harness/build.sh            build what is missing, print one line per component
#   harness/build.sh --dir      print the cache directory and exit
#
# The cache is ${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}; Go's own module
# and build caches (go env GOMODCACHE GOCACHE) make a rebuild after a version bump incremental.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=harness/versions.env
. "$here/versions.env"
cache="${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}"
if [ "${1:-}" = "--dir" ]; then echo "$cache"; exit 0; fi
mkdir -p "$cache/bin" "$cache/src" "$cache/log"
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { printf '%-26s %s\n' "$1" "$2"; }
fail() { echo "harness/build.sh: $*" >&2; exit 1; }
command -v go >/dev/null || fail "Go is not installed: the polyglot machine ships it (go version); install Go 1.26+"

# harness/go.mod must require what versions.env pins.
for pin in "k8s.io/dynamic-resource-allocation $DRA_LIBRARY_VERSION" "go.etcd.io/etcd/server/v3 $ETCD_VERSION"; do
  grep -Eq "^[[:space:]]*$pin( //.*)?$" "$here/go.mod" ||
    fail "harness/go.mod does not require '$pin' (versions.env pins it): cd harness && go get ${pin/ /@} && go mod tidy"
done

# Builds $2 (a Go package) into bin/$1 unless a binary built from the same inputs is there.
# $3 is the module directory, $4 a stamp of the inputs, the rest extra go build flags.
build() {
  local name="$1" pkg="$2" moddir="$3" stamp="$4"; shift 4
  local out="$cache/bin/$name" log="$cache/log/$name.log"
  if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then say "$name" "cached: $out"; return; fi
  local t0=$SECONDS
  if ! (cd "$moddir" && go build -o "$out.tmp" "$@" "$pkg") >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    fail "building $name ($pkg) failed; the whole log is $log"
  fi
  mv -f "$out.tmp" "$out" && echo "$stamp" >"$out.stamp"
  say "$name" "built in $((SECONDS - t0)) s: $out"
}

# A module that requires k8s.io/kubernetes at $1 (resolving the commands named after it) and replaces each staging module (k8s.io/<name>,
# required at v0.0.0 and replaced by a path in Kubernetes' own go.mod, which a dependency's
# replace directives cannot do) with its published v0.<minor>.<patch> release.
kube_module() {
  local release="$1" dir="$cache/src/kubernetes-$1"; shift
  local staging="v0.${release#1.}" stamp="$release $*" pkgs=()
  for cmd in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd@v$release"); done
  if [ ! -f "$dir/go.sum" ] || [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    local gomod
    gomod="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@v$release" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
    [ -f "$gomod" ] || fail "the Go module proxy did not serve k8s.io/kubernetes@v$release"
    {
      echo "module gpuc.dev/harness/kubernetes"
      grep -m1 '^go ' "$gomod"
      echo "require k8s.io/kubernetes v$release"
      sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#replace \1 => \1 '"$staging"'#p' "$gomod"
    } >"$dir/go.mod"
    (cd "$dir" && go get "${pkgs[@]}") >"$cache/log/kubernetes-$release.mod.log" 2>&1 ||
      { tail -n 30 "$cache/log/kubernetes-$release.mod.log" >&2; fail "resolving k8s.io/kubernetes@v$release failed"; }
    echo "$stamp" >"$dir/.stamp"
  fi
  echo "$dir"
}

kube_ldflags() {
  local release="$1" minor="${1#1.}"; minor="${minor%%.*}"
  local v="-X k8s.io/component-base/version.gitVersion=v$release -X k8s.io/component-base/version.gitMajor=1"
  v="$v -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  echo "-s -w $v ${v//component-base\/version/client-go\/pkg\/version}"
}

newest="$KUBE_SCHEDULER_RELEASE"
# Built at the newest release only: the scheduler and controllers may not be newer than the API server
# they talk to, so tests run them beside the newest API server (emulating older minors).
NEWEST_COMMANDS="kube-apiserver kube-scheduler kube-controller-manager kubectl"
for release in $KUBE_APISERVER_RELEASES; do
  if [ "$release" = "$newest" ]; then
    dir="$(kube_module "$release" $NEWEST_COMMANDS)"
  else
    dir="$(kube_module "$release" kube-apiserver)"
  fi
  build "kube-apiserver-$release" k8s.io/kubernetes/cmd/kube-apiserver "$dir" "$release" -ldflags "$(kube_ldflags "$release")"
done
dir="$(kube_module "$newest" $NEWEST_COMMANDS)"
for cmd in kube-scheduler kube-controller-manager kubectl; do
  build "$cmd-$KUBE_SCHEDULER_RELEASE" "k8s.io/kubernetes/cmd/$cmd" "$dir" "$KUBE_SCHEDULER_RELEASE" -ldflags "$(kube_ldflags "$KUBE_SCHEDULER_RELEASE")"
done

# The harness's own programs: a stamp of their sources, so an edit rebuilds them.
own="$(cd "$here" && cat go.mod go.sum $(find . -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
build "etcd-$ETCD_VERSION" ./cmd/etcd "$here" "$own" -ldflags "-s -w"
build "allocref-$DRA_LIBRARY_VERSION" ./cmd/allocref "$here" "$own" -ldflags "-s -w"

# ==== Pulumi (issue 27) ============================================================================
# The Pulumi CLI and the Kubernetes provider, each through a wrapper module in the cache: a module's
# own replace directives (pkg/v3's `sdk/v3 => ../sdk`, the provider's `sdk/v4 => ../sdk`) do not
# apply to it as a dependency, so the wrapper replaces each relative one with the version the module
# requires and copies the others. The provider is then installed into PULUMI_HOME=$cache/pulumi-home
# as the plugin version the Python package asks for, so the engine never downloads a plugin.

# A module requiring $2 at $3 (for its package $4), with the replaces described above; prints its dir.
pulumi_module() {
  local name="$1" mod="$2" ver="$3" pkg="$4" dir="$cache/src/$1-$3" gomod
  if [ ! -f "$dir/go.sum" ] || [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$mod $ver" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    gomod="$(cd "$dir" && go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
    [ -f "$gomod" ] || fail "the Go module proxy did not serve $mod@$ver"
    grep -q '^replace (' "$gomod" && fail "$mod@$ver has a replace block, which this script does not translate"
    {
      echo "module gpuc.dev/harness/$name"
      grep -m1 '^go ' "$gomod"
      echo "require $mod $ver"
      grep '^replace .* => \.' "$gomod" | while read -r _ dep _; do
        echo "replace $dep => $dep $(sed -n "s#^[[:space:]]*$dep \(v[^ ]*\).*#\1#p" "$gomod" | head -n1)"
      done
      grep '^replace ' "$gomod" | grep -v ' => \.' || true
    } >"$dir/go.mod"
    (cd "$dir" && go get "$pkg@$ver") >"$cache/log/$name-$ver.mod.log" 2>&1 ||
      { tail -n 30 "$cache/log/$name-$ver.mod.log" >&2; fail "resolving $mod@$ver failed"; }
    echo "$mod $ver" >"$dir/.stamp"
  fi
  echo "$dir"
}

pulumi_pkg=github.com/pulumi/pulumi/pkg/v3
dir="$(pulumi_module pulumi "$pulumi_pkg" "$PULUMI_CLI_VERSION" "$pulumi_pkg/cmd/pulumi")"
build "pulumi-$PULUMI_CLI_VERSION" "$pulumi_pkg/cmd/pulumi" "$dir" "$PULUMI_CLI_VERSION" \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_CLI_VERSION"
k8s_provider=github.com/pulumi/pulumi-kubernetes/provider/v4
dir="$(pulumi_module pulumi-kubernetes "$k8s_provider" "$PULUMI_KUBERNETES_PROVIDER_VERSION" "$k8s_provider/cmd/pulumi-resource-kubernetes")"
# The provider's main package embeds schema-embed.json and terraform-mapping-embed.json, which its own
# `go generate` step (generate.go) writes from the schema.json and terraform-mapping.json the module
# ships: the module as published lacks them, so run that step on a copy of the package in the wrapper.
main="$dir/cmd/pulumi-resource-kubernetes"
if [ ! -f "$main/schema-embed.json" ]; then
  src="$(cd "$dir" && go list -m -f '{{.Dir}}' "$k8s_provider")/cmd/pulumi-resource-kubernetes"
  rm -rf "$main" && mkdir -p "$main" && cp "$src"/*.go "$src"/*.json "$main/" && chmod -R u+w "$main"
  (cd "$main" && VERSION="$PULUMI_KUBERNETES_PLUGIN_VERSION" go run generate.go) >"$cache/log/pulumi-kubernetes-generate.log" 2>&1 ||
    { rm -f "$main/schema-embed.json"; cat "$cache/log/pulumi-kubernetes-generate.log" >&2; fail "generating the provider's embedded schema failed"; }
fi
build "pulumi-resource-kubernetes-$PULUMI_KUBERNETES_PROVIDER_VERSION" ./cmd/pulumi-resource-kubernetes "$dir" \
  "$PULUMI_KUBERNETES_PROVIDER_VERSION $PULUMI_KUBERNETES_PLUGIN_VERSION" \
  -ldflags "-s -w -X $k8s_provider/pkg/version.Version=$PULUMI_KUBERNETES_PROVIDER_VERSION"

# The provider as plugin kubernetes $PULUMI_KUBERNETES_PLUGIN_VERSION, reinstalled when the binary changes.
home="$cache/pulumi-home" plugin="resource-kubernetes-v$PULUMI_KUBERNETES_PLUGIN_VERSION"
stamp="$(cat "$cache/bin/pulumi-resource-kubernetes-$PULUMI_KUBERNETES_PROVIDER_VERSION.stamp") $PULUMI_KUBERNETES_PLUGIN_VERSION"
if [ "$(cat "$home/$plugin.stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$home/plugins/$plugin" "$home/plugins/$plugin.lock" "$home/plugins/$plugin.partial"
  PULUMI_HOME="$home" PULUMI_SKIP_UPDATE_CHECK=true "$cache/bin/pulumi-$PULUMI_CLI_VERSION" plugin install resource kubernetes \
    "$PULUMI_KUBERNETES_PLUGIN_VERSION" --file "$cache/bin/pulumi-resource-kubernetes-$PULUMI_KUBERNETES_PROVIDER_VERSION" \
    >"$cache/log/$plugin.log" 2>&1 || { cat "$cache/log/$plugin.log" >&2; fail "installing the provider as $plugin failed"; }
  echo "$stamp" >"$home/$plugin.stamp"
fi
say "$plugin" "installed: $home/plugins/$plugin"
# The CLI where the Automation API looks for it (PulumiCommand(root=PULUMI_HOME) runs $root/bin/pulumi).
mkdir -p "$home/bin" && ln -sfn "../../bin/pulumi-$PULUMI_CLI_VERSION" "$home/bin/pulumi"
# ==== end Pulumi =====================================================================================
