// dlq-bridge console, silences page: matcher rows, Preview, create or edit, +1 hour, comments.
// Calls the JSON API through console.js (window.dlqConsole: its token, CSRF and X-Console-User).
// Everything the server sent is written with textContent, never as HTML.
"use strict";

(function () {
  const HOUR = 3600;

  function rows(form) {
    return Array.from(form.querySelectorAll("#matchers .matcher-row"));
  }

  function matchersOf(form) {
    return rows(form)
      .map(function (row) {
        return {
          name: row.querySelector('[name="m-name"]').value,
          op: row.querySelector('[name="m-op"]').value,
          value: row.querySelector('[name="m-value"]').value,
        };
      })
      .filter(function (m) {
        return m.value !== "";
      });
  }

  function addRow(form, matcher) {
    const template = document.getElementById("matcher-template");
    const row = template.content.firstElementChild.cloneNode(true);
    const used = rows(form).map(function (r) {
      return r.querySelector('[name="m-name"]').value;
    });
    const next = ["queue", "severity", "job_name", "cause", "sink", "source"].find(function (n) {
      return used.indexOf(n) < 0;
    });
    row.querySelector('[name="m-name"]').value = matcher ? matcher.name : next || "queue";
    row.querySelector('[name="m-op"]').value = matcher ? matcher.op : "=";
    row.querySelector('[name="m-value"]').value = matcher ? matcher.value : "";
    form.querySelector("#matcher-add").before(row);
    return row;
  }

  function cell(tr, text) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function showPreview(data) {
    const box = document.getElementById("preview");
    const body = box.querySelector("#preview-entries tbody");
    body.replaceChildren();
    for (const e of data.entries) {
      const tr = document.createElement("tr");
      const queue = cell(tr, "");
      const link = document.createElement("a");
      link.href = "/console/entry?source=" + encodeURIComponent(e.source) + "&id=" + encodeURIComponent(e.id);
      link.textContent = e.queue;
      queue.appendChild(link);
      cell(tr, e.job_name || "—");
      cell(tr, e.severity || "—");
      cell(tr, e.sinks.join(", "));
      cell(tr, e.archived_at ? new Date(e.archived_at * 1000).toLocaleString() : "—");
      body.appendChild(tr);
    }
    const more = data.entries_matched > data.entries.length ? " (the first " + data.entries.length + " listed)" : "";
    const scope = data.complete ? "all " + data.scanned + " archived entries" : "the newest " + data.scanned + " archived entries";
    document.getElementById("preview-summary").textContent =
      data.entries_matched + " of " + scope + more + ", and " + data.groups.length + " open group(s).";
    const groups = document.getElementById("preview-groups");
    groups.replaceChildren();
    for (const g of data.groups) {
      const li = document.createElement("li");
      const link = document.createElement("a");
      link.href = "/console/group?sink=" + encodeURIComponent(g.sink) + "&key=" + encodeURIComponent(g.group_key);
      link.textContent = g.title + " (" + g.count + " jobs, " + g.sink + ")";
      li.appendChild(link);
      groups.appendChild(li);
    }
    box.hidden = false;
  }

  async function preview(form) {
    const params = new URLSearchParams();
    for (const m of matchersOf(form)) params.append("matcher", m.name + m.op + JSON.stringify(m.value));
    if (form.elements.webhooks.checked) params.append("webhooks", "true");
    const r = await window.dlqConsole.call("GET", form.dataset.preview + "?" + params.toString());
    if (!r.ok) {
      window.dlqConsole.show("Preview refused (" + r.status + "): " + ((r.data && r.data.detail) || "no detail"), false);
      return;
    }
    showPreview(r.data);
  }

  function submit(form) {
    const body = {
      label_matchers: matchersOf(form),
      duration_s: Number(form.elements.duration_s.value),
      reason: form.elements.reason.value.trim(),
      webhooks: form.elements.webhooks.checked,
    };
    const author = form.elements.author.value.trim() || window.dlqConsole.who();
    if (author) body.author = author;
    if (form.dataset.edit) {
      window.dlqConsole.act("Silence saved", "PATCH", form.dataset.api + "/" + encodeURIComponent(form.dataset.edit), body);
    } else {
      window.dlqConsole.act("Silence created", "POST", form.dataset.api, body);
    }
  }

  function edit(form, tr) {
    let matchers = [];
    try {
      matchers = JSON.parse(tr.dataset.matchers);
    } catch (e) {
      return;
    }
    rows(form).forEach(function (r) {
      r.remove();
    });
    for (const m of matchers) addRow(form, m);
    form.elements.reason.value = tr.querySelector(".comment").textContent;
    form.dataset.edit = tr.dataset.silence;
    document.getElementById("silence-form-title").textContent = "Edit silence " + tr.dataset.silence;
    document.getElementById("silence-submit").textContent = "Save (new matchers on a started silence: a new id)";
    document.getElementById("silence-cancel-edit").hidden = false;
    form.scrollIntoView();
  }

  function setup() {
    if (!window.dlqConsole) return;
    const form = document.getElementById("silence-new");
    if (form) {
      form.querySelector("#matcher-add").addEventListener("click", function () {
        addRow(form).querySelector('[name="m-value"]').focus();
      });
      form.addEventListener("click", function (event) {
        const remove = event.target.closest(".m-remove");
        if (remove) remove.closest(".matcher-row").remove();
      });
      document.getElementById("silence-preview").addEventListener("click", function () {
        preview(form);
      });
      document.getElementById("silence-cancel-edit").addEventListener("click", function () {
        window.location.reload();
      });
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        submit(form);
      });
    }
    document.addEventListener("click", function (event) {
      const extend = event.target.closest("button.silence-extend");
      if (extend) {
        const ends = Number(extend.closest("tr").dataset.ends) + HOUR;
        window.dlqConsole.act("Silence extended", "PATCH", extend.dataset.api, { ends_at: ends });
      }
      const editButton = event.target.closest("button.silence-edit");
      if (editButton && form) edit(form, editButton.closest("tr"));
    });
    document.querySelectorAll("form.silence-comment").forEach(function (f) {
      f.addEventListener("submit", function (event) {
        event.preventDefault();
        window.dlqConsole.act("Comment added", "POST", f.dataset.api, { text: f.elements.text.value.trim() });
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
