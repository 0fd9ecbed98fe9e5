// Switchboard dashboard. Plain JavaScript, no dependencies. Every value
// from the hub is put into the page with textContent or attributes, never
// as HTML.
"use strict";

const API = "/dashboard/api";
const EVENT_TYPES = ["accepted", "delivered", "rejected", "timeout", "retry", "replayed", "registered", "deregistered"];
const MAX_FLOW_ROWS = 500;
const RASTER = ["image/png", "image/jpeg", "image/gif", "image/webp"];

const $ = (sel) => document.querySelector(sel);

// el builds an element: el("td", {class: "x"}, "text", childNode, ...).
function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") n.className = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

function fmtTime(s) {
  if (!s || s.startsWith("0001-")) return "—";
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

function fmtDate(s) {
  if (!s || s.startsWith("0001-")) return "—";
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString([], { hour12: false });
}

function fmtAgo(s, now) {
  if (!s || s.startsWith("0001-")) return "never";
  const secs = Math.max(0, Math.round(((now ? new Date(now) : new Date()) - new Date(s)) / 1000));
  if (secs < 60) return secs + "s ago";
  if (secs < 3600) return Math.round(secs / 60) + "m ago";
  return Math.round(secs / 3600) + "h ago";
}

function fmtLatency(ns) {
  if (!ns) return "";
  const ms = ns / 1e6;
  return ms < 10 ? ms.toFixed(2) + " ms" : ms < 1000 ? ms.toFixed(0) + " ms" : (ms / 1000).toFixed(2) + " s";
}

class Unauthorized extends Error {}

// csrf is the session's CSRF token, sent with every state-changing call.
let csrf = "";

async function api(path, opts = {}) {
  const method = opts.method || "GET";
  const headers = { "Accept": "application/json" };
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  const res = await fetch(API + path, { method, credentials: "same-origin", headers });
  if (res.status === 401) { showLogin(); throw new Unauthorized("login needed"); }
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.message || body.error || res.statusText);
  return body;
}

// copyButton copies text to the clipboard and says so.
function copyButton(text) {
  const b = el("button", { class: "copy", type: "button", title: "copy " + text, "data-copy": text }, "copy");
  b.addEventListener("click", async (e) => {
    e.preventDefault(); e.stopPropagation();
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const t = el("textarea", {}, text); document.body.append(t); t.select(); document.execCommand("copy"); t.remove();
    }
    b.textContent = "copied";
    setTimeout(() => { b.textContent = "copy"; }, 1500);
  });
  return b;
}

// msgLink shows a message's whole id (UUIDv7 ids share their first
// characters: a cut id says nothing), opening its receipt, with a copy
// button.
function msgLink(id) {
  if (!id) return "";
  return el("span", { class: "idbox" },
    el("a", { class: "msg", href: "#", title: "show the receipt", "data-msg": id, onclick: (e) => { e.preventDefault(); openReceipt(id); } }, id),
    copyButton(id));
}

function agentLink(id) {
  if (!id) return "?";
  return el("a", { class: "agent", href: "#agent/" + encodeURIComponent(id), "data-agent-link": id }, id);
}

function badge(text, cls) { return el("span", { class: "pill " + cls }, text); }

// ---- login and tabs ----

function showLogin() {
  $("#app").hidden = true;
  $("#logout").hidden = true;
  $("#login").hidden = false;
  if (new URLSearchParams(location.search).get("login") === "failed") $("#login-error").hidden = false;
  $("#token").focus();
}

