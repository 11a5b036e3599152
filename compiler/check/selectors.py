"""Output check: every CEL selector gpuc emits, and every raw `require.cel` a user writes, must compile,
read only what the cluster's DRA driver publishes, and match at least one device of the cluster.

Pure: a CompiledCluster and its Inventory in, Diagnostics out, each pointing at the intent line that
produced the selector (KubeObject.origin). Selectors are judged as the scheduler evaluates them: a
DeviceClass's in order over every device, a request's after its class's, each over the devices the
earlier ones let through, so "matches nothing" names the selector that cut the last device.
"""

from __future__ import annotations

import functools
from typing import Any

from ..cel import Problem, Published, analyse, check_expression, compile_selector, parse
from ..cel.engine import nesting, stack_for
from ..diagnostics import Diagnostic, Path, did_you_mean, format_path
from ..facts.driver import driver_lines
from ..load.yaml_source import SourceDoc
from ..lower import selectors as sel
from ..lower.extended_resources import GUARD
from ..lower.graph import CompiledCluster, KubeObject
from ..place import dra_values
from ..place.allocator.pods import device_classes
from ..place.allocator.reasons import pretty, values_hint
from ..place.allocator.requests import ClaimError, DeviceClass, parse_claim_spec, parse_device_class
from ..place.inventory import Device, Inventory, published
from ..place.inventory.published import undeclared_host_attributes, with_nics
from ..place.inventory.selection import select
from ..place.inventory.synth import SYNTHESIZED
from ..plan.sizing import floor_text
from ..validate.intents import Require


def _require_paths(raw: Any, base: Path) -> dict[str, Path]:
    """Selector text -> the `require` field that produced it (require_selectors is run one field at a time)."""
    paths: dict[str, Path] = {}
    if not isinstance(raw, dict):
        return paths
    for alias, value in raw.items():
        if alias == "cel":
            paths.update({expr: base + ("require", "cel", i) for i, expr in enumerate(value or []) if isinstance(expr, str)})
            continue
        try:
            single = Require.model_validate({alias: value})
        except ValueError:
            continue
        paths.update({expr: base + ("require", alias) for expr in sel.require_selectors(single)})
    return paths


def selector_paths(origin: SourceDoc, sizing_floor: int | None = None) -> tuple[dict[str, Path], Path]:
    """Selector text -> intent field path, and the path to use for anything else, for one intent document."""
    value = origin.value if isinstance(origin.value, dict) else {}
    spec = value.get("spec") if isinstance(value.get("spec"), dict) else {}
    spec = spec if isinstance(spec, dict) else {}
    section: Any = spec
    base: Path = ("spec",)
    if value.get("kind") != "GpuDeviceClass":
        base = ("spec", "gpu")
        section = spec.get("gpu")
    section = section if isinstance(section, dict) else {}
    paths = _require_paths(section.get("require"), base)
    slices = (section.get("mig") or {}).get("slices") if isinstance(section.get("mig"), dict) else None
    for i, s in enumerate(slices or []):
        if isinstance(s, dict) and isinstance(s.get("profile"), str):
            paths.setdefault(sel.profile_is(s["profile"]), base + ("mig", "slices", i, "profile"))
    if slices and base == ("spec",):
        profiles = sorted({s["profile"] for s in slices if isinstance(s, dict) and isinstance(s.get("profile"), str)})
        paths.setdefault(sel.profile_in(profiles), base + ("mig", "slices"))
    if sizing_floor:
        paths.setdefault(sel.min_memory(floor_text(sizing_floor)), ("spec", "model"))
    return paths, base


def _published_by(ref: Any) -> list[str]:
    found = []
    for line in driver_lines().values():
        names = published(line).attributes.get(ref.domain, {}) if ref.field == "attributes" else ()
        if ref.name in names or (ref.field == "capacity" and published(line).has_capacity(ref.domain, ref.name)):
            found.append(line.id)
    return found


