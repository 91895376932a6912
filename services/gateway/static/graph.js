// The dashboard's graph: Cytoscape with the compound-aware fcose layout, one style for the three views.
// Used by the page (dashboard.js) and by `agentcards bench dashboard`; needs cytoscape, layout-base,
// cose-base and cytoscape-fcose loaded first (their UMD builds register as globals).
(function () {
  "use strict";
  if (window.cytoscapeFcose && !window.__fcoseRegistered) {
    cytoscape.use(cytoscapeFcose);
    window.__fcoseRegistered = true;
  }
  const VIOLET = "#8b5cf6";
  // Distinct hues for servers, most distinct first. No violet (capabilities) and no grey:
  // grey is an unavailable tool's colour, so a ready server must never look like one.
  const PALETTE = ["#0ea5e9", "#f97316", "#10b981", "#e11d48", "#eab308", "#2563eb", "#d946ef",
    "#84cc16", "#a16207", "#0d9488", "#ec4899", "#65a30d"];
  // Each server keeps the colour it was first given; `assignColours` hands them out in name
  // order, so the same servers get the same colours on every load. (A hash of the name gave
  // two servers one colour as soon as two names fell in one of the 12 slots.)
  const colours = new Map();
  function assignColours(servers) {
    for (const name of [...new Set(servers.map(String))].sort()) {
      if (colours.has(name)) continue;
      const used = new Set(colours.values());
      colours.set(name, PALETTE.find(c => !used.has(c)) || PALETTE[colours.size % PALETTE.length]);
    }
  }
  function serverColour(server) {
    if (!colours.has(String(server))) assignColours([server]);
    return colours.get(String(server));
  }

  const STYLE = [
    {selector: "node", style: {
      // `display` is the label with break points after "_" and ":", so names wrap between words.
      "label": "data(display)", "font-size": 11, "color": "#1f2937", "text-valign": "bottom",
      "text-margin-y": 3, "text-wrap": "wrap", "text-overflow-wrap": "whitespace", "text-max-width": 110,
      "text-background-color": "#fff", "text-background-opacity": 0.8, "text-background-padding": 1,
      // Unreadable labels are hidden when zoomed out, rather than drawn as a pile.
      "min-zoomed-font-size": 7,
      "width": 18, "height": 18, "background-color": "data(colour)", "border-width": 0,
    }},
    {selector: "node[kind = 'tool'][?available]", style: {"opacity": 1}},
    {selector: "node[kind = 'tool'][!available]", style: {"background-color": "#d1d5db", "color": "#9ca3af"}},
    {selector: "node[kind = 'capability']", style: {
      "shape": "round-rectangle", "background-color": VIOLET, "background-opacity": 0.9,
      "color": "#4c1d95", "font-weight": 600, "font-size": 12, "text-max-width": 130,
      "width": 28, "height": 20, "corner-radius": 6,
    }},
    // A capability holding its tools: a translucent violet box labelled on top.
    {selector: "node[kind = 'capability']:parent", style: {
      "background-opacity": 0.12, "border-width": 2, "border-color": VIOLET,
      // Large enough to read when ~50 boxes fit the screen (tool labels show on zooming in).
      "text-valign": "top", "text-margin-y": -3, "padding": 10, "font-size": 22, "text-max-width": 260,
    }},
    {selector: "edge", style: {
      "width": "mapData(weight, 0, 5, 1, 4)", "line-color": "#cbd5e1", "curve-style": "bezier",
      "opacity": 0.7,
    }},
    {selector: "edge[kind = 'sequence']", style: {"target-arrow-shape": "triangle", "target-arrow-color": "#94a3b8", "line-color": "#94a3b8"}},
    {selector: "edge[kind = 'shares']", style: {"line-style": "dashed", "line-color": "#c4b5fd"}},
    {selector: "edge[kind = 'calls']", style: {"line-color": VIOLET, "target-arrow-shape": "triangle", "target-arrow-color": VIOLET, "width": 3}},
    // A tool whose server is degraded (legend.js), and a capability using one.
    {selector: ".degraded", style: {"border-width": 3, "border-style": "dashed", "border-color": "#dc2626"}},
    {selector: ".dimmed", style: {"opacity": 0.15}},
    {selector: ".match", style: {"border-width": 4, "border-color": "#f59e0b"}},
    {selector: ":selected", style: {"border-width": 4, "border-color": "#111827"}},
  ];

  // Which elements each view draws, from the two endpoints' answers.
  function elementsFor(view, data) {
    if (view === "tools") return data.tools || {nodes: [], edges: []};
    const hyper = data.hypergraph || {nodes: [], edges: []};
    if (view === "capabilities") {
      return {
        nodes: hyper.nodes.filter(n => n.data.kind === "capability"),
        edges: [...strongest(hyper.edges.filter(e => e.data.kind === "shares"), 3, labels(hyper)),
                ...hyper.edges.filter(e => e.data.kind === "calls")],
      };
    }
    // Shared tools are visible as the same tool inside each box; as edges (every pair of
    // capabilities sharing a tool) they would pull the boxes onto each other.
    return {nodes: hyper.nodes, edges: hyper.edges.filter(e => e.data.kind !== "shares")};
  }

  const labels = graph => new Map(graph.nodes.map(n => [n.data.id, String(n.data.label ?? "")]));

  // Each capability's `k` heaviest "shares" links: when most capabilities share some tool,
  // all pairs would be a hairball that pulls every node onto the others. Ties go to the
  // other end's name, then id: the same capabilities keep the same links on every reload
  // (edge ids are random, so a tie broken by them drew a different graph each time).
  function strongest(edges, k, label) {
    const byNode = new Map();
    for (const e of edges) {
      for (const end of [e.data.source, e.data.target]) {
        if (!byNode.has(end)) byNode.set(end, []);
        byNode.get(end).push(e);
      }
    }
    const kept = new Set();
    const other = (e, end) => (e.data.source === end ? e.data.target : e.data.source);
    const name = id => label.get(id) ?? "";
    for (const [end, list] of byNode) {
      list.sort((a, b) => b.data.weight - a.data.weight
        || name(other(a, end)).localeCompare(name(other(b, end)))
        || other(a, end).localeCompare(other(b, end)));
      list.slice(0, k).forEach(e => kept.add(e));
    }
    return edges.filter(e => kept.has(e));
  }

  // Zero-width spaces after "_" and ":": Cytoscape wraps there rather than mid-word.
  const breakable = label => String(label ?? "").replace(/([_:])(?=.)/g, "$1\u200b");

  function withColours(elements) {
    assignColours(elements.nodes.filter(n => n.data.kind !== "capability").map(n => n.data.server));
    const nodes = elements.nodes.map(n => ({
      data: {...n.data, display: breakable(n.data.label),
             colour: n.data.kind === "capability" ? VIOLET : serverColour(n.data.server)},
    }));
    return {nodes, edges: elements.edges.map(e => ({data: {...e.data}}))};
  }

  const LAYOUT = {
    name: "fcose", quality: "default", randomize: true, animate: false, fit: true, padding: 30,
    nodeDimensionsIncludeLabels: true,  // labels take room: no pile-ups of text
    // Tools inside a capability's box sit closer than free nodes: small boxes, a larger zoom.
    // Free tools (the Tools view) packed tighter too: at 200 tools the fitted zoom goes from
    // ~0.55 to ~0.7 with no label overlaps (`agentcards bench dashboard`).
    nodeRepulsion: n => (n.isChild() ? 4500 : n.data("kind") === "tool" ? 6000 : 16000),
    // Capability↔capability links longer: their two-line labels need the room (at 90, 50
    // capabilities left ~6 label overlaps per drawing; at 150, none).
    idealEdgeLength: e => (e.source().data("kind") === "capability" ? 150
      : e.source().isChild() && e.target().isChild() ? 45 : 55),
    edgeElasticity: () => 0.3,
    nestingFactor: 0.1, gravity: 0.25, numIter: 2500, packComponents: true,
    nodeSeparation: 50, tile: true, tilingPaddingVertical: 20, tilingPaddingHorizontal: 20,
  };

  // Draw `view` of `data` ({tools, hypergraph}) into `container`; resolves with the instance
  // once the layout has stopped, and its time in ms.
  function render(container, view, data) {
    const started = performance.now();
    const cy = cytoscape({
      container, elements: withColours(elementsFor(view, data)), style: STYLE,
      minZoom: 0.05, maxZoom: 4,
    });
    return new Promise(resolve => {
      const layout = cy.layout(LAYOUT);
      layout.one("layoutstop", () => {
        if (view === "hypergraph") packGroups(cy);
        resolve({cy, ms: performance.now() - started});
      });
      layout.run();
    });
  }

  // The hypergraph is mostly separate boxes: fcose spreads them as a loose disc whose gaps
  // make the fitted zoom (and so the labels) small. Pack each group of top-level nodes
  // (a box, or boxes joined by `calls`) in rows that fill the container's shape, then fit.
  const GAP = 24;
  function packGroups(cy) {
    const roots = cy.nodes().orphans();
    if (roots.length < 2) return;
    const group = new Map(roots.map(r => [r.id(), r.id()]));
    const find = id => (group.get(id) === id ? id : find(group.get(id)));
    const rootOf = n => (n.isOrphan() ? n : n.ancestors().orphans()[0]);
    cy.edges().forEach(e => {
      const a = find(rootOf(e.source()).id()), b = find(rootOf(e.target()).id());
      if (a !== b) group.set(a, b);
    });
    const members = new Map();
    roots.forEach(r => {
      const g = find(r.id());
      if (!members.has(g)) members.set(g, cy.collection());
      members.set(g, members.get(g).union(r).union(r.descendants()));
    });
    // Each box is placed on its own; boxes joined by `calls` stay next to each other.
    const size = eles => eles.boundingBox({includeLabels: true});
    const byHeight = (a, b) => b.bb.h - a.bb.h || b.bb.w - a.bb.w;
    const groups = [...members.values()].map(eles => ({
      bb: size(eles),
      boxes: eles.orphans().map(r => {
        const own = r.union(r.descendants());
        return {eles: own, bb: size(own)};
      }).sort(byHeight),
    }));
    const boxes = groups.sort(byHeight).flatMap(g => g.boxes);
    // Shelf packing: rows up to `width` wide; returns each box's corner and the whole size.
    function shelves(width) {
      let x = 0, y = 0, rowHeight = 0, right = 0;
      const at = boxes.map(({bb}) => {
        if (x > 0 && x + bb.w > width) { x = 0; y += rowHeight + GAP; rowHeight = 0; }
        const corner = {x, y};
        x += bb.w + GAP;
        right = Math.max(right, x - GAP);
        rowHeight = Math.max(rowHeight, bb.h);
        return corner;
      });
      return {at, w: right, h: y + rowHeight};
    }
    // The row width whose packing fits the container at the largest zoom (a few tries).
    const cw = Math.max(cy.width(), 1), ch = Math.max(cy.height(), 1);
    const area = boxes.reduce((sum, b) => sum + (b.bb.w + GAP) * (b.bb.h + GAP), 0);
    const widest = Math.max(...boxes.map(b => b.bb.w));
    let best = null;
    for (let f = 0.6; f <= 2.5; f += 0.1) {
      const packed = shelves(Math.max(widest, f * Math.sqrt(area * cw / ch)));
      packed.zoom = Math.min(cw / packed.w, ch / packed.h);
      if (!best || packed.zoom > best.zoom) best = packed;
    }
    cy.batch(() => {
      boxes.forEach(({eles, bb}, i) => {
        const dx = best.at[i].x - bb.x1, dy = best.at[i].y - bb.y1;
        eles.nodes().filter(n => !n.isParent()).positions(n => ({x: n.position("x") + dx, y: n.position("y") + dy}));
      });
    });
    cy.fit(undefined, LAYOUT.padding);
  }

  window.AgentCardsGraph = {render, serverColour, assignColours, elementsFor, VIOLET, LAYOUT};
})();
