"""`gpuc plan --html`: one self-contained HTML file (inline CSS and SVG, no scripts or external assets).

Per cluster: a legend of workloads, and per node pool a utilisation bar and a map of nodes -> GPUs,
each GPU (and each MIG slice within it) coloured by the workload holding it, with hover titles
naming workload, pod, claim and device. Nodes held the same way are folded into one row; past
capacity.DETAIL_ROWS distinct rows the rest are folded by shape and drawn in one neutral colour
whose hover title counts the holders, so a 5,000-node pool of thousands of workloads stays a page
of a few hundred rows. A per-pool list says where each workload landed, largest first.
"""

from __future__ import annotations

from html import escape

from ..place.allocator import AllocationPlan
from .capacity import ClusterMap, NodeRow, PhysicalGpu, PoolMap, Segment, cluster_map, workload_colors
from .plan_report import BUDGETS_HEAD, additions_text

GPU_W, GPU_H, GAP = 30, 30, 4
FREE = "#e9ecef"
FOLDED = "#6e7781"  # parts held in rows folded by shape: several workloads, one per node
LEGEND_MAX = 40  # workloads named in a cluster's legend; the rest are named on hover and in pool lists
POOL_LIST_MAX = 12

CSS = """
.headroom table{border-collapse:collapse;font-size:12px}.headroom td,.headroom th{border:1px solid #d0d7de;padding:2px 8px;text-align:left}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:0 24px 48px;color:#1f2328}
h1{font-size:22px;margin:24px 0 4px}h2{font-size:18px;margin:32px 0 4px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}small,.meta{color:#59636e}nav a{margin-right:12px}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;margin:10px 0}.legend span{display:inline-flex;align-items:center;gap:6px}
.sw{width:12px;height:12px;border-radius:2px;display:inline-block}
.util{display:flex;align-items:center;gap:10px;font-size:12px}
.bar{position:relative;height:14px;width:320px;flex:none;background:#eef1f4;border-radius:4px;overflow:hidden}
.bar .fill{position:absolute;top:0;bottom:0;left:0;background:#2f81f7}
.held{font-size:12px;color:#59636e;margin:4px 0 8px}.held b{color:#1f2328;font-weight:600}
.row{display:flex;align-items:center;gap:12px;margin:3px 0}.nodes{width:260px;flex:none;font:12px ui-monospace,monospace;overflow-wrap:anywhere}
.count{font-weight:600;color:#0969da}svg .gpu{fill:none;stroke:#8c959f;stroke-width:1}svg .share{stroke:#fff;stroke-width:1.5}
.unplaced li{margin:4px 0}.unplaced code{background:#fff1f0;padding:1px 4px;border-radius:3px}
.note{color:#59636e;font-size:12px}details summary{cursor:pointer;color:#0969da;margin:6px 0}
"""


def _where(row: NodeRow) -> str:
    """Folded nodes are alike, not necessarily neighbours: name the first and count the rest."""
    return row.nodes[0] if len(row.nodes) == 1 else f"{len(row.nodes)} nodes ({row.nodes[0]} and {len(row.nodes) - 1} more)"


def _title(segment: Segment, gpu: PhysicalGpu, row: NodeRow) -> str:
    base = f"{_where(row)} / {segment.device} ({segment.label})"
    if segment.held_by:
        top = segment.held_by.most_common(5)
        names = ", ".join(f"{w} ({n})" for w, n in top)
        more = f" and {len(segment.held_by) - len(top)} more" if len(segment.held_by) > len(top) else ""
        return f"{base}: held on {sum(segment.held_by.values())} nodes by {names}{more}"
    if segment.holder is None:
        return f"{base}: free"
    h = segment.holder
    example = " (e.g.)" if len(row.nodes) > 1 else ""
    if len(h.pods) > 1:  # one claim, several pods: time-slicing, MPS or a shared claim
        how = {"TimeSlicing": "time-sliced", "MPS": "through MPS"}.get(h.sharing, "through one shared claim")
        return f"{base}: {h.workload}, shared {how} by {len(h.pods)} pods{example} ({', '.join(h.pods)}), claim {h.claim}"
    if h.memory:
        return f"{base}: {h.workload}, pod {h.pod}{example} takes {h.memory} of its memory, claim {h.claim}"
    return f"{base}: {h.workload}, pod {h.pod}{example}, claim {h.claim}, request {h.request}"


