// dlq-bridge console: the only script of the pages (served from /console/static/, no inline script).
// Actions call the JSON API with `Authorization: Bearer <token>`. The token is pasted once and kept in
// this tab's sessionStorage: never a cookie, never a URL. Signed in (a session cookie) or behind a trusted
// proxy, the page carries a CSRF token in <meta name="dlq-csrf">, sent as X-CSRF-Token with the cookie.
// Everything the server sent is written with textContent, never as HTML.
"use strict";

(function () {
  const TOKEN = "dlqBridgeConsoleToken";
  const WHO = "dlqBridgeConsoleWho";
  const FLASH = "dlqBridgeConsoleFlash";
  const store = window.sessionStorage;
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
        store.setItem(FLASH, JSON.stringify({ text: label + ": " + (detailOf(r.data) || "done"), ok: true }));
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
    act(button.dataset.label || button.textContent, button.dataset.method || "POST", button.dataset.api, {}).finally(function () {
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

  // Bulk actions on the search page's snapshot: ask for the count, confirm, then one batch per call
  // with the progress shown, until done or cancelled (bridge/console/bulk.py).
  function setupBulk() {
    const box = document.getElementById("bulk");
    if (!box) return;
    let filter = null;
    try {
      filter = JSON.parse(box.dataset.filter);
    } catch (e) {
      return;
    }
    const confirmRow = document.getElementById("bulk-confirm");
    const running = document.getElementById("bulk-running");
    const progress = document.getElementById("bulk-progress");
    const state = document.getElementById("bulk-state");
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
    for (const button of box.querySelectorAll("button.bulk-act")) {
      button.addEventListener("click", async function () {
        const r = await call("POST", "/api/v1/bulk", { action: button.dataset.action, filter: filter });
        if (r.status !== 201) return refused(r);
        current = r.data;
        document.getElementById("bulk-count").textContent =
          current.total + " " + nouns[current.action] + " (as of this page). Go on?";
        confirmRow.hidden = false;
      });
    }
    document.getElementById("bulk-go").addEventListener("click", async function () {
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
    document.getElementById("bulk-cancel").addEventListener("click", cancel);
    document.getElementById("bulk-stop").addEventListener("click", cancel);
  }

  function setupToken() {
    const form = document.getElementById("token-form");
    if (!form) return;
    const input = document.getElementById("token-input");
    const who = document.getElementById("who-input");
    const state = document.getElementById("token-state");
    const refresh = function () {
      state.textContent = store.getItem(TOKEN) ? "token set (this tab)" : "no token";
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
    const flash = store.getItem(FLASH);
    if (flash) {
      store.removeItem(FLASH);
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
