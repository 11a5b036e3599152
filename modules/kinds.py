"""One compiled manifest -> the pulumi-kubernetes resource that applies it, unchanged.

Built-in kinds get their typed class (`resource.v1.DeviceClass`, `core.v1.ConfigMap`, ...) so the
provider knows their schema and await logic; custom kinds (NIMCache, NIMService, ComputeDomain)
become `apiextensions.CustomResource`. Partial objects that other tools own (a ClusterPolicy in
gpuOperator.mode patch, Node labels) become the `...Patch` variants, which pulumi-kubernetes applies
with server-side apply and relinquishes on delete instead of deleting the object.

The manifest body is passed through as it is: no field is added, renamed or re-derived here.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from compiler.lower.graph import KubeObject

# Top-level manifest keys that are not resource arguments: the class itself sets them.
TYPE_KEYS = ("apiVersion", "kind")
CUSTOM_FIELDS = ("metadata", "spec")  # all CustomResource(Patch) accepts besides apiVersion/kind


class UnsupportedObject(Exception):
    """The installed pulumi-kubernetes cannot express a compiled object (kind, version or field)."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """`resource.k8s.io/v1` -> (`resource.k8s.io`, `v1`); `v1` -> (``, `v1`)."""
    group, _, version = api_version.rpartition("/")
    return group, version


def is_builtin_group(group: str) -> bool:
    """Kubernetes' own API groups: core, single-word groups (apps, batch, ...) and `*.k8s.io`."""
    return group == "" or "." not in group or group.endswith(".k8s.io")


def _sdk_module(group: str) -> str:
    """pulumi-kubernetes names a group's module after its first label (`rbac.authorization.k8s.io` -> `rbac`)."""
    return "core" if group == "" else group.split(".")[0]


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def typed_class(api_version: str, kind: str, patch: bool) -> tuple[type[pulumi.CustomResource], type]:
    """The typed resource class and its Args class, or UnsupportedObject naming what is missing."""
    group, version = split_api_version(api_version)
    name = kind + ("Patch" if patch else "")
    module_name = f"pulumi_kubernetes.{_sdk_module(group)}.{version}"
    try:
        module = importlib.import_module(module_name)
        return getattr(module, name), getattr(module, f"{name}Args")
    except (ImportError, AttributeError):
        raise UnsupportedObject(
            f"pulumi-kubernetes {k8s_version()} has no {name} for {api_version}; install a release that has it "
            "(resource.k8s.io/v1 arrived in pulumi-kubernetes 4.26)") from None


def k8s_version() -> str:
    try:
        return version("pulumi-kubernetes")
    except PackageNotFoundError:
        return "(unknown version)"


def _typed_kwargs(obj: KubeObject, args_class: type) -> dict[str, Any]:
    accepted = set(inspect.signature(args_class).parameters)
    kwargs: dict[str, Any] = {}
    for key, value in obj.manifest.items():
        if key in TYPE_KEYS:
            continue
        arg = _snake(key)
        if arg not in accepted:
            raise UnsupportedObject(f"{obj.kind} {obj.namespace}/{obj.name}: field '{key}' has no {args_class.__name__} argument")
        kwargs[arg] = value
    return kwargs


def _custom_kwargs(obj: KubeObject) -> dict[str, Any]:
    extra = sorted(set(obj.manifest) - set(TYPE_KEYS) - set(CUSTOM_FIELDS))
    if extra:
        raise UnsupportedObject(f"{obj.kind} {obj.namespace}/{obj.name}: top-level field(s) {', '.join(extra)} cannot be "
                                "passed to apiextensions.CustomResource, which takes only metadata and spec")
    return {key: obj.manifest[key] for key in CUSTOM_FIELDS if key in obj.manifest}


def resource_name(obj: KubeObject) -> str:
    """Pulumi's logical name: `namespace/identity`, the object's name without the spec hash that claims,
    claim templates and ComputeDomains carry. A spec change renames such an object (its spec is immutable);
    under a stable logical name Pulumi plans that as the replacement it is (create the new object, then
    delete the old), as `gpuc diff` reports it, instead of an unrelated create and delete."""
    return f"{obj.namespace}/{obj.identity}" if obj.namespace else obj.identity


def earlier_names(obj: KubeObject) -> list[str]:
    """Logical names the same object had in stacks deployed before `resource_name` used the identity
    (`namespace/name`, hash included): aliases, so their state is adopted instead of recreated."""
    old = f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
    return [old] if old != resource_name(obj) else []


Factory = Callable[[pulumi.ResourceOptions], pulumi.CustomResource]


def object_factory(obj: KubeObject) -> Factory:
    """How to register `obj` exactly as compiled; raises UnsupportedObject before anything is registered."""
    group, _ = split_api_version(obj.api_version)
    if is_builtin_group(group):
        cls, args_class = typed_class(obj.api_version, obj.kind, obj.patch)
        kwargs = _typed_kwargs(obj, args_class)
        return lambda opts: cls(resource_name(obj), opts=_with_aliases(obj, opts), **kwargs)
    custom = k8s.apiextensions.CustomResourcePatch if obj.patch else k8s.apiextensions.CustomResource
    fields = _custom_kwargs(obj)
    return lambda opts: custom(resource_name(obj), api_version=obj.api_version, kind=obj.kind, opts=_with_aliases(obj, opts),
                               **fields)


def _with_aliases(obj: KubeObject, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    names = earlier_names(obj)
    if not names:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(name=n) for n in names]))
