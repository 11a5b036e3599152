# ==== Pulumi (issue 27) ============================================================================
# The Pulumi CLI and the Kubernetes provider, each through a wrapper module in the cache (lib.sh
# wrapper_module: pkg/v3's `sdk/v3 => ../sdk` and the provider's `sdk/v4 => ../sdk` become versions). The provider is then installed into PULUMI_HOME=$cache/pulumi-home
# as the plugin version the Python package asks for, so the engine never downloads a plugin.
# Sourced by harness/build.sh after harness/lib.sh; never run.
# shellcheck shell=bash

pulumi_pkg=github.com/pulumi/pulumi/pkg/v3
dir="$(wrapper_module pulumi "$pulumi_pkg" "$PULUMI_CLI_VERSION" "$pulumi_pkg/cmd/pulumi")"
build "pulumi-$PULUMI_CLI_VERSION" "$pulumi_pkg/cmd/pulumi" "$dir" "$PULUMI_CLI_VERSION" \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_CLI_VERSION"
k8s_provider=github.com/pulumi/pulumi-kubernetes/provider/v4
dir="$(wrapper_module pulumi-kubernetes "$k8s_provider" "$PULUMI_KUBERNETES_PROVIDER_VERSION" "$k8s_provider/cmd/pulumi-resource-kubernetes")"
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