def _gpu_svg(gpu: PhysicalGpu, row: NodeRow, x: int, colors: dict[str, str]) -> str:
    width = GPU_W / gpu.slices
    covered = {i for s in gpu.segments for i in range(s.start, s.start + s.size)}
    parts = [f'<g transform="translate({x},0)">']
    if len(covered) < gpu.slices:  # memory no device covers (a whole free GPU, or DynamicMIG room left): underneath
        parts.append(f'<rect x="0" y="0" width="{GPU_W}" height="{GPU_H}" fill="{FREE}">'
                     f"<title>{escape(_where(row))} / {escape(gpu.name)}: free capacity</title></rect>")
    for s in gpu.segments:
        fill = colors[s.holder.workload] if s.holder else FOLDED if s.held_by else FREE
        stroke = ' stroke="#adb5bd" stroke-width="0.5"' if not s.held and gpu.slices > 1 else ""
        parts.append(f'<rect x="{s.start * width:.2f}" y="0" width="{s.size * width:.2f}" height="{GPU_H}" fill="{fill}"{stroke}>'
                     f"<title>{escape(_title(s, gpu, row))}</title></rect>")
        if s.holder is not None and len(s.holder.pods) > 1:  # one band per pod sharing it
            parts += [f'<line class="share" x1="{s.start * width:.2f}" x2="{(s.start + s.size) * width:.2f}" '
                      f'y1="{GPU_H * i / len(s.holder.pods):.2f}" y2="{GPU_H * i / len(s.holder.pods):.2f}"/>'
                      for i in range(1, len(s.holder.pods))]
        elif s.holder is not None and s.holder.memory:  # a fractional share: its edge
            parts.append(f'<line class="share" x1="{(s.start + s.size) * width:.2f}" x2="{(s.start + s.size) * width:.2f}" '
                         f'y1="0" y2="{GPU_H}"/>')
    parts.append(f'<rect class="gpu" x="0.5" y="0.5" width="{GPU_W - 1}" height="{GPU_H - 1}"/></g>')
    return "".join(parts)


def _row(row: NodeRow, colors: dict[str, str]) -> str:
    """Nodes held alike share a row: named (the first three) and counted."""
    shown = ", ".join(escape(n) for n in row.nodes[:3]) + (f" and {len(row.nodes) - 3} more" if len(row.nodes) > 3 else "")
    names = shown if len(row.nodes) == 1 else f'<span class="count">{len(row.nodes)} nodes</span> {shown}'

    width = max(1, len(row.gpus)) * (GPU_W + GAP)
    gpus = "".join(_gpu_svg(g, row, i * (GPU_W + GAP), colors) for i, g in enumerate(row.gpus))
    return (f'<div class="row"><div class="nodes">{names}</div>'
            f'<svg width="{width}" height="{GPU_H}" viewBox="0 0 {width} {GPU_H}" role="img">{gpus}</svg></div>')


def _held_list(pool: PoolMap) -> str:
    if not pool.held:
        return ""
    items = [f"<b>{escape(w)}</b> {devices} device{'s' if devices != 1 else ''} on {nodes} node{'s' if nodes != 1 else ''}"
             for w, (devices, nodes) in list(pool.held.items())[:POOL_LIST_MAX]]
    if len(pool.held) > POOL_LIST_MAX:
        items.append(f"and {len(pool.held) - POOL_LIST_MAX} more workloads")
    return f'<p class="held">{"; ".join(items)}</p>'


def _pool(pool: PoolMap, colors: dict[str, str]) -> str:
    head = f"<h3>{escape(pool.name)} <small>{pool.nodes} nodes, {pool.gpus} GPUs</small></h3>"
    if pool.allocation != "dra":
        return f'<div class="pool">{head}<p class="note">allocated by the device plugin: not planned by gpuc</p></div>'
    percent = round(100 * pool.gpus_used / pool.gpus) if pool.gpus else 0
    bar = (f'<div class="util"><div class="bar" title="{pool.gpus_used} of {pool.gpus} GPUs hold at least one allocated device">'
           f'<div class="fill" style="width:{percent}%"></div></div><span>{pool.gpus_used} of {pool.gpus} GPUs in use ({percent}%), '
           f"{pool.devices_used} of {pool.devices} devices</span></div>")
    detailed = [r for r in pool.rows if not r.by_shape]
    by_shape = [r for r in pool.rows if r.by_shape]
    notes = []
    if len(pool.rows) < pool.nodes:
        notes.append(f"{pool.nodes} nodes in {len(detailed)} distinct layouts" if not by_shape else
                     f"{pool.nodes} nodes: the first {sum(len(r.nodes) for r in detailed)} in {len(detailed)} distinct layouts")
    rows = "".join(_row(r, colors) for r in detailed)
    if by_shape:
        folded = sum(len(r.nodes) for r in by_shape)
        rows += (f'<p class="note">{folded} more nodes, folded by shape: grey parts are held by several workloads, '
                 "one per node; hover for who</p>" + "".join(_row(r, colors) for r in by_shape))
    note = f'<p class="note">{"; ".join(notes)}</p>' if notes else ""
    return f'<div class="pool">{head}{bar}{_held_list(pool)}{note}<div class="rows">{rows}</div></div>'


