"""DRA limits and formats the API server enforces beyond the schema (notes/k8s-dra-api.md 1.1).

The OpenAPI schema of a ResourceClaim says "a list of requests"; the API server also refuses a
33rd request, a request name that is not a DNS label, a constraint naming a request that does not
exist, a matchAttribute without its domain, a CEL selector over 10 KiB or opaque parameters over
10 KiB, and a claim that could be allocated more than 32 devices. Limits come from facts/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..facts.platform import dra_limits
from ..validate.types import DNS_LABEL, DNS_SUBDOMAIN
from .model import ClusterContext, Finding, as_list

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def claim_devices(manifest: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    """(path, spec.devices) of a ResourceClaim or the claim inside a ResourceClaimTemplate."""
    path: tuple[str, ...] = ("spec",)
    spec = manifest.get("spec")
    if manifest.get("kind") == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, dict) else None
        path = ("spec", "spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    return (path + ("devices",), devices) if isinstance(devices, dict) else None


def request_body(request: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request whatever the API version: under `exactly` (v1beta2, v1) or flat (v1beta1)."""
    exactly = request.get("exactly")
    return exactly if isinstance(exactly, dict) else request


def fully_qualified_problem(name: Any, limits: dict[str, int]) -> str:
    """Why `name` is not `<domain>/<identifier>` (a FullyQualifiedName), or ""."""
    if not isinstance(name, str) or "/" not in name:
        return f"{name!r} must be fully qualified as <domain>/<name>, e.g. gpu.nvidia.com/parentUUID"
    domain, ident = name.split("/", 1)
    if len(domain) > limits["driverNameLength"] or not DNS_SUBDOMAIN.fullmatch(domain.lower()):
        return f"domain '{domain}' must be a DNS subdomain of at most {limits['driverNameLength']} characters"
    if len(ident) > limits["attributeIdLength"] or not _C_IDENTIFIER.fullmatch(ident):
        return f"'{ident}' must be a C identifier of at most {limits['attributeIdLength']} characters"
    return ""


