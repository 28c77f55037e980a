// dlq-bridge console: the only script of the pages (served from /console/static/, no inline script).
// Actions call the JSON API with `Authorization: Bearer <token>`. The token is pasted once and kept in
// this browser's localStorage for this origin (every tab of the console uses it; "Forget" removes it):
// never a cookie, never a URL. Signed in (a session cookie) or behind a trusted
// proxy, the page carries a CSRF token in <meta name="dlq-csrf">, sent as X-CSRF-Token with the cookie.
// Everything the server sent is written with textContent, never as HTML.
"use strict";

(function () {
  const TOKEN = "dlqBridgeConsoleToken";
  const WHO = "dlqBridgeConsoleWho";
  const FLASH = "dlqBridgeConsoleFlash";
  const LIVE = "dlqBridgeConsoleLive";
  const store = window.localStorage; // the token and name: shared by the console's tabs
  const flashes = window.sessionStorage; // a message for this tab's next page
  // a token pasted by an older console page lives in the tab's sessionStorage: move it over once
  for (const key of [TOKEN, WHO]) {
    const old = window.sessionStorage.getItem(key);
    if (old && !store.getItem(key)) store.setItem(key, old);
    window.sessionStorage.removeItem(key);
  }
  const PRINTABLE = /^[\x20-\x7e]{1,200}$/;

  function show(text, ok) {
    const el = document.getElementById("action-result");
    if (!el) return;
    el.textContent = text;
    el.className = ok ? "ok" : "err";
    el.hidden = false;
  }

  function detailOf(data) {
    if (!data) return "";
    if (typeof data.message === "string") return data.message;
    if (typeof data.detail === "string") return data.detail;
    if (Array.isArray(data.detail)) {
      return data.detail.map((d) => (d && d.msg ? String(d.msg) : JSON.stringify(d))).join("; ");
    }
    return "";
  }

  function csrfToken() {
    const meta = document.querySelector('meta[name="dlq-csrf"]');
    return meta ? meta.getAttribute("content") : "";
  }

  function requestHeaders() {
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    const csrf = csrfToken();
    if (csrf) headers["X-CSRF-Token"] = csrf;
    const token = store.getItem(TOKEN);
    if (token) headers.Authorization = "Bearer " + token;
    const who = store.getItem(WHO);
    if (who && PRINTABLE.test(who)) headers["X-Console-User"] = who;
    return headers;
  }

  async function call(method, path, body) {
    const response = await fetch(path, {
      method: method,
      headers: requestHeaders(),
      body: method === "GET" ? undefined : JSON.stringify(body || {}),
      credentials: csrfToken() ? "same-origin" : "omit",
      cache: "no-store",
      redirect: "error",
    });
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      data = null;
    }
    return { status: response.status, statusText: response.statusText, ok: response.ok, data: data };
  }

  async function act(label, method, path, body) {
    try {
      const r = await call(method, path, body);
      if (r.ok && !(r.data && r.data.ok === false)) {
        flashes.setItem(FLASH, JSON.stringify({ text: label + ": " + (detailOf(r.data) || "done"), ok: true }));
        window.location.reload();
        return;
      }
      const why = r.status === 401 || r.status === 403 ? "Refused" : "Failed";
      show(why + " (" + r.status + " " + r.statusText + "): " + (detailOf(r.data) || "no detail"), false);
    } catch (e) {
      show("Failed: " + (e && e.message ? e.message : String(e)), false);
    }
  }

  function onActionClick(button) {
    const confirmText = button.dataset.confirm;
    if (confirmText && !button.classList.contains("armed")) {
      button.dataset.label = button.textContent;
      button.textContent = confirmText;
      button.classList.add("armed");
      window.setTimeout(function () {
        button.classList.remove("armed");
        button.textContent = button.dataset.label;
      }, 4000);
      return;
    }
    button.disabled = true;
    const body = {};
    const note = button.dataset.note ? document.getElementById(button.dataset.note) : null;
    if (note && note.value.trim()) body.note = note.value.trim(); // kept with the cause's history
    act(button.dataset.label || button.textContent, button.dataset.method || "POST", button.dataset.api, body).finally(function () {
      button.disabled = false;
    });
  }

  function silenceBody(form) {
    const body = {};
    for (const name of ["queue", "job_name", "fingerprint", "reason", "author"]) {
      const value = form.elements[name].value.trim();
      if (value) body[name] = value;
    }
    body.duration_s = Number(form.elements.duration_s.value);
    body.webhooks = form.elements.webhooks.checked;
    if (!body.author && store.getItem(WHO)) body.author = store.getItem(WHO);
    return body;
  }

  // Bulk actions (bridge/console/bulk.py): ask for the count, confirm, then one batch per call with the
  // progress shown, until done or cancelled. `prefix` names the confirm/progress elements (bulk-*, sel-*);
  // `bodyOf(action)` is the POST /api/v1/bulk body (every match of the search's snapshot, or the chosen rows).
  function bulkRunner(prefix, bodyOf, onDone) {
    const el = (name) => document.getElementById(prefix + "-" + name);
    const confirmRow = el("confirm");
    const running = el("running");
    const progress = el("progress");
    const state = el("state");
    const nouns = { redrive: "entries to redrive", discard: "entries to discard", silence: "causes to silence" };
    let current = null;
    let stopped = false;
    const refused = function (r) {
      const why = r.status === 401 || r.status === 403 ? "Refused" : "Failed";
      show(why + " (" + r.status + " " + r.statusText + "): " + (detailOf(r.data) || "no detail"), false);
    };
    const shown = function (view) {
      progress.max = Math.max(1, view.total);
      progress.value = view.processed;
      state.textContent = view.processed + " of " + view.total + " processed · " + view.done + " done · " +
        view.skipped + " skipped · " + view.state;
    };
    const start = async function (action) {
      const r = await call("POST", "/api/v1/bulk", bodyOf(action));
      if (r.status !== 201) return refused(r);
      current = r.data;
      el("count").textContent = current.total + " " + nouns[current.action] + " (as of this page). Go on?";
      confirmRow.hidden = false;
    };
    el("go").addEventListener("click", async function () {
      if (!current) return;
      confirmRow.hidden = true;
      running.hidden = false;
      stopped = false;
      let view = current;
      shown(view);
      while (!stopped && (view.state === "ready" || view.state === "running")) {
        const r = await call("POST", "/api/v1/bulk/" + encodeURIComponent(view.id) + "/run?batch=50");
        if (r.status === 409) {
          await new Promise((done) => window.setTimeout(done, 500));
          continue;
        }
        if (!r.ok) return refused(r);
        view = r.data;
        shown(view);
      }
      if (view.state === "done") {
        show("Bulk " + view.action + ": " + view.done + " of " + view.total + " done, " + view.skipped + " skipped", true);
        if (onDone) onDone(view);
      }
    });
    const cancel = async function () {
      stopped = true;
      confirmRow.hidden = true;
      if (!current) return;
      const r = await call("POST", "/api/v1/bulk/" + encodeURIComponent(current.id) + "/cancel");
      if (!r.ok) return refused(r);
      running.hidden = false;
      shown(r.data);
      show("Bulk " + r.data.action + " cancelled: " + r.data.done + " of " + r.data.total + " done", true);
    };
    el("cancel").addEventListener("click", cancel);
    el("stop").addEventListener("click", cancel);
    return start;
  }

  // The search page's "every match" bulk actions, on its snapshot.
  function setupBulk() {
    const box = document.getElementById("bulk");
    if (!box) return;
    let filter = null;
    try {
      filter = JSON.parse(box.dataset.filter);
    } catch (e) {
      return;
    }
    const start = bulkRunner("bulk", (action) => ({ action: action, filter: filter }));
    for (const button of box.querySelectorAll("button.bulk-act")) {
      button.addEventListener("click", () => start(button.dataset.action));
    }
  }

  // Compact tables: a checkbox per row; the bar acts on the ticked rows through the same bulk machinery,
  // as of the page's snapshot (entries parked again after it are skipped).
  function picks() {
    return Array.from(document.querySelectorAll("table[data-select] input.pick"));
  }

  function countPicks() {
    const n = picks().filter((b) => b.checked).length;
    const shown = document.getElementById("sel-n");
    if (shown) shown.textContent = String(n);
    for (const button of document.querySelectorAll("#select button.sel-act")) button.disabled = n === 0;
    const all = document.querySelector("table[data-select] input.pick-all");
    if (all) all.checked = n > 0 && n === picks().length;
  }

  function setupSelection() {
    const bar = document.getElementById("select");
    if (!bar) return;
    const chosen = () => picks().filter((b) => b.checked).map((b) => ({ source: b.dataset.source, id: b.dataset.id }));
    const bodyOf = (action) => ({ action: action, filter: { as_of: bar.dataset.asOf }, entries: chosen() });
    const start = bulkRunner("sel", bodyOf, function () {
      window.setTimeout(() => window.location.reload(), 1200);
    });
    bar.addEventListener("click", function (event) {
      const button = event.target.closest("button.sel-act");
      if (button) start(button.dataset.action);
    });
    document.addEventListener("change", function (event) {
      const box = event.target;
      if (!(box instanceof HTMLInputElement)) return;
      if (box.classList.contains("pick-all")) {
        for (const b of picks()) b.checked = box.checked;
      }
      if (box.classList.contains("pick") || box.classList.contains("pick-all")) countPicks();
    });
    countPicks();
  }

  // Times: the server writes <time datetime="…Z">UTC</time>; shown as "3 min ago", the browser's local
  // time on hover.
  function relative(seconds) {
    const s = Math.round(Math.abs(seconds));
    const units = [["d", 86400], ["h", 3600], ["min", 60]];
    let text = s + " s";
    for (const [unit, size] of units) {
      if (s >= size) {
        text = Math.floor(s / size) + " " + unit;
        break;
      }
    }
    if (s < 10) return "just now";
    return seconds >= 0 ? text + " ago" : "in " + text;
  }

  function showTimes(root) {
    const now = Date.now();
    for (const el of (root || document).querySelectorAll("time[datetime]")) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (Number.isNaN(at)) continue;
      el.textContent = relative((now - at) / 1000);
      el.title = new Date(at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
    }
  }

  // Search's Since/Until: pickers in the browser's zone, sent as epoch seconds (what the server reads).
  function setupPickers() {
    const pad = (n) => String(n).padStart(2, "0");
    for (const picker of document.querySelectorAll("input.epoch-picker")) {
      const hidden = picker.form && picker.form.elements[picker.dataset.for];
      if (!hidden) continue;
      const epoch = Number(hidden.value);
      if (hidden.value && Number.isFinite(epoch)) {
        const d = new Date(epoch * 1000);
        picker.value = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
          pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
      }
      const sync = function () {
        const at = picker.value ? new Date(picker.value).getTime() : NaN;
        hidden.value = Number.isNaN(at) ? "" : String(Math.floor(at / 1000));
      };
      picker.addEventListener("change", sync);
      picker.form.addEventListener("submit", sync);
    }
  }

  // Copy buttons (the job id, the redrive command).
  function setupCopy() {
    document.addEventListener("click", async function (event) {
      const button = event.target.closest("button.copy[data-copy]");
      if (!button) return;
      try {
        await navigator.clipboard.writeText(button.dataset.copy);
        button.textContent = "Copied";
      } catch (e) {
        button.textContent = "Copy failed";
      }
      window.setTimeout(() => (button.textContent = button.dataset.label || "Copy"), 2000);
    });
  }

  // Live pages: every data-refresh-s seconds, the page is fetched again and each [data-live] element whose
  // content changed is swapped in place; ticked boxes and open <details> are kept, the scroll is untouched.
  // Paused while the reader acts (a confirmation or a bulk run showing) or by the toggle (remembered).
  function busy() {
    return document.querySelector("#sel-confirm:not([hidden]), #sel-running:not([hidden]), " +
      "#bulk-confirm:not([hidden]), #bulk-running:not([hidden]), button.armed, button:disabled.act") !== null;
  }

  // each live region's HTML as the server sent it (the page rewrites times in place, so the DOM differs)
  const served = new Map();

  async function refreshOnce() {
    const response = await fetch(window.location.href, { headers: { Accept: "text/html" }, cache: "no-store",
      credentials: "same-origin", redirect: "error" });
    if (!response.ok) return false;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    const ticked = new Set(picks().filter((b) => b.checked).map((b) => b.dataset.source + "\t" + b.dataset.id));
    for (const old of document.querySelectorAll("[data-live][id]")) {
      const next = fresh.getElementById(old.id);
      if (!next || next.innerHTML === served.get(old.id)) continue;
      served.set(old.id, next.innerHTML);
      const open = new Set(Array.from(old.querySelectorAll("details[open]")).map((d) => d.textContent.slice(0, 80)));
      const adopted = document.importNode(next, true);
      for (const d of adopted.querySelectorAll("details")) if (open.has(d.textContent.slice(0, 80))) d.open = true;
      old.replaceWith(adopted);
      showTimes(adopted);
    }
    const asOf = fresh.getElementById("select");
    const bar = document.getElementById("select");
    if (asOf && bar) bar.dataset.asOf = asOf.dataset.asOf;
    for (const b of picks()) b.checked = ticked.has(b.dataset.source + "\t" + b.dataset.id);
    countPicks();
    return true;
  }

  function setupLive() {
    const every = Number(document.body.dataset.refreshS || "0");
    const toggle = document.getElementById("live-toggle");
    if (!toggle || !(every > 0) || !document.querySelector("[data-live][id]")) {
      if (toggle) toggle.hidden = true;
      return;
    }
    for (const region of document.querySelectorAll("[data-live][id]")) served.set(region.id, region.innerHTML);
    const paused = () => store.getItem(LIVE) === "paused";
    const label = function () {
      toggle.setAttribute("aria-pressed", paused() ? "false" : "true");
      toggle.textContent = paused() ? "Live updates paused" : "Live · every " + every + " s";
    };
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      if (paused()) store.removeItem(LIVE);
      else store.setItem(LIVE, "paused");
      label();
    });
    label();
    window.setInterval(async function () {
      if (paused() || document.visibilityState !== "visible" || busy()) return;
      try {
        await refreshOnce();
      } catch (e) {
        /* the next tick tries again */
      }
    }, every * 1000);
  }

  function setupToken() {
    const form = document.getElementById("token-form");
    if (!form) return;
    const input = document.getElementById("token-input");
    const who = document.getElementById("who-input");
    const state = document.getElementById("token-state");
    const refresh = function () {
      state.textContent = store.getItem(TOKEN) ? "token set (this browser)" : "no token";
    };
    who.value = store.getItem(WHO) || "";
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (input.value.trim()) store.setItem(TOKEN, input.value.trim());
      if (who.value.trim()) store.setItem(WHO, who.value.trim());
      else store.removeItem(WHO);
      input.value = "";
      refresh();
    });
    document.getElementById("token-forget").addEventListener("click", function () {
      store.removeItem(TOKEN);
      refresh();
    });
    refresh();
  }

  function setup() {
    setupToken();
    setupBulk();
    setupSelection();
    setupPickers();
    setupCopy();
    setupLive(); // before the times are rewritten: it keeps the regions as served
    showTimes(document);
    window.setInterval(() => showTimes(document), 30000);
    const flash = flashes.getItem(FLASH);
    if (flash) {
      flashes.removeItem(FLASH);
      try {
        const f = JSON.parse(flash);
        show(String(f.text), Boolean(f.ok));
      } catch (e) {
        /* a malformed flash is dropped */
      }
    }
    document.addEventListener("click", function (event) {
      const button = event.target.closest("button.act[data-api]");
      if (button) onActionClick(button);
    });
    const silence = document.getElementById("silence-form");
    if (silence) {
      silence.addEventListener("submit", function (event) {
        event.preventDefault();
        act("Silence created", "POST", silence.dataset.api, silenceBody(silence));
      });
    }
  }

  window.dlqConsole = Object.freeze({ call: call, act: act, show: show, who: function () { return store.getItem(WHO) || ""; } });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
