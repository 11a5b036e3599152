# Shared by harness/build.sh and the component blocks in harness/build.d/: where the cache is, how a
# component is built and reused. Sourced, never run.
# shellcheck shell=bash
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=harness/versions.env
. "$here/versions.env"
cache="${GPUC_HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuc-harness}"
mkdir -p "$cache/bin" "$cache/src" "$cache/log"
# -trimpath: no machine paths in the binaries, and a package compiles to the same cache entry wherever its module
# sits. -dwarf=false: no debug information is generated at all (the links strip it anyway with -s -w): measured on
# Argo CD 3.5.1 from an empty cache, 357 CPU-s instead of 382 and a peak of 1.8 GB instead of 2.2 (issue 44).
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath -gcflags=all=-dwarf=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# The linker flags the upstream Makefiles allow cgo: go-nvml's -Wl,--unresolved-symbols (the DRA driver's kubelet
# plugins), the mock NVML library's --defsym aliases and soname (k8s-test-infra pkg/gpu/mocknvml/Makefile).
export CGO_LDFLAGS_ALLOW='-Wl,--unresolved-symbols=ignore-in-object-files|-Wl,--defsym,.*|-Wl,-soname,.*'
touch "$cache/log/timings.tsv"
jobs_dir="$cache/log/jobs-${GPUC_BUILD_ID:-$$}"

say() { printf '%-26s %s\n' "$1" "$2"; }
fail() { echo "harness/build.sh: $*" >&2; exit 1; }
command -v go >/dev/null || fail "Go is not installed: the polyglot machine ships it (go version); install Go 1.26+"
go_version="$(go version)"

# Builds $2 (a Go package) into bin/$1 (a name with a slash: a file in a folder of bin/) unless a binary built from
# the same inputs is there. $3 is the module directory, $4 a stamp of the inputs, then VAR=value settings for the go
# commands (CGO_LDFLAGS), then extra go build flags. The stamp recorded is $4 followed by a hash of the build
# configuration (Go version, GOFLAGS, the module directory's .stamp, the settings and flags), so a change of flags
# or of the shared graph's sources rebuilds.
# Resolving (downloading every module the package needs) happens here, at once; the compile is queued for the
# scheduler (build.sh), which runs it when a slot is free and no other compile in the same module directory runs.
build() {
  local name="$1" pkg="$2" moddir="$3" stamp="$4"; shift 4
  local out="$cache/bin/$name" log="$cache/log/${name//\//-}.log" envs=() list=() a prev=""
  echo "$name" >>"$jobs_dir/components"
  # (the module directory's own .stamp, for the shared graph: which sources it joins)
  stamp="$stamp cfg:$(printf '%s\n' "$go_version" "$GOFLAGS" "$CGO_LDFLAGS_ALLOW" "$(cat "$moddir/.stamp" 2>/dev/null)" "$@" |
    sha256sum | cut -c1-12)"
  built_stamp="$stamp" last_job=""  # for a block that installs what it built (pulumi.sh)
  if [ -f "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then say "$name" "cached: $out"; return; fi
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Z_]+= ]]; then envs+=("$a"); continue; fi
    case "$prev" in -tags) list+=(-tags "$a") ;; esac  # the flags `go list` takes too: they decide the modules needed
    case "$a" in -mod=*|-tags=*) list+=("$a") ;; esac
    prev="$a"
  done
  (cd "$moddir" && env ${envs[@]+"${envs[@]}"} go list -deps ${list[@]+"${list[@]}"} "$pkg") >"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; fail "resolving the modules of $name ($pkg) failed; the whole log is $log"; }
  queue "$moddir" "$name" run_build "$name" "$pkg" "$moddir" "$stamp" "$@"
}

