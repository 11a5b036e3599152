# kube-apiserver, kube-scheduler and kube-controller-manager at the releases versions.env names for each, and kubectl
# at the newest release, from the Go module proxy.
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
# Per release, the commands versions.env asks of it: kube-apiserver (KUBE_APISERVER_RELEASES), kube-scheduler and
# kube-controller-manager (KUBE_CONTROLLER_RELEASES), kubectl at the newest; one module per release.
for release in $(printf '%s\n' $KUBE_APISERVER_RELEASES $KUBE_CONTROLLER_RELEASES | sort -uV); do
  cmds=()
  case " $KUBE_APISERVER_RELEASES " in *" $release "*) cmds+=(kube-apiserver) ;; esac
  case " $KUBE_CONTROLLER_RELEASES " in *" $release "*) cmds+=(kube-scheduler kube-controller-manager) ;; esac
  [ "$release" = "$newest" ] && cmds+=(kubectl)
  dir="$(kube_module "$release" "${cmds[@]}")"
  for cmd in "${cmds[@]}"; do
    build "$cmd-$release" "k8s.io/kubernetes/cmd/$cmd" "$dir" "$release" -ldflags "$(kube_ldflags "$release")"
  done
done
