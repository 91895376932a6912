"""Dashboard render time in headless Chromium: 50 capabilities over 200 tools, each view, fcose layout.

The page's own graph script and the vendored Cytoscape/fcose run on a synthetic graph built
by HypergraphBuilder (the endpoint's code), so no stack is needed. Also counts pairs of node
labels that overlap once the layout has settled (0 means readable: no pile-ups). Needs the
test extra (selenium) and Debian's chromium + chromium-driver.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any

from shared.graph.hypergraph import HypergraphBuilder, tool_graph

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCRIPTS = (
    "vendor/cytoscape/cytoscape.min.js",
    "vendor/layout-base/layout-base.js",
    "vendor/cose-base/cose-base.js",
    "vendor/cytoscape-fcose/cytoscape-fcose.js",
    "graph.js",
)
# Label boxes overlapping at the fitted zoom, among the labels Cytoscape actually draws.
OVERLAPS_JS = """
const boxes = cy.nodes().filter(n => n.visible()).map(n => n.boundingBox({includeNodes: false,
  includeEdges: false, includeLabels: true, includeOverlays: false})).filter(b => b.w > 0);
let overlaps = 0;
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if (a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2) overlaps++;
}
return overlaps;
"""


def synthetic(*, capabilities: int, tools: int, seed: int = 0) -> dict[str, Any]:
    """``{tools, hypergraph}`` as the two endpoints answer, for a made-up install."""
    rng = random.Random(seed)
    servers = [f"server{i}" for i in range(8)]
    tool_rows = [
        {"id": f"{servers[i % 8]}:tool_{i}", "server": servers[i % 8], "available": True,
         "pagerank": rng.random() / tools, "community": i % 6}
        for i in range(tools)
    ]  # fmt: skip
    caps = []
    edges: list[dict[str, Any]] = []
    for c in range(capabilities):
        used = [t["id"] for t in rng.sample(tool_rows, rng.randint(3, 7))]
        caps.append({"id": f"c{c}", "name": f"capability_number_{c}", "tools_used": used,
                     "usage_count": rng.randint(1, 50), "success_rate": rng.random()})  # fmt: skip
        edges += [
            {"src": a, "dst": b, "kind": "sequence", "weight": 1.0} for a, b in pairwise(used)
        ]
        if c % 7 == 0 and c:
            edges.append(
                {"src": f"cap:c{c}", "dst": f"cap:c{c - 1}", "kind": "calls", "weight": 1.0}
            )
    return {
        "tools": tool_graph(tools=tool_rows, edges=edges),
        "hypergraph": HypergraphBuilder(tools=tool_rows, capabilities=caps, edges=edges).build(),
    }


def _page(folder: Path, data: dict[str, Any]) -> Path:
    static = resources.files("services.gateway") / "static"
    tags = "".join(f'<script src="file://{static / s}"></script>' for s in SCRIPTS)
    (folder / "data.js").write_text(f"window.BENCH_DATA = {json.dumps(data)};")
    page = folder / "bench.html"
    page.write_text(
        '<!doctype html><html><body style="margin:0"><div id="graph" style="width:1300px;'
        f'height:900px"></div>{tags}<script src="data.js"></script></body></html>'
    )
    return page


def run(
    capabilities: int = 50, tools: int = 200, repeats: int = 3, screenshots: str | None = None
) -> dict[str, Any]:
    """Median render time (create + fcose layout to layoutstop) per view, and label overlaps;
    with ``screenshots`` (a folder), each view's last drawing as ``bench-<view>.png``."""
    # Imported here: selenium is needed by this bench only, and only once it runs.
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    data = synthetic(capabilities=capabilities, tools=tools)
    with tempfile.TemporaryDirectory() as tmp:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--no-first-run", "--disable-sync",
                     "--allow-file-access-from-files", "--window-size=1400,1100",
                     f"--user-data-dir={tmp}/profile"):  # fmt: skip
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        driver.set_script_timeout(300)
        try:
            driver.get(_page(Path(tmp), data).as_uri())
            views: dict[str, Any] = {}
            for view in ("tools", "capabilities", "hypergraph"):
                times = []
                for _ in range(repeats):
                    result = driver.execute_async_script(
                        "const done = arguments[arguments.length - 1];"
                        "if (window.cy) window.cy.destroy();"
                        f"AgentCardsGraph.render(document.getElementById('graph'), '{view}', BENCH_DATA)"
                        ".then(r => { window.cy = r.cy; done({ms: r.ms, nodes: r.cy.nodes().length,"
                        " edges: r.cy.edges().length}); });"
                    )
                    times.append(result["ms"])
                views[view] = {
                    "render_ms_median": round(statistics.median(times), 1),
                    "render_ms_all": [round(t, 1) for t in times],
                    "nodes": result["nodes"],
                    "edges": result["edges"],
                    "label_overlaps": driver.execute_script(OVERLAPS_JS),
                    "zoom": round(driver.execute_script("return cy.zoom()"), 3),
                }
                if screenshots:
                    Path(screenshots).mkdir(parents=True, exist_ok=True)
                    driver.save_screenshot(str(Path(screenshots) / f"bench-{view}.png"))
        finally:
            driver.quit()
    return {
        "capabilities": capabilities,
        "tools": tools,
        "browser": "headless Debian chromium",
        "layout": "fcose",
        "views": views,
    }