function switchTab(name) {
  for (const b of document.querySelectorAll(".tabs button")) b.classList.toggle("active", b.dataset.tab === name || (name === "agent" && b.dataset.tab === "agents"));
  for (const s of document.querySelectorAll(".tab")) s.hidden = s.id !== "tab-" + name;
  if (name !== "agent" && location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
  if (name === "overview") guard(loadStats)();
  if (name === "history") guard(loadHistory)();
  if (name === "agents") guard(loadAgents)();
  if (name === "conversations") guard(loadConversations)();
  if (name === "dlq") guard(loadDLQ)();
  if (name === "amp") guard(loadAMP)();
}

// ---- agents ----

async function loadAgents() {
  const data = await api("/agents");
  const tbody = $("#agents-table tbody");
  tbody.replaceChildren();
  for (const a of data.agents) {
    const c = a.card || {};
    const caps = [...new Set([...(a.capabilities || []), ...(c.tools || [])])];
    tbody.append(el("tr", { "data-agent": a.agent_id },
      el("td", {}, el("strong", {}, agentLink(a.agent_id)), c.name && c.name !== a.agent_id ? el("span", { class: "muted" }, " " + c.name) : null,
        el("div", { class: "muted mono" }, a.uri),
        c.description ? el("div", { class: "muted" }, c.description) : null),
      el("td", {}, badge(a.status, "st-" + a.status)),
      el("td", {}, a.protocol || "—"),
      el("td", {}, a.endpoint),
      el("td", { class: "caps" }, caps.length ? caps.map((x) => el("span", {}, x)) : el("span", { class: "muted" }, "—")),
      el("td", {}, String(a.queued)),
      el("td", { title: a.last_seen }, fmtAgo(a.last_seen, data.now)),
      el("td", {}, el("details", {}, el("summary", {}, "card"), el("pre", {}, JSON.stringify(c, null, 2)))),
    ));
  }
  $("#agents-empty").hidden = data.agents.length > 0;
  $("#count-agents").textContent = "(" + data.agents.length + ")";
  $("#agents-updated").textContent = "updated " + new Date().toLocaleTimeString([], { hour12: false });
}

// ---- live flow ----

let source = null;
let paused = false;
let flowCount = 0;

function flowQuery() {
  const q = new URLSearchParams();
  if ($("#f-type").value) q.set("type", $("#f-type").value);
  if ($("#f-agent").value.trim()) q.set("agent", $("#f-agent").value.trim());
  if ($("#f-conv").value.trim()) q.set("conversation_id", $("#f-conv").value.trim());
  const s = q.toString();
  return s ? "?" + s : "";
}

function connectFlow() {
  if (source) source.close();
  const status = $("#live-status");
  source = new EventSource(API + "/events" + flowQuery());
  source.onopen = () => { status.textContent = "live"; status.className = "pill pill-on"; };
  source.onerror = () => { status.textContent = "reconnecting"; status.className = "pill pill-off"; };
  for (const t of EVENT_TYPES) source.addEventListener(t, (e) => onEvent(JSON.parse(e.data)));
}

// refilterFlow applies the filters to the rows already shown, not only to
// the events that arrive after a change.
function refilterFlow() {
  const type = $("#f-type").value, agent = $("#f-agent").value.trim(), conv = $("#f-conv").value.trim(), proto = $("#f-proto").value;
  for (const tr of document.querySelectorAll("#flow-table tbody tr")) {
    tr.hidden = (type && tr.dataset.type !== type) || (proto && tr.dataset.proto !== proto) ||
      (agent && !tr.dataset.who.split(" ").includes(agent)) || (conv && tr.dataset.conv !== conv);
  }
}

function onEvent(ev) {
  if (ev.type === "registered" || ev.type === "deregistered") {
    if (!$("#tab-agent").hidden) guard(loadAgentPage)(currentAgent);
    if (!$("#tab-agents").hidden) loadAgents().catch(() => {});
  }
  if ((ev.type === "timeout" || ev.type === "rejected" || ev.type === "replayed") && !$("#tab-dlq").hidden) loadDLQ().catch(() => {});
  if (paused) return;
  const proto = $("#f-proto").value;
  if (proto && ev.protocol !== proto) return;
  const tbody = $("#flow-table tbody");
  const route = ev.agent ? ev.agent : (ev.sender || "?") + " → " + (ev.receiver || "?");
  const detail = [ev.detail, ev.error, ev.code ? "code " + ev.code : "", ev.queued ? ev.queued + " queued" : "",
    ev.conversation_id ? "conv " + ev.conversation_id : ""].filter(Boolean).join(" · ");
  tbody.prepend(el("tr", { class: "ev", "data-type": ev.type, "data-msg": ev.message_id || "", "data-proto": ev.protocol || "",
    "data-who": [ev.agent, ev.sender, ev.receiver].filter(Boolean).join(" "), "data-conv": ev.conversation_id || "" },
    el("td", {}, fmtTime(ev.at)),
    el("td", {}, badge(ev.type, "ev-" + ev.type)),
    el("td", {}, msgLink(ev.message_id)),
    el("td", {}, route),
    el("td", {}, ev.protocol || ""),
    el("td", {}, ev.attempts ? String(ev.attempts) : ""),
    el("td", {}, fmtLatency(ev.latency_ns)),
    el("td", { class: "detail" }, detail),
  ));
  while (tbody.children.length > MAX_FLOW_ROWS) tbody.lastChild.remove();
  flowCount++;
  $("#count-flow").textContent = "(" + flowCount + ")";
  $("#flow-empty").hidden = true;
}

// ---- conversations ----

async function loadConversations() {
  const data = await api("/conversations");
  const ul = $("#conv-list");
  ul.replaceChildren();
  for (const c of data.conversations) {
    const who = (c.participants || []).map((p) => p.agent_id).join(", ");
    ul.append(el("li", { "data-conv": c.conversation_id, onclick: () => openConversation(c.conversation_id) },
      el("div", { class: "mono" }, c.conversation_id),
      el("div", { class: "sub" }, c.message_count + " message" + (c.message_count === 1 ? "" : "s") + " · " + who),
      el("div", { class: "sub" }, "last " + fmtTime(c.last_message_at))));
  }
  $("#conv-empty").hidden = data.conversations.length > 0;
}

async function openConversation(id) {
  for (const li of document.querySelectorAll("#conv-list li")) li.classList.toggle("active", li.dataset.conv === id);
  const c = await api("/conversations/" + encodeURIComponent(id));
  const view = $("#conv-view");
  view.replaceChildren(
    el("h2", {}, "Conversation ", el("span", { class: "mono" }, c.conversation_id)),
    el("p", { class: "muted" }, "Participants: ", (c.participants || []).map((p) => p.agent + (p.trace_id ? " (trace " + p.trace_id + ")" : "")).join(", ")),
  );
  for (const m of c.messages || []) {
    const meta = m.metadata || {};
    view.append(el("div", { class: "msgbox", "data-msg": m.message_id },
      el("div", { class: "head" }, el("strong", {}, m.from), "→", el("strong", {}, m.to),
        el("span", {}, fmtTime(meta.timestamp)), msgLink(m.message_id),
        m.correlation_id ? el("span", {}, "re " + m.correlation_id) : null,
        meta.type ? badge(meta.type, "") : null),
      renderContent(m.content)));
  }
  if (!(c.messages || []).length) view.append(el("p", { class: "empty" }, "No messages."));
}

// renderContent renders MAMP content: a string, or an array of parts.
function renderContent(content) {
  if (typeof content === "string") return el("div", { class: "part text" }, content);
  if (!Array.isArray(content)) return el("pre", {}, JSON.stringify(content, null, 2));
  return el("div", {}, content.map(renderPart));
}

function renderPart(p) {
  switch (p.type) {
    case "text":
      return el("div", { class: "part text" }, p.text);
    case "code":
      return el("div", { class: "part code" }, el("div", { class: "label" }, "code" + (p.language ? " · " + p.language : "")), el("pre", {}, el("code", {}, p.code)));
    case "image": {
      const s = p.source || {};
      const mt = (s.media_type || "").toLowerCase();
      if (s.type === "base64" && RASTER.includes(mt)) {
        return el("figure", { class: "part image" },
          el("img", { src: "data:" + mt + ";base64," + s.data, alt: p.name || "image part", "data-media-type": mt }),
          el("figcaption", { class: "label" }, (p.name ? p.name + " · " : "") + mt + " · " + Math.round((s.data || "").length * 3 / 4) + " bytes"));
      }
      // Images by URL are not fetched (the page loads nothing from other
      // hosts); the address is shown instead.
      return el("div", { class: "part image" }, el("div", { class: "label" }, "image " + (mt || "") + (p.name ? " · " + p.name : "")),
        s.url ? el("span", { class: "mono" }, s.url) : el("span", { class: "muted" }, "(not rendered: " + (mt || "unknown type") + ")"));
    }
    case "file": {
      const s = p.source || {};
      return el("div", { class: "part file" }, el("div", { class: "label" }, "file"),
        el("span", {}, (p.name || "unnamed") + " · " + (p.mime_type || s.media_type || "unknown type") +
          (s.data ? " · " + Math.round(s.data.length * 3 / 4) + " bytes" : s.url ? " · " + s.url : "")));
    }
    case "data":
      return el("div", { class: "part data" }, el("div", { class: "label" }, "data"), el("pre", {}, JSON.stringify(p.data, null, 2)));
  }
  return el("div", { class: "part" }, el("pre", {}, JSON.stringify(p, null, 2)));
}

// ---- receipts ----

async function openReceipt(id) {
  switchTab("receipts");
  $("#receipt-id").value = id;
  const view = $("#receipt-view");
  let r;
  try { r = await api("/receipts/" + encodeURIComponent(id)); } catch (e) {
    if (e instanceof Unauthorized) return;
    view.replaceChildren(el("p", { class: "error" }, "No receipt for " + id + ": " + e.message));
    return;
  }
  const rows = [["Message", msgLink(r.message_id)], ["From → To", [agentLink(r.sender), " → ", agentLink(r.receiver)]], ["Status", badge(r.status, "st-" + r.status)],
    ["Attempts", String(r.attempts)], ["Code", r.code ? String(r.code) : "—"], ["Last error", r.last_error || "—"],
    ["Created", fmtDate(r.created_at)], ["Updated", fmtDate(r.updated_at)], ["Expires", fmtDate(r.expires_at)]];
  view.replaceChildren(el("div", { class: "receipt", id: "receipt-card", "data-status": r.status },
    el("dl", {}, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    r.reply ? [el("h3", {}, "Receiver's reply"), el("pre", {}, JSON.stringify(r.reply, null, 2))] : null,
    el("h3", {}, "History"),
    el("ol", {}, (r.history || []).map((h) => el("li", {}, fmtTime(h.at) + " ", badge(h.status, "st-" + h.status), h.detail ? " " + h.detail : "")))));
}

// ---- dead letters ----

async function loadDLQ() {
  const data = await api("/dlq");
  const tbody = $("#dlq-table tbody");
  tbody.replaceChildren();
  for (const r of data.dead_letters) {
    const btn = el("button", { class: "small replay", "data-replay": r.message_id }, "Replay");
    btn.addEventListener("click", () => replay(r.message_id, btn, r));
    tbody.append(el("tr", { "data-msg": r.message_id },
      el("td", {}, msgLink(r.message_id)), el("td", {}, agentLink(r.sender), " → ", agentLink(r.receiver)),
      el("td", {}, badge(r.status, "st-" + r.status)), el("td", {}, String(r.attempts)),
      el("td", {}, r.code ? String(r.code) : "—"), el("td", { class: "detail" }, r.last_error || "—"),
      el("td", {}, fmtTime(r.updated_at)), el("td", {}, btn)));
  }
  $("#dlq-empty").hidden = data.dead_letters.length > 0;
  $("#count-dlq").textContent = "(" + data.dead_letters.length + ")";
}

// confirmAction asks in a dialog; it resolves true on Confirm.
function confirmAction(title, text, okLabel) {
  const d = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-text").replaceChildren(...[text].flat());
  $("#confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.returnValue = "";
    d.showModal();
    $("#confirm-cancel").focus();
  });
}

async function replay(id, btn, r) {
  const who = r ? [" from ", el("strong", {}, r.sender), " to ", el("strong", {}, r.receiver)] : [];
  const ok = await confirmAction("Replay this dead letter?",
    ["Message ", el("code", {}, id), ...who, " is queued again with a fresh TTL and delivered as if it were new."], "Replay");
  if (!ok) return;
  btn.disabled = true;
  const note = $("#dlq-note");
  try {
    const r = await api("/dlq/" + encodeURIComponent(id) + "/replay", { method: "POST" });
    note.textContent = "Replayed " + id + ": now " + r.status;
    note.className = "banner ok";
    await loadDLQ();
  } catch (e) {
    note.textContent = "Replay of " + id + " failed: " + e.message;
    note.className = "banner bad";
    btn.disabled = false;
  }
}

// ---- AMP sessions ----

function sparkline(points) {
  const NS = "http://www.w3.org/2000/svg";
  const w = 160, h = 34, pad = 3;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "spark"); svg.setAttribute("width", w); svg.setAttribute("height", h);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const y = (p) => h - pad - (p / 4) * (h - 2 * pad);
  for (const lvl of [0, 4]) {
    const l = document.createElementNS(NS, "line");
    l.setAttribute("x1", 0); l.setAttribute("x2", w); l.setAttribute("y1", y(lvl)); l.setAttribute("y2", y(lvl));
    svg.append(l);
  }
  if (!points.length) return svg;
  const t0 = new Date(points[0].at).getTime(), t1 = new Date(points[points.length - 1].at).getTime();
  const x = (t) => t1 === t0 ? w - pad : pad + ((t - t0) / (t1 - t0)) * (w - 2 * pad);
  let d = "";
  points.forEach((p, i) => {
    const px = x(new Date(p.at).getTime()), py = y(p.pressure);
    d += (i ? " H" + px.toFixed(1) + " V" : "M" + px.toFixed(1) + " ") + py.toFixed(1);
  });
  const path = document.createElementNS(NS, "path");
  path.setAttribute("d", d);
  svg.append(path);
  const last = points[points.length - 1];
  const c = document.createElementNS(NS, "circle");
  c.setAttribute("cx", x(new Date(last.at).getTime())); c.setAttribute("cy", y(last.pressure)); c.setAttribute("r", 2.5);
  svg.append(c);
  const title = document.createElementNS(NS, "title");
  title.textContent = points.map((p) => fmtTime(p.at) + ": " + p.pressure).join("\n");
  svg.append(title);
  return svg;
}

