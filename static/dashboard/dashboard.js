// Palimpsest operator dashboard: the few behaviours htmx does not cover. No build step.
(function () {
  "use strict";

  const TIMELINE_MAX_ROWS = 400;

  // Validation errors (422) and conflicts (409) carry the form to show again: swap them in.
  htmx.config.responseHandling = [
    { code: "204", swap: false },
    { code: "[23]..", swap: true },
    { code: "409|422", swap: true, error: false },
    { code: "[45]..", swap: false, error: true },
    { code: "...", swap: false },
  ];

  // A reconnecting socket resumes after the last event this page received (the server
  // replays what it missed), never from the seq the page was first rendered with.
  htmx.createWebSocket = function (url) {
    const marker = document.getElementById("last-seq");
    if (marker && marker.dataset.seq) {
      url = url.replace(/since_seq=\d+/, "since_seq=" + marker.dataset.seq);
    }
    return new WebSocket(url);
  };

  function liveDot(state) {
    const dot = document.getElementById("live-dot");
    if (!dot) return;
    dot.classList.toggle("live", state === "live");
    dot.classList.toggle("down", state === "down");
    dot.title = state === "live" ? "Live" : "Reconnecting…";
  }
  document.addEventListener("htmx:wsOpen", () => liveDot("live"));
  document.addEventListener("htmx:wsClose", () => liveDot("down"));

  // Keep the transcript pinned to its end while the operator is there.
  let pinned = true;
  function transcript() { return document.getElementById("transcript"); }
  function nearEnd(el) { return el.scrollHeight - el.scrollTop - el.clientHeight < 80; }
  document.addEventListener("htmx:wsBeforeMessage", () => {
    const el = transcript();
    pinned = el ? nearEnd(el) : false;
  });
  document.addEventListener("htmx:wsAfterMessage", () => {
    const el = transcript();
    if (el && pinned) el.scrollTop = el.scrollHeight;
    foldDeltas();
    const rows = document.getElementById("timeline-rows");
    while (rows && rows.children.length > TIMELINE_MAX_ROWS) rows.lastElementChild.remove();
  });

  // The timeline folds each run of streamed deltas into one row, as the server renders it
  // (context.html#timeline-deltas): live rows arrive one by one at the top and join the run.
  function deltaGroup() {
    const group = document.createElement("details");
    group.className = "tl-row tl-deltas fam-assistant";
    group.dataset.deltaGroup = "";
    const summary = document.createElement("summary");
    for (const cls of ["seq mono", "time mono", "type", "sum"]) {
      const span = document.createElement("span");
      span.className = cls;
      summary.append(span);
    }
    const count = document.createElement("span");
    count.dataset.deltaCount = "";
    summary.querySelector(".type").append(count, " deltas");
    summary.querySelector(".sum").dataset.deltaText = "";
    const inner = document.createElement("div");
    inner.className = "tl-group-rows";
    group.append(summary, inner);
    return group;
  }
  function groupRefresh(group) {
    const inner = Array.from(group.querySelector(".tl-group-rows").children);
    const newest = inner[0].querySelector("summary");
    group.querySelector("summary > .seq").textContent = newest.querySelector(".seq").textContent;
    group.querySelector("summary > .time").textContent = newest.querySelector(".time").textContent;
    group.querySelector("[data-delta-count]").textContent = String(inner.length);
    const text = inner.map((row) => row.querySelector(".sum").textContent).reverse().join(" ");
    group.querySelector("[data-delta-text]").textContent = text.length > 120 ? text.slice(0, 119) + "…" : text;
  }
  function foldDeltas() {
    const rows = document.getElementById("timeline-rows");
    if (!rows) return;
    const isDeltaRow = (el) => el && el.matches(".tl-row.is-delta, [data-delta-group]");
    let child = rows.firstElementChild;
    while (child) {
      if (!isDeltaRow(child) || !isDeltaRow(child.nextElementSibling)) { child = child.nextElementSibling; continue; }
      // A run of loose delta rows and groups: gather it into one group, newest first.
      const run = [];
      for (let el = child; isDeltaRow(el); el = el.nextElementSibling) run.push(el);
      const group = run.find((el) => el.matches("[data-delta-group]")) || deltaGroup();
      rows.insertBefore(group, run[0]);
      const inner = group.querySelector(".tl-group-rows");
      const ordered = run.flatMap((el) =>
        el.matches("[data-delta-group]") ? Array.from(el.querySelector(".tl-group-rows").children) : [el]);
      inner.append(...ordered);
      // The other groups are empty now (their rows moved): drop them.
      run.forEach((el) => { if (el !== group && el.matches("[data-delta-group]")) el.remove(); });
      groupRefresh(group);
      child = group.nextElementSibling;
    }
  }

  // Tabs of the session page: the chosen one is kept in the URL (?tab=), so it can be bookmarked.
  // Where the window is too narrow for the side panels (dashboard.css, NARROW), the panels are
  // tabs over the transcript, which is then a tab too ("transcript") and the one a page opens on.
  const NARROW = window.matchMedia("(max-width: 900px)");
  function showTab(name, remember) {
    const panels = document.querySelector(".panels");
    if (!panels) return;
    if (name === "transcript" && !NARROW.matches) name = panels.dataset.lastPanel || "context";
    if (name !== "transcript") panels.dataset.lastPanel = name;
    panels.dataset.tab = name;
    document.querySelector(".session-page").dataset.tab = name;
    panels.querySelectorAll("[data-tab-button]").forEach((b) => {
      b.setAttribute("aria-selected", b.dataset.tabButton === name ? "true" : "false");
    });
    panels.querySelectorAll(".panel[data-panel]").forEach((p) => {
      p.classList.toggle("shown", p.dataset.panel === name);
    });
    if (name === "inspector") {
      const inspector = document.querySelector("#inspector[data-follow][data-stale]");
      if (inspector) { delete inspector.dataset.stale; htmx.trigger(inspector, "refresh"); }
    }
    if (name === "context") {
      const turns = document.querySelector("#turn-usage[data-follow][data-stale]");
      if (turns) { delete turns.dataset.stale; htmx.trigger(turns, "refresh"); }
    }
    if (name === "transcript") {
      const el = transcript();
      if (el) el.scrollTop = el.scrollHeight;
    }
    if (remember === false) return;
    const url = new URL(window.location.href);
    url.searchParams.set("tab", name);
    window.history.replaceState(window.history.state, "", url);
  }
  NARROW.addEventListener("change", () => {
    const panels = document.querySelector(".panels");
    if (panels && panels.dataset.tab === "transcript") showTab("transcript", false);
  });

  document.addEventListener("click", (event) => {
    const tab = event.target.closest("[data-tab-button]");
    if (tab) { showTab(tab.dataset.tabButton); return; }

    if (event.target.closest("[data-shortcuts]")) { shortcuts(); return; }

    // A long tool input or result starts clipped; "show all" opens it (and closes it again).
    const more = event.target.closest("[data-show-all]");
    if (more) {
      const block = more.closest(".tool-block");
      const open = block.classList.toggle("open");
      more.setAttribute("aria-expanded", open ? "true" : "false");
      if (!more.dataset.label) more.dataset.label = more.textContent;
      more.textContent = open ? "show less" : more.dataset.label;
      return;
    }

    const close = event.target.closest("[data-close-editor]");
    if (close) {
      const slot = close.closest("[id$='-editor']");
      if (slot) slot.innerHTML = "";
      return;
    }

    const archive = event.target.closest("[data-open-archive]");
    if (archive) {
      event.preventDefault();
      showTab("archives");
      const page = document.querySelector(".session-page");
      const panel = document.getElementById("archive-panel");
      if (panel && page) {
        const base = window.location.pathname.replace(/\/$/, "") + "/archives/";
        htmx.ajax("GET", base + "?epoch=" + archive.dataset.openArchive, { target: panel, swap: "outerHTML" });
      }
    }
  });

  // Keyboard: Ctrl+Enter (or Cmd+Enter) sends the message; single keys (listed in base.html's
  // #shortcuts dialog) act only when the cursor is not in a text field.
  // The tab a digit opens: the page gives each tab its key (aria-keyshortcuts).
  function tabOfKey(key) {
    return document.querySelector(`[data-tab-button][aria-keyshortcuts="${key}"]`);
  }
  function typing(target) {
    return target.closest && (target.closest("input, textarea, select, [contenteditable]") !== null);
  }
  function shortcuts() {
    const dialog = document.getElementById("shortcuts");
    if (dialog && !dialog.open) dialog.showModal();
  }
  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      const form = event.target.closest("#message-form");
      if (form) { event.preventDefault(); form.requestSubmit(); }
      return;
    }
    if (event.key === "Escape" && typing(event.target)) {
      const create = event.target.closest(".new-session");
      if (create) { create.open = false; create.querySelector("summary").focus(); return; }
      if (event.target.closest("#message-form")) event.target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing || typing(event.target)) return;
    if (document.querySelector("dialog[open]")) return;
    const page = document.querySelector(".session-page");
    let handled = true;
    if (event.key === "?") shortcuts();
    else if (event.key === "g") window.location.href = document.querySelector(".brand").href;
    else if (event.key === "/" && page) {
      if (NARROW.matches) showTab("transcript");
      const box = document.querySelector("#message-form textarea");
      if (box) box.focus();
    } else if (event.key === "/" ) {
      const search = document.querySelector(".filters input[type=search]");
      if (search) search.focus(); else handled = false;
    } else if (event.key === "n" && !page) {
      const create = document.querySelector(".new-session");
      if (create) { create.open = true; const title = create.querySelector("#id_title"); if (title) title.focus(); }
      else handled = false;
    } else if (event.key === "x" && page) {
      const running = document.querySelector("#session-status.status-running, #session-status.status-compacting");
      const cancel = document.querySelector("[data-cancel-turn]");
      if (running && cancel) cancel.click(); else handled = false;
    } else if (page && /^[0-9]$/.test(event.key) && tabOfKey(event.key)) {
      showTab(tabOfKey(event.key).dataset.tabButton);
    } else handled = false;
    if (handled) event.preventDefault();
  });

  // The observation viewer shows the fields of the chosen mode only.
  function syncObservationForm(root) {
    (root || document).querySelectorAll(".obs-form").forEach((form) => {
      const mode = form.querySelector("select[name=mode]").value;
      form.querySelectorAll("label[data-modes]").forEach((label) => {
        label.hidden = !label.dataset.modes.split(" ").includes(mode);
      });
    });
  }
  document.addEventListener("change", (event) => {
    if (event.target.matches(".obs-form select[name=mode]")) syncObservationForm();
  });

  // The session list: a session that is not on the page yet (new, or from a later page) comes in
  // at the top of the first page; a row that changed moves to the top (latest activity first).
  function firstPage() {
    return !new URL(window.location.href).searchParams.get("page") ||
      new URL(window.location.href).searchParams.get("page") === "1";
  }
  document.addEventListener("htmx:oobErrorNoTarget", (event) => {
    const row = event.detail.content;
    const rows = document.getElementById("session-rows");
    if (!rows || !row || !row.matches || !row.matches("tr.session-row") || row.hasAttribute("data-remove")) return;
    if (!firstPage()) return;
    const empty = rows.querySelector(".empty-row");
    if (empty) empty.remove();
    rows.prepend(row);
    htmx.process(row);
  });
  // A model call was recorded: a prompt inspector that follows the latest request reloads (now if
  // it is shown, else when its tab is opened).
  function refreshInspector() {
    const inspector = document.querySelector("#inspector[data-follow]");
    if (!inspector) return;
    if (inspector.offsetParent !== null) { delete inspector.dataset.stale; htmx.trigger(inspector, "refresh"); }
    else inspector.dataset.stale = "1";
  }

  // The usage panel's table of turns follows the session while it shows its first page only
  // (now if it is shown, else when the context tab is opened).
  function refreshTurnUsage() {
    const turns = document.querySelector("#turn-usage[data-follow]");
    if (!turns) return;
    if (turns.offsetParent !== null) { delete turns.dataset.stale; htmx.trigger(turns, "refresh"); }
    else turns.dataset.stale = "1";
  }
  document.addEventListener("htmx:beforeRequest", (event) => {
    const elt = event.detail.elt;
    if (!elt || !elt.matches || !elt.matches("[data-older-turns]")) return;
    const turns = elt.closest("#turn-usage");
    if (turns) { turns.removeAttribute("data-follow"); turns.removeAttribute("hx-trigger"); }
  });

  document.addEventListener("htmx:oobAfterSwap", (event) => {
    const target = event.detail.target;
    if (target && target.id === "inspector-signal") { refreshInspector(); refreshTurnUsage(); return; }
    const rows = document.getElementById("session-rows");
    if (rows && target && target.matches && target.matches("tr.session-row") && firstPage()) {
      const row = document.getElementById(target.id);
      if (row && row.parentElement === rows && rows.firstElementChild !== row) rows.prepend(row);
    }
  });

  document.addEventListener("DOMContentLoaded", () => {
    const panels = document.querySelector(".panels");
    // A narrow window opens on the transcript unless the address names a tab.
    const named = new URL(window.location.href).searchParams.get("tab");
    if (panels) showTab(NARROW.matches && !named ? "transcript" : panels.dataset.tab || "context", false);
    const el = transcript();
    if (el) el.scrollTop = el.scrollHeight;
    syncObservationForm();
  });
  document.addEventListener("htmx:afterSettle", (event) => syncObservationForm(event.target));

  // A form's text over its box's limit is not sent: the form says so as the server would
  // (Django's max_length message), and the text stays to be shortened. A body over the server's
  // limit that gets through anyway comes back as a `palimpsest:too-large` event, shown the same way.
  function formError(form, message) {
    let line = form.querySelector(".error-text[data-client-error]");
    if (!line) {
      line = document.createElement("p");
      line.className = "error-text";
      line.setAttribute("role", "alert");
      line.dataset.clientError = "";
      const csrf = form.querySelector("input[name=csrfmiddlewaretoken]");
      if (csrf) csrf.after(line); else form.prepend(line);
    }
    line.textContent = message;
  }
  document.addEventListener("htmx:confirm", (event) => {
    const form = event.target;
    if (!form.matches || !form.matches("form")) return;
    for (const box of form.querySelectorAll("textarea[maxlength], input[maxlength]")) {
      const limit = parseInt(box.getAttribute("maxlength"), 10);
      const length = Array.from(box.value).length;
      if (limit > 0 && length > limit) {
        event.preventDefault();
        formError(form, `Ensure this value has at most ${limit} characters (it has ${length}).`);
        box.focus();
        return;
      }
    }
  });
  document.addEventListener("palimpsest:too-large", (event) => {
    const elt = event.target;
    const form = elt.closest ? elt.closest("form") || elt.querySelector("form") : null;
    if (form) formError(form, event.detail.value);
    else window.alert(event.detail.value);
  });
  document.addEventListener("htmx:afterSwap", (event) => {
    // After sending, the message box is ready for the next message.
    if (event.target.id === "message-form") {
      const box = event.target.querySelector("textarea");
      if (box && !event.target.querySelector(".error-text")) box.focus();
    }
  });
})();
