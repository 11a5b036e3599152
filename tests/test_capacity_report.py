"""`gpuc plan --html` and the Markdown capacity summary: structure, stable colours, folding, and a real
headless Chromium that must render the report without console errors."""

from __future__ import annotations

import hashlib
import re
import struct
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.report_bench import browser_missing, chromium_available, headless_chromium
from compiler.emit.capacity import MIN_HUE_GAP, cluster_map, workload_color, workload_colors
from compiler.emit.capacity_html import capacity_html
from compiler.emit.plan_report import plan_markdown
from compiler.pipeline import CompileOptions, compile_fleet

from conftest import EXAMPLES, REPO, cluster_doc, gpuc, workload_doc


def plan_compilation(path):
    """Every cluster's placement, with devices recorded (as `gpuc plan` does)."""
    return [c.placement for c in compile_fleet(path, CompileOptions(detail=True)).clusters.values() if c.placement]


@pytest.fixture(scope="module")
def plans():
    return plan_compilation(EXAMPLES)


def _titles(page: str) -> list[str]:
    return re.findall(r"<title>([^<]*)</title>", page)


def test_every_allocated_device_appears_once(plans):
    total = 0
    for plan in plans:  # one cluster per page: node names repeat across clusters (two have an h200-0)
        page = capacity_html([plan], "report")
        titles = _titles(page)
        allocated = {(p.node, d.device, p.workload) for p in plan.pods for c in p.claims for d in c.devices
                     if d.driver == "gpu.nvidia.com"}
        total += len(allocated)
        rows = {node: row for pool in cluster_map(plan).pools for row in pool.rows for node in row.nodes}
        for node, device, workload in allocated:
            row = rows[node]  # nodes held the same way share a row, named after its first and last node
            where = node if len(row.nodes) == 1 else f"{len(row.nodes)} nodes ({row.nodes[0]} and {len(row.nodes) - 1} more)"
            hits = [t for t in titles if t.startswith(f"{where} / {device} (")]
            assert len(hits) == 1, (node, device, hits)
            assert workload in hits[0].split(": ", 1)[1].split(", ")[0].split(" + ")
        held = sum(len(row.nodes) for pool in cluster_map(plan).pools for row in pool.rows
                   for gpu in row.gpus for s in gpu.segments if s.holder)
        assert held == len({(node, device) for node, device, _ in allocated})
    assert total > 20
    whole = capacity_html(plans, "report")
    assert "nim-service/llama-1b-guard + nim-service/qwen-1-5b-router" in whole  # the shared claim's GPU


def test_report_shows_pools_workloads_free_capacity_and_unplaced(plans, fleet):
    page = capacity_html(plans, "report")
    for name in ("h100", "a100-mig", "gb200", "h100-nvswitch", "h200", "nim-service/llama-70b", "research/notebooks"):
        assert name in page
    assert "8 of 32 GPUs in use (25%)" in page
    assert ": free</title>" in page
    assert "allocated by the device plugin: not planned by gpuc" in page  # staging's l40s-legacy pool
    crowded = fleet(clusters=[cluster_doc(pools=[{"name": "h100", "nodes": 1, "gpu": {"model": "H100-80GB", "count": 8}}])],
                    workloads={"w.yaml": [workload_doc("big", replicas=3, gpu={"count": 4})]})
    page = capacity_html(plan_compilation(crowded), "report")
    assert "Cannot be placed (1)" in page and "big-2" in page


def test_colours_are_stable_per_workload(plans):
    assert capacity_html(plans, "report") == capacity_html(plans, "report")
    colour = workload_color("nim-service/llama-70b")
    assert colour == workload_color("nim-service/llama-70b") and colour != workload_color("nim-service/llama-8b-chat")
    assert f'fill="{colour}"' in capacity_html(plans, "report")


def _hue(colour: str) -> int:
    return int(colour.split("(")[1].split(",")[0])