class _Claim:
    """Checks one claim's `devices`; collects findings in order."""

    def __init__(self, obj, base: tuple, devices: dict[str, Any], limits: dict[str, int]) -> None:
        self.obj, self.base, self.devices, self.limits = obj, base, devices, limits
        self.out: list[Finding] = []
        self.flat = str(obj.manifest.get("apiVersion", "")).endswith("/v1beta1")

    def add(self, path: tuple, message: str, hint: str = "") -> None:
        self.out.append(Finding(self.obj, self.base + path, message, hint))

    def count(self, field: str, limit_key: str, what: str, hint: str) -> None:
        items = as_list(self.devices.get(field))
        limit = self.limits[limit_key]
        if len(items) > limit:
            self.add((field,), f"{len(items)} {what}; a claim may have at most {limit}", hint)

    def run(self) -> list[Finding]:
        self.count("requests", "requestsPerClaim", "requests", "split the workload's devices over several claims")
        self.count("constraints", "constraintsPerClaim", "constraints", "merge constraints that list the same requests")
        self.count("config", "configsPerClaim", "config entries", "one entry can list several requests")
        names = self._requests()
        for i, c in enumerate(as_list(self.devices.get("constraints"))):
            if isinstance(c, dict):
                self._constraint(i, c, names)
        for i, c in enumerate(as_list(self.devices.get("config"))):
            if isinstance(c, dict):
                self._references(("config", i, "requests"), c.get("requests"), names)
                opaque = c.get("opaque")
                if isinstance(opaque, dict):
                    self.out.extend(check_opaque(self.obj, self.base + ("config", i, "opaque"), opaque, self.limits))
        return self.out

    def _requests(self) -> set[str]:
        names: set[str] = set()
        total = 0
        for i, request in enumerate(as_list(self.devices.get("requests"))):
            if not isinstance(request, dict):
                continue
            name = request.get("name")
            self._name(("requests", i, "name"), name, names, "request")
            self._request_kind(i, request)
            body = request_body(request)
            subrequests = as_list(request.get("firstAvailable"))  # beside `exactly`, in every version
            if subrequests:
                if len(subrequests) > self.limits["firstAvailable"]:
                    self.add(("requests", i, "firstAvailable"),
                             f"{len(subrequests)} firstAvailable alternatives; at most {self.limits['firstAvailable']}")
                subnames: set[str] = set()
                most = 0
                for j, sub in enumerate(subrequests):
                    if isinstance(sub, dict):
                        self._name(("requests", i, "firstAvailable", j, "name"), sub.get("name"), subnames, "subrequest")
                        self._device_request(("requests", i, "firstAvailable", j), sub)
                        most = max(most, self._devices(sub))
                        if isinstance(name, str) and isinstance(sub.get("name"), str):
                            names.add(f"{name}/{sub['name']}")
                total += most
            else:
                prefix = ("requests", i) + (("exactly",) if body is not request else ())
                self._device_request(prefix, body)
                total += self._devices(body)
        limit = self.limits["devicesPerClaim"]
        if total > limit:
            self.add(("requests",), f"the requests ask for {total} devices in total (sum of counts); a claim can be allocated at most {limit}",
                     "split the devices over several claims, or lower the counts")
        return names

    def _request_kind(self, i: int, request: dict[str, Any]) -> None:
        """A request is either one exact request or a firstAvailable list, never both or neither."""
        alternatives = request.get("firstAvailable") is not None
        if self.flat:  # v1beta1: the exact request's fields sit on the request itself
            exact, what = request.get("deviceClassName") is not None, "deviceClassName (an exact request)"
        else:
            exact, what = request.get("exactly") is not None, "`exactly`"
        if exact and alternatives:
            self.add(("requests", i), f"request has both {what} and firstAvailable; the API server requires exactly one",
                     "keep `firstAvailable` for alternatives in order of preference, or the exact request alone")
        elif not exact and not alternatives and not self.flat and "deviceClassName" not in request:
            # (v1beta1 requires deviceClassName in its schema; exact fields written flat under v1 are the
            # schema check's finding, field by field with the hint to nest them)
            self.add(("requests", i), f"request has neither {what} nor firstAvailable; the API server requires exactly one",
                     "put deviceClassName, selectors and count under `exactly`")

    def _name(self, path: tuple, name: Any, seen: set[str], what: str) -> None:
        if not isinstance(name, str) or not DNS_LABEL.fullmatch(name):
            self.add(path, f"{what} name {name!r} must be a DNS label (lower-case letters, digits and '-', at most 63)")
        elif name in seen:
            self.add(path, f"duplicate {what} name '{name}'", f"{what} names must be unique")
        else:
            seen.add(name)

    @staticmethod
    def _devices(body: dict[str, Any]) -> int:
        if body.get("allocationMode", "ExactCount") != "ExactCount":
            return 0  # mode All: as many as the node has; not a fixed number to add up
        count = body.get("count", 1)
        return count if isinstance(count, int) and not isinstance(count, bool) else 0

    def _device_request(self, path: tuple, body: dict[str, Any]) -> None:
        cls = body.get("deviceClassName")
        if cls is not None and (not isinstance(cls, str) or not DNS_SUBDOMAIN.fullmatch(cls)):
            self.add(path + ("deviceClassName",), f"device class name {cls!r} must be a DNS subdomain")
        mode = body.get("allocationMode", "ExactCount")
        count = body.get("count")
        if mode == "ExactCount" and count is not None and isinstance(count, int) and count <= 0:
            self.add(path + ("count",), f"count must be greater than zero, got {count}")
        elif mode == "All" and count not in (None, 0):
            self.add(path + ("count",), "allocationMode All takes no count", "remove count")
        elif mode not in ("ExactCount", "All"):
            self.add(path + ("allocationMode",), f"unknown allocationMode {mode!r}: ExactCount or All")
        selectors = as_list(body.get("selectors"))
        if len(selectors) > self.limits["selectorsPerRequest"]:
            self.add(path + ("selectors",), f"{len(selectors)} selectors; a request may have at most {self.limits['selectorsPerRequest']}",
                     "join conditions with && in fewer expressions")
        for j, s in enumerate(selectors):
            self.out.extend(check_selector(self.obj, self.base + path + ("selectors", j), s, self.limits))

    def _references(self, path: tuple, refs: Any, names: set[str]) -> None:
        for k, ref in enumerate(as_list(refs)):
            if not isinstance(ref, str) or ref.count("/") > 1:
                self.add(path + (k,), f"{ref!r} must name a request as <request> or <request>/<subrequest>")
            elif ref not in names:
                self.add(path + (k,), _unknown_reference(ref, names))

    def _constraint(self, i: int, c: dict[str, Any], names: set[str]) -> None:
        self._references(("constraints", i, "requests"), c.get("requests"), names)
        fields = [f for f in ("matchAttribute", "distinctAttribute") if f in c]
        if not fields:  # both is legal: a real 1.37 API server takes it (tests/real/test_real_validation.py)
            self.add(("constraints", i), "a constraint needs matchAttribute or distinctAttribute")
        for f in fields:
            problem = fully_qualified_problem(c[f], self.limits)
            if problem:
                self.add(("constraints", i, f), problem)