async function loadAMP() {
  const data = await api("/amp/sessions");
  $("#amp-note").textContent = "Note: " + data.note + ".";
  const tbody = $("#amp-table tbody");
  tbody.replaceChildren();
  for (const s of data.sessions) {
    tbody.append(el("tr", { "data-session": s.session_id },
      el("td", { class: "mono" }, s.session_id), el("td", {}, s.source),
      el("td", {}, badge(String(s.pressure), s.pressure >= 3 ? "ev-rejected" : s.pressure >= 1 ? "ev-retry" : "st-alive")),
      el("td", {}, String(s.peak_pressure)), el("td", {}, sparkline(s.history || [])),
      el("td", {}, s.failures + " (total " + s.total_failures + ")"), el("td", {}, String(s.triggers)),
      el("td", {}, s.role || "—"), el("td", {}, fmtAgo(s.last_activity))));
  }
  $("#amp-empty").hidden = data.sessions.length > 0;
}

// ---- start ----

function guard(f) { return (...a) => f(...a).catch((e) => { if (!(e instanceof Unauthorized)) console.error(e); }); }

async function start() {
  const s = await fetch(API + "/session", { credentials: "same-origin" }).then((r) => r.json());
  $("#hub-host").textContent = s.host ? "· " + s.host + (s.dev ? " (dev mode, auth off)" : "") : "";
  if (!s.authenticated) { showLogin(); return; }
  csrf = s.csrf_token || "";
  $("#app").hidden = false;
  $("#logout").hidden = s.dev;
  if (location.search) history.replaceState(null, "", location.pathname + location.hash);
  $("#logout").addEventListener("click", logout);
  $("#stats-refresh").addEventListener("click", guard(loadStats));
  $("#stats-window").addEventListener("change", guard(loadStats));
  $("#history-form").addEventListener("submit", (e) => { e.preventDefault(); historyCursors = []; guard(loadHistory)(); });
  $("#h-older").addEventListener("click", () => { historyCursors.push(historyNext); guard(loadHistory)(); });
  $("#h-newer").addEventListener("click", () => { historyCursors.pop(); guard(loadHistory)(); });
  window.addEventListener("hashchange", route);
  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => switchTab(b.dataset.tab));
  $("#agents-refresh").addEventListener("click", guard(loadAgents));
  $("#conv-refresh").addEventListener("click", guard(loadConversations));
  $("#dlq-refresh").addEventListener("click", guard(loadDLQ));
  $("#amp-refresh").addEventListener("click", guard(loadAMP));
  $("#receipt-form").addEventListener("submit", (e) => { e.preventDefault(); guard(openReceipt)($("#receipt-id").value.trim()); });
  for (const id of ["#f-type", "#f-agent", "#f-conv"]) $(id).addEventListener("change", () => { refilterFlow(); connectFlow(); });
  $("#f-proto").addEventListener("change", refilterFlow);
  $("#flow-pause").addEventListener("click", () => { paused = !paused; $("#flow-pause").textContent = paused ? "Resume" : "Pause"; });
  $("#flow-clear").addEventListener("click", () => { $("#flow-table tbody").replaceChildren(); flowCount = 0; $("#count-flow").textContent = ""; $("#flow-empty").hidden = false; });
  connectFlow();
  guard(loadDLQ)();
  route();
  setInterval(() => {
    if (!$("#tab-overview").hidden) guard(loadStats)();
    if (!$("#tab-agents").hidden) guard(loadAgents)();
    if (!$("#tab-amp").hidden) guard(loadAMP)();
  }, 5000);
}

