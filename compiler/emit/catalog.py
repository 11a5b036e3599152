"""`gpuc catalog`: what gpuc knows, straight from its fact tables (GPU models, MIG profiles, driver lines,
Kubernetes versions and their DRA gates), so a team can see what an intent may name before writing it."""

from __future__ import annotations

from typing import Any

from ..facts import catalog, load_table
from ..facts.driver import driver_lines
from ..facts.platform import dra_gates, gpu_operator, nim_operator
from ..facts.providers import providers


def _profiles(model: catalog.GpuModel) -> list[str]:
    if model.mig is None:
        return []
    profiles = model.mig.profiles
    return sorted(profiles, key=lambda p: (profiles[p].compute_slices, p))


def catalog_data() -> dict[str, Any]:
    kubernetes = load_table("kubernetes")["resourceApi"]
    gates = dra_gates()
    return {
        "gpuModels": [{
            "model": key, "productName": m.product_name, "architecture": m.architecture, "memoryMiB": m.memory_mib,
            "nvlink": m.nvlink, "multiNodeNvlink": m.multi_node_nvlink,
            "migProfiles": _profiles(m),
            "provenance": {group: {"kind": kind, "source": source} for group, kind, source in m.provenance.kinds},
            "estimatedMigProfiles": list(m.provenance.estimated),
        } for key, m in catalog.gpu_models().items()],
        "draDriverLines": [{"line": line.id, "versions": line.versions, "releases": list(line.releases),
                            "chart": f"{line.chart_repository}/{line.chart_name}",
                            "image": line.image} for line in sorted(driver_lines().values(), key=lambda x: x.order)],
        "kubernetesVersions": [{"version": version, "resourceApi": entry["version"],
                                "draGatesOnByDefault": sorted(n for n, g in gates.items() if g.on_by_default(int(version.split(".")[1])))}
                               for version, entry in kubernetes.items()],
        "gpuOperator": {"releases": list(gpu_operator()["releases"]), "gpuClusterModeSince": gpu_operator()["gpuCluster"]["since"]},
        "nimOperator": {"chart": nim_operator()["chart"]["name"]},
        "providers": [{"provider": p.key, "name": p.name, "draNodeLabels": dict(p.dra_node_labels), "nodeSetup": p.node_setup,
                       "criticalPodsQuota": p.critical_pods_quota, "docs": p.docs} for p in providers().values()],
    }


def _provenance_text(model: dict[str, Any]) -> str:
    """`memory measured, MIG observed (3g.90gb, 7g.180gb estimated)`: how far to trust each group of facts."""
    parts = []
    for group, entry in model["provenance"].items():
        estimated = f" ({', '.join(model['estimatedMigProfiles'])} estimated)" if group == "mig" and model["estimatedMigProfiles"] else ""
        parts.append(f"{'MIG' if group == 'mig' else group} {entry['kind']}{estimated}")
    return ", ".join(parts)


def catalog_text(data: dict[str, Any]) -> str:
    lines = ["GPU models (nodePools[].gpu.model; each fact's source: gpuc catalog --output json):"]
    width = max(len(m["model"]) for m in data["gpuModels"])
    for m in data["gpuModels"]:
        mig = f"MIG {', '.join(m['migProfiles'])}" if m["migProfiles"] else "no MIG"
        nvlink = {"mnnvl": "multi-node NVLink", "nvswitch": "NVSwitch", "none": "no NVLink"}.get(m["nvlink"], m["nvlink"])
        lines.append(f"  {m['model'].ljust(width)}  {m['productName']}, {m['architecture']}, {m['memoryMiB'] // 1024} GiB, {nvlink}; {mig}")
        lines.append(f"  {''.ljust(width)}  facts: {_provenance_text(m)}")
    lines += ["", "DRA driver lines (draDriver.version):"]
    lines += [f"  {d['line'].ljust(5)}  {d['versions'].ljust(7)}  releases {', '.join(d['releases'])}; chart {d['chart']}"
              for d in data["draDriverLines"]]
    lines += ["", "Kubernetes versions (kubernetesVersion):"]
    for k in data["kubernetesVersions"]:
        lines.append(f"  {k['version']}  {k['resourceApi']}; DRA gates on by default: {', '.join(k['draGatesOnByDefault']) or 'none'}")
    lines += ["", "GPU Operator releases (gpuOperator.version; another version is a warning):",
              "  " + ", ".join(data["gpuOperator"]["releases"]),
              f"  gpuOperator.mode gpuCluster from {data['gpuOperator']['gpuClusterModeSince']}"]
    lines += ["", "Managed Kubernetes (spec.provider): what a DRA pool needs there"]
    for p in data["providers"]:
        needs = [f"node labels {', '.join(f'{k}={v}' for k, v in p['draNodeLabels'].items())}"] if p["draNodeLabels"] else []
        needs += [p["nodeSetup"]] if p["nodeSetup"] else []
        needs += ["a ResourceQuota admitting system-node-critical pods (gpuc emits it)"] if p["criticalPodsQuota"] else []
        lines.append(f"  {p['provider']}  {p['name']}: {'; '.join(needs)} ({p['docs']})")
    return "\n".join(lines) + "\n"
