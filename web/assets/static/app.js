// loopr dashboard: follow /events (Server-Sent Events of HTML the server
// rendered and escaped) and swap it in, so the page stays live without a
// reload. The inbox is not replaced while you type in it.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var pendingInbox = null;

  function frag(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  }
  function busy(box) {
    if (box.contains(document.activeElement) && document.activeElement !== box) return true;
    var fields = box.querySelectorAll("textarea, input:not([type=hidden])");
    for (var i = 0; i < fields.length; i++) if (fields[i].value) return true;
    return false;
  }
  function setInbox(html) {
    var box = document.getElementById("inbox");
    if (!box) return;
    if (busy(box)) { pendingInbox = html; return; }
    pendingInbox = null;
    box.replaceChildren(frag(html));
  }
  document.addEventListener("focusout", function () {
    if (pendingInbox !== null) setTimeout(function () { if (pendingInbox !== null) setInbox(pendingInbox); }, 0);
  });

  var es = new EventSource("/events");
  es.onopen = function () { if (live) { live.textContent = "live"; live.className = "live on"; } };
  es.onerror = function () { if (live) { live.textContent = "reconnecting"; live.className = "live"; } };
  es.addEventListener("tree", function (e) {
    var t = document.getElementById("tree");
    if (t) t.replaceChildren(frag(e.data));
  });
  es.addEventListener("row", function (e) {
    var f = frag(e.data), el = f.firstElementChild;
    if (!el) return;
    var old = document.getElementById(el.id);
    if (!old) return;
    var moved = old.dataset.status !== el.dataset.status;
    if (moved) el.classList.add("flash");
    old.replaceWith(el);
    // A loop's own page: its actions follow its status, so show them anew
    // (not while you type in one of its boxes).
    if (moved && document.body.classList.contains("page-loop") && !busy(document.getElementById("main"))) location.reload();
  });
  es.addEventListener("counts", function (e) {
    var c = document.getElementById("counts");
    if (c) c.replaceChildren(frag(e.data));
  });
  es.addEventListener("inbox", function (e) { setInbox(e.data); });
})();