// route shows the view the address names: #agent/ID, or a tab's name.
function route() {
  const h = decodeURIComponent(location.hash.slice(1));
  if (h.startsWith("agent/")) { currentAgent = h.slice(6); switchTab("agent"); guard(loadAgentPage)(currentAgent); return; }
  const tabs = [...document.querySelectorAll(".tabs button")].map((b) => b.dataset.tab);
  switchTab(tabs.includes(h) ? h : "overview");
}

async function logout() {
  const res = await fetch("/dashboard/logout", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
  if (!res.ok) { console.error("logout: " + res.status); return; }
  if (source) source.close();
  csrf = "";
  showLogin();
}

// ---- overview: charts ----

// lineChart draws series ({name, cls, values, legend}) over the bucket
// times as an SVG with a zero line, the largest value and the time span;
// label is what a screen reader reads of it.
function lineChart(times, series, unit, label) {
  const NS = "http://www.w3.org/2000/svg";
  const w = 420, h = 150, left = 44, right = 8, top = 10, bottom = 22;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`); svg.setAttribute("class", "linechart"); svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const n = times.length;
  const x = (i) => n <= 1 ? w - right : left + (i / (n - 1)) * (w - left - right);
  const y = (v) => top + (1 - v / max) * (h - top - bottom);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  add("line", { x1: left, x2: w - right, y1: y(0), y2: y(0), class: "axis" });
  add("line", { x1: left, x2: w - right, y1: y(max), y2: y(max), class: "grid" });
  add("text", { x: left - 4, y: y(max) + 4, class: "tick", "text-anchor": "end" }, fmtNum(max));
  add("text", { x: left - 4, y: y(0) + 4, class: "tick", "text-anchor": "end" }, "0");
  if (n > 0) {
    add("text", { x: left, y: h - 6, class: "tick" }, fmtTime(times[0]).slice(0, 8));
    add("text", { x: w - right, y: h - 6, class: "tick", "text-anchor": "end" }, fmtTime(times[n - 1]).slice(0, 8));
  }
  for (const s of series) {
    if (!n) continue;
    const d = s.values.map((v, i) => (i ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1)).join(" ");
    add("path", { d, class: "series " + s.cls, "data-series": s.name });
    add("circle", { cx: x(n - 1), cy: y(s.values[n - 1]), r: 2.5, class: "series " + s.cls });
  }
  add("title", {}, label);
  return svg;
}

function fmtNum(v) {
  return v >= 100 ? Math.round(v).toLocaleString() : v >= 10 ? v.toFixed(0) : v.toFixed(v === Math.round(v) ? 0 : 1);
}

function drawChart(id, times, series, unit) {
  const fig = $(id);
  const label = fig.querySelector("figcaption").firstChild.textContent.trim() + ": " + series.map((s) => s.legend).join(", ");
  fig.querySelector(".plot").replaceChildren(lineChart(times, series, unit, label));
  fig.querySelector(".legend").replaceChildren(...series.map((s) => el("span", { class: "key " + s.cls }, s.legend)));
}

// loadStats draws the charts from the flow of the stored messages over
// the chosen window (the same on every hub of the store, and after a
// restart): per bucket, messages accepted and delivered (drawn per
// second), the queue depth at its end, and the new dead letters.
async function loadStats() {
  const win = $("#stats-window").value;
  const data = await api("/stats?window=" + encodeURIComponent(win));
  const bs = data.buckets || [];
  const times = bs.map((b) => b.start);
  const sum = (k) => bs.reduce((n, b) => n + b[k], 0);
  const per = data.bucket_s > 0 ? data.bucket_s : 1;
  const span = " in " + win;
  const queuedNow = bs.length ? bs[bs.length - 1].queued : 0;
  const peakRate = (k) => fmtNum(Math.max(0, ...bs.map((b) => b[k] / per))) + "/s";
  drawChart("#chart-throughput", times, [
    { name: "accepted", cls: "s1", values: bs.map((b) => b.accepted / per), legend: "accepted " + sum("accepted") + span + " (peak " + peakRate("accepted") + ")" },
    { name: "delivered", cls: "s2", values: bs.map((b) => b.delivered / per), legend: "delivered " + sum("delivered") + span + " (peak " + peakRate("delivered") + ")" },
  ], "/s");
  drawChart("#chart-queue", times, [{ name: "queued", cls: "s3", values: bs.map((b) => b.queued),
    legend: "queued " + queuedNow + " now (peak " + Math.max(0, ...bs.map((b) => b.queued)) + ")" }], "");
  drawChart("#chart-dead", times, [{ name: "new dead letters", cls: "s4", values: bs.map((b) => b.dead_letters),
    legend: "new dead letters " + sum("dead_letters") + span }], "");
  $("#stats-note").textContent = "Buckets of " + fmtNum(per) + " s, " + data.note + ".";
}

// ---- history ----

let historyCursors = []; // the "before" of each page shown after the first
let historyNext = 0;
let historySeq = 0; // the latest loadHistory: an earlier one's answer is dropped

function historyRow(m) {
  return el("tr", { "data-msg": m.message_id, "data-status": m.status },
    el("td", { title: m.received_at }, fmtDate(m.received_at)),
    el("td", {}, msgLink(m.message_id)),
    el("td", {}, agentLink(m.sender), " → ", agentLink(m.receiver)),
    el("td", {}, m.type || ""),
    el("td", {}, m.protocol || ""),
    el("td", {}, badge(m.status, "st-" + m.status), m.last_error ? el("div", { class: "detail" }, m.last_error) : null),
    el("td", {}, String(m.attempts)),
    el("td", { class: "detail" }, m.preview || ""));
}

async function loadHistory() {
  // A search, a page turn or the tab can each start a load while another
  // is in flight; only the latest may fill the table, or a late answer to
  // an earlier request would show its rows under the newer page's label.
  const seq = ++historySeq;
  $("#h-page").textContent = "loading…";
  const q = new URLSearchParams({ limit: "25" });
  for (const [k, id] of [["q", "#h-q"], ["agent", "#h-agent"], ["status", "#h-status"], ["protocol", "#h-proto"]]) {
    const v = $(id).value.trim();
    if (v) q.set(k, v);
  }
  const before = historyCursors[historyCursors.length - 1];
  if (before) q.set("before", String(before));
  const data = await api("/messages?" + q);
  if (seq !== historySeq) return;
  $("#history-table tbody").replaceChildren(...data.messages.map(historyRow));
  $("#history-empty").hidden = data.messages.length > 0;
  historyNext = data.next_before || 0;
  $("#h-older").disabled = !data.more;
  $("#h-newer").disabled = historyCursors.length === 0;
  $("#h-page").textContent = "page " + (historyCursors.length + 1) + " · " + data.messages.length + " message" + (data.messages.length === 1 ? "" : "s");
}

// ---- agent page ----

let currentAgent = "";

async function loadAgentPage(id) {
  const view = $("#agent-view");
  let data;
  try { data = await api("/agents/" + encodeURIComponent(id)); } catch (e) {
    if (e instanceof Unauthorized) return;
    $("#agent-title").textContent = id;
    view.replaceChildren(el("p", { class: "error" }, "No agent " + id + ": " + e.message));
    return;
  }
  const a = data.agent, c = a.card || {};
  $("#agent-title").replaceChildren(el("span", {}, el("span", { class: "mono" }, a.agent_id), c.name && c.name !== a.agent_id ? el("span", { class: "muted" }, " · " + c.name) : null));
  $("#agent-status").replaceChildren(badge(a.status, "st-" + a.status));
  const caps = [...new Set([...(a.capabilities || []), ...(c.tools || [])])];
  const facts = [["URI", [el("span", { class: "mono" }, a.uri), copyButton(a.uri)]], ["Protocol", a.protocol || "—"],
    ["Endpoint", a.endpoint + (data.endpoint_url ? " · " + data.endpoint_url : "")], ["Capabilities", caps.join(", ") || "—"],
    ["Queued", String(a.queued)], ["Registered", fmtDate(a.registered_at)], ["Last seen", fmtAgo(a.last_seen)],
    ["Lease ends", fmtDate(a.expires_at)], ["Description", c.description || "—"]];
  const dead = data.dead_letters || [];
  view.replaceChildren(
    el("dl", { class: "facts", id: "agent-facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    el("h3", {}, "Latest messages"),
    data.messages.length ? el("table", { class: "grid", id: "agent-messages" },
      el("thead", {}, el("tr", {}, ["Received", "Message", "From → To", "Type", "Protocol", "Status", "Attempts", "Content"].map((h) => el("th", {}, h)))),
      el("tbody", {}, data.messages.map(historyRow))) : el("p", { class: "empty" }, "No stored messages to or from " + id + "."),
    el("p", {}, el("a", { href: "#history", onclick: () => { $("#h-agent").value = id; historyCursors = []; } }, "All of " + id + "'s messages in History →")),
    el("h3", {}, "Dead letters"),
    dead.length ? el("ul", { class: "list", id: "agent-dead" }, dead.map((r) => el("li", {}, msgLink(r.message_id), " ", badge(r.status, "st-" + r.status),
      " " + (r.last_error || "")))) : el("p", { class: "empty" }, "None."),
    el("details", {}, el("summary", {}, "Card (JSON)"), el("pre", {}, JSON.stringify(c, null, 2))));
}

document.addEventListener("DOMContentLoaded", () => { start().catch((e) => console.error(e)); });
