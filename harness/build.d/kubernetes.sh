# kube-apiserver (one build per release in KUBE_APISERVER_RELEASES), and at the newest release kube-scheduler,
# kube-controller-manager and kubectl, from the Go module proxy.
# Sourced by harness/build.sh after harness/lib.sh ($cache, $here, say, fail, build); never run.
# shellcheck shell=bash

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