# The compile itself, run by the scheduler in a shell of its own (lib.sh sourced): go build into bin/$1.tmp,
# then the binary and its stamp in place, a line in log/timings.tsv (name, wall s, CPU s, peak MB).
run_build() {
  local name="$1" pkg="$2" moddir="$3" stamp="$4"; shift 4
  local out="$cache/bin/$name" log="$cache/log/${name//\//-}.log" t0=$SECONDS envs=()
  while [[ "${1:-}" =~ ^[A-Z_]+= ]]; do envs+=("$1"); shift; done
  mkdir -p "$(dirname "$out")"
  if ! (cd "$moddir" && env ${envs[@]+"${envs[@]}"} /usr/bin/time -f 'gpuc-build-cpu %U %S %M' go build -o "$out.tmp" "$@" "$pkg") >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    fail "building $name ($pkg) failed; the whole log is $log"
  fi
  mv -f "$out.tmp" "$out" && echo "$stamp" >"$out.stamp"
  awk -v n="$name" -v w="$((SECONDS - t0))" '$1 == "gpuc-build-cpu" {printf "%s\t%s\t%.0f\t%d\n", n, w, $2 + $3, $4 / 1024}' "$log" >>"$cache/log/timings.tsv"
  say "$name" "built in $((SECONDS - t0)) s: $out"
}

# Queues a command (a function of lib.sh and its arguments) for the scheduler, keyed by $1: commands with one key
# run one after another in the order queued (a module directory: what they share compiles once), others side by side.
# $queue_after (job numbers, as build and queue leave in $last_job) must end well before it starts.
queue() {
  local key="$1" label="$2" n; shift 2
  mkdir -p "$jobs_dir"
  n="$(printf '%04d' "$(($(find "$jobs_dir" -name '*.job' | wc -l) + 1))")"
  printf '%s\n' "$key" >"$jobs_dir/$n.key"
  [ -z "${queue_after:-}" ] || echo "$queue_after" >"$jobs_dir/$n.after"
  last_job="$n"
  { printf '. %q\n' "$here/lib.sh"; printf '%q ' "$@"; echo; } >"$jobs_dir/$n.tmp" && mv "$jobs_dir/$n.tmp" "$jobs_dir/$n.job"
  echo "$label" >"$jobs_dir/$n.label"
}

# The line build.sh ends with: how many compiles this run queued and its wall time, and the CPU seconds
# compiling every current component takes (the latest log/timings.tsv entry of each) against BUILD_CPU_BUDGET_S
# (versions.env; tests/real/test_build_budget.py checks the same sum). Keeps the list in log/components.txt.
budget_line() {
  sort -u "$jobs_dir/components" >"$cache/log/components.txt"
  awk -F'\t' -v budget="$BUILD_CPU_BUDGET_S" -v n="$1" -v wall="$2" '
    FILENAME == ARGV[1] {want[$1] = 1; next}
    ($1 in want) {cpu[$1] = $3}
    END {for (c in want) {total += cpu[c]; if (!(c in cpu)) missing++}
         printf "%-26s %d compiled in %d s wall; all %d components: %d CPU-s to compile (budget %d, versions.env)%s\n",
                "build total", n, wall, length(want), total, budget, missing ? sprintf(", %d without timings", missing) : ""}
  ' "$cache/log/components.txt" "$cache/log/timings.tsv"
}

