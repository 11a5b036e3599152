# Helm (helm.sh/helm/v3 cmd/helm at HELM_VERSION, harness/versions.env), the CLI Argo CD's repo server
# shells out to and the tests render the real NVIDIA charts with (harness/helm.py).
# Sourced after harness/lib.sh ($cache, $here, say, fail, build); never run.
#
# Built through a wrapper module in $cache/src/helm-<version> (lib.sh wrapper_module; v3.22.0 has no
# replace directives to carry over). The ldflags are those of helm's Makefile:
# the version (so `helm version` names it; no metadata, as for a release tag, and a clean tree; the
# proxy serves no commit, so gitCommit stays empty) and the Kubernetes version helm defaults
# .Capabilities.KubeVersion to without --kube-version (client-go's v0.<minor> as 1.<minor>).
# Builds: bin/helm-<version>, reused while the stamp (the version) is unchanged.
# shellcheck shell=bash

helm_mod=helm.sh/helm/v3
helm_dir="$(wrapper_module helm "$helm_mod" "$HELM_VERSION" "$helm_mod/cmd/helm")"
# The Makefile's K8S_MODULES_MAJOR_VER/MINOR_VER: client-go v0.37.x gives 1 and 37.
helm_k8s="$(cd "$helm_dir" && go list -m -f '{{.Version}}' k8s.io/client-go)"
helm_k8s="${helm_k8s#v}"
helm_k8s_major=$((${helm_k8s%%.*} + 1)) helm_k8s_minor="${helm_k8s#*.}" helm_k8s_minor="${helm_k8s_minor%%.*}"
helm_ldflags="-s -w -X $helm_mod/internal/version.version=$HELM_VERSION -X $helm_mod/internal/version.metadata="
helm_ldflags="$helm_ldflags -X $helm_mod/internal/version.gitTreeState=clean"
for helm_pkg in pkg/lint/rules pkg/chartutil; do
  helm_ldflags="$helm_ldflags -X $helm_mod/$helm_pkg.k8sVersionMajor=$helm_k8s_major -X $helm_mod/$helm_pkg.k8sVersionMinor=$helm_k8s_minor"
done
build "helm-$HELM_VERSION" "$helm_mod/cmd/helm" "$helm_dir" "$HELM_VERSION $helm_k8s" -ldflags "$helm_ldflags"
unset helm_mod helm_dir helm_k8s helm_k8s_major helm_k8s_minor helm_ldflags helm_pkg
