# ==== Argo CD (issue 33) ============================================================================
# The real Argo CD (one binary, github.com/argoproj/argo-cd/v3/cmd, that runs as the command its
# executable name or $ARGOCD_BINARY_NAME says: argocd-application-controller, argocd-repo-server, ...)
# and kustomize, which its repo server shells out to for a directory holding a kustomization.yaml.
# Sourced after harness/lib.sh ($cache, say, fail, build, wrapper_module, upstream_source); versions: harness/versions.env.
# shellcheck shell=bash

# kustomize reports its version from the build info (its module is a dependency of the wrapper).
kustomize_mod=sigs.k8s.io/kustomize/kustomize/v5
dir="$(wrapper_module kustomize "$kustomize_mod" "$KUSTOMIZE_VERSION" "$kustomize_mod")"
build "kustomize-$KUSTOMIZE_VERSION" "$kustomize_mod" "$dir" "$KUSTOMIZE_VERSION" -ldflags "-s -w"

# Argo CD from ../shared/upstream/src/argo-cd-$ARGOCD_VERSION (a git archive of the tag, copied to the cache by
# lib.sh upstream_source), built as the main module with -mod=mod: its go.mod replaces gitops-engine with the
# nested ./gitops-engine, which no module proxy serves, so the tree builds only as the main module.
# The archive lacks the tag's ui/dist/app/assets/images/resources/.gitkeep, without which ui/embed.go's
# `all:dist/app/assets/images/resources` matches nothing; the copy gets it back.
argocd_mod=github.com/argoproj/argo-cd/v3
copy="$(upstream_source "argo-cd-$ARGOCD_VERSION")"
res="$copy/ui/dist/app/assets/images/resources"
[ -e "$res/.gitkeep" ] || { mkdir -p "$res" && : >"$res/.gitkeep"; }
# Built in the shared graph of the sources on Kubernetes 0.36 (lib.sh shared_graph_sources).
dir="$(source_module "argo-cd-$ARGOCD_VERSION")"
# The version variables its Makefile sets: common.version (what `argocd-* version` and the controller's startup
# log print), the tag, a clean tree, and kubectlVersion as the Makefile computes it (client-go's version).
argocd_kubectl="$(cd "$dir" && go list -mod=mod -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/client-go)"
argocd_ldflags="-s -w -X $argocd_mod/common.version=${ARGOCD_VERSION#v} -X $argocd_mod/common.gitTag=$ARGOCD_VERSION"
argocd_ldflags="$argocd_ldflags -X $argocd_mod/common.gitTreeState=clean -X $argocd_mod/common.kubectlVersion=$argocd_kubectl"
build "argocd-$ARGOCD_VERSION" "$argocd_mod/cmd" "$dir" "$(cat "$copy/.gpuc-stamp") $ARGOCD_VERSION" -mod=mod -ldflags "$argocd_ldflags"
unset argocd_mod copy res argocd_kubectl argocd_ldflags
# ==== end Argo CD ====================================================================================