def _cluster(cmap: ClusterMap, colors: dict[str, str]) -> str:
    plan = cmap.plan
    placed = sum(1 for p in plan.pods if p.placed)
    anchor = f"c-{escape(plan.cluster)}"
    meta = (f"Kubernetes {escape(plan.kubernetes)}, DRA driver {escape(plan.driver)}, {plan.nodes} nodes, "
            f"{placed} of {len(plan.pods)} pods placed")
    legend = "".join(f'<span><i class="sw" style="background:{colors[w]}"></i>{escape(w)}</span>'
                     for w in cmap.workloads[:LEGEND_MAX])
    if len(cmap.workloads) > LEGEND_MAX:
        legend += f"<span>and {len(cmap.workloads) - LEGEND_MAX} more workloads (hover a GPU)</span>"
    if any(r.by_shape for p in cmap.pools for r in p.rows):
        legend += f'<span><i class="sw" style="background:{FOLDED}"></i>held, in rows folded by shape</span>'
    if any(s.holder is not None and (len(s.holder.pods) > 1 or s.holder.memory)
           for p in cmap.pools for r in p.rows for g in r.gpus for s in g.segments):
        legend += ('<span class="note">a GPU split into bands: pods sharing it (time-slicing, MPS, a shared claim); '
                   "into widths: the memory each fractional claim takes</span>")
    legend += f'<span><i class="sw" style="background:{FREE};outline:1px solid #adb5bd"></i>free</span>'
    pools = "".join(_pool(p, colors) for p in cmap.pools)
    unplaced = ""
    if plan.unplaced:
        items = "".join(f"<li><code>{escape(p.workload)}</code> {escape(p.pod)}: {escape(p.reason)}</li>" for p in plan.unplaced)
        unplaced = f'<div class="unplaced"><h3>Cannot be placed ({len(plan.unplaced)})</h3><ul>{items}</ul></div>'
    return (f'<section class="cluster" id="{anchor}"><h2>{escape(plan.cluster)}</h2><p class="meta">{meta}</p>'
            f'<div class="legend">{legend}</div>{unplaced}{_headroom(plan)}{_budgets(plan)}{pools}</section>')


def _headroom(plan: AllocationPlan) -> str:
    """What each pool has left, and the smallest addition that places the pods that do not fit (place.headroom)."""
    room = plan.headroom
    if room is None:
        return ""
    rows = "".join(f"<tr><td>{escape(f.pool)}</td><td>{f.gpus}</td><td>{f.devices}{' MIG slices' if f.mig else ''}</td>"
                   f"<td>{escape(f.shareable or '-')}</td></tr>" for f in room.free)
    table = ("<table><tr><th>pool</th><th>free GPUs</th><th>free devices</th><th>shareable memory left</th></tr>"
             f"{rows}</table>") if rows else ""
    add = ""
    if room.recommended:
        add = (f"<p>To place the {room.pending} pod(s) that do not fit, add <b>{escape(additions_text(room.recommended))}</b>"
               + ("" if room.verified else " (not re-planned with the nodes in place)") + "</p>")
        add += "".join(f"<p class=\"note\">or {escape(additions_text([a]))}</p>" for a in room.options[1:])
    add += "".join(f"<p class=\"note\">No addition places {escape(pod)}: {escape(why)}</p>" for pod, why in room.stuck)
    return f'<div class="headroom"><h3>Headroom</h3>{table}{add}</div>'


def _budgets(plan: AllocationPlan) -> str:
    """Per team budget and limit: used, limit, left (check.budgets.BudgetUse)."""
    if not plan.budgets:
        return ""
    rows = "".join(f"<tr><td>{escape(u.namespace)}</td><td>{escape(u.limit.what)}</td><td>{u.used}</td><td>{u.limit.limit}</td>"
                   f"<td>{f'<b>over by {-u.left}</b>' if u.over else u.left}</td>"
                   f"<td>{escape(f'not listed: held at 0 beside {u.limit.covers}' if u.limit.covers else '')}</td></tr>"
                   for u in plan.budgets)
    return (f'<div class="headroom"><h3>Team budgets</h3><p class="note">{escape(BUDGETS_HEAD)}</p><table><tr><th>namespace</th>'
            f"<th>limit on</th><th>used</th><th>limit</th><th>left</th><th></th></tr>{rows}</table></div>")


def capacity_html(plans: list[AllocationPlan], title: str) -> str:
    maps = [cluster_map(p) for p in plans]
    nav = "".join(f'<a href="#c-{escape(m.plan.cluster)}">{escape(m.plan.cluster)}</a>' for m in maps)
    colors = workload_colors([w for m in maps for w in m.workloads])  # one colour per workload across the report
    body = "".join(_cluster(m, colors) for m in maps)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1><p class=\"note\">Placement by gpuc's offline allocator with the Kubernetes scheduler's "
            "semantics; the real scheduler may pick different but equivalent devices. Hover a GPU for details.</p>"
            f"<nav>{nav}</nav>{body}</body></html>\n")
