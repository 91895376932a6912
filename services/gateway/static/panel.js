// The dashboard's capability panel (edit name/intent/aliases, highlighted code, copy) and explorer
// (search, filters, sort, matches highlighted in the graph, export). Uses window.agentcards (dashboard.js).
(function () {
  "use strict";
  const $ = sel => document.querySelector(sel);
  const AC = window.agentcards;
  const pct = x => (x == null ? "–" : `${Math.round(x * 100)}%`);
  let current = null;

  // --- Code panel
  AC.openPanel = async id => {
    let cap = AC.state.caps.get(String(id));
    if (!cap) {
      await AC.loadCapabilities();
      cap = AC.state.caps.get(String(id));
    }
    if (!cap) return AC.toast("That capability is gone");
    current = cap;
    $("#cap-name").value = cap.name || "";
    $("#cap-intent").value = cap.intent || "";
    $("#cap-aliases").value = (cap.aliases || []).join(", ");
    const code = $("#cap-code");
    AC.showCode(code, cap.code || "(code not available from this gateway)", cap.language);
    const stats = [
      ["success rate", pct(cap.success_rate)], ["usage", cap.usage_count ?? 0],
      ["last used", cap.last_used ? new Date(cap.last_used).toLocaleString() : "never"],
      ["tools", (cap.tools_used || []).join(", ") || "none"],
      ["needs approval for", (cap.approval_tools || []).join(", ") || "none"],
      ["version", cap.versions > 1 ? `${cap.version} (latest of ${cap.versions})` : cap.version ?? 1],
      ["source", cap.source || "learned"], ["state", cap.disabled ? "disabled" : "enabled"],
      ["id", cap.id],
    ];
    const dl = $("#cap-stats");
    dl.replaceChildren(...stats.flatMap(([k, v]) => {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = k;
      dd.textContent = String(v);
      return [dt, dd];
    }));
    showLearners(cap);
    $("#cap-toggle").textContent = cap.disabled ? "Enable" : "Disable";
    $("#code-panel").hidden = false;
    $("#code-panel").dataset.capabilityId = cap.id;
    $("#code-panel").classList.toggle("disabled", !!cap.disabled);
    if (window.cy) window.cy.resize();
  };
  // Provenance: "learned from runs by alice (3), bob (1)" (people signed in; keys name nobody).
  async function showLearners(cap) {
    const p = $("#cap-learners");
    p.hidden = true;
    const detail = await AC.api(`/v1/capabilities/${encodeURIComponent(cap.id)}`).catch(() => null);
    const learners = (detail && detail.learned_from) || [];
    if (current !== cap || !learners.length) return;
    p.textContent = "learned from runs by " + learners.map(l => `${l.user_id} (${l.runs})`).join(", ");
    p.hidden = false;
  }
  function closePanel() {
    $("#code-panel").hidden = true;
    current = null;
    if (window.cy) window.cy.resize();
  }
  $("#panel-close").addEventListener("click", closePanel);
  document.addEventListener("keydown", ev => { if (ev.key === "Escape") closePanel(); });

  $("#copy-code").addEventListener("click", async () => {
    const text = current && current.code ? current.code : "";
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // No clipboard permission (e.g. not focused): the old way, through a selected textarea.
      const area = document.createElement("textarea");
      area.value = text;
      document.body.append(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      if (!ok) return AC.toast("Could not copy: select the code and copy it by hand");
    }
    AC.toast("Code copied");
  });

  $("#cap-save").addEventListener("click", async () => {
    if (!current) return;
    const aliases = $("#cap-aliases").value.split(",").map(s => s.trim()).filter(Boolean);
    const body = {name: $("#cap-name").value.trim(), aliases};
    const intent = $("#cap-intent").value.trim();
    if (intent) body.intent = intent;  // an intent cannot be emptied, only replaced
    try {
      const r = await AC.request(`/v1/capabilities/${encodeURIComponent(current.id)}`, {
        method: "PATCH", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
      });
      const answer = await r.json().catch(() => ({}));
      if (!r.ok) return AC.toast(`Not saved: ${(answer.error && answer.error.message) || `HTTP ${r.status}`}`);
      Object.assign(current, body, answer);
      AC.toast("Saved");
      AC.refreshSoon();
    } catch (err) {
      AC.toast(`Not saved: ${err.message}`);
    }
  });

  // Disable/Enable (reversible) and Delete (asks first): an operator's control over what was learned.
  // The answer's JSON ({} for 204), or null after saying in a toast why it failed.
  async function change(cap, options, failed) {
    try {
      const r = await AC.request(`/v1/capabilities/${encodeURIComponent(cap.id)}`, options);
      const answer = r.status === 204 ? {} : await r.json().catch(() => ({}));
      if (r.ok) return answer;
      AC.toast(`${failed}: ${(answer.error && answer.error.message) || `HTTP ${r.status}`}`);
    } catch (err) {
      AC.toast(`${failed}: ${err.message}`);
    }
    return null;
  }
  $("#cap-toggle").addEventListener("click", async () => {
    if (!current) return;
    const cap = current, disabled = !cap.disabled;
    const answer = await change(cap, {
      method: "PATCH", headers: {"Content-Type": "application/json"}, body: JSON.stringify({disabled}),
    }, "Not changed");
    if (!answer) return;
    Object.assign(cap, answer);
    if (current === cap) AC.openPanel(cap.id);
    AC.toast(disabled ? "Disabled" : "Enabled");
    AC.refreshSoon();
  });
  $("#cap-delete").addEventListener("click", async () => {
    if (!current) return;
    const cap = current;
    const sure = window.confirm(
      `Delete ${cap.name} v${cap.version ?? 1}? Its cached results go too; this cannot be undone.`);
    if (!sure || !(await change(cap, {method: "DELETE"}, "Not deleted"))) return;
    AC.state.caps.delete(String(cap.id));
    if (current === cap) closePanel();
    AC.toast("Deleted");
    AC.refreshSoon();
  });

  // --- Explorer
  const controls = ["#search", "#f-rate", "#f-usage", "#f-community", "#f-server", "#f-from", "#f-to", "#f-sort"];
  function filterParams() {
    const p = {};
    const q = $("#search").value.trim();
    if (q) p.q = q;
    const rate = Number($("#f-rate").value);
    if (rate > 0) p.min_success_rate = String(rate / 100);
    const usage = Number($("#f-usage").value);
    if (usage > 0) p.min_usage = String(usage);
    if ($("#f-community").value) p.community_id = $("#f-community").value;
    if ($("#f-server").value) p.server = $("#f-server").value;
    return p;
  }
  function inDates(cap) {
    const from = $("#f-from").value, to = $("#f-to").value;
    if (!from && !to) return true;
    const when = (cap.last_used || cap.created_at || "").slice(0, 10);
    return (!from || when >= from) && (!to || (when && when <= to));
  }
  AC.applyFilter = async () => {
    const params = filterParams();
    const active = Object.keys(params).length > 0 || $("#f-from").value || $("#f-to").value;
    $("#rate-out").textContent = `${$("#f-rate").value}%`;
    const caps = (await AC.loadCapabilities({...params, sort: $("#f-sort").value})).filter(inDates);
    const matched = new Set(caps.map(c => String(c.id)));
    AC.matched = active ? matched : null;
    $("#match-count").textContent = active ? `${matched.size} match` : `${caps.length} capabilities`;
    renderList(caps);
    highlight(active ? caps : null);
    fillChoices();
  };
  function renderList(caps) {
    $("#cap-list").replaceChildren(...caps.map(c => {
      const li = document.createElement("li"), box = document.createElement("input");
      box.type = "checkbox";
      box.value = c.id;
      box.addEventListener("click", ev => ev.stopPropagation());
      const name = document.createElement("span"), stats = document.createElement("span");
      name.className = "name";
      name.textContent = c.name;
      stats.className = "muted";
      stats.textContent = `${pct(c.success_rate)} · ${c.usage_count}×`;
      // One row per capability, at its latest version (the API lists no other).
      const version = document.createElement("span");
      version.className = "version muted";
      version.textContent = (c.versions || 1) > 1 ? `v${c.version} of ${c.versions}` : `v${c.version ?? 1}`;
      li.append(box, name, version, stats);
      li.dataset.capabilityId = c.id;
      li.addEventListener("click", () => AC.openPanel(c.id));
      return li;
    }));
  }
  // Matches (and their tools) highlighted, everything else dimmed; null clears.
  function highlight(caps) {
    const cy = window.cy;
    if (!cy) return;
    cy.elements().removeClass("dimmed match");
    if (!caps) return;
    const ids = new Set(caps.map(c => `cap:${c.id}`));
    const tools = new Set(caps.flatMap(c => c.tools_used || []));
    cy.nodes().forEach(n => {
      const d = n.data();
      const hit = d.kind === "capability" ? ids.has(d.id) : d.parent ? ids.has(d.parent) : tools.has(d.id);
      if (!hit) n.addClass("dimmed");
      else if (d.kind === "capability") n.addClass("match");
    });
    cy.edges().forEach(e => { if (e.source().hasClass("dimmed") || e.target().hasClass("dimmed")) e.addClass("dimmed"); });
  }
  function fillChoices() {
    const all = [...AC.state.caps.values()];
    const communities = [...new Set(all.map(c => c.community_id ?? c.community).filter(c => c != null))].sort((a, b) => a - b);
    const servers = [...new Set(((AC.state.data.tools || {}).nodes || []).map(n => n.data.server))].sort();
    setOptions("#f-community", communities);
    setOptions("#f-server", servers);
  }
  function setOptions(sel, values) {
    const select = $(sel), keep = select.value;
    const options = [new Option("any", ""), ...values.map(v => new Option(String(v), String(v)))];
    select.replaceChildren(...options);
    select.value = keep;
  }
  let timer = null;
  // "change" too: a <select> picked from the keyboard or by a script may send only that.
  for (const sel of controls) {
    for (const type of ["input", "change"]) {
      $(sel).addEventListener(type, () => { clearTimeout(timer); timer = setTimeout(AC.applyFilter, 250); });
    }
  }

  async function exportCaps(ids) {
    const query = ids ? `?ids=${encodeURIComponent(ids.join(","))}` : "";
    const r = await AC.request(`/v1/capabilities/export${query}`);
    if (!r.ok) return AC.toast(`Export failed: HTTP ${r.status}`);
    const url = URL.createObjectURL(await r.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = "agentcards-capabilities.json";
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  $("#export-all").addEventListener("click", () => exportCaps(null));
  $("#export-selected").addEventListener("click", () => {
    const ids = [...document.querySelectorAll("#cap-list input:checked")].map(b => b.value);
    if (!ids.length) return AC.toast("Tick capabilities in the list first");
    exportCaps(ids);
  });
})();
