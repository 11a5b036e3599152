# ==== Pulumi (issue 27) ============================================================================
# The Pulumi CLI and the Kubernetes provider, each through a wrapper module in the cache (lib.sh
# wrapper_module: pkg/v3's `sdk/v3 => ../sdk` and the provider's `sdk/v4 => ../sdk` become versions). The provider is then installed into PULUMI_HOME=$cache/pulumi-home
# as the plugin version the Python package asks for, so the engine never downloads a plugin.
# Sourced by harness/build.sh after harness/lib.sh; never run.
# shellcheck shell=bash

pulumi_pkg=github.com/pulumi/pulumi/pkg/v3
k8s_provider=github.com/pulumi/pulumi-kubernetes/provider/v4
dir="$(wrapper_module pulumi "$pulumi_pkg" "$PULUMI_CLI_VERSION" "$pulumi_pkg/cmd/pulumi")"
build "pulumi-$PULUMI_CLI_VERSION" "$pulumi_pkg/cmd/pulumi" "$dir" "$PULUMI_CLI_VERSION" \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_CLI_VERSION"
cli_job="$last_job"
# Its own wrapper: in one module with the CLI (issue 44 tried it, to compile what they share once) minimal version
# selection gives the provider the CLI's pkg/v3 v3.274.1 instead of the v3.215.0 it asks for, and its pkg/gen does
# not compile against it (schema.go: PackageSpec.Resources holds *schema.ResourceSpec there).
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
provider_job="$last_job"
plugin_stamp="$built_stamp $PULUMI_KUBERNETES_PLUGIN_VERSION"  # the provider's stamp once built

# The provider as plugin kubernetes $PULUMI_KUBERNETES_PLUGIN_VERSION, reinstalled when the binary changes: queued
# after the two builds above (when they were queued), since it runs the CLI on the provider.
home="$cache/pulumi-home" plugin="resource-kubernetes-v$PULUMI_KUBERNETES_PLUGIN_VERSION"
cli="$cache/bin/pulumi-$PULUMI_CLI_VERSION" provider="$cache/bin/pulumi-resource-kubernetes-$PULUMI_KUBERNETES_PROVIDER_VERSION"
if [ "$(cat "$home/$plugin.stamp" 2>/dev/null)" = "$plugin_stamp" ]; then
  say "$plugin" "installed: $home/plugins/$plugin"
else
  # shellcheck disable=SC2016
  queue_after="$cli_job $provider_job" queue "$dir" "$plugin" bash -c '
    home="$1" plugin="$2" cli="$3" provider="$4" version="$5" log="$6" stamp="$7"
    rm -rf "$home/plugins/$plugin" "$home/plugins/$plugin.lock" "$home/plugins/$plugin.partial"
    PULUMI_HOME="$home" PULUMI_SKIP_UPDATE_CHECK=true "$cli" plugin install resource kubernetes "$version" --file "$provider" \
      >"$log" 2>&1 || { cat "$log" >&2; echo "harness/build.sh: installing the provider as $plugin failed" >&2; exit 1; }
    echo "$stamp" >"$home/$plugin.stamp"
    printf "%-26s %s\n" "$plugin" "installed: $home/plugins/$plugin"' \
    _ "$home" "$plugin" "$cli" "$provider" "$PULUMI_KUBERNETES_PLUGIN_VERSION" "$cache/log/$plugin.log" "$plugin_stamp"
fi
# The CLI where the Automation API looks for it (PulumiCommand(root=PULUMI_HOME) runs $root/bin/pulumi).
mkdir -p "$home/bin" && ln -sfn "../../bin/pulumi-$PULUMI_CLI_VERSION" "$home/bin/pulumi"
unset pulumi_pkg k8s_provider main src home plugin cli provider plugin_stamp cli_job provider_job
# ==== end Pulumi =====================================================================================
