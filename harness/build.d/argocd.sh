# ==== Argo CD (issue 33) ============================================================================
# The real Argo CD (one binary, github.com/argoproj/argo-cd/v3/cmd, that runs as the command its
# executable name or $ARGOCD_BINARY_NAME says: argocd-application-controller, argocd-repo-server, ...)
# and kustomize, which its repo server shells out to for a directory holding a kustomization.yaml.
# Sourced after harness/lib.sh (which defines $cache, say, fail, build and wrapper_module: Argo CD's go.mod pins
# every k8s.io staging module in a replace block, which the wrapper carries over); versions: harness/versions.env.
# shellcheck shell=bash

# kustomize reports its version from the build info (its module is a dependency of the wrapper).
kustomize_mod=sigs.k8s.io/kustomize/kustomize/v5
dir="$(wrapper_module kustomize "$kustomize_mod" "$KUSTOMIZE_VERSION" "$kustomize_mod")"
build "kustomize-$KUSTOMIZE_VERSION" "$kustomize_mod" "$dir" "$KUSTOMIZE_VERSION" -ldflags "-s -w"

# Argo CD, with the version variables its Makefile sets (common.version is what `argocd-* version`
# and the controller's startup log print; kubectlVersion is the k8s.io/kubectl it links).
argocd_mod=github.com/argoproj/argo-cd/v3
dir="$(wrapper_module argocd "$argocd_mod" "$ARGOCD_VERSION" "$argocd_mod/cmd")"
argocd_kubectl="$(cd "$dir" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubectl)"
argocd_ldflags="-s -w -X $argocd_mod/common.version=${ARGOCD_VERSION#v} -X $argocd_mod/common.gitTag=$ARGOCD_VERSION"
argocd_ldflags="$argocd_ldflags -X $argocd_mod/common.gitTreeState=clean -X $argocd_mod/common.kubectlVersion=$argocd_kubectl"
build "argocd-$ARGOCD_VERSION" "$argocd_mod/cmd" "$dir" "$ARGOCD_VERSION" -ldflags "$argocd_ldflags"
# ==== end Argo CD ====================================================================================
