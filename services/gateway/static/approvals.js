// The approvals inbox: the tool calls paused for a person's answer that the signed-in person
// (or key) may give (GET /api/approvals: the arguments' personal data tokenised, as runs'
// results and traces are on this page), oldest first, each answered here with an optional reason
// (POST /v1/executions/{id}/approvals/{call_id}; a session's write carries its CSRF token).
// The first answer stands: a call someone else answered first says so. The count in the
// view's button is kept fresh every 10 s. Uses window.agentcards (dashboard.js).
(function () {
  "use strict";
  const $ = sel => document.querySelector(sel);
  const AC = window.agentcards;
  const inbox = AC.approvals = {pending: []};
  const RUN_ID = /^[0-9a-fA-F-]{36}$/;

  function text(tag, content, className) {
    const el = document.createElement(tag);
    el.textContent = content;
    if (className) el.className = className;
    return el;
  }
  const left = iso => {
    const s = Math.max(0, Math.round((new Date(iso) - Date.now()) / 1000));
    return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
  };

  async function load() {
    if (AC.state.missing.has("/api/approvals")) return;
    const body = await AC.api("/api/approvals").catch(() => null);
    if (!body) return;
    inbox.pending = body.pending;
    count();
    if (AC.state.view === "approvals") render();
    document.body.dataset.approvalsLoaded = String(Date.now());  // tests wait on this
  }
  function count() {
    const n = inbox.pending.length;
    $("#ap-count").textContent = n ? ` (${n})` : "";
    document.querySelector('#views button[data-view="approvals"]').classList.toggle("waiting", n > 0);
  }

  function render() {
    const items = inbox.pending.map(card);
    if (!items.length) items.push(text("li", "Nothing waits for your answer.", "muted empty"));
    $("#ap-list").replaceChildren(...items);
  }

  // One paused call: what would run (server, tool, arguments), who asked, which policies ask
  // for approval and who may answer, how long it stays open; a reason, approve or deny.
  function card(p) {
    const li = document.createElement("li");
    li.className = "approval";
    li.dataset.callId = p.call_id;
    li.dataset.executionId = p.execution_id;
    const head = document.createElement("div");
    head.className = "row";
    head.append(text("b", `${p.server}:${p.tool}`, "tool"), text("span", `asked by ${p.caller}`, "caller"));
    if (RUN_ID.test(p.execution_id)) {
      const link = text("a", "the run", "run-link");
      link.href = `#execution/${p.execution_id}`;
      head.append(link);
    }
    const facts = text("div",
      `policy ${p.policies.join(", ")} · answered by ${p.approvers.length ? p.approvers.join(", ") : "an admin"}`
      + ` · open for ${left(p.expires_at)}`, "muted");
    const args = text("pre", p.args === null ? "(arguments sealed with a key this gateway no longer has)"
      : JSON.stringify(p.args, null, 2), "json args");
    const reason = document.createElement("input");
    reason.className = "reason";
    reason.placeholder = "reason (optional; the caller sees it)";
    reason.maxLength = 2000;
    const approve = text("button", "Approve", "approve");
    const deny = text("button", "Deny", "deny danger");
    for (const b of [approve, deny]) b.type = "button";
    const outcome = text("div", "", "outcome");
    outcome.hidden = true;
    const buttons = [approve, deny];
    approve.addEventListener("click", () => answer(p, "approve", reason, buttons, li, outcome));
    deny.addEventListener("click", () => answer(p, "deny", reason, buttons, li, outcome));
    const actions = document.createElement("div");
    actions.className = "row";
    actions.append(reason, approve, deny);
    li.append(head, facts, args, actions, outcome);
    return li;
  }

  async function answer(p, decision, reason, buttons, li, outcome) {
    for (const b of buttons) b.disabled = true;
    const body = {decision, ...(reason.value.trim() ? {reason: reason.value.trim()} : {})};
    const path = `/v1/executions/${encodeURIComponent(p.execution_id)}/approvals/${encodeURIComponent(p.call_id)}`;
    let r, got;
    try {
      r = await AC.request(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
      got = await r.json().catch(() => ({}));
    } catch (err) {
      for (const b of buttons) b.disabled = false;
      return AC.toast(`Not answered: ${err.message}`);
    }
    outcome.hidden = false;
    if (r.ok) {
      li.dataset.state = got.status;  // approved or denied
      outcome.textContent = `${got.status === "approved" ? "Approved" : "Denied"} by ${got.decided_by}`
        + (got.reason ? `: ${got.reason}` : "") + (got.status === "approved" ? "; the call runs now" : "");
      AC.toast(`${p.server}:${p.tool} ${got.status}`);
    } else {
      // 409: someone answered first, or its time or run ended; 403: not yours to answer.
      li.dataset.state = r.status === 409 ? "closed" : "refused";
      outcome.textContent = (got.error && got.error.message) || `HTTP ${r.status}`;
      if (r.status !== 409 && r.status !== 403) for (const b of buttons) b.disabled = false;
    }
    if (r.ok || r.status === 409) {  // no longer waits for anyone
      inbox.pending = inbox.pending.filter(x => !(x.call_id === p.call_id && x.execution_id === p.execution_id));
      count();
    }
  }

  $("#ap-refresh").addEventListener("click", load);
  $("#ex-approvals .to-approvals").addEventListener("click", () => AC.show("approvals"));
  AC.showApprovals = load;
  AC.onStarted = (previous => () => {
    if (previous) previous();
    load();
    if (!inbox.timer) inbox.timer = setInterval(load, 10000);
  })(AC.onStarted);
})();