class _Checker:
    def __init__(self, compiled: CompiledCluster, inventory: Inventory) -> None:
        self.compiled = compiled
        self.cluster = compiled.cluster
        self.published: Published = with_nics(published(compiled.cluster.driver), compiled.cluster.pools)
        self.inventory = inventory
        self.devices = list(inventory.devices)
        self.classes = device_classes(compiled, dra_values(compiled))
        self.findings: list[Diagnostic] = []
        self._class_devices: dict[str, list[Device]] = {}
        self._floors = {p.intent.source.ref: p.min_memory for p in compiled.plan.workloads}
        self.emitted_classes = {o.name for o in compiled.objects if o.kind == "DeviceClass"}
        self.used_classes = {p.workload.spec.gpu.class_ for p in compiled.plan.workloads}
        # Thousands of claims share a handful of selector chains: each static check and each filtering
        # step is computed once per (device scope, selectors so far) and reused.
        self._problems: dict[str, list[Problem]] = {}
        self._steps: dict[tuple, tuple[list[Device], int, str]] = {}
        # host facts no pool declared are absent from a synthesized inventory, not absent from the cluster
        self.undeclared = undeclared_host_attributes(compiled.cluster.driver, compiled.cluster.dra_pools) \
            if inventory.source == SYNTHESIZED else {}
        self._host_reads: dict[str, list[tuple[str, str]]] = {}

    def problems(self, text: str) -> list[Problem]:
        found = self._problems.get(text)
        if found is None:
            found = self._problems[text] = check_expression(text, self.published)
        return found

    def step(self, key: tuple, text: str, devices: list[Device]) -> tuple[list[Device], int, str]:
        """The devices of `devices` that `text` matches, how many it fails on, and the first failure."""
        found = self._steps.get(key)
        if found is None:
            indices, failures = select(self.inventory, compile_selector(text), tuple(d.index for d in devices))
            every = self.inventory.devices
            first = next(iter(failures), None)
            failure = "" if first is None else f"{every[first].driver}/{every[first].name}: {failures[first]}"
            found = self._steps[key] = ([every[i] for i in indices], len(failures), failure)
        return found

    def host_reads(self, text: str) -> list[tuple[str, str]]:
        """The undeclared host attributes `text` reads (called once check_expression found `text` compiles)."""
        if not self.undeclared:
            return []
        found = self._host_reads.get(text)
        if found is None:
            tree = parse(text)
            with stack_for(nesting(tree)):
                refs = analyse(tree).refs
            found = self._host_reads[text] = sorted(
                {(r.domain, r.name) for r in refs if r.field == "attributes" and (r.domain, r.name) in self.undeclared})  # type: ignore[misc]
        return found

    def host_finding(self, origin: SourceDoc, path: Path, label: str, attribute: tuple[str, str]) -> None:
        field, pools = self.undeclared[attribute]
        self.add(origin, path, f"{label} reads {attribute[0]}/{attribute[1]}, which the driver publishes from the host, not the GPU "
                 f"model, and pool(s) {', '.join(pools)} of cluster '{self.cluster.name}' do not declare it: gpuc cannot tell "
                 "which devices it matches", f"declare what those nodes publish in nodePools[].host.{field} (see `kubectl get "
                 "resourceslices -o yaml` on one of them), or plan against the cluster's own slices with --state")

    def add(self, origin: SourceDoc, path: Path, message: str, hint: str = "", severity: str = "error") -> None:
        self.findings.append(Diagnostic(origin.file, origin.line_of(path), format_path(path), message, hint, severity))  # type: ignore[arg-type]

    def _hint(self, problem: Problem) -> str:
        ref = problem.ref
        if problem.code == "unpublished" and ref is not None:
            lines = _published_by(ref)
            if lines:
                return f"{ref} is published by driver {', '.join(lines)}; this cluster runs {self.cluster.spec.dra_driver.version}"
            names = self.published.attributes.get(ref.domain or "", {}) if ref.field == "attributes" else \
                self.published.capacities.get(ref.domain or "", ())
            return did_you_mean(ref.name or "", names) or f"published in {ref.domain}: {', '.join(sorted(names))}"
        if problem.code == "unknown-domain" and ref is not None:
            return did_you_mean(ref.domain or "", self.published.attributes) or \
                f"domains the drivers publish: {', '.join(self.published.attributes)}"
        return ""

    def chain(self, obj: KubeObject, label: str, texts: tuple[str, ...], devices: list[Device], scope: str) -> None:
        """Check `texts` in order, each over the devices the earlier ones matched (`scope` names `devices`)."""
        located = functools.cache(lambda: selector_paths(obj.origin, self._floors.get(obj.origin.ref)))

        def where(text: str) -> Path:  # the intent field behind `text`, worked out only when there is a finding
            paths, base = located()
            return paths.get(text, base)

        for i, text in enumerate(texts):
            problems = self.problems(text)
            if any(p.code == "too-long" for p in problems):
                return  # the DRA-limits check reports the length; the API server compiles nothing longer
            for p in problems:
                self.add(obj.origin, where(text), f"{label}: selector `{text}`: {p.message}", self._hint(p), p.severity)
            if any(p.severity == "error" for p in problems):
                return
            host = self.host_reads(text)
            for attribute in host:
                self.host_finding(obj.origin, where(text), f"{label}: selector `{text}`", attribute)
            if host:
                return
            matched, failed, failure = self.step((scope, texts[: i + 1]), text, devices)
            if failed:
                scope_text = f"every one of the {failed} devices" if failed == len(devices) else f"{failed} of {len(devices)} devices, first"
                self.add(obj.origin, where(text), f"{label}: selector `{text}` fails on {scope_text} {failure}; the scheduler aborts "
                         "allocation when it reaches such a device", "guard the read with has(...), or narrow the class first")
                if failed == len(devices):
                    return
            if devices and not matched:
                message = (f"{label}: selector {pretty(text)} matches none of the {len(devices)} devices "
                           f"of cluster '{self.cluster.name}' that get this far" + values_hint(text, devices))
                if obj.kind == "DeviceClass" and obj.name not in self.used_classes:  # inert here: a platform class for other clusters
                    self.add(obj.origin, where(text), message + "; no workload on this cluster uses the class",
                             f"list the clusters it is for in the class's spec.clusters (this is '{self.cluster.name}')", "warning")
                else:
                    self.add(obj.origin, where(text), message, "relax the requirement, or check the cluster's devices with `gpuc inventory`")
                return
            devices = matched

    def class_devices(self, cls: DeviceClass) -> list[Device]:
        found = self._class_devices.get(cls.name)
        if found is None:
            indices = tuple(range(len(self.devices)))
            for text in cls.selectors:
                try:
                    selector = compile_selector(text)
                except ValueError:
                    return []
                indices = select(self.inventory, selector, indices)[0]  # a device a selector fails on is not selected
            found = self._class_devices[cls.name] = [self.devices[i] for i in indices]
        return found

    def device_class(self, obj: KubeObject) -> None:
        try:
            cls = parse_device_class(obj.manifest)
        except ClaimError:
            return  # a malformed class is the schema and DRA-limit checks' finding
        if obj.component == GUARD:
            return  # maps an extended resource onto no device, on purpose (lower.extended_resources)
        self.chain(obj, f"DeviceClass {obj.name}", cls.selectors, self.devices, "(all devices)")

    def claim(self, obj: KubeObject) -> None:
        name = f"{obj.kind} {obj.namespace}/{obj.name}"
        body = obj.manifest.get("spec")
        spec = body.get("spec") if obj.kind == "ResourceClaimTemplate" and isinstance(body, dict) else body
        try:
            claim = parse_claim_spec(spec)
        except ClaimError:
            return  # a malformed claim is the schema and DRA-limit checks' finding
        for request in claim.requests:
            for option in request.options:
                label = f"{name} request '{option.name}'"
                cls = self.classes.get(option.device_class)
                if cls is None:
                    self.add(obj.origin, ("spec", "gpu"), f"{label}: DeviceClass '{option.device_class}' does not exist on "
                             f"cluster '{self.cluster.name}'", did_you_mean(option.device_class, self.classes))
                    continue
                base = self.class_devices(cls)
                if not base and option.device_class in self.emitted_classes:
                    continue  # reported at the DeviceClass itself
                if not base:
                    self.add(obj.origin, ("spec", "gpu"), f"{label}: DeviceClass {cls.name} selects none of the devices of "
                             f"cluster '{self.cluster.name}'", "check the cluster's devices with `gpuc inventory`")
                    continue
                self.chain(obj, label, option.selectors, base, f"class {cls.name}")
        for constraint in claim.constraints:
            domain, _, attribute = constraint.attribute.rpartition("/")
            if (domain, attribute) in self.undeclared:
                self.host_finding(obj.origin, ("spec", "gpu"), f"{name}: matchAttribute {constraint.attribute}", (domain, attribute))
            elif attribute not in self.published.attributes.get(domain, {}):
                self.add(obj.origin, ("spec", "gpu"), f"{name}: matchAttribute {constraint.attribute} is not published by "
                         f"driver {self.cluster.spec.dra_driver.version}, so no device can satisfy the constraint")


def check_selectors(compiled: CompiledCluster, inventory: Inventory) -> list[Diagnostic]:
    """Findings for every selector of the cluster's DeviceClasses and claims, in a stable order."""
    checker = _Checker(compiled, inventory)
    for obj in compiled.sorted_objects():
        if obj.kind == "DeviceClass":
            checker.device_class(obj)
        elif obj.kind in ("ResourceClaimTemplate", "ResourceClaim"):
            checker.claim(obj)
    return sorted(set(checker.findings))
