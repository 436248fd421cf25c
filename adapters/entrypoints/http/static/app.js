// The status page: every CronWorkflow with last and next run and a timeline of its ticks, a
// banner when no scheduler is deciding, and one page per CronWorkflow (#/namespaces/NS/
// cronworkflows/NAME) with its Workflows, next runs and commands. Plain DOM from the JSON API,
// no build step; text only through textContent. Relative times use the server's clock.
"use strict";
(function () {
  const $ = (sel) => document.querySelector(sel);
  const TOKEN_KEY = "cronsource.token";
  const ZONE_KEY = "cronsource.zone";
  const REFRESH_MS = 30000;
  const COLUMNS = 9;
  const SHOWN = 20; // Workflows and events on a CronWorkflow's page, newest first
  let token = sessionStorage.getItem(TOKEN_KEY) || "";
  let asked = false; // the server answered 401 once: it needs a token
  let timer = null;
  let skew = 0; // server clock minus this browser's clock, ms
  let tolerance = 30; // the scheduler's late tolerance, s (from /api/v1/scheduler)

  class AuthRequired extends Error {}

  async function api(path, init) {
    const headers = { Accept: "application/json", ...((init && init.headers) || {}) };
    if (token) headers.Authorization = "Bearer " + token;
    const r = await fetch(path, { ...(init || {}), headers });
    if (r.status === 401) {
      asked = true;
      throw new AuthRequired("a token is required");
    }
    if (!r.ok) {
      const p = await r.json().catch(() => ({}));
      throw new Error((p.title || r.statusText) + (p.detail ? ": " + p.detail : ""));
    }
    return r.json();
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  // ------------------------------------------------------------------ time

  const now = () => new Date(Date.now() + skew);
  const viewZone = () => ($("#zone").value === "local" ? undefined : "UTC");

  function zoneName(d, zone) {
    if (zone === "UTC") return "UTC";
    const part = new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "short" })
      .formatToParts(d).find((p) => p.type === "timeZoneName");
    return part ? part.value : "";
  }

  /** "2026-05-06 10:00:00 UTC" in `zone` (default: the zone chosen in the header). */
  function abs(t, zone) {
    if (!t) return "–";
    const d = t instanceof Date ? t : new Date(t);
    const z = zone === undefined ? viewZone() : zone;
    const text = new Intl.DateTimeFormat("sv-SE", {
      timeZone: z, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    }).format(d);
    return text + " " + zoneName(d, z);
  }

  function span(seconds) {
    const s = Math.round(Math.abs(seconds));
    if (s < 60) return s + " s";
    if (s < 90 * 60) return Math.round(s / 60) + " min";
    if (s < 48 * 3600) {
      const h = Math.floor(s / 3600), m = Math.round((s % 3600) / 60);
      return m ? `${h} h ${m} min` : `${h} h`;
    }
    return Math.round(s / 86400) + " d";
  }

  /** "in 3 min" / "3 min ago"; for a due time, "5 s late" once it has passed. */
  function rel(t, due) {
    const s = (new Date(t).getTime() - now().getTime()) / 1000;
    if (s >= 0.5) return "in " + span(s);
    if (due) return span(s) + " late";
    return span(s) + " ago";
  }

  /** An absolute time with its relative one beside it, kept current by `tickRelative`. */
  function when(t, opts) {
    const o = opts || {};
    if (!t) return el("span", { class: "when", text: o.none || "–" });
    const overdue = o.due && (now() - new Date(t)) / 1000 > tolerance;
    return el("span", { class: "when" + (overdue ? " overdue" : ""), title: abs(t, "UTC") },
      el("span", { class: "abs", text: abs(t, o.zone) }), " ",
      el("span", { class: "rel", "data-t": t, "data-due": o.due ? "1" : "", text: rel(t, o.due) }));
  }

  function tickRelative() {
    for (const node of document.querySelectorAll(".rel[data-t]")) {
      node.textContent = rel(node.dataset.t, node.dataset.due === "1");
    }
  }

  // ------------------------------------------------------------------ timeline

  function state(cw) {
    const conds = (cw.status.conditions || []).map((c) => c.type);
    if (conds.includes("SpecError")) return "SpecError";
    if (cw.status.phase === "Stopped") return "Stopped";
    if (cw.spec.suspend) return "Suspended";
    // cronsource.io/pause-after-failures: phase stays Active (Argo's), the condition says it.
    return conds.includes("PausedAfterFailures") ? "Paused" : "Active";
  }

  /** The condition's message of a CronWorkflow paused after failures (it names the runs). */
  function pausedMessage(cw) {
    const c = (cw.status.conditions || []).find((c) => c.type === "PausedAfterFailures");
    return c ? c.message : "";
  }

  function primary(c) {
    if (c.failed) return "failed";
    if (c.fired) return "fired";
    if (c.skipped) return "skipped";
    return "none";
  }

  function cellTitle(c, start, seconds) {
    const end = new Date(start.getTime() + seconds * 1000);
    const parts = [];
    if (c.fired) parts.push("fired " + c.fired);
    if (c.failed) parts.push("failed " + c.failed);
    for (const [reason, n] of Object.entries(c.skipped || {})) parts.push("skipped " + n + " (" + reason + ")");
    return abs(start) + " – " + abs(end).slice(11) + ": " + (parts.join(", ") || "no ticks");
  }

  /** One bucket: the fires at the bottom (failed ones red), each skip reason stacked on top,
   *  heights in proportion to the ticks, so a bucket that fired and skipped shows both. */
  function cell(c, start, seconds) {
    const skips = Object.entries(c.skipped || {}).sort((a, b) => a[0].localeCompare(b[0]));
    const ok = (c.fired || 0) - (c.failed || 0);
    const segs = [];
    if (ok > 0) segs.push(["seg fired", ok]);
    if (c.failed) segs.push(["seg failed", c.failed]);
    for (const [reason, n] of skips) segs.push(["seg reason-" + reason, n]);
    const node = el("span", {
      class: "cell" + (segs.length > 1 ? " mixed" : ""),
      "data-state": primary(c),
      "data-skips": skips.map(([r]) => r).join(" ") || undefined,
      title: cellTitle(c, start, seconds),
    });
    for (const [cls, n] of segs) node.append(el("i", { class: cls, style: `flex-grow:${n}` }));
    return node;
  }

  function timeline(cells, tl) {
    const box = el("div", { class: "timeline", role: "img" });
    const since = new Date(tl.since);
    let fired = 0, failed = 0, skipped = 0;
    cells.forEach((c, i) => {
      fired += c.fired || 0;
      failed += c.failed || 0;
      for (const n of Object.values(c.skipped || {})) skipped += n;
      box.append(cell(c, new Date(since.getTime() + i * tl.bucketSeconds * 1000), tl.bucketSeconds));
    });
    const nowAt = (now() - since) / (new Date(tl.until) - since);
    if (nowAt >= 0 && nowAt <= 1) box.append(el("b", { class: "now", style: `left:${(nowAt * 100).toFixed(3)}%`, title: "now" }));
    box.setAttribute("aria-label", `fired ${fired}, failed ${failed}, skipped ${skipped}`);
    return box;
  }

  /** Labels at whole days (or hours) of the chosen zone, placed by share of the window. */
  function axis(node, tl) {
    const since = new Date(tl.since).getTime(), until = new Date(tl.until).getTime();
    const hours = (until - since) / 3600e3;
    const step = hours <= 26 ? 3 : hours <= 80 ? 12 : hours <= 8 * 24 ? 24 : 48;
    const zone = viewZone();
    const fmt = new Intl.DateTimeFormat("en-GB", { timeZone: zone, weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
    const hourOf = new Intl.DateTimeFormat("en-GB", { timeZone: zone, hour: "numeric", hourCycle: "h23" });
    const labels = [];
    for (let t = Math.ceil(since / 3600e3) * 3600e3; t < until; t += 3600e3) {
      const h = Number(hourOf.format(new Date(t)));
      if (step < 24 ? h % step !== 0 : h !== 0) continue;
      if (step === 48 && Math.round((t - since) / 86400e3) % 2) continue;
      const x = (t - since) / (until - since);
      const parts = fmt.formatToParts(new Date(t));
      const get = (k) => (parts.find((p) => p.type === k) || {}).value || "";
      const text = step >= 24 || h === 0 ? `${get("weekday")} ${get("day")} ${get("month")}` : `${get("hour")}:${get("minute")}`;
      labels.push(el("span", { class: "tick" + (h === 0 ? " day" : ""), style: `left:${(x * 100).toFixed(3)}%`, text: x > 0.96 ? "" : text }));
    }
    node.replaceChildren(...labels);
  }

  // ------------------------------------------------------------------ the list

  function schedulesOf(spec) {
    return (spec.schedules && spec.schedules.length ? spec.schedules : [spec.schedule]).filter(Boolean).join(", ");
  }

  function nextRun(cw) {
    const st = state(cw);
    if (!cw.status.nextScheduledTime) return el("span", { class: "when", text: st === "Active" ? "–" : st.toLowerCase() });
    return when(cw.status.nextScheduledTime, { due: true });
  }

  function rows(cw, cells, tl) {
    const s = cw.status, spec = cw.spec, st = state(cw);
    const key = cw.metadata.namespace + "/" + cw.metadata.name;
    const facts = el("tr", { class: "cw", "data-name": key },
      el("td", { text: cw.metadata.namespace }),
      el("td", {}, el("a", { class: "name", href: detailHash(cw.metadata.namespace, cw.metadata.name), text: cw.metadata.name })),
      el("td", {}, el("code", { text: schedulesOf(spec) })),
      el("td", { text: spec.timezone || "UTC" }),
      el("td", {}, el("span", { class: "badge " + st, text: st, title: pausedMessage(cw) || undefined })),
      el("td", { class: "last" }, when(s.lastScheduledTime)),
      el("td", { class: "next" }, nextRun(cw)),
      el("td", { text: String((s.active || []).length) }),
      el("td", { text: `${s.succeeded || 0} / ${s.failed || 0}` }));
    const line = el("tr", { class: "tlrow", "data-name": key },
      el("td", { colspan: String(COLUMNS), class: "tl" }, timeline(cells || [], tl)));
    return [facts, line];
  }

  function banner(h) {
    tolerance = h.lateToleranceSeconds;
    const reps = h.replicas || [];
    $("#replicas").textContent = reps.length === 0 ? "" : "replicas: " + reps.map((r) =>
      r.replica + ` (${r.shards} shards${r.projector ? ", projector" : ""}${r.live ? "" : ", lapsed"})`).join(", ");
    $("#stale").hidden = !h.stale;
    document.body.dataset.scheduler = h.stale ? "stale" : "ok";
    if (!h.stale) return;
    const first = h.overdue[0];
    const more = h.overdueCount > 1 ? ` and ${h.overdueCount - 1} more CronWorkflow(s)` : "";
    const who = h.schedulers === 0 ? " No `cronsource run` is connected to the store."
      : h.schedulers ? ` ${h.schedulers} \`cronsource run\` replica(s) connected but not deciding.` : "";
    const last = h.lastDecisionAt ? `The last decision was at ${abs(h.lastDecisionAt)} (${rel(h.lastDecisionAt)}).` : "No decision has been recorded yet.";
    $("#stale-text").textContent =
      `${first.namespace}/${first.name}${more} ${h.overdueCount > 1 ? "have" : "has"} a tick due since ${abs(first.dueAt)}` +
      ` (${rel(first.dueAt, true)}; late tolerance ${h.lateToleranceSeconds} s) that nobody decided. ${last}${who}` +
      " Next-run times in the past below are overdue, not upcoming.";
  }

  async function loadList(days) {
    const buckets = days <= 1 ? 96 : days * 24;
    const ns = $("#namespace").value.trim();
    const q = ns ? "&namespace=" + encodeURIComponent(ns) : "";
    const list = await api(ns ? `api/v1/namespaces/${encodeURIComponent(ns)}/cronworkflows` : "api/v1/cronworkflows");
    const tl = await api(`api/v1/timeline?days=${days}&buckets=${buckets}${q}`);
    const cells = new Map(tl.items.map((t) => [t.namespace + "/" + t.name, t.cells]));
    $("#crons tbody").replaceChildren(...list.items.flatMap((cw) =>
      rows(cw, cells.get(cw.metadata.namespace + "/" + cw.metadata.name), tl)));
    axis($("#crons .axis"), tl);
    $("#empty").hidden = list.items.length > 0;
    $("#window").textContent = `${abs(tl.since)} – ${abs(tl.until)}, one cell per ${span(tl.bucketSeconds)}`;
    return list.items.length;
  }

  // ------------------------------------------------------------------ one CronWorkflow

  const detailHash = (ns, name) => `#/namespaces/${encodeURIComponent(ns)}/cronworkflows/${encodeURIComponent(name)}`;

  function route() {
    const m = location.hash.match(/^#\/namespaces\/([^/]+)\/cronworkflows\/([^/]+)$/);
    return m ? { ns: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) } : null;
  }

  function fmtEvent(e) {
    return el("tr", {},
      el("td", { text: String(e.version) }), el("td", { text: e.type }), el("td", {}, when(e.at)),
      el("td", { text: e.scheduledTime ? abs(e.scheduledTime) : "–" }), el("td", { text: e.workflow || "–" }),
      el("td", { text: e.reason || "–" }),
      el("td", { text: e.message || e.note || (e.count > 1 ? e.count + " ticks to " + abs(e.lastScheduledTime) : "") || e.phase || e.trigger || "" }));
  }

  async function loadDetail(r, days) {
    const base = `api/v1/namespaces/${encodeURIComponent(r.ns)}/cronworkflows/${encodeURIComponent(r.name)}`;
    const buckets = days <= 1 ? 96 : days * 24;
    const [cw, next, wfs, tl, hist] = await Promise.all([
      api(base), api(base + "/next?count=5"), api(base + `/workflows?limit=${SHOWN}`),
      api(base + `/timeline?days=${days}&buckets=${buckets}`), api(base + `/history?limit=${SHOWN}&newest=true`),
    ]);
    const st = state(cw), zone = cw.spec.timezone || "UTC";
    $("#detail").dataset.name = r.ns + "/" + r.name;
    $("#detail").dataset.version = cw.metadata.resourceVersion;
    $("#detail-title").textContent = `${r.ns}/${r.name}`;
    $("#detail-state").className = "badge " + st;
    $("#detail-state").textContent = st;
    const fact = (k, v) => [el("dt", { text: k }), el("dd", {}, v)];
    $("#facts").replaceChildren(
      ...fact("Schedules", el("code", { text: schedulesOf(cw.spec) })),
      ...fact("Time zone", document.createTextNode(zone)),
      ...fact("Concurrency", document.createTextNode(cw.spec.concurrencyPolicy || "Allow")),
      ...fact("Starting deadline", document.createTextNode(cw.spec.startingDeadlineSeconds ? cw.spec.startingDeadlineSeconds + " s" : "none")),
      ...fact("Last run", when(cw.status.lastScheduledTime)),
      ...fact("Next run", nextRun(cw)),
      ...fact("Runs", document.createTextNode(`${(cw.status.active || []).length} active, ${cw.status.succeeded || 0} succeeded, ${cw.status.failed || 0} failed`)),
      ...(pausedMessage(cw) ? fact("Paused after failures", el("span", { id: "paused", text: pausedMessage(cw) })) : []),
      ...fact("Version", document.createTextNode(cw.metadata.resourceVersion)));
    $("#actions").hidden = !(token || !asked);
    $("#suspend").hidden = st !== "Active";
    $("#resume").hidden = st !== "Suspended" && st !== "Stopped" && st !== "Paused";
    axis($("#detail-axis"), tl);
    $("#detail-timeline").replaceChildren(timeline((tl.items[0] || {}).cells || [], tl));
    $("#next-zone").textContent = `(${next.timezone})`;
    $("#next tbody").replaceChildren(...next.items.map((t) => el("tr", {},
      el("td", { class: "local", text: abs(t.utc, next.timezone) }), el("td", { text: abs(t.utc, "UTC") }),
      el("td", {}, el("span", { class: "rel", "data-t": t.utc, text: rel(t.utc) })))));
    $("#workflows tbody").replaceChildren(...wfs.items.map((w) => el("tr", { "data-workflow": w.name, "data-phase": w.phase },
      el("td", {}, el("code", { text: w.name })), el("td", {}, when(w.scheduledTime || w.createdAt)),
      el("td", { text: w.trigger }), el("td", {}, el("span", { class: "badge phase-" + w.phase, text: w.phase, title: w.message || undefined })),
      el("td", {}, w.finishedAt ? when(w.finishedAt) : el("span", { text: "–" })))));
    if (!wfs.items.length) $("#workflows tbody").append(el("tr", {}, el("td", { colspan: "5", class: "muted", text: "none yet" })));
    $("#events tbody").replaceChildren(...hist.items.slice(-SHOWN).reverse().map(fmtEvent));
  }

  async function command(what) {
    const r = route();
    if (!r) return;
    const base = `api/v1/namespaces/${encodeURIComponent(r.ns)}/cronworkflows/${encodeURIComponent(r.name)}`;
    if (what === "trigger" && !confirm(`Start a run of ${r.ns}/${r.name} now?`)) return;
    const out = $("#action-result");
    out.textContent = what + "…";
    try {
      const headers = { "Content-Type": "application/json" };
      let body = { by: "status-page" };
      if (what === "trigger") body = { requestId: "page-" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8) };
      else headers["If-Match"] = $("#detail").dataset.version; // act only on the state shown
      const res = await api(`${base}/${what}`, { method: "POST", headers, body: JSON.stringify(body) });
      out.textContent = what === "trigger" ? `started ${res.workflow}` : `${what === "suspend" ? "suspended" : "resumed"} (version ${res.metadata.resourceVersion})`;
      out.className = "ok";
    } catch (e) {
      if (e instanceof AuthRequired) return fail(e);
      out.textContent = `${what} failed: ${e.message}`;
      out.className = "bad";
    }
    load();
  }

  // ------------------------------------------------------------------ the page

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
    document.body.dataset.state = "loading";
    const days = Number($("#days").value);
    const r = route();
    try {
      const sent = Date.now();
      const health = await api("api/v1/scheduler");
      skew = new Date(health.now).getTime() - (sent + Date.now()) / 2;
      banner(health);
      $("#list").hidden = !!r;
      $("#legend").hidden = false;
      $("#detail").hidden = !r;
      if (r) $("#detail-timeline").after($("#legend"));
      else $("#list").after($("#legend"));
      let count;
      if (r) await loadDetail(r, days);
      else count = await loadList(days);
      $("#summary").textContent = (r ? `${r.ns}/${r.name}` : `${count} CronWorkflow(s)`) +
        ` · refreshed ${abs(now())}`;
      $("#error").hidden = true;
      $("#login").hidden = true;
      document.body.dataset.view = r ? "detail" : "list";
      document.body.dataset.state = "ready";
    } catch (e) {
      fail(e);
    }
    timer = setTimeout(load, REFRESH_MS);
  }

  $("#zone").value = localStorage.getItem(ZONE_KEY) || "UTC";
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("#token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    load();
  });
  $("#refresh").addEventListener("click", load);
  $("#days").addEventListener("change", load);
  $("#namespace").addEventListener("change", load);
  $("#zone").addEventListener("change", () => { localStorage.setItem(ZONE_KEY, $("#zone").value); load(); });
  $("#suspend").addEventListener("click", () => command("suspend"));
  $("#resume").addEventListener("click", () => command("resume"));
  $("#trigger").addEventListener("click", () => command("trigger"));
  window.addEventListener("hashchange", load);
  setInterval(tickRelative, 5000);
  load();
})();
