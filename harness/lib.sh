# Shared by harness/build.sh and the component blocks in harness/build.d/: where the cache is, how a
# component is built and reused. Sourced, never run.
# shellcheck shell=bash
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=harness/versions.env
. "$here/versions.env"
cache="${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}"
mkdir -p "$cache/bin" "$cache/src" "$cache/log"
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { printf '%-26s %s\n' "$1" "$2"; }
fail() { echo "harness/build.sh: $*" >&2; exit 1; }
command -v go >/dev/null || fail "Go is not installed: the polyglot machine ships it (go version); install Go 1.26+"

# Builds $2 (a Go package) into bin/$1 unless a binary built from the same inputs is there.
# $3 is the module directory, $4 a stamp of the inputs, the rest extra go build flags.
build() {
  local name="$1" pkg="$2" moddir="$3" stamp="$4"; shift 4
  local out="$cache/bin/$name" log="$cache/log/$name.log"
  if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then say "$name" "cached: $out"; return; fi
  local t0=$SECONDS
  if ! (cd "$moddir" && /usr/bin/time -f 'gpuc-build-cpu %U %S %M' go build -o "$out.tmp" "$@" "$pkg") >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    fail "building $name ($pkg) failed; the whole log is $log"
  fi
  mv -f "$out.tmp" "$out" && echo "$stamp" >"$out.stamp"
  awk -v n="$name" -v w="$((SECONDS - t0))" '$1 == "gpuc-build-cpu" {printf "%s\t%s\t%.0f\t%d\n", n, w, $2 + $3, $4 / 1024}' "$log" >>"$cache/log/timings.tsv"
  say "$name" "built in $((SECONDS - t0)) s: $out"
}

# A module in the cache requiring $2 at $3 (for its package $4), named gpuc.dev/harness/$1; prints its dir.
# A module's own replace directives do not apply to it as a dependency, so the wrapper copies them (single
# lines and replace blocks: Argo CD pins every k8s.io staging module that way), and a relative one (pkg/v3's
# `sdk/v3 => ../sdk`, Argo CD's nested gitops-engine) becomes the version the module requires.
wrapper_module() {
  local name="$1" mod="$2" ver="$3" pkg="$4" dir="$cache/src/$1-$3" gomod
  if [ ! -f "$dir/go.sum" ] || [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$mod $ver" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    gomod="$(cd "$dir" && go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
    [ -f "$gomod" ] || fail "the Go module proxy did not serve $mod@$ver"
    {
      echo "module gpuc.dev/harness/$name"
      grep -m1 '^go ' "$gomod"
      echo "require $mod $ver"
      # Every replace, one per line, whether single or in a block: "<path> => <target...>".
      awk '/^replace \($/ {b=1; next} b && /^\)/ {b=0; next}
           b && / => / {sub(/^[ \t]+/, ""); sub(/[ \t]*\/\/.*/, ""); print; next}
           /^replace [^(]/ {sub(/^replace /, ""); sub(/[ \t]*\/\/.*/, ""); print}' "$gomod" |
        while read -r dep _ target tver; do
          if [[ "$target" == .* ]]; then
            tver="$(sed -n "s#^[[:space:]]*$dep \(v[^ ]*\).*#\1#p" "$gomod" | head -n1)"
            [ -n "$tver" ] || fail "$mod@$ver replaces $dep with $target but requires no version of it"
            echo "replace $dep => $dep $tver"
          else
            echo "replace $dep => $target${tver:+ $tver}"
          fi
        done
    } >"$dir/go.mod"
    (cd "$dir" && go get "$pkg@$ver") >"$cache/log/$name-$ver.mod.log" 2>&1 ||
      { tail -n 30 "$cache/log/$name-$ver.mod.log" >&2; fail "resolving $mod@$ver failed"; }
    echo "$mod $ver" >"$dir/.stamp"
  fi
  echo "$dir"
}

# ../shared/upstream/src/<name> (git archives of the operators' tags, read-only in CI) copied to $cache/src/<name>
# when its content changed (-mod=mod may rewrite go.mod and go.sum); prints the copy's dir, whose .gpuc-stamp
# holds a hash of the archive. shared/ sits beside the checkout, or higher up for a git worktree;
# GPUC_SHARED names another shared/, GPUC_UPSTREAM_SRC another src/ (it wins over GPUC_SHARED).
upstream_source() {
  local name="$1" top="${GPUC_UPSTREAM_SRC:-${GPUC_SHARED:+$GPUC_SHARED/upstream/src}}" d="$here" from copy tree
  if [ -z "$top" ]; then
    while [ "$d" != / ] && [ ! -d "$d/shared/upstream/src" ]; do d="$(dirname "$d")"; done
    top="$d/shared/upstream/src"
  fi
  from="$top/$name" copy="$cache/src/$name"
  [ -f "$from/go.mod" ] || fail "$from is missing: the operators build from ../shared/upstream/src (GPUC_SHARED or GPUC_UPSTREAM_SRC names another)"
  tree="$(cd "$from" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
  if [ "$(cat "$copy/.gpuc-stamp" 2>/dev/null)" != "$tree" ]; then
    rm -rf "$copy" "$copy.tmp" && cp -R "$from" "$copy.tmp" && chmod -R u+w "$copy.tmp" && mv "$copy.tmp" "$copy"
    echo "$tree" >"$copy/.gpuc-stamp"
  fi
  echo "$copy"
}
