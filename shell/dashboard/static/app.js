// The dashboard's only script: confirmations for operator actions, and
// live refresh of the page's content (polling, and at once when the store
// announces an append through server-sent events). Everything works
// without it, except the refresh.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var f = e.target;
    var msg = f.getAttribute && f.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });

  var body = document.body;
  var every = parseInt(body.getAttribute("data-refresh") || "0", 10);
  var busy = false, pending = false;

  function interacting() {
    var a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA")) { return true; }
    return document.querySelector("details[open]") !== null || (window.getSelection && String(window.getSelection()) !== "");
  }

  function refresh() {
    if (busy || interacting() || document.hidden) { pending = true; return; }
    busy = true;
    fetch(window.location.href, { headers: { "X-Requested-With": "refresh" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("content"), cur = document.getElementById("content");
        if (fresh && cur && !interacting()) {
          var flash = cur.querySelector(".flash");
          cur.innerHTML = fresh.innerHTML;
          if (flash && !cur.querySelector(".flash")) { cur.insertBefore(flash, cur.firstChild); }
          body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }

  if (every > 0) { window.setInterval(refresh, every); }
  document.addEventListener("visibilitychange", function () { if (!document.hidden && pending) { pending = false; refresh(); } });
  var live = body.getAttribute("data-live");
  if (live && window.EventSource) {
    var timer = null;
    var es = new EventSource(live), opened = false;
    es.onopen = function () {
      // A reconnection may have missed appends: refresh once.
      if (opened) { refresh(); }
      opened = true;
      body.setAttribute("data-live-state", "open");
    };
    es.onerror = function () { body.setAttribute("data-live-state", "reconnecting"); };
    es.addEventListener("append", function () {
      if (timer) { return; }
      timer = window.setTimeout(function () { timer = null; refresh(); }, 300);
    });
  }
})();