# Runs the queued commands, at most $GPUC_BUILD_JOBS (default 2) at once and one per key, until build.sh writes
# jobs/.queued (all queued) and all have run; prints each one's output when it ends. After a failure it starts
# nothing more, and exits 1 once the running ones end. Started in the background by build.sh.
schedule() {
  local max="${GPUC_BUILD_JOBS:-2}" failed=0 j n key running pending busy a
  local -A pids=()
  while :; do
    running=0 pending=0 busy=" "
    [ -e "$jobs_dir/.abort" ] && failed=1
    for j in "$jobs_dir"/*.job; do
      [ -e "$j" ] || break
      n="${j%.job}"
      if [ -e "$n.rc" ]; then
        if [ ! -e "$n.reported" ]; then
          cat "$n.out"; : >"$n.reported"
          [ "$(cat "$n.rc")" = 0 ] || failed=1
        fi
      elif [ -e "$n.started" ]; then
        if [ -z "${pids[$n]:-}" ] || [ "$(cut -d' ' -f3 "/proc/${pids[$n]}/stat" 2>/dev/null || echo Z)" = Z ]; then
          # ended without writing its status (a full disk): failed
          echo "harness/build.sh: $(cat "$n.label") ended without a status: $(tail -n 3 "$n.out" 2>/dev/null)" >&2
          echo 1 >"$n.rc" 2>/dev/null; failed=1; : >"$n.reported" 2>/dev/null; unset "pids[$n]"; continue
        fi
        running=$((running + 1)) busy="$busy$(cat "$n.key") "
      else
        pending=$((pending + 1))
      fi
    done
    for j in "$jobs_dir"/*.job; do
      [ -e "$j" ] && [ "$failed" = 0 ] && [ "$running" -lt "$max" ] || break
      n="${j%.job}" key="$(cat "${j%.job}.key")"
      [ -e "$n.started" ] && continue
      case "$busy" in *" $key "*) continue ;; esac
      if [ -e "$n.after" ]; then  # waits for the jobs it needs
        for a in $(cat "$n.after"); do [ -e "$jobs_dir/$a.rc" ] || continue 2; done
      fi
      : >"$n.started"
      ( bash "$j" >"$n.out" 2>&1; echo $? >"$n.rc.tmp"; mv "$n.rc.tmp" "$n.rc" ) &
      pids[$n]=$!
      running=$((running + 1)) pending=$((pending - 1)) busy="$busy$key "
    done
    # done: all queued and run, or a failure and nothing running any more
    [ "$running" = 0 ] && { [ "$failed" = 1 ] || { [ -e "$jobs_dir/.queued" ] && [ "$pending" = 0 ]; }; } && break
    sleep 0.5
  done
  wait
  return "$failed"
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
  # The content hash, recomputed only when the listing (paths, sizes, times) changed: Argo CD's tree takes 0.3 s to
  # hash, and a run that finds everything built stays under a second.
  local listing
  listing="$(cd "$from" && find . -type f -printf '%p %s %T@\n' | LC_ALL=C sort | sha256sum | cut -c1-16)"
  if [ "$(sed -n 1p "$cache/src/$name.tree" 2>/dev/null)" = "$listing" ]; then
    tree="$(sed -n 2p "$cache/src/$name.tree")"
  else
    tree="$(cd "$from" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
    printf '%s\n%s\n' "$listing" "$tree" >"$cache/src/$name.tree"
  fi
  if [ "$(cat "$copy/.gpuc-stamp" 2>/dev/null)" != "$tree" ]; then
    rm -rf "$copy" "$copy.tmp" && cp -R "$from" "$copy.tmp" && chmod -R u+w "$copy.tmp" && mv "$copy.tmp" "$copy"
    echo "$tree" >"$copy/.gpuc-stamp"
  fi
  echo "$copy"
}

# The sources of ../shared/upstream/src that build as ONE module graph, gpuc.dev/harness/shared-graph in
# $cache/src/shared-graph: a module requiring each source's copy (a directory replace) and carrying their replace
# directives, so minimal version selection picks one version of every dependency they share and client-go,
# apimachinery, controller-runtime, grpc... compile once for all of them. They are the sources on Kubernetes 0.36
# (Argo CD 3.5.1 replaces its k8s.io modules to v0.36.1, the DRA driver's main requires v0.36.0, the GPU Operator
# and k8s-test-infra v0.36.3); the graph aligns every k8s.io staging module (and k8s.io/kubernetes) to the newest
# any of them asks for, a patch release above what the others ask. Measured from an empty cache (issue 44): these
# nine builds took 783 CPU-s each in its own module, 479 in the one graph. The DRA driver v25.12.0 and the NIM
# Operator stay on their own modules: they are on Kubernetes 0.34, and the NIM Operator links the DRA driver's
# module at v0.4.1, which the graph's main would replace.
shared_graph_sources() {
  echo "argo-cd-$ARGOCD_VERSION dra-driver-nvidia-gpu-main-9593204 gpu-operator-$GPU_OPERATOR_VERSION k8s-test-infra-$K8S_TEST_INFRA_SOURCE"
}

# The module directory to build source $1 (a folder of ../shared/upstream/src) in: the shared graph's when it is
# one of shared_graph_sources, else its own copy (upstream_source). Prints the dir; the caller names packages by
# their full import path (they are the graph's dependencies, not its packages).
source_module() {
  case " $(shared_graph_sources) " in
    *" $1 "*) shared_graph ;;
    *) upstream_source "$1" ;;
  esac
}

# Writes $cache/src/shared-graph/go.mod (once per set of source stamps) and prints the dir.
shared_graph() {
  local dir="$cache/src/shared-graph" src copy stamps="" gomod mod major go_line="go 1.0" k8s="" v kube=""
  local -a copies=()
  for src in $(shared_graph_sources); do
    copy="$(upstream_source "$src")"
    copies+=("$copy") stamps="$stamps $src:$(cat "$copy/.gpuc-stamp")"
  done
  if [ -f "$dir/go.mod" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamps" ]; then echo "$dir"; return; fi
  rm -rf "$dir" && mkdir -p "$dir"
  for copy in "${copies[@]}"; do
    go_line="$(printf '%s\n%s\n' "$go_line" "$(grep -m1 '^go ' "$copy/go.mod")" | sort -V | tail -n1)"
    # the newest client-go a source asks for (its replace, or its requirement)
    v="$(sed -n 's#^[[:space:]]*k8s.io/client-go => k8s.io/client-go \(v[^ ]*\).*#\1#p; s#^[[:space:]]*k8s.io/client-go \(v[^ ]*\).*#\1#p' "$copy/go.mod" | sort -V | tail -n1)"
    k8s="$(printf '%s\n%s\n' "$k8s" "$v" | sort -V | tail -n1)"
    grep -Eq '^[[:space:]]*k8s.io/kubernetes v' "$copy/go.mod" && kube=1
  done
  [ -n "$k8s" ] || fail "no source of the shared graph requires k8s.io/client-go"
  {
    echo "module gpuc.dev/harness/shared-graph"
    echo "$go_line"
    [ -z "$kube" ] || echo "require k8s.io/kubernetes v1.${k8s#v0.}"
    for copy in "${copies[@]}"; do
      gomod="$copy/go.mod" mod="$(sed -n 's/^module[[:space:]]*\([^[:space:]]*\).*/\1/p' "$gomod")"
      major="${mod##*/v}"; [[ "$major" =~ ^[0-9]+$ ]] || major=0
      echo "require $mod v$major.0.0"
      echo "replace $mod => $copy"
      awk '/^replace \($/ {b=1; next} b && /^\)/ {b=0; next}
           b && / => / {sub(/^[ \t]+/, ""); sub(/[ \t]*\/\/.*/, ""); print; next}
           /^replace [^(]/ {sub(/^replace /, ""); sub(/[ \t]*\/\/.*/, ""); print}' "$gomod" |
        while read -r dep _ target tver; do
          if [[ "$target" == .* ]]; then echo "replace $dep => $copy/${target#./}"
          elif [[ "$dep" == k8s.io/* && "$target" == "$dep" ]]; then echo "replace $dep => $dep $k8s"
          else echo "replace $dep => $target${tver:+ $tver}"
          fi
        done
    done
  } >"$dir/go.mod.tmp"
  # one replace per module: two sources replacing one module differently cannot share a graph
  awk '$1 == "replace" {t = $0; sub(/^replace [^ ]+ => /, "", t); if (($2 in seen) && seen[$2] != t) {print $2; bad = 1}; seen[$2] = t}
       END {exit bad}' "$dir/go.mod.tmp" >"$dir/conflicts" ||
    fail "the sources of the shared graph replace $(tr '\n' ' ' <"$dir/conflicts")differently (lib.sh shared_graph_sources)"
  awk '!seen[$0]++' "$dir/go.mod.tmp" >"$dir/go.mod" && rm -f "$dir/go.mod.tmp" "$dir/conflicts"
  echo "$stamps" >"$dir/.stamp"
  echo "$dir"
}
