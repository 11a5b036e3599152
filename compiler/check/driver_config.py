"""Opaque driver configs (GpuConfig, MigDeviceConfig, ...) as the NVIDIA DRA driver decodes them.

The API server stores `opaque.parameters` unread; the driver decodes them strictly when a pod is
prepared, so a bad config surfaces as a pod stuck in ContainerCreating. gpuc checks them at render
time against the config API of the cluster's driver line (facts/data/driver_config.yaml): unknown
fields, enum values and ranges, the driver's Validate() rules, the feature gate a sharing strategy
needs, and that a config kind only targets requests for its device type (GpuConfig: full GPUs,
MigDeviceConfig: MIG devices).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from ..facts import load_table
from ..facts.driver import DriverLine, builtin_class_device_types, capability, gates_on
from ..facts.driver_config import ConfigKind, config_api_version, config_kind_lines, config_kinds
from ..lower.graph import KubeObject
from .cel_rules import CelRules
from .dra_limits import CLAIM_KINDS, claim_devices, request_body
from .model import ClusterContext, Finding, as_list, value_at
from .schema import Compiler, Node, validate

_TYPE_SELECTOR = re.compile(r"\.type\s*==\s*['\"](\w+)['\"]")


@cache
def _schema(line_id: str, kind: str) -> Node:
    return Compiler(structural=True).compile(config_kinds(line_id)[kind].schema)


def effective_gates(ctx: ClusterContext) -> dict[str, bool]:
    """Driver feature gates as the compiled chart values set them, over each gate's default."""
    line = ctx.cluster.driver
    effective = {name: fact.default for name, fact in gates_on(line).items()}
    values = ctx.compiled.driver_values.get("featureGates")
    if isinstance(values, dict):
        effective.update({k: v for k, v in values.items() if isinstance(v, bool)})
    return effective


def class_device_types(objects: list[KubeObject]) -> dict[str, str]:
    """DeviceClass name -> device type: the chart's classes, and gpuc's from their `type` selector."""
    types = dict(builtin_class_device_types())
    for obj in objects:
        if obj.kind != "DeviceClass":
            continue
        for selector in as_list(value_at(obj.manifest, ("spec", "selectors"))):
            expression = value_at(selector, ("cel", "expression"))
            match = _TYPE_SELECTOR.search(expression) if isinstance(expression, str) else None
            if match:
                types[obj.name] = match.group(1)
                break
    return types


def request_classes(devices: dict[str, Any]) -> dict[str, str]:
    """Request (and `request/subrequest`) name -> device class name."""
    out: dict[str, str] = {}
    for request in as_list(devices.get("requests")):
        if not isinstance(request, dict) or not isinstance(request.get("name"), str):
            continue
        body = request_body(request)
        if isinstance(body.get("deviceClassName"), str):
            out[request["name"]] = body["deviceClassName"]
        for sub in as_list(request.get("firstAvailable")):
            if isinstance(sub, dict) and isinstance(sub.get("name"), str) and isinstance(sub.get("deviceClassName"), str):
                out[f"{request['name']}/{sub['name']}"] = sub["deviceClassName"]
    return out