def _unknown_reference(ref: str, names: set[str]) -> str:
    """Why `ref` names nothing: no such request, or a subrequest its request does not have."""
    request, _, sub = ref.partition("/")
    if request not in names:
        known = ", ".join(sorted(n for n in names if "/" not in n)) or "none"
        return f"no request named '{request}' in this claim (requests: {known})"
    subs = sorted(n.split("/", 1)[1] for n in names if n.startswith(request + "/"))
    if not subs:
        return f"request '{request}' has no subrequests (it is not a firstAvailable list); refer to it as '{request}'"
    return f"request '{request}' has no subrequest '{sub}' (subrequests: {', '.join(subs)})"


def check_selector(obj, path: tuple, selector: Any, limits: dict[str, int]) -> Iterable[Finding]:
    if not isinstance(selector, dict) or not isinstance(selector.get("cel"), dict):
        # DeviceSelector has one field, `cel`; the API server refuses a selector without it.
        yield Finding(obj, path, "a selector needs `cel: {expression: ...}`; it is the only kind of DeviceSelector",
                      "remove the empty selector, or write the condition as a CEL expression")
        return
    expression = selector["cel"].get("expression")
    if not isinstance(expression, str) or not expression.strip():
        yield Finding(obj, path + ("cel", "expression"), "a CEL selector needs a non-empty expression")
        return
    size = len(expression.encode("utf-8"))
    if size > limits["celExpressionLength"]:
        yield Finding(obj, path + ("cel", "expression"),
                      f"CEL expression is {size} bytes; the API server accepts at most {limits['celExpressionLength']} (10 KiB)",
                      "shorten it, or split it into several selectors (a device must match all of them)")


def check_opaque(obj, path: tuple, opaque: dict[str, Any], limits: dict[str, int]) -> Iterable[Finding]:
    driver = opaque.get("driver")
    if not isinstance(driver, str) or len(driver) > limits["driverNameLength"] or not DNS_SUBDOMAIN.fullmatch(driver.lower()):
        yield Finding(obj, path + ("driver",), f"driver {driver!r} must be a DNS subdomain of at most {limits['driverNameLength']} characters")
    if "parameters" not in opaque:
        return
    size = len(json.dumps(opaque["parameters"], separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > limits["opaqueParametersBytes"]:
        yield Finding(obj, path + ("parameters",),
                      f"opaque parameters are {size} bytes of JSON; the API server accepts at most {limits['opaqueParametersBytes']} (10 KiB)")


TEMPLATE_METADATA = ("labels", "annotations")


def check_template_metadata(obj) -> Iterable[Finding]:
    """A ResourceClaimTemplate's spec.metadata may only carry labels and annotations for the claims it creates
    (the schema allows any ObjectMeta field; the API server refuses the others)."""
    spec = obj.manifest.get("spec")
    metadata = spec.get("metadata") if isinstance(spec, dict) else None
    if not isinstance(metadata, dict):
        return
    for key in metadata:
        if key not in TEMPLATE_METADATA:
            yield Finding(obj, ("spec", "metadata", key), f"spec.metadata of a ResourceClaimTemplate allows only labels and "
                          f"annotations, not {key!r}", "the claim's name comes from the pod; remove the field")


def check_dra_limits(ctx: ClusterContext) -> Iterable[Finding]:
    limits = dra_limits()
    for obj in ctx.objects:
        if not obj.api_version.startswith("resource.k8s.io/"):
            continue
        if obj.kind == "ResourceClaimTemplate":
            yield from check_template_metadata(obj)
        if obj.kind in CLAIM_KINDS:
            found = claim_devices(obj.manifest)
            if found is not None:
                yield from _Claim(obj, found[0], found[1], limits).run()
        elif obj.kind == "DeviceClass":
            spec = obj.manifest.get("spec")
            if not isinstance(spec, dict):
                continue
            selectors = as_list(spec.get("selectors"))
            if len(selectors) > limits["selectorsPerRequest"]:
                yield Finding(obj, ("spec", "selectors"), f"{len(selectors)} selectors; a DeviceClass may have at most {limits['selectorsPerRequest']}")
            for j, s in enumerate(selectors):
                yield from check_selector(obj, ("spec", "selectors", j), s, limits)
            configs = as_list(spec.get("config"))
            if len(configs) > limits["configsPerClaim"]:
                yield Finding(obj, ("spec", "config"), f"{len(configs)} config entries; at most {limits['configsPerClaim']}")
            for j, c in enumerate(configs):
                if isinstance(c, dict) and isinstance(c.get("opaque"), dict):
                    yield from check_opaque(obj, ("spec", "config", j, "opaque"), c["opaque"], limits)
