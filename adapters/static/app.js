// The status page: the CronWorkflows with last and next run and a timeline of their ticks,
// from the JSON API (no build step; plain DOM, text only through textContent).
"use strict";
(function () {
  const $ = (sel) => document.querySelector(sel);
  const TOKEN_KEY = "cronsource.token";
  const REFRESH_MS = 30000;
  let token = sessionStorage.getItem(TOKEN_KEY) || "";
  let timer = null;

  class AuthRequired extends Error {}

  async function api(path) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    const r = await fetch(path, { headers });
    if (r.status === 401) throw new AuthRequired("a token is required");
    if (!r.ok) {
      const p = await r.json().catch(() => ({}));
      throw new Error((p.title || r.statusText) + (p.detail ? ": " + p.detail : ""));
    }
    return r.json();
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  function fmt(t) {
    if (!t) return "–";
    return t.replace("T", " ").replace(/:\d\dZ$/, " UTC").replace(/Z$/, " UTC");
  }

  function state(cw) {
    const conds = (cw.status.conditions || []).map((c) => c.type);
    if (conds.includes("SpecError")) return "SpecError";
    if (cw.status.phase === "Stopped") return "Stopped";
    return cw.spec.suspend ? "Suspended" : "Active";
  }

  function cellClass(c) {
    if (c.failed) return "failed";
    if (c.fired) return "fired";
    if (c.skipped) {
      const reasons = Object.entries(c.skipped).sort((a, b) => b[1] - a[1]);
      return "skipped reason-" + reasons[0][0];
    }
    return "none";
  }

  function cellTitle(c, start, seconds) {
    const end = new Date(start.getTime() + seconds * 1000);
    const parts = [];
    if (c.fired) parts.push("fired " + c.fired);
    if (c.failed) parts.push("failed " + c.failed);
    for (const [reason, n] of Object.entries(c.skipped || {})) parts.push("skipped " + n + " (" + reason + ")");
    const span = start.toISOString().slice(0, 16).replace("T", " ") + "–" + end.toISOString().slice(11, 16) + " UTC";
    return span + ": " + (parts.join(", ") || "no ticks");
  }

  function timeline(cells, tl) {
    const box = el("div", { class: "timeline", role: "img" });
    const since = new Date(tl.since);
    let fired = 0, failed = 0, skipped = 0;
    cells.forEach((c, i) => {
      const start = new Date(since.getTime() + i * tl.bucketSeconds * 1000);
      const cls = cellClass(c);
      fired += c.fired || 0;
      failed += c.failed || 0;
      for (const n of Object.values(c.skipped || {})) skipped += n;
      box.append(el("span", { class: "cell " + cls, "data-state": cls.split(" ")[0], title: cellTitle(c, start, tl.bucketSeconds) }));
    });
    box.setAttribute("aria-label", `fired ${fired}, failed ${failed}, skipped ${skipped}`);
    return box;
  }

  async function showDetails(cw) {
    const ns = cw.metadata.namespace, name = cw.metadata.name;
    $("#details").hidden = false;
    $("#details-title").textContent = `${ns}/${name}: events`;
    const path = `api/v1/namespaces/${encodeURIComponent(ns)}/cronworkflows/${encodeURIComponent(name)}/history?limit=1000`;
    let page;
    try { page = await api(path); } catch (e) { return fail(e); }
    const rows = page.items.slice(-50).reverse().map((e) =>
      el("tr", {},
        el("td", { text: String(e.version) }), el("td", { text: e.type }), el("td", { text: fmt(e.at) }),
        el("td", { text: fmt(e.scheduledTime) }), el("td", { text: e.workflow || "–" }),
        el("td", { text: e.reason || "–" }),
        el("td", { text: e.message || e.note || (e.count > 1 ? e.count + " ticks to " + fmt(e.lastScheduledTime) : "") || e.phase || "" })));
    $("#events tbody").replaceChildren(...rows);
  }

  function row(cw, cells, tl) {
    const s = cw.status, spec = cw.spec;
    const schedules = (spec.schedules && spec.schedules.length ? spec.schedules : [spec.schedule]).filter(Boolean).join(", ");
    const st = state(cw);
    return el("tr", { "data-name": cw.metadata.namespace + "/" + cw.metadata.name },
      el("td", { text: cw.metadata.namespace }),
      el("td", {}, el("button", { class: "link", type: "button", text: cw.metadata.name, onclick: () => showDetails(cw) })),
      el("td", {}, el("code", { text: schedules })),
      el("td", { text: spec.timezone || "UTC" }),
      el("td", {}, el("span", { class: "badge " + st, text: st })),
      el("td", { class: "last", text: fmt(s.lastScheduledTime) }),
      el("td", { class: "next", text: fmt(s.nextScheduledTime) }),
      el("td", { text: String((s.active || []).length) }),
      el("td", { text: `${s.succeeded || 0} / ${s.failed || 0}` }),
      el("td", { class: "tl" }, timeline(cells || [], tl)));
  }

  function fail(e) {
    if (e instanceof AuthRequired) {
      document.body.dataset.state = "login";
      $("#login").hidden = false;
      $("#summary").textContent = "token required";
      return;
    }
    document.body.dataset.state = "error";
    $("#error").hidden = false;
    $("#error").textContent = String(e.message || e);
  }

  async function load() {
    clearTimeout(timer);
    const days = Number($("#days").value);
    const buckets = days <= 1 ? 96 : days * 24;
    const ns = $("#namespace").value.trim();
    const q = ns ? "&namespace=" + encodeURIComponent(ns) : "";
    try {
      const list = await api(ns ? `api/v1/namespaces/${encodeURIComponent(ns)}/cronworkflows` : "api/v1/cronworkflows");
      const tl = await api(`api/v1/timeline?days=${days}&buckets=${buckets}${q}`);
      const cells = new Map(tl.items.map((t) => [t.namespace + "/" + t.name, t.cells]));
      $("#crons tbody").replaceChildren(...list.items.map((cw) =>
        row(cw, cells.get(cw.metadata.namespace + "/" + cw.metadata.name), tl)));
      $("#empty").hidden = list.items.length > 0;
      $("#window").textContent = `(${fmt(tl.since)} – ${fmt(tl.until)})`;
      $("#summary").textContent = `${list.items.length} CronWorkflow(s) · refreshed ${new Date().toLocaleTimeString()}`;
      $("#error").hidden = true;
      $("#login").hidden = true;
      document.body.dataset.state = "ready";
    } catch (e) {
      fail(e);
    }
    timer = setTimeout(load, REFRESH_MS);
  }

  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("#token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    load();
  });
  $("#refresh").addEventListener("click", load);
  $("#days").addEventListener("change", load);
  $("#namespace").addEventListener("change", load);
  load();
})();
