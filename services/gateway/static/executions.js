// The executions view: the tenant's executions newest first, paged, filtered by status, error
// type and the user who submitted them (a person signed in at the identity provider; none
// for a key's runs) on the server (GET /v1/executions), their breakdown (GET /v1/executions/breakdown), and a
// detail panel with the code, args, result or error and the tool-call trace. `#execution/<id>`
// links open one. Uses window.agentcards (dashboard.js).
(function () {
  "use strict";
  const $ = sel => document.querySelector(sel);
  const AC = window.agentcards;
  const PAGE = 25;
  const ex = AC.executions = {offset: 0, total: 0, rows: [], open: null};

  const json = value => JSON.stringify(value, null, 2);
  const ms = v => (v == null ? "–" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`);
  const when = iso => (iso ? new Date(iso).toLocaleString() : "–");
  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }
  // Each tool once, in call order; a failed call marked ✗.
  function toolsCalled(view) {
    const seen = new Map();
    for (const c of view.tool_calls || []) seen.set(c.tool, (seen.get(c.tool) ?? true) && c.ok);
    return [...seen].map(([tool, ok]) => (ok ? tool : `${tool} ✗`)).join(", ") || "none";
  }
  function query() {
    const params = new URLSearchParams({limit: String(PAGE), offset: String(ex.offset), brief: "true"});
    if ($("#ex-status").value) params.set("status", $("#ex-status").value);
    if ($("#ex-error-type").value) params.set("error_type", $("#ex-error-type").value);
    if ($("#ex-user").value.trim()) params.set("user", $("#ex-user").value.trim());
    return params;
  }

  async function load() {
    const [page, counts] = await Promise.all([
      AC.api(`/v1/executions?${query()}`),
      AC.api("/v1/executions/breakdown"),
    ]);
    if (counts) renderBreakdown(counts);
    if (!page) return;
    ex.rows = page.executions;
    ex.total = page.total;
    renderRows();
    document.body.dataset.executionsLoaded = `${query()}`;  // tests wait on this
  }

  // "120 executions · succeeded 71 · failed 49 — why: runtime_error 30, tool_error 19"
  function renderBreakdown(counts) {
    const statuses = Object.entries(counts.by_status).map(([s, n]) => `${s} ${n}`).join(" · ");
    const why = Object.entries(counts.by_error_type).map(([t, n]) => `${t} ${n}`).join(", ");
    $("#ex-breakdown").textContent =
      `${counts.total} executions${statuses ? ` · ${statuses}` : ""}${why ? ` — errors: ${why}` : ""}`;
    const select = $("#ex-error-type"), keep = select.value;
    const types = Object.keys(counts.by_error_type);
    if (keep && !types.includes(keep)) types.push(keep);
    select.replaceChildren(new Option("any", ""), ...types.map(t => {
      const n = counts.by_error_type[t];
      return new Option(n == null ? t : `${t} (${n})`, t);
    }));
    select.value = keep;
  }

  function renderRows() {
    const rows = ex.rows.map(view => {
      const tr = document.createElement("tr");
      tr.dataset.executionId = view.id;
      tr.dataset.status = view.status;
      tr.className = `status-${view.status}`;
      const link = document.createElement("a");
      link.href = `#execution/${view.id}`;
      link.textContent = "trace & code";
      const linkCell = document.createElement("td");
      linkCell.append(link);
      tr.append(
        cell(when(view.started_at || view.created_at)),
        cell(view.status, "status"),
        cell(view.error ? view.error.type : view.cache_hit ? `cache hit (${view.cache_hit})` : "", "error-type"),
        cell(ms(view.duration_ms)),
        cell(toolsCalled(view), "tools"),
        cell(view.tenant_id),
        cell(view.user_id || "–", "user"),
        cell(view.intent || "", "intent"),
        linkCell,
      );
      tr.addEventListener("click", ev => {
        if (ev.target.tagName !== "A") location.hash = `execution/${view.id}`;
      });
      return tr;
    });
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = cell("No executions match these filters.", "muted");
      td.colSpan = 9;
      tr.append(td);
      rows.push(tr);
    }
    $("#ex-rows").replaceChildren(...rows);
    const last = Math.min(ex.offset + ex.rows.length, ex.total);
    $("#ex-page").textContent = ex.total ? `${ex.offset + 1}–${last} of ${ex.total}` : "0 of 0";
    $("#ex-newer").disabled = ex.offset === 0;
    $("#ex-older").disabled = ex.offset + PAGE >= ex.total;
  }

  // --- Detail panel
  async function openExecution(id) {
    const [view, submitted] = await Promise.all([
      AC.api(`/v1/executions/${encodeURIComponent(id)}`).catch(() => null),
      AC.api(`/v1/executions/${encodeURIComponent(id)}/submission`).catch(() => null),
    ]);
    if (!view) return AC.toast("That execution is gone");
    ex.open = id;
    $("#ex-title").textContent = view.intent || `execution ${id.slice(0, 8)}`;
    const facts = [
      ["status", view.status], ["error type", view.error ? view.error.type : "–"],
      ["started", when(view.created_at)], ["finished", when(view.finished_at)],
      ["duration", ms(view.duration_ms)], ["queued", ms(view.queued_ms)],
      ["tenant", submitted ? submitted.tenant_id : "–"], ["worker", (submitted && submitted.worker) || "–"],
      ["capability", (submitted && submitted.capability_id) || (view.capability && view.capability.id) || "–"],
      ["cache hit", view.cache_hit || "no"], ["attempts", view.attempts], ["id", view.id],
      ["MCP task", view.mcp_task_id || "–"],
    ];
    $("#ex-stats").replaceChildren(...facts.flatMap(([k, v]) => {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = k;
      dd.textContent = String(v);
      return [dt, dd];
    }));
    const error = $("#ex-error");
    error.hidden = !view.error;
    if (view.error) {
      const head = document.createElement("b"), message = document.createElement("div");
      head.textContent = view.error.type;
      message.className = "message";
      message.textContent = view.error.message;
      const parts = [head, message];
      if (view.error.traceback) {
        const tb = document.createElement("pre");
        tb.textContent = view.error.traceback;
        parts.push(tb);
      }
      error.replaceChildren(...parts);
    }
    // A run paused for a person's answer: which calls, and where to answer them (the
    // arguments are shown, tokenised, in the Approvals view only).
    const waiting = view.pending_approvals || [];
    $("#ex-approvals").hidden = !waiting.length;
    $("#ex-approvals-list").replaceChildren(...waiting.map(p => Object.assign(document.createElement("li"), {
      textContent: `${p.server}:${p.tool} · policy ${p.policies.join(", ")} · answered by ${p.approvers.length ? p.approvers.join(", ") : "an admin"}`,
    })));
    const code = $("#ex-code");
    AC.showCode(code, submitted ? submitted.code : "(not available)", view.language);
    $("#ex-args").textContent = submitted ? json(submitted.args) : "–";
    $("#ex-result").textContent = view.result === null || view.result === undefined ? "–" : json(view.result);
    $("#ex-stdout-box").hidden = !view.stdout;
    $("#ex-stdout").textContent = view.stdout + (view.stdout_truncated ? "\n… (truncated)" : "");
    const calls = (view.tool_calls || []).map(c => {
      const li = document.createElement("li");
      li.className = c.ok ? "ok" : "failed";
      li.textContent = `${c.ok ? "✓" : "✗"} ${c.tool} · ${ms(c.duration_ms)}`
        + (c.error ? ` · ${c.error.type}: ${c.error.message}` : "");
      return li;
    });
    if (!calls.length) calls.push(Object.assign(document.createElement("li"), {textContent: "no tool calls"}));
    $("#ex-trace").replaceChildren(...calls);
    const panel = $("#execution-panel");
    panel.hidden = false;
    panel.dataset.executionId = id;
    for (const tr of document.querySelectorAll("#ex-rows tr")) tr.classList.toggle("selected", tr.dataset.executionId === id);
  }
  function closeExecution() {
    $("#execution-panel").hidden = true;
    ex.open = null;
    if (location.hash.startsWith("#execution/")) history.replaceState(null, "", location.pathname);
  }
  $("#ex-panel-close").addEventListener("click", closeExecution);
  document.addEventListener("keydown", ev => { if (ev.key === "Escape") closeExecution(); });

  // `#execution/<id>`: the executions view with that execution open (a link to share).
  async function followHash() {
    const m = location.hash.match(/^#execution\/([0-9a-fA-F-]{36})$/);
    if (!m) return;
    if (AC.state.view !== "executions") await AC.show("executions");
    await openExecution(m[1]);
  }
  window.addEventListener("hashchange", followHash);

  for (const sel of ["#ex-status", "#ex-error-type", "#ex-user"]) {
    $(sel).addEventListener("change", () => { ex.offset = 0; load(); });
  }
  $("#ex-refresh").addEventListener("click", load);
  $("#ex-newer").addEventListener("click", () => { ex.offset = Math.max(0, ex.offset - PAGE); load(); });
  $("#ex-older").addEventListener("click", () => { ex.offset += PAGE; load(); });

  AC.showExecutions = load;
  AC.openExecution = openExecution;
  // A run finished: the first page shows it (later pages keep their place).
  AC.executionsChanged = () => {
    if (AC.state.view === "executions" && ex.offset === 0) {
      clearTimeout(ex.timer);
      ex.timer = setTimeout(load, 500);
    }
  };
  AC.onStarted = (previous => () => {
    if (previous) previous();
    followHash();
  })(AC.onStarted);
})();
