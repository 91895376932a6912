// On the capability panel: its inferred parameter schema, a "Run" form generated from that
// schema (POST /v1/capabilities/{id}/execute?wait=true, the result shown below it), and its cache
// facts (GET /v1/capabilities/{id}/cache). Added after panel.js's openPanel, never inside it.
(function () {
  "use strict";
  const $ = sel => document.querySelector(sel);
  const AC = window.agentcards;
  const pct = x => (x == null ? "–" : `${Math.round(x * 100)}%`);
  let cap = null;

  // The JSON type of a property: its `type`, or the first non-null one of an anyOf.
  function typeOf(prop) {
    if (typeof prop.type === "string") return prop.type;
    if (Array.isArray(prop.type)) return prop.type.find(t => t !== "null") || "any";
    const alt = (prop.anyOf || []).map(typeOf).find(t => t !== "null");
    return alt || "any";
  }

  // One input per property: text, number, checkbox, a list of allowed values, or JSON.
  function field(name, prop, required) {
    const type = typeOf(prop);
    const label = document.createElement("label");
    label.className = "run-field";
    const title = document.createElement("span");
    title.textContent = `${name}${required ? " *" : ""} (${type})${prop.description ? ` — ${prop.description}` : ""}`;
    let input;
    if (Array.isArray(prop.enum)) {
      input = document.createElement("select");
      input.append(...prop.enum.map(v => new Option(String(v), JSON.stringify(v))));
      input.dataset.kind = "enum";
    } else if (type === "boolean") {
      input = document.createElement("input");
      input.type = "checkbox";
      input.checked = prop.default === true;
      input.dataset.kind = "boolean";
    } else if (type === "integer" || type === "number") {
      input = document.createElement("input");
      input.type = "number";
      input.step = type === "integer" ? "1" : "any";
      input.dataset.kind = type;
    } else if (type === "string") {
      input = document.createElement("input");
      input.dataset.kind = "string";
    } else {
      input = document.createElement("textarea");
      input.rows = 2;
      input.placeholder = type === "array" ? "[1, 2]" : type === "object" ? '{"key": "value"}' : "any JSON value";
      input.dataset.kind = "json";
    }
    if (prop.default !== undefined && input.dataset.kind !== "boolean") {
      input.value = input.dataset.kind === "json" || input.dataset.kind === "enum"
        ? JSON.stringify(prop.default) : String(prop.default);
    }
    input.required = required && input.dataset.kind !== "boolean";
    input.name = name;
    input.id = `run-arg-${name}`;
    label.append(title, input);
    return label;
  }

  function renderForm(schema) {
    const props = schema.properties || {};
    const required = new Set(schema.required || []);
    const fields = Object.entries(props).map(([name, prop]) => field(name, prop, required.has(name)));
    if (!fields.length) fields.push(Object.assign(document.createElement("p"), {className: "muted", textContent: "No parameters."}));
    $("#cap-run-fields").replaceChildren(...fields);
  }

  // The args object from the form; an empty optional field is left out (its default applies).
  function collect() {
    const args = {};
    for (const input of document.querySelectorAll("#cap-run-fields [name]")) {
      const kind = input.dataset.kind;
      if (kind === "boolean") { args[input.name] = input.checked; continue; }
      if (input.value === "") continue;
      if (kind === "integer" || kind === "number") args[input.name] = Number(input.value);
      else if (kind === "string") args[input.name] = input.value;
      else {
        try { args[input.name] = JSON.parse(input.value); } catch {
          throw new Error(`${input.name}: not valid JSON`);
        }
      }
    }
    return args;
  }

  async function run(ev) {
    ev.preventDefault();
    if (!cap) return;
    const out = $("#cap-run-out"), status = $("#cap-run-status"), result = $("#cap-run-result");
    let args;
    try { args = collect(); } catch (err) { return AC.toast(err.message); }
    out.hidden = false;
    out.dataset.state = "running";
    status.textContent = "running…";
    result.textContent = "";
    $("#cap-run-submit").disabled = true;
    try {
      const r = await AC.request(`/v1/capabilities/${encodeURIComponent(cap.id)}/execute?wait=true`, {
        method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({args, no_cache: $("#cap-run-nocache").checked}),
      });
      const body = await r.json().catch(() => ({}));
      if (!r.ok && !body.status) {  // refused before it ran (bad args, scope, rate limit)
        const error = body.error || {type: `HTTP ${r.status}`, message: ""};
        status.textContent = `refused: ${error.type}`;
        result.textContent = error.message + (error.details ? `\n${JSON.stringify(error.details, null, 2)}` : "");
        out.dataset.state = "refused";
        return;
      }
      const link = document.createElement("a");
      link.href = `#execution/${body.id}`;
      link.textContent = "trace & code";
      const cached = body.cache_hit ? ` · from the cache (${body.cache_hit})` : "";
      const took = body.duration_ms != null ? ` · ${Math.round(body.duration_ms)} ms` : "";
      status.replaceChildren(`${body.status}${took}${cached} · `, link);
      result.textContent = body.error
        ? `${body.error.type}: ${body.error.message}`
        : JSON.stringify(body.result, null, 2);
      out.dataset.state = body.status;
      loadCache(cap.id);
    } catch (err) {
      status.textContent = `failed to send: ${err.message}`;
      out.dataset.state = "refused";
    } finally {
      $("#cap-run-submit").disabled = false;
    }
  }
  $("#cap-run-form").addEventListener("submit", run);

  async function loadCache(id) {
    const facts = await AC.api(`/v1/capabilities/${encodeURIComponent(id)}/cache`).catch(() => null);
    if (!facts || !cap || String(cap.id) !== String(id)) return;
    const expires = facts.next_expiry ? new Date(facts.next_expiry).toLocaleTimeString() : "–";
    const rows = [
      ["hit rate", facts.runs ? `${pct(facts.hit_rate)} (${facts.hits} of ${facts.runs} runs)` : "no runs yet"],
      ["TTL", facts.cacheable ? `${facts.ttl_s} s` : `not cached: ${facts.reason}`],
      ["stored results", `${facts.entries} (served ${facts.entry_hits} hit${facts.entry_hits === 1 ? "" : "s"}; first expires ${expires})`],
    ];
    const dl = $("#cap-cache");
    dl.replaceChildren(...rows.flatMap(([k, v]) => {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = k;
      dd.textContent = v;
      return [dt, dd];
    }));
    dl.dataset.capabilityId = id;
  }

  function show(found) {
    cap = found;
    const schema = found.parameters_schema || {type: "object", properties: {}};
    $("#cap-schema").textContent = JSON.stringify(schema, null, 2);
    renderForm(schema);
    $("#cap-run-out").hidden = true;
    $("#cap-cache").replaceChildren();
    delete $("#cap-cache").dataset.capabilityId;
    loadCache(found.id);
  }

  // After panel.js has filled the panel: add ours for the same capability.
  const open = AC.openPanel;
  AC.openPanel = async id => {
    await open(id);
    const shown = $("#code-panel").dataset.capabilityId;
    const found = AC.state.caps.get(String(shown));
    if (!$("#code-panel").hidden && found) show(found);
  };
})();
