"""`gpuc plan --html`: one self-contained HTML file (inline CSS and SVG, no scripts or external assets).

Per cluster: a legend of workloads, and per node pool a utilisation bar and a map of nodes -> GPUs,
each GPU (and each MIG slice within it) coloured by the workload holding it, with hover titles
naming workload, pod, claim and device. Nodes held the same way are folded into one row; past
ROWS_SHOWN distinct rows the rest sit in a closed <details> so large pools still open quickly.
"""

from __future__ import annotations

from html import escape

from ..plan.allocator import AllocationPlan
from .capacity import ClusterMap, NodeRow, PhysicalGpu, PoolMap, Segment, cluster_map, workload_color

ROWS_SHOWN = 200
GPU_W, GPU_H, GAP = 30, 30, 4
FREE = "#e9ecef"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:0 24px 48px;color:#1f2328}
h1{font-size:22px;margin:24px 0 4px}h2{font-size:18px;margin:32px 0 4px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}small,.meta{color:#59636e}nav a{margin-right:12px}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;margin:10px 0}.legend span{display:inline-flex;align-items:center;gap:6px}
.sw{width:12px;height:12px;border-radius:2px;display:inline-block}
.bar{position:relative;height:20px;background:#eef1f4;border-radius:4px;overflow:hidden;max-width:640px}
.bar .fill{position:absolute;top:0;bottom:0;left:0;background:#2f81f7}.bar span{position:relative;padding-left:8px;line-height:20px;font-size:12px}
.row{display:flex;align-items:center;gap:12px;margin:3px 0}.nodes{width:260px;flex:none;font:12px ui-monospace,monospace;overflow-wrap:anywhere}
.count{font-weight:600;color:#0969da}svg .gpu{fill:none;stroke:#8c959f;stroke-width:1}
.unplaced li{margin:4px 0}.unplaced code{background:#fff1f0;padding:1px 4px;border-radius:3px}
.note{color:#59636e;font-size:12px}details summary{cursor:pointer;color:#0969da;margin:6px 0}
"""


def _title(segment: Segment, gpu: PhysicalGpu, row: NodeRow) -> str:
    where = row.nodes[0] if len(row.nodes) == 1 else f"{len(row.nodes)} nodes ({row.nodes[0]} ... {row.nodes[-1]})"
    base = f"{where} / {segment.device} ({segment.label})"
    if segment.holder is None:
        return f"{base}: free"
    h = segment.holder
    example = " (e.g.)" if len(row.nodes) > 1 else ""
    return f"{base}: {h.workload}, pod {h.pod}{example}, claim {h.claim}, request {h.request}"


def _gpu_svg(gpu: PhysicalGpu, row: NodeRow, x: int) -> str:
    parts = [f'<g transform="translate({x},0)">']
    width = GPU_W / gpu.slices
    covered = set()
    for s in gpu.segments:
        fill = workload_color(s.holder.workload) if s.holder else FREE
        stroke = ' stroke="#adb5bd" stroke-width="0.5"' if s.holder is None and gpu.slices > 1 else ""
        parts.append(f'<rect x="{s.start * width:.2f}" y="0" width="{s.size * width:.2f}" height="{GPU_H}" fill="{fill}"{stroke}>'
                     f"<title>{escape(_title(s, gpu, row))}</title></rect>")
        covered.update(range(s.start, s.start + s.size))
    if not gpu.segments or len(covered) < gpu.slices:  # free memory slices no MIG device covers
        parts.append(f'<rect x="0" y="0" width="{GPU_W}" height="{GPU_H}" fill="{FREE}" fill-opacity="0.5">'
                     f"<title>{escape(row.nodes[0])} / {escape(gpu.name)}: free capacity</title></rect>"
                     if not gpu.segments else "")
    parts.append(f'<rect class="gpu" x="0.5" y="0.5" width="{GPU_W - 1}" height="{GPU_H - 1}"/></g>')
    return "".join(parts)


def _row(row: NodeRow) -> str:
    names = escape(row.nodes[0]) if len(row.nodes) == 1 else (
        f'{escape(row.nodes[0])} ... {escape(row.nodes[-1])} <span class="count">x{len(row.nodes)}</span>')
    width = max(1, len(row.gpus)) * (GPU_W + GAP)
    gpus = "".join(_gpu_svg(g, row, i * (GPU_W + GAP)) for i, g in enumerate(row.gpus))
    return (f'<div class="row"><div class="nodes">{names}</div>'
            f'<svg width="{width}" height="{GPU_H}" viewBox="0 0 {width} {GPU_H}" role="img">{gpus}</svg></div>')


def _pool(pool: PoolMap) -> str:
    head = f"<h3>{escape(pool.name)} <small>{pool.nodes} nodes, {pool.gpus} GPUs</small></h3>"
    if pool.allocation != "dra":
        return f'<div class="pool">{head}<p class="note">allocated by the device plugin: not planned by gpuc</p></div>'
    percent = round(100 * pool.gpus_used / pool.gpus) if pool.gpus else 0
    bar = (f'<div class="bar" title="{pool.gpus_used} of {pool.gpus} GPUs hold at least one allocated device">'
           f'<div class="fill" style="width:{percent}%"></div><span>{pool.gpus_used} of {pool.gpus} GPUs in use ({percent}%), '
           f"{pool.devices_used} of {pool.devices} devices</span></div>")
    rows = [_row(r) for r in pool.rows]
    shown = "".join(rows[:ROWS_SHOWN])
    rest = ""
    if len(rows) > ROWS_SHOWN:
        rest = (f"<details><summary>{len(rows) - ROWS_SHOWN} more distinct node layouts</summary>"
                + "".join(rows[ROWS_SHOWN:]) + "</details>")
    folded = f'<p class="note">{pool.nodes} nodes in {len(pool.rows)} distinct layouts</p>' if len(pool.rows) < pool.nodes else ""
    return f'<div class="pool">{head}{bar}{folded}<div class="rows">{shown}{rest}</div></div>'


def _cluster(cmap: ClusterMap) -> str:
    plan = cmap.plan
    placed = sum(1 for p in plan.pods if p.placed)
    anchor = f"c-{escape(plan.cluster)}"
    meta = (f"Kubernetes {escape(plan.kubernetes)}, DRA driver {escape(plan.driver)}, {plan.nodes} nodes, "
            f"{placed} of {len(plan.pods)} pods placed")
    legend = "".join(f'<span><i class="sw" style="background:{workload_color(w)}"></i>{escape(w)}</span>' for w in cmap.workloads)
    legend += f'<span><i class="sw" style="background:{FREE};outline:1px solid #adb5bd"></i>free</span>'
    pools = "".join(_pool(p) for p in cmap.pools)
    unplaced = ""
    if plan.unplaced:
        items = "".join(f"<li><code>{escape(p.workload)}</code> {escape(p.pod)}: {escape(p.reason)}</li>" for p in plan.unplaced)
        unplaced = f'<div class="unplaced"><h3>Cannot be placed ({len(plan.unplaced)})</h3><ul>{items}</ul></div>'
    return (f'<section class="cluster" id="{anchor}"><h2>{escape(plan.cluster)}</h2><p class="meta">{meta}</p>'
            f'<div class="legend">{legend}</div>{unplaced}{pools}</section>')


def capacity_html(plans: list[AllocationPlan], title: str) -> str:
    maps = [cluster_map(p) for p in plans]
    nav = "".join(f'<a href="#c-{escape(m.plan.cluster)}">{escape(m.plan.cluster)}</a>' for m in maps)
    body = "".join(_cluster(m) for m in maps)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1><p class=\"note\">Placement by gpuc's offline allocator with the Kubernetes scheduler's "
            "semantics; the real scheduler may pick different but equivalent devices. Hover a GPU for details.</p>"
            f"<nav>{nav}</nav>{body}</body></html>\n")
