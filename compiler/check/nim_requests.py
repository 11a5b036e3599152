"""A NIMService gets the devices of the claim requests it names (draResources[].requests), or the whole claim.

A model that names a request its claim does not have would never start (the operator cannot find it); a
claim whose other requests no container receives holds devices nobody uses (the second slice of a MIG mix),
and a whole multi-request claim given to one model container is often the same waste unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..lower.graph import KubeObject
from .model import ClusterContext, Finding, value_at


def _requests(template: KubeObject) -> list[str]:
    spec = value_at(template.manifest, ("spec", "spec") if template.kind == "ResourceClaimTemplate" else ("spec",))
    requests = value_at(spec, ("devices", "requests")) if isinstance(spec, dict) else None
    return [str(r.get("name")) for r in requests if isinstance(r, dict)] if isinstance(requests, list) else []


def check_nim_requests(ctx: ClusterContext) -> Iterable[Finding]:
    """Damaged objects (another check reports them) are skipped, never crashed on."""
    claims = {(o.kind, o.namespace, o.name): o for o in ctx.objects if o.kind in ("ResourceClaim", "ResourceClaimTemplate")}
    for service in (o for o in ctx.objects if o.kind == "NIMService"):
        entries = value_at(service.manifest, ("spec", "draResources"))
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if not isinstance(entry, dict):
                continue
            kind = "ResourceClaimTemplate" if "resourceClaimTemplateName" in entry else "ResourceClaim"
            claim = claims.get((kind, service.namespace, str(entry.get("resourceClaimTemplateName") or entry.get("resourceClaimName"))))
            if claim is None:
                continue
            have = _requests(claim)
            named = entry.get("requests")
            if isinstance(named, list) and named:
                for j, name in enumerate(named):
                    if name not in have:
                        yield Finding(service, ("spec", "draResources", i, "requests", j),
                                      f"the claim {claim.name} has no request '{name}' (it has {', '.join(have)})",
                                      f"name one of {', '.join(have)} in model.requests")
                idle = [r for r in have if r not in named]
                if idle:
                    yield Finding(service, ("spec", "draResources", i, "requests"),
                                  f"the claim's request(s) {', '.join(idle)} are allocated but no container of the NIM gets "
                                  "their devices: they sit idle", "drop them from the workload's gpu request, or list them in "
                                  "model.requests", "warning")
            elif len(have) > 1:
                yield Finding(service, ("spec", "draResources", i),
                              f"the NIM's container gets every device of the claim's {len(have)} requests ({', '.join(have)}); "
                              "a model that runs on one of them leaves the others idle",
                              "name the requests the model uses in model.requests", "warning")
