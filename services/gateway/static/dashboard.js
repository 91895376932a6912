// The dashboard: API access (with a key when keys are on), the three graph views, the
// executions view (executions.js) and the approvals inbox (approvals.js), metrics and live updates. Served as files: the page's CSP allows no inline script and no other origin.
(function () {
  "use strict";
  const $ = sel => document.querySelector(sel);
  const VIEWS = ["tools", "capabilities", "hypergraph", "executions", "approvals"];
  const state = {view: null, data: {}, caps: new Map(), missing: new Set()};
  const AC = window.agentcards = {state};

  // --- API: signed in at the identity provider (a session cookie, sent by the browser; writes
  // carry the session's CSRF token), or with a key asked once (inline form, no prompt()),
  // kept in localStorage and sent as Bearer.
  const session = AC.session = {signedIn: false, csrf: null, admin: true};
  function headers(extra) {
    if (session.signedIn) return {"X-CSRF-Token": session.csrf, ...(extra || {})};
    const key = localStorage.getItem("agentcards_key");
    return {...(key ? {Authorization: `Bearer ${key}`} : {}), ...(extra || {})};
  }
  async function request(path, options) {
    const r = await fetch(path, {...(options || {}), headers: headers((options || {}).headers)});
    if (r.status === 401) {
      if (session.signedIn) signIn();
      else askForKey();
      throw new Error("unauthorized");
    }
    return r;
  }
  // JSON of `path`, or null when the endpoint does not exist on this gateway (an inline notice says so).
  async function api(path, options) {
    const r = await request(path, options);
    if (r.status === 404 && !(options && options.method)) {
      missing(path.split("?")[0]);
      return null;
    }
    const body = await r.json();
    if (!r.ok) throw new Error((body.error && body.error.message) || `${path}: HTTP ${r.status}`);
    return body;
  }
  function askForKey() {
    $("#key-form").hidden = false;
    $("#key-input").focus();
  }
  function signIn() {
    window.location.assign("/dashboard/login");
  }
  // Who is signed in (404: this gateway signs nobody in, keys it is). Admin actions are
  // greyed out for a person without agentcards:admin (the gateway refuses them anyway).
  async function whoAmI() {
    const r = await fetch("/dashboard/session", {headers: {Accept: "application/json"}});
    if (r.status === 404) return;
    if (r.status === 401) { signIn(); throw new Error("unauthorized"); }
    const me = await r.json();
    Object.assign(session, {signedIn: true, csrf: me.csrf_token, admin: me.admin, me});
    $("#user-name").textContent = me.name;
    $("#user-name").title = `${me.user_id} · ${me.tenant_id} · ${me.scopes.join(" ") || "no scope"}`;
    $("#user").hidden = false;
    document.body.dataset.admin = String(me.admin);
    for (const b of document.querySelectorAll(".admin-only")) {
      b.disabled = !me.admin;
      if (!me.admin) b.title = "needs the agentcards:admin scope";
    }
  }
  $("#sign-out").addEventListener("click", async () => {
    const r = await fetch("/dashboard/logout", {method: "POST", headers: headers()});
    const body = await r.json().catch(() => ({}));
    if (!r.ok) return toast(`Not signed out: ${(body.error && body.error.message) || `HTTP ${r.status}`}`);
    window.location.assign(body.next || "/dashboard/signed-out");
  });
  $("#key-form").addEventListener("submit", ev => {
    ev.preventDefault();
    localStorage.setItem("agentcards_key", $("#key-input").value.trim());
    $("#key-form").hidden = true;
    start();
  });
  function missing(path) {
    if (state.missing.has(path)) return;
    state.missing.add(path);
    notice(`${path} is not available on this gateway: that part of the page stays empty.`);
  }
  function notice(text) {
    const div = document.createElement("div");
    div.className = "notice";
    div.textContent = text;
    $("#notices").append(div);
  }
  function toast(text) {
    const t = $("#toast");
    t.textContent = text;
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, 2500);
  }

  // --- Data and views
  async function loadGraphs() {
    const [tools, hypergraph] = await Promise.all([api("/api/graph/tools"), api("/api/graph/hypergraph")]);
    state.data = {tools, hypergraph};
  }
  async function show(view) {
    if (!VIEWS.includes(view)) view = "hypergraph";
    state.view = view;
    localStorage.setItem("agentcards_view", view);
    for (const b of document.querySelectorAll("#views button")) b.classList.toggle("active", b.dataset.view === view);
    document.body.dataset.view = view;  // the stylesheet shows the graph or the executions list
    if (view === "executions" || view === "approvals") {  // lists, not graphs
      await (view === "executions" ? AC.showExecutions() : AC.showApprovals());
      document.body.dataset.rendered = view;
      return;
    }
    if (window.cy) window.cy.destroy();
    const {cy, ms} = await AgentCardsGraph.render($("#graph"), view, state.data);
    window.cy = cy;
    AC.lastRender = {view, ms, nodes: cy.nodes().length, edges: cy.edges().length};
    cy.on("tap", "node[kind = 'capability']", ev => AC.openPanel(ev.target.data("capability_id")));
    AC.applyFilter && AC.applyFilter();
    AC.onGraphDrawn && AC.onGraphDrawn(view);  // legend.js: the legend and degraded markers
    refit();  // the new legend took its room
    document.body.dataset.rendered = view;  // tests wait on this
  }
  for (const b of document.querySelectorAll("#views button")) b.addEventListener("click", () => show(b.dataset.view));
  // The graph's area shrinks when the legend below it (drawn after the graph) or the server
  // chips above it grow: refit then, or the bottom row of boxes is cut off under the legend.
  function refit() {
    const cy = window.cy;
    if (!cy || cy.destroyed()) return;
    const {clientWidth: w, clientHeight: h} = cy.container();
    if (w === cy.width() && h === cy.height()) return;
    cy.resize();
    cy.fit(undefined, AgentCardsGraph.LAYOUT.padding);
  }
  new ResizeObserver(refit).observe($("#graph"));
  AC.api = api;
  AC.request = request;
  AC.toast = toast;
  AC.show = show;
  // Code in its own language's colours (Prism's grammars are vendored: no CDN).
  AC.showCode = (el, text, language) => {
    el.className = language === "typescript" ? "language-typescript" : "language-python";
    el.textContent = text;
    if (window.Prism) Prism.highlightElement(el);
  };

  // Every capability (the list, the panel and the explorer's matches); filters in the query.
  AC.loadCapabilities = async (params) => {
    const query = new URLSearchParams({limit: "500", ...(params || {})});
    const body = await api(`/api/capabilities?${query}`);
    const caps = body ? body.capabilities : [];
    if (!params) state.caps = new Map(caps.map(c => [String(c.id), c]));
    return caps;
  };

  // Reload data and redraw, at most once a second (live events come in bursts).
  async function refresh() {
    await Promise.all([loadGraphs(), AC.loadCapabilities()]);
    await show(state.view);
  }
  let pending = null;
  AC.refreshSoon = () => {
    if (!pending) pending = setTimeout(() => { pending = null; refresh(); }, 1000);
  };

  // --- Metrics strip (every 10 s)
  const pct = x => (x == null ? "–" : `${Math.round(x * 100)}%`);
  async function metrics() {
    if (state.missing.has("/api/metrics/summary")) return;
    const m = await api("/api/metrics/summary").catch(() => null);
    if (!m) return;
    $("#m-epm").textContent = m.executions_per_min == null ? "–" : Number(m.executions_per_min).toFixed(1);
    $("#m-success").textContent = pct(m.success_rate);
    $("#m-cache").textContent = pct(m.cache_hit_rate);
    $("#m-learned").textContent = m.capabilities_learned ?? "–";
    adapter(m.search_learning || {});
    if (m.flower_url && session.admin) {  // Flower is an operator's: admins only (docs/identity.md)
      $("#flower-link").href = m.flower_url;
      $("#flower-link").hidden = false;
    }
  }

  // The query adapter (docs/search.md): "v3 · 125 runs · 0.59→0.67", and the last pass when
  // it was kept out ("v4 kept: 0.67→0.60").
  const score = x => (x == null ? "–" : Number(x).toFixed(2));
  const pass = p => `${score(p.score_before)}→${score(p.score_after)}`;
  function adapter(s) {
    const use = s.in_use, last = s.last;
    let text = use ? `v${use.version} · ${use.trained_on} runs · ${pass(use)}` : "none";
    if (last && (!use || last.version !== use.version)) {
      text += ` (v${last.version} kept: ${pass(last)}, ${last.held_back} held back)`;
    }
    // Before the first pass (a tenant's runs are consolidated soon after they are learned)
    // search uses the plain embedding: say so instead of a bare dash.
    $("#m-adapter").textContent = last ? text : "none yet";
  }

  // --- Live: /v1/events read with fetch, not EventSource: EventSource cannot send the
  // Authorization header, and a key in the URL would end up in logs and history.
  async function live() {
    let delay = 1000;
    for (;;) {
      try {
        const r = await request("/v1/events", {headers: {Accept: "text/event-stream"}});
        if (r.status === 404) { missing("/v1/events"); $("#live-state").textContent = "○ no live updates"; return; }
        if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
        $("#live-state").textContent = "● live";
        delay = 1000;
        await readEvents(r.body.getReader());
      } catch (err) {
        if (err.message === "unauthorized") return;  // restarted once a key is entered
      }
      $("#live-state").textContent = "○ reconnecting";
      await new Promise(res => setTimeout(res, delay));
      delay = Math.min(delay * 2, 30000);
    }
  }
  async function readEvents(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, {stream: true}).replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let type = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) type = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (data) onEvent(type, data);
      }
    }
  }
  function onEvent(type, raw) {
    let data = {};
    try { data = JSON.parse(raw); } catch { return; }
    AC.events = (AC.events || 0) + 1;
    if (type === "capability.learned") toast(`New capability: ${data.name || data.capability_id}`);
    if (type === "capability.learned" || type === "capability.updated") AC.refreshSoon();
    if (type === "execution.finished") {
      metrics();
      AC.executionsChanged && AC.executionsChanged();
    }
  }

  async function start() {
    try {
      if (!session.signedIn) await whoAmI();
      state.view = localStorage.getItem("agentcards_view") || "hypergraph";
      await refresh();
    } catch (err) {
      if (err.message !== "unauthorized") notice(`Could not load the dashboard: ${err.message}`);
      return;
    }
    metrics();
    if (!AC.metricsTimer) AC.metricsTimer = setInterval(metrics, 10000);
    AC.onStarted && AC.onStarted();  // legend.js polls server states, executions.js reads the hash
    if (!AC.live) AC.live = live();
  }
  document.addEventListener("DOMContentLoaded", start);
})();
