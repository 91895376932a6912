// The dashboard: capabilities table and graph (served as a file: the page's CSP allows no inline script).
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
// With API keys on, the JSON needs one: asked once, kept in this browser's localStorage.
async function api(path) {
  const key = localStorage.getItem("agentcards_key");
  const r = await fetch(path, key ? {headers: {Authorization: `Bearer ${key}`}} : {});
  if (r.status === 401) {
    const entered = prompt("API key for this gateway (agentcards keys create):");
    if (entered) { localStorage.setItem("agentcards_key", entered.trim()); return api(path); }
  }
  return r.json();
}
async function load() {
  const [caps, graph] = await Promise.all([
    api("/api/capabilities?limit=200"),
    api("/api/graph/hypergraph"),
  ]);
  document.querySelector("#stats").textContent =
    `${caps.total} capabilities · ${graph.nodes.length} nodes · ${graph.edges.length} edges`;
  // Degraded: a tool it uses is unavailable (server down or removed); greyed, not hidden.
  document.querySelector("#caps tbody").innerHTML = caps.capabilities.map(c =>
    `<tr class="${c.degraded ? "degraded" : ""}"` +
    (c.degraded ? ` title="unavailable: ${esc(c.missing_tools.join(", "))}"` : "") + ">" +
    `<td>${esc(c.name)}</td><td>${c.usage_count}</td><td>${Math.round(c.success_rate*100)}%</td>` +
    `<td class="muted">${esc((c.tools_used||[]).join(", "))}</td></tr>`).join("");
  draw(graph);
}
function draw(graph) {
  const canvas = document.querySelector("#graph"), ctx = canvas.getContext("2d");
  const W = canvas.width = canvas.clientWidth, H = canvas.height = canvas.clientHeight;
  const index = new Map(graph.nodes.map((n, i) => [n.id, i]));
  const pos = graph.nodes.map(() => [Math.random() * W, Math.random() * H]);
  const edges = graph.edges.filter(e => index.has(e.src) && index.has(e.dst));
  // Fruchterman-Reingold with cooling: ideal edge length k, no libraries.
  const n = Math.max(1, pos.length), k = 0.6 * Math.sqrt((W * H) / n);
  let temperature = W / 8;
  for (let step = 0; step < 300; step++) {
    const disp = pos.map(() => [0, 0]);
    for (let i = 0; i < pos.length; i++) for (let j = i + 1; j < pos.length; j++) {
      const dx = pos[i][0] - pos[j][0], dy = pos[i][1] - pos[j][1], d = Math.max(0.01, Math.hypot(dx, dy));
      const f = (k * k) / d / d;
      disp[i][0] += dx * f; disp[i][1] += dy * f; disp[j][0] -= dx * f; disp[j][1] -= dy * f;
    }
    for (const e of edges) {
      const a = index.get(e.src), b = index.get(e.dst);
      const dx = pos[a][0] - pos[b][0], dy = pos[a][1] - pos[b][1], d = Math.max(0.01, Math.hypot(dx, dy));
      const f = d / k;
      disp[a][0] -= dx * f; disp[a][1] -= dy * f; disp[b][0] += dx * f; disp[b][1] += dy * f;
    }
    pos.forEach((p, i) => {
      disp[i][0] += (W / 2 - p[0]) * 0.05; disp[i][1] += (H / 2 - p[1]) * 0.05;   // gentle gravity
      const len = Math.max(0.01, Math.hypot(disp[i][0], disp[i][1])), step_ = Math.min(len, temperature);
      p[0] = Math.min(W - 60, Math.max(20, p[0] + disp[i][0] / len * step_));
      p[1] = Math.min(H - 20, Math.max(20, p[1] + disp[i][1] / len * step_));
    });
    temperature *= 0.98;
  }
  ctx.strokeStyle = "#ccc";
  for (const e of edges) { const a = pos[index.get(e.src)], b = pos[index.get(e.dst)];
    ctx.beginPath(); ctx.moveTo(a[0], a[1]); ctx.lineTo(b[0], b[1]); ctx.stroke(); }
  const usable = new Set(graph.nodes.filter(n => n.kind === "tool" && n.available).map(n => n.id));
  const greyed = n => n.kind === "tool" ? !n.available : (n.tools || []).some(t => !usable.has(t));
  graph.nodes.forEach((n, i) => {
    const r = 4 + 60 * (n.pagerank || 0), [x, y] = pos[i];
    ctx.fillStyle = greyed(n) ? "#ddd"
      : n.community == null ? "#999" : `hsl(${(n.community * 67) % 360} 60% 50%)`;
    if (n.kind === "capability") ctx.fillRect(x - r, y - r, 2*r, 2*r);
    else { ctx.beginPath(); ctx.arc(x, y, r, 0, 2*Math.PI); ctx.fill(); }
    ctx.fillStyle = "#333"; ctx.fillText(n.label, x + r + 2, y + 3);
  });
}
load();