class _Configs:
    def __init__(self, ctx: ClusterContext) -> None:
        self.line: DriverLine = ctx.cluster.driver
        self.kinds = config_kinds(self.line.id)
        self.drivers = {k.driver for k in self.kinds.values()}
        self.gates = effective_gates(ctx)
        webhook = ctx.compiled.driver_values.get("webhook")
        self.webhook = isinstance(webhook, dict) and webhook.get("enabled") is True  # chart value webhook.enabled (default off)
        self.class_types = class_device_types(ctx.objects)
        self.rules = CelRules()
        self._validated: dict[tuple[str, str], list] = {}  # (config kind, canonical JSON) -> violations

    def check(self, obj: KubeObject, path: tuple, opaque: dict[str, Any], targets: dict[str, str] | None) -> Iterable[Finding]:
        """One `opaque` entry; `targets` maps the requests it applies to onto their device classes."""
        driver = opaque.get("driver")
        if not isinstance(driver, str) or driver not in self.drivers:
            return  # another vendor's driver: its config API is not gpuc's to judge
        params = opaque.get("parameters")
        at = path + ("parameters",)
        if not isinstance(params, dict):
            yield Finding(obj, at, f"{driver} expects parameters to be an object with apiVersion and kind")
            return
        if params.get("apiVersion") != config_api_version():
            yield Finding(obj, at + ("apiVersion",), f"the {driver} driver decodes apiVersion {config_api_version()}, got {params.get('apiVersion')!r}")
            return
        name = params.get("kind")
        kind = self.kinds.get(name) if isinstance(name, str) else None
        if kind is None:
            lines = config_kind_lines(str(name))
            hint = (f"{name} exists on driver lines {lines}" if lines else
                    f"config kinds of driver {self.line.id}: {', '.join(self.kinds)}")
            yield Finding(obj, at + ("kind",), f"driver {self.line.id} has no config kind {name!r}", hint)
            return
        if kind.driver != driver:
            if driver in load_table("driver_config")["ignoresOtherKinds"]:
                yield Finding(obj, path + ("driver",), f"{kind.name} is decoded by driver {kind.driver}, not {driver}: "
                              f"the {driver} driver ignores it", f"set driver: {kind.driver}", severity="warning")
            else:
                yield Finding(obj, path + ("driver",), f"{kind.name} is decoded by driver {kind.driver}, not {driver}")
            return
        if kind.webhook_refuses and self.webhook:
            yield Finding(obj, at + ("kind",), f"{kind.name}: {kind.webhook_refuses}, and draDriver.values turn it on",
                          "turn the webhook off (webhook.enabled: false), or leave the config out (the kubelet plugin then "
                          f"applies its defaults to the {kind.device_type} device)")
        params = _without_nulls(params)
        for v in self._violations(kind, params):
            yield Finding(obj, at + v.path, v.message, v.hint, v.severity)
        yield from self._gates(obj, at, params, kind)
        yield from self._device_types(obj, path, kind, targets)

    def _violations(self, kind: ConfigKind, params: dict[str, Any]) -> list:
        """Schema and CEL-rule violations of one config, relative to it: thousands of claims carry a few
        distinct configs, so each distinct one is validated once."""
        key = (kind.name, json.dumps(params, sort_keys=True, default=repr))
        found = self._validated.get(key)
        if found is None:
            found = self._validated[key] = list(validate(_schema(self.line.id, kind.name), params, rules=self.rules))
        return found

    def _gates(self, obj: KubeObject, at: tuple, params: dict[str, Any], kind: ConfigKind) -> Iterable[Finding]:
        if not self.line.has_feature_gates:
            return  # 25.3 accepts every strategy without gates
        needs: list[tuple[tuple, str, str]] = []
        sharing = params.get("sharing")
        if isinstance(sharing, dict) and sharing.get("strategy") in ("TimeSlicing", "MPS"):
            needs.append((("sharing", "strategy"), f"strategy {sharing['strategy']}", capability(sharing["strategy"])["gate"]))
        if "fabricTopologyConfig" in params and "fabricTopologyConfig" in kind.schema.get("properties", {}):
            needs.append((("fabricTopologyConfig",), "fabricTopologyConfig", capability("topologyConfig")["gate"]))
        for field, what, gate in needs:
            if not self.gates.get(gate, False):
                yield Finding(obj, at + field, f"the driver refuses {what} unless feature gate {gate} is on, and the chart values leave it off",
                              f"set draDriver.values.featureGates.{gate}: true (gpuc sets it when a workload needs it: "
                              "an explicit false overrides that)")

    def _device_types(self, obj: KubeObject, path: tuple, kind: ConfigKind, targets: dict[str, str] | None) -> Iterable[Finding]:
        if targets is None:
            return
        typed = {req: self.class_types.get(cls) for req, cls in targets.items()}
        explicit = path[:-1] + ("requests",)
        if obj.kind != "DeviceClass" and isinstance(value_at(obj.manifest, explicit), list) and value_at(obj.manifest, explicit):
            for i, req in enumerate(value_at(obj.manifest, explicit)):
                device_type = typed.get(req) if isinstance(req, str) else None
                if device_type is not None and device_type != kind.device_type:
                    right = next((k.name for k in self.kinds.values() if k.device_type == device_type), "")
                    yield Finding(obj, explicit + (i,),
                                  f"{kind.name} applies only to {kind.device_type} devices; request '{req}' asks for {device_type} "
                                  f"devices (class {targets[req]}): the driver fails to prepare the claim",
                                  f"use {right} for this request" if right else "target only matching requests")
        elif typed and all(t is not None and t != kind.device_type for t in typed.values()):
            yield Finding(obj, path + ("parameters", "kind"),
                          f"{kind.name} configures {kind.device_type} devices, but every request here is for "
                          f"{', '.join(sorted({t for t in typed.values() if t}))} devices: the driver ignores it", severity="warning")


def check_driver_configs(ctx: ClusterContext) -> Iterable[Finding]:
    configs = _Configs(ctx)
    for obj in ctx.objects:
        if not obj.api_version.startswith("resource.k8s.io/"):
            continue
        if obj.kind in CLAIM_KINDS:
            found = claim_devices(obj.manifest)
            if found is None:
                continue
            base, devices = found
            classes = request_classes(devices)
            for i, entry in enumerate(as_list(devices.get("config"))):
                if not isinstance(entry, dict) or not isinstance(entry.get("opaque"), dict):
                    continue
                refs = entry.get("requests")
                targets = ({r: classes[r] for r in refs if isinstance(r, str) and r in classes}
                           if isinstance(refs, list) and refs else classes)
                yield from configs.check(obj, base + ("config", i, "opaque"), entry["opaque"], targets)
        elif obj.kind == "DeviceClass":
            for i, entry in enumerate(as_list(value_at(obj.manifest, ("spec", "config")))):
                if isinstance(entry, dict) and isinstance(entry.get("opaque"), dict):
                    yield from configs.check(obj, ("spec", "config", i, "opaque"), entry["opaque"], {obj.name: obj.name})


def _without_nulls(value: Any) -> Any:
    """`parameters` as the driver's decoder sees them: Go's encoding/json leaves a field it reads null at its zero
    value, so `sharing: null` is the same as no sharing (the webhook admits it; Normalize fills the defaults)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
