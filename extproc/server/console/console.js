/* The decision console: plain JS, no build step, no dependencies.
 *
 * Polls GET /v1/console/recent?after=SEQ every second (incremental), /v1/console/stats every two
 * seconds, /healthz and /v1/console/conversations every five, /v1/console/fleet every two, and
 * /v1/console/policy when the policy
 * version changes. The explain
 * form posts to /v1/explain. With an admin token, every fetch sends `Authorization: Bearer`; the
 * token comes from a `#token=...` fragment (then removed from the address bar) or the token bar,
 * and is kept in sessionStorage (this tab only).
 *
 * Everything from the server is put into the page with textContent / DOM nodes, never innerHTML.
 */
"use strict";

(() => {
  const TOKEN_KEY = "vsr-admin-token";
  const RECENT_MS = 1000;
  const STATS_MS = 2000;
  const HEALTH_MS = 5000;
  const CONVERSATIONS_MS = 5000;
  const FLEET_MS = 2000;
  // Why a conversation lookup did not keep the request on the conversation's model (ConversationLookup.reason).
  const CONVERSATION_REASONS = {
    no_key: "new conversation: no key yet (this answer teaches one)",
    not_found: "new conversation: its key is not in the store",
    store_error: "store unavailable: routed as a new conversation",
    decision_not_sticky: "decision not sticky: moved to its own model",
    fail_safe: "fail-safe route under overload: moved",
    model_gone: "the remembered model is no longer in the policy",
    cannot_take_images: "the remembered model cannot take images",
    context_window: "too long for the remembered model's context window",
  };
  const CONVERSATION_KEYS = { previous_response: "previous_response_id", session: "session header" };
  const MAX_ROWS = 300; // rows drawn; the ring may hold more
  const SVG_NS = "http://www.w3.org/2000/svg";
  const ACTIONS = ["route", "reject", "clarify"];
  const SHORT_PATHS = { "/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/completions": "completions" };
  const SAMPLE = {
    model: "auto",
    messages: [{ role: "user", content: "My passport number is X12345678. Is my visa form right?" }],
  };

  const state = {
    token: null,
    paused: false,
    authNeeded: false,
    epoch: null,
    lastSeq: 0,
    capacity: 0,
    records: [], // oldest first
    fresh: new Set(),
    expanded: new Set(),
    stats: null,
    source: "window",
    policy: null,
    policyVersion: null,
    conversations: null,
    fleet: null,
    image: null, // {dataUri, name, type, size}
    tab: "json",
  };

  // -- small DOM helpers ----------------------------------------------------------------------
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    applyAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    applyAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function applyAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.setAttribute("class", value);
      else if (key === "text") node.textContent = value;
      else if (key === "title") {
        if (node instanceof SVGElement) node.appendChild(svg("title", { text: value }));
        else node.title = value;
      } else node.setAttribute(key, value === true ? "" : String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function fmtMs(value) {
    if (value === null || value === undefined) return "–";
    if (value < 1) return value.toFixed(3);
    if (value < 100) return value.toFixed(2);
    return value.toFixed(0);
  }

  function fmtTime(ts) {
    const d = new Date(ts * 1000);
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  function fmtBound(ms) {
    if (ms >= 1000) return `${ms / 1000}s`;
    return `${ms}`;
  }

  function actionClass(action) {
    return ACTIONS.includes(action) ? action : "other";
  }

  function pct(n, total) {
    if (!total) return "–";
    const p = (100 * n) / total;
    return `${p < 10 ? p.toFixed(1) : p.toFixed(0)}%`;
  }

  // -- auth and fetch -------------------------------------------------------------------------
  class AuthError extends Error {}

  function initToken() {
    const match = location.hash.match(/(?:^#|&)token=([^&]*)/);
    if (match) {
      const token = decodeURIComponent(match[1]);
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      history.replaceState(null, "", location.pathname + location.search); // out of the address bar
    }
    state.token = sessionStorage.getItem(TOKEN_KEY);
  }

  function showTokenBar(reason) {
    state.authNeeded = true;
    $("token-reason").textContent = reason;
    $("token-bar").hidden = false;
    setLive("bad", "token needed");
  }

  async function api(path, options = {}) {
    const headers = Object.assign({}, options.headers || {});
    if (state.token) headers.Authorization = `Bearer ${state.token}`;
    const reply = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
    if (reply.status === 401) {
      showTokenBar(
        state.token
          ? "The admin token was refused. Enter the right one (server.admin_token)."
          : "This admin server needs a bearer token (server.admin_token).",
      );
      throw new AuthError("unauthorized");
    }
    let data = null;
    try {
      data = await reply.json();
    } catch (_) {
      data = null;
    }
    if (!reply.ok) {
      const message = data && data.error ? data.error.message : `HTTP ${reply.status}`;
      const error = new Error(message);
      error.status = reply.status;
      throw error;
    }
    return data;
  }

  function setLive(kind, text) {
    const dot = $("live-dot");
    dot.className = `dot ${kind}`;
    $("live-text").textContent = text;
  }

  // -- polling --------------------------------------------------------------------------------
  function loop(fn, interval, needsAuth = true) {
    const tick = async () => {
      if (!state.paused && !(needsAuth && state.authNeeded)) {
        try {
          await fn();
        } catch (err) {
          if (!(err instanceof AuthError)) {
            setLive("bad", `error: ${err.message}`);
          }
        }
      }
      setTimeout(tick, interval);
    };
    tick();
  }

  async function pollRecent() {
    const data = await api(`/v1/console/recent?after=${state.lastSeq}`);
    if (!data.enabled) {
      $("recent-meta").textContent = `ring off (${data.reason})`;
      setLive("live", "live (no ring)");
      return;
    }
    if (state.epoch !== null && data.epoch !== state.epoch) {
      // The server restarted: its numbers start again at 1. Start over from its oldest record.
      state.records = [];
      state.lastSeq = 0;
      state.epoch = data.epoch;
      return pollRecent();
    }
    if (data.reset) state.records = []; // the server answered from its oldest record
    state.epoch = data.epoch;
    state.capacity = data.capacity;
    if (data.records.length) {
      for (const record of data.records) state.fresh.add(record.seq);
      state.records.push(...data.records);
      if (state.records.length > state.capacity) state.records.splice(0, state.records.length - state.capacity);
      state.lastSeq = data.last_seq;
      renderRecent();
    } else if (!state.records.length) {
      renderRecent();
    }
    state.lastSeq = Math.max(state.lastSeq, data.last_seq);
    $("recent-meta").textContent = `${state.records.length} held of the last ${data.capacity} · seq ${data.last_seq}`;
    setLive("live", `live · ${fmtTime(Date.now() / 1000).slice(0, 8)}`);
    if (data.policy && data.policy !== state.policyVersion) loadPolicy();
  }

  async function pollStats() {
    state.stats = await api("/v1/console/stats");
    if (state.stats.policy && state.stats.policy !== state.policyVersion) loadPolicy();
    renderStats();
    if (state.policy) renderPolicy();
  }

  async function pollHealth() {
    const node = $("health");
    try {
      const reply = await fetch("/healthz", { cache: "no-store" });
      const data = await reply.json();
      const version = data.policy ? data.policy.version.slice(0, 12) : "none";
      const unavailable = Object.keys(data.unavailable_signals || {});
      clear(node);
      append(node, [
        "server",
        el("span", { class: `pill ${data.status}`, text: data.status }),
        ` policy ${version}`,
        unavailable.length
          ? el("span", {
              class: "pill warn",
              text: `degraded: ${unavailable.length} signal${unavailable.length > 1 ? "s" : ""} unavailable`,
              title: unavailable.map((n) => `${n}: ${data.unavailable_signals[n]}`).join("\n"),
            })
          : null,
      ]);
    } catch (err) {
      clear(node).textContent = "server unreachable";
    }
  }

  // -- recent decisions ----------------------------------------------------------------------
  function recordMatches(record, needle, onlyProblems) {
    if (onlyProblems && record.status === 200 && !record.overload) return false;
    if (!needle) return true;
    const hay = [
      record.decision,
      record.action,
      record.model,
      record.request_id,
      record.path,
      String(record.status),
      record.error,
      record.overload,
      record.conversation ? `conversation ${record.conversation.state} ${record.conversation.key || ""}` : null,
      ...record.matched,
    ]
      .filter(Boolean)
      .join(" ")
      .toLowerCase();
    return needle
      .toLowerCase()
      .split(/\s+/)
      .every((word) => hay.includes(word));
  }

  function signalChips(record) {
    const chips = record.matched.map((name) => el("span", { class: "chip matched", text: name }));
    for (const [name, s] of Object.entries(record.signals)) {
      if (s.status !== "matched" && s.status !== "not_matched") {
        chips.push(el("span", { class: `chip ${s.status}`, text: `${name}?`, title: `${name}: ${s.status}` }));
      }
    }
    if (!chips.length) chips.push(el("span", { class: "meta", text: "none" }));
    return chips;
  }

  function recentRow(record) {
    const row = el(
      "tr",
      { class: `rec${state.fresh.has(record.seq) ? " fresh" : ""}`, "data-seq": record.seq },
      el("td", { class: "time", text: fmtTime(record.ts) }),
      el("td", { class: "id", text: record.request_id ? record.request_id.slice(0, 8) : "–", title: record.request_id || "" }),
      el("td", { class: "path", text: SHORT_PATHS[record.path] || record.path, title: record.path }),
      el("td", {}, el("b", { text: record.decision || "–" })),
      el("td", {}, el("span", { class: `pill ${actionClass(record.action)}`, text: record.action })),
      el("td", {}, record.model || "–", conversationBadge(record.conversation)),
      el(
        "td",
        { class: `num${record.status >= 400 ? " status-bad" : ""}` },
        String(record.status),
        record.overload ? el("span", { class: "badge overload", text: record.overload }) : null,
      ),
      el("td", { class: "sigs" }, signalChips(record)),
      el("td", { class: "num", text: fmtMs(record.latency_ms), title: `ext_proc ${fmtMs(record.extproc_ms)} ms` }),
    );
    row.addEventListener("click", () => {
      if (state.expanded.has(record.seq)) state.expanded.delete(record.seq);
      else state.expanded.add(record.seq);
      renderRecent();
    });
    return row;
  }

  function detailRow(record) {
    const chips = Object.entries(record.signals).map(([name, s]) =>
      el("span", { class: `chip ${s.status}`, text: `${name}: ${s.status}${s.score ? ` ${s.score.toFixed(2)}` : ""}` }),
    );
    const facts = [
      `seq ${record.seq}`,
      `policy ${record.policy ? record.policy.slice(0, 12) : "–"}`,
      `ext_proc ${fmtMs(record.extproc_ms)} ms`,
      record.error ? `error ${record.error}` : null,
      record.conversation ? `conversation: ${conversationText(record.conversation)}` : null,
    ].filter(Boolean);
    return el(
      "tr",
      { class: "detail" },
      el("td", { colspan: 9 }, el("div", { class: "meta", text: facts.join(" · ") }), chips.length ? chips : "no signals ran"),
    );
  }

  // -- conversations ---------------------------------------------------------------------------
  function conversationText(c) {
    const key = CONVERSATION_KEYS[c.key] || c.key;
    if (c.state === "followed") return `pinned by its ${key} to ${c.remembered_model}`;
    if (c.state === "same") return `on its conversation's model ${c.remembered_model} (${key})`;
    const why = CONVERSATION_REASONS[c.reason] || c.reason || "";
    if (c.state === "moved") return `${why} (its ${key} was on ${c.remembered_model})`;
    return why || c.state;
  }

  function conversationBadge(c) {
    if (!c || c.state === "new") {
      return c && c.reason === "store_error"
        ? el("span", { class: "badge warn", text: "store down", title: conversationText(c) })
        : null;
    }
    const text = c.state === "moved" ? "moved" : "pinned";
    return el("span", { class: `badge conv ${c.state}`, text, title: conversationText(c) });
  }

  async function pollConversations() {
    state.conversations = await api("/v1/console/conversations");
    renderConversations();
  }

  function counts(object) {
    const entries = Object.entries(object || {});
    return entries.length ? entries.map(([k, n]) => el("span", { class: "chip", text: `${k} ${n}` })) : [el("span", { class: "meta", text: "none" })];
  }

  function renderConversations() {
    const data = state.conversations;
    const host = clear($("conversations-facts"));
    if (!data) return;
    const policy = data.policy;
    const facts = [];
    if (!data.enabled) {
      facts.push(["store", el("span", { class: "badge warn", text: "off", title: data.reason })], ["", data.reason]);
    } else {
      const store = data.store;
      const errors = Object.entries(store.errors).map(([op, n]) => `${op} ${n}`);
      facts.push(
        ["store", `${store.backend}${store.entries === null ? " (entries not counted: shared Redis)" : ` · ${store.entries} held`}`],
        ["store errors", errors.length ? el("span", { class: "badge warn", text: errors.join(", ") }) : "none"],
        ["lookups", counts(data.lookups)],
        ["why not kept", counts(data.reasons)],
        ["learned", counts(data.learned)],
      );
    }
    if (policy) {
      facts.push(
        ["policy", policy.enabled ? `on · ttl ${policy.ttl_s} s · session header ${policy.session_header || "none"}` : "off"],
        ["not sticky", policy.not_sticky.length ? policy.not_sticky.map((n) => el("span", { class: "chip", text: n })) : "every decision keeps its conversations"],
      );
    }
    append(
      host,
      facts.map(([k, v]) => el("div", { class: "fact" }, el("span", { class: "meta", text: k }), el("span", {}, v))),
    );
    const body = clear($("conversations-recent").tBodies[0]);
    const rows = [...data.recent].reverse().map((r) =>
      el(
        "tr",
        { "data-seq": r.seq },
        el("td", { class: "time", text: fmtTime(r.ts) }),
        el("td", { class: "id", text: r.request_id ? r.request_id.slice(0, 8) : "–", title: r.request_id || "" }),
        el("td", {}, el("b", { text: r.decision || "–" })),
        el("td", {}, r.model || "–", conversationBadge(r.conversation)),
        el("td", { text: r.conversation.state }),
        el("td", { text: CONVERSATION_KEYS[r.conversation.key] || "–" }),
        el("td", { text: r.conversation.remembered_model || "–" }),
        el("td", { class: "meta", text: r.conversation.reason ? CONVERSATION_REASONS[r.conversation.reason] || r.conversation.reason : "" }),
      ),
    );
    append(body, rows);
    $("conversations-empty").hidden = rows.length > 0;
  }

  // -- fleet -----------------------------------------------------------------------------------
  async function pollFleet() {
    try {
      state.fleet = await api("/v1/console/fleet");
    } catch (err) {
      if (err instanceof AuthError || err.status !== 503) throw err;
      state.fleet = null; // no policy loaded yet
    }
    renderFleet();
  }

  function num(value, digits = 0) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
  }

  function fleetState(row) {
    if (row.cooling_s > 0) return el("span", { class: "badge warn", text: `cooling ${num(row.cooling_s, 1)} s` });
    if (row.failovers > 0) return el("span", { class: "badge conv moved", text: "failed over" });
    if (row.requests > 0 || row.latency_ms !== null) return el("span", { class: "badge conv", text: "serving" });
    return el("span", { class: "meta", text: "no answers yet" });
  }

  function fleetRow(name, row) {
    const kv = row.kv_cache === null ? "–" : `${Math.round(row.kv_cache * 100)}%`;
    return el(
      "tr",
      { "data-model": name },
      el("td", {}, el("b", { text: name })),
      el("td", {}, fleetState(row)),
      el("td", { class: "num", text: num(row.latency_ms, 1) }),
      el("td", { class: "num", text: num(row.samples, 1) }),
      el("td", { class: "num", text: num(row.running) }),
      el("td", { class: "num", text: num(row.waiting) }),
      el("td", { class: "num", text: kv, title: row.load_age_s === null ? "not scraped" : `scraped ${num(row.load_age_s, 1)} s ago` }),
      el("td", { class: "num", text: num(row.requests) }),
      el("td", { class: "num", text: num(row.failures) }),
      el("td", { class: "num", text: num(row.cooldowns) }),
      el("td", { class: "num failovers", text: num(row.failovers) }),
      el("td", { class: "num took-over", text: num(row.took_over) }),
    );
  }

  function routeText(route) {
    const extras = [];
    if (route.failover) extras.push("failover");
    if (route.algorithm === "weighted") extras.push(Object.entries(route.weights).map(([m, w]) => `${m} ${w}`).join(" / "));
    return `${route.algorithm}${extras.length ? ` (${extras.join(", ")})` : ""}`;
  }

  function renderFleet() {
    const data = state.fleet;
    const body = clear($("fleet-models").tBodies[0]);
    const routes = clear($("fleet-routes"));
    const recent = clear($("fleet-recent").tBodies[0]);
    $("fleet-empty").hidden = Boolean(data);
    if (!data) return;
    const models = Object.entries(data.models || {});
    append(body, models.map(([name, row]) => fleetRow(name, row)));
    $("fleet-empty").hidden = models.length > 0;
    $("fleet-empty").textContent = "No model selection here (the server runs without its fleet).";
    append(
      routes,
      Object.entries(data.routes).map(([name, route]) =>
        el(
          "div",
          { class: "fact", "data-route": name },
          el("span", { class: "meta", text: name }),
          el("span", {}, el("b", { text: routeText(route) }), " ", ...route.models.map((m) => el("span", { class: "chip", text: m }))),
        ),
      ),
    );
    const rows = [...data.recent].reverse().map((r) =>
      el(
        "tr",
        { "data-seq": r.seq },
        el("td", { class: "time", text: fmtTime(r.ts) }),
        el("td", { class: "id", text: r.request_id ? r.request_id.slice(0, 8) : "–", title: r.request_id || "" }),
        el("td", {}, el("b", { text: r.decision || "–" })),
        el("td", { text: r.model || "–" }),
        el("td", { class: "meta", text: r.selection }),
      ),
    );
    append(recent, rows);
    $("fleet-recent-empty").hidden = rows.length > 0;
  }

  function renderRecent() {
    const body = $("recent").tBodies[0];
    const needle = $("filter").value.trim();
    const onlyProblems = $("only-problems").checked;
    const rows = [];
    for (let i = state.records.length - 1; i >= 0 && rows.length < MAX_ROWS; i--) {
      const record = state.records[i];
      if (!recordMatches(record, needle, onlyProblems)) continue;
      rows.push(recentRow(record));
      if (state.expanded.has(record.seq)) rows.push(detailRow(record));
    }
    state.fresh.clear();
    clear(body);
    append(body, rows);
    $("recent-empty").hidden = rows.length > 0;
    $("recent-empty").textContent = state.records.length
      ? "No decision matches the filter."
      : "No decisions yet: send traffic through Envoy. This page polls every second.";
  }

  // -- stats ----------------------------------------------------------------------------------
  function currentStats() {
    const stats = state.stats;
    if (!stats) return null;
    if (state.source === "since_start" && stats.since_start) return { kind: "since start", data: stats.since_start };
    if (stats.window) return { kind: `last ${stats.window.total} of ${stats.window.capacity}`, data: stats.window };
    if (stats.since_start) return { kind: "since start", data: stats.since_start };
    return null;
  }

  function renderStats() {
    const current = currentStats();
    for (const button of document.querySelectorAll(".seg button")) {
      const available = state.stats && state.stats[button.dataset.source];
      button.disabled = !available;
      button.classList.toggle("on", current !== null && button.dataset.source === sourceKey(current));
    }
    if (!current) {
      $("counts-meta").textContent = "no counts: metrics and the ring are both off";
      return;
    }
    const data = current.data;
    const overload = data.overload || {};
    $("counts-meta").textContent =
      `${data.total} request${data.total === 1 ? "" : "s"} (${current.kind})` +
      (overload.shed || overload.fail_safe ? ` · overload: ${overload.shed} shed, ${overload.fail_safe} fail-safe` : "");
    drawCounts(data);
    drawLatency(data.latency);
    renderLatencyTable(current);
  }

  function sourceKey(current) {
    return current.kind === "since start" ? "since_start" : "window";
  }

  function decisionOrder() {
    // Policy order (priority, then default) first, then whatever else was counted.
    const order = [];
    if (state.policy) {
      for (const d of state.policy.decisions) order.push(d.name);
      order.push(state.policy.default.name);
    }
    return order;
  }

  function drawCounts(data) {
    const host = clear($("counts-chart"));
    const counted = Object.keys(data.decisions);
    const names = decisionOrder(); // every decision of the policy, by priority, counted or not
    for (const name of counted.sort()) if (!names.includes(name)) names.push(name);
    const width = 520;
    const row = 22;
    const labelW = 170;
    const height = Math.max(1, names.length) * row + 6;
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "requests per decision" });
    const max = Math.max(1, ...names.map((n) => (data.decisions[n] ? data.decisions[n].count : 0)));
    const barW = width - labelW - 60;
    if (!names.length) {
      chart.appendChild(svg("text", { x: 4, y: 16, class: "empty-text", text: "no requests yet" }));
    }
    names.forEach((name, i) => {
      const y = i * row + 3;
      const entry = data.decisions[name] || { count: 0, actions: {} };
      chart.appendChild(svg("text", { x: labelW - 8, y: y + 14, "text-anchor": "end", class: "label", text: name }));
      chart.appendChild(svg("rect", { x: labelW, y: y + 3, width: barW, height: row - 8, rx: 3, class: "bar-bg" }));
      let x = labelW;
      const actions = Object.entries(entry.actions).sort(
        (a, b) => ACTIONS.indexOf(actionClass(a[0])) - ACTIONS.indexOf(actionClass(b[0])),
      );
      for (const [action, n] of actions) {
        const w = (barW * n) / max;
        chart.appendChild(
          svg("rect", {
            x,
            y: y + 3,
            width: Math.max(w, 1),
            height: row - 8,
            rx: 3,
            class: `bar ${actionClass(action)}`,
            title: `${name}: ${n} ${action}`,
          }),
        );
        x += w;
      }
      chart.appendChild(
        svg("text", {
          x: labelW + barW + 6,
          y: y + 14,
          class: "value",
          text: `${entry.count} · ${pct(entry.count, data.total)}`,
        }),
      );
    });
    host.appendChild(chart);
    const legend = clear($("action-legend"));
    for (const action of [...ACTIONS, "other"]) {
      append(legend, [el("span", {}, el("i", { class: action }), action === "other" ? "error / failure" : action)]);
    }
  }

  function drawLatency(latency) {
    const host = clear($("latency-chart"));
    const width = 520;
    const height = 170;
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "route latency histogram" });
    host.appendChild(chart);
    const counts = latency ? latency.counts : [];
    const total = counts.reduce((a, b) => a + b, 0);
    const meta = [];
    if (latency && latency.p50_ms !== undefined && latency.p50_ms !== null) {
      meta.push(`p50 ${fmtMs(latency.p50_ms)} ms`, `p95 ${fmtMs(latency.p95_ms)} ms`);
    }
    if (latency && latency.mean_ms) meta.push(`mean ${fmtMs(latency.mean_ms)} ms`);
    $("latency-meta").textContent = meta.length ? `(router total · ${meta.join(" · ")})` : "(router total)";
    if (!total) {
      chart.appendChild(svg("text", { x: 4, y: 20, class: "empty-text", text: "no latencies yet" }));
      return;
    }
    const bounds = latency.bounds_ms;
    let first = counts.findIndex((n) => n > 0);
    let last = counts.length - 1 - [...counts].reverse().findIndex((n) => n > 0);
    first = Math.max(0, first - 1);
    last = Math.min(counts.length - 1, last + 1);
    while (last - first < 5 && (first > 0 || last < counts.length - 1)) {
      if (first > 0) first--;
      if (last - first < 5 && last < counts.length - 1) last++;
    }
    const shown = counts.slice(first, last + 1);
    const left = 34;
    const bottom = height - 36;
    const top = 8;
    const slot = (width - left - 6) / shown.length;
    const max = Math.max(...shown);
    for (const frac of [0.5, 1]) {
      const y = bottom - (bottom - top) * frac;
      chart.appendChild(svg("line", { x1: left, x2: width - 6, y1: y, y2: y, class: "grid-line" }));
      chart.appendChild(
        svg("text", { x: left - 4, y: y + 3, "text-anchor": "end", class: "axis", text: Math.round(max * frac) }),
      );
    }
    const upright = slot >= 44; // room for a label under its bar; else slanted
    shown.forEach((n, j) => {
      const i = first + j;
      const h = ((bottom - top) * n) / max;
      const x = left + j * slot + 2;
      const label = i < bounds.length ? `≤${fmtBound(bounds[i])}` : `>${fmtBound(bounds[bounds.length - 1])}`;
      chart.appendChild(
        svg("rect", {
          x,
          y: bottom - h,
          width: Math.max(slot - 4, 1),
          height: Math.max(h, n ? 1 : 0),
          class: "bar hist",
          title: `${label} ms: ${n}`,
        }),
      );
      const tx = x + (slot - 4) / 2;
      chart.appendChild(
        svg("text", {
          x: tx,
          y: bottom + 14,
          "text-anchor": upright ? "middle" : "end",
          class: "axis",
          transform: upright ? null : `rotate(-35 ${tx} ${bottom + 14})`,
          text: label,
        }),
      );
    });
    chart.appendChild(svg("line", { x1: left, x2: width - 6, y1: bottom, y2: bottom, class: "grid-line" }));
    chart.appendChild(svg("text", { x: width - 6, y: height - 2, "text-anchor": "end", class: "axis", text: "ms" }));
  }

  function renderLatencyTable(current) {
    const body = clear($("latency-table").tBodies[0]);
    const window = state.stats && state.stats.window;
    if (!window) {
      append(body, [el("tr", {}, el("td", { colspan: 5, class: "meta", text: "per-decision latency needs the ring" }))]);
      return;
    }
    const names = Object.keys(window.decisions);
    const order = decisionOrder();
    names.sort((a, b) => (order.indexOf(a) + 1 || 1e9) - (order.indexOf(b) + 1 || 1e9));
    for (const name of names) {
      const d = window.decisions[name];
      append(body, [
        el(
          "tr",
          {},
          el("td", { text: name }),
          el("td", { class: "num", text: d.count }),
          el("td", { class: "num", text: fmtMs(d.p50_ms) }),
          el("td", { class: "num", text: fmtMs(d.p95_ms) }),
          el("td", { class: "num", text: fmtMs(d.max_ms) }),
        ),
      ]);
    }
    if (!names.length) {
      append(body, [el("tr", {}, el("td", { colspan: 5, class: "meta", text: "no decisions in the window yet" }))]);
    }
  }

  // -- policy tree ----------------------------------------------------------------------------
  async function loadPolicy() {
    try {
      state.policy = await api("/v1/console/policy");
      state.policyVersion = state.policy.version;
      renderPolicy();
      if (state.stats) renderStats();
    } catch (err) {
      if (!(err instanceof AuthError)) $("policy-meta").textContent = err.message;
    }
  }

  function treeNode(node) {
    if (node.op === "signal") {
      const parts = [el("span", { class: "sig", text: node.signal })];
      if (node.label) parts.push(el("span", { class: "lbl", text: `[${node.label}]` }));
      if (node.min_score !== null && node.min_score !== undefined) {
        parts.push(el("span", { class: "min", text: ` ≥ ${node.min_score}` }));
      }
      parts.push(el("span", { class: "type", text: ` ${node.type || "?"}` }));
      if (node.on_error && node.on_error !== "no_match") {
        parts.push(el("span", { class: "badge", text: `on_error: ${node.on_error}` }));
      }
      if (node.unavailable) parts.push(el("span", { class: "badge warn", text: "unavailable", title: node.unavailable }));
      return el("li", { class: "leaf", title: node.path }, parts);
    }
    return el(
      "li",
      { class: "node", title: node.path },
      el("span", { class: `op ${node.op}`, text: node.op.toUpperCase() }),
      el("ul", {}, node.children.map(treeNode)),
    );
  }

  function actionText(action) {
    if (action.type === "route") return `route → ${action.models.join(", ")}`;
    if (action.type === "reject") return `reject ${action.status} (${action.code})`;
    return `clarify: “${action.message.length > 60 ? `${action.message.slice(0, 60)}…` : action.message}”`;
  }

  function hitRate(name) {
    const current = currentStats();
    if (!current) return null;
    const entry = current.data.decisions[name];
    return { n: entry ? entry.count : 0, total: current.data.total, kind: current.kind };
  }

  function decisionCard(decision, isDefault) {
    const hit = hitRate(decision.name);
    const fill = el("div", { class: "fill" });
    if (hit && hit.total) fill.style.width = `${(100 * hit.n) / hit.total}%`;
    return el(
      "div",
      { class: `decision ${isDefault ? "default" : decision.action.type}`, "data-decision": decision.name },
      el(
        "div",
        { class: "decision-head" },
        el("span", { class: "prio", text: isDefault ? "default" : decision.priority }),
        el("span", { class: "name", text: decision.name }),
        el("span", { class: `pill ${decision.action.type}`, text: decision.action.type }),
        el("span", { class: "target", text: actionText(decision.action) }),
        decision.fail_safe ? el("span", { class: "badge", text: "fail_safe", title: "routes here when its signals time out under overload" }) : null,
      ),
      decision.description ? el("div", { class: "desc", text: decision.description }) : null,
      el(
        "div",
        { class: "hit" },
        el("div", { class: "track" }, fill),
        hit ? `hit rate ${pct(hit.n, hit.total)} (${hit.n}/${hit.total}, ${hit.kind})` : "hit rate –",
      ),
      isDefault
        ? el("div", { class: "meta", text: "when no decision above is true" })
        : el("ul", { class: "tree" }, treeNode(decision.when)),
    );
  }

  function renderPolicy() {
    const policy = state.policy;
    if (!policy) return;
    const unavailable = Object.entries(policy.signals).filter(([, s]) => s.unavailable);
    $("policy-meta").textContent =
      `${policy.name} · version ${policy.version.slice(0, 12)} · ${policy.decisions.length} decisions, ` +
      `${Object.keys(policy.signals).length} signals` +
      (unavailable.length ? ` (${unavailable.length} unavailable)` : "") +
      (policy.path ? ` · ${policy.path}` : "");
    const host = clear($("policy-tree"));
    for (const decision of policy.decisions) host.appendChild(decisionCard(decision, false));
    host.appendChild(decisionCard(policy.default, true));
  }

  // -- explain --------------------------------------------------------------------------------
  function selectTab(name) {
    state.tab = name;
    for (const button of document.querySelectorAll(".tabs button")) {
      button.classList.toggle("on", button.dataset.tab === name);
    }
    $("tab-json").hidden = name !== "json";
    $("tab-image").hidden = name !== "image";
  }

  function takeImage(file) {
    if (!file) return;
    if (!file.type.startsWith("image/")) {
      $("image-info").textContent = `${file.name || "that file"} is not an image (${file.type || "unknown type"})`;
      return;
    }
    const reader = new FileReader();
    reader.onload = () => {
      state.image = { dataUri: reader.result, name: file.name || "pasted image", type: file.type, size: file.size };
      const preview = $("image-preview");
      preview.src = reader.result;
      preview.hidden = false;
      $("image-info").textContent = `${state.image.name} · ${file.type} · ${(file.size / 1024).toFixed(1)} KiB`;
    };
    reader.readAsDataURL(file);
  }

  function buildImageRequest() {
    const prompt = $("image-prompt").value;
    const content = [];
    if (prompt.trim()) content.push({ type: "text", text: prompt });
    if (state.image) content.push({ type: "image_url", image_url: { url: state.image.dataUri } });
    if (!content.length) throw new Error("type a prompt or add an image");
    return { model: $("image-model").value.trim() || "auto", messages: [{ role: "user", content }] };
  }

  function shortened(request) {
    // The request as sent, with data: URIs cut for display.
    return JSON.stringify(
      request,
      (key, value) => (typeof value === "string" && value.startsWith("data:") && value.length > 80 ? `${value.slice(0, 60)}… (${value.length} chars)` : value),
      2,
    );
  }

  async function explain() {
    const button = $("explain-go");
    const stateText = $("explain-state");
    let body;
    let sent = null;
    try {
      if (state.tab === "image") {
        sent = buildImageRequest();
        body = JSON.stringify(sent);
      } else {
        body = $("explain-json").value;
        try {
          sent = JSON.parse(body);
        } catch (_) {
          sent = null; // sent as is: the server says what is wrong with it
        }
      }
    } catch (err) {
      stateText.textContent = err.message;
      return;
    }
    const path = $("explain-path").value;
    button.disabled = true;
    stateText.textContent = "explaining…";
    const started = performance.now();
    try {
      const data = await api(`/v1/explain${path ? `?path=${encodeURIComponent(path)}` : ""}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body,
      });
      stateText.textContent = `answered in ${(performance.now() - started).toFixed(0)} ms`;
      renderExplain(data, sent);
    } catch (err) {
      stateText.textContent = "";
      const host = clear($("explain-result"));
      host.appendChild(el("div", { class: "error-box", text: `explain failed: ${err.message}` }));
    } finally {
      button.disabled = false;
    }
  }

  function renderExplain(data, sent) {
    const host = clear($("explain-result"));
    const target = data.model ? ` → ${data.model} (cluster ${data.cluster}, model id ${data.upstream_model})` : "";
    host.appendChild(
      el(
        "div",
        { class: "summary", "data-testid": "explain-summary" },
        el("span", { class: "meta", text: "decision" }),
        el("span", { class: "decision-name", text: data.decision || "none" }),
        el("span", { class: `pill ${actionClass(data.action)}`, text: data.action }),
        el("span", { class: data.status >= 400 ? "status-bad" : "", text: `status ${data.status}` }),
        el("span", { text: target }),
        data.overload ? el("span", { class: "badge overload", text: data.overload }) : null,
        el("span", { class: "meta", text: `policy ${String(data.policy_version).slice(0, 12)}` }),
      ),
    );
    if (data.message) {
      host.appendChild(el("div", { class: data.error ? "error-box" : "message", text: `message: ${data.message}` }));
    }
    if (data.request) {
      const r = data.request;
      const images = r.images.map((i) => `${i.format} ${i.width}×${i.height} ${(i.bytes / 1024).toFixed(1)} KiB`);
      host.appendChild(
        el("p", {
          class: "meta",
          text:
            `request: ${r.api}, model ${r.model}, ${r.text_segments} text segment${r.text_segments === 1 ? "" : "s"}, ` +
            `${r.images.length} image${r.images.length === 1 ? "" : "s"}${images.length ? ` (${images.join("; ")})` : ""}` +
            `${r.stream ? ", streaming" : ""}`,
        }),
      );
    }

    const signals = el(
      "table",
      { id: "signals-table", class: "grid" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["signal", "type", "status", "score", "ms", "labels / evidence"].map((h, i) =>
            el("th", { class: i === 3 || i === 4 ? "num" : "", text: h }),
          ),
        ),
      ),
    );
    const sbody = el("tbody");
    for (const s of data.signals) {
      const labels = Object.entries(s.labels).map(([k, v]) => el("span", { class: "chip", text: `${k}=${v.toFixed(2)}` }));
      const detail = s.evidence.length ? s.evidence.join(", ") : s.error || "";
      append(sbody, [
        el(
          "tr",
          { "data-signal": s.name },
          el("td", { class: "mono", text: s.name }),
          el("td", { class: "meta", text: s.type }),
          el("td", {}, el("span", { class: `chip ${s.status}`, text: s.status })),
          el("td", { class: "num", text: s.score.toFixed(2) }),
          el("td", { class: "num", text: s.latency_ms.toFixed(3) }),
          el("td", {}, labels, el("span", { class: "meta", text: detail.length > 160 ? `${detail.slice(0, 160)}…` : detail })),
        ),
      ]);
    }
    signals.appendChild(sbody);

    const trace = el(
      "table",
      { id: "trace-table", class: "grid" },
      el(
        "thead",
        {},
        el("tr", {}, ["decision", "priority", "value", "first failing leaf"].map((h, i) => el("th", { class: i === 1 ? "num" : "", text: h }))),
      ),
    );
    const tbody = el("tbody");
    for (const d of data.trace.decisions) {
      const winner = d.name === data.decision;
      append(tbody, [
        el(
          "tr",
          { class: winner ? "winner" : "", "data-decision": d.name },
          el("td", { text: d.name }),
          el("td", { class: "num", text: d.priority === null ? "default" : d.priority }),
          el("td", {}, el("span", { class: `pill ${d.value}`, text: d.value })),
          el("td", { class: "mono", text: d.failed_leaf ? `${d.failed_leaf}${d.failed_at ? `  @ ${d.failed_at}` : ""}` : "" }),
        ),
      ]);
    }
    trace.appendChild(tbody);

    host.appendChild(
      el(
        "div",
        { class: "explain-cols" },
        el("div", {}, el("h3", { text: `Signals (${data.signals.length})` }), data.signals.length ? signals : el("p", { class: "meta", text: "no signals ran" })),
        el(
          "div",
          {},
          el("h3", { text: "Decisions trace" }),
          trace,
          data.conversation ? el("h3", { text: "Conversation" }) : null,
          data.conversation ? el("p", { class: "meta", "data-testid": "explain-conversation", text: explainedConversation(data) }) : null,
          el("h3", { text: "Notes" }),
          data.trace.notes.length
            ? el("ul", { class: "notes" }, data.trace.notes.map((n) => el("li", { text: n })))
            : el("p", { class: "meta", text: "none" }),
          el("h3", { text: "Timings (ms)" }),
          el(
            "div",
            { class: "timings" },
            Object.entries(data.trace.timings_ms).map(([k, v]) => el("span", { text: `${k} ${fmtMs(v)}` })),
          ),
        ),
      ),
    );
    if (sent !== null) {
      host.appendChild(el("details", { class: "sent" }, el("summary", { text: "request sent" }), el("pre", { text: shortened(sent) })));
    }
  }

  function explainedConversation(data) {
    const c = data.conversation;
    const key = c.key ? `carries a ${CONVERSATION_KEYS[c.key] || c.key}` : "carries no conversation key";
    const keeps = c.sticky ? "keeps a conversation on the model that served it" : "is not sticky: it moves a conversation to its own model";
    const store = c.store ? `store ${c.store}` : "no store (conversations off in the server settings)";
    return `This request ${key}; decision ${data.decision} ${keeps}; ${store}, ttl ${c.ttl_s} s${c.learns ? "; the answer's id would be learned" : ""}. Not looked up: ${c.reason}.`;
  }

  // -- wiring ---------------------------------------------------------------------------------
  function wire() {
    $("explain-json").value = JSON.stringify(SAMPLE, null, 2);
    $("pause").addEventListener("click", () => {
      state.paused = !state.paused;
      $("pause").textContent = state.paused ? "Resume" : "Pause";
      setLive(state.paused ? "" : "live", state.paused ? "paused" : "resuming");
    });
    $("token-bar").addEventListener("submit", (event) => {
      event.preventDefault();
      const token = $("token-input").value.trim();
      if (!token) return;
      state.token = token;
      sessionStorage.setItem(TOKEN_KEY, token);
      $("token-input").value = "";
      $("token-bar").hidden = true;
      state.authNeeded = false;
      loadPolicy();
    });
    $("filter").addEventListener("input", renderRecent);
    $("only-problems").addEventListener("change", renderRecent);
    for (const button of document.querySelectorAll(".seg button")) {
      button.addEventListener("click", () => {
        state.source = button.dataset.source;
        renderStats();
        renderPolicy();
      });
    }
    for (const button of document.querySelectorAll(".tabs button")) {
      button.addEventListener("click", () => selectTab(button.dataset.tab));
    }
    $("image-file").addEventListener("change", (event) => takeImage(event.target.files[0]));
    const drop = $("drop");
    for (const type of ["dragenter", "dragover"]) {
      drop.addEventListener(type, (event) => {
        event.preventDefault();
        drop.classList.add("over");
      });
    }
    for (const type of ["dragleave", "drop"]) {
      drop.addEventListener(type, () => drop.classList.remove("over"));
    }
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      takeImage(event.dataTransfer.files[0]);
    });
    document.addEventListener("paste", (event) => {
      if (state.tab !== "image") return;
      const item = [...(event.clipboardData ? event.clipboardData.items : [])].find((i) => i.type.startsWith("image/"));
      if (item) takeImage(item.getAsFile());
    });
    $("explain-go").addEventListener("click", explain);
  }

  function start() {
    initToken();
    wire();
    renderRecent();
    loadPolicy();
    loop(pollRecent, RECENT_MS);
    loop(pollStats, STATS_MS);
    loop(pollHealth, HEALTH_MS, false); // /healthz is public
    loop(pollConversations, CONVERSATIONS_MS);
    loop(pollFleet, FLEET_MS);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
