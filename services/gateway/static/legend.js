// The graph's legend (what each colour, shape and edge means in the current view) and the
// `degraded` marker: servers that are not ready (retrying, down, connecting, or down on some
// toolhost replica) are flagged in the header, and their tools (and the capabilities using
// them) get a dashed red border in the graph. Uses window.agentcards (dashboard.js).
(function () {
  "use strict";
  const $ = sel => document.querySelector(sel);
  const AC = window.agentcards;
  const servers = new Map();  // name -> {state, last_error, degraded}
  AC.servers = servers;

  // A server is degraded when calls to it may fail: not ready, or not ready on some replica.
  function isDegraded(s) {
    if (s.state === "removed") return false;  // history: its tools are unavailable anyway
    return s.state !== "ready" || (s.replicas || []).some(r => r.state !== "ready");
  }

  async function loadServers() {
    if (AC.state.missing.has("/v1/servers")) return;
    const body = await AC.api("/v1/servers").catch(() => null);
    if (!body) return;
    servers.clear();
    for (const s of body.servers) servers.set(s.name, {...s, degraded: isDegraded(s)});
    AgentCardsGraph.assignColours([...servers.keys()]);  // every server its own colour
    renderServers();
    markDegraded();
  }

  // Header: one chip per configured server, its colour in the graph and its state.
  function renderServers() {
    const chips = [...servers.values()].filter(s => s.state !== "removed").map(s => {
      const chip = document.createElement("span");
      chip.className = `server-chip${s.degraded ? " degraded" : ""}`;
      chip.dataset.server = s.name;
      chip.dataset.state = s.state;
      const dot = document.createElement("i");
      dot.className = "dot";
      dot.style.background = AgentCardsGraph.serverColour(s.name);
      const replicasDown = (s.replicas || []).filter(r => r.state !== "ready").map(r => r.replica);
      chip.append(dot, `${s.name} ${s.degraded ? `⚠ degraded (${s.state})` : s.state}`);
      // Served directly (its own tools at /mcp/servers/<name>), the MCP revision it speaks,
      // and whether it offers MCP Apps (UIs passed on to clients that declared Apps).
      if (s.direct) chip.dataset.direct = s.direct;
      if (s.protocol_version) chip.dataset.protocol = s.protocol_version;
      if (s.apps) chip.dataset.apps = "true";
      const served = document.createElement("small");
      served.className = "served";
      served.textContent = [
        s.direct ? "direct" : "",
        s.protocol_version ? `MCP ${s.protocol_version}` : "",
        s.apps ? "Apps" : "",
      ].filter(Boolean).join(" · ");
      if (served.textContent) chip.append(served);
      chip.title = [
        s.last_error,
        replicasDown.length ? `not ready on ${replicasDown.join(", ")}` : "",
        `${s.tool_count ?? 0} tools`,
        s.direct ? `served directly at ${s.direct}` : "",
        s.protocol_version ? `speaks MCP ${s.protocol_version}` : "",
        s.apps ? "offers MCP Apps (UIs)" : "",
      ].filter(Boolean).join(" · ");
      return chip;
    });
    $("#servers").replaceChildren(...chips);
  }

  // Tools of degraded servers, and capabilities holding or using one, get the `degraded` class.
  function markDegraded() {
    const cy = window.cy;
    if (!cy || cy.destroyed()) return;
    const bad = name => (servers.get(name) || {}).degraded === true;
    cy.batch(() => {
      cy.nodes().removeClass("degraded");
      const tools = cy.nodes("[kind = 'tool']").filter(n => bad(n.data("server")));
      tools.addClass("degraded");
      tools.parents().addClass("degraded");
      // The Capabilities view has no tool nodes: use the capability's own tool list.
      cy.nodes("[kind = 'capability']").forEach(n => {
        const cap = AC.state.caps.get(String(n.data("capability_id")));
        if (cap && (cap.tools_used || []).some(t => bad(t.split(":")[0]))) n.addClass("degraded");
      });
    });
    AC.degradedNodes = cy.nodes(".degraded").map(n => n.id());
  }

  // --- Legend: only what the current view draws.
  const EDGES = {
    sequence: ["edge-sequence", "sequence: called one after the other"],
    co_used: ["edge-co_used", "co-used: called in the same runs"],
    shares: ["edge-shares", "shares tools (3 strongest per capability)"],
    calls: ["edge-calls", "calls: a capability calls another one inline"],
  };
  const EDGES_BY_VIEW = {
    tools: ["sequence", "co_used"],
    capabilities: ["shares", "calls"],
    hypergraph: ["sequence", "calls"],
  };
  function item(swatchClass, text, colour) {
    const li = document.createElement("li"), swatch = document.createElement("i");
    swatch.className = `swatch ${swatchClass}`;
    if (colour) swatch.style.background = colour;
    li.append(swatch, text);
    return li;
  }
  function renderLegend(view) {
    const cy = window.cy;
    const nodes = [];
    if (view !== "tools") nodes.push(item("node-capability", "capability (its box holds the tools it calls)"));
    if (view !== "capabilities" && cy) {
      const names = [...new Set(cy.nodes("[kind = 'tool']").map(n => n.data("server")))].sort();
      for (const name of names) {
        nodes.push(item("node-tool", `tool of server ${name}`, AgentCardsGraph.serverColour(name)));
      }
      nodes.push(item("node-unavailable", "tool unavailable now"));
    }
    nodes.push(item("node-degraded", "degraded: server retrying, down or not ready everywhere"));
    nodes.push(item("node-match", "matches the filter (others faded)"));
    $("#legend-nodes").replaceChildren(...nodes);
    $("#legend-edges").replaceChildren(
      ...(EDGES_BY_VIEW[view] || []).map(kind => item(...EDGES[kind])),
      item("edge-width", "thicker: used together more often"),
    );
    $("#legend").dataset.view = view;
  }

  AC.onGraphDrawn = view => {
    renderLegend(view);
    markDegraded();
  };
  AC.onStarted = (previous => () => {
    if (previous) previous();
    loadServers();
    if (!AC.serversTimer) AC.serversTimer = setInterval(loadServers, 10000);
  })(AC.onStarted);
  AC.loadServers = loadServers;
})();