def test_two_workloads_of_one_report_never_get_near_identical_colours():
    names = [f"team/job-{i}" for i in range(60)]
    hashed = {n: _hue(workload_color(n)) for n in names}
    a, b = next((a, b) for a in names for b in names if a < b and abs(hashed[a] - hashed[b]) < 5)  # such pairs exist
    colours = workload_colors([a, b])
    assert abs(_hue(colours[a]) - _hue(colours[b])) >= MIN_HUE_GAP
    assert colours[a] == workload_color(a)  # the first keeps its own colour
    many = workload_colors(names[:10])
    hues = sorted(_hue(c) for c in many.values())
    assert min(min(abs(x - y), 360 - abs(x - y)) for i, x in enumerate(hues) for y in hues[i + 1:]) >= MIN_HUE_GAP - 1


def _colours_compared_with_every_hue(workloads: list[str]) -> dict[str, str]:
    """workload_colors as first written: every candidate compared with every hue taken (quadratic, times 360)."""
    from compiler.emit.capacity import GOLDEN_ANGLE

    taken: list[float] = []
    out = {}
    for w in sorted(set(workloads)):
        base = int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % 360

        def gap(h: float) -> float:
            return min((min(abs(h - t), 360 - abs(h - t)) for t in taken), default=360.0)

        tries = [(base + step * GOLDEN_ANGLE) % 360 for step in range(1 + 360 // MIN_HUE_GAP)]
        hue = next((h for h in tries if gap(h) >= MIN_HUE_GAP), None)
        if hue is None:
            hue = float(max(range(360), key=lambda h: (gap(h), -h)))
        taken.append(hue)
        out[w] = workload_color(w, hue)
    return out


def test_a_crowded_wheel_gives_the_colours_of_comparing_every_hue():
    """Past a few dozen workloads every hue is within MIN_HUE_GAP of another: the report of 5,000 workloads must
    neither take minutes (a comparison of every hue with every other, 360 times) nor colour anything differently."""
    names = [f"team-{i % 7}/w{i:04d}" for i in range(150)]
    assert workload_colors(names) == _colours_compared_with_every_hue(names)
    assert len(set(workload_colors([f"team/w{i:05d}" for i in range(5000)]).values())) > 360  # done in well under a second


def test_mig_slices_are_drawn_inside_their_gpu(plans):
    prod = next(p for p in plans if p.cluster == "prod-east")
    a100 = next(pool for pool in cluster_map(prod).pools if pool.name == "a100-mig")
    gpu = a100.rows[0].gpus[0]
    assert gpu.slices == 8
    assert [(s.label, s.start, s.size) for s in gpu.segments] == [
        ("2g.20gb", 0, 2), ("1g.10gb", 2, 1), ("1g.10gb", 3, 1), ("3g.40gb", 4, 4)]  # all-balanced placements
    assert {s.holder.workload for s in gpu.segments if s.holder} == {"research/notebooks"}


def test_dynamic_mig_room_left_on_a_gpu_is_drawn_free(plans):
    """A DynamicMIG GPU with one placement used: the rest of its memory is free and says so on hover."""
    lab = next(p for p in plans if p.cluster == "lab")
    pool = next(pool for pool in cluster_map(lab).pools if pool.name == "h100-dynmig")
    gpu = pool.rows[0].gpus[0]
    covered = {i for s in gpu.segments for i in range(s.start, s.start + s.size)}
    assert gpu.used and 0 < len(covered) < gpu.slices
    page = capacity_html([lab], "report")
    assert f"<title>h100-dynmig-0 / {gpu.name}: free capacity</title>" in page


def test_user_text_is_escaped(fleet):
    """Reasons quote users' CEL: a hostile string must stay text."""
    hostile = "device.attributes['gpu.nvidia.com'].productName == '</title><script>alert(1)</script>'"
    workloads = {"w.yaml": [workload_doc("w", gpu={"count": 1, "require": {"cel": [hostile]}})]}
    path = fleet(workloads=workloads)
    plans = plan_compilation(path)
    page = capacity_html(plans, "<b>report</b>")
    assert "<script>" not in page and "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>report</b>" not in page


def test_a_5000_node_pool_folds_into_a_few_rows(fleet, tmp_path):
    pools = [{"name": "big", "nodes": 5000, "gpu": {"model": "H100-80GB", "count": 8}}]
    workloads = {"w.yaml": [workload_doc("train", replicas=3000, gpu={"count": 8}),
                            workload_doc("serve", replicas=4000, gpu={"count": 2})]}
    plans = plan_compilation(fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads))
    pool = cluster_map(plans[0]).pools[0]
    assert pool.nodes == 5000 and len(pool.rows) <= 5
    page = capacity_html(plans, "report")
    assert len(page) < 200_000
    assert "5000 nodes in" in page and '<span class="count">3000 nodes</span> big-0, big-1, big-2 and 2997 more' in page


def test_markdown_summary(plans):
    prod = next(p for p in plans if p.cluster == "prod-east")
    text = plan_markdown(prod)
    assert "**prod-east**: 10 of 10 pods placed" in text
    assert "| h100 | 4 | 32 | 8 | `##........` 25% |" in text
    staging = next(p for p in plans if p.cluster == "staging")
    assert "| l40s-legacy | 3 | 12 | device plugin | - |" in plan_markdown(staging)


def test_plan_html_option_writes_the_file(tmp_path):
    target = tmp_path / "report.html"
    result = gpuc("plan", EXAMPLES, "--html", target)
    assert result.code == 0, result.err
    text = target.read_text()
    assert text.startswith("<!doctype html>") and "<script" not in text and "http" not in text.split("<body>")[1]


def test_report_renders_in_headless_chromium(tmp_path, plans):
    """A real browser: no console errors, and the pools and workloads are visible text."""
    if not chromium_available():
        pytest.fail(browser_missing(), pytrace=False)  # one line that says what is missing, not a traceback
    page = tmp_path / "report.html"
    page.write_text(capacity_html(plans, "GPU capacity: example fleet"))
    with headless_chromium(tmp_path / "profile", console_log=True) as driver:
        driver.get(page.as_uri())
        text = driver.find_element("tag name", "body").text
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        rects = driver.execute_script("return document.querySelectorAll('svg rect').length")
        assert driver.save_screenshot(str(tmp_path / "report.png"))
    assert errors == []
    for name in ("prod-east", "staging", "lab", "h100", "a100-mig", "gb200", "nim-service/llama-70b", "research/trainer"):
        assert name in text
    assert rects > 100
    assert Path(tmp_path / "report.png").stat().st_size > 10_000
    assert Counter(text.split())["free"] >= 1


def test_past_the_detail_limit_rows_fold_by_shape(fleet, monkeypatch):
    """Thousands of small workloads give thousands of distinct rows: past DETAIL_ROWS they fold by shape."""
    from compiler.emit import capacity
    from compiler.emit import capacity_html as html

    monkeypatch.setattr(capacity, "DETAIL_ROWS", 3)
    monkeypatch.setattr(html, "LEGEND_MAX", 2)
    pools = [{"name": "p", "nodes": 10, "gpu": {"model": "H100-80GB", "count": 8}}]
    workloads = {"w.yaml": [workload_doc(f"w{i}", replicas=8, gpu={"count": 1}) for i in range(10)]}
    plans = plan_compilation(fleet(clusters=[cluster_doc(pools=pools)], workloads=workloads))
    pool = cluster_map(plans[0]).pools[0]
    detailed = [r for r in pool.rows if not r.by_shape]
    folded = [r for r in pool.rows if r.by_shape]
    assert len(detailed) == 3 and len(folded) == 1  # the 7 other nodes look alike once holders are ignored
    assert sorted(n for r in pool.rows for n in r.nodes) == sorted(f"p-{i}" for i in range(10))  # every node once
    segment = folded[0].gpus[0].segments[0]
    assert segment.holder is None and sum(segment.held_by.values()) == 7 and len(segment.held_by) == 7
    assert pool.held == {f"team/w{i}": (8, 1) for i in range(10)}
    page = capacity_html(plans, "report")
    assert "held on 7 nodes by team/" in page and "and 2 more</title>" in page
    assert "and 8 more workloads (hover a GPU)" in page and "held, in rows folded by shape" in page
    assert "10 nodes: the first 3 in 3 distinct layouts" in page


def test_sharing_shows_as_what_it_is(fleet, tmp_path, monkeypatch):
    """Time-slicing: one GPU, every pod that shares it named, in bands; fractional memory: one part per claim, as
    wide as the memory it takes; rows of alike nodes name their nodes and count them; the title names the fleet."""
    pools = [{"name": "l40s", "nodes": 3, "gpu": {"model": "L40S-48GB", "count": 4}}]
    path = fleet(clusters=[cluster_doc(kubernetes="1.37", driver="0.5.1", pools=pools)],
                 workloads={"w.yaml": [workload_doc("frac", replicas=3, gpu={"sharing": "Fractional", "memory": "16Gi"}),
                                       workload_doc("ts", replicas=3, gpu={"count": 1, "sharing": "TimeSlicing"})]})
    page = capacity_html(plan_compilation(path), "report")
    titles = _titles(page)
    assert "l40s-0 / gpu-2 (L40S): team/ts, shared time-sliced by 3 pods (ts-0, ts-1, ts-2), claim team/ts-" in "\n".join(titles)
    frac = [t for t in titles if "(fractional)" in t]
    assert [t.split(": ", 1)[1].split(",")[1] for t in frac] == [" pod frac-0 takes 16Gi of 45.0 GiB of its memory"] + [
        " pod frac-1 takes 16Gi of 45.0 GiB of its memory", " pod frac-2 takes 16Gi of 45.0 GiB of its memory"]
    widths = re.findall(r'<rect x="[\d.]+" y="0" width="([\d.]+)" height="30" fill="hsl[^"]*"><title>l40s-0 / gpu-0 \(fractional\)', page)
    assert len(widths) == 2 and abs(float(widths[0]) - 30 * 16 / 45) < 0.1  # a third of the GPU, not all of it
    assert page.count('class="share"') == 2 + 3  # two bands' edges on the time-sliced GPU, one edge per fractional part
    assert '<span class="count">2 nodes</span> l40s-1, l40s-2' in page
    monkeypatch.chdir(path)
    assert gpuc("plan", ".", "--html", tmp_path / "r.html").code == 0
    assert f"<title>GPU capacity: {path.name} (1 cluster)</title>" in (tmp_path / "r.html").read_text()


def test_a_missing_browser_is_named_in_one_line(monkeypatch):
    import benchmarks.report_bench as bench

    monkeypatch.setattr(bench.shutil, "which", lambda name: None if name == "chromedriver" else f"/usr/bin/{name}")
    message = bench.browser_missing()
    assert message.startswith("chromedriver not found on PATH") and "apt-get install chromium chromium-driver" in message
    assert "\n" not in message and not bench.chromium_available()


def test_the_docs_screenshot_shows_the_example_fleets_report_as_it_is_now(tmp_path):
    """docs/capacity-report.png carries the digest of the page it shows: when `gpuc plan intents --html` writes another
    page (the report or the example fleet changed), the screenshot is stale. No browser needed to tell."""
    from benchmarks.report_screenshot import digest_of, example_report

    shown = digest_of((REPO / "docs" / "capacity-report.png").read_bytes())
    assert shown == example_report(tmp_path / "report.html"), \
        "docs/capacity-report.png is stale: run `python -m benchmarks.report_screenshot docs/capacity-report.png`"


def test_the_screenshot_tool_shows_the_whole_report_and_records_its_digest(tmp_path):
    if not chromium_available():
        pytest.fail(browser_missing(), pytrace=False)
    from benchmarks.report_screenshot import WIDTH, digest_of, screenshot

    page = tmp_path / "report.html"
    page.write_text(capacity_html([], "GPU capacity: nothing"))
    png = screenshot(page, "abc", tmp_path / "profile")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and digest_of(png) == "abc"
    width, height = struct.unpack(">II", png[16:24])
    assert width == WIDTH and height >= 100
